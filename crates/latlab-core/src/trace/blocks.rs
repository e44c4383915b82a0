//! Block cutting: a trace cut into blocks that separate [`Parser`]s parse independently (in
//! parallel) with the same records as one parser over the whole text.

use super::event::event_at;
use super::line::anchor;
use super::parser::{Parser, Record};

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
    // The parser read every line, and one past the last '\n'.
    p.lines_read().saturating_sub(1)
}
