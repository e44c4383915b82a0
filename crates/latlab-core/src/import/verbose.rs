//! cyclictest `-v`: one line per sample, `thread: cycle: latency` (latency in µs).
//!
//! ```text
//! Max CPUs = 2
//! Online CPUs = 2
//! Thread 0 Interval: 1500     <- shows the *next* thread's interval (a cyclictest bug): ignored
//!        0:       0:      56
//! ```
//! Every sample is known, so the histogram is exact at 1 µs (values above 10 ms go to the
//! log tail, still counted by value), and min/max/mean/stddev are exact for µs-truncated
//! samples. This is the hot importer (files of millions of lines): it parses bytes directly.

use super::{clip, record, Ctx, ImportError, Imported, Thread, MAX_THREADS};
use crate::hist::{Histogram, Layout};
use crate::record::{Machine, RunRecord, Source, ThreadInfo};

/// Parse `digits` after optional spaces; returns the number and the rest.
#[inline]
fn number(s: &[u8]) -> Option<(u64, &[u8])> {
    let mut i = 0;
    while i < s.len() && (s[i] == b' ' || s[i] == b'\t') {
        i += 1;
    }
    let start = i;
    let mut v: u64 = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        v = v.checked_mul(10)?.checked_add((s[i] - b'0') as u64)?;
        i += 1;
    }
    (i > start).then_some((v, &s[i..]))
}

/// `thread: cycle: latency` → (thread, latency).
#[inline]
fn sample(l: &[u8]) -> Option<(u64, u64)> {
    let (t, r) = number(l)?;
    let r = r.strip_prefix(b":")?;
    let (_c, r) = number(r)?;
    let r = r.strip_prefix(b":")?;
    let (v, r) = number(r)?;
    r.iter()
        .all(|&b| b == b' ' || b == b'\t' || b == b'\r')
        .then_some((t, v))
}

pub(crate) fn parse(bytes: &[u8], ctx: &Ctx) -> Result<RunRecord, ImportError> {
    let layout = Layout::default();
    let mut hists: Vec<Option<Histogram>> = Vec::new();
    for (i, l) in bytes.split(|&b| b == b'\n').enumerate() {
        let first = l.iter().position(|&b| b != b' ' && b != b'\t');
        let Some(first) = first else { continue };
        if l[first].is_ascii_digit() {
            let (t, v) = sample(l).ok_or_else(|| {
                ctx.err(
                    i + 1,
                    format!(
                        "expected 'thread: cycle: latency' (three integers), found '{}'",
                        clip(&String::from_utf8_lossy(l))
                    ),
                )
            })?;
            if t >= MAX_THREADS as u64 {
                return Err(ctx.err(
                    i + 1,
                    format!("thread {t}: expected fewer than {MAX_THREADS} threads"),
                ));
            }
            let t = t as usize;
            if t >= hists.len() {
                hists.resize_with(t + 1, || None);
            }
            hists[t]
                .get_or_insert_with(|| Histogram::new(layout))
                .record(v.checked_mul(1_000).ok_or_else(|| {
                    ctx.err(i + 1, format!("latency {v} µs is too large (over 2^64 ns)"))
                })?);
            continue;
        }
        let s = String::from_utf8_lossy(&l[first..]);
        let known = [
            "Max CPUs",
            "Online CPUs",
            "#",
            "Thread ",
            "T:",
            "policy",
            "\r",
        ];
        if !known.iter().any(|k| s.starts_with(k)) {
            return Err(ctx.err(
                i + 1,
                format!(
                    "expected 'thread: cycle: latency' or a cyclictest header line, found '{}'",
                    clip(&s)
                ),
            ));
        }
    }
    let threads: Vec<Thread> = hists
        .into_iter()
        .enumerate()
        .filter_map(|(t, h)| {
            h.map(|hist| Thread {
                cpu: t as u32,
                hist,
                info: ThreadInfo::default(),
            })
        })
        .collect();
    if threads.is_empty() {
        return Err(ctx.err(0, "no 'thread: cycle: latency' sample line"));
    }
    let notes = vec![
        "imported from cyclictest -v: every sample, in whole µs (exact 1 µs histogram)".to_string(),
        "cyclictest -v does not say which CPU each thread ran on ('cpu' is the thread number), and its 'Thread N Interval' header is unreliable: interval unknown".to_string(),
    ];
    Ok(record(Imported {
        source: Source::Cyclictest,
        label: ctx.name,
        threads,
        command_line: None,
        machine: Machine::default(),
        interval_ns: None,
        notes,
    }))
}

#[cfg(test)]
mod tests {
    use crate::import::{import, From};

    #[test]
    fn fixture_exact_values() {
        let r = import(
            include_bytes!("../../tests/fixtures/import/cyclictest-v.txt"),
            From::Auto,
            "v.txt",
        )
        .unwrap();
        assert_eq!(r.cpus.len(), 2);
        let c0 = &r.cpus[0];
        assert!(c0.stats.exact_moments);
        assert_eq!(c0.stats.max_ns, Some(1_566_000));
        assert_eq!(c0.stats.min_ns, Some(23_000));
        assert_eq!(r.total.samples, 40);
    }

    #[test]
    fn computed_against_the_samples() {
        let mut f = String::from("Max CPUs = 1\n");
        let vals = [5u64, 9, 9, 12, 200, 15_000];
        for (i, v) in vals.iter().enumerate() {
            f.push_str(&format!("   0: {i:>7}: {v:>7}\n"));
        }
        let r = import(f.as_bytes(), From::CyclictestVerbose, "v").unwrap();
        let s = &r.cpus[0].stats;
        assert_eq!(s.samples, 6);
        let mean = (vals.iter().sum::<u64>() as f64 * 1000.0 / 6.0).round() as u64;
        assert_eq!(s.mean_ns, Some(mean));
        assert_eq!(s.max_ns, Some(15_000_000)); // above the 10 ms limit: still exact
        assert_eq!(s.median_ns, Some(10_000));
    }

    #[test]
    fn errors() {
        let e = import(b"0: 1: 2\n0: 2: x\n", From::CyclictestVerbose, "v").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("v:2: expected 'thread: cycle: latency'"),
            "{e}"
        );
        let e = import(b"hello\n", From::CyclictestVerbose, "v").unwrap_err();
        assert!(e.to_string().starts_with("v:1: expected"), "{e}");
        let e = import(b"99999: 1: 2\n", From::CyclictestVerbose, "v").unwrap_err();
        assert!(e.to_string().contains("fewer than"), "{e}");
    }
}
