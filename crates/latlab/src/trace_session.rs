//! Glue between `latlab run` and the tracefs flight recorder.
//!
//! `run` calls [`TraceSession::start`] before measuring, gives the measurement threads
//! [`TraceSession::marker_fd`] and [`TraceSession::armed`] (a thread that takes `armed` on a spike
//! writes one `LATLAB_STOP …` marker, which stops the recorder in the kernel), calls
//! [`TraceSession::on_spike`] from the collector for every spike in order, and
//! [`TraceSession::finish`] at the end, whose JSON goes to `run.json`'s `"trace"`. The instance is
//! removed on every path: `finish`, `Drop` (panics), and the ledger for SIGKILL.

#![allow(dead_code)] // the lead's `run` wires this in

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use latlab_core::record::SpikeRecord;
use latlab_core::trace::{analyze_text, AnalyzeOptions, SampleMode};
use latlab_sys::ledger::Ledger;
use latlab_sys::tracefs::{self, Recorder, RecorderConfig, Tracefs};

pub struct TraceOptions {
    pub threshold_ns: u64,
    pub buffer_kb: u64,
    pub max_spikes: u32,
    pub required: bool,
}

/// How long the collector waits for the in-kernel stop after a marker.
const STOP_WAIT: Duration = Duration::from_millis(200);

pub struct TraceSession {
    recorder: Option<Recorder>,
    tracefs: Tracefs,
    ledger: Arc<Mutex<Ledger>>,
    armed: Arc<AtomicBool>,
    cpus: Vec<u32>,
    max_spikes: u32,
    virtualized: bool,
    traced: u32,
    not_traced: u64,
    /// Overwritten events per CPU, summed over every clear.
    overruns: BTreeMap<u32, u64>,
    /// Spikes whose marker was not found in the copied trace.
    unmatched: u32,
    /// Spike (its clock read) → recorder running again, over every traced spike: (sum, max, n).
    rearm_ns: (u64, u64, u64),
    instance: PathBuf,
    clock: String,
    events: Vec<String>,
    missing: Vec<String>,
    trigger: bool,
    buffer_kb: u64,
    warnings: Vec<String>,
}

impl TraceSession {
    /// Probe + create + configure + start. When tracing is impossible (no tracefs, read-only,
    /// events missing): Err if opts.required, else Ok(None) after pushing a one-line warning.
    /// A leftover latlab-* instance of a dead run: warn ("run `latlab cleanup`") and continue.
    pub fn start(
        opts: &TraceOptions,
        cpus: &[u32],
        ledger: Arc<Mutex<Ledger>>,
        warnings: &mut Vec<String>,
    ) -> anyhow::Result<Option<TraceSession>> {
        let root = std::env::var_os("LATLAB_TRACEFS")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(tracefs::DEFAULT_ROOT));
        Self::start_at(&root, opts, cpus, ledger, warnings)
    }

    /// [`TraceSession::start`] on a given tracefs root.
    pub fn start_at(
        root: &Path,
        opts: &TraceOptions,
        cpus: &[u32],
        ledger: Arc<Mutex<Ledger>>,
        warnings: &mut Vec<String>,
    ) -> anyhow::Result<Option<TraceSession>> {
        let fail =
            |e: String, warnings: &mut Vec<String>| -> anyhow::Result<Option<TraceSession>> {
                if opts.required {
                    anyhow::bail!("--trace-required: cannot trace: {e}")
                }
                warnings.push(format!("tracing disabled: {e} (measuring without traces)"));
                Ok(None)
            };
        let mut l = ledger.lock().unwrap_or_else(|p| p.into_inner());
        let tfs = match tracefs::ensure_mounted(root, &mut l) {
            Ok(t) => t,
            Err(e) => {
                drop(l);
                return fail(e.to_string(), warnings);
            }
        };
        for left in tracefs::leftover_instances(&tfs.root) {
            warnings.push(format!(
                "tracefs instance {} was left by a killed latlab run: run `latlab cleanup` to free its memory",
                left.display()
            ));
        }
        let cfg = RecorderConfig {
            name: format!("latlab-{}", std::process::id()),
            buffer_kb: opts.buffer_kb,
        };
        let rec = match Recorder::create(&tfs.root, &cfg, &mut l) {
            Ok(r) => r,
            Err(e) => {
                if let Some(id) = tfs.mounted {
                    let _ = latlab_sys::ledger::undo(&latlab_sys::ledger::Entry::TracefsMount {
                        path: tfs.root.clone(),
                    });
                    let _ = l.forget(id);
                }
                drop(l);
                return fail(e.to_string(), warnings);
            }
        };
        drop(l);
        if !rec.missing.is_empty() {
            warnings.push(format!(
                "tracing without these events (not in this kernel): {}",
                rec.missing.join(", ")
            ));
        }
        warnings.extend(rec.warnings.iter().cloned());
        let s = TraceSession {
            instance: rec.dir().to_path_buf(),
            clock: rec.clock.clone(),
            events: rec.events.clone(),
            missing: rec.missing.clone(),
            trigger: rec.trigger,
            buffer_kb: rec.buffer_kb,
            warnings: rec.warnings.clone(),
            recorder: Some(rec),
            tracefs: tfs,
            ledger,
            armed: Arc::new(AtomicBool::new(false)),
            cpus: cpus.to_vec(),
            max_spikes: opts.max_spikes,
            virtualized: tracefs::virtualized(),
            traced: 0,
            not_traced: 0,
            overruns: BTreeMap::new(),
            unmatched: 0,
            rearm_ns: (0, 0, 0),
        };
        let r = s.recorder.as_ref().expect("just set");
        r.clear()?;
        r.start()?;
        s.armed.store(opts.max_spikes > 0, Ordering::SeqCst);
        Ok(Some(s))
    }

    /// Pre-opened fd of the instance's trace_marker. The measurement thread, on a sample above
    /// the threshold, does `if armed.swap(false) { write(fd, "LATLAB_STOP cpu=<c> intended=<ns>
    /// actual=<ns> latency=<ns>\n") }` (one write syscall; no allocation).
    pub fn marker_fd(&self) -> std::os::fd::RawFd {
        self.recorder.as_ref().map_or(-1, |r| r.marker_fd())
    }

    /// True when a marker has stopped the recorder and the collector should save the spike and
    /// re-arm now: until then, further spikes go untraced. The collector polls this (it is an
    /// atomic the measurement thread already clears), so the hot path signals nothing.
    pub fn wants_collector(&self) -> bool {
        self.recorder.is_some()
            && self.traced < self.max_spikes
            && !self.armed.load(Ordering::Acquire)
    }

    /// Shared flag: true while the recorder runs and may be stopped by a marker.
    pub fn armed(&self) -> Arc<AtomicBool> {
        self.armed.clone()
    }

    /// Collector thread (non-RT), once per spike, in order. See the module docs.
    pub fn on_spike(
        &mut self,
        cpu: u32,
        intended_ns: u64,
        actual_ns: u64,
        latency_ns: u64,
        marker_written: bool,
        run_dir: &Path,
    ) -> Option<SpikeRecord> {
        if !marker_written || self.traced >= self.max_spikes {
            self.not_traced += 1;
            return None;
        }
        let rec = self.recorder.as_ref()?;
        // Wait (bounded) for the in-kernel stop; without the trigger, stop it ourselves.
        if !self.trigger {
            let _ = rec.stop();
        }
        let t0 = Instant::now();
        while rec.is_on() && t0.elapsed() < STOP_WAIT {
            std::thread::sleep(Duration::from_millis(1));
        }
        if rec.is_on() {
            // The marker did not stop it (trigger refused?): stop now; history is still there.
            let _ = rec.stop();
        }
        self.traced += 1;
        let n = self.traced;
        let rel = format!("spikes/{n:03}");
        let dir = run_dir.join(&rel);
        let text = rec.read_cpu(cpu).unwrap_or_default();
        let text = String::from_utf8_lossy(&text).into_owned();
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(dir.join("trace.txt"), &text);
        let analysis = analyze_text(
            &text,
            &AnalyzeOptions {
                threshold_ns: 0,
                virtualized: self.virtualized,
                mode: Some(SampleMode::Markers),
            },
        );
        let sample = analysis.as_ref().ok().and_then(|a| {
            a.spikes
                .iter()
                .rev()
                .find(|s| s.cpu == cpu && s.intended_ns == intended_ns)
                .cloned()
        });
        let mut spike = match &sample {
            Some(s) => s.to_spike(),
            None => {
                self.unmatched += 1;
                let why = match &analysis {
                    Err(e) => format!("trace not analyzable: line {}: {}", e.line, e.msg),
                    Ok(_) => "the spike's marker is not in the trace (overwritten or lost)".into(),
                };
                SpikeRecord {
                    cpu,
                    at_ns: intended_ns,
                    latency_ns,
                    causes: vec![],
                    trace_file: None,
                    timeline: vec![why],
                }
            }
        };
        spike.latency_ns = latency_ns;
        spike.at_ns = intended_ns;
        spike.trace_file = Some(format!("{rel}/trace.txt"));
        let mut txt = format!(
            "spike {n}: CPU {cpu}, intended {intended_ns} ns, actual {actual_ns} ns, latency {:.1} us\n",
            latency_ns as f64 / 1000.0
        );
        for l in &spike.timeline {
            txt.push_str(l);
            txt.push('\n');
        }
        let _ = std::fs::write(dir.join("analysis.txt"), txt);
        // Overruns counted since the last clear, then restart.
        for &c in &self.cpus {
            if let Some(o) = rec.overruns(c) {
                *self.overruns.entry(c).or_default() += o;
            }
        }
        let _ = rec.clear();
        let _ = rec.start();
        let d = mono_ns().saturating_sub(actual_ns);
        self.rearm_ns = (
            self.rearm_ns.0 + d,
            self.rearm_ns.1.max(d),
            self.rearm_ns.2 + 1,
        );
        if self.traced < self.max_spikes {
            self.armed.store(true, Ordering::SeqCst);
        }
        Some(spike)
    }

    /// Stop, remove the instance (and unmount if we mounted), forget the ledger entries;
    /// return the summary stored as run.json's "trace".
    pub fn finish(mut self) -> serde_json::Value {
        self.armed.store(false, Ordering::SeqCst);
        let mut removal = None;
        if let Some(rec) = self.recorder.take() {
            let _ = rec.stop();
            for &c in &self.cpus {
                if let Some(o) = rec.overruns(c) {
                    *self.overruns.entry(c).or_default() += o;
                }
            }
            let mut l = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(e) = rec.remove(&mut l) {
                removal = Some(e.to_string());
            }
        }
        self.unmount();
        serde_json::json!({
            "instance": self.instance,
            "clock": self.clock,
            "events": self.events,
            "missing_events": self.missing,
            "stop": if self.trigger { "in-kernel traceoff trigger on a marker" } else { "tracing_on written by the collector" },
            "buffer_kb": self.buffer_kb,
            "max_spikes": self.max_spikes,
            "traced": self.traced,
            "not_traced": self.not_traced,
            "unmatched": self.unmatched,
            "rearm_mean_ns": self.rearm_ns.0.checked_div(self.rearm_ns.2),
            "rearm_max_ns": self.rearm_ns.1,
            "overruns": self.overruns.iter().map(|(c, n)| serde_json::json!({"cpu": c, "events": n})).collect::<Vec<_>>(),
            "virtualized": self.virtualized,
            "warnings": self.warnings,
            "removal_error": removal,
        })
    }

    fn unmount(&mut self) {
        if let Some(id) = self.tracefs.mounted.take() {
            let _ = latlab_sys::ledger::undo(&latlab_sys::ledger::Entry::TracefsMount {
                path: self.tracefs.root.clone(),
            });
            let mut l = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
            let _ = l.forget(id);
        }
    }
}

impl Drop for TraceSession {
    /// Removes the instance too if finish() was not called (panic path).
    fn drop(&mut self) {
        self.armed.store(false, Ordering::SeqCst);
        if let Some(rec) = self.recorder.take() {
            let mut l = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
            let _ = rec.remove(&mut l);
        }
        self.unmount();
    }
}

/// CLOCK_MONOTONIC in ns (the samples' clock).
fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid pointer; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instances_left() -> Vec<String> {
        std::fs::read_dir("/sys/kernel/tracing/instances")
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n == &format!("latlab-{}", std::process::id()))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn ledger(dir: &Path) -> Arc<Mutex<Ledger>> {
        Arc::new(Mutex::new(Ledger::open_in(dir).unwrap()))
    }

    #[test]
    fn no_tracefs_warns_or_fails_when_required() {
        let t = tempfile::tempdir().unwrap();
        let l = ledger(&t.path().join("run"));
        let mut w = vec![];
        let opts = TraceOptions {
            threshold_ns: 1,
            buffer_kb: 64,
            max_spikes: 1,
            required: false,
        };
        let s =
            TraceSession::start_at(&t.path().join("none"), &opts, &[0], l.clone(), &mut w).unwrap();
        assert!(s.is_none());
        assert_eq!(w.len(), 1);
        assert!(
            w[0].starts_with("tracing disabled: tracefs is not available"),
            "{w:?}"
        );
        let opts = TraceOptions {
            required: true,
            ..opts
        };
        let e = TraceSession::start_at(&t.path().join("none"), &opts, &[0], l, &mut w)
            .err()
            .unwrap();
        assert!(e.to_string().contains("--trace-required"), "{e}");
    }

    /// Real tracefs: one marked spike is copied, analyzed and the recorder restarted; the
    /// instance is gone after finish and after a panic.
    #[test]
    fn real_session_marker_spike_finish_and_panic() {
        let Some(_g) = latlab_sys::privileged::guard("real_session_marker_spike_finish_and_panic")
        else {
            return;
        };
        let t = tempfile::tempdir().unwrap();
        let l = ledger(&t.path().join("run"));
        let mut w = vec![];
        let opts = TraceOptions {
            threshold_ns: 1,
            buffer_kb: 256,
            max_spikes: 1,
            required: true,
        };
        let mut s = TraceSession::start(&opts, &[0], l.clone(), &mut w)
            .unwrap()
            .unwrap();
        assert_eq!(s.clock, "mono");
        assert!(s.armed().load(Ordering::SeqCst));
        let fd = s.marker_fd();
        assert!(fd >= 0);
        let armed = s.armed();
        // Stand in for the measurement thread, pinned to CPU 0.
        let (e, r) = std::thread::spawn(move || {
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            unsafe { libc::CPU_SET(0, &mut set) };
            unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
            std::thread::sleep(Duration::from_millis(5));
            let now = |c| {
                let mut ts = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                unsafe { libc::clock_gettime(c, &mut ts) };
                ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
            };
            let e = now(libc::CLOCK_MONOTONIC) - 300_000;
            let r = now(libc::CLOCK_MONOTONIC);
            let m = format!(
                "LATLAB_STOP cpu=0 intended={e} actual={r} latency={}\n",
                r - e
            );
            assert!(armed.swap(false, Ordering::SeqCst));
            let n = unsafe { libc::write(fd, m.as_ptr().cast(), m.len()) };
            assert_eq!(n as usize, m.len());
            (e, r)
        })
        .join()
        .unwrap();
        // The trigger stopped the recorder in the kernel.
        assert!(
            !s.recorder.as_ref().unwrap().is_on(),
            "trigger did not stop the instance"
        );
        let run = t.path().join("rundir");
        let sp = s
            .on_spike(0, e, r, r - e, true, &run)
            .expect("a traced spike");
        assert_eq!(sp.trace_file.as_deref(), Some("spikes/001/trace.txt"));
        let trace = std::fs::read_to_string(run.join("spikes/001/trace.txt")).unwrap();
        assert!(trace.contains("LATLAB_STOP"), "{trace}");
        assert!(run.join("spikes/001/analysis.txt").exists());
        assert!(sp.causes.iter().map(|c| c.ns).sum::<u64>() <= sp.latency_ns);
        // Restarted, but max_spikes reached: no longer armed; later spikes are counted.
        assert!(s.recorder.as_ref().unwrap().is_on());
        assert!(!s.armed().load(Ordering::SeqCst));
        assert!(s.on_spike(0, e, r, r - e, false, &run).is_none());
        let v = s.finish();
        assert_eq!(v["traced"], 1);
        assert_eq!(v["not_traced"], 1);
        assert_eq!(v["clock"], "mono");
        assert!(v["removal_error"].is_null(), "{v}");
        assert!(instances_left().is_empty());
        assert_eq!(l.lock().unwrap().entries().count(), 0);

        // Panic path: Drop removes the instance.
        let l2 = l.clone();
        let res = std::panic::catch_unwind(move || {
            let mut w = vec![];
            let _s = TraceSession::start(&opts, &[0], l2, &mut w)
                .unwrap()
                .unwrap();
            assert_eq!(instances_left().len(), 1);
            panic!("collector panic");
        });
        assert!(res.is_err());
        assert!(instances_left().is_empty(), "instance left after a panic");
        assert_eq!(l.lock().unwrap().entries().count(), 0);
    }
}
