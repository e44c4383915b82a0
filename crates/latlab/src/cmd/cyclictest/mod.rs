//! `latlab cyclictest [cyclictest flags]`: cyclictest 2.x's command line on latlab's engine.
//!
//! The flags are parsed as cyclictest's getopt_long does ([`parse`]), turned into the
//! arguments of `latlab run` ([`Opts::run_argv`]) and parsed by the same CLI definition, so the
//! run goes through `run`'s plan and lifecycle unchanged and leaves a normal run directory.
//! What cyclictest prints (`-q` T: lines, `-v` samples, `-h`/`-H` histograms, `--spike`
//! lists, the `-b` break report, the `--json` file) is printed from the run's hooks and its
//! model ([`output`]), in cyclictest's layout.

use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Parser;

use crate::cli::{Cli, Command};
use crate::cmd::run;
use latlab_engine::run::Hooks;
use latlab_sys::measure::SpikeEvent;

mod output;

use crate::cli::cyclictest::{parse, CyclictestArgs, Opts};

pub fn cyclictest(a: CyclictestArgs) -> anyhow::Result<ExitCode> {
    if a.args.iter().any(|s| s == "--help") {
        let mut cmd = <Cli as clap::CommandFactory>::command();
        cmd.build();
        let sub = cmd
            .find_subcommand_mut("cyclictest")
            .expect("the cyclictest subcommand");
        outln!("{}", sub.render_long_help())?;
        return Ok(ExitCode::SUCCESS);
    }
    let online = latlab_sys::rt::online_cpus()?;
    let allowed = latlab_sys::rt::allowed_cpus().unwrap_or_else(|_| online.clone());
    let usable: Vec<u32> = online
        .iter()
        .copied()
        .filter(|c| allowed.contains(c))
        .collect();
    let o = parse(&a.args, &usable)?;
    if let Some(msg) = &o.notice {
        eprintln!("{msg}");
    }
    let argv = o.run_argv();
    let mut run_args = match Cli::try_parse_from(&argv) {
        Ok(Cli {
            command: Command::Run(r),
        }) => r,
        Ok(_) => unreachable!("the argv names `run`"),
        Err(e) => {
            let why = e.to_string();
            let why = why
                .lines()
                .next()
                .unwrap_or("")
                .trim_start_matches("error: ");
            let said = o.in_cyclictest_terms(why);
            if said != why {
                bail!("{said}");
            }
            bail!(
                "these cyclictest flags give `{}`, which latlab refuses: {why}",
                argv[1..].join(" "),
            )
        }
    };
    // Files the run will write at its end: a directory that is not there is said now, not
    // after the measurement.
    for (flag, path) in [("--json", &o.json), ("--histfile", &o.histfile)] {
        if let Some(p) = path {
            let dir = match std::path::Path::new(p).parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => std::path::Path::new("."),
            };
            if !dir.is_dir() {
                bail!(
                    "{flag}={p}: the directory {} does not exist; create it or give another path",
                    dir.display()
                );
            }
        }
    }
    // cyclictest's command line has no --force: another latlab measuring the same CPUs is a
    // warning here, not a refusal.
    run_args.force = true;
    if let Some(set) = &o.main_affinity {
        set_main_affinity(set)?;
    }
    let started = jiff::Zoned::now();
    let mut hooks = output::CtHooks::new(&o);
    let outcome = run::run_with(run_args, None, &mut hooks)
        .map_err(|e| anyhow::anyhow!("{}", o.in_cyclictest_terms(&format!("{e:#}"))))?;
    let ended = jiff::Zoned::now();
    if let Some(e) = hooks.err.take() {
        return Err(e);
    }
    output::finish(&o, &hooks, &outcome, &started, &ended)?;
    if !o.quiet {
        for w in &outcome.model.record.warnings {
            warnln!("{w}");
        }
    }
    Ok(outcome.code)
}

/// `--mainaffinity`: this (the collector's) thread on those CPUs; the measuring threads pin
/// themselves.
fn set_main_affinity(cpus: &[u32]) -> anyhow::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET is bounded by the check below.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            if c as usize >= libc::CPU_SETSIZE as usize {
                bail!("--mainaffinity: CPU {c} is beyond what this system can address");
            }
            libc::CPU_SET(c as usize, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error())
                .context("--mainaffinity: cannot move the main thread");
        }
    }
    Ok(())
}

impl Hooks for output::CtHooks {
    fn event_threshold_ns(&self) -> u64 {
        self.event_threshold_ns
    }
    fn dma_latency_us(&self) -> i32 {
        self.dma_us
    }
    fn on_start(&mut self, t0_ns: u64, dma: Option<i32>) {
        self.start(t0_ns, dma);
    }
    fn on_events(&mut self, events: &[SpikeEvent]) {
        self.events(events);
    }
    fn summary(&self) -> bool {
        false
    }
}
