//! What `latlab cyclictest` prints, in cyclictest's layout (rt-tests 2.x's format strings):
//! the `-v` sample lines as they come ([`Live`]), then at the end the `T:` lines, the
//! `-h`/`-H` histogram dump, the `--spike` list and the `-b` break report ([`end`]), and the
//! `--json` file ([`json`]). Pure: the front end gives the run's samples and outcome, and what
//! it read of the system.

use std::fmt::Write as _;

use latlab_core::model::{CpuModel, RunModel};

/// cyclictest's minimum before any sample (`stats->min = 1000000`).
const NO_MIN: u64 = 1_000_000;

/// What cyclictest's output depends on of its options.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// One CPU per thread, in thread order.
    pub cpus: Vec<u32>,
    pub priority: u32,
    pub priospread: bool,
    pub interval_us: u64,
    pub distance_us: u64,
    pub nsecs: bool,
    pub quiet: bool,
    pub verbose: bool,
    /// `-h`/`-H` US, and whether it is `-H` (an all-threads column).
    pub histogram_us: Option<u64>,
    pub histofall: bool,
    pub spike_us: Option<u64>,
    /// The command line as given (the JSON file's `cmdline:`).
    pub cmdline: String,
    /// The threads' policy as cyclictest names it (`fifo`, `rr`, `other`).
    pub policy: String,
}

impl Options {
    /// Priority of thread `i` (`--priospread`: one less per thread).
    pub fn thread_priority(&self, i: usize) -> u32 {
        if self.priospread && self.priority > 0 {
            self.priority.saturating_sub(i as u32).max(1)
        } else {
            self.priority
        }
    }

    /// Interval of thread `i`, µs.
    pub fn thread_interval_us(&self, i: usize) -> u64 {
        self.interval_us + i as u64 * self.distance_us
    }

    /// A value as cyclictest prints it: µs, or ns with `-N`.
    fn val(&self, ns: u64) -> u64 {
        if self.nsecs {
            ns
        } else {
            ns / 1000
        }
    }
}

/// A sample of the run, as the run reports it while it measures.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub cpu: u32,
    pub intended_ns: u64,
    pub actual_ns: u64,
    pub latency_ns: u64,
}

/// A thread as it stands while the run measures: what cyclictest's live `T:` line shows.
#[derive(Debug, Clone, Copy, Default)]
pub struct Now {
    /// 0 until the thread has started (cyclictest shows 0 too).
    pub tid: i64,
    pub cycles: u64,
    /// None before the first sample (cyclictest's 1000000).
    pub min_ns: Option<u64>,
    /// The last sample.
    pub act_ns: u64,
    pub avg_ns: f64,
    pub max_ns: u64,
}

/// What cyclictest prints while the run measures, and what it keeps for the end.
#[derive(Debug)]
pub struct Live {
    o: Options,
    periods_ns: Vec<u64>,
    t0_ns: u64,
    spike_ns: Option<u64>,
    hist_ns: Option<u64>,
    /// `--spike`: (thread, latency, CLOCK_MONOTONIC µs).
    spikes: Vec<(usize, u64, u64)>,
    /// `-h`: each thread's first overflow cycles (at most US of them, as cyclictest).
    outliers: Vec<Vec<u64>>,
    /// `/proc/loadavg` as last given (the live display's header).
    loadavg: String,
}

impl Live {
    pub fn new(o: &Options) -> Live {
        let n = o.cpus.len();
        Live {
            o: o.clone(),
            periods_ns: (0..n).map(|i| o.thread_interval_us(i) * 1000).collect(),
            t0_ns: 0,
            spike_ns: o.spike_us.map(|s| s * 1000),
            hist_ns: o.histogram_us.map(|h| h * 1000),
            spikes: Vec::new(),
            outliers: vec![Vec::new(); n],
            loadavg: String::new(),
        }
    }

    /// Whether cyclictest would redraw its live `T:` lines (neither `-q` nor `-v`).
    pub fn redraws(&self) -> bool {
        !self.o.quiet && !self.o.verbose
    }

    /// The load average the live display and the end show (`/proc/loadavg`, its newline
    /// gone; escaped when printed).
    pub fn set_loadavg(&mut self, loadavg: &str) {
        self.loadavg = loadavg.trim_end().to_string();
    }

    /// cyclictest's live display header: `policy: fifo: loadavg: …`, then a blank line.
    fn header(&self) -> String {
        format!(
            "policy: {}: loadavg: {}          \n\n",
            latlab_core::escape::escape(&self.o.policy),
            latlab_core::escape::escape(&self.loadavg)
        )
    }

    /// One redraw of the live display (nothing with `-q` or `-v`): the header and a `T:`
    /// line per thread (`now`, in thread order), then the cursor moved back up over them
    /// (`ESC [ n A`), as cyclictest does every 10 ms; the end's block overwrites the last.
    pub fn redraw(&self, now: &[Now]) -> String {
        if !self.redraws() {
            return String::new();
        }
        let mut s = self.header();
        for (i, n) in now.iter().enumerate() {
            t_line(
                &self.o,
                &mut s,
                i,
                n.tid,
                (n.cycles, n.min_ns, n.act_ns, n.avg_ns, n.max_ns),
            );
        }
        let _ = write!(s, "\x1b[{}A", now.len() + 2);
        s
    }

    /// The samples the run must report: every one for `-v`; overflows for `-h`; spikes above
    /// `--spike`.
    pub fn event_threshold_ns(&self) -> u64 {
        if self.o.verbose {
            0
        } else {
            self.hist_ns
                .unwrap_or(u64::MAX)
                .min(self.spike_ns.map_or(u64::MAX, |s| s + 1))
        }
    }

    /// The run started at `t0_ns` (`dma`: the `/dev/cpu_dma_latency` it holds); `online`
    /// CPUs. What cyclictest prints then.
    pub fn start(&mut self, t0_ns: u64, dma: Option<i32>, online: usize) -> String {
        self.t0_ns = t0_ns;
        let mut s = String::new();
        if self.o.verbose {
            let _ = writeln!(s, "Max CPUs = {online}\nOnline CPUs = {online}");
        }
        if let Some(us) = dma {
            let _ = writeln!(s, "# /dev/cpu_dma_latency set to {us}us");
        }
        if self.o.verbose {
            // cyclictest prints the next thread's interval here (its bug, kept).
            let iv: Vec<u64> = (0..self.o.cpus.len())
                .map(|i| self.o.thread_interval_us(i))
                .collect();
            for (i, v) in iv.iter().enumerate() {
                let next = v + iv.get(1).map_or(0, |t1| t1 - iv[0]);
                let _ = writeln!(s, "Thread {i} Interval: {next}");
            }
        }
        s
    }

    /// Samples reported by the run: the `-v` lines they print.
    pub fn samples(&mut self, samples: impl IntoIterator<Item = Sample>) -> String {
        let mut s = String::new();
        for e in samples {
            let Some(i) = self.o.cpus.iter().position(|&c| c == e.cpu) else {
                continue;
            };
            // The schedule is absolute: intended = first + k·period, first < one period
            // after the common start.
            let cycle = e.intended_ns.saturating_sub(self.t0_ns) / self.periods_ns[i].max(1);
            if self.o.verbose {
                let _ = writeln!(s, "{i:8}:{cycle:8}:{:8}", self.o.val(e.latency_ns));
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
        s
    }
}

/// How the run ended, per thread in CPU order.
#[derive(Debug, Clone, Copy)]
pub struct End<'a> {
    pub model: &'a RunModel,
    pub tids: &'a [i64],
    pub last_ns: &'a [u64],
    /// The (CPU, latency) of the sample that stopped the run (`-b`).
    pub stopped_by: Option<(u32, u64)>,
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

/// Thread `i`'s `T:` line, with (cycles, min, act, avg, max) in ns.
fn t_line(
    o: &Options,
    s: &mut String,
    i: usize,
    tid: i64,
    (cycles, min, act, avg, max): (u64, Option<u64>, u64, f64, u64),
) {
    let _ = writeln!(
        s,
        "T:{i:2} ({tid:5}) P:{:2} I:{} C:{cycles:7} Min:{:7} Act:{:5} Avg:{:5} Max:{:8}",
        o.thread_priority(i),
        o.thread_interval_us(i),
        min.map_or(NO_MIN, |v| o.val(v)),
        o.val(act),
        (if o.nsecs { avg } else { avg / 1000.0 }) as u64,
        o.val(max),
    );
}

/// What cyclictest prints on stdout at the end: the live display's last block (its header
/// and `T:` lines, without `-q` or `-v`) or the `T:` lines (not with `-q -h`), the histogram unless `histfile` takes it, the `-b` break
/// report and the `--spike` list.
pub fn end(live: &Live, e: &End, histfile: bool) -> String {
    let o = &live.o;
    let m = e.model;
    let mut s = String::new();
    if live.redraws() {
        s.push_str(&live.header());
    }
    if o.histogram_us.is_none() || !o.quiet {
        for (i, &cpu) in o.cpus.iter().enumerate() {
            let stats = thread_stats(cpu_model(m, cpu), e.last_ns.get(i).copied().unwrap_or(0));
            t_line(o, &mut s, i, e.tids.get(i).copied().unwrap_or(0), stats);
        }
    }
    if !histfile {
        s.push_str(&histogram(live, m));
    }
    if let Some((cpu, latency_ns)) = e.stopped_by {
        let tids: Vec<String> = e.tids.iter().map(|t| t.to_string()).collect();
        let i = o.cpus.iter().position(|&c| c == cpu).unwrap_or(0);
        let _ = writeln!(s, "# Thread Ids: {}", tids.join(" "));
        let _ = writeln!(s, "# Break thread: {}", e.tids.get(i).copied().unwrap_or(0));
        let _ = writeln!(s, "# Break value: {}", o.val(latency_ns));
    }
    if o.spike_us.is_some() {
        s.push('\n');
        for &(i, lat, ts) in &live.spikes {
            let _ = writeln!(s, "T:{i:2} Spike:{:8}: TS:{ts:12}", o.val(lat));
        }
        let _ = writeln!(s, "spikes = {}\n", live.spikes.len());
    }
    s
}

/// The `-h`/`-H` dump (cyclictest's `print_hist`); empty without `-h`/`-H`.
pub fn histogram(live: &Live, m: &RunModel) -> String {
    let o = &live.o;
    let Some(us) = o.histogram_us else {
        return String::new();
    };
    let mut s = String::from("# Histogram\n");
    let all = o.histofall && o.cpus.len() > 1;
    let models: Vec<Option<&CpuModel>> = o.cpus.iter().map(|&c| cpu_model(m, c)).collect();
    let mut totals = vec![0u64; models.len()];
    let mut alllog = 0u64;
    for i in 0..us as usize {
        let _ = write!(s, "{i:06} ");
        let mut row = 0;
        for (j, c) in models.iter().enumerate() {
            let n = c.and_then(|c| c.hist.counts().get(i).copied()).unwrap_or(0);
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
    trailer(&mut s, live, &models, us);
    s
}

/// The histogram's trailer after `# Total:`: min, avg, max, overflows and their cycles.
fn trailer(s: &mut String, live: &Live, models: &[Option<&CpuModel>], us: u64) {
    let all = live.o.histofall && models.len() > 1;
    s.push_str("\n# Min Latencies:");
    for c in models {
        let min = c.and_then(|c| c.hist.min()).map_or(NO_MIN, |n| n / 1000);
        let _ = write!(s, " {min:05}");
    }
    s.push_str("\n# Avg Latencies:");
    for c in models {
        let avg = c
            .and_then(|c| c.hist.mean())
            .map_or(0, |a| (a / 1000.0) as u64);
        let _ = write!(s, " {avg:05}");
    }
    s.push_str("\n# Max Latencies:");
    let mut maxmax = 0;
    for c in models {
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
        let listed = &live.outliers[j];
        for c in listed {
            let _ = write!(s, " {c:05}");
        }
        if *n > listed.len() as u64 {
            let _ = write!(s, " # {:05} others", n - listed.len() as u64);
        }
        s.push('\n');
    }
    s.push('\n');
}

/// What the `--json` file says of the system and the run's times, read by the front end.
#[derive(Debug, Clone, Default)]
pub struct System {
    /// uname's sysname, nodename, release, version, machine.
    pub uname: [String; 5],
    pub realtime: bool,
    /// The NUMA node of each thread's CPU.
    pub nodes: Vec<u32>,
    /// `Mon, 02 Jan 2006 15:04:05 +0000`, as cyclictest writes them.
    pub start_time: String,
    pub end_time: String,
    /// `latlab VERSION`.
    pub version: String,
}

/// A JSON string (escaped as JSON; the file is read by programs).
fn js(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// cyclictest's `--json` file, its layout and quirks kept: the keys `"cmdline:"` and
/// `"rt_test_version:"` end with a colon, `resolution_in_ns` is `-N`, the histogram holds the
/// non-empty buckets below `-h` (none without it), and there is no overflow count.
pub fn json(o: &Options, e: &End, sys: &System) -> String {
    let [sysname, nodename, release, version, machine] = &sys.uname;
    let mut s = String::new();
    let _ = writeln!(s, "{{");
    let _ = writeln!(s, "  \"file_version\": 1,");
    let _ = writeln!(s, "  \"cmdline:\": {},", js(&o.cmdline));
    let _ = writeln!(s, "  \"rt_test_version:\": {},", js(&sys.version));
    let _ = writeln!(s, "  \"start_time\": {},", js(&sys.start_time));
    let _ = writeln!(s, "  \"end_time\": {},", js(&sys.end_time));
    let _ = writeln!(s, "  \"return_code\": 0,");
    let _ = writeln!(s, "  \"sysinfo\": {{");
    let _ = writeln!(s, "    \"sysname\": {},", js(sysname));
    let _ = writeln!(s, "    \"nodename\": {},", js(nodename));
    let _ = writeln!(s, "    \"release\": {},", js(release));
    let _ = writeln!(s, "    \"version\": {},", js(version));
    let _ = writeln!(s, "    \"machine\": {},", js(machine));
    let _ = writeln!(s, "    \"realtime\": {}", u8::from(sys.realtime));
    let _ = writeln!(s, "  }},");
    let _ = writeln!(s, "  \"num_threads\": {},", o.cpus.len());
    let _ = writeln!(s, "  \"resolution_in_ns\": {},", u8::from(o.nsecs));
    let _ = writeln!(s, "  \"thread\": {{");
    for (i, &cpu) in o.cpus.iter().enumerate() {
        json_thread(&mut s, o, e, i, cpu, sys.nodes.get(i).copied().unwrap_or(0));
    }
    let _ = writeln!(s, "  }}");
    let _ = writeln!(s, "}}");
    s
}

/// Thread `i`'s object in the `--json` file.
fn json_thread(s: &mut String, o: &Options, e: &End, i: usize, cpu: u32, node: u32) {
    let c = cpu_model(e.model, cpu);
    let (cycles, min, _, avg, max) = thread_stats(c, e.last_ns.get(i).copied().unwrap_or(0));
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
    let _ = writeln!(s, "      \"min\": {},", min.map_or(NO_MIN, |v| o.val(v)));
    let _ = writeln!(s, "      \"max\": {},", o.val(max));
    let avg = if o.nsecs { avg } else { avg / 1000.0 };
    let _ = writeln!(s, "      \"avg\": {avg:.2},");
    let _ = writeln!(s, "      \"cpu\": {cpu},");
    let _ = writeln!(s, "      \"node\": {node}");
    let comma = if i + 1 < o.cpus.len() { "," } else { "" };
    let _ = writeln!(s, "    }}{comma}");
}

#[cfg(test)]
mod tests {
    use latlab_core::hist::{Histogram, Layout};
    use latlab_core::record::*;

    use super::*;

    /// One thread on CPU 2 at priority 80, every 1000 µs, with `-h 5`: samples of 1.5, 2,
    /// 9.999 and 6 µs.
    fn run() -> (Options, RunModel) {
        let o = Options {
            cpus: vec![2],
            priority: 80,
            interval_us: 1000,
            histogram_us: Some(5),
            cmdline: "cyclictest -t1 -a2 -p80 -h5 \"x\"".into(),
            policy: "fifo".into(),
            ..Options::default()
        };
        let mut h = Histogram::new(Layout::new(1_000, 100_000).unwrap());
        for v in [1_500, 2_000, 9_999, 6_000] {
            h.record(v);
        }
        let cpus = vec![CpuRecord::new(2, h.to_record())];
        let mut r = RunRecord::new("t", Source::Latlab, RunConfig::default(), cpus);
        r.complete = true;
        r.refresh().unwrap();
        (o, RunModel::new(r).unwrap())
    }

    fn outcome(m: &RunModel) -> End<'_> {
        End {
            model: m,
            tids: &[1234],
            last_ns: &[6_000],
            stopped_by: None,
        }
    }

    #[test]
    fn t_lines_and_the_histogram_are_cyclictests() {
        let (o, m) = run();
        let mut live = Live::new(&o);
        assert_eq!(live.event_threshold_ns(), 5_000, "-h: the overflows");
        assert_eq!(
            live.start(0, Some(0), 4),
            "# /dev/cpu_dma_latency set to 0us\n"
        );
        // Overflows at cycles 3 and 7 (intended = k × 1 ms); a sample of another CPU ignored.
        let sample = |cpu, k: u64, latency_ns| Sample {
            cpu,
            intended_ns: k * 1_000_000,
            actual_ns: k * 1_000_000 + latency_ns,
            latency_ns,
        };
        let printed = live.samples([
            sample(2, 3, 9_999),
            sample(2, 7, 6_000),
            sample(1, 5, 9_000),
        ]);
        assert_eq!(printed, "", "nothing live without -v");
        live.set_loadavg("0.00 0.01 0.05 1/99 1234\n");
        let out = end(&live, &outcome(&m), false);
        let mut lines = out.lines();
        // Without -q, the live display's last block: its header, then the T: lines.
        assert_eq!(
            lines.next(),
            Some("policy: fifo: loadavg: 0.00 0.01 0.05 1/99 1234          ")
        );
        assert_eq!(lines.next(), Some(""));
        assert_eq!(
            lines.next(),
            Some("T: 0 ( 1234) P:80 I:1000 C:      4 Min:      1 Act:    6 Avg:    4 Max:       9")
        );
        assert_eq!(lines.next(), Some("# Histogram"));
        assert_eq!(lines.next(), Some("000000 000000"));
        assert_eq!(lines.next(), Some("000001 000001"));
        assert!(out.contains("# Total: 000000002\n# Min Latencies: 00001\n# Avg Latencies: 00004\n# Max Latencies: 00009\n# Histogram Overflows: 00002\n# Histogram Overflow at cycle number:\n# Thread 0: 00003 00007\n"), "{out}");
        assert!(
            !end(&live, &outcome(&m), true).contains("# Histogram"),
            "--histfile takes it"
        );
    }

    /// Without -q or -v, cyclictest redraws its header and T: lines in place (`ESC [ n A`
    /// back over them); the first, before any sample, shows its minimum as 1000000.
    #[test]
    fn the_live_display_redraws_in_place() {
        let (o, _) = run();
        let mut live = Live::new(&o);
        live.set_loadavg("1.00 0.50 0.25 2/100 77\n");
        let first = live.redraw(&[Now::default()]);
        assert_eq!(
            first,
            "policy: fifo: loadavg: 1.00 0.50 0.25 2/100 77          \n\n\
             T: 0 (    0) P:80 I:1000 C:      0 Min:1000000 Act:    0 Avg:    0 Max:       0\n\
             \x1b[3A"
        );
        let later = live.redraw(&[Now {
            tid: 42,
            cycles: 10,
            min_ns: Some(2_000),
            act_ns: 3_000,
            avg_ns: 4_500.0,
            max_ns: 9_000,
        }]);
        assert!(
            later.contains(
                "T: 0 (   42) P:80 I:1000 C:     10 Min:      2 Act:    3 Avg:    4 Max:       9\n"
            ),
            "{later}"
        );
        // What /proc gives is escaped: no control reaches the terminal but the redraw's own.
        live.set_loadavg("1.0\x1b[2J");
        assert_eq!(live.redraw(&[Now::default()]).matches('\x1b').count(), 1);
        for (quiet, verbose) in [(true, false), (false, true)] {
            let live = Live::new(&Options {
                quiet,
                verbose,
                ..o.clone()
            });
            assert!(!live.redraws());
            assert_eq!(live.redraw(&[Now::default()]), "", "-q/-v: no live lines");
        }
    }

    #[test]
    fn verbose_lines_and_spikes() {
        let (mut o, m) = run();
        o.verbose = true;
        o.histogram_us = None;
        o.spike_us = Some(5);
        o.nsecs = true;
        let mut live = Live::new(&o);
        assert_eq!(live.event_threshold_ns(), 0, "-v: every sample");
        assert!(live
            .start(0, None, 4)
            .starts_with("Max CPUs = 4\nOnline CPUs = 4\nThread 0 Interval: 1000\n"));
        let s = live.samples([Sample {
            cpu: 2,
            intended_ns: 2_000_000,
            actual_ns: 2_009_999,
            latency_ns: 9_999,
        }]);
        assert_eq!(s, "       0:       2:    9999\n");
        let e = End {
            stopped_by: Some((2, 9_999)),
            ..outcome(&m)
        };
        let out = end(&live, &e, false);
        assert!(
            out.contains("# Thread Ids: 1234\n# Break thread: 1234\n# Break value: 9999\n"),
            "{out}"
        );
        assert!(
            out.ends_with("\nT: 0 Spike:    9999: TS:        2009\nspikes = 1\n\n"),
            "{out}"
        );
    }

    #[test]
    fn the_json_file_keeps_cyclictests_layout() {
        let (o, m) = run();
        let sys = System {
            uname: ["Linux", "box", "6.12", "#1 SMP", "x86_64"].map(String::from),
            realtime: true,
            nodes: vec![1],
            start_time: "Mon, 02 Jan 2006 15:04:05 +0000".into(),
            end_time: "Mon, 02 Jan 2006 15:04:06 +0000".into(),
            version: "latlab 0".into(),
        };
        let j = json(&o, &outcome(&m), &sys);
        assert!(
            j.contains("  \"cmdline:\": \"cyclictest -t1 -a2 -p80 -h5 \\\"x\\\"\",\n"),
            "{j}"
        );
        assert!(j.contains("    \"realtime\": 1\n"), "{j}");
        assert!(
            j.contains("      \"histogram\": {\n        \"1\": 1,\n        \"2\": 1\n      },\n"),
            "{j}"
        );
        assert!(
            j.contains("      \"avg\": 4.87,\n      \"cpu\": 2,\n      \"node\": 1\n"),
            "{j}"
        );
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v["thread"]["0"]["cycles"], 4);
        assert_eq!(v["thread"]["0"]["min"], 1);
    }
}
