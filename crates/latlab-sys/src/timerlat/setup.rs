//! What the kernel offers (the tracer, `osnoise/`, `timerlat_fd`), who else uses it, and the
//! instance latlab measures in: its global settings saved in the ledger first, restored last.

use std::fs;
use std::path::Path;

use latlab_core::escape::escape;
use latlab_core::trace::raw::TimerlatDecoder;

use crate::ledger::{knob_value, undo_checked, Entry, EntryId, Ledger};
use crate::tracefs::{InstanceSpec, RawLayout, Recorder, RecorderConfig};

/// Whose threads wait for the timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// latlab's worker processes on `timerlat_fd` (IRQ, thread and return-to-user latency).
    User,
    /// The kernel's `timerlat/N` threads (IRQ and thread latency).
    Kernel,
}

impl Threads {
    pub fn as_str(self) -> &'static str {
        match self {
            Threads::User => "user",
            Threads::Kernel => "kernel",
        }
    }
}

/// What this kernel offers for `cpus`: user-space threads when every CPU has its
/// `timerlat_fd`, else the kernel's. Err: one line naming what is missing.
pub fn probe(root: &Path, cpus: &[u32]) -> Result<Threads, String> {
    let tracers = fs::read_to_string(root.join("available_tracers")).map_err(|e| {
        format!(
            "cannot read {}: {e} (is tracefs mounted? run as root)",
            root.join("available_tracers").display()
        )
    })?;
    if !tracers.split_whitespace().any(|t| t == "timerlat") {
        return Err(format!(
            "this kernel has no timerlat tracer (CONFIG_TIMERLAT_TRACER is not set; its tracers: {}): use --backend real",
            escape(tracers.trim())
        ));
    }
    let osnoise = root.join("osnoise");
    for f in ["cpus", "timerlat_period_us"] {
        if !osnoise.join(f).is_file() {
            return Err(format!(
                "this kernel's timerlat tracer has no {} (CONFIG_TIMERLAT_TRACER): use --backend real",
                osnoise.join(f).display()
            ));
        }
    }
    let fd = |c: &u32| osnoise.join(format!("per_cpu/cpu{c}/timerlat_fd")).exists();
    Ok(if !cpus.is_empty() && cpus.iter().all(fd) {
        Threads::User
    } else {
        Threads::Kernel
    })
}

/// The tracers of other instances the timerlat back end cannot run beside: the osnoise
/// tracers take one user at a time. (hwlat is another tracer: it runs beside, with a warning,
/// [`hwlat_beside`].)
pub const TIMERLAT_CONFLICTS: &[&str] = &["timerlat", "osnoise"];
/// Those of the osnoise back end: the osnoise tracers, and hwlat, whose threshold is the
/// top-level `tracing_thresh` the osnoise tracer takes too.
pub const OSNOISE_CONFLICTS: &[&str] = &["timerlat", "osnoise", "hwlat"];

/// Another user of the tracers latlab would share: a tracer in the top-level instance, or an
/// instance (not `own`) running one of `tracers` (rtla, another latlab). One line saying who
/// and what to do, or None.
pub fn conflicts(root: &Path, own: &str, tracers: &[&str]) -> Option<String> {
    let tracer = |dir: &Path| {
        fs::read_to_string(dir.join("current_tracer"))
            .ok()
            .map(|s| s.trim().to_string())
    };
    if let Some(t) = tracer(root).filter(|t| t != "nop" && !t.is_empty()) {
        return Some(format!(
            "the top-level tracefs instance runs the '{}' tracer: latlab does not take it over; stop it (echo nop > {}) and run again",
            escape(&t),
            root.join("current_tracer").display()
        ));
    }
    for (name, t) in others(root, own) {
        if !tracers.contains(&t.as_str()) {
            continue;
        }
        let why = if t == "hwlat" {
            "it takes the top-level tracing_thresh the osnoise tracer takes too"
        } else {
            "the osnoise tracers take one user at a time"
        };
        return Some(format!(
            "tracefs instance '{}' runs the {} tracer (rtla or another latlab?): {why}; end it and run again",
            escape(&name),
            escape(&t)
        ));
    }
    None
}

/// The other instances (not `own`) and their tracers, by name.
fn others(root: &Path, own: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = fs::read_dir(root.join("instances"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name() != own)
        .filter_map(|e| {
            let t = fs::read_to_string(e.path().join("current_tracer")).ok()?;
            Some((
                e.file_name().to_string_lossy().into_owned(),
                t.trim().to_string(),
            ))
        })
        .collect();
    v.sort();
    v
}

/// An instance running the hwlat tracer beside a timerlat run: one line saying that its thread
/// holds interrupts off (`hwlat_detector/width` µs of each `window`), so the latencies of the
/// CPUs it runs on include it; None when none does.
pub fn hwlat_beside(root: &Path, own: &str) -> Option<String> {
    let (name, _) = others(root, own).into_iter().find(|(_, t)| t == "hwlat")?;
    let knob = |k: &str| {
        fs::read_to_string(root.join("hwlat_detector").join(k))
            .map(|s| escape(s.trim()))
            .unwrap_or_else(|_| "?".into())
    };
    Some(format!(
        "tracefs instance '{}' runs the hwlat tracer: its thread holds interrupts off for {} µs of every {} µs on the CPUs it runs on, and the latencies measured there include it",
        escape(&name),
        knob("width"),
        knob("window")
    ))
}

/// The instance's settings.
#[derive(Debug, Clone)]
pub struct InstanceConfig {
    /// `latlab-<pid>-timerlat`.
    pub name: String,
    pub cpus: Vec<u32>,
    /// `osnoise/timerlat_period_us` (100 µs … 1 s).
    pub period_us: u64,
    pub threads: Threads,
    /// Per-CPU ring (KiB).
    pub buffer_kb: u64,
}

/// The instance only: no events of its own (the tracer writes its samples), producer/consumer
/// (a full ring keeps what it has and says what it lost, which the seqnums show too).
const SPEC: InstanceSpec = InstanceSpec {
    events: &[],
    vectors: false,
    timer_irq: false,
    overwrite: false,
    stop_trigger: false,
};

/// latlab's timerlat instance, running.
#[derive(Debug)]
pub struct Instance {
    rec: Recorder,
    /// The `osnoise/` settings changed, as the ledger keeps them (restored newest first).
    knobs: Vec<(EntryId, Entry)>,
    pub decoder: TimerlatDecoder,
    pub threads: Threads,
}

impl Instance {
    /// Save and set the `osnoise/` settings, create the instance, read the timerlat entry's
    /// format, and start the tracer. On an error everything done is undone.
    pub fn start(
        root: &Path,
        cfg: &InstanceConfig,
        ledger: &mut Ledger,
    ) -> Result<Instance, String> {
        if let Some(c) = conflicts(root, &cfg.name, TIMERLAT_CONFLICTS) {
            return Err(c);
        }
        let mut knobs = Vec::new();
        match Self::setup(root, cfg, ledger, &mut knobs) {
            Ok((rec, decoder)) => Ok(Instance {
                rec,
                knobs,
                decoder,
                threads: cfg.threads,
            }),
            Err(e) => {
                restore(ledger, &mut knobs);
                Err(e)
            }
        }
    }

    fn setup(
        root: &Path,
        cfg: &InstanceConfig,
        ledger: &mut Ledger,
        knobs: &mut Vec<(EntryId, Entry)>,
    ) -> Result<(Recorder, TimerlatDecoder), String> {
        let o = root.join("osnoise");
        let cpus = cfg
            .cpus
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(",");
        // `osnoise/cpus` parses what it copied from the write as a C string without ending
        // it (6.12: `Invalid argument` for a plain "1"): the value and the one saved to write
        // back both carry their NUL.
        let p = o.join("cpus");
        let original = read_value(&p)?;
        let original = format!("{}\0", knob_value(&original));
        save_and_write(ledger, knobs, &p, original, &format!("{cpus}\0"))?;
        knob(
            ledger,
            knobs,
            &o.join("timerlat_period_us"),
            &cfg.period_us.to_string(),
        )?;
        // A threshold left by someone else would stop the tracer mid-run.
        for f in ["stop_tracing_us", "stop_tracing_total_us", "print_stack"] {
            if o.join(f).is_file() {
                knob(ledger, knobs, &o.join(f), "0")?;
            }
        }
        workload(ledger, knobs, &o.join("options"), cfg.threads)?;
        let rec = Recorder::create_with(
            root,
            &RecorderConfig {
                name: cfg.name.clone(),
                buffer_kb: cfg.buffer_kb,
            },
            &SPEC,
            ledger,
        )
        .map_err(|e| format!("cannot create the timerlat instance: {e}"))?;
        let fail = |rec: Recorder, ledger: &mut Ledger, e: String| {
            let _ = rec.remove(ledger);
            Err(e)
        };
        let layout = match RawLayout::read(rec.dir(), &["ftrace/timerlat".to_string()]) {
            Ok(l) => l,
            Err(e) => {
                return fail(
                    rec,
                    ledger,
                    format!("cannot read the timerlat entry's format: {e}"),
                )
            }
        };
        let decoder = match TimerlatDecoder::new(
            &layout.header_page,
            &layout.header_event,
            &layout.formats[0],
        ) {
            Ok(d) => d,
            Err(e) => return fail(rec, ledger, format!("the timerlat entry's layout: {e}")),
        };
        if let Err(e) = fs::write(rec.dir().join("current_tracer"), "timerlat") {
            let why = match e.raw_os_error() {
                Some(libc::EBUSY) => {
                    "another osnoise or timerlat user holds the tracer (rtla?)".to_string()
                }
                _ => e.to_string(),
            };
            return fail(
                rec,
                ledger,
                format!("cannot start the timerlat tracer in latlab's instance: {why}"),
            );
        }
        if let Err(e) = rec.start() {
            return fail(
                rec,
                ledger,
                format!("cannot switch the timerlat instance on: {e}"),
            );
        }
        Ok((rec, decoder))
    }

    pub fn dir(&self) -> &Path {
        self.rec.dir()
    }

    /// Stop the tracer, remove the instance, restore the `osnoise/` settings. Every
    /// `timerlat_fd` must be closed first (the kernel kills a holder's process). What could
    /// not be undone: one line each.
    pub fn finish(mut self, ledger: &mut Ledger) -> Vec<String> {
        let mut out = Vec::new();
        let _ = self.rec.stop();
        let _ = fs::write(self.rec.dir().join("current_tracer"), "nop");
        if let Err(e) = self.rec.remove(ledger) {
            out.push(format!("could not remove the timerlat instance: {e}"));
        }
        out.extend(restore(ledger, &mut self.knobs));
        out
    }
}

/// An `osnoise/` file's value, in one read of a page: `osnoise/cpus` answers a read shorter
/// than its text with `Invalid argument`, as the second, shorter read of
/// `fs::read_to_string` is (6.12).
pub(crate) fn read_value(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let err = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    let mut buf = vec![0u8; 4096];
    let n = fs::File::open(path)
        .and_then(|mut f| f.read(&mut buf))
        .map_err(err)?;
    buf.truncate(n);
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Save `path`'s value in the ledger, then write `value`.
pub(crate) fn knob(
    ledger: &mut Ledger,
    knobs: &mut Vec<(EntryId, Entry)>,
    path: &Path,
    value: &str,
) -> Result<(), String> {
    let original = read_value(path)?;
    save_and_write(ledger, knobs, path, knob_value(&original), value)
}

pub(crate) fn save_and_write(
    ledger: &mut Ledger,
    knobs: &mut Vec<(EntryId, Entry)>,
    path: &Path,
    original: String,
    value: &str,
) -> Result<(), String> {
    let e = Entry::Knob {
        path: path.to_path_buf(),
        original,
    };
    let id = ledger
        .add(e.clone())
        .map_err(|err| format!("cannot write the ledger: {err}"))?;
    knobs.push((id, e));
    fs::write(path, value).map_err(|err| format!("cannot set {} to {value}: {err}", path.display()))
}

/// `osnoise/options`' workload option: off for latlab's own threads (the kernel then starts
/// none and opens `timerlat_fd`), on for the kernel's. Its file lists every option; the one
/// saved is the workload's (`OSNOISE_WORKLOAD` or `NO_OSNOISE_WORKLOAD`), which is what
/// writing back restores. A kernel without the option (6.1) always runs its own threads.
pub(crate) fn workload(
    ledger: &mut Ledger,
    knobs: &mut Vec<(EntryId, Entry)>,
    options: &Path,
    threads: Threads,
) -> Result<(), String> {
    let on = threads == Threads::Kernel;
    if option(ledger, knobs, options, "OSNOISE_WORKLOAD", on)? || on {
        return Ok(());
    }
    Err(format!(
        "{} has no OSNOISE_WORKLOAD option: this kernel runs only its own timerlat threads",
        options.display()
    ))
}

/// One of `osnoise/options`' flags set as asked (`NAME` on, `NO_NAME` off): the file lists
/// every option, and the one saved in the ledger first is this one's token, which is what
/// writing back restores. Ok(false): this kernel has no such option (nothing written).
pub(crate) fn option(
    ledger: &mut Ledger,
    knobs: &mut Vec<(EntryId, Entry)>,
    options: &Path,
    name: &str,
    on: bool,
) -> Result<bool, String> {
    let text = fs::read_to_string(options).unwrap_or_default();
    let off = format!("NO_{name}");
    let Some(now) = text.split_whitespace().find(|t| *t == name || *t == off) else {
        return Ok(false);
    };
    let want = if on { name } else { off.as_str() };
    save_and_write(ledger, knobs, options, now.to_string(), want).map(|()| true)
}

/// Undo the saved settings, newest first; the lines of what could not be.
pub(crate) fn restore(ledger: &mut Ledger, knobs: &mut Vec<(EntryId, Entry)>) -> Vec<String> {
    let mut out = Vec::new();
    while let Some((id, e)) = knobs.pop() {
        let (line, ok) = undo_checked(&e);
        if ok {
            let _ = ledger.forget(id);
        } else {
            out.push(line);
        }
    }
    out
}

#[cfg(test)]
pub(super) fn knob_for_test(l: &mut Ledger, k: &mut Vec<(EntryId, Entry)>, p: &Path, v: &str) {
    knob(l, k, p, v).unwrap()
}

#[cfg(test)]
pub(super) fn workload_for_test(
    l: &mut Ledger,
    k: &mut Vec<(EntryId, Entry)>,
    p: &Path,
    t: Threads,
) {
    workload(l, k, p, t).unwrap()
}
