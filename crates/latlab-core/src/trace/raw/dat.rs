//! A spike as a trace-cmd file and back: what the recorder puts into `spikes/NNN/trace.dat`
//! besides the pages (the task names and the few kernel symbols its events name), and the
//! decoding of a whole [`TraceDat`] (every CPU, merged in time order) for `latlab analyze`.

use std::collections::BTreeSet;
use std::fmt::Write;

use super::{Comms, RawDecoder, RawError, Symbols};
use crate::trace::event::{Event, EventKind};
use crate::trace::tracedat::TraceDat;

/// A `/proc/kallsyms`-style text of the functions `events` name (hrtimer callbacks, NMI
/// handlers), resolved with `symbols`: what trace-cmd shows for them and what `analyze` needs
/// (`hrtimer_wakeup` opens a sleeper's window), a few lines instead of the kernel's 5 MB.
pub fn named_symbols(symbols: &Symbols, events: &[Event]) -> String {
    let mut names: BTreeSet<&str> = BTreeSet::new();
    names.insert("hrtimer_wakeup");
    for e in events {
        match &e.kind {
            EventKind::HrtimerStart { function, .. }
            | EventKind::HrtimerExpireEntry { function, .. } => {
                names.insert(function);
            }
            EventKind::Nmi { handler, .. } => {
                names.insert(handler);
            }
            _ => {}
        }
    }
    let mut lines: Vec<(u64, &str)> = names
        .into_iter()
        .filter_map(|n| Some((symbols.addr_of(n)?, n)))
        .collect();
    lines.sort();
    let mut s = String::new();
    for (a, n) in lines {
        let _ = writeln!(s, "{a:016x} T {n}");
    }
    s
}

/// The decoder of a trace.dat's layout (its header pages and format files, its symbols) and
/// the task names it carries. Err: a layout latlab does not decode, or a file from a machine
/// of another byte order.
pub fn decoder_for(dat: &TraceDat) -> Result<(RawDecoder, Comms), RawError> {
    if dat.big_endian != cfg!(target_endian = "big") {
        return Err(RawError::new(
            "the file was written on a machine of the other byte order",
        ));
    }
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let formats: Vec<String> = dat
        .ftrace_formats
        .iter()
        .chain(dat.event_formats.iter().flat_map(|(_, f)| f.iter()))
        .map(|f| text(f))
        .collect();
    let refs: Vec<&str> = formats.iter().map(String::as_str).collect();
    let mut dec = RawDecoder::new(&text(&dat.header_page), &text(&dat.header_event), &refs)?;
    if let Some(k) = &dat.kallsyms {
        dec = dec.with_symbols(Symbols::parse_kallsyms(&text(k)));
    }
    Ok((dec, Comms::from_saved_cmdlines(&text(&dat.cmdlines))))
}

/// Every CPU's events of `dat`, merged in time order (stable: a CPU's own order is kept), and
/// where the kernel lost events: `(before, cpu, events)` with `before` an index into the merged
/// events, as [`crate::trace::analyze_events`] takes them. Bad pages and unknown events are
/// counted in the returned totals (bad pages, unknown events). The [`super::Stream`] that
/// `latlab analyze` feeds its analyzer from, collected.
#[allow(clippy::type_complexity)]
pub fn decode_all<'a>(
    dec: &'a RawDecoder,
    dat: &'a TraceDat,
    comms: &'a mut Comms,
) -> Result<(Vec<Event<'a>>, Vec<(usize, u32, u64)>, (u64, u64)), RawError> {
    super::learn_all(dec, dat, comms)?;
    let comms: &'a Comms = comms;
    let mut stream = super::Stream::new(dec, dat, comms)?;
    let (mut out, mut lost) = (Vec::new(), Vec::new());
    for m in stream.by_ref() {
        match m {
            super::Merged::Event(e) => out.push(e),
            super::Merged::Lost { cpu, events } => lost.push((out.len(), cpu, events)),
        }
    }
    Ok((out, lost, stream.bad()))
}
