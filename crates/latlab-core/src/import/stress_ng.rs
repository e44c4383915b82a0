//! stress-ng `--cyclic` logs (the stressor's report on stderr/stdout).
//!
//! ```text
//! stress-ng: info:  [1363] cyclic: sched SCHED_FIFO: 100000 ns delay, 10000 samples
//! stress-ng: info:  [1363] cyclic:   mean: 43371.60 ns, mode: 38619 ns
//! stress-ng: info:  [1363] cyclic:   min: 12049 ns, max: 3602455 ns, std.dev. 61867.85
//! stress-ng: info:  [1363] cyclic: latency percentiles:
//! stress-ng: info:  [1363] cyclic:   25.00%:      35353 ns
//! stress-ng: info:  [1363] cyclic: latency distribution (1000 ns intervals):
//! stress-ng: info:  [1363] cyclic: (for the first 250 buckets of 3603)
//! stress-ng: info:  [1363] cyclic: latency (ns)  frequency
//! stress-ng: info:  [1363] cyclic:            0          0
//! ```
//! One series per stressor instance (`[pid]`). The distribution (`--cyclic-dist N`) is a
//! histogram of N-ns buckets, cut after the first buckets: the samples it does not print are
//! counted as unknown above its end. Without it, only min, max, mean and the percentiles are
//! known: the samples count as unknown at or above the min (as for rt-tests' wake-up tests) and
//! the percentiles stress-ng printed are kept in the notes. The instance's CPU is not in the log.

use std::collections::BTreeMap;

use super::{
    build_hist, check_threads, clip, int, lines, mul, record, total, Ctx, ImportError, Imported,
    Printed, Thread,
};
use crate::record::{Machine, RunRecord, Source, ThreadInfo};

#[derive(Default)]
struct Inst {
    line: usize,
    policy: Option<String>,
    delay_ns: Option<u64>,
    samples: Option<u64>,
    mean: Option<f64>,
    min: Option<u64>,
    max: Option<u64>,
    stddev: Option<String>,
    percentiles: Vec<(String, u64)>,
    width: Option<u64>,
    cut: Option<(u64, u64)>,
    buckets: Vec<(u64, u64)>,
    needed: Option<u64>,
}

/// `N ns` (or a bare N) as an integer.
fn ns(ctx: &Ctx, n: usize, s: &str, what: &str) -> Result<u64, ImportError> {
    int(ctx, n, s.trim().trim_end_matches("ns").trim(), what)
}

/// Does this look like a stress-ng cyclic report?
pub(crate) fn sniff(text: &str) -> bool {
    text.lines()
        .any(|l| l.starts_with("stress-ng:") && l.contains("] cyclic:"))
}

/// The stressor instances of a log, by pid, from their `cyclic:` lines, and the number of
/// the log's last line.
fn read_instances(bytes: &[u8], ctx: &Ctx) -> Result<(BTreeMap<u64, Inst>, usize), ImportError> {
    let mut insts: BTreeMap<u64, Inst> = BTreeMap::new();
    let mut last = 0;
    for l in lines(bytes, ctx) {
        let (n, line) = l?;
        last = n;
        let Some(rest) = line.strip_prefix("stress-ng:") else {
            continue;
        };
        let Some((_, rest)) = rest.split_once('[') else {
            continue;
        };
        let Some((pid, rest)) = rest.split_once(']') else {
            continue;
        };
        let Some(body) = rest.trim_start().strip_prefix("cyclic:") else {
            continue;
        };
        let pid = int(ctx, n, pid.trim(), "[pid]")?;
        if !insts.contains_key(&pid) {
            check_threads(ctx, n, insts.len() + 1)?;
        }
        let i = insts.entry(pid).or_insert_with(|| Inst {
            line: n,
            ..Inst::default()
        });
        let b = body.trim();
        if let Some(r) = b.strip_prefix("sched ") {
            // `SCHED_FIFO: 100000 ns delay, 10000 samples`
            let (pol, r) = r
                .split_once(':')
                .ok_or_else(|| ctx.err(n, "expected 'sched POLICY: N ns delay, N samples'"))?;
            i.policy = Some(clip(pol.trim()));
            for part in r.split(',').map(str::trim) {
                if let Some(d) = part.strip_suffix("ns delay") {
                    i.delay_ns = Some(ns(ctx, n, d, "delay")?);
                } else if let Some(s) = part.strip_suffix("samples") {
                    i.samples = Some(int(ctx, n, s.trim(), "samples")?);
                }
            }
        } else if let Some(r) = b.strip_prefix("mean:") {
            let m = r.split(',').next().unwrap_or_default();
            let m = m.trim().trim_end_matches("ns").trim();
            i.mean = Some(
                m.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .ok_or_else(|| {
                        ctx.err(
                            n,
                            format!("mean: expected a number of ns, found '{}'", clip(m)),
                        )
                    })?,
            );
        } else if let Some(r) = b.strip_prefix("min:") {
            // `12049 ns, max: 3602455 ns, std.dev. 61867.85`
            let mut parts = r.split(',');
            i.min = Some(ns(ctx, n, parts.next().unwrap_or_default(), "min")?);
            for p in parts.map(str::trim) {
                if let Some(x) = p.strip_prefix("max:") {
                    i.max = Some(ns(ctx, n, x, "max")?);
                } else if let Some(x) = p.strip_prefix("std.dev.") {
                    i.stddev = Some(clip(x.trim()));
                }
            }
        } else if let Some(r) = b.strip_prefix("latency distribution (") {
            let w = r.split_whitespace().next().unwrap_or_default();
            let w = int(ctx, n, w, "distribution interval (ns)")?;
            if w == 0 {
                return Err(ctx.err(n, "distribution interval 0 ns: expected a bucket width"));
            }
            i.width = Some(w);
        } else if let Some(r) = b.strip_prefix("(for the first ") {
            // `250 buckets of 3603)`
            let t: Vec<&str> = r.split_whitespace().collect();
            if t.len() == 4 && t[1] == "buckets" && t[2] == "of" {
                let a = int(ctx, n, t[0], "buckets")?;
                let of = int(ctx, n, t[3].trim_end_matches(')'), "buckets")?;
                i.cut = Some((a, of));
            }
        } else if let Some(r) = b.strip_prefix("Note: --cyclic-samples needed to be ") {
            i.needed = r.split_whitespace().next().and_then(|x| x.parse().ok());
        } else if b.ends_with("ns") && b.contains("%:") {
            let (p, v) = b.split_once("%:").unwrap_or_default();
            i.percentiles
                .push((clip(p.trim()), ns(ctx, n, v, "percentile")?));
        } else {
            let t: Vec<&str> = b.split_whitespace().collect();
            if t.len() == 2 && t.iter().all(|x| x.bytes().all(|c| c.is_ascii_digit())) {
                let Some(w) = i.width else {
                    return Err(ctx.err(
                        n,
                        "a distribution row before 'latency distribution (N ns intervals)'",
                    ));
                };
                let lo = int(ctx, n, t[0], "latency (ns)")?;
                let c = int(ctx, n, t[1], "frequency")?;
                if let Some(&(p, _)) = i.buckets.last() {
                    if lo <= p {
                        return Err(
                            ctx.err(n, format!("bucket {lo} ns does not follow bucket {p} ns"))
                        );
                    }
                }
                if lo % w != 0 {
                    return Err(ctx.err(
                        n,
                        format!("bucket {lo} ns is not a multiple of the {w} ns interval"),
                    ));
                }
                i.buckets.push((lo, c));
            }
        }
    }
    Ok((insts, last))
}

pub(crate) fn parse(bytes: &[u8], ctx: &Ctx) -> Result<RunRecord, ImportError> {
    let (insts, last) = read_instances(bytes, ctx)?;
    if insts.is_empty() {
        return Err(ctx.err(
            last,
            "expected stress-ng 'cyclic:' report lines (stress-ng --cyclic N, with --cyclic-dist for a histogram)",
        ));
    }
    let insts: Vec<(u64, Inst)> = insts
        .into_iter()
        .filter(|(_, i)| i.samples.is_some() || i.min.is_some() || !i.buckets.is_empty())
        .collect();
    if insts.is_empty() {
        return Err(ctx.err(
            last,
            "no cyclic statistics: the stressor printed no 'min:'/'mean:' lines (did it fail? SCHED_DEADLINE needs --cyclic-policy fifo)",
        ));
    }
    let with_dist = insts.iter().any(|(_, i)| !i.buckets.is_empty());
    let mut notes = vec![
        "imported from stress-ng --cyclic: one series per stressor instance ([pid]); the CPU it ran on is not in the log, so instances are numbered 0, 1, …".to_string(),
    ];
    let mut threads = Vec::new();
    if with_dist {
        let widths: Vec<u64> = insts.iter().filter_map(|(_, i)| i.width).collect();
        let width = widths[0];
        if widths.iter().any(|&w| w != width) {
            return Err(ctx.err(
                last,
                "instances with different distribution intervals cannot be one run",
            ));
        }
        let end = insts
            .iter()
            .filter_map(|(_, i)| i.buckets.last().map(|b| b.0))
            .max()
            .unwrap_or(0);
        let limit = u128::from(end) + u128::from(width);
        let rows = insts
            .iter()
            .map(|(_, i)| i.buckets.len())
            .max()
            .unwrap_or(0);
        let (layout, cut) = super::layout(ctx, 0, width, limit, rows)?;
        notes.push(format!("buckets of {width} ns (--cyclic-dist) up to {} µs; mean is stress-ng's, the standard deviation is estimated from bucket midpoints", limit / 1_000));
        notes.extend(cut);
        for (k, (pid, i)) in insts.into_iter().enumerate() {
            let what = |f: &str| ctx.err(i.line, format!("[{pid}]: no {f} line (is the log cut?)"));
            if i.buckets.is_empty() {
                return Err(ctx.err(
                    i.line,
                    format!("[{pid}]: no distribution rows while other instances have them"),
                ));
            }
            let n = i.samples.ok_or_else(|| what("'N samples'"))?;
            let held = total(ctx, i.line, i.buckets.iter().map(|b| &b.1))?;
            let over = n.checked_sub(held).ok_or_else(|| {
                ctx.err(
                    i.line,
                    format!("[{pid}]: {n} samples but the distribution holds {held}"),
                )
            })?;
            if n == 0 {
                continue;
            }
            let min = i.min.ok_or_else(|| what("'min:'"))?;
            let max = i.max.ok_or_else(|| what("'max:'"))?;
            let b: Vec<(u64, u64)> = i.buckets.iter().copied().filter(|b| b.1 > 0).collect();
            let hist = build_hist(
                ctx,
                i.line,
                layout,
                Printed {
                    buckets: &b,
                    unknown_above: over,
                    min_ns: min,
                    max_ns: max,
                    avg_ns: i.mean,
                },
            )
            .map_err(|mut e| {
                e.msg = format!("[{pid}]: {}", e.msg);
                e
            })?;
            if over > 0 {
                notes.push(format!("[{pid}]: {over} of {n} samples are beyond the printed distribution{}: counted, value unknown above {} µs; the max is stress-ng's", i.cut.map(|(a, of)| format!(" (the first {a} buckets of {of})")).unwrap_or_default(), limit / 1_000));
            }
            inst_notes(&mut notes, pid, &i);
            threads.push(thread(ctx, k, hist, &i)?);
        }
    } else {
        let limit = insts
            .iter()
            .filter_map(|(_, i)| i.min)
            .min()
            .unwrap_or(64)
            .max(64);
        let (layout, _) = super::layout(ctx, 0, 1, u128::from(limit), 0)?;
        notes.push(format!("no latency distribution (run stress-ng with --cyclic-dist N for one): only min, max, mean and stress-ng's percentiles are known; every sample counts as unknown at or above {} ns (the smallest min), so percentiles print as \"> limit\"; the standard deviation is the least min, max and mean allow", layout.limit_ns()));
        for (k, (pid, i)) in insts.into_iter().enumerate() {
            let what = |f: &str| ctx.err(i.line, format!("[{pid}]: no {f} line (is the log cut?)"));
            let n = i.samples.ok_or_else(|| what("'N samples'"))?;
            if n == 0 {
                continue;
            }
            let min = i.min.ok_or_else(|| what("'min:'"))?;
            let max = i.max.ok_or_else(|| what("'max:'"))?;
            let mean = i.mean.ok_or_else(|| what("'mean:'"))?;
            let hist = super::rt_wakeup::summary_hist(
                ctx,
                i.line,
                layout,
                super::rt_wakeup::Summary { n, min, max, mean },
            )
            .map_err(|mut e| {
                e.msg = format!("[{pid}]: {}", e.msg);
                e
            })?;
            inst_notes(&mut notes, pid, &i);
            threads.push(thread(ctx, k, hist, &i)?);
        }
    }
    let interval = threads.first().and_then(|t| t.info.interval_ns);
    let mut r = record(Imported {
        source: Source::StressNg,
        label: ctx.name,
        threads,
        command_line: None,
        machine: Machine::default(),
        interval_ns: interval,
        notes,
    });
    r.config.policy = r.cpus.first().and_then(|c| c.thread.policy.clone());
    Ok(r)
}

fn inst_notes(notes: &mut Vec<String>, pid: u64, i: &Inst) {
    if !i.percentiles.is_empty() {
        let p: Vec<String> = i
            .percentiles
            .iter()
            .map(|(p, v)| format!("p{p} {v} ns"))
            .collect();
        notes.push(format!(
            "[{pid}]: stress-ng's own percentiles: {}",
            p.join(", ")
        ));
    }
    if let Some(s) = &i.stddev {
        notes.push(format!("[{pid}]: stress-ng's std.dev. {s} ns"));
    }
    if let (Some(need), Some(n)) = (i.needed, i.samples) {
        notes.push(format!("[{pid}]: stress-ng kept only its first {n} samples (--cyclic-samples); {need} were taken, the rest are in no statistic"));
    }
}

fn thread(
    ctx: &Ctx,
    k: usize,
    hist: crate::hist::Histogram,
    i: &Inst,
) -> Result<Thread, ImportError> {
    let policy = i
        .policy
        .as_deref()
        .map(|p| p.trim_start_matches("SCHED_").to_ascii_lowercase());
    Ok(Thread {
        cpu: u32::try_from(k).map_err(|_| ctx.err(i.line, "too many instances"))?,
        hist,
        info: ThreadInfo {
            tid: None,
            policy,
            priority: None,
            interval_ns: match i.delay_ns {
                Some(d) => Some(mul(ctx, i.line, d, 1, "delay")?),
                None => None,
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use crate::import::{import, From};

    const F: &[u8] = include_bytes!("../../tests/fixtures/import/stress-ng-cyclic.txt");

    #[test]
    fn distribution_and_cut() {
        let r = import(F, From::Auto, "sng.txt").unwrap();
        assert_eq!(r.source, crate::record::Source::StressNg);
        assert_eq!(r.cpus.len(), 1);
        let c = &r.cpus[0];
        assert_eq!(c.stats.samples, 10_000);
        assert_eq!(c.stats.min_ns, Some(12_049));
        assert_eq!(c.stats.max_ns, Some(3_602_455));
        assert_eq!(c.stats.mean_ns, Some(43_372));
        assert_eq!(c.thread.interval_ns, Some(100_000));
        assert_eq!(c.thread.policy.as_deref(), Some("fifo"));
        // stress-ng's median is 41003 ns: in the [41000, 42000) ns bucket, whose top latlab
        // reports.
        assert_eq!(c.stats.median_ns, Some(42_000));
        assert!(c.stats.unknown_above > 0);
        assert!(r.notes.iter().any(|n| n.contains("p99.99 3602455 ns")));
    }

    #[test]
    fn percentiles_only() {
        let t = b"stress-ng: info:  [7] cyclic: sched SCHED_FIFO: 100000 ns delay, 6937 samples\n\
stress-ng: info:  [7] cyclic:   mean: 28004.35 ns, mode: 17226 ns\n\
stress-ng: info:  [7] cyclic:   min: 9785 ns, max: 8492355 ns, std.dev. 153412.52\n\
stress-ng: info:  [7] cyclic: latency percentiles:\n\
stress-ng: info:  [7] cyclic:   50.00%:      18668 ns\n";
        let r = import(t, From::Auto, "s").unwrap();
        assert_eq!(r.cpus[0].stats.samples, 6_937);
        assert_eq!(r.cpus[0].stats.max_ns, Some(8_492_355));
        assert_eq!(r.cpus[0].stats.median_ns, None);
        assert!(r.notes.iter().any(|n| n.contains("p50.00 18668 ns")));
    }
}
