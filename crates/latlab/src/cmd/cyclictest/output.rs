//! What cyclictest prints, in its layout (rt-tests 2.x's format strings): the `-v` sample
//! lines as they come, then at the end the `T:` lines, the `-h`/`-H` histogram dump, the
//! `--spike` list, the `-b` break report and the `--json` file.

use std::fmt::Write as _;
use std::path::Path;

use latlab_core::model::{CpuModel, RunModel};
use latlab_sys::measure::SpikeEvent;

use super::Opts;
use latlab_engine::run::Outcome;

/// cyclictest's minimum before any sample (`stats->min = 1000000`).
const NO_MIN: u64 = 1_000_000;

/// The run's hooks: what cyclictest prints while it runs, and what it needs at the end.
pub struct CtHooks {
    pub event_threshold_ns: u64,
    pub dma_us: i32,
    cpus: Vec<u32>,
    periods_ns: Vec<u64>,
    t0_ns: u64,
    verbose: bool,
    nsecs: bool,
    spike_ns: Option<u64>,
    hist_ns: Option<u64>,
    thread_intervals: Vec<u64>,
    /// `--spike`: (thread, latency, CLOCK_MONOTONIC µs).
    pub spikes: Vec<(usize, u64, u64)>,
    /// `-h`: each thread's first overflow cycles (at most US of them, as cyclictest).
    pub outliers: Vec<Vec<u64>>,
    /// The first write to stdout that failed.
    pub err: Option<anyhow::Error>,
}

impl CtHooks {
    pub fn new(o: &Opts) -> CtHooks {
        let n = o.cpus.len();
        let hist_ns = o.histogram_us.map(|h| h * 1000);
        let spike_ns = o.spike_us.map(|s| s * 1000);
        // Every sample for -v; overflows for -h; spikes above --spike.
        let event_threshold_ns = if o.verbose {
            0
        } else {
            hist_ns
                .unwrap_or(u64::MAX)
                .min(spike_ns.map_or(u64::MAX, |s| s + 1))
        };
        CtHooks {
            event_threshold_ns,
            dma_us: o.latency_us,
            cpus: o.cpus.clone(),
            periods_ns: (0..n).map(|i| o.thread_interval_us(i) * 1000).collect(),
            t0_ns: 0,
            verbose: o.verbose,
            nsecs: o.nsecs,
            spike_ns,
            hist_ns,
            thread_intervals: (0..n).map(|i| o.thread_interval_us(i)).collect(),
            spikes: Vec::new(),
            outliers: vec![Vec::new(); n],
            err: None,
        }
    }

    fn write(&mut self, s: &str) {
        if self.err.is_none() && !s.is_empty() {
            if let Err(e) = crate::stdout::write(s.as_bytes()) {
                self.err = Some(e);
            }
        }
    }

    pub fn start(&mut self, t0_ns: u64, dma: Option<i32>) {
        self.t0_ns = t0_ns;
        let mut s = String::new();
        if self.verbose {
            let online = latlab_sys::rt::online_cpus().map_or(0, |c| c.len());
            let _ = writeln!(s, "Max CPUs = {online}\nOnline CPUs = {online}");
        }
        if let Some(us) = dma {
            let _ = writeln!(s, "# /dev/cpu_dma_latency set to {us}us");
        }
        if self.verbose {
            // cyclictest prints the next thread's interval here (its bug, kept).
            for (i, iv) in self.thread_intervals.iter().enumerate() {
                let next = iv
                    + self
                        .thread_intervals
                        .get(1)
                        .map_or(0, |t1| t1 - self.thread_intervals[0]);
                let _ = writeln!(s, "Thread {i} Interval: {next}");
            }
        }
        self.write(&s);
    }

    /// The value as cyclictest prints it: µs, or ns with `-N`.
    fn val(&self, ns: u64) -> u64 {
        if self.nsecs {
            ns
        } else {
            ns / 1000
        }
    }

    pub fn events(&mut self, events: &[SpikeEvent]) {
        let mut s = String::new();
        for e in events {
            let Some(i) = self.cpus.iter().position(|&c| c == e.cpu) else {
                continue;
            };
            // The schedule is absolute: intended = first + k·period, first < one period
            // after the common start.
            let cycle = e.intended_ns.saturating_sub(self.t0_ns) / self.periods_ns[i].max(1);
            if self.verbose {
                let _ = writeln!(s, "{i:8}:{cycle:8}:{:8}", self.val(e.latency_ns));
            }
            if self.spike_ns.is_some_and(|t| e.latency_ns > t) {
                self.spikes.push((i, e.latency_ns, e.actual_ns / 1000));
            }
            if let Some(h) = self.hist_ns {
                if e.latency_ns >= h && (self.outliers[i].len() as u64) < h / 1000 {
                    self.outliers[i].push(cycle);
                }
            }
        }
        self.write(&s);
    }
}

fn cpu_model(m: &RunModel, cpu: u32) -> Option<&CpuModel> {
    m.cpus.iter().find(|c| c.cpu == cpu)
}

/// (cycles, min, act, avg, max) of a thread in ns, cyclictest's way.
fn thread_stats(c: Option<&CpuModel>, last_ns: u64) -> (u64, Option<u64>, u64, f64, u64) {
    match c {
        Some(c) if c.hist.count() > 0 => (
            c.hist.count(),
            c.hist.min(),
            last_ns,
            c.hist.mean().unwrap_or(0.0),
            c.hist.max().unwrap_or(0),
        ),
        _ => (0, None, 0, 0.0, 0),
    }
}

/// Everything cyclictest prints at the end, and its `--json` file.
pub fn finish(
    o: &Opts,
    h: &CtHooks,
    out: &Outcome,
    started: &jiff::Zoned,
    ended: &jiff::Zoned,
) -> anyhow::Result<()> {
    let m = &out.model;
    let v = |ns: u64| if o.nsecs { ns } else { ns / 1000 };
    let mut s = String::new();
    // -q with -h prints only the histogram (its T: lines are the live display's).
    if o.histogram_us.is_none() || !o.quiet {
        for (i, &cpu) in o.cpus.iter().enumerate() {
            let (cycles, min, act, avg, max) =
                thread_stats(cpu_model(m, cpu), out.last_ns.get(i).copied().unwrap_or(0));
            let _ = writeln!(
                s,
                "T:{i:2} ({:5}) P:{:2} I:{} C:{cycles:7} Min:{:7} Act:{:5} Avg:{:5} Max:{:8}",
                out.tids.get(i).copied().unwrap_or(0),
                o.thread_priority(i),
                o.thread_interval_us(i),
                min.map_or(NO_MIN, v),
                v(act),
                (if o.nsecs { avg } else { avg / 1000.0 }) as u64,
                v(max),
            );
        }
    }
    if let Some(us) = o.histogram_us {
        let hist = histogram(o, h, m, us);
        match &o.histfile {
            Some(path) => write_file("--histfile", path, hist.as_bytes())?,
            None => s.push_str(&hist),
        }
    }
    if let Some(f) = out.stopped_by {
        let tids: Vec<String> = out.tids.iter().map(|t| t.to_string()).collect();
        let i = o.cpus.iter().position(|&c| c == f.cpu).unwrap_or(0);
        let _ = writeln!(s, "# Thread Ids: {}", tids.join(" "));
        let _ = writeln!(
            s,
            "# Break thread: {}",
            out.tids.get(i).copied().unwrap_or(0)
        );
        let _ = writeln!(s, "# Break value: {}", v(f.latency_ns));
    }
    if o.spike_us.is_some() {
        s.push('\n');
        for &(i, lat, ts) in &h.spikes {
            let _ = writeln!(s, "T:{i:2} Spike:{:8}: TS:{ts:12}", v(lat));
        }
        let _ = writeln!(s, "spikes = {}\n", h.spikes.len());
    }
    crate::stdout::write(s.as_bytes())?;
    if let Some(path) = &o.json {
        let j = json(o, m, out, started, ended);
        write_file("--json", path, j.as_bytes())?;
    }
    Ok(())
}

/// A file a cyclictest flag names, written as every `-o` is; errors name that flag.
fn write_file(flag: &str, path: &str, bytes: &[u8]) -> anyhow::Result<()> {
    latlab_engine::rundir::write_atomic(Path::new(path), bytes).map_err(|e| {
        anyhow::anyhow!("{flag}={path}: cannot write: {e}; the run directory holds the results")
    })
}

/// The `-h`/`-H` dump (cyclictest's `print_hist`).
fn histogram(o: &Opts, h: &CtHooks, m: &RunModel, us: u64) -> String {
    let mut s = String::from("# Histogram\n");
    let all = o.histofall && o.cpus.len() > 1;
    let models: Vec<Option<&CpuModel>> = o.cpus.iter().map(|&c| cpu_model(m, c)).collect();
    let bucket = |c: Option<&CpuModel>, i: usize| -> u64 {
        c.and_then(|c| c.hist.counts().get(i).copied()).unwrap_or(0)
    };
    let mut totals = vec![0u64; models.len()];
    let mut alllog = 0u64;
    for i in 0..us as usize {
        let _ = write!(s, "{i:06} ");
        let mut row = 0;
        for (j, c) in models.iter().enumerate() {
            let n = bucket(*c, i);
            let _ = write!(s, "{n:06}");
            if j + 1 < models.len() {
                s.push('\t');
            }
            totals[j] += n;
            row += n;
        }
        if all {
            let _ = write!(s, "\t{row:06}");
            alllog += row;
        }
        s.push('\n');
    }
    s.push_str("# Total:");
    for t in &totals {
        let _ = write!(s, " {t:09}");
    }
    if all {
        let _ = write!(s, " {alllog:09}");
    }
    s.push_str("\n# Min Latencies:");
    for c in &models {
        let min = c.and_then(|c| c.hist.min()).map_or(NO_MIN, |n| n / 1000);
        let _ = write!(s, " {min:05}");
    }
    s.push_str("\n# Avg Latencies:");
    for c in &models {
        let avg = c
            .and_then(|c| c.hist.mean())
            .map_or(0, |a| (a / 1000.0) as u64);
        let _ = write!(s, " {avg:05}");
    }
    s.push_str("\n# Max Latencies:");
    let mut maxmax = 0;
    for c in &models {
        let max = c.and_then(|c| c.hist.max()).map_or(0, |n| n / 1000);
        maxmax = maxmax.max(max);
        let _ = write!(s, " {max:05}");
    }
    if all {
        let _ = write!(s, " {maxmax:05}");
    }
    s.push_str("\n# Histogram Overflows:");
    let overflows: Vec<u64> = models
        .iter()
        .map(|c| c.map_or(0, |c| c.hist.count() - c.hist.count_below(us * 1000)))
        .collect();
    for n in &overflows {
        let _ = write!(s, " {n:05}");
    }
    if all {
        let _ = write!(s, " {:05}", overflows.iter().sum::<u64>());
    }
    s.push_str("\n# Histogram Overflow at cycle number:\n");
    for (j, n) in overflows.iter().enumerate() {
        let _ = write!(s, "# Thread {j}:");
        let listed = &h.outliers[j];
        for c in listed {
            let _ = write!(s, " {c:05}");
        }
        if *n > listed.len() as u64 {
            let _ = write!(s, " # {:05} others", n - listed.len() as u64);
        }
        s.push('\n');
    }
    s.push('\n');
    s
}

/// A JSON string (escaped as JSON; the file is read by programs).
fn js(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

fn uname() -> [String; 5] {
    // SAFETY: utsname is plain data, filled by the kernel.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return Default::default();
    }
    let f = |a: &[libc::c_char]| {
        let b: Vec<u8> = a
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&b).into_owned()
    };
    [
        f(&u.sysname),
        f(&u.nodename),
        f(&u.release),
        f(&u.version),
        f(&u.machine),
    ]
}

/// cyclictest's `--json` file, its layout and quirks kept: the keys `"cmdline:"` and
/// `"rt_test_version:"` end with a colon, `resolution_in_ns` is `-N`, the histogram holds the
/// non-empty buckets below `-h` (none without it), and there is no overflow count.
fn json(
    o: &Opts,
    m: &RunModel,
    out: &Outcome,
    started: &jiff::Zoned,
    ended: &jiff::Zoned,
) -> String {
    let fmt_time = |z: &jiff::Zoned| z.strftime("%a, %d %b %Y %H:%M:%S %z").to_string();
    let [sysname, nodename, release, version, machine] = uname();
    let realtime = u8::from(latlab_sys::rt::kernel_is_realtime());
    let v = |ns: u64| if o.nsecs { ns } else { ns / 1000 };
    let mut s = String::new();
    let _ = writeln!(s, "{{");
    let _ = writeln!(s, "  \"file_version\": 1,");
    let _ = writeln!(s, "  \"cmdline:\": {},", js(&o.cmdline));
    let _ = writeln!(
        s,
        "  \"rt_test_version:\": {},",
        js(&format!("latlab {}", env!("CARGO_PKG_VERSION")))
    );
    let _ = writeln!(s, "  \"start_time\": {},", js(&fmt_time(started)));
    let _ = writeln!(s, "  \"end_time\": {},", js(&fmt_time(ended)));
    let _ = writeln!(s, "  \"return_code\": 0,");
    let _ = writeln!(s, "  \"sysinfo\": {{");
    let _ = writeln!(s, "    \"sysname\": {},", js(&sysname));
    let _ = writeln!(s, "    \"nodename\": {},", js(&nodename));
    let _ = writeln!(s, "    \"release\": {},", js(&release));
    let _ = writeln!(s, "    \"version\": {},", js(&version));
    let _ = writeln!(s, "    \"machine\": {},", js(&machine));
    let _ = writeln!(s, "    \"realtime\": {realtime}");
    let _ = writeln!(s, "  }},");
    let _ = writeln!(s, "  \"num_threads\": {},", o.cpus.len());
    let _ = writeln!(s, "  \"resolution_in_ns\": {},", u8::from(o.nsecs));
    let _ = writeln!(s, "  \"thread\": {{");
    for (i, &cpu) in o.cpus.iter().enumerate() {
        let c = cpu_model(m, cpu);
        let (cycles, min, _, avg, max) = thread_stats(c, out.last_ns.get(i).copied().unwrap_or(0));
        let _ = writeln!(s, "    \"{i}\": {{");
        let buckets: Vec<(usize, u64)> = match (o.histogram_us, c) {
            (Some(us), Some(c)) => c
                .hist
                .counts()
                .iter()
                .take(us as usize)
                .copied()
                .enumerate()
                .filter(|&(_, n)| n > 0)
                .collect(),
            _ => vec![],
        };
        if buckets.is_empty() {
            let _ = writeln!(s, "      \"histogram\": {{      }},");
        } else {
            let _ = writeln!(s, "      \"histogram\": {{");
            for (k, (b, n)) in buckets.iter().enumerate() {
                let comma = if k + 1 < buckets.len() { "," } else { "" };
                let _ = writeln!(s, "        \"{b}\": {n}{comma}");
            }
            let _ = writeln!(s, "      }},");
        }
        let _ = writeln!(s, "      \"cycles\": {cycles},");
        let _ = writeln!(s, "      \"min\": {},", min.map_or(NO_MIN, v));
        let _ = writeln!(s, "      \"max\": {},", v(max));
        let avg = if o.nsecs { avg } else { avg / 1000.0 };
        let _ = writeln!(s, "      \"avg\": {avg:.2},");
        let _ = writeln!(s, "      \"cpu\": {cpu},");
        let _ = writeln!(s, "      \"node\": {}", latlab_sys::rt::numa_node(cpu));
        let comma = if i + 1 < o.cpus.len() { "," } else { "" };
        let _ = writeln!(s, "    }}{comma}");
    }
    let _ = writeln!(s, "  }}");
    let _ = writeln!(s, "}}");
    s
}
