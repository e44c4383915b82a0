//! Importers of other tools' results: cyclictest (`-h`/`-H` histograms, `--json`, `-v`),
//! `rtla timerlat hist` (thread and IRQ columns), realfeel/Morton-style `<ms> <count>`
//! histograms, oslat (text and `--json`), stress-ng `--cyclic` logs, jitterdebugger's
//! results.json and rt-tests' wake-up tests (pmqtest, ptsematest, sigwaittest, svsematest; text
//! and `--json`, recorded as wakeup-mode runs).
//!
//! Each is a pure function over bytes that yields a [`RunRecord`] (`config.backend = "import"`,
//! one [`CpuRecord`] per thread or CPU), so `report` and `compare` treat a peer's data exactly as
//! latlab's own. The histogram keeps the tool's native bucket width; what the file cannot tell
//! is never invented: cyclictest's overflow samples are counted as "unknown above the limit"
//! (percentiles that fall among them come out as `None`, printed "> limit"), and each such gap
//! is spelled out in `record.notes`.
//!
//! Errors name the file, the line and what was expected; no input makes a parser panic (each
//! has a cargo-fuzz target in `fuzz/`).
//!
//! ```
//! use latlab_core::import::{import, From};
//! let r = import(b"0.0 10\n0.1 5\n0.3 1\n", From::Auto, "morton.hist").unwrap();
//! assert_eq!(r.total.samples, 16);
//! assert_eq!(r.cpus[0].histogram.bucket_ns, 100_000);
//! ```

use std::fmt;

use crate::hist::{HistError, HistParts, Histogram, Layout};
use crate::record::{CpuRecord, Machine, RunConfig, RunRecord, Source, ThreadInfo, SCHEMA_VERSION};
use crate::stats::Stats;
use crate::units::Nanos;

pub mod cyclictest;
pub mod cyclictest_json;
pub mod jitterdebugger;
pub mod oslat;
pub mod realfeel;
pub mod rt_wakeup;
pub mod rtla;
pub mod stress_ng;
pub mod verbose;

/// At most this many threads (columns, CPUs) in an imported file: each costs a histogram
/// (~90 KiB), so a few KB of text must not ask for gigabytes.
pub const MAX_THREADS: usize = 1024;

/// Linear buckets an import gets at least (latlab's own default: 1 µs to 10 ms). More only
/// when the file prints more bucket rows: buckets the file does not print cost nothing, so
/// one row at 9 999 999 µs does not make 10 million buckets. Rows above the linear part go to
/// the log-scaled tail (≤ 3.2 % wide); min, max and the mean stay exact.
pub const MIN_DENSE_BUCKETS: u64 = 10_000;

/// Which format a file is in (`--from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum From {
    Auto,
    Cyclictest,
    CyclictestJson,
    CyclictestVerbose,
    Rtla,
    Realfeel,
    Oslat,
    OslatJson,
    StressNg,
    Jitterdebugger,
    Pmqtest,
    Ptsematest,
    Sigwaittest,
    Svsematest,
}

impl From {
    /// Every format, in `--from`'s order.
    pub const ALL: [From; 14] = [
        From::Auto,
        From::Cyclictest,
        From::CyclictestJson,
        From::CyclictestVerbose,
        From::Rtla,
        From::Realfeel,
        From::Oslat,
        From::OslatJson,
        From::StressNg,
        From::Jitterdebugger,
        From::Pmqtest,
        From::Ptsematest,
        From::Sigwaittest,
        From::Svsematest,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            From::Auto => "auto",
            From::Cyclictest => "cyclictest",
            From::CyclictestJson => "cyclictest-json",
            From::CyclictestVerbose => "cyclictest-verbose",
            From::Rtla => "rtla",
            From::Realfeel => "realfeel",
            From::Oslat => "oslat",
            From::OslatJson => "oslat-json",
            From::StressNg => "stress-ng",
            From::Jitterdebugger => "jitterdebugger",
            From::Pmqtest => "pmqtest",
            From::Ptsematest => "ptsematest",
            From::Sigwaittest => "sigwaittest",
            From::Svsematest => "svsematest",
        }
    }
}

/// An import failure: `file:line: message` (line 0 when it concerns the whole file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ImportError {
    pub file: String,
    pub line: usize,
    pub msg: String,
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.msg)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.msg)
        }
    }
}

/// Error context passed to the parsers: the file's name for messages.
pub(crate) struct Ctx<'a> {
    pub name: &'a str,
}

impl Ctx<'_> {
    pub fn err(&self, line: usize, msg: impl Into<String>) -> ImportError {
        ImportError {
            file: self.name.to_string(),
            line,
            msg: msg.into(),
        }
    }
}

/// Import `bytes` (the content of the file called `name_for_errors`) as a run record.
pub fn import(bytes: &[u8], from: From, name_for_errors: &str) -> Result<RunRecord, ImportError> {
    let ctx = Ctx {
        name: name_for_errors,
    };
    let from = match from {
        From::Auto => detect(bytes, name_for_errors, &ctx)?,
        f => f,
    };
    let json = bytes.trim_ascii_start().starts_with(b"{");
    let wake = |t: rt_wakeup::Tool| {
        if json {
            rt_wakeup::parse_json(bytes, &ctx, Some(t))
        } else {
            rt_wakeup::parse_text(bytes, &ctx, t)
        }
    };
    let mut r = match from {
        From::Cyclictest => cyclictest::parse(bytes, &ctx)?,
        From::CyclictestJson => cyclictest_json::parse(bytes, &ctx)?,
        From::CyclictestVerbose => verbose::parse(bytes, &ctx)?,
        From::Rtla => rtla::parse(bytes, &ctx)?,
        From::Realfeel => realfeel::parse(bytes, &ctx)?,
        From::Oslat => oslat::parse_text(bytes, &ctx)?,
        From::OslatJson => oslat::parse_json(bytes, &ctx)?,
        From::StressNg => stress_ng::parse(bytes, &ctx)?,
        From::Jitterdebugger => jitterdebugger::parse(bytes, &ctx)?,
        From::Pmqtest => wake(rt_wakeup::Tool::Pmqtest)?,
        From::Ptsematest => wake(rt_wakeup::Tool::Ptsematest)?,
        From::Sigwaittest => wake(rt_wakeup::Tool::Sigwaittest)?,
        From::Svsematest => wake(rt_wakeup::Tool::Svsematest)?,
        From::Auto => unreachable!("resolved above"),
    };
    if r.cpus.iter().all(|c| c.histogram.count == 0) {
        return Err(ctx.err(0, "no samples: every thread's histogram is empty"));
    }
    r.refresh()
        .map_err(|e| ctx.err(0, format!("inconsistent data: {e}")))?;
    Ok(r)
}

/// `--from auto`: the format from the content, or from the file's name for the rt-tests
/// wake-up tests whose text is the same for three of them.
fn detect(bytes: &[u8], name: &str, ctx: &Ctx) -> Result<From, ImportError> {
    if let Some(f) = sniff(bytes) {
        return Ok(f);
    }
    let head = String::from_utf8_lossy(&bytes[..bytes.len().min(64 * 1024)]);
    if rt_wakeup::sniff_text(&head) {
        return match rt_wakeup::Tool::named_in(name) {
            Some(t) => Ok(from_tool(t)),
            None => Err(ctx.err(
                0,
                "ptsematest, sigwaittest and svsematest print the same text: name the tool with --from ptsematest, --from sigwaittest or --from svsematest",
            )),
        };
    }
    Err(ctx.err(
        0,
        "cannot tell the format: expected cyclictest -h/-H output (with '# Max Latencies'), \
         cyclictest --json, cyclictest -v lines 'thread: cycle: latency', rtla timerlat \
         hist output, realfeel '<ms> <count>' lines, oslat, stress-ng --cyclic, \
         jitterdebugger results.json or pmqtest/ptsematest/sigwaittest/svsematest output; \
         name it with --from",
    ))
}

fn from_tool(t: rt_wakeup::Tool) -> From {
    match t {
        rt_wakeup::Tool::Pmqtest => From::Pmqtest,
        rt_wakeup::Tool::Ptsematest => From::Ptsematest,
        rt_wakeup::Tool::Sigwaittest => From::Sigwaittest,
        rt_wakeup::Tool::Svsematest => From::Svsematest,
    }
}

/// The first word of the JSON's `"cmdline:"` value (the program), if the head has one.
fn json_program(text: &str) -> Option<&str> {
    let at = text.find("\"cmdline")?;
    let rest = &text[at + 8..];
    let rest = rest.strip_prefix(':').unwrap_or(rest);
    let rest = rest.strip_prefix("\"").unwrap_or(rest).trim_start();
    let rest = rest.strip_prefix(':')?.trim_start().strip_prefix('"')?;
    let end = rest.find(['"', ' '])?;
    Some(rest[..end].rsplit('/').next().unwrap_or(""))
}

/// Guess the format from the content; `None` when nothing fits (or, for the text of
/// ptsematest, sigwaittest and svsematest, when only the file name can tell them apart).
pub fn sniff(bytes: &[u8]) -> Option<From> {
    let head = &bytes[..bytes.len().min(64 * 1024)];
    let text = String::from_utf8_lossy(head);
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') {
        if let Some(p) = json_program(&text) {
            if p == "oslat" {
                return Some(From::OslatJson);
            }
            if let Some(t) = rt_wakeup::Tool::named_in(p) {
                return Some(from_tool(t));
            }
        }
        if !text.contains("\"thread\"")
            && text.contains("\"cpu\"")
            && text.contains("\"histogram\"")
        {
            return Some(From::Jitterdebugger);
        }
        if text.contains("\"sender\"") && text.contains("\"receiver\"") {
            return None;
        }
        return Some(From::CyclictestJson);
    }
    if text.contains("# RTLA")
        || text
            .lines()
            .any(|l| l.starts_with("Index") && l.contains("-0"))
    {
        return Some(From::Rtla);
    }
    if text.contains("# Max Latencies") || text.contains("# Histogram") {
        return Some(From::Cyclictest);
    }
    if stress_ng::sniff(&text) {
        return Some(From::StressNg);
    }
    if text.starts_with("oslat V")
        || (text.lines().any(|l| l.trim_start().starts_with("Core:")) && text.contains(" (us):"))
    {
        return Some(From::Oslat);
    }
    if rt_wakeup::sniff_text(&text) {
        return rt_wakeup::is_pmqtest_text(&text).then_some(From::Pmqtest);
    }
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || !l.as_bytes()[0].is_ascii_digit() {
            continue;
        }
        let parts: Vec<&str> = l.split(':').map(str::trim).collect();
        if parts.len() == 3
            && parts
                .iter()
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        {
            return Some(From::CyclictestVerbose);
        }
        let toks: Vec<&str> = l.split_whitespace().collect();
        if toks.len() == 2 && toks[0].contains('.') {
            return Some(From::Realfeel);
        }
        if toks.len() >= 2 && toks.iter().all(|t| t.bytes().all(|b| b.is_ascii_digit())) {
            return Some(From::Cyclictest);
        }
        return None;
    }
    None
}

/// Lines of a text file, 1-based, without the line terminator (`\r\n` too). Invalid UTF-8 is
/// an error naming the line.
pub(crate) fn lines<'a>(
    bytes: &'a [u8],
    ctx: &'a Ctx<'a>,
) -> impl Iterator<Item = Result<(usize, &'a str), ImportError>> + 'a {
    bytes.split(|&b| b == b'\n').enumerate().map(move |(i, l)| {
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        std::str::from_utf8(l)
            .map(|s| (i + 1, s))
            .map_err(|_| ctx.err(i + 1, "not UTF-8 text"))
    })
}

/// Parse a non-negative integer field, naming it in the error.
pub(crate) fn int(ctx: &Ctx, line: usize, tok: &str, what: &str) -> Result<u64, ImportError> {
    tok.parse::<u64>().map_err(|_| {
        ctx.err(
            line,
            format!(
                "{what}: expected a non-negative integer, found '{}'",
                clip(tok)
            ),
        )
    })
}

/// At most 40 characters of untrusted text for an error message, control characters escaped.
pub(crate) fn clip(s: &str) -> String {
    let mut out: String = s.chars().take(40).flat_map(char::escape_debug).collect();
    if s.chars().count() > 40 {
        out.push('…');
    }
    out
}

/// `a · b` or an error naming `what` (a value too large for 64-bit ns never wraps).
pub(crate) fn mul(ctx: &Ctx, line: usize, a: u64, b: u64, what: &str) -> Result<u64, ImportError> {
    a.checked_mul(b)
        .ok_or_else(|| ctx.err(line, format!("{what} {a} is too large (over 2^64 ns)")))
}

/// Sum of counts, or an error (counts that overflow 64 bits are not a histogram).
pub(crate) fn total<'a>(
    ctx: &Ctx,
    line: usize,
    counts: impl IntoIterator<Item = &'a u64>,
) -> Result<u64, ImportError> {
    counts
        .into_iter()
        .try_fold(0u64, |a, &c| a.checked_add(c))
        .ok_or_else(|| ctx.err(line, "sample counts add up to more than 2^64"))
}

/// The error for a file with too many threads (columns).
pub(crate) fn check_threads(ctx: &Ctx, line: usize, n: usize) -> Result<(), ImportError> {
    if n > MAX_THREADS {
        return Err(ctx.err(
            line,
            format!("{n} threads (columns): at most {MAX_THREADS} can be imported"),
        ));
    }
    Ok(())
}

/// The layout of an import: `width_ns` buckets up to `limit_ns` (what the file gives), but
/// linear only up to `max(MIN_DENSE_BUCKETS, rows)` buckets, where `rows` is how many bucket
/// rows the file prints: memory follows the file, not the numbers in it. Returns the layout
/// and, when it was cut, a note saying so.
pub(crate) fn layout(
    ctx: &Ctx,
    line: usize,
    width_ns: u64,
    limit_ns: u128,
    rows: usize,
) -> Result<(Layout, Option<String>), ImportError> {
    let width = width_ns.max(1);
    let wanted = limit_ns.div_ceil(u128::from(width)).max(1);
    let cap = MIN_DENSE_BUCKETS.max(rows as u64);
    let mut n = u64::try_from(wanted).unwrap_or(u64::MAX).min(cap);
    // The layout's minimum (64 ns) and maximum (u64::MAX / 4 ns) limits.
    n = n.max(64u64.div_ceil(width));
    n = n.min((u64::MAX / 4) / width).max(1);
    let l = Layout {
        bucket_ns: width,
        linear_buckets: n,
    };
    l.validate()
        .map_err(|e| ctx.err(line, format!("bucket width {width_ns} ns: {e}")))?;
    let note = (u128::from(l.limit_ns()) < limit_ns).then(|| {
        format!(
            "buckets from {} µs up are kept in the log-scaled tail (≤ 3.2 % wide), as latlab does above its histogram limit: the file prints {rows} bucket rows, so it gets {n} linear buckets, not one per {width_ns} ns up to {} µs; min, max and mean are as the file gives them",
            l.limit_ns() / 1_000,
            limit_ns / 1_000
        )
    });
    Ok((l, note))
}

/// One imported thread: its histogram and what the file says about it.
pub(crate) struct Thread {
    pub cpu: u32,
    pub hist: Histogram,
    pub info: ThreadInfo,
}

/// What a tool printed of one histogram, in ns: its buckets (lower bound, count), the samples
/// beyond them (counted, values unknown), its min and max, and its mean when it prints one.
pub(crate) struct Printed<'a> {
    pub buckets: &'a [(Nanos, u64)],
    pub unknown_above: u64,
    pub min_ns: Nanos,
    pub max_ns: Nanos,
    pub avg_ns: Option<f64>,
}

/// Build a histogram from per-bucket counts in native units, the tool's min/max and (when
/// known) its average. Sum comes from the average × count (so `exact_moments` is false); the
/// sum of squares is estimated from bucket midpoints (and the limit for overflows, a lower
/// bound), since no tool prints it.
///
/// A native bucket `[lo, lo + layout.bucket_ns)` above the linear part (see [`layout`]) is
/// counted in the tail bucket holding `lo`: the tools print whole-µs values, and `lo` is the
/// value they give (as their min and max are), as in the `-v` importer.
pub(crate) fn build_hist(
    ctx: &Ctx,
    line: usize,
    layout: Layout,
    printed: Printed<'_>,
) -> Result<Histogram, ImportError> {
    let Printed {
        buckets,
        unknown_above,
        min_ns,
        max_ns,
        avg_ns,
    } = printed;
    let mut counts = vec![0u64; layout.len()];
    let mut n = unknown_above as u128;
    let mut mid_sum = 0f64;
    let mut sq = 0f64;
    let width = layout.bucket_ns;
    for &(lo, c) in buckets {
        let i = if lo < layout.limit_ns() {
            layout.index_of_lower(lo)
        } else {
            lo.is_multiple_of(width).then(|| layout.index(lo))
        }
        .ok_or_else(|| {
            ctx.err(
                line,
                format!("bucket at {lo} ns does not start a bucket of the file's layout"),
            )
        })?;
        counts[i] = counts[i]
            .checked_add(c)
            .ok_or_else(|| ctx.err(line, "bucket count overflows"))?;
        n += c as u128;
        let top = lo.saturating_add(width);
        let mid = lo as f64 + (top.min(max_ns.max(lo)) - lo) as f64 / 2.0;
        mid_sum += mid * c as f64;
        sq += mid * mid * c as f64;
    }
    let limit = layout.limit_ns() as f64;
    let n_f = n as f64;
    let sum = match avg_ns {
        Some(a) if a.is_finite() && a >= 0.0 => (a * n_f).round() as u128,
        _ => (mid_sum + limit * unknown_above as f64).round() as u128,
    };
    if unknown_above > 0 {
        // The overflows' mean is what the average leaves after the buckets (at least the
        // limit); Σx² ≥ n·mean² for them, so this keeps the estimate a lower bound.
        let over_mean = ((sum as f64 - mid_sum) / unknown_above as f64).max(limit);
        sq += over_mean * over_mean * unknown_above as f64;
    }
    // Keep the estimate consistent: Σx² ≥ (Σx)²/n, so the variance is never negative.
    let mut sumsq = sq.round() as u128;
    if n > 0 {
        let floor = ((sum as f64) * (sum as f64) / n_f).ceil() as u128;
        sumsq = sumsq.max(floor);
    }
    Histogram::from_parts(HistParts {
        layout,
        counts,
        min: min_ns,
        max: max_ns,
        sum,
        sumsq,
        unknown_above,
        exact_moments: false,
    })
    .map_err(|e: HistError| ctx.err(line, format!("inconsistent histogram: {e}")))
}

/// What every importer found: the tool, the run's label, its threads, and what the file says
/// of the command, the machine and the interval, with the importer's notes.
pub(crate) struct Imported<'a> {
    pub source: Source,
    pub label: &'a str,
    pub threads: Vec<Thread>,
    pub command_line: Option<String>,
    pub machine: Machine,
    pub interval_ns: Option<Nanos>,
    pub notes: Vec<String>,
}

/// Assemble the record common to every importer.
pub(crate) fn record(imported: Imported<'_>) -> RunRecord {
    let Imported {
        source,
        label,
        threads,
        command_line,
        machine,
        interval_ns,
        notes,
    } = imported;
    let layout = threads.first().map(|t| t.hist.layout());
    RunRecord {
        schema_version: SCHEMA_VERSION,
        run_id: None,
        label: label.to_string(),
        source,
        complete: true,
        tool_version: None,
        command_line,
        started_at: None,
        ended_at: None,
        config: RunConfig {
            mode: "timer".into(),
            backend: "import".into(),
            interval_ns,
            cpus: threads.iter().map(|t| t.cpu).collect(),
            hist_limit_ns: layout.map(|l| l.limit_ns()),
            bucket_ns: layout.map(|l| l.bucket_ns),
            priority: threads.iter().find_map(|t| t.info.priority),
            ..RunConfig::default()
        },
        machine,
        inventory: None,
        total: Stats::default(),
        cpus: threads
            .into_iter()
            .map(|t| CpuRecord {
                cpu: t.cpu,
                stats: Stats::default(),
                histogram: t.hist.to_record(),
                per_second_max_ns: vec![],
                top_spikes: vec![],
                thread: t.info,
                mode: None,
            })
            .collect(),
        spikes: vec![],
        trace: None,
        loads: vec![],
        activity: None,
        scenario: None,
        profile: None,
        intervals: None,
        until: None,
        warnings: vec![],
        notes,
    }
}

/// The value of a cyclictest option in a command line (`-i 1000`, `-i1000`, `--interval=1000`).
pub(crate) fn cmdline_opt(cmd: &str, short: &str, long: &str) -> Option<String> {
    let toks: Vec<&str> = cmd.split_whitespace().collect();
    for (i, t) in toks.iter().enumerate() {
        if *t == short || *t == long {
            return toks.get(i + 1).map(|s| s.to_string());
        }
        if let Some(v) = t.strip_prefix(&format!("{long}=")) {
            return Some(v.to_string());
        }
        if short.len() == 2 && t.starts_with(short) && t.len() > 2 && !t.starts_with("--") {
            return Some(t[2..].to_string());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_every_fixture_format() {
        assert_eq!(sniff(b"  {\"a\":1}"), Some(From::CyclictestJson));
        assert_eq!(
            sniff(b"# Histogram\n000000 000001\n"),
            Some(From::Cyclictest)
        );
        assert_eq!(
            sniff(b"Max CPUs = 2\n  0: 1: 56\n"),
            Some(From::CyclictestVerbose)
        );
        assert_eq!(sniff(b"0.0 12\n0.1 3\n"), Some(From::Realfeel));
        assert_eq!(
            sniff(b"# RTLA timerlat histogram\nIndex IRQ-000 Thr-000\n"),
            Some(From::Rtla)
        );
        assert_eq!(sniff(b"hello world\n"), None);
        let f = |n: &str| {
            std::fs::read(format!(
                "{}/tests/fixtures/import/{n}",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap()
        };
        assert_eq!(sniff(&f("oslat-c1-D5.txt")), Some(From::Oslat));
        assert_eq!(sniff(&f("oslat-c01.json")), Some(From::OslatJson));
        assert_eq!(sniff(&f("stress-ng-cyclic.txt")), Some(From::StressNg));
        assert_eq!(
            sniff(&f("jitterdebugger-results.json")),
            Some(From::Jitterdebugger)
        );
        assert_eq!(sniff(&f("pmqtest-S-q.txt")), Some(From::Pmqtest));
        assert_eq!(sniff(&f("ptsematest.json")), Some(From::Ptsematest));
        assert_eq!(
            sniff(&f("cyclictest-h2000-2cpu.json")),
            Some(From::CyclictestJson)
        );
        assert_eq!(sniff(b""), None);
    }

    #[test]
    fn cmdline_options() {
        let c = "cyclictest -m -S -p95 -i 1000 --histogram=2000 -D 10s";
        assert_eq!(cmdline_opt(c, "-i", "--interval").as_deref(), Some("1000"));
        assert_eq!(cmdline_opt(c, "-p", "--priority").as_deref(), Some("95"));
        assert_eq!(cmdline_opt(c, "-h", "--histogram").as_deref(), Some("2000"));
        assert_eq!(cmdline_opt(c, "-x", "--xx"), None);
    }

    #[test]
    fn unknown_format_is_a_clear_error() {
        let e = import(b"garbage\n", From::Auto, "x.txt").unwrap_err();
        assert!(
            e.to_string().starts_with("x.txt: cannot tell the format"),
            "{e}"
        );
    }
}
