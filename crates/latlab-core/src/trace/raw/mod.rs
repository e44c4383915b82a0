//! The binary flight recorder's decoder: tracefs ring-buffer pages (what
//! `per_cpu/cpuN/trace_pipe_raw` returns, whole sub-buffer pages) turned into the same typed
//! [`Event`]s the text parser gives, so one [`crate::trace::Analyzer`] attributes both.
//!
//! Pure (no I/O): the caller hands over the texts of `events/header_page`,
//! `events/header_event` and each enabled event's `format` ([`RawDecoder::new`]), the pages
//! ([`RawDecoder::decode_cpu`]), a pid → comm map ([`Comms`], from `saved_cmdlines` and the
//! scheduler events seen) and, for `%ps` fields (hrtimer callbacks), the kernel's text symbols
//! ([`Symbols`], from `/proc/kallsyms`).
//!
//! Every offset and size comes from those texts, never from constants; a layout the decoder
//! does not understand (a 4-byte commit, another event header, a known event without the
//! fields it needs) is a [`RawError`] at [`RawDecoder::new`], and the caller then reads text.
//! A page whose content is inconsistent (an event running past the page's data) costs the
//! rest of that page (counted in [`CpuStats::bad_pages`]), never the trace, and never a panic.
//!
//! Page layout (the kernel's `ring_buffer.c`; libtraceevent's `kbuffer` reads the same):
//! a page starts with its timestamp and `commit` (bytes of data, bit 31 = events were lost
//! before this page, bit 30 = their count is stored as a long right after the data); events
//! follow, each behind a 32-bit header of `type_len` (5 bits) and `time_delta` (27 bits):
//! type_len 1..=28 = data of type_len × 4 bytes; 0 = its length in the next u32; 29 = padding
//! (time_delta 0: the rest of the page); 30 = a time extend (delta = next u32 << 27 + delta);
//! 31 = an absolute timestamp (same encoding, its top 5 bits taken from the current time).
//! Host byte order (the kernel writes its own).
//!
//! [`RawDecoder::render_text`] writes the events in the kernel's `trace` layout (timestamps
//! to the ns), which `latlab analyze` (the text parser) reads back to the same events.

mod dat;
mod decode;
mod extras;
mod flags;
mod format;
mod header;
mod names;
mod osnoise;
mod pages;
mod read;
mod render;
mod shape;
mod stream;
mod timerlat;

use std::collections::HashMap;

pub use dat::{decode_all, decoder_for, named_symbols};
pub use extras::{migrations_and_gaps, LostGap, Migration};
pub use flags::{flag_chars, flag_chars_rt_lazy};
pub use format::{parse_format, EventFormat, Field, FieldKind};
pub use header::{parse_header_event, parse_header_page, EventHeader, PageLayout};
pub use names::{Comms, Symbols};
pub use osnoise::{NoiseKind, OsnoiseDecoder, OsnoiseItem};
pub(crate) use read::{bytes, int, string};
pub(crate) use shape::{Known, F};
pub use stream::{
    analyze_dat, learn_all, Builder, DatAnalysis, Found, FoundRec, Merged, Names, Stream,
};
pub use timerlat::{MissedActivations, TimerlatContext, TimerlatDecoder, TimerlatSample};

use decode::Slot;
use pages::Item;
use read::rd_uint;
use shape::{known, Shape};

use super::event::Event;

/// A layout (or input) the binary decoder cannot read; the caller falls back to the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("binary trace: {what}")]
pub struct RawError {
    pub what: String,
}

impl RawError {
    pub fn new(what: impl Into<String>) -> RawError {
        RawError { what: what.into() }
    }
}

/// What one CPU's pages held.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuStats {
    pub pages: u64,
    pub events: u64,
    /// Bytes of event data (the pages' commits).
    pub bytes: u64,
    /// Pages flagged "events lost before this page".
    pub lost_pages: u64,
    /// Events lost, summed over the flagged pages that store their count.
    pub lost_events: u64,
    /// Flagged pages without a stored count (events lost, how many unknown).
    pub lost_unknown: u64,
    /// Where events were lost: before event `before` (an index into the events decoded by this
    /// call), how many (None: unknown).
    pub lost: Vec<LostMark>,
    /// Pages whose content was inconsistent (their rest is skipped).
    pub bad_pages: u64,
    /// Events of an ID without a format (not decoded).
    pub unknown_events: u64,
}

/// Events lost before the event at index `before`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostMark {
    pub before: usize,
    pub events: Option<u64>,
}

/// The decoder of one kernel's (one instance's) binary pages.
#[derive(Debug, Clone)]
pub struct RawDecoder {
    page: PageLayout,
    header: EventHeader,
    /// The `common_type` field (the event ID), the same in every format.
    type_field: (usize, usize),
    /// The known events, and by ID the place of each in it plus one (0: unknown; IDs beyond
    /// the table are unknown too): one read per event instead of a hash.
    known: Vec<Known>,
    slots: Vec<u16>,
    symbols: Symbols,
    /// Pointers (`%p`) are shown mixed with this key, never as kernel addresses.
    pointer_key: u64,
}

fn err(what: impl Into<String>) -> RawError {
    RawError::new(what)
}

impl RawDecoder {
    /// A decoder for the layout of `header_page`, `header_event` and the events' `format`
    /// texts. Err when any of them is a layout latlab does not understand.
    pub fn new(
        header_page: &str,
        header_event: &str,
        formats: &[&str],
    ) -> Result<RawDecoder, RawError> {
        let page = parse_header_page(header_page)?;
        let header = parse_header_event(header_event)?;
        let mut by_id: HashMap<u16, Known> = HashMap::new();
        let mut type_field = None;
        for text in formats {
            let fmt = parse_format(text)?;
            let ty = fmt
                .field("common_type")
                .ok_or_else(|| err(format!("format of {}: no common_type", fmt.name)))?;
            if ty.kind != FieldKind::Int || ty.size > 4 {
                return Err(err(format!("format of {}: common_type", fmt.name)));
            }
            let t = (ty.offset, ty.size);
            if *type_field.get_or_insert(t) != t {
                return Err(err("formats disagree on common_type"));
            }
            let k = known(fmt)?;
            if by_id.insert(k.fmt.id, k).is_some() {
                return Err(err("two formats with one ID"));
            }
        }
        let type_field = type_field.ok_or_else(|| err("no event formats"))?;
        let mut known: Vec<Known> = by_id.into_values().collect();
        known.sort_by_key(|k| k.fmt.id);
        let top = known.last().map_or(0, |k| k.fmt.id as usize);
        let mut slots = vec![0u16; top + 1];
        for (i, k) in known.iter().enumerate() {
            // At most 65 536 distinct IDs, so `i + 1` fits unless every ID is used.
            slots[k.fmt.id as usize] = u16::try_from(i + 1).map_err(|_| err("too many formats"))?;
        }
        Ok(RawDecoder {
            page,
            header,
            type_field,
            known,
            slots,
            symbols: Symbols::default(),
            pointer_key: 0,
        })
    }

    /// Resolve `%ps` fields (hrtimer callbacks, NMI handlers) with these symbols.
    pub fn with_symbols(mut self, symbols: Symbols) -> RawDecoder {
        self.symbols = symbols;
        self
    }

    /// Show pointers mixed with `key` (a per-run secret keeps kernel addresses out of files).
    pub fn with_pointer_key(mut self, key: u64) -> RawDecoder {
        self.pointer_key = key;
        self
    }

    pub fn page_size(&self) -> usize {
        self.page.page_size()
    }

    /// Where the page header's fields are (for a reader that splits pages by time).
    pub fn page_layout(&self) -> PageLayout {
        self.page
    }

    pub fn symbols(&self) -> &Symbols {
        &self.symbols
    }

    /// The names of the events it knows.
    pub fn event_names(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.known.iter().map(|k| k.fmt.name.as_str()).collect();
        v.sort();
        v
    }

    #[inline]
    fn known_of(&self, data: &[u8]) -> Option<&Known> {
        let (off, size) = self.type_field;
        let id = rd_uint(data, off, size)?;
        let slot = *self.slots.get(usize::try_from(id).ok()?)?;
        self.known.get(usize::from(slot).checked_sub(1)?)
    }

    /// Name the pids of the scheduler events in `pages` in `comms` (those without a name yet).
    pub fn learn_comms(&self, pages: &[u8], comms: &mut Comms) -> Result<(), RawError> {
        let mut stats = CpuStats::default();
        self.walk(pages, &mut stats, |item, _| {
            let Item::Event { data, .. } = item else {
                return;
            };
            let Some(k) = self.known_of(data) else { return };
            match &k.shape {
                Shape::Switch {
                    prev_comm,
                    prev_pid,
                    next_comm,
                    next_pid,
                    ..
                } => {
                    if let (Some(p), Some(c)) = (int(data, prev_pid), string(data, prev_comm)) {
                        comms.learn(p, &c);
                    }
                    if let (Some(p), Some(c)) = (int(data, next_pid), string(data, next_comm)) {
                        comms.learn(p, &c);
                    }
                }
                Shape::Wake { comm, pid, .. } => {
                    if let (Some(p), Some(c)) = (int(data, pid), string(data, comm)) {
                        comms.learn(p, &c);
                    }
                }
                _ => {}
            }
        })
    }

    /// Decode one CPU's pages (whole pages, as `trace_pipe_raw` returns them) into `out`.
    /// Each event's `line` is its ordinal (from 1) among the events of this call. Err only when
    /// `pages` is not a whole number of pages.
    pub fn decode_cpu<'a>(
        &'a self,
        cpu: u32,
        pages: &'a [u8],
        comms: &'a Comms,
        out: &mut Vec<Event<'a>>,
    ) -> Result<CpuStats, RawError> {
        let mut stats = CpuStats::default();
        let first = out.len();
        self.walk(pages, &mut stats, |item, stats| match item {
            Item::Lost(n) => stats.lost.push(LostMark {
                before: out.len() - first,
                events: n,
            }),
            Item::Event { ts, data, .. } => {
                let Some(k) = self.known_of(data) else {
                    stats.unknown_events += 1;
                    return;
                };
                match self.event(
                    k,
                    data,
                    comms,
                    Slot {
                        cpu,
                        ts,
                        line: out.len() - first + 1,
                    },
                ) {
                    Some(e) => {
                        stats.events += 1;
                        out.push(e);
                    }
                    None => stats.unknown_events += 1,
                }
            }
        })?;
        Ok(stats)
    }

    /// [`RawDecoder::decode_cpu`] as a stream (nothing kept): `f` gets each record in order,
    /// a loss mark or an event with its raw bytes (for the fields of events the decoder does
    /// not type, such as `sched_migrate_task`'s CPUs). For `latlab profile`.
    pub fn for_each<'a>(
        &'a self,
        cpu: u32,
        pages: &'a [u8],
        comms: &'a Comms,
        mut f: impl FnMut(RawItem<'a>),
    ) -> Result<CpuStats, RawError> {
        let mut stats = CpuStats::default();
        let mut n = 0usize;
        self.walk(pages, &mut stats, |item, stats| match item {
            Item::Lost(k) => f(RawItem::Lost(k)),
            Item::Event { ts, data, .. } => {
                let Some(k) = self.known_of(data) else {
                    stats.unknown_events += 1;
                    return;
                };
                n += 1;
                match self.event(k, data, comms, Slot { cpu, ts, line: n }) {
                    Some(e) => {
                        stats.events += 1;
                        f(RawItem::Event(e, data));
                    }
                    None => stats.unknown_events += 1,
                }
            }
        })?;
        Ok(stats)
    }
}

/// A record of [`RawDecoder::for_each`].
pub enum RawItem<'a> {
    /// Events were lost here (how many, when the page says).
    Lost(Option<u64>),
    /// An event and its raw record (the format's fields at their offsets).
    Event(Event<'a>, &'a [u8]),
}

#[cfg(test)]
pub(crate) mod tests;
