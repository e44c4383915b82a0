//! The latency-format flags column of an event.

use crate::trace::line::Flags;

/// The latency-format flags column (`d..2.`) of `common_flags` and `common_preempt_count`, as
/// the kernel prints it (`trace_print_lat_fmt`, kernel 6.13 and later: bit 0 irqs off, 1
/// need-resched-lazy, 2 need-resched, 3 hardirq, 4 softirq, 5 preempt-resched, 6 NMI, 7 BH
/// off; the low nibble of the preempt count is the depth, the high one migrate-disable).
pub fn flag_chars(flags: u8, preempt: u8) -> [u8; 5] {
    let (irqs_off, lazy, nr, hard, soft, pr, nmi, bh) = (
        flags & 0x01 != 0,
        flags & 0x02 != 0,
        flags & 0x04 != 0,
        flags & 0x08 != 0,
        flags & 0x10 != 0,
        flags & 0x20 != 0,
        flags & 0x40 != 0,
        flags & 0x80 != 0,
    );
    let c0 = match (irqs_off, bh) {
        (true, true) => b'D',
        (true, false) => b'd',
        (false, true) => b'b',
        (false, false) => b'.',
    };
    let c1 = match (nr, lazy, pr) {
        (true, true, true) => b'B',
        (true, false, true) => b'N',
        (false, true, true) => b'L',
        (true, true, false) => b'b',
        (true, false, false) => b'n',
        (false, false, true) => b'p',
        (false, true, false) => b'l',
        (false, false, false) => b'.',
    };
    let c2 = match (nmi, hard, soft) {
        (true, true, _) => b'Z',
        (true, false, _) => b'z',
        (false, true, true) => b'H',
        (false, true, false) => b'h',
        (false, false, true) => b's',
        (false, false, false) => b'.',
    };
    let hex = |v: u8| {
        if v == 0 {
            b'.'
        } else {
            b"0123456789abcdef"[v as usize]
        }
    };
    [c0, c1, c2, hex(preempt & 0xf), hex(preempt >> 4)]
}

/// [`flag_chars`] as the text parser reads that column (`Flags::parse`), straight from the
/// bits: the decoder's per-event shortcut (a test checks every pair of bytes against the
/// column).
#[inline]
pub(crate) fn flags_of(flags: u8, preempt: u8) -> Flags {
    let (nmi, hard, soft) = (flags & 0x40 != 0, flags & 0x08 != 0, flags & 0x10 != 0);
    Flags {
        irqs_off: flags & 0x01 != 0,
        need_resched: flags & 0x26 != 0,
        hardirq: hard && !nmi,
        softirq: soft && !nmi,
        nmi,
        preempt_depth: preempt & 0xf,
        migrate_disable: preempt >> 4,
        lazy_depth: 0,
    }
}

/// The flags column of PREEMPT_RT kernels before 6.12, whose RT patch brought its own lazy
/// preemption and records `common_preempt_lazy_count` in every event (6.1-rt): seven columns
/// (the patch's `trace_print_lat_fmt`): irqs-off (`d`, `D`, `b` as above, `X` for bit 1), need-resched (`n`:
/// the patch sets PREEMPT_RESCHED to 0 and gives its bit 5 to need-resched-lazy), then
/// need-resched-lazy (`L`), hard/soft IRQ, the preempt depth (low nibble), the preempt-lazy
/// depth (`%x`, `.` when 0) and migrate-disable (high nibble).
pub fn flag_chars_rt_lazy(flags: u8, preempt: u8, lazy_count: u8) -> String {
    let five = flag_chars(flags & !0x22, preempt);
    let mut s = String::with_capacity(8);
    // Bit 1 is IRQS_NOSUPPORT there (`X`), not need-resched-lazy.
    s.push(match five[0] {
        b'.' if flags & 0x02 != 0 => 'X',
        c => c as char,
    });
    s.push(five[1] as char);
    s.push(if flags & 0x20 != 0 { 'L' } else { '.' });
    s.push(five[2] as char);
    s.push(five[3] as char);
    if lazy_count == 0 {
        s.push('.');
    } else {
        s.push_str(&format!("{lazy_count:x}"));
    }
    s.push(five[4] as char);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_from_the_bits_are_those_of_the_column() {
        for flags in 0..=255u8 {
            for preempt in 0..=255u8 {
                let col = flag_chars(flags, preempt);
                let parsed = Flags::parse(std::str::from_utf8(&col).unwrap());
                assert_eq!(
                    parsed,
                    Some(flags_of(flags, preempt)),
                    "{flags:#x} {preempt:#x}"
                );
            }
        }
    }
}
