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
mod extras;
mod format;
mod header;
mod render;

use std::borrow::Cow;
use std::collections::HashMap;

pub use dat::{decode_all, decoder_for, named_symbols};
pub use extras::{migrations_and_gaps, LostGap, Migration};
pub use format::{parse_format, EventFormat, Field, FieldKind};
pub use header::{parse_header_event, parse_header_page, EventHeader, PageLayout};

use super::event::{Event, EventKind, TaskRef};
use super::line::Flags;

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

/// pid → comm for the TASK column: `saved_cmdlines` first (what the kernel's text shows),
/// then the comms the scheduler events name. pid 0 is `<idle>`, an unknown pid `<...>`.
#[derive(Debug, Clone, Default)]
pub struct Comms {
    map: HashMap<i64, String>,
}

impl Comms {
    /// The `saved_cmdlines` text (`PID COMM` lines; others are ignored).
    pub fn from_saved_cmdlines(text: &str) -> Comms {
        let mut c = Comms::default();
        for l in text.lines() {
            if let Some((pid, comm)) = l.split_once(' ') {
                if let Ok(pid) = pid.trim().parse::<i64>() {
                    c.map.insert(pid, comm.to_string());
                }
            }
        }
        c
    }

    /// Name `pid` as `comm` unless it has a name already.
    pub fn learn(&mut self, pid: i64, comm: &str) {
        if pid > 0 && !self.map.contains_key(&pid) {
            self.map.insert(pid, comm.to_string());
        }
    }

    pub fn get(&self, pid: i64) -> &str {
        if pid == 0 {
            return "<idle>";
        }
        self.map.get(&pid).map_or("<...>", |s| s.as_str())
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// The kernel's text symbols (address → name), for `%ps` fields: hrtimer callbacks
/// (`hrtimer_wakeup` opens a sleeper's window) and NMI handlers.
#[derive(Debug, Clone, Default)]
pub struct Symbols {
    addrs: Vec<u64>,
    /// (start, end) of each name in `names`, in the order of `addrs`.
    spans: Vec<(u32, u32)>,
    names: String,
}

impl Symbols {
    /// `/proc/kallsyms` (`ADDR TYPE NAME [module]` lines): the text symbols (`t`, `T`, `w`,
    /// `W`) at a nonzero address (an unprivileged reader sees zeros: then nothing is known).
    pub fn parse_kallsyms(text: &str) -> Symbols {
        let mut v: Vec<(u64, &str)> = Vec::new();
        for l in text.lines() {
            let mut it = l.split_ascii_whitespace();
            let (Some(a), Some(t), Some(n)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            if !matches!(t, "t" | "T" | "w" | "W") {
                continue;
            }
            match u64::from_str_radix(a, 16) {
                Ok(a) if a != 0 => v.push((a, n)),
                _ => {}
            }
        }
        v.sort_by_key(|&(a, _)| a);
        v.dedup_by_key(|&mut (a, _)| a);
        let mut s = Symbols::default();
        for (a, n) in v {
            let start = s.names.len() as u32;
            s.names.push_str(n);
            s.addrs.push(a);
            s.spans.push((start, s.names.len() as u32));
        }
        s
    }

    /// The symbol that starts at `addr`.
    pub fn get(&self, addr: u64) -> Option<&str> {
        let i = self.addrs.binary_search(&addr).ok()?;
        let (a, b) = self.spans[i];
        Some(&self.names[a as usize..b as usize])
    }

    /// The address of `name` (a linear search: for checks, not per event).
    pub fn addr_of(&self, name: &str) -> Option<u64> {
        self.spans
            .iter()
            .position(|&(a, b)| &self.names[a as usize..b as usize] == name)
            .map(|i| self.addrs[i])
    }

    pub fn len(&self) -> usize {
        self.addrs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.addrs.is_empty()
    }
}

/// A field, located: where and how to read it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct F {
    off: usize,
    size: usize,
    signed: bool,
    kind: FieldKind,
}

impl From<&Field> for F {
    fn from(f: &Field) -> F {
        F {
            off: f.offset,
            size: f.size,
            signed: f.signed,
            kind: f.kind,
        }
    }
}

/// What the decoder makes of an event, by its name and fields.
#[derive(Debug, Clone)]
enum Shape {
    Switch {
        prev_comm: F,
        prev_pid: F,
        prev_prio: F,
        prev_state: F,
        next_comm: F,
        next_pid: F,
        next_prio: F,
        /// The state bits that have letters, and the "preempted" (`+`) bit.
        mask: u64,
        plus: u64,
    },
    Wake {
        wakeup: bool,
        comm: F,
        pid: F,
        prio: F,
        target_cpu: Option<F>,
    },
    IrqEntry {
        irq: F,
        name: F,
    },
    IrqExit {
        irq: F,
        ret: Option<F>,
    },
    Softirq {
        entry: bool,
        vec: F,
    },
    Vector {
        entry: bool,
        base: String,
        vector: F,
    },
    HrStart {
        hrtimer: F,
        function: F,
        expires: F,
        softexpires: Option<F>,
        mode: Option<F>,
    },
    HrExpireEntry {
        hrtimer: F,
        function: F,
        now: F,
    },
    HrExpireExit {
        hrtimer: F,
    },
    Nmi {
        handler: F,
        delta_ns: F,
        handled: Option<F>,
    },
    PiSetprio {
        comm: F,
        pid: F,
        oldprio: F,
        newprio: F,
    },
    Print {
        buf: F,
    },
    Other,
}

/// One event's format with its shape and common fields.
#[derive(Debug, Clone)]
pub(crate) struct Known {
    fmt: EventFormat,
    shape: Shape,
    flags: F,
    preempt: F,
    pid: F,
    /// State strings of sched_switch, by `state & (mask | plus)` (at most 512).
    states: Vec<String>,
}

/// The decoder of one kernel's (one instance's) binary pages.
#[derive(Debug, Clone)]
pub struct RawDecoder {
    page: PageLayout,
    header: EventHeader,
    /// The `common_type` field (the event ID), the same in every format.
    type_field: (usize, usize),
    by_id: HashMap<u16, Known>,
    symbols: Symbols,
    /// Pointers (`%p`) are shown mixed with this key, never as kernel addresses.
    pointer_key: u64,
}

fn err(what: impl Into<String>) -> RawError {
    RawError::new(what)
}

/// Event names the text parser reads a body of: a format of that name must have the fields
/// the decoder needs (else the binary and the text paths would not agree).
const PARSER_NAMES: &[&str] = &[
    "sched_switch",
    "sched_waking",
    "sched_wakeup",
    "sched_wakeup_new",
    "irq_handler_entry",
    "irq_handler_exit",
    "softirq_entry",
    "softirq_exit",
    "hrtimer_start",
    "hrtimer_expire_entry",
    "hrtimer_expire_exit",
    "nmi_handler",
    "sched_pi_setprio",
    "tracing_mark_write",
    "print",
];

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
        let mut by_id = HashMap::new();
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
        Ok(RawDecoder {
            page,
            header,
            type_field: type_field.ok_or_else(|| err("no event formats"))?,
            by_id,
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
        let mut v: Vec<&str> = self.by_id.values().map(|k| k.fmt.name.as_str()).collect();
        v.sort();
        v
    }

    /// Walk one CPU's pages: `f` gets each record (lost marks and events) in order.
    fn walk<'p>(
        &self,
        pages: &'p [u8],
        stats: &mut CpuStats,
        mut f: impl FnMut(Item<'p>, &mut CpuStats),
    ) -> Result<(), RawError> {
        let ps = self.page.page_size();
        if !pages.len().is_multiple_of(ps) {
            return Err(err(format!(
                "{} bytes of pages: not a whole number of {ps}-byte pages",
                pages.len()
            )));
        }
        let h = self.header;
        let tl_mask = (1u32 << h.type_len_bits) - 1;
        // The commit's size bits (below the flag bits 30 and 31): 27 as the kernel's.
        const COMMIT_MASK: u64 = (1 << 27) - 1;
        const MISSED: u64 = 1 << 31;
        const STORED: u64 = 1 << 30;
        const TS_MSB: u64 = 0xf8 << 56;
        for page in pages.chunks_exact(ps) {
            stats.pages += 1;
            let mut ts = rd_u64(page, self.page.ts_offset);
            let commit = rd_u64(page, self.page.commit_offset);
            let size = (commit & COMMIT_MASK) as usize;
            let data_end = self.page.data_offset + size;
            if size > self.page.data_size {
                stats.bad_pages += 1;
                continue;
            }
            stats.bytes += size as u64;
            if commit & MISSED != 0 {
                stats.lost_pages += 1;
                let n = if commit & STORED != 0 && data_end + 8 <= ps {
                    Some(rd_u64(page, data_end))
                } else {
                    None
                };
                match n {
                    Some(n) => stats.lost_events = stats.lost_events.saturating_add(n),
                    None => stats.lost_unknown += 1,
                }
                f(Item::Lost(n), stats);
            }
            let data = &page[self.page.data_offset..data_end];
            let mut pos = 0usize;
            let (mut group, mut base) = (0usize, ts);
            while pos + 4 <= data.len() {
                let w = rd_u32(data, pos);
                let type_len = w & tl_mask;
                let delta = (w >> h.type_len_bits) as u64;
                let arr = |i: usize| -> Option<u32> {
                    let at = pos + 4 + 4 * i;
                    (at + 4 <= data.len()).then(|| rd_u32(data, at))
                };
                if type_len == h.padding {
                    if delta == 0 {
                        break; // the rest of the page is padding
                    }
                    let Some(len) = arr(0) else {
                        stats.bad_pages += 1;
                        break;
                    };
                    pos = pos + 4 + len as usize; // a discarded event
                    continue;
                }
                if type_len == h.time_extend || type_len == h.time_stamp {
                    let Some(hi) = arr(0) else {
                        stats.bad_pages += 1;
                        break;
                    };
                    let v = ((hi as u64) << h.time_delta_bits) + delta;
                    if type_len == h.time_extend {
                        ts = ts.wrapping_add(v);
                    } else {
                        let mut abs = v;
                        if ts & TS_MSB != 0 {
                            abs |= ts & TS_MSB;
                            if abs < ts {
                                abs = abs.wrapping_add(1 << 59);
                            }
                        }
                        ts = abs;
                    }
                    pos += 8;
                    continue;
                }
                let (start, len, next) = if type_len == 0 {
                    let Some(l) = arr(0) else {
                        stats.bad_pages += 1;
                        break;
                    };
                    let Some(l) = (l as usize).checked_sub(4) else {
                        stats.bad_pages += 1;
                        break;
                    };
                    (pos + 8, l, pos + 8 + l.div_ceil(4) * 4)
                } else if type_len <= h.data_max {
                    let l = type_len as usize * 4;
                    (pos + 4, l, pos + 4 + l)
                } else {
                    stats.bad_pages += 1;
                    break;
                };
                if start + len > data.len() {
                    stats.bad_pages += 1;
                    break;
                }
                ts = ts.wrapping_add(delta);
                f(
                    Item::Event {
                        ts,
                        data: &data[start..start + len],
                        group,
                        base,
                        end: next.min(data.len()),
                    },
                    stats,
                );
                pos = next;
                (group, base) = (pos, ts);
            }
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
        const MISSED: u64 = 1 << 31;
        const STORED: u64 = 1 << 30;
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

    fn known_of(&self, data: &[u8]) -> Option<&Known> {
        let (off, size) = self.type_field;
        let id = rd_uint(data, off, size)?;
        self.by_id.get(&u16::try_from(id).ok()?)
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
                match self.event(k, cpu, ts, data, comms, out.len() - first + 1) {
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
                match self.event(k, cpu, ts, data, comms, n) {
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

    /// One event. None when a field lies outside the record.
    fn event<'a>(
        &'a self,
        k: &'a Known,
        cpu: u32,
        ts: u64,
        d: &'a [u8],
        comms: &'a Comms,
        line: usize,
    ) -> Option<Event<'a>> {
        let pid = int(d, &k.pid)?;
        let flags = int(d, &k.flags)? as u8;
        let preempt = int(d, &k.preempt)? as u8;
        let col = flag_chars(flags, preempt);
        let flags = Flags::parse(std::str::from_utf8(&col).ok()?)?;
        let kind = self.kind(k, d)?;
        Some(Event {
            line,
            cpu,
            ts,
            task_comm: Cow::Borrowed(comms.get(pid)),
            pid,
            flags,
            kind,
        })
    }

    fn kind<'a>(&'a self, k: &'a Known, d: &'a [u8]) -> Option<EventKind<'a>> {
        let task = |comm: &F, pid: &F, prio: &F| -> Option<TaskRef<'a>> {
            Some(TaskRef {
                comm: string(d, comm)?,
                pid: int(d, pid)?,
                prio: int(d, prio)?,
            })
        };
        Some(match &k.shape {
            Shape::Switch {
                prev_comm,
                prev_pid,
                prev_prio,
                prev_state,
                next_comm,
                next_pid,
                next_prio,
                mask,
                plus,
            } => {
                let st = int(d, prev_state)? as u64 & (mask | plus);
                EventKind::SchedSwitch {
                    prev: task(prev_comm, prev_pid, prev_prio)?,
                    prev_state: Cow::Borrowed(k.states.get(st as usize)?.as_str()),
                    next: task(next_comm, next_pid, next_prio)?,
                }
            }
            Shape::Wake {
                wakeup,
                comm,
                pid,
                prio,
                target_cpu,
            } => {
                let task = task(comm, pid, prio)?;
                let target_cpu = match target_cpu {
                    Some(f) => u32::try_from(int(d, f)?).ok(),
                    None => None,
                };
                if *wakeup {
                    EventKind::SchedWakeup { task, target_cpu }
                } else {
                    EventKind::SchedWaking { task, target_cpu }
                }
            }
            Shape::PiSetprio {
                comm,
                pid,
                oldprio,
                newprio,
            } => EventKind::SchedPiSetprio {
                task: task(comm, pid, oldprio)?,
                newprio: int(d, newprio)?,
            },
            Shape::IrqEntry { irq, name } => EventKind::IrqEntry {
                irq: int(d, irq)?,
                name: string(d, name)?,
            },
            Shape::IrqExit { irq, .. } => EventKind::IrqExit { irq: int(d, irq)? },
            Shape::Softirq { entry, vec } => {
                let vec = int(d, vec)?;
                let name = match k.fmt.symbols.iter().find(|(v, _)| *v == vec) {
                    Some((_, s)) => Cow::Borrowed(s.as_str()),
                    None => Cow::Owned(format!("0x{vec:x}")),
                };
                if *entry {
                    EventKind::SoftirqEntry { vec, name }
                } else {
                    EventKind::SoftirqExit { vec, name }
                }
            }
            Shape::Vector {
                entry,
                base,
                vector,
            } => {
                let (name, vector) = (Cow::Borrowed(base.as_str()), int(d, vector)?);
                if *entry {
                    EventKind::VectorEntry { name, vector }
                } else {
                    EventKind::VectorExit { name, vector }
                }
            }
            Shape::HrStart {
                hrtimer,
                function,
                expires,
                ..
            } => EventKind::HrtimerStart {
                hrtimer: Cow::Owned(self.pointer(int(d, hrtimer)? as u64)),
                function: self.symbol(int(d, function)? as u64),
                expires: int(d, expires)? as u64,
            },
            Shape::HrExpireEntry {
                hrtimer,
                function,
                now,
            } => EventKind::HrtimerExpireEntry {
                hrtimer: Cow::Owned(self.pointer(int(d, hrtimer)? as u64)),
                function: self.symbol(int(d, function)? as u64),
                now: int(d, now)? as u64,
            },
            Shape::HrExpireExit { hrtimer } => EventKind::HrtimerExpireExit {
                hrtimer: Cow::Owned(self.pointer(int(d, hrtimer)? as u64)),
            },
            Shape::Nmi {
                handler, delta_ns, ..
            } => EventKind::Nmi {
                handler: self.symbol(int(d, handler)? as u64),
                delta_ns: int(d, delta_ns)? as u64,
            },
            Shape::Print { buf } => EventKind::Marker {
                text: marker_text(string(d, buf)?),
            },
            Shape::Other => EventKind::Other {
                name: Cow::Borrowed(k.fmt.name.as_str()),
            },
        })
    }

    /// `%ps`: the symbol, else the address in hex.
    fn symbol(&self, addr: u64) -> Cow<'_, str> {
        match self.symbols.get(addr) {
            Some(s) => Cow::Borrowed(s),
            None => Cow::Owned(format!("0x{addr:x}")),
        }
    }

    /// `%p`: 16 hex digits, mixed with the key as the kernel hashes its pointers.
    fn pointer(&self, p: u64) -> String {
        format!("{:016x}", mix(p ^ self.pointer_key))
    }
}

/// splitmix64's finalizer: a bijection, so equal pointers stay equal.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
    z ^ (z >> 31)
}

/// A record of [`RawDecoder::for_each`].
pub enum RawItem<'a> {
    /// Events were lost here (how many, when the page says).
    Lost(Option<u64>),
    /// An event and its raw record (the format's fields at their offsets).
    Event(Event<'a>, &'a [u8]),
}

/// A record of the pages.
enum Item<'p> {
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

fn rd_u32(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn rd_u64(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// An unsigned integer of 1, 2, 4 or 8 bytes at `off`; None outside `b`.
fn rd_uint(b: &[u8], off: usize, size: usize) -> Option<u64> {
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

/// A marker's text as the text parser reads it: leading blanks and the newline off.
fn marker_text(s: Cow<'_, str>) -> Cow<'_, str> {
    match s {
        Cow::Borrowed(b) => Cow::Borrowed(b.trim_ascii_start().trim_end_matches(['\r', '\n'])),
        Cow::Owned(o) => Cow::Owned(
            o.trim_ascii_start()
                .trim_end_matches(['\r', '\n'])
                .to_string(),
        ),
    }
}

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

/// The shape of `fmt`: the fields its kind needs, checked.
fn known(fmt: EventFormat) -> Result<Known, RawError> {
    let name = fmt.name.clone();
    if name.is_empty()
        || name.len() > 64
        || !name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
    {
        return Err(err(format!("event name {name:?}")));
    }
    let need = |n: &str, kind: FieldKind| -> Result<F, RawError> {
        let f = fmt
            .field(n)
            .ok_or_else(|| err(format!("format of {name}: no field {n}")))?;
        let ok = match kind {
            FieldKind::Chars => matches!(
                f.kind,
                FieldKind::Chars | FieldKind::DataLoc | FieldKind::Tail
            ),
            k => f.kind == k,
        };
        if !ok {
            return Err(err(format!("format of {name}: field {n} is {:?}", f.kind)));
        }
        Ok(F::from(f))
    };
    let opt = |n: &str| {
        fmt.field(n)
            .filter(|f| f.kind == FieldKind::Int)
            .map(F::from)
    };
    let (flags, preempt, pid) = (
        need("common_flags", FieldKind::Int)?,
        need("common_preempt_count", FieldKind::Int)?,
        need("common_pid", FieldKind::Int)?,
    );
    use FieldKind::{Chars, Int};
    let mut states = Vec::new();
    let own: Vec<&Field> = fmt
        .fields
        .iter()
        .filter(|f| !f.name.starts_with("common_"))
        .collect();
    let shape = match name.as_str() {
        "sched_switch" => {
            // `(state & MASK) ? __print_flags(state & MASK, "|", {1,"S"} … {MAX,"I"}) : "R"`,
            // then `state & (MAX << 1) ? "+" : ""`: MASK = (MAX << 1) - 1.
            let max = fmt.flags.iter().map(|&(v, _)| v).max().unwrap_or(0);
            if max == 0
                || max > 1 << 16
                || !fmt.print_fmt.contains(": \"R\"")
                || !fmt.print_fmt.contains("? \"+\" : \"\"")
            {
                return Err(err(
                    "sched_switch: a prev_state print format latlab does not know",
                ));
            }
            let (mask, plus) = ((max << 1) - 1, max << 1);
            if mask | plus >= 1 << 12 {
                return Err(err("sched_switch: too many state bits"));
            }
            for v in 0..=(mask | plus) {
                let m = v & mask;
                let mut s = String::new();
                if m == 0 {
                    s.push('R');
                } else {
                    let mut left = m;
                    for (flag, letter) in &fmt.flags {
                        if *flag != 0 && left & flag == *flag {
                            if !s.is_empty() {
                                s.push('|');
                            }
                            s.push_str(letter);
                            left &= !flag;
                        }
                    }
                    if left != 0 {
                        if !s.is_empty() {
                            s.push('|');
                        }
                        s.push_str(&format!("0x{left:x}"));
                    }
                }
                if v & plus != 0 {
                    s.push('+');
                }
                states.push(s);
            }
            Shape::Switch {
                prev_comm: need("prev_comm", Chars)?,
                prev_pid: need("prev_pid", Int)?,
                prev_prio: need("prev_prio", Int)?,
                prev_state: need("prev_state", Int)?,
                next_comm: need("next_comm", Chars)?,
                next_pid: need("next_pid", Int)?,
                next_prio: need("next_prio", Int)?,
                mask,
                plus,
            }
        }
        "sched_waking" | "sched_wakeup" | "sched_wakeup_new" => Shape::Wake {
            wakeup: name != "sched_waking",
            comm: need("comm", Chars)?,
            pid: need("pid", Int)?,
            prio: need("prio", Int)?,
            target_cpu: opt("target_cpu"),
        },
        "irq_handler_entry" => Shape::IrqEntry {
            irq: need("irq", Int)?,
            name: need("name", Chars)?,
        },
        "irq_handler_exit" => Shape::IrqExit {
            irq: need("irq", Int)?,
            ret: opt("ret"),
        },
        "softirq_entry" | "softirq_exit" => Shape::Softirq {
            entry: name == "softirq_entry",
            vec: need("vec", Int)?,
        },
        "hrtimer_start" => Shape::HrStart {
            hrtimer: need("hrtimer", Int)?,
            function: need("function", Int)?,
            expires: need("expires", Int)?,
            softexpires: opt("softexpires"),
            mode: opt("mode"),
        },
        "hrtimer_expire_entry" => Shape::HrExpireEntry {
            hrtimer: need("hrtimer", Int)?,
            function: need("function", Int)?,
            now: need("now", Int)?,
        },
        "hrtimer_expire_exit" => Shape::HrExpireExit {
            hrtimer: need("hrtimer", Int)?,
        },
        "sched_pi_setprio" => Shape::PiSetprio {
            comm: need("comm", Chars)?,
            pid: need("pid", Int)?,
            oldprio: need("oldprio", Int)?,
            newprio: need("newprio", Int)?,
        },
        "nmi_handler" => Shape::Nmi {
            handler: need("handler", Int)?,
            delta_ns: need("delta_ns", Int)?,
            handled: opt("handled"),
        },
        "print" => Shape::Print {
            buf: need("buf", Chars)?,
        },
        n if PARSER_NAMES.contains(&n) => {
            return Err(err(format!("event {n}: not decoded from binary")));
        }
        n if own.first().is_some_and(|f| f.name == "vector")
            && (n.ends_with("_entry") || n.ends_with("_exit")) =>
        {
            let entry = n.ends_with("_entry");
            let base = n
                .strip_suffix(if entry { "_entry" } else { "_exit" })
                .unwrap_or(n)
                .to_string();
            Shape::Vector {
                entry,
                base,
                vector: need("vector", Int)?,
            }
        }
        _ => Shape::Other,
    };
    Ok(Known {
        fmt,
        shape,
        flags,
        preempt,
        pid,
        states,
    })
}

#[cfg(test)]
pub(crate) mod tests;
