//! The ring-buffer pages walked record by record, and trimmed to a span of time.

use super::read::{rd_u32, rd_u64};
use super::{err, CpuStats, RawDecoder, RawError};

/// A record of the pages.
pub(super) enum Item<'p> {
    /// Events were lost here (how many, when the page says).
    Lost(Option<u64>),
    Event {
        ts: u64,
        data: &'p [u8],
        /// Where its records start in the page's data (after the previous event: time
        /// extends, padding and the event itself), the time before them, and where it ends.
        group: usize,
        base: u64,
        end: usize,
    },
}

/// One CPU's pages walked record by record, pulled one at a time (the merge of several CPUs
/// pulls from each in turn); [`RawDecoder::walk`] pushes the same records to a closure.
pub(super) struct Walker<'p> {
    page: super::PageLayout,
    h: super::EventHeader,
    tl_mask: u32,
    pages: std::slice::ChunksExact<'p, u8>,
    /// The current page's data, the place in it, its time so far, and where the records of
    /// the next event start with the time before them.
    data: &'p [u8],
    pos: usize,
    ts: u64,
    group: usize,
    base: u64,
}

// The commit's size bits (below the flag bits 30 and 31): 27 as the kernel's.
const COMMIT_MASK: u64 = (1 << 27) - 1;
const MISSED: u64 = 1 << 31;
const STORED: u64 = 1 << 30;
const TS_MSB: u64 = 0xf8 << 56;

impl<'p> Walker<'p> {
    /// The next record, None after the last page. Inconsistent pages are counted in `stats`
    /// (their rest skipped), as are pages, bytes and losses.
    #[inline]
    pub(super) fn next(&mut self, stats: &mut CpuStats) -> Option<Item<'p>> {
        loop {
            if self.pos + 4 > self.data.len() {
                if let Some(lost) = self.next_page(stats)? {
                    return Some(Item::Lost(lost));
                }
                continue;
            }
            let (h, data, pos) = (self.h, self.data, self.pos);
            let w = rd_u32(data, pos);
            let type_len = w & self.tl_mask;
            let delta = (w >> h.type_len_bits) as u64;
            let arr = |i: usize| -> Option<u32> {
                let at = pos + 4 + 4 * i;
                (at + 4 <= data.len()).then(|| rd_u32(data, at))
            };
            if type_len == h.padding {
                if delta == 0 {
                    self.pos = data.len(); // the rest of the page is padding
                    continue;
                }
                let Some(len) = arr(0) else {
                    self.bad(stats);
                    continue;
                };
                self.pos = pos + 4 + len as usize; // a discarded event
                continue;
            }
            if type_len == h.time_extend || type_len == h.time_stamp {
                let Some(hi) = arr(0) else {
                    self.bad(stats);
                    continue;
                };
                let v = ((hi as u64) << h.time_delta_bits) + delta;
                if type_len == h.time_extend {
                    self.ts = self.ts.wrapping_add(v);
                } else {
                    let mut abs = v;
                    if self.ts & TS_MSB != 0 {
                        abs |= self.ts & TS_MSB;
                        if abs < self.ts {
                            abs = abs.wrapping_add(1 << 59);
                        }
                    }
                    self.ts = abs;
                }
                self.pos = pos + 8;
                continue;
            }
            let (start, len, next) = if type_len == 0 {
                let Some(l) = arr(0).and_then(|l| (l as usize).checked_sub(4)) else {
                    self.bad(stats);
                    continue;
                };
                (pos + 8, l, pos + 8 + l.div_ceil(4) * 4)
            } else if type_len <= h.data_max {
                let l = type_len as usize * 4;
                (pos + 4, l, pos + 4 + l)
            } else {
                self.bad(stats);
                continue;
            };
            if start + len > data.len() {
                self.bad(stats);
                continue;
            }
            self.ts = self.ts.wrapping_add(delta);
            let item = Item::Event {
                ts: self.ts,
                data: &data[start..start + len],
                group: self.group,
                base: self.base,
                end: next.min(data.len()),
            };
            self.pos = next;
            (self.group, self.base) = (next, self.ts);
            return Some(item);
        }
    }

    /// The rest of this page is inconsistent: counted, skipped.
    fn bad(&mut self, stats: &mut CpuStats) {
        stats.bad_pages += 1;
        self.pos = self.data.len();
    }

    /// Start the next page (None: there is none); Some(Some(loss)) when it says events were
    /// lost before it (how many, when it stores the count).
    fn next_page(&mut self, stats: &mut CpuStats) -> Option<Option<Option<u64>>> {
        loop {
            let page = self.pages.next()?;
            stats.pages += 1;
            let commit = rd_u64(page, self.page.commit_offset);
            let size = (commit & COMMIT_MASK) as usize;
            let data_end = self.page.data_offset + size;
            if size > self.page.data_size {
                stats.bad_pages += 1;
                continue;
            }
            stats.bytes += size as u64;
            self.ts = rd_u64(page, self.page.ts_offset);
            self.data = &page[self.page.data_offset..data_end];
            (self.pos, self.group, self.base) = (0, 0, self.ts);
            if commit & MISSED == 0 {
                return Some(None);
            }
            stats.lost_pages += 1;
            let n = if commit & STORED != 0 && data_end + 8 <= page.len() {
                Some(rd_u64(page, data_end))
            } else {
                None
            };
            match n {
                Some(n) => stats.lost_events = stats.lost_events.saturating_add(n),
                None => stats.lost_unknown += 1,
            }
            return Some(Some(n));
        }
    }
}

impl RawDecoder {
    /// A walker of one CPU's pages. Err when `pages` is not a whole number of pages.
    pub(super) fn walker<'p>(&self, pages: &'p [u8]) -> Result<Walker<'p>, RawError> {
        let ps = self.page.page_size();
        if !pages.len().is_multiple_of(ps) {
            return Err(err(format!(
                "{} bytes of pages: not a whole number of {ps}-byte pages",
                pages.len()
            )));
        }
        Ok(Walker {
            page: self.page,
            h: self.header,
            tl_mask: (1u32 << self.header.type_len_bits) - 1,
            pages: pages.chunks_exact(ps),
            data: &[],
            pos: 0,
            ts: 0,
            group: 0,
            base: 0,
        })
    }

    /// Walk one CPU's pages: `f` gets each record (lost marks and events) in order.
    pub(super) fn walk<'p>(
        &self,
        pages: &'p [u8],
        stats: &mut CpuStats,
        mut f: impl FnMut(Item<'p>, &mut CpuStats),
    ) -> Result<(), RawError> {
        let mut w = self.walker(pages)?;
        while let Some(item) = w.next(stats) {
            f(item, stats);
        }
        Ok(())
    }

    /// `pages` with only the events whose time is in `span`: pages wholly outside it are
    /// left out, and a page holding events on both sides is rewritten to hold only those
    /// inside (its time stamp set to the time before the first one kept, the records kept
    /// moved to the start of its data). A recorder re-armed in place copies the end of the
    /// previous session and the start of the next with a spike's: each spike's `trace.dat`
    /// and text hold its own session only. Pages the decoder finds damaged are kept as they
    /// are (it says so when they are decoded); so is everything when `pages` is not a whole
    /// number of pages.
    pub fn trim_pages(&self, pages: &[u8], span: std::ops::Range<u64>) -> Vec<u8> {
        let ps = self.page.page_size();
        if !pages.len().is_multiple_of(ps) {
            return pages.to_vec();
        }
        const FLAGS: u64 = MISSED | STORED;
        let mut out = Vec::with_capacity(pages.len());
        for page in pages.chunks_exact(ps) {
            let mut kept: Option<(usize, u64, usize)> = None;
            let (mut outside, mut past) = (false, false);
            let mut st = CpuStats::default();
            let walked = self.walk(page, &mut st, |item, _| {
                if let Item::Event {
                    ts,
                    group,
                    base,
                    end,
                    ..
                } = item
                {
                    if span.contains(&ts) {
                        let k = kept.get_or_insert((group, base, end));
                        k.2 = end;
                    } else {
                        outside = true;
                        past |= ts >= span.end;
                    }
                }
            });
            if walked.is_err() || st.bad_pages > 0 || !outside {
                out.extend_from_slice(page);
                continue;
            }
            if let Some((a, base, z)) = kept {
                let mut p = page.to_vec();
                let d = self.page.data_offset;
                let commit = rd_u64(page, self.page.commit_offset);
                let size = (commit & ((1 << 27) - 1)) as usize;
                // The loss a page reports is before its first event: kept with that event.
                let mut flags = if a == 0 { commit & MISSED } else { 0 };
                if a == 0 && commit & STORED != 0 && d + z + 8 <= ps && d + size + 8 <= ps {
                    let n = rd_u64(page, d + size);
                    p[d + z..d + z + 8].copy_from_slice(&n.to_ne_bytes());
                    flags |= STORED;
                }
                let rest = (commit & !((1 << 27) - 1)) & !FLAGS;
                let new_commit = rest | flags | (z - a) as u64;
                p[self.page.ts_offset..self.page.ts_offset + 8]
                    .copy_from_slice(&base.to_ne_bytes());
                p[self.page.commit_offset..self.page.commit_offset + 8]
                    .copy_from_slice(&new_commit.to_ne_bytes());
                p.copy_within(d + a..d + z, d);
                let stored = if flags & STORED != 0 { 8 } else { 0 };
                p[d + z - a + stored..].fill(0);
                out.extend_from_slice(&p);
            }
            if past {
                break;
            }
        }
        out
    }
}
