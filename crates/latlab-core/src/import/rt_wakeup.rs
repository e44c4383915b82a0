//! rt-tests' wake-up latency tests: pmqtest (POSIX message queue), ptsematest (pthread mutex),
//! sigwaittest (signal / sigwait) and svsematest (SysV semaphore), text and `--json=FILE`.
//!
//! ```text
//! #0: ID25799, P95, CPU0, I1000; #1: ID25830, P95, CPU0, TO 0, Cycles 2635
//! #1 -> #0, Min    3, Cur    5, Avg    5, Max   81
//! ```
//! Each pair is a sender (`#even`, interval `I` µs) and a receiver (`#odd`, `Cycles` wake-ups)
//! that measures how long after the sender's wake-up call it runs: latlab's `--mode wakeup`.
//! The text is redrawn in place without `-q` (cursor escapes, one block per refresh): the last
//! block counts. The JSON (`"thread": {"0": {"sender": {…, "samples"}, "receiver": {"min",
//! "avg", "max"}}}`) holds the same numbers.
//!
//! These tools keep no histogram: only the count, min, average and max of each pair are known.
//! Each pair is imported with every sample's value unknown at or above the smallest min of the
//! file (percentiles print as "> limit"), min, max and the mean exact, and the standard
//! deviation the smallest that those four numbers allow (a lower bound).
//!
//! The four tools print the same text; pmqtest alone adds `TO n` (timeouts). `--from auto`
//! tells the others apart by the JSON's `"cmdline:"` or, for text, by the tool's name in the
//! file name, and otherwise asks for `--from`.

use serde_json::Value;

use super::cyclictest_json::strict;
use super::{
    check_threads, clip, cmdline_opt, int, lines, mul, record, Ctx, ImportError, Imported, Thread,
};
use crate::hist::{HistParts, Histogram};
use crate::modes::{CpuMode, ModeParams};
use crate::record::{Machine, RunRecord, Source, ThreadInfo};
use crate::units::Nanos;

/// Which of the four tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Pmqtest,
    Ptsematest,
    Sigwaittest,
    Svsematest,
}

impl Tool {
    pub const ALL: [Tool; 4] = [
        Tool::Pmqtest,
        Tool::Ptsematest,
        Tool::Sigwaittest,
        Tool::Svsematest,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            Tool::Pmqtest => "pmqtest",
            Tool::Ptsematest => "ptsematest",
            Tool::Sigwaittest => "sigwaittest",
            Tool::Svsematest => "svsematest",
        }
    }

    /// The IPC, as latlab's wakeup mode names them.
    fn ipc(&self) -> &'static str {
        match self {
            Tool::Pmqtest => "mqueue",
            Tool::Ptsematest => "pthread-mutex",
            Tool::Sigwaittest => "signal",
            Tool::Svsematest => "sysv-sem",
        }
    }

    fn source(&self) -> Source {
        match self {
            Tool::Pmqtest => Source::Pmqtest,
            Tool::Ptsematest => Source::Ptsematest,
            Tool::Sigwaittest => Source::Sigwaittest,
            Tool::Svsematest => Source::Svsematest,
        }
    }

    /// The tool named at the start of a command line or in a file name, if exactly one is.
    pub fn named_in(s: &str) -> Option<Tool> {
        let s = s.rsplit('/').next().unwrap_or(s);
        let found: Vec<Tool> = Tool::ALL
            .into_iter()
            .filter(|t| s.contains(t.name()))
            .collect();
        (found.len() == 1).then(|| found[0])
    }
}

/// Does this text look like one of the four tools' output (`#1 -> #0, Min …`)?
pub(crate) fn sniff_text(text: &str) -> bool {
    text.lines().any(|l| {
        let l = strip_escapes(l);
        let l = l.trim();
        l.starts_with('#') && l.contains(" -> #") && l.contains("Min") && l.contains("Max")
    })
}

/// Is this text pmqtest's (its receivers print `TO n`)?
pub(crate) fn is_pmqtest_text(text: &str) -> bool {
    text.lines()
        .any(|l| l.starts_with('#') && l.contains(", TO ") && l.contains("Cycles"))
}

/// The line without VT100 escapes (`ESC [ digits letter`).
fn strip_escapes(l: &str) -> String {
    let mut out = String::with_capacity(l.len());
    let mut it = l.chars().peekable();
    while let Some(c) = it.next() {
        if c == '\u{1b}' {
            if it.peek() == Some(&'[') {
                it.next();
                while let Some(&d) = it.peek() {
                    it.next();
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// One sender → receiver pair, in µs.
#[derive(Debug, Default, Clone)]
struct Pair {
    sender_cpu: Option<u32>,
    sender_prio: Option<u32>,
    interval_us: Option<u64>,
    receiver_cpu: Option<u32>,
    receiver_prio: Option<u32>,
    samples: Option<u64>,
    timeouts: Option<u64>,
    min: Option<u64>,
    avg: Option<f64>,
    max: Option<u64>,
}

/// `ID123, P95, CPU0, I1000` or `ID124, P95, CPU0, TO 0, Cycles 2635`: the fields of one thread.
fn thread_fields(
    ctx: &Ctx,
    n: usize,
    s: &str,
    p: &mut Pair,
    sender: bool,
) -> Result<(), ImportError> {
    for f in s.split(',').map(str::trim) {
        let u32f = |v: &str, what: &str| -> Result<u32, ImportError> {
            let x = int(ctx, n, v, what)?;
            u32::try_from(x).map_err(|_| ctx.err(n, format!("{what} {x} is too large")))
        };
        if let Some(v) = f.strip_prefix("CPU") {
            let c = u32f(v, "CPU")?;
            if sender {
                p.sender_cpu = Some(c)
            } else {
                p.receiver_cpu = Some(c)
            }
        } else if let Some(v) = f.strip_prefix("Cycles ") {
            p.samples = Some(int(ctx, n, v.trim(), "Cycles")?);
        } else if let Some(v) = f.strip_prefix("TO ") {
            p.timeouts = Some(int(ctx, n, v.trim(), "TO (timeouts)")?);
        } else if let Some(v) = f.strip_prefix("ID") {
            int(ctx, n, v, "ID (thread id)")?;
        } else if let Some(v) = f.strip_prefix('P') {
            let x = u32f(v, "P (priority)")?;
            if sender {
                p.sender_prio = Some(x)
            } else {
                p.receiver_prio = Some(x)
            }
        } else if let Some(v) = f.strip_prefix('I') {
            p.interval_us = Some(int(ctx, n, v, "I (interval, µs)")?);
        }
    }
    Ok(())
}

/// `#N` at the start of `s`: N and the rest.
fn hash_num<'a>(ctx: &Ctx, n: usize, s: &'a str) -> Result<(u64, &'a str), ImportError> {
    let s = s
        .trim_start()
        .strip_prefix('#')
        .ok_or_else(|| ctx.err(n, format!("expected '#N', found '{}'", clip(s))))?;
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    Ok((int(ctx, n, &s[..end], "thread number (#N)")?, &s[end..]))
}

pub(crate) fn parse_text(bytes: &[u8], ctx: &Ctx, tool: Tool) -> Result<RunRecord, ImportError> {
    let mut pairs: std::collections::BTreeMap<u64, Pair> = Default::default();
    let mut last = 0;
    for l in lines(bytes, ctx) {
        let (n, raw) = l?;
        last = n;
        let line = strip_escapes(raw);
        let s = line.trim();
        if !s.starts_with('#') {
            continue;
        }
        if s.contains(" -> #") {
            // `#1 -> #0, Min    3, Cur    5, Avg    5, Max   81`
            let (recv, rest) = hash_num(ctx, n, s)?;
            let rest = rest
                .trim_start()
                .strip_prefix("->")
                .ok_or_else(|| ctx.err(n, "expected '#R -> #S, Min …'"))?;
            let (send, rest) = hash_num(ctx, n, rest)?;
            if send.checked_add(1) != Some(recv) || send % 2 != 0 {
                return Err(ctx.err(
                    n,
                    format!("'#{recv} -> #{send}': expected a receiver #2k+1 and its sender #2k"),
                ));
            }
            let p = pairs.entry(send / 2).or_default();
            for f in rest.split(',').map(str::trim).filter(|f| !f.is_empty()) {
                let (k, v) = f
                    .split_once(' ')
                    .map(|(k, v)| (k, v.trim()))
                    .ok_or_else(|| {
                        ctx.err(n, format!("expected 'Name value', found '{}'", clip(f)))
                    })?;
                match k {
                    "Min" => p.min = Some(int(ctx, n, v, "Min")?),
                    "Max" => p.max = Some(int(ctx, n, v, "Max")?),
                    "Avg" => {
                        p.avg = Some(int(ctx, n, v, "Avg")? as f64);
                    }
                    "Cur" => {
                        int(ctx, n, v, "Cur")?;
                    }
                    _ => {}
                }
            }
            check_threads(ctx, n, pairs.len())?;
        } else {
            // `#0: ID…, P95, CPU0, I1000; #1: ID…, P95, CPU0, Cycles 2635`
            let Some((snd, rcv)) = s.split_once(';') else {
                return Err(ctx.err(
                    n,
                    format!(
                        "expected '#S: …; #R: …' (sender; receiver), found '{}'",
                        clip(s)
                    ),
                ));
            };
            let (sn, srest) = hash_num(ctx, n, snd)?;
            let (rn, rrest) = hash_num(ctx, n, rcv)?;
            if sn.checked_add(1) != Some(rn) || sn % 2 != 0 {
                return Err(ctx.err(n, format!("'#{sn}; #{rn}': expected #2k and #2k+1")));
            }
            let p = pairs.entry(sn / 2).or_default();
            let strip = |r: &str| r.trim_start().strip_prefix(':').unwrap_or(r).to_string();
            thread_fields(ctx, n, &strip(srest), p, true)?;
            thread_fields(ctx, n, &strip(rrest), p, false)?;
            check_threads(ctx, n, pairs.len())?;
        }
    }
    if pairs.is_empty() {
        return Err(ctx.err(
            last,
            format!("expected {}'s '#1 -> #0, Min …, Max …' lines", tool.name()),
        ));
    }
    let pairs: Vec<(u64, Pair)> = pairs.into_iter().collect();
    build(ctx, last, tool, pairs, None, "text")
}

pub(crate) fn parse_json(
    bytes: &[u8],
    ctx: &Ctx,
    tool: Option<Tool>,
) -> Result<RunRecord, ImportError> {
    let v = strict(bytes, ctx, &super::cyclictest_json::RT_TESTS_SHAPE)?;
    let obj = v
        .as_object()
        .ok_or_else(|| ctx.err(1, "expected a JSON object (rt-tests --json output)"))?;
    let cmd = obj
        .get("cmdline:")
        .or_else(|| obj.get("cmdline"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let tool = match tool {
        Some(t) => t,
        None => cmd
            .as_deref()
            .and_then(|c| c.split_whitespace().next())
            .and_then(Tool::named_in)
            .ok_or_else(|| {
                ctx.err(
                    0,
                    "the \"cmdline:\" does not name pmqtest, ptsematest, sigwaittest or svsematest: name the tool with --from",
                )
            })?,
    };
    let threads = obj
        .get("thread")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            ctx.err(
                0,
                format!(
                    "expected a \"thread\" object: is this {} --json output?",
                    tool.name()
                ),
            )
        })?;
    check_threads(ctx, 0, threads.len())?;
    let mut pairs = Vec::new();
    for (name, t) in threads {
        let k: u64 = name
            .parse()
            .map_err(|_| ctx.err(0, format!("thread key '{}': expected a number", clip(name))))?;
        let part = |p: &str| -> Result<&serde_json::Map<String, Value>, ImportError> {
            t.get(p)
                .and_then(Value::as_object)
                .ok_or_else(|| ctx.err(0, format!("thread {k}: expected a \"{p}\" object")))
        };
        let (s, r) = (part("sender")?, part("receiver")?);
        let u = |o: &serde_json::Map<String, Value>, f: &str| -> Result<Option<u64>, ImportError> {
            match o.get(f) {
                None => Ok(None),
                Some(x) => x.as_u64().map(Some).ok_or_else(|| {
                    ctx.err(
                        0,
                        format!("thread {k}: \"{f}\": expected a non-negative integer"),
                    )
                }),
            }
        };
        let u32f = |o: &serde_json::Map<String, Value>,
                    f: &str|
         -> Result<Option<u32>, ImportError> {
            u(o, f)?
                .map(|x| {
                    u32::try_from(x)
                        .map_err(|_| ctx.err(0, format!("thread {k}: \"{f}\" {x} is too large")))
                })
                .transpose()
        };
        pairs.push((
            k,
            Pair {
                sender_cpu: u32f(s, "cpu")?,
                sender_prio: u32f(s, "priority")?,
                interval_us: u(s, "interval")?,
                receiver_cpu: u32f(r, "cpu")?,
                receiver_prio: u32f(r, "priority")?,
                samples: u(s, "samples")?,
                timeouts: u(r, "timeoutcount")?,
                min: u(r, "min")?,
                avg: r.get("avg").and_then(Value::as_f64),
                max: u(r, "max")?,
            },
        ));
    }
    pairs.sort_by_key(|p| p.0);
    let mut r = build(ctx, 0, tool, pairs, cmd, "--json")?;
    r.notes.push(format!("{}'s JSON gives the sender's count of wake-ups, which can be one more than the receiver's (its text's 'Cycles'): a wake-up sent as the run ended", tool.name()));
    Ok(r)
}

/// What a tool printed of samples it did not bin: how many, their min and max (ns), and
/// their mean.
pub(crate) struct Summary {
    pub n: u64,
    pub min: Nanos,
    pub max: Nanos,
    pub mean: f64,
}

/// A histogram of `n` samples whose values are unknown at or above `limit_ns`, with the
/// file's min, max and mean, and the smallest sum of squares those allow.
pub(crate) fn summary_hist(
    ctx: &Ctx,
    line: usize,
    layout: crate::hist::Layout,
    summary: Summary,
) -> Result<Histogram, ImportError> {
    let Summary { n, min, max, mean } = summary;
    if min > max {
        return Err(ctx.err(line, format!("min {min} ns is above max {max} ns")));
    }
    let nf = n as f64;
    let mean = if mean.is_finite() {
        mean.clamp(min as f64, max as f64)
    } else {
        (min as f64 + max as f64) / 2.0
    };
    let sum = (mean * nf).round();
    // One sample at min, one at max, the rest at the mean of what is left: the least spread.
    let sq = match n {
        0 => 0.0,
        1 => (min as f64).powi(2),
        _ => {
            let rest = ((sum - min as f64 - max as f64) / (nf - 2.0).max(1.0))
                .clamp(min as f64, max as f64);
            (min as f64).powi(2) + (max as f64).powi(2) + (nf - 2.0) * rest * rest
        }
    };
    let floor = if n > 0 { (sum * sum / nf).ceil() } else { 0.0 };
    Histogram::from_parts(HistParts {
        layout,
        counts: vec![0; layout.len()],
        min,
        max,
        sum: sum as u128,
        sumsq: sq.max(floor) as u128,
        unknown_above: n,
        exact_moments: false,
    })
    .map_err(|e| ctx.err(line, format!("inconsistent summary: {e}")))
}

fn build(
    ctx: &Ctx,
    line: usize,
    tool: Tool,
    pairs: Vec<(u64, Pair)>,
    cmd: Option<String>,
    form: &str,
) -> Result<RunRecord, ImportError> {
    let mut rows = Vec::new();
    for (k, p) in pairs {
        let what = |f: &str| ctx.err(line, format!("pair {k}: no {f} (is the file cut?)"));
        let n = p.samples.ok_or_else(|| what("Cycles / samples"))?;
        if n == 0 {
            continue;
        }
        let min = mul(ctx, line, p.min.ok_or_else(|| what("Min"))?, 1_000, "Min")?;
        let max = mul(ctx, line, p.max.ok_or_else(|| what("Max"))?, 1_000, "Max")?;
        let avg = p.avg.ok_or_else(|| what("Avg"))? * 1_000.0;
        rows.push((k, p, n, min, max, avg));
    }
    // One layout for every pair (they are merged into "all CPUs"): unknown at or above the
    // smallest min, at least the layout's 64 ns floor.
    let limit = rows.iter().map(|r| r.3).min().unwrap_or(1_000).max(1_000);
    let (layout, _) = super::layout(ctx, line, 1_000, u128::from(limit), 0)?;
    let mut threads = Vec::new();
    let mut modes = Vec::new();
    let mut sender_prio = None;
    let mut cross = false;
    let mut timeouts = 0u128;
    for (k, p, n, min, max, avg) in rows {
        let hist = summary_hist(
            ctx,
            line,
            layout,
            Summary {
                n,
                min,
                max,
                mean: avg,
            },
        )
        .map_err(|mut e| {
            e.msg = format!("pair {k}: {}", e.msg);
            e
        })?;
        let cpu = p.receiver_cpu.unwrap_or(k as u32);
        sender_prio = sender_prio.or(p.sender_prio);
        cross |= p.sender_cpu.is_some_and(|s| s != cpu);
        timeouts += u128::from(p.timeouts.unwrap_or(0));
        let show = |c: Option<u32>, pr: Option<u32>| {
            format!(
                "CPU {} (fifo {})",
                c.map_or("?".into(), |c| c.to_string()),
                pr.map_or("?".into(), |p| p.to_string())
            )
        };
        modes.push(CpuMode {
            pair: Some(format!(
                "{}: sender {} → receiver {}",
                tool.ipc(),
                show(p.sender_cpu, p.sender_prio),
                show(Some(cpu), p.receiver_prio)
            )),
            ..CpuMode::default()
        });
        threads.push(Thread {
            cpu,
            hist,
            info: ThreadInfo {
                tid: None,
                policy: Some("fifo".into()),
                priority: p.receiver_prio,
                interval_ns: p
                    .interval_us
                    .map(|i| mul(ctx, line, i, 1_000, "interval"))
                    .transpose()?,
            },
        });
    }
    let mut notes = vec![
        format!("imported from {} {form} output as a wakeup-mode run: one series per sender → receiver pair (IPC: {})", tool.name(), tool.ipc()),
        format!("{} keeps no histogram: only each pair's count, min, average and max are known; every sample counts as unknown at or above {} µs (the smallest min), so percentiles print as \"> limit\"; min, max and mean are the file's (µs, rounded by the tool), the standard deviation is the least those allow", tool.name(), layout.limit_ns() / 1_000),
        format!("{} measures the wake-up of a thread blocked in the IPC, from the sender's call to the receiver running: not comparable to timer latency", tool.name()),
    ];
    if timeouts > 0 {
        notes.push(format!("{timeouts} receives timed out (TO): not samples"));
    }
    let interval = threads.first().and_then(|t| t.info.interval_ns);
    let prio = cmd
        .as_deref()
        .and_then(|c| cmdline_opt(c, "-p", "--prio"))
        .and_then(|s| s.parse::<u32>().ok());
    let mut r = record(Imported {
        source: tool.source(),
        label: ctx.name,
        threads,
        command_line: cmd,
        machine: Machine::default(),
        interval_ns: interval,
        notes,
    });
    r.config.mode = "wakeup".into();
    r.config.policy = Some("fifo".into());
    if prio.is_some() {
        r.config.priority = prio;
    }
    r.config.mode_params = Some(ModeParams {
        ipc: Some(tool.ipc().into()),
        cross_cpu: cross,
        sender_priority: sender_prio,
        ..ModeParams::default()
    });
    for (c, m) in r.cpus.iter_mut().zip(modes) {
        c.mode = Some(m);
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use crate::import::{import, From};

    const PMQ: &[u8] = include_bytes!("../../tests/fixtures/import/pmqtest-S-q.txt");
    const PTSEMA: &[u8] = include_bytes!("../../tests/fixtures/import/ptsematest.json");

    #[test]
    fn pmqtest_text() {
        let r = import(PMQ, From::Auto, "pmq.txt").unwrap();
        assert_eq!(r.source, crate::record::Source::Pmqtest);
        assert_eq!(r.config.mode, "wakeup");
        assert_eq!(r.cpus.len(), 2);
        assert_eq!(r.cpus[0].stats.samples, 2_635);
        assert_eq!(r.cpus[1].stats.samples, 1_761);
        assert_eq!(r.cpus[0].stats.min_ns, Some(3_000));
        assert_eq!(r.cpus[0].stats.max_ns, Some(81_000));
        assert_eq!(r.cpus[1].stats.max_ns, Some(56_000));
        assert_eq!(r.cpus[0].stats.mean_ns, Some(5_000));
        // No histogram: the median is not known.
        assert_eq!(r.cpus[0].stats.median_ns, None);
        assert_eq!(
            r.cpus[0].mode.as_ref().unwrap().pair.as_deref(),
            Some("mqueue: sender CPU 0 (fifo 95) → receiver CPU 0 (fifo 95)")
        );
        assert_eq!(r.cpus[1].thread.interval_ns, Some(1_500_000));
    }

    #[test]
    fn ptsematest_json() {
        let r = import(PTSEMA, From::Auto, "x.json").unwrap();
        assert_eq!(r.source, crate::record::Source::Ptsematest);
        assert_eq!(r.config.mode, "wakeup");
        assert_eq!(r.cpus[0].stats.samples, 2_317);
        assert_eq!(r.cpus[1].stats.samples, 1_839);
        assert_eq!(r.cpus[1].stats.max_ns, Some(244_000));
        assert_eq!(r.cpus[1].stats.mean_ns, Some(4_870));
        assert_eq!(r.total.max_ns, Some(244_000));
        assert_eq!(r.config.priority, Some(95));
        // The least spread the four numbers allow is not zero.
        assert!(r.cpus[1].stats.stddev_ns.unwrap() > 0);
    }

    #[test]
    fn ambiguous_text_asks_for_from() {
        let t = b"#0: ID1, P95, CPU0, I1000; #1: ID2, P95, CPU0, Cycles 5\n#1 -> #0, Min    3, Cur    5, Avg    5, Max   81\n";
        let e = import(t, From::Auto, "out.txt").unwrap_err();
        assert!(e.to_string().contains("--from ptsematest"), "{e}");
        let r = import(t, From::Auto, "svsematest-run.txt").unwrap();
        assert_eq!(r.source, crate::record::Source::Svsematest);
        let r = import(t, From::Sigwaittest, "out.txt").unwrap();
        assert_eq!(r.source, crate::record::Source::Sigwaittest);
    }
}
