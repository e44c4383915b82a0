//! The fixed part of one trace line: the anchor ` [CPU] FLAGS SECS.FRAC: ` (kernel) or
//! ` CPUFLAGS SECS.FRAC: ` (`trace-cmd report -l`) and the TASK-PID column before it.
//!
//! Each has a fast path that reads the kernel's own fixed layout byte by byte
//! ([`fixed_anchor`], [`fixed_task`]) right before its general twin that searches
//! ([`find_anchor`], [`split_task`]); their agreement is property-tested below.

use super::bytes::{find_byte, lead_digits, nonzero_bytes, parse_i64, HI};

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
    /// Migrate-disable depth (the fifth column; 0 when `.` or absent): the task may be
    /// preempted but not moved to another CPU (PREEMPT_RT's sleeping spinlocks and BH
    /// sections, `migrate_disable()`).
    pub migrate_disable: u8,
    /// Preempt-lazy depth of PREEMPT_RT kernels before 6.12 (their sixth of seven columns; 0
    /// elsewhere): preemption by a normal task's wake-up deferred.
    pub lazy_depth: u8,
}

impl Flags {
    /// Parse the 4- or 5-character flags field (7 on PREEMPT_RT before 6.12: its lazy
    /// preemption's columns). None when it is not one.
    pub fn parse(s: &str) -> Option<Flags> {
        Flags::parse_bytes(s.as_bytes())
    }

    fn parse_bytes(b: &[u8]) -> Option<Flags> {
        if b.len() == 7 {
            return Flags::parse_rt_lazy(b);
        }
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
        if b.len() == 5 {
            f.migrate_disable = match b[4] {
                b'.' => 0,
                c @ b'0'..=b'9' => c - b'0',
                c @ b'a'..=b'f' => c - b'a' + 10,
                _ => return None,
            };
        }
        Some(f)
    }

    /// The seven columns of PREEMPT_RT kernels before 6.12, whose RT patch brought its own
    /// lazy preemption (6.1-rt): irqs-off, need-resched, need-resched-lazy (`L`), hard/soft
    /// IRQ, preempt depth, preempt-lazy depth, migrate-disable. A lazy need-resched is a
    /// need-resched, as `l`/`L` of the five columns are.
    fn parse_rt_lazy(b: &[u8]) -> Option<Flags> {
        let lazy = match b[2] {
            b'.' => false,
            b'L' => true,
            _ => return None,
        };
        let lazy_depth = match b[5] {
            b'.' => 0,
            c @ b'0'..=b'9' => c - b'0',
            c @ b'a'..=b'f' => c - b'a' + 10,
            _ => return None,
        };
        let mut f = Flags::parse_bytes(&[b[0], b[1], b[3], b[4], b[6]])?;
        f.need_resched |= lazy;
        f.lazy_depth = lazy_depth;
        Some(f)
    }
}

/// Where the fixed part of an event line is.
#[derive(Clone, Copy)]
pub(super) struct Anchor {
    /// End of the TASK-PID column (start of the anchor's leading space).
    pub(super) task_end: usize,
    pub(super) cpu: u32,
    pub(super) flags: Flags,
    pub(super) ts: u64,
    /// Start of `event: body`.
    pub(super) rest: usize,
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

/// The anchor of a line: [`fixed_anchor`], else the search.
#[inline(always)]
pub(super) fn anchor(line: &str) -> Option<Anchor> {
    match fixed_anchor(line) {
        Some(a) => Some(a),
        None => find_anchor(line),
    }
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

/// [`split_task`] of the kernel's fixed `%16s-%-7d` TASK-PID column (comm right-aligned in 16
/// bytes, '-', pid digits padded with spaces): None for anything else. Without a ':' in the
/// comm there is no instance prefix to strip, and the '-' at byte 16 is the last one.
#[inline]
pub(super) fn fixed_task(col: &str) -> Option<(&str, i64)> {
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

/// Split the TASK-PID column: comm is everything before the last `-digits`.
pub(super) fn split_task(col: &str) -> (&str, i64) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::fixtures::*;

    #[test]
    fn flags() {
        let f = Flags::parse("dNh3.").unwrap();
        assert!(f.irqs_off && f.need_resched && f.hardirq && !f.softirq);
        assert_eq!(f.preempt_depth, 3);
        let f = Flags::parse("dNH1.").unwrap();
        assert!(f.hardirq && f.softirq);
        assert!(Flags::parse("hello").is_none());
        // PREEMPT_RT before 6.12: need-resched-lazy and the preempt-lazy depth too.
        let f = Flags::parse("dn.h113").unwrap();
        assert!(f.irqs_off && f.need_resched && f.hardirq && !f.softirq);
        assert_eq!(f.preempt_depth, 1);
        assert!(Flags::parse("d.Lh...").unwrap().need_resched);
        let f = Flags::parse("...s.12").unwrap();
        assert_eq!(
            (f.preempt_depth, f.lazy_depth, f.migrate_disable),
            (0, 1, 2)
        );
        assert_eq!(f.migrate_disable, 2);
        // The fifth column: migrate-disable.
        let f = Flags::parse("d..1a").unwrap();
        assert_eq!(
            (f.preempt_depth, f.migrate_disable, f.lazy_depth),
            (1, 10, 0)
        );
        assert_eq!(Flags::parse("d..1.").unwrap().migrate_disable, 0);
        assert_eq!(Flags::parse("d..1").unwrap().migrate_disable, 0);
        assert!(Flags::parse("d..1x").is_none());
        assert!(Flags::parse("d.Xh...").is_none());
        assert!(Flags::parse("dn.h1g.").is_none());
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

    proptest::proptest! {
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
        fn fixed_task_agrees_with_split_task(
            comm in "[a-z :\\-/\t\r]{0,17}",
            pid in "[0-9a ]{0,8}",
        ) {
            let col = format!("{comm:>16}-{pid:<7}");
            if let Some(t) = fixed_task(&col) {
                proptest::prop_assert_eq!(t, split_task(&col), "{:?}", col);
            }
        }
    }
}
