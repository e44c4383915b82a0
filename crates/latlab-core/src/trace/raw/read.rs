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
#[inline]
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
#[inline]
pub(crate) fn int(d: &[u8], f: &F) -> Option<i64> {
    // Little-endian hosts, a field with 8 bytes of the record from its start (nearly every
    // one): one 8-byte read cut to the field's size by shifts, no branch on the size (the
    // branches of `rd_uint` were mispredicted as event types alternate).
    if cfg!(target_endian = "little") && f.size.is_power_of_two() && f.size <= 8 {
        let shift = 64 - 8 * f.size as u32;
        if let Some(w) = f.off.checked_add(8).and_then(|e| d.get(f.off..e)) {
            let w = u64::from_le_bytes(w.try_into().ok()?);
            return Some(if f.signed {
                ((w << shift) as i64) >> shift
            } else {
                ((w << shift) >> shift) as i64
            });
        }
        // A field among the record's last 8 bytes: the 8 bytes that end with it.
        let end = f.off.checked_add(f.size)?;
        if let Some(w) = end.checked_sub(8).and_then(|a| d.get(a..end)) {
            let w = u64::from_le_bytes(w.try_into().ok()?);
            return Some(if f.signed {
                (w as i64) >> shift
            } else {
                (w >> shift) as i64
            });
        }
    }
    int_slow(d, f)
}

/// [`int`] read by its size.
fn int_slow(d: &[u8], f: &F) -> Option<i64> {
    let v = rd_uint(d, f.off, f.size)?;
    Some(if f.signed {
        let shift = 64 - 8 * f.size as u32;
        ((v << shift) as i64) >> shift
    } else {
        v as i64
    })
}

/// Where the first NUL of `raw` is, 8 bytes at a time (the lowest byte flagged by the
/// zero-byte test is the first NUL: a false flag is only ever above a true one).
#[inline]
fn nul_at(raw: &[u8]) -> Option<usize> {
    let mut i = 0;
    while let Some(c) = raw.get(i..i + 8) {
        let w = u64::from_le_bytes(c.try_into().ok()?);
        let z = w.wrapping_sub(0x0101_0101_0101_0101) & !w & 0x8080_8080_8080_8080;
        if z != 0 {
            return Some(i + (z.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    raw[i..].iter().position(|&c| c == 0).map(|p| i + p)
}

/// A string field's bytes with its NUL padding; None outside the record.
#[inline]
fn raw_str<'a>(d: &'a [u8], f: &F) -> Option<&'a [u8]> {
    Some(match f.kind {
        FieldKind::Chars => d.get(f.off..f.off.checked_add(f.size)?)?,
        FieldKind::DataLoc => {
            let v = rd_uint(d, f.off, 4)?;
            let (off, len) = ((v & 0xffff) as usize, (v >> 16) as usize);
            d.get(off..off + len)?
        }
        FieldKind::Tail => d.get(f.off..)?,
        FieldKind::Int | FieldKind::Other => return None,
    })
}

/// Whether [`bytes`] (so [`string`]) reads the field: it lies inside the record.
#[inline]
pub(super) fn has_str(d: &[u8], f: &F) -> bool {
    raw_str(d, f).is_some()
}

/// A string field's bytes (up to its first NUL).
#[inline]
pub(crate) fn bytes<'a>(d: &'a [u8], f: &F) -> Option<&'a [u8]> {
    let raw = raw_str(d, f)?;
    // Most are task names (16 bytes): two words, no call to memchr.
    let end = if raw.len() <= 32 {
        nul_at(raw)
    } else {
        memchr::memchr(0, raw)
    };
    Some(match end {
        Some(n) => &raw[..n],
        None => raw,
    })
}

/// A string field as text (borrowed when it is UTF-8).
#[inline]
pub(crate) fn string<'a>(d: &'a [u8], f: &F) -> Option<Cow<'a, str>> {
    Some(text(bytes(d, f)?))
}

/// Bytes as text: borrowed when UTF-8 (checked without `from_utf8_lossy`'s chunking, a
/// tenth of the decoding when every event names a task), else a lossy copy.
#[inline]
pub(crate) fn text(b: &[u8]) -> Cow<'_, str> {
    if b.is_ascii() {
        // SAFETY: ASCII is valid UTF-8.
        return Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(b) });
    }
    match std::str::from_utf8(b) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-wise readers answer what the byte-wise ones do, at every offset, size,
    /// signedness and record length, for bytes with and without NULs.
    #[test]
    fn word_reads_are_the_byte_reads() {
        let mut x = 0x1234_5678_9abc_def1u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..400 {
            let len = (next() % 40) as usize;
            let d: Vec<u8> = (0..len)
                .map(|_| {
                    let b = next() as u8;
                    if round % 3 == 0 && b < 64 {
                        0
                    } else {
                        b
                    }
                })
                .collect();
            for off in 0..len + 2 {
                for size in [0, 1, 2, 3, 4, 8, 16] {
                    for signed in [false, true] {
                        let f = F {
                            off,
                            size,
                            signed,
                            kind: FieldKind::Int,
                        };
                        assert_eq!(int(&d, &f), int_slow(&d, &f), "{d:?} {off} {size}");
                    }
                }
                let r = &d[off.min(len)..];
                assert_eq!(nul_at(r), r.iter().position(|&c| c == 0), "{r:?}");
            }
        }
    }
}
