//! A spike's files (`spikes/NNN/`: `trace.dat`, else (or with `--trace-text` too)
//! `trace.txt`, and `analysis.txt`): written safely
//! (a temp file, never through a planted link, in short calls: latlab_sys::safefile), and, when
//! they come as pages, kept in memory until the measuring threads have stopped.

use std::path::{Path, PathBuf};

use latlab_core::trace::capture::{self, DatLayout, Rendering};
use latlab_core::trace::raw::{Comms, RawDecoder};
use latlab_sys::safefile::write_atomic_unsynced;

/// The spikes' files wait in memory, as the pages they are rendered from, until the measuring
/// threads have stopped: writing them (megabytes per spike, a directory and three files)
/// puts the collector in the kernel for 40–150 µs at a time (`mkdir`, `openat`, `rename`,
/// page-cache allocation), on a measured CPU when every CPU is measured, where a kernel
/// without full preemption makes a woken measuring thread wait for it. Past this many bytes
/// waiting (or a sixteenth of the memory available, if less), a spike's files are written at
/// once.
const DEFER_MAX_BYTES: usize = 128 << 20;

/// The bytes of spike files kept in memory until the run ends: [`DEFER_MAX_BYTES`], or a
/// sixteenth of the memory available if less (the run's heap reserve includes them).
pub fn defer_budget() -> usize {
    latlab_sys::rt::mem_available()
        .map_or(DEFER_MAX_BYTES, |m| (m / 16) as usize)
        .min(DEFER_MAX_BYTES)
}

/// A spike's files, written when the run ends (or at once).
pub(super) struct SpikeFiles {
    pub dir: PathBuf,
    pub analysis: String,
    /// Binary pages of one CPU, rendered as `trace.dat` (and `trace.txt`) when written.
    pub raw: Option<RawFiles>,
}

pub(super) struct RawFiles {
    pub cpu: u32,
    pub pages: Vec<u8>,
    /// The other measured CPUs' pages of the spike's window (`capture::others_window`).
    pub others: Vec<(u32, Vec<u8>)>,
    pub comms: Comms,
}

/// What renders kept pages: the session's decoder and its first instance's layout and clock
/// (kept: the files are written after the instances are gone).
pub(super) struct Renderer<'a> {
    pub decoder: Option<&'a RawDecoder>,
    pub dat: Option<DatLayout<'a>>,
    /// `trace.txt` beside `trace.dat` (`TraceOptions::text_files`).
    pub text: bool,
}

/// The spikes' files kept until the end of the measurement.
pub(super) struct Files {
    /// Keep files that come as pages (`TraceOptions::defer_files`).
    defer: bool,
    /// [`DEFER_MAX_BYTES`], or less on a small machine.
    max: usize,
    pending: Vec<SpikeFiles>,
    bytes: usize,
    /// Spikes whose files were written during the run (past the budget).
    pub written_during_run: u32,
}

impl Files {
    pub fn new(defer: bool) -> Files {
        Files {
            defer,
            max: defer_budget(),
            pending: Vec::new(),
            bytes: 0,
            written_during_run: 0,
        }
    }

    /// A spike's files: kept in memory until the run ends when they come as pages, the session
    /// defers and fewer than the budget's bytes wait; else written now.
    pub fn save(&mut self, f: SpikeFiles, r: &Renderer) {
        let bytes = f.analysis.len()
            + f.raw.as_ref().map_or(0, |r| {
                r.pages.len() + r.others.iter().map(|o| o.1.len()).sum::<usize>()
            });
        if f.raw.is_some() && self.defer && self.bytes + bytes <= self.max {
            self.bytes += bytes;
            self.pending.push(f);
            return;
        }
        if f.raw.is_some() {
            self.written_during_run += 1;
        }
        write(&f, r);
    }

    /// Write every spike's files kept until the end (after the measuring threads stopped).
    pub fn write_pending(&mut self, r: &Renderer) {
        let files = std::mem::take(&mut self.pending);
        self.bytes = 0;
        for f in &files {
            write(f, r);
        }
    }
}

/// Write a spike's directory: its `trace.dat` (and `trace.txt`) rendered from its pages, and
/// `analysis.txt`.
fn write(f: &SpikeFiles, r: &Renderer) {
    let _ = std::fs::create_dir_all(&f.dir);
    if let (Some(raw), Some(decoder)) = (&f.raw, r.decoder) {
        let (text, dat) = capture::render(&Rendering {
            decoder,
            cpu: raw.cpu,
            pages: &raw.pages,
            comms: &raw.comms,
            dat: r.dat,
            text: r.text,
            others: &raw.others,
        });
        write_trace(&f.dir, text.as_deref(), dat.as_deref());
    }
    let _ = write_atomic_unsynced(&f.dir.join("analysis.txt"), f.analysis.as_bytes());
}

/// A spike's trace: trace-cmd's `trace.dat` (for trace-cmd report, KernelShark and `latlab
/// analyze`) when its layout is known, and its `trace.txt` (megabytes) when rendered.
pub(super) fn write_trace(dir: &Path, text: Option<&str>, dat: Option<&[u8]>) {
    if let Some(text) = text {
        let _ = write_atomic_unsynced(&dir.join("trace.txt"), text.as_bytes());
    }
    if let Some(dat) = dat {
        let _ = write_atomic_unsynced(&dir.join("trace.dat"), dat);
    }
}
