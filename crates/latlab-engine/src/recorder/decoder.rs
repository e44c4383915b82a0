//! The decoder of the instances' binary pages, what it needs from the machine (the kernel's
//! symbols, task names), and an instance's whole buffer as a trace-cmd file.

use std::fmt;
use std::path::Path;

use latlab_core::trace::capture::{self, DatInput, DatLayout};
use latlab_core::trace::raw::{Comms, RawDecoder, Symbols};
use latlab_sys::tasks;
use latlab_sys::tracefs::{self, RawLayout};

use crate::instances::Instance;

/// The binary decoder for the session's instances (all alike), or why spikes are read as text.
pub(super) fn binary_decoder(layout: &Result<RawLayout, String>) -> Result<RawDecoder, String> {
    // A measuring knob (docs/performance.md): the kernel's text, to compare the two readers.
    if std::env::var_os("LATLAB_TRACE_READ").is_some_and(|v| v == "text") {
        return Err("LATLAB_TRACE_READ=text".into());
    }
    let layout = layout.as_ref().map_err(|e| e.clone())?;
    let formats: Vec<&str> = layout.formats.iter().map(String::as_str).collect();
    let dec = RawDecoder::new(&layout.header_page, &layout.header_event, &formats)
        .map_err(|e| e.to_string())?;
    // hrtimer callbacks are `%ps` fields: the attribution needs `hrtimer_wakeup`'s name.
    let machine = Path::new("/");
    let ksyms = tasks::kallsyms(machine).map_err(|e| format!("/proc/kallsyms: {e}"))?;
    let syms = Symbols::parse_kallsyms(&String::from_utf8_lossy(&ksyms));
    if syms.addr_of("hrtimer_wakeup").is_none() {
        return Err(
            "kernel symbols not readable in /proc/kallsyms (hrtimer callbacks would be unnamed)"
                .into(),
        );
    }
    // Pointers are shown mixed with a per-run key (never kernel addresses in a file).
    use std::hash::BuildHasher;
    let key = std::collections::hash_map::RandomState::new().hash_one(std::process::id());
    Ok(dec.with_symbols(syms).with_pointer_key(key))
}

/// The name of a task the pages' scheduler events do not name: its `/proc/PID/comm`, a small
/// read. Not the kernel's `saved_cmdlines`: reading it walks the whole table with preemption
/// disabled on every read() (~300 µs on a measured CPU, measured as `preempt_off latlab`
/// causes).
pub(super) fn proc_comm(pid: i64) -> Option<String> {
    tasks::comm(Path::new("/"), pid)
}

/// What a `trace.dat` of an instance's pages carries besides them: its layout and clock.
pub fn dat_layout<'a>(layout: &'a RawLayout, clock: &'a str) -> DatLayout<'a> {
    DatLayout {
        header_page: &layout.header_page,
        header_event: &layout.header_event,
        events: &layout.events,
        formats: &layout.formats,
        clock,
    }
}

/// Why an instance's buffer gave no trace.dat.
#[derive(Debug)]
pub struct DatError(String);

impl fmt::Display for DatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DatError {}

/// A stopped instance's whole buffer (every CPU of `cpus`) as a trace-cmd file, read as binary
/// pages (this consumes them: copy the text first if it is wanted too). For `bench analyze`.
pub fn instance_trace_dat(rec: &Instance, cpus: &[u32]) -> Result<Vec<u8>, DatError> {
    let err = |e: &dyn fmt::Display| DatError(e.to_string());
    let dec = binary_decoder(&rec.raw).map_err(|e| DatError(format!("binary pages: {e}")))?;
    let layout = rec.raw.as_ref().map_err(|e| err(e))?;
    let mut pages = Vec::new();
    for &c in cpus {
        let f = rec.open_cpu_raw(c).map_err(|e| err(&e))?;
        let p = tracefs::read_pages(f, dec.page_size(), usize::MAX, || {}).map_err(|e| err(&e))?;
        pages.push((c, p));
    }
    let mut comms = Comms::default();
    let mut events = Vec::new();
    for (_, p) in &pages {
        let _ = dec.learn_comms(p, &mut comms);
    }
    for (c, p) in &pages {
        let _ = dec.decode_cpu(*c, p, &comms, &mut events);
    }
    let refs: Vec<(u32, &[u8])> = pages.iter().map(|(c, p)| (*c, p.as_slice())).collect();
    capture::trace_dat(&DatInput {
        decoder: &dec,
        layout: dat_layout(layout, &rec.clock),
        cpus: &refs,
        comms: &comms,
        events: &events,
    })
    .ok_or_else(|| DatError("the pages could not be written as a trace.dat".into()))
}
