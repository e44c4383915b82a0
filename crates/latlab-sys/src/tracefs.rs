//! The tracefs flight recorder: latlab's own instance (`instances/latlab-<pid>`), recording the
//! scheduler, IRQ and timer events in overwrite mode until a spike stops it.
//!
//! Why an instance: events, options, triggers and buffers are per instance, so latlab never
//! touches the top-level buffer other tools may be using. Lifecycle (measured facts in
//! `shared/notes/tracefs.md`):
//!
//! 1. the ledger entry is written *before* the `mkdir` (and before a `mount`), so
//!    `latlab cleanup` can remove what a SIGKILL left behind;
//! 2. a new instance starts with tracing ON: write `0` first, then `trace_clock=mono` (it clears
//!    the buffer, so before anything else), buffer size, overwrite, the events;
//! 3. a `traceoff if buf ~ "*LATLAB_STOP*"` trigger on `ftrace/print` lets one marker write
//!    (~1.6 µs, on a pre-opened fd) stop recording in the kernel with the marker as the last
//!    event; without triggers the collector writes `0` to `tracing_on` after the marker;
//! 4. removal: tracing off, events and trigger off, every fd into the instance closed (rmdir
//!    fails with EBUSY otherwise), `rmdir`.
//!
//! The tracefs root is a parameter, so unit tests run against a fake directory tree.

use std::fs::{self, File};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

use crate::ledger::{Entry, EntryId, Ledger};

pub const DEFAULT_ROOT: &str = "/sys/kernel/tracing";

/// Where tracefs may be mounted: its own mount point and the one below debugfs.
pub const MOUNT_POINTS: &[&str] = &[DEFAULT_ROOT, "/sys/kernel/debug/tracing"];

/// The trigger that turns a latlab marker into an in-kernel stop.
pub const STOP_TRIGGER: &str = "traceoff if buf ~ \"*LATLAB_STOP*\"";

/// Events the attribution reads: `(system/event, required)`. `irq_vectors` are added from
/// what the kernel has (they differ between architectures), but the timer's own
/// (`local_timer_*`). `sched_wakeup` is not among them: the analyzer reads the wake-up at
/// `sched_waking` and ignores `sched_wakeup`. Every event fired on a measured CPU between
/// its timer interrupt and its thread's clock read adds to every latency (the first about
/// 1 µs on this VM, docs/performance.md): [`TIMER_EVENTS`] and the timer vector only with
/// `--trace-events full`.
pub const EVENTS: &[(&str, bool)] = &[
    ("sched/sched_switch", true),
    ("sched/sched_waking", true),
    ("irq/irq_handler_entry", false),
    ("irq/irq_handler_exit", false),
    ("irq/softirq_entry", false),
    ("irq/softirq_exit", false),
    ("timer/hrtimer_start", true),
    ("nmi/nmi_handler", false),
    // Priority inheritance (a lock owner boosted above the measuring thread); rare.
    ("sched/sched_pi_setprio", false),
];

/// The timer interrupt's own events (`--trace-events full`): its hrtimer callbacks (the
/// analyzer's E when a thread's arming is not in the trace; the recorder's marker carries it)
/// and, with [`EVENTS`]' vectors, `irq_vectors/local_timer_*` (the timer interrupt's time as
/// an `irq` cause). Four events on every wake-up of a measuring thread.
pub const TIMER_EVENTS: &[(&str, bool)] = &[
    ("timer/hrtimer_expire_entry", true),
    ("timer/hrtimer_expire_exit", true),
];

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("tracefs is not available at {path}: {why}")]
    NoTracefs { path: PathBuf, why: String },
    #[error("tracefs at {path} is not writable: {source} (run as root)")]
    ReadOnly { path: PathBuf, source: io::Error },
    #[error("the kernel lacks trace events latlab needs: {}", .0.join(", "))]
    MissingEvents(Vec<String>),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> TraceError + '_ {
    move |source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn write(path: &Path, v: &str) -> Result<(), TraceError> {
    fs::write(path, v).map_err(io_err(path))
}

/// tracefs, found or mounted.
#[derive(Debug)]
pub struct Tracefs {
    pub root: PathBuf,
    /// The ledger entry of our own mount, when latlab mounted it.
    pub mounted: Option<EntryId>,
}

/// Use tracefs at `root`, mounting it there if it is not mounted (ledger entry first).
pub fn ensure_mounted(root: &Path, ledger: &mut Ledger) -> Result<Tracefs, TraceError> {
    if root.join("instances").is_dir() {
        return Ok(Tracefs {
            root: root.to_path_buf(),
            mounted: None,
        });
    }
    if !root.is_dir() {
        return Err(TraceError::NoTracefs {
            path: root.into(),
            why: "no such directory (kernel without CONFIG_TRACING?)".into(),
        });
    }
    let id = ledger
        .add(Entry::TracefsMount { path: root.into() })
        .map_err(io_err(ledger.path()))?;
    let c = std::ffi::CString::new(root.as_os_str().as_encoded_bytes()).map_err(|_| {
        TraceError::NoTracefs {
            path: root.into(),
            why: "path holds a NUL byte".into(),
        }
    })?;
    // SAFETY: valid NUL-terminated strings; a null data pointer is allowed.
    let r = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            c.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r != 0 || !root.join("instances").is_dir() {
        let why = io::Error::last_os_error().to_string();
        let _ = ledger.forget(id);
        return Err(TraceError::NoTracefs {
            path: root.into(),
            why: format!("not mounted and mounting failed: {why}"),
        });
    }
    Ok(Tracefs {
        root: root.to_path_buf(),
        mounted: Some(id),
    })
}

/// Instances named `latlab-<pid>` or `latlab-<pid>-<suffix>` whose process is gone (left by a
/// killed run).
pub fn leftover_instances(root: &Path) -> Vec<PathBuf> {
    let Ok(rd) = fs::read_dir(root.join("instances")) else {
        return vec![];
    };
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let rest = name.strip_prefix("latlab-")?;
            let pid: u32 = rest.split('-').next()?.parse().ok()?;
            let alive = Path::new(&format!("/proc/{pid}")).exists();
            (!alive).then(|| e.path())
        })
        .collect();
    v.sort();
    v
}

#[derive(Debug, Clone)]
pub struct RecorderConfig {
    /// Instance name (`latlab-<pid>`).
    pub name: String,
    /// Per-CPU buffer size (the kernel rounds it up).
    pub buffer_kb: u64,
}

/// The texts the binary decoder needs, read once when the instance is configured: the page
/// and event-header layouts and the `format` of every enabled event (and of `ftrace/print`,
/// the markers).
#[derive(Debug, Clone, Default)]
pub struct RawLayout {
    pub header_page: String,
    pub header_event: String,
    pub formats: Vec<String>,
    /// The event of each format (`system/event`, same order; the last is `ftrace/print`).
    pub events: Vec<String>,
}

impl RawLayout {
    /// Read the layout of the instance at `dir` for `events` (`system/event`).
    pub fn read(dir: &Path, events: &[String]) -> Result<RawLayout, TraceError> {
        let ev = dir.join("events");
        // In one read: `header_page` and `header_event` answer a short first read with its
        // part only, and the next read with nothing (measured on 6.18: 32-byte reads give the
        // first line and end), so a reader that starts small (as `fs::read_to_string` does
        // on a file of size 0) gets a cut text.
        let read = |p: PathBuf| -> Result<String, TraceError> {
            use std::io::Read;
            let mut f = File::open(&p).map_err(io_err(&p))?;
            let mut buf = vec![0u8; 64 << 10];
            let mut len = 0;
            loop {
                let n = f.read(&mut buf[len..]).map_err(io_err(&p))?;
                len += n;
                if n == 0 || len == buf.len() {
                    break;
                }
            }
            buf.truncate(len);
            String::from_utf8(buf).map_err(|_| TraceError::Io {
                path: p.clone(),
                source: io::Error::other("not UTF-8"),
            })
        };
        let mut formats = Vec::with_capacity(events.len() + 1);
        let mut names = Vec::with_capacity(events.len() + 1);
        for e in events.iter().map(String::as_str).chain(["ftrace/print"]) {
            formats.push(read(ev.join(e).join("format"))?);
            names.push(e.to_string());
        }
        Ok(RawLayout {
            header_page: read(ev.join("header_page"))?,
            header_event: read(ev.join("header_event"))?,
            formats,
            events: names,
        })
    }
}

/// What an instance records: the flight recorder's ([`InstanceSpec::RECORDER`]: [`EVENTS`]
/// and the `irq_vectors`, overwrite, the stop trigger) or `latlab profile`'s
/// ([`InstanceSpec::PROFILE`]: [`PROFILE_EVENTS`], producer/consumer mode: a full buffer
/// drops new events and says so in its pages, read as the profile streams it).
#[derive(Debug, Clone, Copy)]
pub struct InstanceSpec {
    pub events: &'static [(&'static str, bool)],
    pub vectors: bool,
    /// [`TIMER_EVENTS`] and the timer's vector too.
    pub timer_irq: bool,
    pub overwrite: bool,
    pub stop_trigger: bool,
}

impl InstanceSpec {
    pub const RECORDER: InstanceSpec = InstanceSpec {
        events: EVENTS,
        vectors: true,
        timer_irq: false,
        overwrite: true,
        stop_trigger: true,
    };
    /// The recorder with the timer interrupt's events (`--trace-events full`).
    pub const RECORDER_FULL: InstanceSpec = InstanceSpec {
        timer_irq: true,
        ..InstanceSpec::RECORDER
    };
    pub const PROFILE: InstanceSpec = InstanceSpec {
        events: PROFILE_EVENTS,
        vectors: false,
        timer_irq: false,
        overwrite: false,
        stop_trigger: false,
    };
}

/// `latlab profile`'s events: the run queue's (switches, wake-ups, migrations) and the IRQ and
/// softirq entries and exits for the timelines.
pub const PROFILE_EVENTS: &[(&str, bool)] = &[
    ("sched/sched_switch", true),
    ("sched/sched_waking", true),
    ("sched/sched_wakeup", true),
    ("sched/sched_wakeup_new", true),
    ("sched/sched_migrate_task", true),
    ("irq/irq_handler_entry", false),
    ("irq/irq_handler_exit", false),
    ("irq/softirq_entry", false),
    ("irq/softirq_exit", false),
];

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
        let mut r = Recorder {
            dir,
            ledger_id: Some(id),
            marker: None,
            tracing_on: None,
            clock: String::new(),
            events: vec![],
            missing: vec![],
            trigger: false,
            buffer_kb: cfg.buffer_kb,
            warnings: vec![],
            raw: Err("not configured".into()),
        };
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

    fn configure(&mut self, cfg: &RecorderConfig, spec: &InstanceSpec) -> Result<(), TraceError> {
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

/// Empty every CPU's buffer of the instance at `dir`.
pub fn clear_at(dir: &Path) -> io::Result<()> {
    File::options()
        .write(true)
        .truncate(true)
        .open(dir.join("trace"))
        .map(drop)
}

/// Events the ring of the instance at `dir` overwrote on `cpu` since the last clear.
pub fn overruns_at(dir: &Path, cpu: u32) -> Option<u64> {
    let s = fs::read_to_string(dir.join(format!("per_cpu/cpu{cpu}/stats"))).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("overrun:"))
        .and_then(|v| v.trim().parse().ok())
}

/// `entries` (events still in the ring) and `overrun` (events it overwrote since the last
/// clear) of the instance at `dir` on `cpu`, from one read of `per_cpu/cpuN/stats`.
pub fn cpu_stats_at(dir: &Path, cpu: u32) -> Option<(u64, u64)> {
    parse_cpu_stats(&fs::read_to_string(dir.join(format!("per_cpu/cpu{cpu}/stats"))).ok()?)
}

/// `entries` and `overrun` of a `per_cpu/cpuN/stats` text.
fn parse_cpu_stats(s: &str) -> Option<(u64, u64)> {
    let field = |k: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some((field("entries:")?, field("overrun:")?))
}

/// [`cpu_stats_at`] through an open `per_cpu/cpuN/stats` file (read again from its start).
pub fn cpu_stats_of(f: &File) -> Option<(u64, u64)> {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 512];
    let n = f.read_at(&mut buf, 0).ok()?;
    parse_cpu_stats(std::str::from_utf8(&buf[..n]).ok()?)
}

/// `per_cpu/cpuN/trace_pipe_raw` of the instance at `dir`, opened non-blocking (for a thread
/// without the [`Recorder`] at hand; [`Recorder::open_cpu_raw`] is this).
pub fn open_cpu_raw_at(dir: &Path, cpu: u32) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(dir.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw")))
}

/// Read binary pages (an [`Recorder::open_cpu_raw`] file) until the buffer is empty (EAGAIN)
/// or ends: one `page`-byte read per page (the kernel copies a page and formats nothing),
/// calling `tick` every `every` bytes. A read that returns less than a page ends the copy
/// (the whole pages before it are kept: the decoder reads whole pages only).
pub fn read_pages(
    f: impl io::Read,
    page: usize,
    every: usize,
    tick: impl FnMut(),
) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    read_pages_into(f, page, &mut out, every, tick)?;
    Ok(out)
}

/// [`read_pages`], appending to `out` (whose capacity a caller may keep from copy to copy, so
/// a copy allocates nothing once it has grown), with `tick` also before the first read
/// (`every` = `page`: before every read, as the recorder's quiet windows want). Returns the
/// bytes appended; on an error, the pages read before it stay in `out`.
pub fn read_pages_into(
    mut f: impl io::Read,
    page: usize,
    out: &mut Vec<u8>,
    every: usize,
    mut tick: impl FnMut(),
) -> io::Result<usize> {
    let page = page.max(1);
    let start = out.len();
    let mut since = 0usize;
    if every <= page {
        tick();
    }
    loop {
        let len = out.len();
        out.resize(len + page, 0);
        match f.read(&mut out[len..]) {
            Ok(n) if n == page => {
                since += n;
                if since >= every {
                    since = 0;
                    tick();
                }
            }
            Ok(_) => {
                out.truncate(len);
                return Ok(len - start);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => out.truncate(len),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                out.truncate(len);
                return Ok(len - start);
            }
            Err(e) => {
                out.truncate(len);
                return Err(e);
            }
        }
    }
}

/// True when the kernel reports running under a hypervisor (silent gaps are then named so).
pub fn virtualized() -> bool {
    fs::read_to_string("/proc/cpuinfo").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake tracefs tree: the files the recorder writes, as plain files.
    fn fake(root: &Path) {
        for e in EVENTS.iter().chain(TIMER_EVENTS).map(|(e, _)| e).chain(
            [
                "irq_vectors/local_timer_entry",
                "irq_vectors/local_timer_exit",
            ]
            .iter(),
        ) {
            fs::create_dir_all(root.join("events").join(e)).unwrap();
        }
        fs::create_dir_all(root.join("instances")).unwrap();
    }

    /// A fake instance as the kernel would populate it on mkdir (we pre-create it).
    fn fake_instance(dir: &Path, with_trigger: bool, with_mono: bool) {
        for e in EVENTS.iter().chain(TIMER_EVENTS).map(|(e, _)| e).chain(
            [
                "irq_vectors/local_timer_entry",
                "irq_vectors/local_timer_exit",
            ]
            .iter(),
        ) {
            if *e == "nmi/nmi_handler" {
                continue; // pretend this kernel lacks it
            }
            fs::create_dir_all(dir.join("events").join(e)).unwrap();
            fs::write(dir.join("events").join(e).join("enable"), "0").unwrap();
        }
        if with_trigger {
            fs::create_dir_all(dir.join("events/ftrace/print")).unwrap();
            fs::write(dir.join("events/ftrace/print/trigger"), "").unwrap();
        }
        fs::write(dir.join("tracing_on"), "1").unwrap();
        fs::write(
            dir.join("trace_clock"),
            if with_mono {
                "[local] global counter uptime perf mono mono_raw boot\n"
            } else {
                "[local] global\n"
            },
        )
        .unwrap();
        fs::write(dir.join("buffer_size_kb"), "1408").unwrap();
        fs::write(dir.join("trace_marker"), "").unwrap();
        fs::create_dir_all(dir.join("options")).unwrap();
        fs::write(dir.join("options/overwrite"), "0").unwrap();
        fs::create_dir_all(dir.join("per_cpu/cpu1")).unwrap();
        fs::write(
            dir.join("per_cpu/cpu1/stats"),
            "entries: 3\noverrun: 42\ncommit overrun: 0\n",
        )
        .unwrap();
    }

    #[test]
    fn configures_the_instance_and_records_it_in_the_ledger_first() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("tracing");
        fake(&root);
        let mut ledger = Ledger::open_in(&t.path().join("run")).unwrap();
        // mkdir on a plain fs creates an empty dir; populate it as the kernel would, via a
        // pre-existing directory is impossible (create_dir must succeed), so check the failure
        // path first: the instance dir exists already → error, nothing recorded.
        let dir = root.join("instances/latlab-test");
        fs::create_dir_all(&dir).unwrap();
        let cfg = RecorderConfig {
            name: "latlab-test".into(),
            buffer_kb: 4096,
        };
        let e = Recorder::create(&root, &cfg, &mut ledger).unwrap_err();
        assert!(matches!(e, TraceError::Io { .. }), "{e}");
        assert_eq!(ledger.entries().count(), 0);
        fs::remove_dir(&dir).unwrap();

        // Configure a populated fake instance directly.
        fake_instance(&dir, true, true);
        let mut r = Recorder {
            dir: dir.clone(),
            ledger_id: None,
            marker: None,
            tracing_on: None,
            clock: String::new(),
            events: vec![],
            missing: vec![],
            trigger: false,
            buffer_kb: 0,
            warnings: vec![],
            raw: Err("not configured".into()),
        };
        r.configure(&cfg, &InstanceSpec::RECORDER).unwrap();
        assert_eq!(fs::read_to_string(dir.join("tracing_on")).unwrap(), "0");
        assert_eq!(fs::read_to_string(dir.join("trace_clock")).unwrap(), "mono");
        assert_eq!(r.clock, "mono");
        assert_eq!(
            fs::read_to_string(dir.join("buffer_size_kb")).unwrap(),
            "4096"
        );
        assert_eq!(
            fs::read_to_string(dir.join("options/overwrite")).unwrap(),
            "1"
        );
        assert_eq!(
            fs::read_to_string(dir.join("events/sched/sched_switch/enable")).unwrap(),
            "1"
        );
        // Not the timer interrupt's own events (on every wake-up's path), but with `full`.
        let timer = [
            "irq_vectors/local_timer_entry",
            "timer/hrtimer_expire_entry",
        ];
        for e in timer {
            let on = dir.join("events").join(e).join("enable");
            assert_eq!(fs::read_to_string(&on).unwrap(), "0", "{e}");
            assert!(!r.events.iter().any(|x| x == e), "{e}");
        }
        r.events.clear();
        r.missing.clear();
        r.configure(&cfg, &InstanceSpec::RECORDER_FULL).unwrap();
        for e in timer {
            let on = dir.join("events").join(e).join("enable");
            assert_eq!(fs::read_to_string(&on).unwrap(), "1", "{e}");
            assert!(r.events.iter().any(|x| x == e), "{e}");
        }
        assert_eq!(r.missing, vec!["nmi/nmi_handler".to_string()]);
        assert!(r.trigger);
        assert_eq!(
            fs::read_to_string(dir.join("events/ftrace/print/trigger")).unwrap(),
            STOP_TRIGGER
        );
        assert!(r.marker_fd() >= 0);
        assert_eq!(r.overruns(1), Some(42));
        assert_eq!(r.overruns(0), None);
        r.start().unwrap();
        assert!(r.is_on());
        r.stop().unwrap();
        assert!(!r.is_on());
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        // No layout files in the fake: the binary path is off, and says why.
        let why = r.raw.as_ref().unwrap_err();
        assert!(why.contains("format") || why.contains("header_"), "{why}");
    }

    #[test]
    fn falls_back_without_mono_or_trigger_and_refuses_missing_required_events() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("inst");
        fake_instance(&dir, false, false);
        let cfg = RecorderConfig {
            name: "x".into(),
            buffer_kb: 64,
        };
        let mut r = Recorder {
            dir: dir.clone(),
            ledger_id: None,
            marker: None,
            tracing_on: None,
            clock: String::new(),
            events: vec![],
            missing: vec![],
            trigger: false,
            buffer_kb: 0,
            warnings: vec![],
            raw: Err("not configured".into()),
        };
        r.configure(&cfg, &InstanceSpec::RECORDER).unwrap();
        assert_eq!(r.clock, "local");
        assert!(!r.trigger);
        assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
        drop(r);

        let root = t.path().join("tracing");
        fs::create_dir_all(root.join("instances")).unwrap();
        fs::create_dir_all(root.join("events/sched/sched_switch")).unwrap();
        let mut ledger = Ledger::open_in(&t.path().join("run")).unwrap();
        match Recorder::create(&root, &cfg, &mut ledger) {
            Err(TraceError::MissingEvents(v)) => {
                assert!(v.contains(&"sched/sched_waking".to_string()), "{v:?}");
                assert!(!v.contains(&"sched/sched_switch".to_string()));
            }
            other => panic!("{other:?}"),
        }
        assert!(fs::read_dir(root.join("instances"))
            .unwrap()
            .next()
            .is_none());
    }

    /// Whole pages until EAGAIN or the end; a short read ends the copy; `tick` runs per
    /// `every` bytes.
    #[test]
    fn read_pages_reads_whole_pages_until_eagain() {
        struct Src(Vec<io::Result<usize>>);
        impl io::Read for Src {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                assert_eq!(buf.len(), 8, "one page per read");
                match self.0.remove(0) {
                    Ok(n) => {
                        buf[..n].fill(n as u8);
                        Ok(n)
                    }
                    Err(e) => Err(e),
                }
            }
        }
        let again = || io::Error::from(io::ErrorKind::WouldBlock);
        let intr = || io::Error::from(io::ErrorKind::Interrupted);
        let mut ticks = 0;
        let v = read_pages(
            Src(vec![Ok(8), Err(intr()), Ok(8), Ok(8), Err(again())]),
            8,
            16,
            || ticks += 1,
        )
        .unwrap();
        assert_eq!((v.len(), ticks), (24, 1));
        let v = read_pages(Src(vec![Ok(8), Ok(3), Ok(8)]), 8, 8, || {}).unwrap();
        assert_eq!(v, vec![8u8; 8]);
        let v = read_pages(Src(vec![Ok(8), Ok(0)]), 8, 8, || {}).unwrap();
        assert_eq!(v.len(), 8);
        let e = read_pages(Src(vec![Ok(8), Err(io::Error::other("boom"))]), 8, 8, || {});
        assert!(e.is_err());
        // `every` a page: the tick comes before every read (the quiet windows' gate).
        let mut ticks = 0;
        let v = read_pages(Src(vec![Ok(8), Ok(8), Err(again())]), 8, 8, || ticks += 1).unwrap();
        assert_eq!((v.len(), ticks), (16, 3));
    }

    /// This machine's kernel, for real: a private instance records a few scheduler, timer and
    /// IRQ events on CPU 0 and a marker (the in-kernel trigger stops it); the CPU's text
    /// (`per_cpu/cpu0/trace`, read first: it does not consume) and its binary pages
    /// (`trace_pipe_raw`, read after) hold the same events, decoded by latlab with the layout
    /// this kernel publishes: same time (to the µs), pid, flags, task, kind and fields (but
    /// hrtimer pointers, which the kernel hashes), and the rendering is the kernel's text
    /// line for line but for the nanoseconds and those pointers.
    #[test]
    fn fresh_binary_pages_decode_to_the_kernels_text() {
        use latlab_core::trace::event::EventKind;
        use latlab_core::trace::parser::{Parser, Record};
        use latlab_core::trace::raw::{Comms, RawDecoder, Symbols};
        let Some(_g) = crate::privileged::guard("fresh_binary_pages_decode_to_the_kernels_text")
        else {
            return;
        };
        let t = tempfile::tempdir().unwrap();
        let mut ledger = Ledger::open_in(&t.path().join("run")).unwrap();
        let tfs = ensure_mounted(Path::new(DEFAULT_ROOT), &mut ledger).unwrap();
        let cfg = RecorderConfig {
            name: format!("latlab-{}-rawtest", std::process::id()),
            buffer_kb: 512,
        };
        let rec = Recorder::create(&tfs.root, &cfg, &mut ledger).unwrap();
        let layout = rec.raw.clone().expect("this kernel's layout is read");
        rec.clear().unwrap();
        let marker = rec.marker_fd();
        std::thread::scope(|sc| {
            sc.spawn(|| {
                // On CPU 0: its buffer is the one read below.
                // SAFETY: plain syscall on this thread with a valid set.
                unsafe {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(0, &mut set);
                    assert_eq!(
                        libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set),
                        0
                    );
                }
                rec.start().unwrap();
                for _ in 0..5 {
                    let _ = std::process::Command::new("true").status();
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
                let m = b"LATLAB_STOP cpu=0 intended=1 actual=2 latency=1 (raw test)\n";
                // SAFETY: a valid fd and buffer.
                let n = unsafe { libc::write(marker, m.as_ptr().cast(), m.len()) };
                assert_eq!(n as usize, m.len());
            });
        });
        if rec.is_on() {
            rec.stop().unwrap(); // no trigger on this kernel
        }
        let text = String::from_utf8(rec.read_cpu(0).unwrap()).unwrap();
        let cmdlines = rec.saved_cmdlines().unwrap();
        let pages = read_pages(rec.open_cpu_raw(0).unwrap(), 4096, usize::MAX, || {}).unwrap();
        let again = read_pages(rec.open_cpu_raw(0).unwrap(), 4096, usize::MAX, || {}).unwrap();
        assert!(
            again.is_empty(),
            "reading trace_pipe_raw consumes the pages"
        );
        let formats: Vec<&str> = layout.formats.iter().map(String::as_str).collect();
        let ksyms = std::fs::read_to_string("/proc/kallsyms").unwrap();
        let dec = RawDecoder::new(&layout.header_page, &layout.header_event, &formats)
            .unwrap()
            .with_symbols(Symbols::parse_kallsyms(&ksyms));
        assert_eq!(pages.len() % dec.page_size(), 0);
        let mut comms = Comms::from_saved_cmdlines(&cmdlines);
        dec.learn_comms(&pages, &mut comms).unwrap();
        let mut got = Vec::new();
        let st = dec.decode_cpu(0, &pages, &comms, &mut got).unwrap();
        let want: Vec<_> = Parser::new(&text)
            .filter_map(|r| match r {
                Record::Event(e) => Some(e),
                _ => None,
            })
            .collect();
        assert!(want.len() >= 10, "{text}");
        assert_eq!(got.len(), want.len(), "{text}");
        assert_eq!((st.bad_pages, st.unknown_events), (0, 0));
        let no_ptr = |k: &EventKind| {
            let mut k = k.clone().into_owned();
            match &mut k {
                EventKind::HrtimerStart { hrtimer, .. }
                | EventKind::HrtimerExpireEntry { hrtimer, .. }
                | EventKind::HrtimerExpireExit { hrtimer } => *hrtimer = "p".into(),
                _ => {}
            }
            k
        };
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!((g.ts + 500) / 1000, w.ts / 1000, "event {i}");
            assert_eq!(
                (g.cpu, g.pid, g.flags, no_ptr(&g.kind), &g.task_comm),
                (w.cpu, w.pid, w.flags, no_ptr(&w.kind), &w.task_comm),
                "event {i}"
            );
        }
        let marked = got.iter().any(|e| {
            matches!(&e.kind, EventKind::Marker { text } if text.starts_with("LATLAB_STOP") && text.ends_with("(raw test)"))
        });
        assert!(marked, "the marker is the last thing recorded");
        assert!(got
            .iter()
            .any(|e| matches!(e.kind, EventKind::SchedSwitch { .. })));
        let mut out = String::new();
        dec.render_text(0, &pages, &comms, &mut out).unwrap();
        let mine: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
        let kernel: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(mine.len(), kernel.len());
        for (m, k) in mine.iter().zip(&kernel) {
            let head = |l: &str| l[..l.find("] ").unwrap() + 8].to_string();
            assert_eq!(head(m), head(k));
            let body = |l: &str| l[l.find(": ").unwrap()..].to_string();
            if !k.contains("hrtimer") && !k.contains("nmi_handler") {
                assert_eq!(body(m), body(k));
            }
        }
        rec.remove(&mut ledger).unwrap();
        if let Some(id) = tfs.mounted {
            crate::ledger::undo(&Entry::TracefsMount {
                path: tfs.root.clone(),
            });
            ledger.forget(id).unwrap();
        }
    }

    #[test]
    fn no_tracefs_is_a_clear_error() {
        let t = tempfile::tempdir().unwrap();
        let mut ledger = Ledger::open_in(&t.path().join("run")).unwrap();
        let e = ensure_mounted(&t.path().join("nope"), &mut ledger).unwrap_err();
        assert!(e.to_string().contains("not available"), "{e}");
        assert_eq!(ledger.entries().count(), 0);
    }

    #[test]
    fn leftovers_are_instances_of_dead_pids() {
        let t = tempfile::tempdir().unwrap();
        let i = t.path().join("instances");
        fs::create_dir_all(i.join(format!("latlab-{}", std::process::id()))).unwrap();
        fs::create_dir_all(i.join("latlab-4000000")).unwrap();
        fs::create_dir_all(i.join("other")).unwrap();
        assert_eq!(leftover_instances(t.path()), vec![i.join("latlab-4000000")]);
    }
}
