//! The drivers: a whole trace analyzed by one streaming parser ([`analyze_text`], the
//! reference), or parsed on several threads in blocks cut where the parser holds no state, fed
//! to one [`Analyzer`] in trace order ([`analyze_text_parallel`], [`analyze_bytes_parallel`]).

use super::analyzer::{is_latlab_marker, Analysis, AnalyzeOptions, Analyzer, SampleMode};
use super::event::{Event, EventKind};
use super::parser::{no_events, ParseError, Parser, Record};

/// `opts.mode`, or when None: markers if the trace holds a latlab marker, else wake-ups.
pub(super) fn mode_of(text: &str, opts: &AnalyzeOptions) -> SampleMode {
    opts.mode.unwrap_or_else(|| {
        if has_markers(text.as_bytes()) {
            SampleMode::Markers
        } else {
            SampleMode::Wakeups
        }
    })
}

/// `opts` with the noise gaps whose markers lie in `parts` (text or ring-buffer pages) when
/// the samples end at markers and the caller gave none: a spinning thread's gap has nothing
/// else in the trace to open its window at its start.
pub(super) fn with_gaps(
    opts: &AnalyzeOptions,
    mode: SampleMode,
    parts: &[&[u8]],
) -> AnalyzeOptions {
    let mut o = opts.clone();
    if mode == SampleMode::Markers && o.gaps.is_empty() {
        for p in parts {
            super::analyzer::gaps_in(p, &mut o.gaps);
        }
    }
    o
}

/// Analyze a whole text trace. With `opts.mode == None` the mode is markers if the trace holds
/// a latlab marker, else wake-ups.
pub fn analyze_text(text: &str, opts: &AnalyzeOptions) -> Result<Analysis, ParseError> {
    let mode = mode_of(text, opts);
    let mut a = Analyzer::new(with_gaps(opts, mode, &[text.as_bytes()]), mode);
    for r in Parser::new(text) {
        a.record(&r);
    }
    if a.events() == 0 {
        return Err(no_events(text, a.first_skipped()));
    }
    Ok(a.finish())
}

/// Analyze decoded events (the binary recorder's, [`super::raw`]) with the analyzer the text
/// path uses. `lost` marks where the kernel lost events: `(before, cpu, events)`, `before`
/// an index into `events` (history before it is incomplete). Events must be in time order per
/// CPU (one CPU's decode is). With `opts.mode == None` the mode is markers if a latlab marker
/// is among the events, else wake-ups. Err when there is no event.
pub fn analyze_events<'a>(
    events: &[Event<'a>],
    lost: &[(usize, u32, u64)],
    opts: &AnalyzeOptions,
) -> Result<Analysis, ParseError> {
    let mode = opts.mode.unwrap_or_else(|| {
        let marked = events
            .iter()
            .any(|e| matches!(&e.kind, EventKind::Marker { text } if is_latlab_marker(text)));
        if marked {
            SampleMode::Markers
        } else {
            SampleMode::Wakeups
        }
    });
    if events.is_empty() {
        return Err(ParseError {
            line: 0,
            msg: "no trace events found in the binary pages".into(),
        });
    }
    let mut opts = opts.clone();
    if mode == SampleMode::Markers && opts.gaps.is_empty() {
        for e in events {
            if let EventKind::Marker { text } = &e.kind {
                opts.gaps.extend(super::analyzer::noise_gap(text));
            }
        }
    }
    let mut a = Analyzer::new(opts, mode);
    let mut marks = lost.iter().peekable();
    for (i, e) in events.iter().enumerate() {
        while let Some(&(_, cpu, n)) = marks.next_if(|m| m.0 <= i) {
            a.lost(cpu, n);
        }
        a.feed(e);
    }
    for &(_, cpu, n) in marks {
        a.lost(cpu, n);
    }
    Ok(a.finish())
}

/// How the parsing is spread: over `threads` threads, in blocks of about `block` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parallel {
    pub threads: usize,
    /// Tests and the fuzz target use tiny blocks to cut small inputs many times.
    pub block: usize,
}

impl Parallel {
    /// Bytes per parsed block: its records (~168 bytes per ~135-byte line) stay in a core's
    /// cache between the worker that writes them and the feeder that reads them.
    pub const BLOCK: usize = 256 << 10;

    /// `threads` threads, blocks of [`Parallel::BLOCK`].
    pub fn threads(threads: usize) -> Parallel {
        Parallel {
            threads,
            block: Self::BLOCK,
        }
    }
}

/// [`analyze_text`] with the parsing spread over threads (the attribution stays one state
/// machine fed in trace order). Same result, same first error, for any block size: text is cut
/// only where the streaming parser holds no state ([`super::blocks::blocks`]). Memory stays
/// bounded: each worker runs at most four blocks ahead of the feeder.
pub fn analyze_text_parallel(
    text: &str,
    opts: &AnalyzeOptions,
    par: Parallel,
) -> Result<Analysis, ParseError> {
    let Parallel { threads, block } = par;
    if threads <= 1 || text.len() < 2 * block {
        return analyze_text(text, opts);
    }
    let mut opts = opts.clone();
    opts.mode = Some(mode_of(text, &opts));
    run_blocks(text.as_bytes(), &opts, threads, block, false)
        .done()
        .expect("a str is UTF-8")
}

/// [`analyze_text_parallel`] on bytes as read from a file, with the options of the mode the
/// trace calls for (markers when it holds a latlab marker, else wake-ups). None when the bytes
/// are not UTF-8: the caller analyzes a lossy copy.
///
/// No pass over the whole file comes first. Each worker checks its own block for UTF-8 just
/// before parsing it (the block is then in its cache). The mode: the recorder's marker ends
/// its trace, so the last MiB is looked at first; without a marker there, the analysis runs as
/// wake-ups while each worker also looks for a marker in its block, and one found anywhere
/// starts the analysis over as markers (the result is always the mode's own).
pub fn analyze_bytes_parallel(
    bytes: &[u8],
    par: Parallel,
    opts_for: impl Fn(SampleMode) -> AnalyzeOptions,
) -> Option<Result<Analysis, ParseError>> {
    auto_blocks(bytes, par.threads, par.block, &opts_for)
}

/// A block as text: ASCII (a kernel trace, nearly always) is checked a word at a time, anything
/// else by the full UTF-8 check.
pub(super) fn block_str(b: &[u8]) -> Option<&str> {
    if b.is_ascii() {
        // SAFETY: ASCII is valid UTF-8.
        return Some(unsafe { std::str::from_utf8_unchecked(b) });
    }
    std::str::from_utf8(b).ok()
}

/// How a run over blocks ended.
pub(super) enum Outcome {
    NotUtf8,
    /// A block holds a latlab marker (only when watching for one).
    MarkerSeen,
    Done(Result<Analysis, ParseError>),
}

impl Outcome {
    fn done(self) -> Option<Result<Analysis, ParseError>> {
        match self {
            Outcome::Done(r) => Some(r),
            Outcome::NotUtf8 => None,
            Outcome::MarkerSeen => unreachable!("markers are watched for by auto_blocks only"),
        }
    }
}

pub(super) fn auto_blocks(
    bytes: &[u8],
    threads: usize,
    block: usize,
    opts_for: &dyn Fn(SampleMode) -> AnalyzeOptions,
) -> Option<Result<Analysis, ParseError>> {
    let markers = |yes| {
        if yes {
            SampleMode::Markers
        } else {
            SampleMode::Wakeups
        }
    };
    if threads <= 1 || bytes.len() < 2 * block {
        let mode = markers(has_markers(bytes));
        return run_blocks(bytes, &opts_for(mode), threads, block, false).done();
    }
    if tail_has_markers(bytes) {
        return run_blocks(bytes, &opts_for(SampleMode::Markers), threads, block, false).done();
    }
    match run_blocks(bytes, &opts_for(SampleMode::Wakeups), threads, block, true) {
        Outcome::MarkerSeen => {
            run_blocks(bytes, &opts_for(SampleMode::Markers), threads, block, false).done()
        }
        o => o.done(),
    }
}

/// The parallel analysis with `opts.mode` set. `watch`: stop with [`Outcome::MarkerSeen`] at
/// the first block that holds a latlab marker (each block is line-aligned, so a marker line is
/// whole in one block).
pub(super) fn run_blocks(
    bytes: &[u8],
    opts: &AnalyzeOptions,
    threads: usize,
    block: usize,
    watch: bool,
) -> Outcome {
    let mode = opts.mode.expect("run_blocks: the mode is set");
    if threads <= 1 || bytes.len() < 2 * block {
        return match std::str::from_utf8(bytes) {
            Ok(text) => Outcome::Done(analyze_text(text, opts)),
            Err(_) => Outcome::NotUtf8,
        };
    }
    let mut a = Analyzer::new(with_gaps(opts, mode, &[bytes]), mode);
    let mut offset = 0usize;
    let mut stopped = None;
    let blocks = super::blocks::byte_blocks_on(bytes, block, threads);
    let n = threads.min(blocks.len());
    std::thread::scope(|s| {
        // Worker w checks and parses blocks w, w+n, w+2n, … and hands them over in that order
        // through its own bounded channel (at most 4 blocks ahead: with 2 the feeder waited at
        // times), and the fed buffers go back to it for reuse.
        let mut ways = Vec::with_capacity(n);
        for w in 0..n {
            type Buf<'t> = Vec<Record<'t>>;
            let (tx, rx) = std::sync::mpsc::sync_channel::<Result<(Buf<'_>, usize), Outcome>>(4);
            let (back, recycled) = std::sync::mpsc::channel::<Buf<'_>>();
            let mine = blocks.iter().skip(w).step_by(n);
            s.spawn(move || {
                for b in mine {
                    let Some(text) = block_str(b) else {
                        let _ = tx.send(Err(Outcome::NotUtf8));
                        return;
                    };
                    if watch && has_markers(b) {
                        let _ = tx.send(Err(Outcome::MarkerSeen));
                        return;
                    }
                    let mut buf = recycled.try_recv().unwrap_or_default();
                    let lines = super::blocks::parse_block(text, &mut buf);
                    // A closed channel: the feeder stopped (another block was not UTF-8).
                    if tx.send(Ok((buf, lines))).is_err() {
                        return;
                    }
                }
            });
            ways.push((rx, back));
        }
        for i in 0..blocks.len() {
            let (rx, back) = &ways[i % n];
            // A worker that panicked closed its channel: the scope re-raises its panic.
            let Ok(msg) = rx.recv() else {
                break;
            };
            let (recs, lines) = match msg {
                Ok(m) => m,
                Err(o) => {
                    stopped = Some(o);
                    break;
                }
            };
            feed_block(&recs, &mut a, offset);
            offset += lines;
            let _ = back.send(recs);
        }
    });
    if let Some(o) = stopped {
        return o;
    }
    Outcome::Done(if a.events() == 0 {
        let text = std::str::from_utf8(bytes).expect("every block was UTF-8");
        Err(no_events(text, a.first_skipped()))
    } else {
        Ok(a.finish())
    })
}

/// Feed one parsed block whose lines start at line `offset` of the text.
pub(super) fn feed_block<'t>(recs: &[Record<'t>], a: &mut Analyzer<'t>, offset: usize) {
    // By reference: a record is 168 bytes, and moving each one out was a memcpy per event.
    // Read only: the records (written by another core) are not shifted to whole-text line
    // numbers; the analyzer adds the offset to the few lines it keeps (warnings, skips).
    a.line_offset = offset;
    for r in recs.iter() {
        a.record(r);
    }
}

/// A latlab marker in the last MiB of `bytes` (from a line start), where the recorder's marker
/// ends its trace.
pub(super) fn tail_has_markers(bytes: &[u8]) -> bool {
    const TAIL: usize = 1 << 20;
    let mut tail = bytes.len().saturating_sub(TAIL);
    if tail > 0 {
        tail = memchr::memrchr(b'\n', &bytes[..tail]).map_or(0, |p| p + 1);
    }
    has_markers(&bytes[tail..])
}

/// The trace holds a latlab marker (`LATLAB_STOP …` or the older `latlab seq=…`); the
/// markers are ASCII, so a lossy copy of the bytes answers the same.
pub fn has_markers(b: &[u8]) -> bool {
    // Both forms are trace_marker writes (`tracing_mark_write: …`, `print: tracing_mark_write:
    // …`): one pass for those, then a look at the rest of each such line.
    memchr::memmem::find_iter(b, b"tracing_mark_write").any(|at| {
        let end = memchr::memchr(b'\n', &b[at..]).map_or(b.len(), |p| at + p);
        let l = &b[at..end];
        memchr::memmem::find(l, b"LATLAB_STOP").is_some()
            || memchr::memmem::find(l, b"latlab seq=").is_some()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::analyzer::tests::kernel_trace;

    /// [`analyze_bytes_parallel`] in blocks of 64 KiB, with `opts` in either mode.
    fn bytes_on(
        b: &[u8],
        opts: &AnalyzeOptions,
        threads: usize,
    ) -> Option<Result<Analysis, ParseError>> {
        let par = Parallel {
            threads,
            block: 64 << 10,
        };
        analyze_bytes_parallel(b, par, |m| AnalyzeOptions {
            mode: Some(m),
            ..opts.clone()
        })
    }

    use crate::trace::fixtures::WORST;

    /// The bytes path finds the mode as `analyze_text` does, with the marker anywhere: in the
    /// tail it looks at first, or earlier (found by a worker while analyzing as wake-ups, then
    /// analyzed over as markers), and refuses exactly the inputs that are not UTF-8, wherever
    /// the bad byte is.
    #[test]
    fn the_bytes_path_finds_the_mode_and_refuses_what_is_not_utf8() {
        // Over 1 MiB, so that the tail looked at first is not the whole.
        let base = include_str!("../../tests/fixtures/trace/trace-events.txt");
        let base = base.repeat((3 << 20) / base.len());
        assert!(
            !has_markers(base.as_bytes()),
            "the base must have no marker of its own"
        );
        let marker = "  latlab-cpu1-7 [001] ..... 1471.6: tracing_mark_write: LATLAB_STOP cpu=1 intended=1 actual=2 latency=1\n";
        assert!(has_markers(marker.as_bytes()));
        let lines: Vec<&str> = base.split_inclusive('\n').collect();
        let opts = AnalyzeOptions {
            threshold_ns: 0,
            mode: None,
            gaps: Vec::new(),
        };
        let whole = |t: &str| format!("{:?}", analyze_text(t, &opts));
        for at in [0, 1, lines.len() / 3, lines.len() - 1, lines.len()] {
            let mut with = lines[..at].concat();
            with.push_str(marker);
            with.push_str(&lines[at..].concat());
            let mut bad = lines[..at].concat().into_bytes();
            bad.extend_from_slice(b"\xff\xfe\n");
            bad.extend_from_slice(lines[at..].concat().as_bytes());
            let want = whole(&with);
            assert!(want.contains("Markers"), "{at}");
            for threads in [2, 3] {
                let got = bytes_on(with.as_bytes(), &opts, threads).expect("UTF-8");
                assert_eq!(format!("{got:?}"), want, "{at} {threads}");
                assert!(bytes_on(&bad, &opts, threads).is_none(), "{at} {threads}");
            }
        }
        let got = bytes_on(base.as_bytes(), &opts, 2).expect("UTF-8");
        assert_eq!(format!("{got:?}"), whole(&base));
        assert!(format!("{got:?}").contains("Wakeups"));
    }

    /// Every fixture, parsed in blocks of many sizes on 2 and 3 threads, gives the analysis of
    /// the one streaming parser; so does each fixture with a garbage line at any of several
    /// places (same first error, same line number) — the cuts land next to multi-line events
    /// (comms holding a newline), `[LOST]` markers and comments.
    #[test]
    fn parallel_blocks_give_the_sequential_analysis_and_errors() {
        const FIXTURES: [&str; 6] = [
            WORST,
            include_str!("../../tests/fixtures/trace/trace-events.txt"),
            include_str!("../../tests/fixtures/trace/trace-oddcomm.txt"),
            include_str!("../../tests/fixtures/trace/trace-lost-events.txt"),
            include_str!("../../tests/fixtures/trace/trace-missing-switch-cpu1.txt"),
            include_str!("../../tests/fixtures/trace/trace-header.txt"),
        ];
        let opts = AnalyzeOptions {
            threshold_ns: 0,
            mode: None,
            gaps: Vec::new(),
        };
        // Comms with raw newlines (the oddcomm fixture shows them through `cat -A`), names
        // that cost lines, a text cut inside its last marker.
        let odd = crate::trace::fixtures::un_cat_a(FIXTURES[2]);
        let cut = kernel_trace("a\nb\nc\nd");
        let more = [
            odd,
            kernel_trace("a\nb\nc"),
            cut.clone(),
            cut[..cut.len() - 3].to_string(),
        ];
        let mut split = 0;
        for fixture in FIXTURES
            .iter()
            .copied()
            .chain(more.iter().map(|s| s.as_str()))
        {
            let text = fixture.repeat(3);
            let lines: Vec<&str> = text.split_inclusive('\n').collect();
            let mut texts = vec![text.clone()];
            for at in [1, lines.len() / 3, lines.len() / 2, lines.len() - 2] {
                let mut t = lines[..at].concat();
                t.push_str("this is not a trace line\n");
                t.push_str(&lines[at..].concat());
                texts.push(t);
            }
            for t in &texts {
                let want = format!("{:?}", analyze_text(t, &opts));
                for block in [1, 40, 200, 1000, 3000] {
                    let bl = crate::trace::blocks::blocks(t, block);
                    assert_eq!(bl.concat(), *t);
                    split += bl.len() - 1;
                    for threads in [2, 3] {
                        let got = format!(
                            "{:?}",
                            analyze_text_parallel(t, &opts, Parallel { threads, block })
                        );
                        assert_eq!(got, want, "block {block}, {threads} threads");
                    }
                }
            }
        }
        // The cuts happened (a test of blocks that were never split would prove nothing).
        assert!(split > 1000, "{split}");
    }
}
