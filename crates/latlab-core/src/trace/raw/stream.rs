//! A whole trace.dat as one stream of events in time order, for `latlab analyze`: each CPU's
//! pages are walked as they lie (one event decoded at a time, borrowing its strings from the
//! pages), merged by time, and fed to the analyzer as they come; no vector of every event.
//!
//! Names: an event's TASK column is its pid's name in [`Comms`], `saved_cmdlines` first, then
//! the first name the scheduler events give the pid (CPU by CPU, in file order). Those are
//! learnt in one pass before the merge, each CPU's pages on its own thread ([`learn_all`]).

use std::borrow::Cow;
use std::collections::VecDeque;

use super::decode::Slot;
use super::pages::{Item, Walker};
use super::read::{int, string};
use super::{Comms, CpuStats, LostMark, RawDecoder, RawError, Shape};
use crate::trace::analyzer::{parse_marker, Analysis, AnalyzeOptions, Analyzer, SampleMode};
use crate::trace::event::{Event, EventKind};
use crate::trace::parser::ParseError;
use crate::trace::pid_map::PidMap;
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

/// One CPU's pages, decoded one event ahead.
struct Cursor<'a> {
    cpu: u32,
    walker: Walker<'a>,
    stats: CpuStats,
    /// Losses met before `next` (their counts; None: unknown).
    lost: Vec<Option<u64>>,
    next: Option<Event<'a>>,
    /// Events decoded so far (the next one's `line` is one more).
    decoded: usize,
    /// The last pid named and its name: a CPU's events mostly come in runs of one task.
    named: (i64, &'a str),
}

impl<'a> Cursor<'a> {
    /// Decode up to the next event this decoder types (unknown ones are counted).
    fn advance(&mut self, dec: &'a RawDecoder, comms: &'a Comms) {
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
                    let named = &mut self.named;
                    let name = |pid| {
                        if named.0 != pid {
                            *named = (pid, comms.get(pid));
                        }
                        named.1
                    };
                    match dec.event_named(k, data, name, at) {
                        Some(e) => {
                            self.stats.events += 1;
                            self.decoded += 1;
                            self.next = Some(e);
                            return;
                        }
                        None => self.stats.unknown_events += 1,
                    }
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
    /// The cursor whose event was handed out (it moves on at the next step).
    stale: Option<usize>,
    ended: bool,
}

/// A step of the stream: a loss, or cursor `i`'s event.
enum Step {
    Lost(u32, u64),
    Event(usize),
}

/// A record of [`Stream::next_ref`]: the event stays in the stream (never moved or copied).
pub enum MergedRef<'s, 'a> {
    Lost { cpu: u32, events: u64 },
    Event(&'s Event<'a>),
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
                named: (0, comms.get(0)),
            };
            cur.advance(dec, comms);
            cursors.push(cur);
        }
        Ok(Stream {
            dec,
            comms,
            cursors,
            out: VecDeque::new(),
            ready: None,
            stale: None,
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

    /// The next record, borrowed: what [`Iterator::next`] gives, without moving the event.
    #[inline]
    pub fn next_ref(&mut self) -> Option<MergedRef<'_, 'a>> {
        Some(match self.step()? {
            Step::Lost(cpu, events) => MergedRef::Lost { cpu, events },
            Step::Event(i) => MergedRef::Event(self.cursors[i].next.as_ref()?),
        })
    }

    #[inline]
    fn step(&mut self) -> Option<Step> {
        if let Some(i) = self.stale.take() {
            self.cursors[i].advance(self.dec, self.comms);
        }
        loop {
            if let Some((cpu, n)) = self.out.pop_front() {
                return Some(Step::Lost(cpu, n));
            }
            if let Some(i) = self.ready.take() {
                self.stale = Some(i);
                return Some(Step::Event(i));
            }
            // The CPU whose next event is earliest (ties: the one listed first).
            let mut best: Option<(u64, usize)> = None;
            for (i, c) in self.cursors.iter().enumerate() {
                if let Some(e) = &c.next {
                    if best.is_none_or(|(t, _)| e.ts < t) {
                        best = Some((e.ts, i));
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

impl<'a> Iterator for Stream<'a> {
    type Item = Merged<'a>;

    fn next(&mut self) -> Option<Merged<'a>> {
        Some(match self.step()? {
            Step::Lost(cpu, events) => Merged::Lost { cpu, events },
            Step::Event(i) => Merged::Event(self.cursors[i].next.take()?),
        })
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
    type Learnt<'p> = Result<(PidMap<Cow<'p, str>>, bool), RawError>;
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
        // Each CPU's names in pid order: the map's order would not matter (one name per pid
        // and CPU), but a fixed order keeps the result independent of the hash.
        let mut v: Vec<_> = names.into_iter().collect();
        v.sort_unstable_by_key(|(p, _)| *p);
        for (pid, comm) in v {
            comms.learn(pid, &comm);
        }
    }
    Ok(markers)
}

/// One CPU's first name per pid (those `known` lacks) and whether it holds a latlab marker.
fn learn_cpu<'p>(
    dec: &RawDecoder,
    cpu: u32,
    pages: &'p [u8],
    known: &Comms,
) -> Result<(PidMap<Cow<'p, str>>, bool), RawError> {
    let mut names: PidMap<Cow<'p, str>> = PidMap::default();
    let mut markers = false;
    // Pids met lately (by their low bits): most events name tasks just named, so most need
    // no look-up in the map.
    let mut recent = [0i64; 64];
    let mut learn = |d: &'p [u8], pid, comm| {
        let Some(p) = int(d, pid) else { return };
        let slot = &mut recent[(p & 63) as usize];
        if p <= 0 || *slot == p {
            return;
        }
        if !names.contains_key(&p) && !known.has(p) {
            let Some(c) = string(d, comm) else { return };
            names.insert(p, c);
        }
        *slot = p;
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
    if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
        feed_pipelined(&mut stream, &mut a);
    } else {
        while let Some(m) = stream.next_ref() {
            match m {
                MergedRef::Event(e) => a.feed(e),
                MergedRef::Lost { cpu, events } => a.lost(cpu, events),
            }
        }
    }
    if a.events() == 0 {
        return Ok(Err(ParseError {
            line: 0,
            msg: "no trace events found in the binary pages".into(),
        }));
    }
    Ok(Ok((a.finish(), stream.bad())))
}

/// Feed `stream` to `a` with the decoding on a thread of its own, in batches (at most four
/// ahead, their buffers handed back for reuse), as the text path parses blocks beside its one
/// analyzer: decoding and attribution each take about half of a core.
fn feed_pipelined<'a>(stream: &mut Stream<'a>, a: &mut Analyzer<'a>) {
    const BATCH: usize = 1024;
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Merged<'a>>>(4);
        let (back, recycled) = std::sync::mpsc::channel::<Vec<Merged<'a>>>();
        s.spawn(move || {
            let mut buf = Vec::with_capacity(BATCH);
            for m in stream.by_ref() {
                buf.push(m);
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
            for m in &batch {
                match m {
                    Merged::Event(e) => a.feed(e),
                    Merged::Lost { cpu, events } => a.lost(*cpu, *events),
                }
            }
            batch.clear();
            let _ = back.send(batch);
        }
    });
}
