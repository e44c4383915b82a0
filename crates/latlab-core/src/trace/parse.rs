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

use std::borrow::Cow;
use std::fmt;

/// Errors carry the 1-based line number; the caller adds the file name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {msg}")]
pub struct ParseError {
    pub line: usize,
    pub msg: String,
}

/// The latency-format flags column: `d..2.`, `dNh3.`, `.Ns1.` …
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags {
    /// IRQs disabled (`d`, `D`).
    pub irqs_off: bool,
    /// need-resched set (`N`, `n`, `p`, `P`, `L`, …: anything but `.`).
    pub need_resched: bool,
    pub hardirq: bool,
    pub softirq: bool,
    pub nmi: bool,
    /// Preemption depth (0 when `.`).
    pub preempt_depth: u8,
}

impl Flags {
    /// Parse the 4- or 5-character flags field. None when it is not one.
    pub fn parse(s: &str) -> Option<Flags> {
        Flags::parse_bytes(s.as_bytes())
    }

    fn parse_bytes(b: &[u8]) -> Option<Flags> {
        if !(4..=5).contains(&b.len()) {
            return None;
        }
        let mut f = Flags::default();
        match b[0] {
            b'd' | b'D' => f.irqs_off = true,
            b'.' | b'b' | b'X' => {}
            _ => return None,
        }
        match b[1] {
            b'.' => {}
            b'N' | b'n' | b'p' | b'P' | b'L' | b'l' | b'B' | b'b' => f.need_resched = true,
            _ => return None,
        }
        match b[2] {
            b'.' => {}
            b'h' => f.hardirq = true,
            b's' => f.softirq = true,
            b'H' => {
                f.hardirq = true;
                f.softirq = true
            }
            b'z' | b'Z' => f.nmi = true,
            _ => return None,
        }
        f.preempt_depth = match b[3] {
            b'.' => 0,
            c @ b'0'..=b'9' => c - b'0',
            c @ b'a'..=b'f' => c - b'a' + 10,
            _ => return None,
        };
        if b.len() == 5 && !(b[4] == b'.' || b[4].is_ascii_hexdigit()) {
            return None;
        }
        Some(f)
    }
}

/// One scheduler entity as an event names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRef<'a> {
    pub comm: Cow<'a, str>,
    pub pid: i64,
    /// Kernel priority: FIFO N shows as `99-N`; CFS 100..139.
    pub prio: i64,
}

/// What happened, typed. Events latlab does not analyze are kept as [`EventKind::Other`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind<'a> {
    SchedSwitch {
        prev: TaskRef<'a>,
        /// `R+` = preempted, `R` = switched through schedule() itself, `S`, `D` …
        prev_state: Cow<'a, str>,
        next: TaskRef<'a>,
    },
    SchedWaking {
        task: TaskRef<'a>,
        target_cpu: Option<u32>,
    },
    SchedWakeup {
        task: TaskRef<'a>,
        target_cpu: Option<u32>,
    },
    IrqEntry {
        irq: i64,
        name: Cow<'a, str>,
    },
    IrqExit {
        irq: i64,
    },
    SoftirqEntry {
        vec: i64,
        name: Cow<'a, str>,
    },
    SoftirqExit {
        vec: i64,
        name: Cow<'a, str>,
    },
    /// `irq_vectors` entry events: `local_timer`, `reschedule`, `call_function_single` …
    VectorEntry {
        name: Cow<'a, str>,
        vector: i64,
    },
    VectorExit {
        name: Cow<'a, str>,
        vector: i64,
    },
    HrtimerStart {
        hrtimer: Cow<'a, str>,
        function: Cow<'a, str>,
        expires: u64,
    },
    HrtimerExpireEntry {
        hrtimer: Cow<'a, str>,
        function: Cow<'a, str>,
        now: u64,
    },
    HrtimerExpireExit {
        hrtimer: Cow<'a, str>,
    },
    /// `nmi:nmi_handler`: recorded at the end of the handler, with its duration.
    Nmi {
        handler: Cow<'a, str>,
        delta_ns: u64,
    },
    /// A `trace_marker` write (`tracing_mark_write: TEXT` or `print: tracing_mark_write: TEXT`).
    Marker {
        text: Cow<'a, str>,
    },
    Other {
        name: Cow<'a, str>,
    },
}

/// One trace event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event<'a> {
    /// 1-based line where the event starts.
    pub line: usize,
    pub cpu: u32,
    /// Timestamp in ns on the trace clock (`mono` = CLOCK_MONOTONIC in latlab's instances).
    pub ts: u64,
    /// TASK column (looked up at read time: may be stale or `<...>`).
    pub task_comm: Cow<'a, str>,
    /// PID column (exact).
    pub pid: i64,
    pub flags: Flags,
    pub kind: EventKind<'a>,
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

/// Where the fixed part of an event line is.
#[derive(Clone, Copy)]
struct Anchor {
    /// End of the TASK-PID column (start of the anchor's leading space).
    task_end: usize,
    cpu: u32,
    flags: Flags,
    ts: u64,
    /// Start of `event: body`.
    rest: usize,
}

/// Parse `SECS.FRAC` into ns (FRAC of 1..=9 digits).
fn parse_ts(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    let dot = memchr::memchr(b'.', b)?;
    let (a, f) = (&b[..dot], &b[dot + 1..]);
    if a.is_empty() || f.is_empty() || f.len() > 9 || a.len() > 11 {
        return None;
    }
    let mut secs: u64 = 0;
    for &c in a {
        if !c.is_ascii_digit() {
            return None;
        }
        secs = secs * 10 + (c - b'0') as u64;
    }
    let mut frac: u64 = 0;
    for &c in f {
        if !c.is_ascii_digit() {
            return None;
        }
        frac = frac * 10 + (c - b'0') as u64;
    }
    for _ in f.len()..9 {
        frac *= 10;
    }
    secs.checked_mul(1_000_000_000)?.checked_add(frac)
}

/// The anchor at the kernel's own fixed layout, `%16s-%-7d [CPU] FLAGS SECS.USECS: `, which puts
/// ` [` at byte 24 of (almost) every line: checked byte by byte, no search. None when the line
/// does not have that layout (long pids, trace-cmd output, odd comms); [`find_anchor`] then
/// searches. Where both succeed they agree: the search takes the first `TIMESTAMP: ` that is
/// preceded by flags and `[CPU]`, and 24 bytes of TASK-PID column cannot hold a whole anchor
/// (plus its leading space) before this one unless a comm imitates one.
#[inline]
fn fixed_anchor(line: &str) -> Option<Anchor> {
    const COL: usize = 24;
    /// The fixed part (` [CPU] FLAGS SECS.FRAC: `) is read from a window of this many bytes
    /// after the TASK-PID column; a line too short for it, or an anchor that does not fit, goes
    /// to the search.
    const WIN: usize = 48;
    const POW10: [u64; 10] = [
        1,
        10,
        100,
        1_000,
        10_000,
        100_000,
        1_000_000,
        10_000_000,
        100_000_000,
        1_000_000_000,
    ];
    let w: &[u8; WIN] = line.as_bytes().get(COL..COL + WIN)?.try_into().ok()?;
    if w[0] != b' ' || w[1] != b'[' {
        return None;
    }
    let (n, cpu) = lead_digits(w[2..10].try_into().unwrap());
    if n == 0 || n > 6 {
        return None;
    }
    let i = 2 + n;
    if w[i] != b']' || w[i + 1] != b' ' {
        return None;
    }
    let fl = i + 2;
    // The flags field is 4 or 5 bytes, then a space (a space inside it fails parse_bytes).
    let fl_end = if w[fl + 4] == b' ' {
        fl + 4
    } else if w[fl + 5] == b' ' {
        fl + 5
    } else {
        return None;
    };
    let flags = Flags::parse_bytes(&w[fl..fl_end])?;
    let mut j = fl_end;
    while j < WIN && w[j] == b' ' {
        j += 1;
    }
    // SECS: 1 to 11 digits, read 8 at a time.
    let (mut secs_len, mut secs) = lead_digits(w.get(j..j + 8)?.try_into().unwrap());
    if secs_len == 8 {
        let (n2, v2) = lead_digits(w.get(j + 8..j + 16)?.try_into().unwrap());
        secs_len += n2;
        secs = secs * POW10[n2.min(9)] + v2;
    }
    if secs_len == 0 || secs_len > 11 {
        return None;
    }
    j += secs_len;
    if w[j] != b'.' {
        return None;
    }
    j += 1;
    // FRAC: 1 to 9 digits.
    let (mut frac_len, mut frac) = lead_digits(w.get(j..j + 8)?.try_into().unwrap());
    if frac_len == 8 {
        let more = w.get(j + 8..j + 10)?;
        if more[0].is_ascii_digit() {
            if more[1].is_ascii_digit() {
                return None;
            }
            frac = frac * 10 + (more[0] - b'0') as u64;
            frac_len = 9;
        }
    }
    if frac_len == 0 {
        return None;
    }
    j += frac_len;
    if w.get(j..j + 2)? != b": " {
        return None;
    }
    Some(Anchor {
        task_end: COL,
        cpu: cpu as u32,
        flags,
        ts: secs
            .checked_mul(1_000_000_000)?
            .checked_add(frac * POW10[9 - frac_len])?,
        rest: COL + j + 2,
    })
}

/// The decimal digits at the start of 8 bytes: (how many, their value), in a few word
/// operations ([`non_digit_bytes`]); the digits, shifted to the top of the word with zeros
/// (leading zeros) below them, are combined pairwise, then in fours, then all eight.
#[inline(always)]
fn lead_digits(b: &[u8; 8]) -> (usize, u64) {
    let w = u64::from_le_bytes(*b);
    let n = (non_digit_bytes(w).trailing_zeros() / 8) as usize;
    if n == 0 {
        return (0, 0);
    }
    // The first digit is the lowest byte: keep the n digit values, move them to the top.
    let d = (w ^ 0x3030_3030_3030_3030) << (8 * (8 - n));
    let d = d.wrapping_mul(10).wrapping_add(d >> 8);
    let d = ((d & 0x0000_00ff_0000_00ff).wrapping_mul(100 + (1_000_000 << 32))
        + ((d >> 16) & 0x0000_00ff_0000_00ff).wrapping_mul(1 + (10_000 << 32)))
        >> 32;
    (n, d)
}

/// The anchor of a line: [`fixed_anchor`], else the search.
#[inline(always)]
fn anchor(line: &str) -> Option<Anchor> {
    match fixed_anchor(line) {
        Some(a) => Some(a),
        None => find_anchor(line),
    }
}

/// Find the anchor in a line: the first `TIMESTAMP: ` preceded by a flags field and a CPU.
fn find_anchor(line: &str) -> Option<Anchor> {
    let bytes = line.as_bytes();
    let mut search = 0;
    while let Some(off) = memchr::memchr(b':', &bytes[search..]) {
        let colon = search + off;
        search = colon + 1;
        if bytes.get(colon + 1) != Some(&b' ') {
            continue;
        }
        // Timestamp token right before the colon.
        let ts_start = bytes[..colon]
            .iter()
            .rposition(|&c| !(c.is_ascii_digit() || c == b'.'))
            .map_or(0, |p| p + 1);
        if ts_start == 0 || bytes[ts_start - 1] != b' ' {
            continue;
        }
        let Some(ts) = parse_ts(&line[ts_start..colon]) else {
            continue;
        };
        // Spaces, then the flags token.
        let mut j = ts_start;
        while j > 0 && bytes[j - 1] == b' ' {
            j -= 1;
        }
        let fl_end = j;
        let fl_start = bytes[..fl_end]
            .iter()
            .rposition(|&c| c == b' ' || c == b']')
            .map_or(0, |p| p + 1);
        let tok = &line[fl_start..fl_end];
        if fl_start >= 1 && bytes[fl_start - 1] == b' ' && tok.len() >= 4 {
            // Kernel form: `[CPU] FLAGS` (flags after a space following `]`).
            let mut k = fl_start;
            while k > 0 && bytes[k - 1] == b' ' {
                k -= 1;
            }
            if k > 0 && bytes[k - 1] == b']' {
                if let Some(open) = line[..k - 1].rfind('[') {
                    let cpu_s = &line[open + 1..k - 1];
                    if let (Ok(cpu), Some(flags)) = (cpu_s.parse::<u32>(), Flags::parse(tok)) {
                        if open > 0 && bytes[open - 1] == b' ' {
                            return Some(Anchor {
                                task_end: open - 1,
                                cpu,
                                flags,
                                ts,
                                rest: colon + 2,
                            });
                        }
                    }
                }
            }
            // trace-cmd form: `CPUFLAGS` in one token (`1dNh3.`).
            let digits = tok.bytes().take_while(|c| c.is_ascii_digit()).count();
            if digits > 0 && (4..=5).contains(&(tok.len() - digits)) {
                if let (Ok(cpu), Some(flags)) =
                    (tok[..digits].parse::<u32>(), Flags::parse(&tok[digits..]))
                {
                    return Some(Anchor {
                        task_end: fl_start - 1,
                        cpu,
                        flags,
                        ts,
                        rest: colon + 2,
                    });
                }
            }
        } else if tok.is_empty() && fl_start >= 1 && bytes[fl_start - 1] == b']' {
            // `trace-cmd report` without `-l`: `[CPU] TIMESTAMP:`, no flags column.
            if let Some(open) = line[..fl_start - 1].rfind('[') {
                if let Ok(cpu) = line[open + 1..fl_start - 1].parse::<u32>() {
                    if open > 0 && bytes[open - 1] == b' ' {
                        return Some(Anchor {
                            task_end: open - 1,
                            cpu,
                            flags: Flags::default(),
                            ts,
                            rest: colon + 2,
                        });
                    }
                }
            }
        }
    }
    None
}

/// Split the TASK-PID column: comm is everything before the last `-digits`.
fn split_task(col: &str) -> (&str, i64) {
    let col = col.trim_ascii_end();
    // trace-cmd prefixes the instance name: `latlab_research: rust-lld-15780`.
    let b = col.as_bytes();
    let colon = find_byte(b, b':').and_then(|p| {
        let mut p = p;
        loop {
            if b.get(p + 1) == Some(&b' ') {
                return Some(p);
            }
            p += 1 + find_byte(b.get(p + 1..)?, b':')?;
        }
    });
    let col = match colon {
        Some(p) if !col[..p].contains(' ') && !col[..p].contains('-') => {
            col[p + 2..].trim_ascii_start()
        }
        _ => col.trim_ascii_start(),
    };
    if let Some(p) = col.as_bytes().iter().rposition(|&c| c == b'-') {
        if let Some(pid) = parse_i64(&col[p + 1..]) {
            return (&col[..p], pid);
        }
    }
    (col, -1)
}

/// `str::parse::<i64>` with a fast path for plain decimal digits (most fields).
fn parse_i64(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if !b.is_empty() && b.len() <= 18 {
        let mut n: i64 = 0;
        let mut ok = true;
        for &c in b {
            let d = c.wrapping_sub(b'0');
            ok &= d < 10;
            // Wrapping: non-digits (d up to 255) may overflow before `ok` rejects them; 18
            // real digits never do.
            n = n.wrapping_mul(10).wrapping_add(d as i64);
        }
        if ok {
            return Some(n);
        }
    }
    s.parse().ok()
}

/// `str::parse::<u64>` with the same fast path.
fn parse_u64(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if !b.is_empty() && b.len() <= 19 {
        let mut n: u64 = 0;
        let mut ok = true;
        for &c in b {
            let d = c.wrapping_sub(b'0');
            ok &= d < 10;
            n = n.wrapping_mul(10).wrapping_add(d as u64);
        }
        if ok {
            return Some(n);
        }
    }
    s.parse().ok()
}

/// Word-at-a-time byte tests on 8 bytes in a u64 (the first byte lowest): each returns the top
/// bit of every byte for which the test holds, exactly (`(x & 0x7f) + k` stays below 0x100, so
/// no carry crosses bytes).
const LO7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
const HI: u64 = 0x8080_8080_8080_8080;

/// Bytes of `x` that are not zero.
#[inline(always)]
fn nonzero_bytes(x: u64) -> u64 {
    (((x & LO7) + LO7) | x) & HI
}

/// Bytes of `w` that are not ASCII digits.
#[inline(always)]
fn non_digit_bytes(w: u64) -> u64 {
    let x = w ^ 0x3030_3030_3030_3030;
    (((x & LO7) + 0x7676_7676_7676_7676) | x) & HI
}

/// Position of `c` in a short slice (a field, a column, an event name), 8 bytes per step:
/// memchr's set-up costs more than it saves on so few bytes, and a byte loop was the hottest
/// code of the parser. A word's bytes equal to `c` become zero after `^ c…c`; `(x − 0x01…01)
/// & !x & 0x80…80` flags the lowest zero byte exactly (bits above it may be false alarms,
/// which the lowest set bit ignores).
#[inline]
fn find_byte(b: &[u8], c: u8) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    let pat = LO * c as u64;
    let mut i = 0;
    while i + 8 <= b.len() {
        let x = u64::from_le_bytes(b[i..i + 8].try_into().unwrap()) ^ pat;
        let t = x.wrapping_sub(LO) & !x & HI;
        if t != 0 {
            return Some(i + (t.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    b[i..].iter().position(|&x| x == c).map(|p| i + p)
}

/// `a == b` for the short byte strings of a trace line (keys, event names, separators),
/// inline: a `memcmp` call per field was an eighth of the parse time. Compares 8 bytes at a
/// time, then the tail.
#[inline(always)]
pub(crate) fn eq_short(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let w8 = |s: &[u8], i: usize| u64::from_ne_bytes(s[i..i + 8].try_into().unwrap());
    let w4 = |s: &[u8], i: usize| u32::from_ne_bytes(s[i..i + 4].try_into().unwrap());
    if n >= 8 {
        // Whole words, then the last word (overlapping the one before): no byte loop.
        let mut i = 0;
        while i + 8 < n {
            if w8(a, i) != w8(b, i) {
                return false;
            }
            i += 8;
        }
        w8(a, n - 8) == w8(b, n - 8)
    } else if n >= 4 {
        w4(a, 0) == w4(b, 0) && w4(a, n - 4) == w4(b, n - 4)
    } else {
        let mut d = 0u8;
        for i in 0..n {
            d |= a[i] ^ b[i];
        }
        d == 0
    }
}

/// `s.strip_prefix(p)` with [`eq_short`].
#[inline(always)]
fn strip<'s>(s: &'s str, p: &str) -> Option<&'s str> {
    let (b, n) = (s.as_bytes(), p.as_bytes());
    // `p` ends on a char boundary of `s` when its bytes match (`p` is a whole str).
    (b.len() >= n.len() && eq_short(&b[..n.len()], n)).then(|| &s[n.len()..])
}

/// `key=value` lookup in a body where values have no spaces (tokens split on spaces; a
/// leading `[` as in `[action=SCHED]` is allowed).
fn kv<'a>(body: &'a str, key: &str) -> Option<&'a str> {
    // Same answer as splitting on ' ' and taking the first token `key=…` (or `[key=…`), found
    // from the '=' signs instead: no per-token work.
    let (b, k) = (body.as_bytes(), key.as_bytes());
    // Bodies are short: a plain loop beats memchr's set-up here.
    for eq in (0..b.len()).filter(|&i| b[i] == b'=') {
        let Some(at) = eq.checked_sub(k.len()) else {
            continue;
        };
        if !eq_short(&b[at..eq], k) {
            continue;
        }
        let boundary =
            at == 0 || b[at - 1] == b' ' || (b[at - 1] == b'[' && (at == 1 || b[at - 2] == b' '));
        if !boundary {
            continue;
        }
        let end = b[eq + 1..]
            .iter()
            .position(|&c| c == b' ')
            .map_or(b.len(), |p| eq + 1 + p);
        let v = &body[eq + 1..end];
        return Some(v.strip_suffix(']').unwrap_or(v));
    }
    None
}

/// Reads a body's `key=value` fields in the order the kernel prints them (the fast path), and
/// answers exactly as [`kv`] on the whole body whenever the next token is not the key asked
/// for. Values have no spaces, so a key found as the next token is also its first occurrence.
struct Fields<'a> {
    whole: &'a str,
    rest: &'a str,
}

impl<'a> Fields<'a> {
    fn new(body: &'a str) -> Fields<'a> {
        Fields {
            whole: body,
            rest: body,
        }
    }

    fn get(&mut self, key: &str) -> Option<&'a str> {
        let r = self.rest.strip_prefix('[').unwrap_or(self.rest);
        if let Some(v) = strip(r, key).and_then(|v| v.strip_prefix('=')) {
            let end = find_byte(v.as_bytes(), b' ').unwrap_or(v.len());
            self.rest = &v[end..];
            self.rest = self.rest.strip_prefix(' ').unwrap_or(self.rest);
            let v = &v[..end];
            return Some(v.strip_suffix(']').unwrap_or(v));
        }
        kv(self.whole, key)
    }

    fn str(&mut self, key: &str) -> Result<&'a str, String> {
        self.get(key).ok_or_else(|| format!("no {key}= field"))
    }

    fn i(&mut self, key: &str) -> Result<i64, String> {
        let v = self.str(key)?;
        parse_i64(v).ok_or_else(|| format!("{key}={v:?} is not an integer"))
    }

    fn u(&mut self, key: &str) -> Result<u64, String> {
        let v = self.str(key)?;
        parse_u64(v).ok_or_else(|| format!("{key}={v:?} is not an integer"))
    }
}

/// `str::find` for short needles without the two-way searcher's setup (the reference for
/// [`find_arrow`] in the tests).
#[cfg(test)]
fn find_sub(hay: &str, needle: &str) -> Option<usize> {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    let first = *n.first()?;
    let mut i = 0;
    while let Some(p) = memchr::memchr(first, h.get(i..)?) {
        let at = i + p;
        if h.get(at..at + n.len()) == Some(n) {
            return Some(at);
        }
        i = at + 1;
    }
    None
}

/// `str::rfind` counterpart of [`find_sub`].
fn rfind_sub(hay: &str, needle: &str) -> Option<usize> {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    let first = *n.first()?;
    let mut end = h.len();
    while let Some(at) = memchr::memrchr(first, &h[..end]) {
        if h.len() - at >= n.len() && eq_short(&h[at..at + n.len()], n) {
            return Some(at);
        }
        end = at;
    }
    None
}

/// `prev_comm=A B prev_pid=…`: the comm is what lies between `X=` and the LAST ` next_key=`.
fn comm_between<'a>(
    s: &'a str,
    start_key: &str,
    end_key: &str,
) -> Result<(&'a str, &'a str), String> {
    let v = strip(s, start_key).ok_or_else(|| format!("expected {start_key}"))?;
    let p = rfind_sub(v, end_key).ok_or_else(|| format!("no{end_key}field"))?;
    Ok((&v[..p], &v[p + 1..]))
}

/// trace-cmd's compact task: `comm:pid [prio]` (comm may hold ':').
fn compact_task(s: &str) -> Result<TaskRef<'_>, String> {
    let s = s.trim();
    let open = rfind_sub(s, " [").ok_or("expected 'comm:pid [prio]'")?;
    let prio = s[open + 2..]
        .trim_end()
        .strip_suffix(']')
        .and_then(parse_i64)
        .ok_or("bad [prio]")?;
    let cp = &s[..open];
    let colon = cp.rfind(':').ok_or("expected comm:pid")?;
    let pid = parse_i64(&cp[colon + 1..]).ok_or("bad pid")?;
    Ok(TaskRef {
        comm: Cow::Borrowed(&cp[..colon]),
        pid,
        prio,
    })
}

fn strip_fn(f: &str) -> &str {
    f.split('/').next().unwrap_or(f)
}

/// `find_sub(body, " ==> ")`, searching for the rare '>' instead of the many spaces.
fn find_arrow(body: &str) -> Option<usize> {
    let b = body.as_bytes();
    let mut i = 0;
    while let Some(p) = memchr::memchr(b'>', &b[i..]) {
        let gt = i + p;
        if gt >= 3 && b.get(gt - 3..gt + 2) == Some(b" ==> ") {
            return Some(gt - 3);
        }
        i = gt + 1;
    }
    None
}

/// Decimal digits (1 to 18) ending at `end`, right after `key`: (start of `key`, value). The
/// fast paths read the kernel's fixed layouts backwards with it.
#[inline(always)]
fn digits_back(b: &[u8], end: usize, key: &[u8]) -> Option<(usize, i64)> {
    let b = &b[..end];
    // The digits before `end`, counted 8 bytes at a time: in the word that ends at `end` (its
    // last byte is the most significant), the bytes above the highest non-digit are digits.
    let mut i = end;
    if end >= 8 {
        let w = u64::from_le_bytes(b[end - 8..].try_into().unwrap());
        let digits = (non_digit_bytes(w).leading_zeros() / 8) as usize;
        if digits < 8 {
            i = end - digits;
        } else {
            while i > end.saturating_sub(18) && b[i - 1].is_ascii_digit() {
                i -= 1;
            }
        }
    } else {
        while i > 0 && b[i - 1].is_ascii_digit() {
            i -= 1;
        }
    }
    let k = i.checked_sub(key.len())?;
    if i == end || !eq_short(&b[k..i], key) {
        return None;
    }
    let mut n = 0i64;
    for &c in &b[i..] {
        n = n * 10 + (c - b'0') as i64;
    }
    Some((k, n))
}

/// The kernel's sched_switch body read backwards from its fixed layout, `prev_comm=A
/// prev_pid=N prev_prio=P prev_state=S ==> next_comm=B next_pid=N next_prio=P` with plain
/// digits and a state without spaces, in one pass and no search but the arrow's. None for
/// anything else; where it answers, [`parse_switch`] answers the same (the field after each
/// key found here holds no later copy of the key, so it is the last one the general parser
/// takes; `fast_paths_agree_with_the_general_parser` checks it on arbitrary bodies).
#[inline]
fn fast_switch(body: &str) -> Option<EventKind<'_>> {
    let b = body.as_bytes();
    let p = find_arrow(body)?;
    let (l, r) = (&b[..p], &b[p + 5..]);
    const NC: &[u8] = b"next_comm=";
    const PC: &[u8] = b"prev_comm=";
    if r.len() < NC.len() || !eq_short(&r[..NC.len()], NC) {
        return None;
    }
    if l.len() < PC.len() || !eq_short(&l[..PC.len()], PC) {
        return None;
    }
    let (k4, next_prio) = digits_back(r, r.len(), b" next_prio=")?;
    let (k3, next_pid) = digits_back(r, k4, b" next_pid=")?;
    if k3 < NC.len() {
        return None;
    }
    let sp = l.iter().rposition(|&c| c == b' ')?;
    const PS: &[u8] = b" prev_state=";
    if l.len() - sp < PS.len() || !eq_short(&l[sp..sp + PS.len()], PS) {
        return None;
    }
    let state = &body[sp + PS.len()..p];
    let (k2, prev_prio) = digits_back(l, sp, b" prev_prio=")?;
    let (k1, prev_pid) = digits_back(l, k2, b" prev_pid=")?;
    if k1 < PC.len() {
        return None;
    }
    Some(EventKind::SchedSwitch {
        prev: TaskRef {
            comm: Cow::Borrowed(&body[PC.len()..k1]),
            pid: prev_pid,
            prio: prev_prio,
        },
        prev_state: Cow::Borrowed(state.strip_suffix(']').unwrap_or(state)),
        next: TaskRef {
            comm: Cow::Borrowed(&body[p + 5 + NC.len()..p + 5 + k3]),
            pid: next_pid,
            prio: next_prio,
        },
    })
}

/// The kernel's sched_waking/sched_wakeup body, `comm=C pid=N prio=P target_cpu=T`, read
/// backwards as [`fast_switch`]; where it answers, [`parse_wake`] answers the same.
#[inline]
fn fast_wake(body: &str) -> Option<(TaskRef<'_>, Option<u32>)> {
    let b = body.as_bytes();
    const C: &[u8] = b"comm=";
    if b.len() < C.len() || !eq_short(&b[..C.len()], C) {
        return None;
    }
    let (k3, cpu) = digits_back(b, b.len(), b" target_cpu=")?;
    let (k2, prio) = digits_back(b, k3, b" prio=")?;
    let (k1, pid) = digits_back(b, k2, b" pid=")?;
    if k1 < C.len() {
        return None;
    }
    Some((
        TaskRef {
            comm: Cow::Borrowed(&body[C.len()..k1]),
            pid,
            prio,
        },
        u32::try_from(cpu).ok(),
    ))
}

fn parse_switch(body: &str) -> Result<EventKind<'_>, String> {
    let p = find_arrow(body).ok_or("sched_switch without ' ==> '")?;
    let (l, r) = (&body[..p], &body[p + 5..]);
    if strip(l, "prev_comm=").is_some() {
        let (pc, lrest) = comm_between(l, "prev_comm=", " prev_pid=")?;
        let (nc, rrest) = comm_between(r, "next_comm=", " next_pid=")?;
        let mut lf = Fields::new(lrest);
        let mut rf = Fields::new(rrest);
        Ok(EventKind::SchedSwitch {
            prev: TaskRef {
                comm: Cow::Borrowed(pc),
                pid: lf.i("prev_pid")?,
                prio: lf.i("prev_prio")?,
            },
            prev_state: Cow::Borrowed(lf.get("prev_state").ok_or("no prev_state")?),
            next: TaskRef {
                comm: Cow::Borrowed(nc),
                pid: rf.i("next_pid")?,
                prio: rf.i("next_prio")?,
            },
        })
    } else {
        // trace-cmd: `rust-lld:15780 [120] R ==> python3:15520 [19]`
        let l = l.trim_end();
        let sp = l.rfind(' ').ok_or("bad sched_switch")?;
        Ok(EventKind::SchedSwitch {
            prev: compact_task(&l[..sp])?,
            prev_state: Cow::Borrowed(&l[sp + 1..]),
            next: compact_task(r)?,
        })
    }
}

fn parse_wake(body: &str) -> Result<(TaskRef<'_>, Option<u32>), String> {
    if strip(body, "comm=").is_some() {
        let (c, rest) = comm_between(body, "comm=", " pid=")?;
        let mut f = Fields::new(rest);
        Ok((
            TaskRef {
                comm: Cow::Borrowed(c),
                pid: f.i("pid")?,
                prio: f.i("prio")?,
            },
            f.get("target_cpu").and_then(|v| v.parse().ok()),
        ))
    } else {
        // trace-cmd: `python3:15520 [19] CPU:001`
        let (t, cpu) = match rfind_sub(body, " CPU:") {
            Some(p) => (&body[..p], body[p + 5..].trim().parse().ok()),
            None => (body, None),
        };
        Ok((compact_task(t)?, cpu))
    }
}

/// The event names the parser reads a body of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Name {
    Switch,
    Waking,
    Wakeup,
    IrqEntry,
    IrqExit,
    SoftirqEntry,
    SoftirqExit,
    HrtimerStart,
    HrtimerExpireEntry,
    HrtimerExpireExit,
    Nmi,
    Mark,
    Print,
    Other,
}

/// Most frequent first (a hackbench trace is mostly sched_*): a length mismatch rejects an
/// entry at once, and [`eq_short`] compares the rest without a call.
const NAMES: [(&str, Name); 14] = [
    ("sched_switch", Name::Switch),
    ("sched_waking", Name::Waking),
    ("sched_wakeup", Name::Wakeup),
    ("sched_wakeup_new", Name::Wakeup),
    ("irq_handler_entry", Name::IrqEntry),
    ("irq_handler_exit", Name::IrqExit),
    ("softirq_entry", Name::SoftirqEntry),
    ("softirq_exit", Name::SoftirqExit),
    ("hrtimer_start", Name::HrtimerStart),
    ("hrtimer_expire_entry", Name::HrtimerExpireEntry),
    ("hrtimer_expire_exit", Name::HrtimerExpireExit),
    ("nmi_handler", Name::Nmi),
    ("tracing_mark_write", Name::Mark),
    ("print", Name::Print),
];

#[inline]
fn name_of(name: &str) -> Name {
    NAMES
        .iter()
        .find(|(n, _)| eq_short(name.as_bytes(), n.as_bytes()))
        .map_or(Name::Other, |&(_, k)| k)
}

/// An event's body, typed by its (looked-up) name.
#[inline]
fn parse_named<'a>(n: Name, name: &'a str, body: &'a str) -> Result<EventKind<'a>, String> {
    let mut f = Fields::new(body);
    use Name as N;
    Ok(match n {
        N::Switch => match fast_switch(body) {
            Some(k) => k,
            None => parse_switch(body)?,
        },
        N::Waking | N::Wakeup => {
            let (task, target_cpu) = match fast_wake(body) {
                Some(w) => w,
                None => parse_wake(body)?,
            };
            if matches!(n, N::Waking) {
                EventKind::SchedWaking { task, target_cpu }
            } else {
                EventKind::SchedWakeup { task, target_cpu }
            }
        }
        N::IrqEntry => EventKind::IrqEntry {
            irq: f.i("irq")?,
            name: Cow::Borrowed(f.get("name").unwrap_or("?")),
        },
        N::IrqExit => EventKind::IrqExit { irq: f.i("irq")? },
        N::SoftirqEntry | N::SoftirqExit => {
            let vec = f.i("vec")?;
            let action = Cow::Borrowed(f.str("action")?);
            if matches!(n, N::SoftirqEntry) {
                EventKind::SoftirqEntry { vec, name: action }
            } else {
                EventKind::SoftirqExit { vec, name: action }
            }
        }
        N::HrtimerStart => EventKind::HrtimerStart {
            hrtimer: Cow::Borrowed(f.str("hrtimer")?),
            function: Cow::Borrowed(strip_fn(f.get("function").unwrap_or("?"))),
            expires: f.u("expires")?,
        },
        N::HrtimerExpireEntry => EventKind::HrtimerExpireEntry {
            hrtimer: Cow::Borrowed(f.str("hrtimer")?),
            function: Cow::Borrowed(strip_fn(f.get("function").unwrap_or("?"))),
            now: f.u("now")?,
        },
        N::HrtimerExpireExit => EventKind::HrtimerExpireExit {
            hrtimer: Cow::Borrowed(f.str("hrtimer")?),
        },
        N::Nmi => EventKind::Nmi {
            handler: Cow::Borrowed(f.get("handler").unwrap_or("nmi")),
            delta_ns: f.u("delta_ns")?,
        },
        N::Mark => EventKind::Marker {
            text: Cow::Borrowed(body),
        },
        N::Print => match body.trim_start().strip_prefix("tracing_mark_write:") {
            Some(t) => EventKind::Marker {
                text: Cow::Borrowed(t.trim_start()),
            },
            None => EventKind::Other {
                name: Cow::Borrowed(name),
            },
        },
        N::Other if body.starts_with("vector=") && name.ends_with("_entry") => {
            EventKind::VectorEntry {
                name: Cow::Borrowed(name.trim_end_matches("_entry")),
                vector: f.i("vector")?,
            }
        }
        N::Other if body.starts_with("vector=") && name.ends_with("_exit") => {
            EventKind::VectorExit {
                name: Cow::Borrowed(name.trim_end_matches("_exit")),
                vector: f.i("vector")?,
            }
        }
        N::Other => EventKind::Other {
            name: Cow::Borrowed(name),
        },
    })
}

/// Build an event from one (possibly joined) anchored text.
fn event_from(line: usize, text: &str) -> Result<Event<'_>, String> {
    let a = anchor(text).ok_or("no ' [CPU] FLAGS TIMESTAMP: ' anchor")?;
    event_at(line, text, a)
}

/// [`split_task`] of the kernel's fixed `%16s-%-7d` TASK-PID column (comm right-aligned in 16
/// bytes, '-', pid digits padded with spaces): None for anything else. Without a ':' in the
/// comm there is no instance prefix to strip, and the '-' at byte 16 is the last one.
#[inline]
fn fixed_task(col: &str) -> Option<(&str, i64)> {
    const SP: u64 = 0x2020_2020_2020_2020;
    let nonzero = nonzero_bytes;
    let b = col.as_bytes();
    if b.len() != 24 || b[16] != b'-' {
        return None;
    }
    let w0 = u64::from_le_bytes(b[..8].try_into().unwrap());
    let w1 = u64::from_le_bytes(b[8..16].try_into().unwrap());
    let colon = 0x3a3a_3a3a_3a3a_3a3a;
    if (nonzero(w0 ^ colon) & nonzero(w1 ^ colon)) != HI {
        return None; // a ':' in the comm (an instance prefix?): the general split decides
    }
    // The comm starts at the first byte that is not a space.
    let (n0, n1) = (nonzero(w0 ^ SP), nonzero(w1 ^ SP));
    let start = if n0 != 0 {
        (n0.trailing_zeros() / 8) as usize
    } else if n1 != 0 {
        8 + (n1.trailing_zeros() / 8) as usize
    } else {
        16
    };
    if start < 16 && b[start].is_ascii_whitespace() {
        return None; // trim_ascii_start would go on past a tab or CR
    }
    let mut p = [b' '; 8];
    p[..7].copy_from_slice(&b[17..24]);
    let (n, pid) = lead_digits(&p);
    (n > 0 && p[n..].iter().all(|&c| c == b' ')).then(|| (&col[start..16], pid as i64))
}

fn event_at(line: usize, text: &str, a: Anchor) -> Result<Event<'_>, String> {
    let col = &text[..a.task_end];
    let (task_comm, pid) = fixed_task(col).unwrap_or_else(|| split_task(col));
    let rest = &text[a.rest..];
    let (n, name, body) = sched_name(rest).map_or_else(|| name_and_body(rest), Ok)?;
    let kind = parse_named(n, name, body).map_err(|e| format!("{name}: {e}"))?;
    Ok(Event {
        line,
        cpu: a.cpu,
        ts: a.ts,
        task_comm: Cow::Borrowed(task_comm),
        pid,
        flags: a.flags,
        kind,
    })
}

/// The three scheduler events (nearly every line of a busy trace), `sched_XXXXXX: body`, read
/// at their fixed place: what [`name_and_body`] finds for them, without its search.
#[inline]
fn sched_name(rest: &str) -> Option<(Name, &str, &str)> {
    let rb = rest.as_bytes();
    if rb.len() < 14 || !eq_short(&rb[..6], b"sched_") || rb[12] != b':' || rb[13] != b' ' {
        return None;
    }
    let n = match &rb[6..12] {
        b"switch" => Name::Switch,
        b"waking" => Name::Waking,
        b"wakeup" => Name::Wakeup,
        _ => return None,
    };
    let body = rest[14..].trim_ascii_start();
    Some((n, &rest[..12], body.trim_end_matches(['\r', '\n'])))
}

/// `event: body` after the anchor: the event's name (looked up), the name, and the body
/// without surrounding blanks (a trailing CR or LF too).
fn name_and_body(rest: &str) -> Result<(Name, &str, &str), String> {
    let (name, body) = match find_byte(rest.as_bytes(), b':') {
        Some(p) => (rest[..p].trim_ascii(), rest[p + 1..].trim_ascii_start()),
        None => (rest.trim_ascii(), ""),
    };
    if name.is_empty() || find_byte(name.as_bytes(), b' ').is_some() {
        return Err(format!("bad event name {name:?}"));
    }
    let bb = body.as_bytes();
    let mut end = bb.len();
    while end > 0 && matches!(bb[end - 1], b'\r' | b'\n') {
        end -= 1;
    }
    Ok((name_of(name), name, &body[..end]))
}

impl TaskRef<'_> {
    /// The same task with its name owned (for events built from a joined, temporary text).
    pub fn into_owned(self) -> TaskRef<'static> {
        TaskRef {
            comm: Cow::Owned(self.comm.into_owned()),
            pid: self.pid,
            prio: self.prio,
        }
    }
}

fn own(c: Cow<'_, str>) -> Cow<'static, str> {
    Cow::Owned(c.into_owned())
}

impl EventKind<'_> {
    /// The same event kind with every string owned.
    pub fn into_owned(self) -> EventKind<'static> {
        use EventKind as K;
        match self {
            K::SchedSwitch {
                prev,
                prev_state,
                next,
            } => K::SchedSwitch {
                prev: prev.into_owned(),
                prev_state: own(prev_state),
                next: next.into_owned(),
            },
            K::SchedWaking { task, target_cpu } => K::SchedWaking {
                task: task.into_owned(),
                target_cpu,
            },
            K::SchedWakeup { task, target_cpu } => K::SchedWakeup {
                task: task.into_owned(),
                target_cpu,
            },
            K::IrqEntry { irq, name } => K::IrqEntry {
                irq,
                name: own(name),
            },
            K::IrqExit { irq } => K::IrqExit { irq },
            K::SoftirqEntry { vec, name } => K::SoftirqEntry {
                vec,
                name: own(name),
            },
            K::SoftirqExit { vec, name } => K::SoftirqExit {
                vec,
                name: own(name),
            },
            K::VectorEntry { name, vector } => K::VectorEntry {
                name: own(name),
                vector,
            },
            K::VectorExit { name, vector } => K::VectorExit {
                name: own(name),
                vector,
            },
            K::HrtimerStart {
                hrtimer,
                function,
                expires,
            } => K::HrtimerStart {
                hrtimer: own(hrtimer),
                function: own(function),
                expires,
            },
            K::HrtimerExpireEntry {
                hrtimer,
                function,
                now,
            } => K::HrtimerExpireEntry {
                hrtimer: own(hrtimer),
                function: own(function),
                now,
            },
            K::HrtimerExpireExit { hrtimer } => K::HrtimerExpireExit {
                hrtimer: own(hrtimer),
            },
            K::Nmi { handler, delta_ns } => K::Nmi {
                handler: own(handler),
                delta_ns,
            },
            K::Marker { text } => K::Marker { text: own(text) },
            K::Other { name } => K::Other { name: own(name) },
        }
    }
}

impl Event<'_> {
    /// The same event with every string owned.
    pub fn into_owned(self) -> Event<'static> {
        Event {
            line: self.line,
            cpu: self.cpu,
            ts: self.ts,
            task_comm: own(self.task_comm),
            pid: self.pid,
            flags: self.flags,
            kind: self.kind.into_owned(),
        }
    }
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

/// Split `text` into blocks of about `target` bytes that separate [`Parser`]s can parse
/// independently (in parallel) with the same records as one parser over the whole text.
///
/// A block ends after a line L such that L−1 and L both carry an anchor and L is a complete
/// event. The streaming parser then holds nothing: unanchored lines (the only state carried
/// forward, as the head of a comm split by a newline) are settled at L−1 at the latest, and L
/// itself is emitted at once. A fresh parser on the next line starts in that same state. Where
/// no such line follows within 256 lines of the nominal cut, the block simply grows.
pub fn blocks(text: &str, target: usize) -> Vec<&str> {
    // The cuts follow a '\n' (ASCII): char boundaries of a str.
    byte_blocks(text.as_bytes(), target)
        .into_iter()
        .map(|b| {
            let start = b.as_ptr() as usize - text.as_ptr() as usize;
            &text[start..start + b.len()]
        })
        .collect()
}

/// [`blocks`] over bytes not yet checked for UTF-8 (each block is checked by whoever parses
/// it). A line that is not UTF-8 is never part of a clean pair: such a text is not analyzed
/// from its bytes at all, so where it is cut does not matter.
pub fn byte_blocks(b: &[u8], target: usize) -> Vec<&[u8]> {
    byte_blocks_on(b, target, 1)
}

/// [`byte_blocks`] with the cuts looked for on `threads` threads. Each cut is the first clean
/// point after a multiple of `target` (none within reach: that block grows), found on its own,
/// so the cuts of a large file are found in parallel; finding them touches a page at every cut
/// for the first time, which made this a serial 5 ms on a 281 MB trace.
pub fn byte_blocks_on(b: &[u8], target: usize, threads: usize) -> Vec<&[u8]> {
    let target = target.max(1);
    let nominal: Vec<usize> = (1..b.len() / target).map(|k| k * target).collect();
    let per = nominal.len().div_ceil(threads.max(1)).max(1);
    // In order, skipping the multiples an earlier search already covered (the same cut, or
    // lines already known to hold none): each byte is looked at about once per thread.
    let find = |part: &[usize]| -> Vec<usize> {
        let mut cuts = Vec::new();
        let mut covered = 0;
        for &at in part {
            if at < covered {
                continue;
            }
            match clean_cut(b, at) {
                Ok(c) => {
                    cuts.push(c);
                    covered = c;
                }
                Err(seen) => covered = seen,
            }
        }
        cuts
    };
    let cuts: Vec<usize> = if threads <= 1 || nominal.len() < 64 {
        find(&nominal)
    } else {
        std::thread::scope(|s| {
            let hs: Vec<_> = nominal
                .chunks(per)
                .map(|part| s.spawn(move || find(part)))
                .collect();
            hs.into_iter()
                .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        })
    };
    let mut out = Vec::new();
    let mut start = 0;
    // Cuts only move forward: two multiples may find the same clean point.
    for cut in cuts {
        if cut > start {
            out.push(&b[start..cut]);
            start = cut;
            debug_assert!(b[start - 1] == b'\n');
        }
    }
    out.push(&b[start..]);
    out
}

/// The first offset at or after `from` that starts a line and follows a clean line pair; else
/// Err(how far the lines were looked at: every `from` before it has no cut either, up to there).
fn clean_cut(b: &[u8], from: usize) -> Result<usize, usize> {
    // Start of the first whole line after `from`.
    let Some(nl) = b.get(from..).and_then(|r| memchr::memchr(b'\n', r)) else {
        return Err(b.len());
    };
    let mut pos = from + nl + 1;
    let mut prev_anchored = false;
    for _ in 0..256 {
        let Some(nl) = b.get(pos..).and_then(|r| memchr::memchr(b'\n', r)) else {
            return Err(b.len());
        };
        let end = pos + nl;
        let Ok(l) = std::str::from_utf8(&b[pos..end]) else {
            prev_anchored = false;
            pos = end + 1;
            continue;
        };
        let l = l.strip_suffix('\r').unwrap_or(l);
        let a = anchor(l);
        if prev_anchored {
            if let Some(a) = a {
                if event_at(0, l, a).is_ok() {
                    return if end + 1 < b.len() {
                        Ok(end + 1)
                    } else {
                        Err(b.len())
                    };
                }
            }
        }
        prev_anchored = a.is_some();
        pos = end + 1;
    }
    Err(pos)
}

/// Parse one block from [`blocks`]: its records, and how many lines it spans (its newlines),
/// so that the caller can shift line numbers by the lines of the blocks before it.
///
/// The records are appended to `out` (cleared first), so a caller can reuse one buffer for
/// many blocks: a fresh multi-megabyte vector per block cost a page fault per 4 KiB.
pub fn parse_block<'a>(block: &'a str, out: &mut Vec<Record<'a>>) -> usize {
    out.clear();
    let mut p = Parser::new(block);
    p.fill(out);
    // The parser read every line; `Lines` yields one line past the last '\n'.
    p.lines.idx.saturating_sub(1)
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

/// The error for a text without a single event: at the first line skipped and why, if any,
/// else at its last line.
pub(crate) fn no_events(text: &str, first_skipped: Option<(usize, &str)>) -> ParseError {
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

impl fmt::Display for TaskRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{} [{}]", self.comm, self.pid, self.prio)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const EVENTS: &str = include_str!("../../tests/fixtures/trace/trace-events.txt");
    const ODD: &str = include_str!("../../tests/fixtures/trace/trace-oddcomm.txt");
    const WORST: &str = include_str!("../../tests/fixtures/trace/trace-worst-window-cpu1.txt");
    const LOST: &str = include_str!("../../tests/fixtures/trace/trace-lost-events.txt");

    /// The oddcomm fixture shows raw bytes through `cat -A` on the lines ending in `$`.
    pub(crate) fn un_cat_a(t: &str) -> String {
        t.split('\n')
            .map(|l| match l.strip_suffix('$') {
                Some(l) => l.replace("^I", "\t").replace("^[", "\x1b"),
                None => l.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

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
    fn flags() {
        let f = Flags::parse("dNh3.").unwrap();
        assert!(f.irqs_off && f.need_resched && f.hardirq && !f.softirq);
        assert_eq!(f.preempt_depth, 3);
        let f = Flags::parse("dNH1.").unwrap();
        assert!(f.hardirq && f.softirq);
        assert!(Flags::parse("hello").is_none());
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

    #[test]
    fn substring_search() {
        for (h, n) in [
            ("a ==> b ==> c", " ==> "),
            ("xyz", "q"),
            ("prev_pid=1 prev_pid=2", " prev_pid="),
            ("", "a"),
            ("aaa", "aa"),
        ] {
            assert_eq!(find_sub(h, n), h.find(n), "{h} {n}");
            assert_eq!(find_arrow(h), h.find(" ==> "), "{h}");
            assert_eq!(rfind_sub(h, n), h.rfind(n), "{h} {n}");
        }
    }

    /// The fixed-layout fast path finds the same anchor as the search wherever it applies.
    #[test]
    fn fixed_anchor_agrees_with_the_search() {
        let odd = un_cat_a(ODD);
        let mut fixed = 0;
        for t in [EVENTS, ODD, WORST, LOST, odd.as_str()] {
            for l in t.split('\n') {
                if let Some(f) = fixed_anchor(l) {
                    let s = find_anchor(l).expect("search finds it too");
                    assert_eq!(
                        (f.task_end, f.cpu, f.flags, f.ts, f.rest),
                        (s.task_end, s.cpu, s.flags, s.ts, s.rest),
                        "{l}"
                    );
                    fixed += 1;
                }
            }
        }
        assert!(fixed > 50, "{fixed}");
        // Not the kernel layout: left to the search.
        assert!(fixed_anchor("  rust-lld-15780 [001]  1549.929758453: sched_switch: x").is_none());
    }

    #[test]
    fn timestamps() {
        assert_eq!(parse_ts("1471.553785"), Some(1_471_553_785_000));
        assert_eq!(parse_ts("1549.929745568"), Some(1_549_929_745_568));
        assert_eq!(parse_ts("1.5"), Some(1_500_000_000));
        assert_eq!(parse_ts("1.1234567890"), None);
        assert_eq!(parse_ts(".5"), None);
    }

    /// Found by `never_panics_on_mangled_real_lines` (cut = 2322): 18 non-digit bytes in an
    /// integer field overflowed the fast path's arithmetic (a panic in debug builds).
    #[test]
    fn regression_parse_i64_of_18_non_digits_does_not_overflow() {
        assert_eq!(parse_i64("A0AA000AAAAAAAAAAA"), None);
        assert_eq!(parse_i64("~~~~~~~~~~~~~~~~~~"), None);
        assert_eq!(
            parse_i64("999999999999999999"),
            Some(999_999_999_999_999_999)
        );
    }

    /// The fast paths take the kernel's own lines (else they would only cost a check).
    #[test]
    fn fast_paths_take_kernel_lines() {
        let sw = "prev_comm=kworker/0:1 H prev_pid=14951 prev_prio=120 prev_state=R+ ==> next_comm=latlab-m0 next_pid=7 next_prio=19";
        let k = fast_switch(sw).expect("kernel sched_switch body");
        assert_eq!(Ok(k.clone()), parse_switch(sw));
        assert!(
            matches!(k, EventKind::SchedSwitch { ref prev, ref next, .. } if prev.comm == "kworker/0:1 H" && next.pid == 7)
        );
        let col = "       hackbench-14951  ";
        assert_eq!(fixed_task(col), Some(("hackbench", 14951)));
        assert_eq!(fixed_task(col), Some(split_task(col)));
        let wk = "comm=hackbench pid=14963 prio=120 target_cpu=001";
        let w = fast_wake(wk).expect("kernel sched_waking body");
        assert_eq!(w.1, Some(1));
        assert_eq!(Ok(w), parse_wake(wk));
    }

    proptest::proptest! {
        #[test]
        fn never_panics_on_arbitrary_bytes(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400)) {
            let s = String::from_utf8_lossy(&b);
            let _ = parse(&s);
        }

        #[test]
        fn parse_i64_and_u64_are_str_parse(s in "[0-9A-z \t-]{0,20}") {
            proptest::prop_assert_eq!(parse_i64(&s), s.parse::<i64>().ok());
            proptest::prop_assert_eq!(parse_u64(&s), s.parse::<u64>().ok());
        }

        #[test]
        fn fast_paths_agree_with_the_general_parser(
            parts in proptest::collection::vec(
                proptest::sample::select(vec![
                    "prev_comm=", "next_comm=", "comm=", " prev_pid=", " prev_prio=",
                    " prev_state=", " next_pid=", " next_prio=", " pid=", " prio=",
                    " target_cpu=", " ==> ", " ", "=", "]", "[", "-", "0", "7", "120",
                    "99999999999999999999", "R+", "S", "a b", "==>", ">",
                ]),
                0..16,
            )
        ) {
            let body: String = parts.concat();
            if let Some(k) = fast_switch(&body) {
                proptest::prop_assert_eq!(Ok(k), parse_switch(&body), "{:?}", body);
            }
            if let Some(w) = fast_wake(&body) {
                proptest::prop_assert_eq!(Ok(w), parse_wake(&body), "{:?}", body);
            }
        }

        #[test]
        fn fast_paths_agree_on_kernel_shaped_bodies(
            f in proptest::collection::vec(
                proptest::sample::select(vec![
                    "hackbench", "", "a b", "x ==> y", " prev_pid=1", "]", "S]", "p prev_state=S",
                    " next_pid=2", " pid=3 prio=4", "0", "120", "-1", "007",
                    "9999999999999999999", "R+", " target_cpu=1", "==>", " ==> next_comm=z",
                ]),
                7,
            )
        ) {
            let sw = format!(
                "prev_comm={} prev_pid={} prev_prio={} prev_state={} ==> next_comm={} next_pid={} next_prio={}",
                f[0], f[1], f[2], f[3], f[4], f[5], f[6]
            );
            if let Some(k) = fast_switch(&sw) {
                proptest::prop_assert_eq!(Ok(k), parse_switch(&sw), "{:?}", sw);
            }
            let wk = format!("comm={} pid={} prio={} target_cpu={}", f[0], f[1], f[2], f[3]);
            if let Some(w) = fast_wake(&wk) {
                proptest::prop_assert_eq!(Ok(w), parse_wake(&wk), "{:?}", wk);
            }
        }

        #[test]
        fn fixed_task_agrees_with_split_task(
            comm in "[a-z :\\-/\t\r]{0,17}",
            pid in "[0-9a ]{0,8}",
        ) {
            let col = format!("{comm:>16}-{pid:<7}");
            if let Some(t) = fixed_task(&col) {
                proptest::prop_assert_eq!(t, split_task(&col), "{:?}", col);
            }
        }

        #[test]
        fn eq_short_is_slice_eq(
            a in proptest::collection::vec(0u8..3, 0..40),
            b in proptest::collection::vec(0u8..3, 0..40),
        ) {
            proptest::prop_assert_eq!(eq_short(&a, &b), a == b);
            proptest::prop_assert!(eq_short(&a, &a.clone()));
        }

        #[test]
        fn fixed_anchor_agrees_with_the_search_on_kernel_shaped_lines(
            comm in "[a-z -]{0,16}",
            pid in "[0-9]{1,7}",
            cpu in "[0-9]{0,7}",
            flags in "[dD.][.Nn][.hsHz][.0-9a-f][.0-9]?[ ]?",
            pad in "[ ]{0,12}",
            secs in "[0-9]{0,13}",
            frac in "[0-9]{0,10}",
            tail in "(: x: y)?[ a-z=]{0,30}",
        ) {
            let l = format!("{comm:>16}-{pid:<7} [{cpu}] {flags} {pad}{secs}.{frac}{tail}");
            if let Some(f) = fixed_anchor(&l) {
                let s = find_anchor(&l).expect("search finds it too");
                proptest::prop_assert_eq!(
                    (f.task_end, f.cpu, f.flags, f.ts, f.rest),
                    (s.task_end, s.cpu, s.flags, s.ts, s.rest),
                    "{:?}", l
                );
            }
        }

        #[test]
        fn digits_back_reads_the_digits_before_the_end(
            pre in "[a-z =0-9/:]{0,12}",
            digits in "[0-9]{0,20}",
            post in "[ a-z0-9]{0,3}",
        ) {
            let key = " pid=";
            let s = format!("{pre}{key}{digits}{post}");
            let b = s.as_bytes();
            let end = pre.len() + key.len() + digits.len();
            // Reference: the longest run of at most 18 digits before `end`, after `key`.
            let run = b[..end].iter().rev().take(18).take_while(|c| c.is_ascii_digit()).count();
            let i = end - run;
            let want = (run > 0 && i >= key.len() && &b[i - key.len()..i] == key.as_bytes())
                .then(|| (i - key.len(), s[i..end].parse::<i64>().unwrap()));
            proptest::prop_assert_eq!(digits_back(b, end, key.as_bytes()), want, "{:?} {}", s, end);
        }

        #[test]
        fn lead_digits_reads_the_leading_digits(b in proptest::array::uniform8(proptest::sample::select(vec![b'0', b'1', b'5', b'9', b'/', b':', b' ', b'a', 0xb0, 0xb9]))) {
            let n = b.iter().take_while(|c| c.is_ascii_digit()).count();
            let v = b[..n].iter().fold(0u64, |v, &c| v * 10 + (c - b'0') as u64);
            proptest::prop_assert_eq!(lead_digits(&b), (n, v));
        }

        #[test]
        fn sched_name_fast_path_is_the_general_split(
            name in proptest::sample::select(vec!["sched_switch", "sched_waking", "sched_wakeup", "sched_wakeup_new", "sched_wakeupx", "sched_foobar", "sched_switc"]),
            sep in proptest::sample::select(vec![": ", ":  ", ":", ": \t", " : "]),
            body in proptest::sample::select(vec!["comm=x pid=3 prio=120 target_cpu=001", "a: b", ""]),
            tail in proptest::sample::select(vec!["", "\r", "\n", "\r\n", " "]),
        ) {
            let rest = format!("{name}{sep}{body}{tail}");
            if let Some(fast) = sched_name(&rest) {
                proptest::prop_assert_eq!(Ok(fast), name_and_body(&rest), "{:?}", rest);
            }
        }

        #[test]
        fn find_byte_is_position(hay in proptest::collection::vec(0usize..6, 0..40), c in 0usize..6) {
            // A small alphabet, so that matches are common, with the values the word trick
            // could confuse (0x00, 0x80, 0xff and the neighbours of ':').
            const ABC: [u8; 6] = [0x00, 0x01, b':', b';', 0x80, 0xff];
            let hay: Vec<u8> = hay.into_iter().map(|i| ABC[i]).collect();
            let c = ABC[c];
            proptest::prop_assert_eq!(find_byte(&hay, c), hay.iter().position(|&x| x == c));
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
