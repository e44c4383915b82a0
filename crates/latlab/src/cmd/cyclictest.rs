//! `latlab cyclictest [cyclictest flags]`: cyclictest 2.x's command line on latlab's engine.
//! The flags parsed as cyclictest's getopt_long does, into `latlab run`'s arguments
//! (`crate::cli::cyclictest`); the run done as `run` does it, leaving a normal run directory;
//! what cyclictest prints (`-v` samples, `T:` lines, `-h`/`-H` histograms, `--spike` lists,
//! the `-b` break report, the `--json` file) rendered by `latlab_report::cyclictest::front`
//! from the run's hooks and its outcome.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context};
use latlab_engine::run::{Hooks, Outcome};
use latlab_report::cyclictest::front::{self, End, Live, Now, Sample};
use latlab_sys::measure::SpikeEvent;

use crate::cli::cyclictest::{long_help, parse, CyclictestArgs, Opts, OptsExt};
use crate::cmd::run;

pub fn cyclictest(a: CyclictestArgs) -> anyhow::Result<ExitCode> {
    if a.args.iter().any(|s| s == "--help") {
        outln!("{}", long_help())?;
        return Ok(ExitCode::SUCCESS);
    }
    let o = parse(&a.args, &latlab_sys::rt::usable_cpus()?)?;
    if let Some(msg) = &o.notice {
        eprintln!("{msg}");
    }
    let run_args = o.run_args()?;
    // Files the run will write at its end: a directory that is not there is said now, not
    // after the measurement.
    for (flag, path) in [("--json", &o.json), ("--histfile", &o.histfile)] {
        if let Some(p) = path {
            let dir = match Path::new(p).parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            if !dir.is_dir() {
                bail!(
                    "{flag}={p}: the directory {} does not exist; create it or give another path",
                    dir.display()
                );
            }
        }
    }
    if let Some(set) = &o.main_affinity {
        latlab_sys::rt::set_affinity(set).context("--mainaffinity: cannot move the main thread")?;
    }
    let started = jiff::Zoned::now();
    let mut hooks = CtHooks {
        live: Live::new(&o.out),
        err: None,
    };
    let outcome = run::run_with(run_args, None, &mut hooks)
        .map_err(|e| anyhow::anyhow!("{}", o.in_cyclictest_terms(&format!("{e:#}"))))?;
    let ended = jiff::Zoned::now();
    if let Some(e) = hooks.err.take() {
        return Err(e);
    }
    hooks.live.set_loadavg(&latlab_sys::rt::loadavg());
    finish(&o, &hooks.live, &outcome, [&started, &ended])?;
    if !o.out.quiet {
        for w in &outcome.model.record.warnings {
            warnln!("{w}");
        }
    }
    Ok(outcome.code)
}

/// Everything cyclictest prints at the end, its `--histfile` and its `--json` file.
fn finish(o: &Opts, live: &Live, out: &Outcome, times: [&jiff::Zoned; 2]) -> anyhow::Result<()> {
    let end = End {
        model: &out.model,
        tids: &out.tids,
        last_ns: &out.last_ns,
        stopped_by: out.stopped_by.map(|f| (f.cpu, f.latency_ns)),
    };
    if let Some(path) = &o.histfile {
        write_file(
            "--histfile",
            path,
            front::histogram(live, &out.model).as_bytes(),
        )?;
    }
    crate::stdout::write(front::end(live, &end, o.histfile.is_some()).as_bytes())?;
    if let Some(path) = &o.json {
        let [started, ended] = times.map(|z| z.strftime("%a, %d %b %Y %H:%M:%S %z").to_string());
        let sys = front::System {
            uname: latlab_sys::rt::uname(),
            realtime: latlab_sys::rt::kernel_is_realtime(),
            nodes: o
                .out
                .cpus
                .iter()
                .map(|&c| latlab_sys::rt::numa_node(c))
                .collect(),
            start_time: started,
            end_time: ended,
            version: format!("latlab {}", env!("CARGO_PKG_VERSION")),
        };
        write_file("--json", path, front::json(&o.out, &end, &sys).as_bytes())?;
    }
    Ok(())
}

/// A file a cyclictest flag names, written as every `-o` is; errors name that flag.
fn write_file(flag: &str, path: &str, bytes: &[u8]) -> anyhow::Result<()> {
    latlab_engine::rundir::write_atomic(Path::new(path), bytes).map_err(|e| {
        anyhow::anyhow!("{flag}={path}: cannot write: {e}; the run directory holds the results")
    })
}

/// The run's hooks: what cyclictest prints while it runs (`front::Live`), on stdout.
struct CtHooks {
    live: Live,
    /// The first write to stdout that failed.
    err: Option<anyhow::Error>,
}

impl CtHooks {
    fn write(&mut self, s: &str) {
        if self.err.is_none() && !s.is_empty() {
            if let Err(e) = crate::stdout::write(s.as_bytes()) {
                self.err = Some(e);
            }
        }
    }
}

impl Hooks for CtHooks {
    fn event_threshold_ns(&self) -> u64 {
        self.live.event_threshold_ns()
    }
    fn on_start(&mut self, t0_ns: u64, dma: Option<i32>) {
        let online = latlab_sys::rt::online_cpus().map_or(0, |c| c.len());
        let s = self.live.start(t0_ns, dma, online);
        self.write(&s);
    }
    fn on_events(&mut self, events: &[SpikeEvent]) {
        let s = self.live.samples(events.iter().map(|e| Sample {
            cpu: e.cpu,
            intended_ns: e.intended_ns,
            actual_ns: e.actual_ns,
            latency_ns: e.latency_ns,
        }));
        self.write(&s);
    }
    fn summary(&self) -> bool {
        false
    }
    fn ticks(&self) -> bool {
        self.live.redraws()
    }
    fn on_tick(&mut self, threads: &[std::sync::Arc<latlab_sys::live::ThreadShared>]) {
        use std::sync::atomic::Ordering::Relaxed;
        let now: Vec<Now> = threads
            .iter()
            .map(|t| {
                let tot = t.hist.totals();
                Now {
                    tid: t.tid.load(Relaxed),
                    cycles: tot.count,
                    min_ns: (tot.count > 0).then_some(tot.min),
                    act_ns: t.last_ns.load(Relaxed),
                    avg_ns: if tot.count > 0 {
                        tot.sum as f64 / tot.count as f64
                    } else {
                        0.0
                    },
                    max_ns: tot.max,
                }
            })
            .collect();
        self.live.set_loadavg(&latlab_sys::rt::loadavg());
        let s = self.live.redraw(&now);
        self.write(&s);
    }
}
