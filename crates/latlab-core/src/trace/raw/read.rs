//! Reading a record's fields at the offsets its format gives (None outside the record).

use std::borrow::Cow;

use super::{FieldKind, F};

pub(super) fn rd_u32(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

pub(super) fn rd_u64(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// An unsigned integer of 1, 2, 4 or 8 bytes at `off`; None outside `b`.
pub(super) fn rd_uint(b: &[u8], off: usize, size: usize) -> Option<u64> {
    let s = b.get(off..off.checked_add(size)?)?;
    Some(match size {
        1 => s[0] as u64,
        2 => u16::from_ne_bytes(s.try_into().ok()?) as u64,
        4 => u32::from_ne_bytes(s.try_into().ok()?) as u64,
        8 => u64::from_ne_bytes(s.try_into().ok()?),
        _ => return None,
    })
}

/// An integer field, sign-extended when the format says signed.
pub(crate) fn int(d: &[u8], f: &F) -> Option<i64> {
    let v = rd_uint(d, f.off, f.size)?;
    Some(if f.signed {
        let shift = 64 - 8 * f.size as u32;
        ((v << shift) as i64) >> shift
    } else {
        v as i64
    })
}

/// A string field's bytes (up to its first NUL).
pub(crate) fn bytes<'a>(d: &'a [u8], f: &F) -> Option<&'a [u8]> {
    let raw = match f.kind {
        FieldKind::Chars => d.get(f.off..f.off.checked_add(f.size)?)?,
        FieldKind::DataLoc => {
            let v = rd_uint(d, f.off, 4)?;
            let (off, len) = ((v & 0xffff) as usize, (v >> 16) as usize);
            d.get(off..off + len)?
        }
        FieldKind::Tail => d.get(f.off..)?,
        FieldKind::Int | FieldKind::Other => return None,
    };
    Some(match memchr::memchr(0, raw) {
        Some(n) => &raw[..n],
        None => raw,
    })
}

/// A string field as text (borrowed when it is UTF-8).
pub(crate) fn string<'a>(d: &'a [u8], f: &F) -> Option<Cow<'a, str>> {
    Some(String::from_utf8_lossy(bytes(d, f)?))
}
