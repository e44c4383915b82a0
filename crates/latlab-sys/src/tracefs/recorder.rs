//! An instance of latlab's own (`instances/latlab-<pid>…`): created with its ledger entry
//! first, configured as its [`InstanceSpec`] says, switched on and off through pre-opened
//! files, read, and removed.

use std::fs::{self, File};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

use super::buffers::{clear_at, open_cpu_raw_at, overruns_at};
use super::events::{InstanceSpec, STOP_TRIGGER, TIMER_EVENTS};
use super::layout::RawLayout;
use super::{io_err, write, TraceError};
use crate::ledger::{Entry, EntryId, Ledger};

#[derive(Debug, Clone)]
pub struct RecorderConfig {
    /// Instance name (`latlab-<pid>`).
    pub name: String,
    /// Per-CPU buffer size (the kernel rounds it up).
    pub buffer_kb: u64,
}

/// A configured, not yet started instance.
#[derive(Debug)]
pub struct Recorder {
    dir: PathBuf,
    ledger_id: Option<EntryId>,
    marker: Option<File>,
    tracing_on: Option<File>,
    /// `mono` when available.
    pub clock: String,
    pub events: Vec<String>,
    /// Optional events the kernel lacks.
    pub missing: Vec<String>,
    /// In-kernel stop on a marker (else the collector stops it).
    pub trigger: bool,
    pub buffer_kb: u64,
    pub warnings: Vec<String>,
    /// The layout for the binary decoder (Err: why the instance is read as text).
    pub raw: Result<RawLayout, String>,
}

impl Recorder {
    /// Create and configure the instance (tracing off). On error nothing is left behind.
    pub fn create(
        root: &Path,
        cfg: &RecorderConfig,
        ledger: &mut Ledger,
    ) -> Result<Recorder, TraceError> {
        Self::create_with(root, cfg, &InstanceSpec::RECORDER, ledger)
    }

    /// [`Recorder::create`] of an instance recording what `spec` says.
    pub fn create_with(
        root: &Path,
        cfg: &RecorderConfig,
        spec: &InstanceSpec,
        ledger: &mut Ledger,
    ) -> Result<Recorder, TraceError> {
        let instances = root.join("instances");
        let dir = instances.join(&cfg.name);
        // Required events first: checked on the top-level `events/` before creating anything.
        let missing_required: Vec<String> = spec
            .events
            .iter()
            .filter(|(e, req)| *req && !root.join("events").join(e).is_dir())
            .map(|(e, _)| e.to_string())
            .collect();
        if !missing_required.is_empty() {
            return Err(TraceError::MissingEvents(missing_required));
        }
        let id = ledger
            .add(Entry::TracefsInstance { path: dir.clone() })
            .map_err(io_err(ledger.path()))?;
        if let Err(e) = fs::create_dir(&dir) {
            let _ = ledger.forget(id);
            return Err(match e.kind() {
                io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => {
                    TraceError::ReadOnly {
                        path: instances,
                        source: e,
                    }
                }
                _ => TraceError::Io {
                    path: dir,
                    source: e,
                },
            });
        }
        let mut r = Recorder::unconfigured(dir, Some(id), cfg.buffer_kb);
        match r.configure(cfg, spec) {
            Ok(()) => Ok(r),
            Err(e) => {
                r.teardown();
                let _ = ledger.forget(id);
                r.ledger_id = None;
                Err(e)
            }
        }
    }

    /// The instance at `dir`, made but not configured yet.
    pub(super) fn unconfigured(
        dir: PathBuf,
        ledger_id: Option<EntryId>,
        buffer_kb: u64,
    ) -> Recorder {
        Recorder {
            dir,
            ledger_id,
            marker: None,
            tracing_on: None,
            clock: String::new(),
            events: vec![],
            missing: vec![],
            trigger: false,
            buffer_kb,
            warnings: vec![],
            raw: Err("not configured".into()),
        }
    }

    /// Configure the instance at `self.dir` as `spec` says: tracing off, the clock, the
    /// buffer, the events, the trigger; the marker and `tracing_on` opened.
    pub(super) fn configure(
        &mut self,
        cfg: &RecorderConfig,
        spec: &InstanceSpec,
    ) -> Result<(), TraceError> {
        let d = self.dir.clone();
        write(&d.join("tracing_on"), "0")?;
        // trace_clock clears the buffer: before the events.
        let clocks = fs::read_to_string(d.join("trace_clock")).map_err(io_err(&d))?;
        if clocks
            .split_whitespace()
            .any(|c| c.trim_matches(['[', ']']) == "mono")
        {
            write(&d.join("trace_clock"), "mono")?;
            self.clock = "mono".into();
        } else {
            self.clock = clocks
                .split_whitespace()
                .find(|c| c.starts_with('['))
                .map(|c| c.trim_matches(['[', ']']).to_string())
                .unwrap_or_else(|| "local".into());
            self.warnings.push(format!(
                "trace_clock 'mono' not available (using '{}'): spike times in traces are not on CLOCK_MONOTONIC",
                self.clock
            ));
        }
        write(&d.join("buffer_size_kb"), &cfg.buffer_kb.to_string())?;
        if let Ok(kb) = fs::read_to_string(d.join("buffer_size_kb")) {
            if let Ok(kb) = kb.trim().parse() {
                self.buffer_kb = kb;
            }
        }
        if d.join("options/overwrite").exists() {
            write(
                &d.join("options/overwrite"),
                if spec.overwrite { "1" } else { "0" },
            )?;
        }
        let timer: &[(&str, bool)] = if spec.timer_irq { TIMER_EVENTS } else { &[] };
        let mut want: Vec<(String, bool)> = spec
            .events
            .iter()
            .chain(timer)
            .map(|(e, r)| (e.to_string(), *r))
            .collect();
        let vectors = match spec.vectors {
            true => Some(fs::read_dir(d.join("events/irq_vectors"))),
            false => None,
        };
        if let Some(Ok(rd)) = vectors {
            let mut v: Vec<String> = rd
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with("_entry") || n.ends_with("_exit"))
                .filter(|n| spec.timer_irq || !n.starts_with("local_timer_"))
                .map(|n| format!("irq_vectors/{n}"))
                .collect();
            v.sort();
            want.extend(v.into_iter().map(|e| (e, false)));
        } else if vectors.is_some() {
            self.missing.push("irq_vectors/*".into());
        }
        // A measuring knob (docs/performance.md): only the events of these groups, to weigh
        // what each costs on the wake-up path. The recorder's own attribution needs them all.
        if let Some(keep) = std::env::var_os("LATLAB_TRACE_EVENTS").filter(|_| spec.stop_trigger) {
            let keep = keep.to_string_lossy().into_owned();
            want.retain(|(e, _)| {
                let (sys, ev) = e.split_once('/').unwrap_or((e, ""));
                keep.split(',').any(|g| g == sys || g == ev || g == e)
            });
            self.warnings.push(format!(
                "LATLAB_TRACE_EVENTS={keep}: only these trace events are recorded (attribution incomplete)"
            ));
        }
        for (e, required) in want {
            let p = d.join("events").join(&e).join("enable");
            if p.exists() {
                write(&p, "1")?;
                self.events.push(e);
            } else if required {
                return Err(TraceError::MissingEvents(vec![e]));
            } else {
                self.missing.push(e);
            }
        }
        let trig = d.join("events/ftrace/print/trigger");
        self.trigger = spec.stop_trigger && trig.exists() && fs::write(&trig, STOP_TRIGGER).is_ok();
        if spec.stop_trigger && !self.trigger {
            self.warnings.push(
                "no traceoff trigger on ftrace/print: the recorder stops ~30 µs later, from the collector"
                    .into(),
            );
        }
        let open = |n: &str| {
            File::options()
                .write(true)
                .open(d.join(n))
                .map_err(io_err(&d.join(n)))
        };
        self.marker = Some(open("trace_marker")?);
        self.tracing_on = Some(open("tracing_on")?);
        self.raw = RawLayout::read(&d, &self.events).map_err(|e| e.to_string());
        Ok(())
    }

    /// Take the stop trigger off (a recorder that never stops: its markers are plain events).
    pub fn drop_trigger(&mut self) -> io::Result<()> {
        if self.trigger {
            fs::write(self.dir.join("events/ftrace/print/trigger"), "!traceoff")?;
            self.trigger = false;
        }
        Ok(())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn ledger_id(&self) -> Option<EntryId> {
        self.ledger_id
    }

    /// The pre-opened `trace_marker` fd (valid until [`Recorder::remove`]).
    pub fn marker_fd(&self) -> RawFd {
        self.marker.as_ref().map_or(-1, |f| f.as_raw_fd())
    }

    /// The pre-opened `tracing_on` fd (valid until [`Recorder::remove`]), for a thread that
    /// switches the instance on without a `Recorder` at hand.
    pub fn tracing_on_fd(&self) -> RawFd {
        self.tracing_on.as_ref().map_or(-1, |f| f.as_raw_fd())
    }

    fn set_on(&self, on: bool) -> io::Result<()> {
        let f = self
            .tracing_on
            .as_ref()
            .ok_or_else(|| io::Error::other("recorder removed"))?;
        let v: &[u8] = if on { b"1" } else { b"0" };
        // SAFETY: valid fd and buffer.
        let n = unsafe { libc::pwrite(f.as_raw_fd(), v.as_ptr().cast(), 1, 0) };
        if n == 1 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    pub fn start(&self) -> io::Result<()> {
        self.set_on(true)
    }

    pub fn stop(&self) -> io::Result<()> {
        self.set_on(false)
    }

    pub fn is_on(&self) -> bool {
        fs::read_to_string(self.dir.join("tracing_on")).is_ok_and(|s| s.trim() == "1")
    }

    /// One CPU's buffer as text (non-consuming), a page per `read()`: the kernel formats a
    /// read's events without a preemption point (see [`crate::shortio`]).
    pub fn read_cpu(&self, cpu: u32) -> io::Result<Vec<u8>> {
        crate::shortio::read_chunked(self.open_cpu_trace(cpu)?, crate::shortio::READ_CHUNK)
    }

    /// `per_cpu/cpuN/trace_pipe_raw` (binary sub-buffer pages; reading consumes them),
    /// opened non-blocking for [`read_pages`].
    pub fn open_cpu_raw(&self, cpu: u32) -> io::Result<File> {
        open_cpu_raw_at(&self.dir, cpu)
    }

    /// The kernel's pid → comm table (`saved_cmdlines`: the instance's, else the top
    /// level's), in short reads.
    pub fn saved_cmdlines(&self) -> io::Result<String> {
        let own = self.dir.join("saved_cmdlines");
        let p = match own.exists() {
            true => own,
            false => self
                .dir
                .parent()
                .and_then(Path::parent)
                .map(|root| root.join("saved_cmdlines"))
                .ok_or_else(|| io::Error::other("no tracefs root"))?,
        };
        let b = crate::shortio::read_file(&p)?;
        Ok(String::from_utf8_lossy(&b).into_owned())
    }

    /// `per_cpu/cpuN/trace`, opened for a caller that reads it in its own short calls.
    pub fn open_cpu_trace(&self, cpu: u32) -> io::Result<File> {
        File::open(self.dir.join(format!("per_cpu/cpu{cpu}/trace")))
    }

    /// Empty every CPU's buffer.
    pub fn clear(&self) -> io::Result<()> {
        clear_at(&self.dir)
    }

    /// Events the ring overwrote on this CPU since the last clear (`per_cpu/cpuN/stats`).
    pub fn overruns(&self, cpu: u32) -> Option<u64> {
        overruns_at(&self.dir, cpu)
    }

    /// Best effort: off, events and trigger off, close our fds, rmdir (retrying EBUSY briefly).
    fn teardown(&mut self) -> Option<io::Error> {
        if !self.dir.exists() {
            return None;
        }
        let _ = self.stop();
        let _ = fs::write(self.dir.join("tracing_on"), "0");
        let _ = fs::write(self.dir.join("events/enable"), "0");
        if self.trigger {
            let _ = fs::write(self.dir.join("events/ftrace/print/trigger"), "!traceoff");
        }
        self.marker = None;
        self.tracing_on = None;
        let mut last = None;
        for _ in 0..50 {
            match fs::remove_dir(&self.dir) {
                Ok(()) => return None,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
                Err(e) => last = Some(e),
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        last
    }

    /// Remove the instance and forget its ledger entry.
    pub fn remove(mut self, ledger: &mut Ledger) -> Result<(), TraceError> {
        let err = self.teardown();
        if let Some(e) = err {
            return Err(TraceError::Io {
                path: self.dir.clone(),
                source: e,
            });
        }
        if let Some(id) = self.ledger_id.take() {
            let _ = ledger.forget(id);
        }
        Ok(())
    }
}

impl Drop for Recorder {
    /// The panic path: never leave an instance (and its memory) behind. The ledger entry stays
    /// until its owner forgets it; undoing an already removed instance is harmless.
    fn drop(&mut self) {
        if self.ledger_id.is_some() || self.marker.is_some() {
            let _ = self.teardown();
        }
    }
}
