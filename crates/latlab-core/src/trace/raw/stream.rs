//! A whole trace.dat as one stream of events in time order, for `latlab analyze`: each CPU's
//! pages are walked as they lie, merged by time as found records ([`Found`]: a record's
//! format, bytes and place, checked to decode), and each event is built once (borrowing its
//! strings from the pages) where it is fed to the analyzer; no vector of every event.
//!
//! Names: an event's TASK column is its pid's name in [`Comms`], `saved_cmdlines` first, then
//! the first name the scheduler events give the pid (CPU by CPU, in file order). Those are
//! learnt in one pass before the merge, each CPU's pages on its own thread ([`learn_all`]).

use std::borrow::Cow;
use std::collections::VecDeque;

use super::decode::Slot;
use super::pages::{Item, Walker};
use super::read::{int, string};
use super::{Comms, CpuStats, Known, LostMark, RawDecoder, RawError, Shape};
use crate::trace::analyzer::{parse_marker, Analysis, AnalyzeOptions, Analyzer, SampleMode};
use crate::trace::event::{Event, EventKind, TaskRef};
use crate::trace::parser::ParseError;
use crate::trace::pid_map::PidTable;
use crate::trace::tracedat::TraceDat;

/// A record of the merged stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merged<'a> {
    /// The kernel lost `events` events on `cpu` here (losses of unknown size are left out).
    Lost {
        cpu: u32,
        events: u64,
    },
    Event(Event<'a>),
}

/// An event found in the pages and checked to decode, not built yet: its format, its record
/// and where it sits. The merge and the hand-over between threads move these (48 bytes), not
/// the [`Event`]s (about 180), which are built once, where they are fed ([`Builder::build`]).
#[derive(Debug, Clone, Copy)]
pub struct Found<'a> {
    k: &'a Known,
    data: &'a [u8],
    at: Slot,
}

/// A record of [`Stream::next_found`]: a loss, or an event to build.
#[derive(Debug, Clone, Copy)]
pub enum FoundRec<'a> {
    Lost { cpu: u32, events: u64 },
    Event(Found<'a>),
}

/// One CPU's pages, one event looked ahead.
struct Cursor<'a> {
    cpu: u32,
    walker: Walker<'a>,
    stats: CpuStats,
    /// Losses met before `next` (their counts; None: unknown).
    lost: Vec<Option<u64>>,
    next: Option<Found<'a>>,
    /// Events decoded so far (the next one's `line` is one more).
    decoded: usize,
}

impl<'a> Cursor<'a> {
    /// Walk up to the next event this decoder types and decodes (unknown ones, and those
    /// whose fields lie outside their record, are counted).
    #[inline]
    fn advance(&mut self, dec: &'a RawDecoder) {
        self.next = None;
        while let Some(item) = self.walker.next(&mut self.stats) {
            match item {
                Item::Lost(n) => {
                    self.stats.lost.push(LostMark {
                        before: self.decoded,
                        events: n,
                    });
                    self.lost.push(n);
                }
                Item::Event { ts, data, .. } => {
                    let Some(k) = dec.known_of(data) else {
                        self.stats.unknown_events += 1;
                        continue;
                    };
                    let at = Slot {
                        cpu: self.cpu,
                        ts,
                        line: self.decoded + 1,
                    };
                    if dec.decodes(k, data, at) {
                        self.stats.events += 1;
                        self.decoded += 1;
                        self.next = Some(Found { k, data, at });
                        return;
                    }
                    self.stats.unknown_events += 1;
                }
            }
        }
    }
}

/// Every CPU's events of a trace.dat in time order (ties: the CPU listed first), each loss
/// right before the first event its CPU decoded after it (losses after a CPU's last event come
/// at the end, CPU by CPU): what [`super::decode_all`] collects, one record at a time.
pub struct Stream<'a> {
    dec: &'a RawDecoder,
    comms: &'a Comms,
    cursors: Vec<Cursor<'a>>,
    /// Losses chosen and not yet handed out: (cpu, events).
    out: VecDeque<(u32, u64)>,
    /// The cursor whose event comes once `out` is empty.
    ready: Option<usize>,
    ended: bool,
}

impl<'a> Stream<'a> {
    /// The stream of `dat`'s pages. `comms` should hold the names [`learn_all`] learns. Err
    /// when a CPU's pages are not a whole number of pages.
    pub fn new(
        dec: &'a RawDecoder,
        dat: &'a TraceDat,
        comms: &'a Comms,
    ) -> Result<Stream<'a>, RawError> {
        let mut cursors = Vec::new();
        for c in dat.cpus.iter().filter(|c| !c.pages.is_empty()) {
            let mut cur = Cursor {
                cpu: c.cpu,
                walker: dec.walker(&c.pages)?,
                stats: CpuStats::default(),
                lost: Vec::new(),
                next: None,
                decoded: 0,
            };
            cur.advance(dec);
            cursors.push(cur);
        }
        Ok(Stream {
            dec,
            comms,
            cursors,
            out: VecDeque::new(),
            ready: None,
            ended: false,
        })
    }

    /// Inconsistent pages and events of unknown ID met so far (every one, once the stream
    /// has ended).
    pub fn bad(&self) -> (u64, u64) {
        self.cursors.iter().fold((0, 0), |(b, u), c| {
            (b + c.stats.bad_pages, u + c.stats.unknown_events)
        })
    }

    /// The next record, its event not built: [`Builder::build`] makes it the [`Event`]
    /// [`Iterator::next`] gives.
    #[inline]
    pub fn next_found(&mut self) -> Option<FoundRec<'a>> {
        loop {
            if let Some((cpu, n)) = self.out.pop_front() {
                return Some(FoundRec::Lost { cpu, events: n });
            }
            if let Some(i) = self.ready.take() {
                let c = &mut self.cursors[i];
                let f = c.next?;
                c.advance(self.dec);
                return Some(FoundRec::Event(f));
            }
            // The CPU whose next event is earliest (ties: the one listed first).
            let mut best: Option<(u64, usize)> = None;
            for (i, c) in self.cursors.iter().enumerate() {
                if let Some(f) = &c.next {
                    if best.is_none_or(|(t, _)| f.at.ts < t) {
                        best = Some((f.at.ts, i));
                    }
                }
            }
            match best {
                Some((_, i)) => {
                    Self::losses(&mut self.out, &mut self.cursors[i]);
                    self.ready = Some(i);
                }
                None if !self.ended => {
                    self.ended = true;
                    for c in self.cursors.iter_mut() {
                        Self::losses(&mut self.out, c);
                    }
                }
                None => return None,
            }
        }
    }

    /// What builds the events found (for another thread while this one walks on).
    pub fn builder(&self) -> Builder<'a> {
        Builder {
            dec: self.dec,
            comms: self.comms,
        }
    }

    /// Queue the losses `c` met before its next event (those of known size).
    #[inline]
    fn losses(out: &mut VecDeque<(u32, u64)>, c: &mut Cursor<'a>) {
        if c.lost.is_empty() {
            return;
        }
        for n in c.lost.drain(..).flatten() {
            out.push_back((c.cpu, n));
        }
    }
}

/// Builds the [`Event`]s of a [`Stream`]'s records ([`Stream::builder`]).
#[derive(Clone, Copy)]
pub struct Builder<'a> {
    dec: &'a RawDecoder,
    comms: &'a Comms,
}

impl<'a> Builder<'a> {
    /// A found event built, its TASK column named from `names` (a pid's name is looked up
    /// again only when the pid changes: a CPU's events mostly come in runs of one task).
    /// None never happens for a record of [`Stream::next_found`] (it decoded when found).
    #[inline]
    pub fn build(&self, f: &Found<'a>, names: &mut Names<'a>) -> Option<Event<'a>> {
        let comms = self.comms;
        let name = |pid| {
            if names.0 != pid {
                *names = Names(pid, comms.get(pid));
            }
            names.1
        };
        self.dec.event_named(f.k, f.data, name, f.at)
    }
}

impl<'a> Builder<'a> {
    /// Feed a found `sched_switch` or `sched_waking` to `a` straight from its record, its
    /// tasks read where they lie, when the analyzer's CPU is quiet ([`Analyzer::quiet`]):
    /// no [`Event`] built (its flags, prev_state and TASK column are not read). False, and
    /// nothing fed, for any other event or CPU: [`Builder::build`] it for [`Analyzer::feed`].
    #[inline]
    pub fn feed_quiet(&self, f: &Found<'a>, names: &mut Names<'a>, a: &mut Analyzer<'a>) -> bool {
        let d = f.data;
        let task = |comm, pid, prio| -> Option<TaskRef<'a>> {
            Some(TaskRef {
                comm: string(d, comm)?,
                pid: int(d, pid)?,
                prio: int(d, prio)?,
            })
        };
        let Slot { cpu, ts, .. } = f.at;
        match &f.k.shape {
            Shape::Switch {
                prev_comm,
                prev_pid,
                prev_prio,
                next_comm,
                next_pid,
                next_prio,
                ..
            } if a.quiet(cpu, ts) => {
                let prev = task(prev_comm, prev_pid, prev_prio);
                let next = task(next_comm, next_pid, next_prio);
                let (Some(prev), Some(next), Some(by)) = (prev, next, int(d, &f.k.pid)) else {
                    return false;
                };
                a.quiet_switch((cpu, ts), by, &prev, &next);
                true
            }
            Shape::Wake {
                wakeup: false,
                comm,
                pid,
                prio,
                ..
            } if a.quiet(cpu, ts) => {
                let (Some(t), Some(by)) = (task(comm, pid, prio), int(d, &f.k.pid)) else {
                    return false;
                };
                let comms = self.comms;
                let name = || {
                    if names.0 != by {
                        *names = Names(by, comms.get(by));
                    }
                    Cow::Borrowed(names.1)
                };
                a.quiet_waking((cpu, ts), by, &t, name)
            }
            _ => false,
        }
    }
}

/// The last pid [`Builder::build`] named, and its name.
#[derive(Debug, Clone, Copy)]
pub struct Names<'a>(i64, &'a str);

impl Default for Names<'_> {
    fn default() -> Self {
        Names(0, "<idle>")
    }
}

impl<'a> Iterator for Stream<'a> {
    type Item = Merged<'a>;

    fn next(&mut self) -> Option<Merged<'a>> {
        let b = self.builder();
        loop {
            match self.next_found()? {
                FoundRec::Lost { cpu, events } => return Some(Merged::Lost { cpu, events }),
                FoundRec::Event(f) => {
                    if let Some(e) = b.build(&f, &mut Names::default()) {
                        return Some(Merged::Event(e));
                    }
                }
            }
        }
    }
}

/// Name the pids of every CPU's scheduler events in `comms` (the first name each CPU's events
/// give a pid, CPU by CPU in file order, after those `comms` has), each CPU's pages walked on
/// its own thread (at most as many threads as this machine has CPUs). Returns whether a
/// latlab marker is among the events. Err when a CPU's pages are not a whole number of pages.
pub fn learn_all(dec: &RawDecoder, dat: &TraceDat, comms: &mut Comms) -> Result<bool, RawError> {
    let with_data: Vec<_> = dat.cpus.iter().filter(|c| !c.pages.is_empty()).collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, with_data.len().max(1));
    let chunk = with_data.len().div_ceil(threads).max(1);
    let known: &Comms = comms;
    type Learnt<'p> = Result<(PidTable<Cow<'p, str>>, bool), RawError>;
    let learnt: Vec<Learnt<'_>> = std::thread::scope(|sc| {
        let handles: Vec<_> = with_data
            .chunks(chunk)
            .map(|group| {
                sc.spawn(move || {
                    group
                        .iter()
                        .map(|c| learn_cpu(dec, c.cpu, &c.pages, known))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a decoding thread panicked"))
            .collect()
    });
    let mut markers = false;
    for l in learnt {
        let (names, marked) = l?;
        markers |= marked;
        // Each CPU's names in pid order: the order would not matter (one name per pid and
        // CPU), but a fixed order keeps the result independent of the table's.
        let mut v: Vec<_> = names.iter().collect();
        v.sort_unstable_by_key(|(p, _)| *p);
        for (pid, comm) in v {
            comms.learn(pid, comm);
        }
    }
    Ok(markers)
}

/// Pids below this are marked named in a bit set by [`learn_cpu`] (the kernel's largest
/// `pid_max`: at most 512 KiB); others are looked up every time.
const NAMED_BITS: usize = 1 << 22;

/// One CPU's first name per pid (those `known` lacks) and whether it holds a latlab marker.
fn learn_cpu<'p>(
    dec: &RawDecoder,
    cpu: u32,
    pages: &'p [u8],
    known: &Comms,
) -> Result<(PidTable<Cow<'p, str>>, bool), RawError> {
    let mut names: PidTable<Cow<'p, str>> = PidTable::default();
    let mut markers = false;
    // Pids named already (here or in `known`), one bit each: nearly every event names
    // tasks met before, and needs no look-up at all.
    let mut named: Vec<u64> = Vec::new();
    let mut learn = |d: &'p [u8], pid, comm| {
        let Some(p) = int(d, pid) else { return };
        if p <= 0 {
            return;
        }
        let bit = usize::try_from(p).ok().filter(|&b| b < NAMED_BITS);
        if let Some(b) = bit {
            if named.get(b / 64).is_some_and(|w| w & (1 << (b % 64)) != 0) {
                return;
            }
        }
        if !names.contains_key(&p) && !known.has(p) {
            let Some(c) = string(d, comm) else { return };
            names.insert(p, c);
        }
        if let Some(b) = bit {
            if named.len() <= b / 64 {
                named.resize(b / 64 + 1, 0);
            }
            named[b / 64] |= 1 << (b % 64);
        }
    };
    let mut stats = CpuStats::default();
    let mut w = dec.walker(pages)?;
    while let Some(item) = w.next(&mut stats) {
        let Item::Event { ts, data, .. } = item else {
            continue;
        };
        let Some(k) = dec.known_of(data) else {
            continue;
        };
        match &k.shape {
            Shape::Switch {
                prev_comm,
                prev_pid,
                next_comm,
                next_pid,
                ..
            } => {
                learn(data, prev_pid, prev_comm);
                learn(data, next_pid, next_comm);
            }
            Shape::Wake { comm, pid, .. } => learn(data, pid, comm),
            Shape::Print { .. } if !markers => {
                let at = Slot { cpu, ts, line: 0 };
                markers = dec.event(k, data, known, at).is_some_and(|e| {
                    matches!(&e.kind, EventKind::Marker { text } if parse_marker(text).is_some())
                });
            }
            _ => {}
        }
    }
    Ok((names, markers))
}

/// What [`analyze_dat`] finds in pages it could read: the analysis with the counts of
/// inconsistent pages and of events of unknown ID, or no event at all.
pub type DatAnalysis = Result<(Analysis, (u64, u64)), ParseError>;

/// `latlab analyze` of a trace.dat: its task names learnt ([`learn_all`]), then its events
/// streamed in time order into one [`Analyzer`] with the options `opts_for` gives for the mode
/// (markers when a latlab marker is among the events). Returns the analysis and the counts of
/// inconsistent pages and of events of unknown ID. Err: pages that are not whole (`RawError`),
/// or no event at all.
pub fn analyze_dat(
    dec: &RawDecoder,
    dat: &TraceDat,
    mut comms: Comms,
    opts_for: impl Fn(SampleMode) -> AnalyzeOptions,
) -> Result<DatAnalysis, RawError> {
    let markers = learn_all(dec, dat, &mut comms)?;
    let mode = if markers {
        SampleMode::Markers
    } else {
        SampleMode::Wakeups
    };
    let opts = AnalyzeOptions {
        mode: Some(mode),
        ..opts_for(mode)
    };
    let pages: Vec<&[u8]> = dat.cpus.iter().map(|c| &c.pages[..]).collect();
    let opts = crate::trace::parallel::with_gaps(&opts, mode, &pages);
    let mut stream = Stream::new(dec, dat, &comms)?;
    let mut a = Analyzer::new(opts, mode);
    feed_all(&mut stream, &mut a);
    if a.events() == 0 {
        return Ok(Err(ParseError {
            line: 0,
            msg: "no trace events found in the binary pages".into(),
        }));
    }
    Ok(Ok((a.finish(), stream.bad())))
}

/// Every record of `stream` fed to `a`: the events built on this thread, the pages walked on
/// another one when there is a second core ([`feed_pipelined`]).
fn feed_all<'a>(stream: &mut Stream<'a>, a: &mut Analyzer<'a>) {
    let build = stream.builder();
    let mut names = Names::default();
    let mut feed = |r: &FoundRec<'a>| match *r {
        FoundRec::Event(f) => {
            if !build.feed_quiet(&f, &mut names, a) {
                if let Some(e) = build.build(&f, &mut names) {
                    a.feed(&e);
                }
            }
        }
        FoundRec::Lost { cpu, events } => a.lost(cpu, events),
    };
    if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
        feed_pipelined(stream, &mut feed);
    } else {
        while let Some(r) = stream.next_found() {
            feed(&r);
        }
    }
}

/// How many records ahead [`feed_pipelined`] asks for a record's bytes.
const AHEAD: usize = 8;

/// A hint that `d` is read soon (its first and last cache lines): it never faults.
#[inline(always)]
fn prefetch(d: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let (a, z) = (
            d.as_ptr(),
            d.as_ptr().wrapping_add(d.len().saturating_sub(1)),
        );
        // SAFETY: a prefetch only hints the cache; it reads nothing and never faults.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(a.cast());
            _mm_prefetch::<_MM_HINT_T0>(z.cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = d;
}

/// Feed `stream`'s records to `feed` with the walk through the pages on a thread of its own,
/// in batches (at most four ahead, their buffers handed back for reuse), as the text path
/// parses blocks beside its one analyzer: the pages are walked, merged and checked on one core
/// while the events are built and attributed on the other.
fn feed_pipelined<'a>(stream: &mut Stream<'a>, feed: &mut impl FnMut(&FoundRec<'a>)) {
    const BATCH: usize = 1024;
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<FoundRec<'a>>>(4);
        let (back, recycled) = std::sync::mpsc::channel::<Vec<FoundRec<'a>>>();
        s.spawn(move || {
            let mut buf = Vec::with_capacity(BATCH);
            while let Some(r) = stream.next_found() {
                buf.push(r);
                if buf.len() == BATCH {
                    let next = recycled
                        .try_recv()
                        .unwrap_or_else(|_| Vec::with_capacity(BATCH));
                    // A closed channel: the analyzer's side is gone (it panicked).
                    if tx.send(std::mem::replace(&mut buf, next)).is_err() {
                        return;
                    }
                }
            }
            if !buf.is_empty() {
                let _ = tx.send(buf);
            }
        });
        for mut batch in rx {
            for (i, r) in batch.iter().enumerate() {
                // The records a few events on were read on the other core: asked for now,
                // they are here when their turn comes.
                if let Some(FoundRec::Event(f)) = batch.get(i + AHEAD) {
                    prefetch(f.data);
                }
                feed(r);
            }
            batch.clear();
            let _ = back.send(batch);
        }
    });
}
