//! cyclictest 2.x's command line (`latlab cyclictest`), parsed as its getopt_long does: short flags cluster (`-mq`),
//! a required value is attached or the next argument (`-p95`, `-p 95`, `--json=x`, `--json x`),
//! an optional value is attached only (`-t4`, `-a1`, `--threads=4`) or, as cyclictest does
//! for `-a`/`-t`/`--secaligned`, the next argument when it starts with a digit (`-t 4`).

use latlab_core::cpulist::parse_cpu_list;
use latlab_report::cyclictest::front::Options;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Val {
    No,
    Req,
    Opt,
}

/// cyclictest's flags latlab takes: (short, long, value).
const FLAGS: &[(Option<char>, &str, Val)] = &[
    (Some('a'), "affinity", Val::Opt),
    (Some('t'), "threads", Val::Opt),
    (Some('p'), "priority", Val::Req),
    (Some('i'), "interval", Val::Req),
    (Some('d'), "distance", Val::Req),
    (Some('D'), "duration", Val::Req),
    (Some('l'), "loops", Val::Req),
    (Some('m'), "mlockall", Val::No),
    (Some('n'), "nanosleep", Val::No),
    (Some('N'), "nsecs", Val::No),
    (Some('q'), "quiet", Val::No),
    (Some('v'), "verbose", Val::No),
    (Some('h'), "histogram", Val::Req),
    (Some('H'), "histofall", Val::Req),
    (None, "histfile", Val::Req),
    (Some('b'), "breaktrace", Val::Req),
    (Some('S'), "smp", Val::No),
    (None, "policy", Val::Req),
    (None, "json", Val::Req),
    (None, "latency", Val::Req),
    (None, "spike", Val::Req),
    (None, "mainaffinity", Val::Req),
    (None, "secaligned", Val::Opt),
    (None, "priospread", Val::No),
    // latlab's own
    (None, "results", Val::Req),
    (None, "label", Val::Req),
    (None, "backend", Val::Req),
    (None, "sim-seed", Val::Req),
    (None, "db", Val::Req),
    (None, "no-db", Val::No),
];

/// cyclictest's flags latlab does not take, for a message that names them.
const UNSUPPORTED: &[(Option<char>, &str)] = &[
    (Some('A'), "aligned"),
    (Some('c'), "clock"),
    (None, "default-system"),
    (Some('F'), "fifo"),
    (None, "laptop"),
    (Some('M'), "refresh_on_max"),
    (Some('o'), "oscope"),
    (Some('r'), "relative"),
    (Some('R'), "resolution"),
    (Some('s'), "system"),
    (None, "spike-nodes"),
    (None, "smi"),
    (None, "tracemark"),
    (Some('u'), "unbuffered"),
    (None, "dbg_cyclictest"),
    (Some('x'), "posix_timers"),
    (Some('X'), "dbg_cyclictest"),
];

/// The run cyclictest's flags describe, and what its output depends on.
#[derive(Debug, Clone, Default)]
pub struct Opts {
    /// What cyclictest's output depends on (threads, priorities, intervals, `-N -q -v -h -H
    /// --spike`, the command line).
    pub out: Options,
    pub policy: &'static str,
    pub duration: Option<String>,
    pub loops: Option<u64>,
    pub histfile: Option<String>,
    pub breaktrace_us: Option<u64>,
    pub json: Option<String>,
    pub latency_us: i32,
    pub main_affinity: Option<Vec<u32>>,
    pub secaligned: bool,
    pub results: Option<String>,
    pub label: Option<String>,
    pub backend: Option<String>,
    pub sim_seed: Option<String>,
    /// `--db URL` / `--no-db`: where the run is recorded, as for `latlab run`.
    pub db: Option<String>,
    pub no_db: bool,
    /// Each `latlab run` flag these options became, with the cyclictest flag and value that
    /// gave it (`--hist-limit` ← `-h 100000000`), so that a refusal names what the user typed.
    pub origins: Vec<(&'static str, String)>,
    /// What cyclictest says on stderr for these flags (`defaulting realtime priority to 3`).
    pub notice: Option<String>,
}

fn number(flag: &str, v: &str) -> anyhow::Result<u64> {
    let t = v.trim();
    t.parse::<u64>().map_err(|_| {
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if digits(t) {
            anyhow::anyhow!("{flag} {v}: too large (at most {})", u64::MAX)
        } else if t.strip_prefix('-').is_some_and(digits) {
            anyhow::anyhow!("{flag} {v}: must not be negative")
        } else {
            anyhow::anyhow!(
                "{flag} {v}: not a whole number (cyclictest takes microseconds and counts as integers)"
            )
        }
    })
}

fn cpuset(flag: &str, v: &str, usable: &[u32]) -> anyhow::Result<Vec<u32>> {
    let set = parse_cpu_list(v).map_err(|e| anyhow::anyhow!("{flag} {v}: {e}"))?;
    if set.is_empty() {
        bail!("{flag} {v}: the CPU set is empty; give CPUs such as 0-1");
    }
    for c in &set {
        if !usable.contains(c) {
            bail!(
                "{flag} {v}: CPU {c} is not online or not allowed to this process (usable: {})",
                latlab_core::cpulist::format_cpu_list(usable)
            );
        }
    }
    Ok(set)
}

/// Parse cyclictest's arguments; `usable` are the CPUs this process may run on. An error is
/// one line in cyclictest's terms.
pub fn parse(args: &[String], usable: &[u32]) -> crate::Result<Opts> {
    parse_args(args, usable).map_err(crate::Error::from)
}

fn parse_args(args: &[String], usable: &[u32]) -> anyhow::Result<Opts> {
    // (long name, value) pairs, in order.
    let mut given: Vec<(&'static str, Option<String>)> = Vec::new();
    let mut i = 0;
    let digit_next = |i: usize| {
        args.get(i + 1)
            .is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit()))
    };
    while i < args.len() {
        let arg = &args[i];
        if let Some(long) = arg.strip_prefix("--") {
            let (name, attached) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let Some(&(_, lname, val)) = FLAGS.iter().find(|f| f.1 == name) else {
                if let Some(u) = UNSUPPORTED.iter().find(|u| u.1 == name) {
                    bail!("{}", unsupported(u));
                }
                bail!("--{name}: not a cyclictest flag latlab knows; `latlab cyclictest --help` lists them");
            };
            let value = match val {
                Val::No => {
                    if attached.is_some() {
                        bail!("--{name}: takes no value");
                    }
                    None
                }
                Val::Req => match attached {
                    Some(v) => Some(v),
                    None => {
                        i += 1;
                        Some(
                            args.get(i)
                                .cloned()
                                .ok_or_else(|| anyhow::anyhow!("--{name}: needs a value"))?,
                        )
                    }
                },
                Val::Opt => match attached {
                    Some(v) => Some(v),
                    None if digit_next(i) => {
                        i += 1;
                        Some(args[i].clone())
                    }
                    None => None,
                },
            };
            given.push((lname, value));
        } else if let Some(shorts) = arg.strip_prefix('-').filter(|s| !s.is_empty()) {
            let chars: Vec<char> = shorts.chars().collect();
            let mut j = 0;
            while j < chars.len() {
                let c = chars[j];
                let Some(&(_, lname, val)) = FLAGS.iter().find(|f| f.0 == Some(c)) else {
                    if let Some(u) = UNSUPPORTED.iter().find(|u| u.0 == Some(c)) {
                        bail!("{}", unsupported(u));
                    }
                    bail!("-{c}: not a cyclictest flag latlab knows; `latlab cyclictest --help` lists them");
                };
                let rest: String = chars[j + 1..].iter().collect();
                let value = match val {
                    Val::No => None,
                    Val::Req => {
                        if !rest.is_empty() {
                            j = chars.len();
                            Some(rest.trim_start_matches('=').to_string())
                        } else {
                            i += 1;
                            Some(args.get(i).cloned().ok_or_else(|| {
                                anyhow::anyhow!("-{c} (--{lname}): needs a value")
                            })?)
                        }
                    }
                    Val::Opt => {
                        if !rest.is_empty() {
                            j = chars.len();
                            Some(rest.trim_start_matches('=').to_string())
                        } else if digit_next(i) {
                            i += 1;
                            Some(args[i].clone())
                        } else {
                            None
                        }
                    }
                };
                given.push((lname, value));
                j += 1;
            }
        } else {
            bail!("'{arg}': cyclictest takes no arguments besides flags; `latlab cyclictest --help` lists them");
        }
        i += 1;
    }
    build(&given, usable, args)
}

fn unsupported(u: &(Option<char>, &str)) -> String {
    let name = match u.0 {
        Some(c) => format!("-{c} (--{})", u.1),
        None => format!("--{}", u.1),
    };
    format!(
        "{name}: this cyclictest flag is not supported by latlab cyclictest; docs/cli.md maps the supported ones"
    )
}

/// What the flags say of the threads, resolved once every flag is read.
#[derive(Default)]
struct Threads {
    /// `-a` (with its set, or every CPU), `-t` (with its N, or one per CPU).
    affinity: Option<Option<Vec<u32>>>,
    threads: Option<Option<u64>>,
    priority: Option<u64>,
    distance: Option<u64>,
    smp: bool,
}

fn build(
    given: &[(&'static str, Option<String>)],
    usable: &[u32],
    args: &[String],
) -> anyhow::Result<Opts> {
    let mut o = Opts {
        out: Options {
            interval_us: 1000,
            cmdline: std::iter::once("cyclictest".to_string())
                .chain(args.iter().cloned())
                .collect::<Vec<_>>()
                .join(" "),
            ..Options::default()
        },
        ..Opts::default()
    };
    let mut t = Threads::default();
    for (name, v) in given {
        let flag = format!("--{name}");
        // The `latlab run` flag this one becomes, and how the user wrote it.
        let short = FLAGS
            .iter()
            .find(|f| f.1 == *name)
            .and_then(|f| f.0)
            .map_or(flag.clone(), |c| format!("-{c}"));
        let typed = match v {
            Some(v) => format!("{short} {v}"),
            None => short,
        };
        let becomes: &[&'static str] = match *name {
            "affinity" | "threads" | "smp" => &["--cpus"],
            "interval" => &["--interval"],
            "distance" => &["--distance"],
            "duration" | "loops" => &["--duration"],
            "priority" => &["--priority"],
            "policy" => &["--policy"],
            "histogram" | "histofall" => &["--hist-limit"],
            "breaktrace" => &["--max-latency", "--trace-threshold"],
            "results" => &["--results"],
            "label" => &["--label"],
            "backend" => &["--backend"],
            "sim-seed" => &["--sim-seed"],
            "db" => &["--db"],
            _ => &[],
        };
        for b in becomes {
            o.origins.push((b, typed.clone()));
        }
        set(&mut o, &mut t, name, v.as_deref(), usable)?;
    }
    threads(&mut o, t, usable)?;
    if o.duration.is_none() && o.loops.is_none() {
        bail!("no -D or -l: cyclictest would run until Ctrl-C, latlab runs for a set time; add -D 60 (seconds; or 10m, 2h, 1d) or -l LOOPS");
    }
    if o.histfile.is_some() && o.out.histogram_us.is_none() {
        bail!("--histfile: needs -h US or -H US (the histogram to write)");
    }
    Ok(o)
}

/// Flag `name` with its value `v`, into `o` (or `t`, for the threads).
fn set(
    o: &mut Opts,
    t: &mut Threads,
    name: &str,
    v: Option<&str>,
    usable: &[u32],
) -> anyhow::Result<()> {
    let val = || v.unwrap_or_default().to_string();
    match name {
        "affinity" => {
            t.affinity = Some(match v {
                Some(s) => Some(cpuset("-a", s, usable)?),
                None => None,
            })
        }
        "threads" => {
            t.threads = Some(match v {
                Some(s) => {
                    let n = number("-t", s)?;
                    if n == 0 {
                        bail!("-t 0: give at least 1 thread");
                    }
                    Some(n)
                }
                None => None,
            })
        }
        "priority" => t.priority = Some(number("-p", &val())?),
        "interval" => o.out.interval_us = number("-i", &val())?,
        "distance" => t.distance = Some(number("-d", &val())?),
        "duration" => o.duration = Some(val()),
        "loops" => {
            let n = number("-l", &val())?;
            o.loops = (n > 0).then_some(n);
        }
        "mlockall" | "nanosleep" => {} // latlab always locks memory and uses clock_nanosleep
        "nsecs" => o.out.nsecs = true,
        "quiet" => o.out.quiet = true,
        "verbose" => o.out.verbose = true,
        "histogram" | "histofall" => {
            let us = number(if name == "histogram" { "-h" } else { "-H" }, &val())?;
            if us == 0 {
                bail!(
                    "-{} 0: give the histogram's size in microseconds, such as 100",
                    if name == "histogram" { 'h' } else { 'H' }
                );
            }
            o.out.histogram_us = Some(us);
            o.out.histofall |= name == "histofall";
        }
        "histfile" => o.histfile = Some(val()),
        // cyclictest's `-b 0` is no break trace at all (`if (tracelimit)`).
        "breaktrace" => o.breaktrace_us = Some(number("-b", &val())?).filter(|&b| b > 0),
        "smp" => t.smp = true,
        "policy" => {
            o.policy = match val().as_str() {
                "fifo" => "fifo",
                "rr" => "rr",
                "other" | "normal" => "other",
                p @ ("batch" | "idle") => {
                    bail!("--policy {p}: not supported by latlab (fifo, rr, other or normal)")
                }
                p => bail!("--policy {p}: not a policy; use fifo, rr, other or normal"),
            }
        }
        "json" => o.json = Some(val()),
        "latency" => {
            o.latency_us = i32::try_from(number("--latency", &val())?)
                .map_err(|_| anyhow::anyhow!("--latency {}: too large", val()))?
        }
        "spike" => o.out.spike_us = Some(number("--spike", &val())?),
        "mainaffinity" => o.main_affinity = Some(cpuset("--mainaffinity", &val(), usable)?),
        "secaligned" => {
            if let Some(s) = v {
                if number("--secaligned", s)? != 0 {
                    bail!("--secaligned {s}: an offset is not supported (latlab aligns the threads to one another, on a whole millisecond); give --secaligned alone");
                }
            }
            o.secaligned = true;
        }
        "priospread" => o.out.priospread = true,
        "results" => o.results = Some(val()),
        "label" => o.label = Some(val()),
        "backend" => o.backend = Some(val()),
        "sim-seed" => o.sim_seed = Some(val()),
        "db" => o.db = Some(val()),
        "no-db" => o.no_db = true,
        other => unreachable!("--{other} is in FLAGS"),
    }
    Ok(())
}

/// Threads and their CPUs, policy and priority, as cyclictest resolves them.
fn threads(o: &mut Opts, t: Threads, usable: &[u32]) -> anyhow::Result<()> {
    let Threads {
        mut affinity,
        mut threads,
        priority,
        distance,
        smp,
    } = t;
    // Threads and their CPUs, as cyclictest: -S is -a -t; -t without N is one per CPU;
    // without -t one thread; threads go round-robin over the -a set (or every CPU).
    if smp {
        affinity.get_or_insert(None);
        threads.get_or_insert(None);
    }
    let set: Vec<u32> = match &affinity {
        Some(Some(s)) => s.clone(),
        _ => usable.to_vec(),
    };
    let n = match threads {
        None => 1,
        Some(None) => set.len() as u64,
        Some(Some(n)) => n,
    };
    if n > set.len() as u64 {
        bail!(
            "-t {n}: latlab measures with one thread per CPU and {} {} usable here ({}); use -t {} or fewer",
            set.len(),
            if set.len() == 1 { "CPU is" } else { "CPUs are" },
            latlab_core::cpulist::format_cpu_list(&set),
            set.len()
        );
    }
    o.out.cpus = set[..n as usize].to_vec();
    // cyclictest: -d defaults to 500 µs; -h/-H set it to 0.
    o.out.distance_us = if o.out.histogram_us.is_some() {
        0
    } else {
        distance.unwrap_or(500)
    };
    // Policy and priority: -p N is fifo at N (0: SCHED_OTHER); without -p, SCHED_OTHER.
    // A real-time policy without a priority defaults to threads + 1, as cyclictest says.
    let rt_policy = matches!(o.policy, "fifo" | "rr");
    match priority {
        Some(p) if p > 99 => bail!("-p {p}: must be 0..99"),
        Some(0) | None if rt_policy || priority == Some(0) => {
            let p = n + 1;
            o.notice = Some(format!("defaulting realtime priority to {p}"));
            o.out.priority = p as u32;
            if o.policy.is_empty() {
                o.policy = "fifo";
            }
        }
        Some(p) => {
            o.out.priority = p as u32;
            if o.policy.is_empty() {
                o.policy = "fifo";
            }
        }
        None => {}
    }
    if o.policy.is_empty() {
        o.policy = "other";
    }
    if o.policy == "other" {
        o.out.priority = 0;
    }
    o.out.policy = o.policy.to_string();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> crate::Result<Opts> {
        let args: Vec<String> = s.split_whitespace().map(String::from).collect();
        parse(&args, &[0, 1])
    }

    #[test]
    fn cyclictest_flags_parse_as_getopt_does() {
        let o = p("-t -p80 -D1 -q").unwrap();
        assert_eq!(
            (o.out.cpus.clone(), o.out.priority, o.out.distance_us),
            (vec![0, 1], 80, 500)
        );
        assert_eq!(o.policy, "fifo");
        let o = p("-t1 -a1 -mq -l100 -i 200").unwrap();
        assert_eq!(o.out.cpus, vec![1]);
        assert_eq!(o.policy, "other");
        assert_eq!((o.loops, o.out.interval_us), (Some(100), 200));
        let o = p("-t 2 -h100 -D 1 --json=x.json").unwrap();
        assert_eq!((o.out.cpus.len(), o.out.distance_us), (2, 0));
        assert_eq!(o.json.as_deref(), Some("x.json"));
        assert_eq!(o.out.histogram_us, Some(100));
        let o = p("-S -D1 --policy fifo").unwrap();
        assert_eq!((o.out.cpus.len(), o.out.priority), (2, 3));
        assert_eq!(
            o.notice.as_deref(),
            Some("defaulting realtime priority to 3")
        );
        let o = p("-a 0-1 -D1 -b 50").unwrap();
        assert_eq!(o.out.cpus, vec![0]);
        assert_eq!(o.breaktrace_us, Some(50));
    }

    #[test]
    fn unsupported_and_unknown_flags_are_named() {
        let e = |s| p(s).unwrap_err().to_string();
        assert!(
            e("-D1 -x").starts_with("-x (--posix_timers): this cyclictest flag is not supported")
        );
        assert!(e("-D1 --smi").starts_with("--smi:"));
        assert!(e("-D1 -Z").starts_with("-Z: not a cyclictest flag"));
        assert!(e("-D1 --foo=1").starts_with("--foo: not a cyclictest flag"));
        assert!(e("-t3 -D1").contains("-t 3: latlab measures with one thread per CPU"));
        assert!(e("-q").contains("no -D or -l"));
        assert!(e("-D1 -p").contains("-p (--priority): needs a value"));
        assert!(e("-D1 -i x").contains("-i x: not a whole number"));
        assert!(e("-D1 -a 7").contains("CPU 7 is not online"));
    }
}
