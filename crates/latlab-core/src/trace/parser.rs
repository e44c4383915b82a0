//! The tracefs TEXT parser: the kernel's `trace` / `per_cpu/cpuN/trace` files and
//! `trace-cmd report` output, turned into typed [`Event`]s.
//!
//! Why hand-written and anchored: a task name (comm) can hold spaces, `-digits`, brackets, tabs,
//! ANSI escapes and even a newline, so one event can span two text lines. Splitting on spaces
//! breaks on the first odd comm. We anchor on the fixed part of every line instead,
//! ` [CPU] FLAGS SECS.FRAC: ` (kernel) or ` CPUFLAGS SECS.FRAC: ` (`trace-cmd report -l`), and
//! parse each event body by its keys, taking comms between known keys (`prev_comm=` …
//! ` prev_pid=`), never by token position.
//!
//! A line with no anchor is either the tail of the previous event (its body was cut by a newline
//! in a comm) or the head of the next one (the TASK column of the next line held the newline).
//! We join it to whichever side makes a complete event. What still is not an event is skipped,
//! as a [`Record::Skipped`] naming its first line and why: one odd line (a comm that imitates
//! the layout, a cut event) costs that line, not the trace. The parser never panics on any input
//! (property-tested).

use super::event::{event_at, event_from, Event};
use super::line::{anchor, split_task};

/// Errors carry the 1-based line number; the caller adds the file name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {msg}")]
pub struct ParseError {
    pub line: usize,
    pub msg: String,
}

/// A line of the trace that is not an event but matters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record<'a> {
    Event(Event<'a>),
    /// `CPU:N [LOST M EVENTS]` (trace_pipe) — history before it is incomplete.
    Lost {
        line: usize,
        cpu: u32,
        events: u64,
    },
    /// Text that is not an event (nor a comment, a header, a lost-events line): `lines` lines
    /// from `line`, left out of the analysis.
    Skipped {
        line: usize,
        lines: usize,
        msg: String,
    },
    /// The text's last line has no newline (a truncated file?): given before the record that
    /// holds that line (an event starting on it has this `line`).
    CutShort {
        line: usize,
    },
}

impl Record<'_> {
    /// Shift the line number by `by` (a block's records, numbered from its first line).
    pub fn shift_line(&mut self, by: usize) {
        match self {
            Record::Event(e) => e.line += by,
            Record::Lost { line, .. }
            | Record::Skipped { line, .. }
            | Record::CutShort { line } => *line += by,
        }
    }
}

/// The header's `entries-in-buffer/entries-written: A/B`: B > A means the ring overwrote events.
pub fn header_entries(text: &str) -> Option<(u64, u64)> {
    for l in text.lines().take(50) {
        if let Some(rest) = l.strip_prefix("# entries-in-buffer/entries-written:") {
            let v = rest.split_whitespace().next()?;
            let (a, b) = v.split_once('/')?;
            return Some((a.parse().ok()?, b.parse().ok()?));
        }
    }
    None
}

fn lost_marker(l: &str) -> Option<(u32, u64)> {
    // `CPU:0 [LOST 6045 EVENTS]`
    let rest = l.strip_prefix("CPU:")?;
    let (cpu, rest) = rest.split_once(' ')?;
    let n = rest.strip_prefix("[LOST ")?.strip_suffix(" EVENTS]")?;
    Some((cpu.parse().ok()?, n.parse().ok()?))
}

/// `text.split('\n').enumerate()` with memchr (the line split is a large part of the work).
struct Lines<'a> {
    text: &'a str,
    pos: usize,
    idx: usize,
}

impl<'a> Iterator for Lines<'a> {
    type Item = (usize, &'a str);

    fn next(&mut self) -> Option<(usize, &'a str)> {
        if self.pos > self.text.len() {
            return None;
        }
        let rest = &self.text[self.pos..];
        let end = memchr::memchr(b'\n', rest.as_bytes()).unwrap_or(rest.len());
        self.pos += end + 1;
        let i = self.idx;
        self.idx += 1;
        Some((i, &rest[..end]))
    }
}

/// Streaming parser: one [`Record`] at a time, so a 200 MB trace needs no 200 MB of events.
pub struct Parser<'a> {
    lines: Lines<'a>,
    /// The last anchored event text, not emitted yet (a following line may be its tail).
    prev: Option<(usize, String)>,
    /// Lines without an anchor, waiting to be joined.
    pending: Option<(usize, String, usize)>,
    out: std::collections::VecDeque<Record<'a>>,
    done: bool,
}

impl<'a> Parser<'a> {
    /// How many lines the parser has read (at the end: one past the last '\n').
    pub(super) fn lines_read(&self) -> usize {
        self.lines.idx
    }

    pub fn new(text: &'a str) -> Parser<'a> {
        Parser {
            lines: Lines {
                text,
                pos: 0,
                idx: 0,
            },
            prev: None,
            pending: None,
            out: Default::default(),
            done: false,
        }
    }

    fn emit(&mut self, line: usize, text: &str) {
        // `text` is a joined, temporary string: the event owns its names.
        let r = match event_from(line, text) {
            Ok(e) => Record::Event(e.into_owned()),
            Err(msg) => skipped(line, text, msg),
        };
        self.out.push_back(r);
    }

    /// Settle the pending unanchored text against `prev`; returns a head prefix for the next
    /// anchored line, if the pending text belongs there.
    fn settle(&mut self, at_eof: bool) -> Option<(usize, String)> {
        let prev = self.prev.take();
        let pending = self.pending.take();
        match (prev, pending) {
            (Some((pl, pt)), Some((ql, qt, _))) => {
                if event_from(pl, &pt).is_err() {
                    let joined = format!("{pt}\n{qt}");
                    if event_from(pl, &joined).is_ok() {
                        self.emit(pl, &joined);
                        return None;
                    }
                }
                self.emit(pl, &pt);
                if at_eof {
                    let msg = "incomplete event line (truncated file?)".into();
                    self.out.push_back(skipped(ql, &qt, msg));
                    return None;
                }
                Some((ql, qt))
            }
            (Some((pl, pt)), None) => {
                self.emit(pl, &pt);
                None
            }
            (None, Some((ql, qt, _))) => {
                if at_eof {
                    self.out.push_back(not_a_line(ql, &qt));
                    return None;
                }
                Some((ql, qt))
            }
            (None, None) => None,
        }
    }
}

impl<'a> Parser<'a> {
    /// Append every record to `out`, as `out.extend(parser)` would. Lines that are complete
    /// events while nothing is pending (almost all) are parsed here in a tight loop and pushed
    /// in place; anything else is handed back to [`Iterator::next`], from that same line.
    pub fn fill(&mut self, out: &mut Vec<Record<'a>>) {
        loop {
            if self.prev.is_none() && self.pending.is_none() && self.out.is_empty() && !self.done {
                let (pos, idx) = (self.lines.pos, self.lines.idx);
                if let Some((i, raw)) = self.lines.next() {
                    let l = raw.strip_suffix('\r').unwrap_or(raw);
                    // A last line without its newline goes the general way (it is noted).
                    if self.lines.pos <= self.lines.text.len() {
                        if let Some(a) = anchor(l) {
                            if let Ok(ev) = event_at(i + 1, l, a) {
                                out.push(Record::Event(ev));
                                continue;
                            }
                        }
                    }
                    // Not a complete event: the general path reads this line again.
                    self.lines.pos = pos;
                    self.lines.idx = idx;
                }
            }
            match self.next() {
                Some(r) => out.push(r),
                None => return,
            }
        }
    }
}

/// A skipped text of one or more lines from `line`.
fn skipped<'a>(line: usize, text: &str, msg: String) -> Record<'a> {
    Record::Skipped {
        line,
        lines: 1 + memchr::memchr_iter(b'\n', text.as_bytes()).count(),
        msg,
    }
}

fn not_a_line<'a>(line: usize, text: &str) -> Record<'a> {
    let msg = format!(
        "not a tracefs text line: {:?} (expected 'TASK-PID [CPU] FLAGS TIMESTAMP: event: …')",
        truncate(text, 60)
    );
    skipped(line, text, msg)
}

/// `trace-cmd report` preamble lines: `version = 6`, `cpus=2`, `CPU 0 is empty`, …
fn is_tracecmd_header(l: &str) -> bool {
    l.starts_with("cpus=")
        || l.starts_with("version = ")
        || (l.starts_with("CPU ") && l.ends_with(" is empty"))
        || (l.starts_with("CPU") && l.contains(" data recorded at offset="))
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

impl<'a> Iterator for Parser<'a> {
    type Item = Record<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(r) = self.out.pop_front() {
                return Some(r);
            }
            if self.done {
                return None;
            }
            let Some((i, raw)) = self.lines.next() else {
                self.settle(true);
                self.done = true;
                continue;
            };
            let line = i + 1;
            let l = raw.strip_suffix('\r').unwrap_or(raw);
            let unterminated = self.lines.pos > self.lines.text.len() && !raw.is_empty();
            if let Some(a) = anchor(l) {
                let mut head = if self.prev.is_none() && self.pending.is_none() {
                    None
                } else {
                    self.settle(false)
                };
                // A head and this line's TASK column make one comm: at most 15 bytes (else
                // the head is lines of something else, skipped).
                if let Some((hl, ht)) = &head {
                    let col = format!("{ht}\n{}", &l[..a.task_end]);
                    if split_task(&col).0.len() > 15 {
                        self.out.push_back(not_a_line(*hl, ht));
                        head = None;
                    }
                }
                if unterminated {
                    self.out.push_back(Record::CutShort { line });
                }
                match head {
                    Some((hl, ht)) => self.prev = Some((hl, format!("{ht}\n{l}"))),
                    // Fast path: a line that is a complete event is emitted at once (only an
                    // incomplete one can have a tail on the next line).
                    None => match event_at(line, l, a) {
                        Ok(ev) if self.out.is_empty() => return Some(Record::Event(ev)),
                        Ok(ev) => self.out.push_back(Record::Event(ev)),
                        Err(_) => self.prev = Some((line, l.to_string())),
                    },
                }
                continue;
            }
            if l.trim().is_empty() || l.starts_with('#') || is_tracecmd_header(l) {
                continue;
            }
            if unterminated {
                self.out.push_back(Record::CutShort { line });
            }
            // The tail of the previous event (a newline inside one of its comms)?
            if self.pending.is_none() {
                if let Some((pl, pt)) = &mut self.prev {
                    if event_from(*pl, pt).is_err() {
                        let joined = format!("{pt}\n{l}");
                        if event_from(*pl, &joined).is_ok() {
                            *pt = joined;
                            continue;
                        }
                    }
                }
            }
            if let Some((cpu, events)) = lost_marker(l) {
                if let Some((ql, qt)) = self.settle(false) {
                    self.out.push_back(not_a_line(ql, &qt));
                }
                self.out.push_back(Record::Lost { line, cpu, events });
                continue;
            }
            match &mut self.pending {
                // Two unanchored lines wait already. A comm holds at most 15 bytes, but a
                // switch whose comms hold newlines has several tail lines, and the next event
                // may start with head lines: settle what waits against the previous event
                // first, then keep at most the last of it as a head and skip what is before.
                Some((_, _, n)) if *n >= 2 => {
                    let rest = self.settle(false);
                    self.pending = match rest {
                        Some((ql, qt)) => {
                            let cut = qt.rfind('\n').map_or(0, |p| p + 1);
                            let dropped = &qt[..cut.saturating_sub(1)];
                            let n = 1 + memchr::memchr_iter(b'\n', dropped.as_bytes()).count();
                            self.out.push_back(not_a_line(ql, dropped));
                            Some((ql + n, format!("{}\n{l}", &qt[cut..]), 2))
                        }
                        None => Some((line, l.to_string(), 1)),
                    };
                }
                Some((_, t, n)) => {
                    t.push('\n');
                    t.push_str(l);
                    *n += 1;
                }
                None => self.pending = Some((line, l.to_string(), 1)),
            }
        }
    }
}

/// The error for a text without a single event: at the first line skipped and why, if any,
/// else at its last line.
pub(super) fn no_events(text: &str, first_skipped: Option<(usize, &str)>) -> ParseError {
    const NONE: &str = "no trace events found (is this a tracefs text trace?)";
    match first_skipped {
        Some((line, why)) => ParseError {
            line,
            msg: format!("{why}; {NONE}"),
        },
        None => ParseError {
            line: text.split('\n').count(),
            msg: NONE.into(),
        },
    }
}

/// Parse a whole trace: its records, what is not an event skipped as [`Record::Skipped`]. A
/// text without a single event is an error (naming the first line skipped, if any).
pub fn parse(text: &str) -> Result<Vec<Record<'_>>, ParseError> {
    let v: Vec<Record> = Parser::new(text).collect();
    if !v.iter().any(|r| matches!(r, Record::Event(_))) {
        let first = v.iter().find_map(|r| match r {
            Record::Skipped { line, msg, .. } => Some((*line, msg.as_str())),
            _ => None,
        });
        return Err(no_events(text, first));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::fixtures::*;
    use crate::trace::EventKind;

    fn events(t: &str) -> Vec<Event<'_>> {
        parse(t)
            .unwrap()
            .into_iter()
            .filter_map(|r| match r {
                Record::Event(e) => Some(e),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn every_event_of_the_kernel_sample() {
        let ev = events(EVENTS);
        assert_eq!(ev.len(), 48);
        let e = &ev[0];
        assert_eq!((e.cpu, e.ts, e.pid), (1, 1_471_553_785_000, 6861));
        assert_eq!(e.task_comm, "record.sh");
        match &e.kind {
            EventKind::SchedSwitch {
                prev,
                prev_state,
                next,
            } => {
                assert_eq!((prev.pid, prev.prio, &**prev_state), (6861, 120, "S"));
                assert_eq!((&*next.comm, next.pid), ("record.sh", 6876));
            }
            k => panic!("{k:?}"),
        }
        let count = |f: fn(&EventKind) -> bool| ev.iter().filter(|e| f(&e.kind)).count();
        assert_eq!(count(|k| matches!(k, EventKind::SchedWaking { .. })), 3);
        assert_eq!(
            count(|k| matches!(k, EventKind::IrqEntry { name, .. } if name == "virtio1-req.0")),
            3
        );
        assert_eq!(
            count(|k| matches!(k, EventKind::SoftirqEntry { name, vec: 4 } if name == "BLOCK")),
            3
        );
        assert_eq!(count(|k| matches!(k, EventKind::SoftirqExit { .. })), 3);
        assert_eq!(
            count(
                |k| matches!(k, EventKind::VectorEntry { name, vector: 236 } if name == "local_timer")
            ),
            3
        );
        assert_eq!(
            count(
                |k| matches!(k, EventKind::VectorEntry { name, .. } if name == "call_function_single")
            ),
            4
        );
        assert_eq!(count(|k| matches!(k, EventKind::Marker { .. })), 2);
        assert!(ev.iter().any(|e| matches!(&e.kind,
            EventKind::HrtimerStart { function, expires: 2071658647506, .. } if function == "hrtimer_wakeup")));
        assert!(ev.iter().any(|e| matches!(
            &e.kind,
            EventKind::HrtimerExpireEntry {
                now: 1471556035534,
                ..
            }
        )));
        // The comm with spaces and brackets in the TASK column.
        assert!(ev
            .iter()
            .any(|e| e.task_comm == "evil name-9 [x]" && e.pid == 6880));
    }

    #[test]
    fn odd_comms_and_events_spanning_two_lines() {
        let odd = un_cat_a(ODD);
        let ev = events(&odd);
        assert_eq!(ev.len(), 11);
        assert_eq!(ev[0].task_comm, "evil name-9 [x]");
        // Head joined: the TASK column held the newline.
        assert_eq!(ev[8].task_comm, "nl\nx\ttab\x1b[1m");
        assert_eq!(ev[8].pid, 12332);
        assert_eq!(ev[8].line, 12);
        // Tail joined: the prev_comm held the newline.
        match &ev[9].kind {
            EventKind::SchedSwitch { prev, next, .. } => {
                assert_eq!(prev.comm, "nl\nx\ttab\x1b[1m");
                assert_eq!(prev.pid, 12332);
                assert_eq!(next.comm, "rustc");
            }
            k => panic!("{k:?}"),
        }
        match &ev[10].kind {
            EventKind::SchedSwitch { prev, next, .. } => {
                assert_eq!(prev.comm, "opt cgu.3");
                assert_eq!(next.comm, "memfd:sealed-91");
            }
            k => panic!("{k:?}"),
        }
    }

    #[test]
    fn trace_cmd_report_format() {
        let ev = events(WORST);
        assert_eq!(ev.len(), 59);
        let e = &ev[0];
        assert_eq!((e.cpu, e.ts, e.pid), (1, 1_549_929_745_568, 15780));
        assert_eq!(e.task_comm, "rust-lld");
        assert!(
            matches!(&ev[3].kind, EventKind::SchedWakeup { task, target_cpu: Some(1) }
            if task.comm == "python3" && task.pid == 15520 && task.prio == 19)
        );
        assert!(
            matches!(&ev[6].kind, EventKind::SchedSwitch { prev, prev_state, next }
            if prev.pid == 15780 && prev.prio == 120 && prev_state == "R" && next.pid == 15520 && next.prio == 19)
        );
        assert!(
            matches!(&ev[7].kind, EventKind::Marker { text } if text.starts_with("latlab seq=296"))
        );
        assert!(
            matches!(&ev[1].kind, EventKind::HrtimerExpireEntry { function, now: 1549929746009, .. }
            if function == "hrtimer_wakeup")
        );
        assert!(ev[1].flags.hardirq && ev[1].flags.irqs_off);
    }

    #[test]
    fn lost_events_and_header() {
        // The fixture is a composite: stats, header, then trace_pipe lines.
        let pipe = &LOST[LOST.find("CPU:0 [LOST").unwrap()..];
        let pipe = pipe.replace("\n--\n", "\n");
        let r = parse(&pipe).unwrap();
        let lost: Vec<_> = r
            .iter()
            .filter_map(|r| match r {
                Record::Lost { cpu, events, .. } => Some((*cpu, *events)),
                _ => None,
            })
            .collect();
        assert_eq!(lost, vec![(0, 6045), (1, 7533)]);
        assert_eq!(header_entries(LOST), Some((592, 14170)));
    }

    #[test]
    fn garbage_without_events_is_an_error_and_among_events_is_skipped_with_lines() {
        let e = parse("hello world\nthis is not a trace\n").unwrap_err();
        assert_eq!(e.line, 1, "{e}");
        assert!(e.msg.contains("no trace events"), "{e}");
        let e = parse("").unwrap_err();
        assert!(e.msg.contains("no trace events"), "{e}");
        // Cut in the middle of a sched_switch body.
        let cut = "  bash-1 [000] d..2.  1.000001: sched_switch: prev_comm=bash prev_pid=1 prev_pr";
        let e = parse(cut).unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.msg.contains("sched_switch"), "{e}");
        let ok =
            "  bash-1 [000] d..2.  1.000001: sched_waking: comm=x pid=2 prio=120 target_cpu=000\n";
        let t = format!("{ok}{ok}garbage line\nmore garbage\neven more\nand more\n{ok}");
        let r = parse(&t).unwrap();
        let skipped: Vec<(usize, usize)> = r
            .iter()
            .filter_map(|r| match r {
                Record::Skipped { line, lines, .. } => Some((*line, *lines)),
                _ => None,
            })
            .collect();
        // Unanchored lines before an event may be the head of its TASK column (a comm with
        // newlines), but not these: with it they would make a comm longer than 15 bytes.
        assert_eq!(skipped, vec![(3, 1), (4, 1), (5, 2)]);
        let events: Vec<&Event> = r
            .iter()
            .filter_map(|r| match r {
                Record::Event(e) => Some(e),
                _ => None,
            })
            .collect();
        assert_eq!(events.len(), 3);
        assert_eq!((events[2].task_comm.as_ref(), events[2].line), ("bash", 7));
        // The last line without its newline: noted before the record that holds it.
        let t = format!("{ok}{}", ok.trim_end());
        let r = parse(&t).unwrap();
        assert!(
            matches!(
                r[..],
                [
                    Record::Event(_),
                    Record::CutShort { line: 2 },
                    Record::Event(_)
                ]
            ),
            "{r:?}"
        );
        let t = format!("{ok}# a comment");
        let r = parse(&t).unwrap();
        assert!(matches!(r[..], [Record::Event(_)]), "{r:?}");
    }

    /// Regression (issue 14): a switch whose comms both hold a newline, then an event of that
    /// task (its TASK column holds the newline too): four unanchored lines in a row, which the
    /// parser rejected ("not a tracefs text line"). The kernel's own layout, as in
    /// trace-oddcomm.txt; any user can name a task so (prctl(PR_SET_NAME)).
    #[test]
    fn regression_newline_comms_on_both_sides_then_an_event_of_that_task() {
        let nl = "nl\nx";
        let t = format!(
            "          <idle>-0       [001] d..2.  100.000001: sched_switch: prev_comm={nl} prev_pid=6 prev_prio=120 prev_state=S ==> next_comm={nl} next_pid=5 next_prio=120\n\
             {:>16}-5       [001] d.h..  100.000003: local_timer_entry: vector=236\n\
             {:>16}-5       [001] d..2.  100.000004: sched_switch: prev_comm=a\nb\nc prev_pid=5 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120\n\
             {:>16}-0       [001] d.h..  100.000005: local_timer_exit: vector=236\n",
            nl, nl, "<idle>"
        );
        let r = parse(&t).unwrap();
        assert!(r.iter().all(|r| matches!(r, Record::Event(_))), "{r:#?}");
        let ev = events(&t);
        assert_eq!(ev.len(), 4);
        assert!(
            matches!(&ev[0].kind, EventKind::SchedSwitch { prev, next, .. }
            if prev.comm == nl && next.comm == nl && next.pid == 5)
        );
        assert_eq!((&*ev[1].task_comm, ev[1].pid, ev[1].line), (nl, 5, 4));
        assert!(
            matches!(&ev[2].kind, EventKind::SchedSwitch { prev, .. } if prev.comm == "a\nb\nc")
        );
    }

    #[test]
    fn trace_cmd_report_without_latency_flags() {
        let t = "cpus=2\n          <idle>-0     [001]  1471.554117: irq_handler_entry:    irq=36 name=virtio1-req.0\n  \
                 rust-lld-15780 [001]  1549.929758453: sched_switch:         rust-lld:15780 [120] R ==> python3:15520 [19]\n";
        let ev = events(t);
        assert_eq!(ev.len(), 2);
        assert_eq!((ev[0].cpu, ev[0].pid, &*ev[0].task_comm), (1, 0, "<idle>"));
        assert!(matches!(&ev[1].kind, EventKind::SchedSwitch { next, .. } if next.pid == 15520));
    }

    proptest::proptest! {
        #[test]
        fn never_panics_on_arbitrary_bytes(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)) {
            let s = String::from_utf8_lossy(&b);
            let _ = parse(&s);
        }

        #[test]
        fn never_panics_on_mangled_real_lines(cut in 0usize..7569, junk in "[ -~\\n\\t]{0,40}") {
            let mut s: String = WORST.chars().take(cut).collect();
            s.push_str(&junk);
            s.push_str(&WORST.chars().skip(cut).collect::<String>());
            let _ = parse(&s);
        }
    }
}
