//! What the two strategies share: the instances, the measuring threads' [`Hook`], the run's
//! settings, the decoder of binary pages, the tallies run.json's `"trace"` is made of, and the
//! spikes' records and files ([`Common::record`], [`Common::finish`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use latlab_core::record::SpikeRecord;
use latlab_core::trace::capture::{self, Analyzed, DatLayout, Place, Render, Spike};
use latlab_core::trace::raw::RawDecoder;
use latlab_core::trace_summary::{CpuOverruns, SpikeCapture, TraceSummary};
use latlab_sys::tracefs::RawLayout;

use super::api::{Hook, TraceOptions};
use super::decoder::dat_layout;
use super::files::{Files, RawFiles, Renderer, SpikeFiles};
use crate::instances::Instances;

/// What the instances are, for the summary (the first one's, all being configured alike).
struct Info {
    instance: PathBuf,
    instances: Vec<PathBuf>,
    clock: String,
    events: Vec<String>,
    missing: Vec<String>,
    /// Every instance stops in the kernel on a marker.
    trigger: bool,
    buffer_kb: u64,
    warnings: Vec<String>,
}

pub(super) struct Common {
    pub instances: Instances,
    pub hook: Hook,
    /// The measured CPUs.
    pub cpus: Vec<u32>,
    pub max_spikes: u32,
    pub virtualized: bool,
    /// [`super::TraceOptions::markers_off_cpu`].
    pub markers_off_cpu: bool,
    /// [`super::TraceOptions::noise`].
    pub noise: bool,
    /// [`super::TraceOptions::text_files`].
    pub text_files: bool,
    /// The decoder of the instances' binary pages (Err: why spikes are read as text).
    pub binary: Result<RawDecoder, String>,
    /// The first instance's layout (kept for the files written after the instances are gone).
    layout: Option<RawLayout>,
    info: Info,
    /// Spikes not traced (no instance armed, over `--trace-max-spikes`, pages not found).
    pub not_traced: u64,
    /// Spikes after `max_spikes` were traced.
    pub over_max_spikes: u64,
    /// Spikes whose marker was not found in the copied trace.
    pub unmatched: u32,
    /// Overwritten events per CPU.
    pub overruns: BTreeMap<u32, u64>,
    pub captures: Vec<SpikeCapture>,
    pub files: Files,
}

impl Common {
    /// How a spike's marker missing from its CPU's pages is placed.
    pub fn placed(&self) -> Place {
        if self.noise {
            Place::Noise
        } else {
            Place::Timer
        }
    }
}

/// What a strategy adds to the summary.
#[derive(Default)]
pub(super) struct Figures {
    /// How a spike stops the recorder.
    pub stop: &'static str,
    pub traced: u32,
    pub covered: u32,
    pub rearm_reused: u32,
    pub rearm_cleared: u32,
    pub orphaned: u32,
    /// Spike → recorder running again, and spike → its pages read: (sum, max, n).
    pub rearm_ns: (u64, u64, u64),
    pub copy_delay_ns: (u64, u64, u64),
    pub dropped_pages: u64,
}

/// A spike's directory in the run directory: `spikes/NNN`.
pub(super) struct SpikeDir {
    pub n: u32,
    pub rel: String,
    pub dir: PathBuf,
}

impl SpikeDir {
    pub fn new(run_dir: &Path, n: u32) -> SpikeDir {
        let rel = format!("spikes/{n:03}");
        SpikeDir {
            n,
            dir: run_dir.join(&rel),
            rel,
        }
    }
}

/// A spike's trace files, as far as the strategy got.
pub(super) enum Trace {
    /// Written already: `trace.dat` (from pages, when its layout is known), else `trace.txt`.
    Written { dat: bool },
    /// The session's pages, rendered when the files are written.
    Pages(RawFiles),
    /// None (the recorder that never stops found no pages for it).
    Missing,
}

impl Common {
    pub fn new(
        instances: Instances,
        binary: Result<RawDecoder, String>,
        opts: &TraceOptions,
        cpus: &[u32],
    ) -> Common {
        let all = instances.all();
        let r = &all[0];
        let info = Info {
            instance: r.dir().to_path_buf(),
            instances: all.iter().map(|r| r.dir().to_path_buf()).collect(),
            clock: r.clock.clone(),
            events: r.events.clone(),
            missing: r.missing.clone(),
            // All instances must stop in the kernel for the marker path to be the fast one.
            trigger: all.iter().all(|r| r.trigger),
            buffer_kb: r.buffer_kb,
            warnings: r.warnings.clone(),
        };
        Common {
            layout: r.raw.as_ref().ok().cloned(),
            info,
            instances,
            hook: Hook {
                armed_fd: Arc::new(AtomicI32::new(-1)),
                marks: None,
            },
            cpus: cpus.to_vec(),
            max_spikes: opts.max_spikes,
            virtualized: latlab_sys::tracefs::virtualized(),
            markers_off_cpu: opts.markers_off_cpu,
            noise: opts.noise,
            text_files: opts.text_files,
            binary,
            not_traced: 0,
            over_max_spikes: 0,
            unmatched: 0,
            overruns: BTreeMap::new(),
            captures: Vec::new(),
            files: Files::new(opts.defer_files),
        }
    }

    /// Add overwritten events, per CPU.
    pub fn count_overruns(&mut self, o: &[(u32, u64)]) {
        for &(c, n) in o {
            *self.overruns.entry(c).or_default() += n;
        }
    }

    /// How a capture of instance `slot` is rendered at once: its `trace.dat`, and its
    /// `trace.txt` with `--trace-text` or without a `trace.dat`.
    pub fn render_now(&self, slot: usize) -> Render<'_> {
        Render::Now {
            dat: self.dat_layout(slot),
            text: self.text_files,
        }
    }

    /// What a `trace.dat` of instance `slot`'s pages carries besides them (None: its layout is
    /// unknown).
    pub fn dat_layout(&self, slot: usize) -> Option<DatLayout<'_>> {
        let i = self.instances.all().get(slot)?;
        Some(dat_layout(i.raw.as_ref().ok()?, &i.clock))
    }

    /// The spike's record, and its `analysis.txt` (with its trace files, when they come as
    /// pages) saved: kept until the run ends, or written now.
    pub fn record(&mut self, d: &SpikeDir, s: Spike, a: &Analyzed, trace: Trace) -> SpikeRecord {
        if a.sample.is_none() {
            self.unmatched += 1;
        }
        let mut spike = capture::spike_record(a, s);
        // The file a reader opens: trace.dat, which trace-cmd, KernelShark, Perfetto's export
        // and `latlab analyze` read, else the text (a layout latlab does not decode).
        let (file, raw) = match trace {
            Trace::Written { dat } => (Some(dat), None),
            Trace::Pages(p) => (Some(self.binary.is_ok() && self.layout.is_some()), Some(p)),
            Trace::Missing => (None, None),
        };
        // What the other CPUs did while this one was silent (their pages of its window).
        if let (Some(p), Ok(dec)) = (&raw, &self.binary) {
            spike.others = capture::others_evidence(dec, &spike, &p.others, &p.comms);
        }
        spike.trace_file = file.map(|dat| {
            let name = if dat { "trace.dat" } else { "trace.txt" };
            format!("{}/{name}", d.rel)
        });
        let f = SpikeFiles {
            dir: d.dir.clone(),
            analysis: capture::analysis_txt(d.n, s, &spike, &a.warnings),
            raw,
        };
        let r = Renderer {
            decoder: self.binary.as_ref().ok(),
            dat: self
                .layout
                .as_ref()
                .map(|l| dat_layout(l, &self.info.clock)),
            text: self.text_files,
        };
        self.files.save(f, &r);
        spike
    }

    /// Write every spike's files kept until the end (after the measuring threads stopped).
    pub fn write_pending(&mut self) {
        let r = Renderer {
            decoder: self.binary.as_ref().ok(),
            dat: self
                .layout
                .as_ref()
                .map(|l| dat_layout(l, &self.info.clock)),
            text: self.text_files,
        };
        self.files.write_pending(&r);
    }

    /// Remove the instances (and unmount tracefs if the session mounted it), write the files
    /// kept until the end, and return the summary stored as run.json's `"trace"`.
    pub fn finish(&mut self, f: Figures) -> TraceSummary {
        self.hook.armed_fd.store(-1, Ordering::SeqCst);
        let removal = self.instances.remove().err().map(|e| e.to_string());
        // The measuring threads have stopped: the spikes' files now.
        self.write_pending();
        let path = |p: &PathBuf| p.to_string_lossy().into_owned();
        let i = &self.info;
        TraceSummary {
            instance: path(&i.instance),
            instances: i.instances.iter().map(path).collect(),
            clock: i.clock.clone(),
            events: i.events.clone(),
            missing_events: i.missing.clone(),
            stop: f.stop.into(),
            buffer_kb: i.buffer_kb,
            max_spikes: self.max_spikes,
            traced: f.traced,
            not_traced: self.not_traced,
            over_max_spikes: self.over_max_spikes,
            covered: f.covered,
            rearm_reused: f.rearm_reused,
            rearm_cleared: f.rearm_cleared,
            orphaned: f.orphaned,
            unmatched: self.unmatched,
            rearm_mean_ns: f.rearm_ns.0.checked_div(f.rearm_ns.2),
            rearm_max_ns: f.rearm_ns.1,
            copy_delay_mean_ns: f.copy_delay_ns.0.checked_div(f.copy_delay_ns.2),
            copy_delay_max_ns: (f.copy_delay_ns.2 > 0).then_some(f.copy_delay_ns.1),
            files_written_while_measuring: self.files.written_during_run,
            dropped_pages: f.dropped_pages,
            overruns: self
                .overruns
                .iter()
                .map(|(&cpu, &events)| CpuOverruns { cpu, events })
                .collect(),
            virtualized: self.virtualized,
            warnings: i.warnings.clone(),
            removal_error: removal,
            read_as: Some(
                if self.binary.is_ok() {
                    "binary"
                } else {
                    "text"
                }
                .into(),
            ),
            binary_fallback: self.binary.as_ref().err().cloned(),
            captures: std::mem::take(&mut self.captures),
        }
    }

    /// How a spike stops the recorder, for instances taking turns.
    pub fn turns_stop(&self) -> &'static str {
        if self.info.trigger {
            "in-kernel traceoff trigger on a marker"
        } else {
            "tracing_on written by the collector"
        }
    }
}

impl Drop for Common {
    /// The panic path (after the strategy stopped its thread): the instances are removed, and
    /// the spikes kept in memory are written, best effort (not lost with the collector).
    fn drop(&mut self) {
        self.hook.armed_fd.store(-1, Ordering::SeqCst);
        let _ = self.instances.remove();
        self.write_pending();
    }
}

/// A record of a spike's capture.
pub(super) fn capture_of(d: &SpikeDir, cpu: u32) -> SpikeCapture {
    SpikeCapture {
        spike: d.n,
        cpu,
        ..SpikeCapture::default()
    }
}
