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
/// counted in the returned totals (bad pages, unknown events).
#[allow(clippy::type_complexity)]
pub fn decode_all<'a>(
    dec: &'a RawDecoder,
    dat: &'a TraceDat,
    comms: &'a mut Comms,
) -> Result<(Vec<Event<'a>>, Vec<(usize, u32, u64)>, (u64, u64)), RawError> {
    for c in &dat.cpus {
        dec.learn_comms(&c.pages, comms)?;
    }
    let comms: &'a Comms = comms;
    // The CPUs with data, decoded on up to as many threads as this machine has CPUs (a file
    // may list thousands of CPUs: never a thread each).
    let with_data: Vec<_> = dat.cpus.iter().filter(|c| !c.pages.is_empty()).collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, with_data.len().max(1));
    let chunk = with_data.len().div_ceil(threads).max(1);
    let decoded: Vec<Result<(u32, Vec<Event<'a>>, super::CpuStats), RawError>> =
        std::thread::scope(|sc| {
            let handles: Vec<_> = with_data
                .chunks(chunk)
                .map(|group| {
                    sc.spawn(move || {
                        group
                            .iter()
                            .map(|c| {
                                let mut ev = Vec::new();
                                let st = dec.decode_cpu(c.cpu, &c.pages, comms, &mut ev)?;
                                Ok((c.cpu, ev, st))
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("a decoding thread panicked"))
                .collect()
        });
    let mut per_cpu = Vec::with_capacity(decoded.len());
    let mut bad = (0, 0);
    for d in decoded {
        let (cpu, ev, st) = d?;
        bad.0 += st.bad_pages;
        bad.1 += st.unknown_events;
        per_cpu.push((cpu, ev, st.lost));
    }
    let total: usize = per_cpu.iter().map(|c| c.1.len()).sum();
    let mut out = Vec::with_capacity(total);
    let mut lost = Vec::new();
    let mut next = vec![0usize; per_cpu.len()];
    let mut iters: Vec<_> = per_cpu
        .into_iter()
        .map(|(cpu, ev, marks)| (cpu, ev.into_iter().peekable(), marks))
        .collect();
    loop {
        // The CPU whose next event is earliest (ties: the lower CPU first).
        let mut best: Option<(u64, usize)> = None;
        for (i, it) in iters.iter_mut().enumerate() {
            if let Some(e) = it.1.peek() {
                if best.is_none_or(|(t, _)| e.ts < t) {
                    best = Some((e.ts, i));
                }
            }
        }
        let Some((_, i)) = best else { break };
        let (cpu, it, marks) = &mut iters[i];
        for m in marks.iter().filter(|m| m.before == next[i]) {
            if let Some(n) = m.events {
                lost.push((out.len(), *cpu, n));
            }
        }
        out.push(it.next().expect("peeked"));
        next[i] += 1;
    }
    for (i, (cpu, _, marks)) in iters.iter().enumerate() {
        for m in marks.iter().filter(|m| m.before >= next[i]) {
            if let Some(n) = m.events {
                lost.push((out.len(), *cpu, n));
            }
        }
    }
    Ok((out, lost, bad))
}
