//! The recorder's tests on real tracefs (root; they take the machine-wide lock and skip
//! without it, or fail with LATLAB_REQUIRE_PRIVILEGED=1): the helpers both strategies' tests
//! share, and what happens before a strategy starts.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use latlab_sys::ledger::Ledger;
use latlab_sys::live::SpikeEvent;
use latlab_sys::rt::now_ns as mono_ns;
use latlab_sys::tracefs;

use super::*;

pub(super) fn instances_left() -> Vec<String> {
    std::fs::read_dir("/sys/kernel/tracing/instances")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| {
                    let me = format!("latlab-{}", std::process::id());
                    n == &me || n.starts_with(&format!("{me}-"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A real session on `cpus` without the copier or re-arm thread: the test polls, step by
/// step.
pub(super) fn start_stepped(
    opts: &TraceOptions,
    cpus: &[u32],
    l: Arc<Mutex<Ledger>>,
    w: &mut Vec<String>,
) -> Started {
    let c = open(Path::new(tracefs::DEFAULT_ROOT), opts, cpus, l, w).expect("tracefs");
    start_strategy(c, false).ok().expect("started")
}

/// The tests' recorder: 256 KiB per CPU, tracing required, files deferred, each spike's
/// `trace.txt` written beside its `trace.dat` (the tests read the text).
pub(super) fn opts(max_spikes: u32, instances: u32) -> TraceOptions {
    TraceOptions {
        threshold_ns: 1,
        buffer_kb: 256,
        max_spikes,
        instances,
        timer_irq: false,
        required: true,
        text_files: true,
        defer_files: true,
        markers_off_cpu: false,
        noise: false,
    }
}

pub(super) fn ledger(dir: &Path) -> Arc<Mutex<Ledger>> {
    Arc::new(Mutex::new(Ledger::open_in(dir).unwrap()))
}

/// A session of `instances` on CPUs 0 and 1 (all created), its temp dir and ledger; with the
/// copier or re-arm thread (`thread`), as `latlab run` has it, or stepped by the test.
pub(super) fn make_session(
    instances: u32,
    thread: bool,
) -> (tempfile::TempDir, Arc<Mutex<Ledger>>, Started) {
    let t = tempfile::tempdir().unwrap();
    let l = ledger(&t.path().join("run"));
    let mut w = vec![];
    let opts = opts(10, instances);
    let c = open(
        Path::new(tracefs::DEFAULT_ROOT),
        &opts,
        &[0, 1],
        l.clone(),
        &mut w,
    )
    .expect("tracefs");
    assert_eq!(c.instances.all().len(), instances as usize, "{w:?}");
    let s = start_strategy(c, thread).ok().expect("started");
    (t, l, s)
}

/// A measuring thread's spike on `cpu`: due at `intended`, its clock read at `actual`.
pub(super) fn ev(cpu: u32, intended_ns: u64, actual_ns: u64, marker_written: bool) -> SpikeEvent {
    SpikeEvent {
        cpu,
        intended_ns,
        actual_ns,
        latency_ns: actual_ns - intended_ns,
        marker_written,
        irq_ns: None,
        thread_ns: None,
    }
}

/// Stand in for a measurement thread: take `armed`, write one marker to the armed fd.
pub(super) fn mark(s: &dyn Recorder, cpu: u32) -> (u64, u64) {
    // On `cpu`, so the marker lands in that CPU's buffer (the one on_spike copies).
    // SAFETY: plain syscall on the calling (test) thread with a valid set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set),
            0
        );
    }
    let r = mono_ns();
    let e = r - 300_000;
    // Disarm and take the fd in one step, as the hot loop does.
    let fd = s.armed_fd().swap(-1, Ordering::SeqCst);
    assert!(fd >= 0, "not armed");
    let m = format!(
        "LATLAB_STOP cpu={cpu} intended={e} actual={r} latency={}\n",
        r - e
    );
    let n = unsafe { libc::write(fd, m.as_ptr().cast(), m.len()) };
    assert_eq!(n as usize, m.len());
    (e, r)
}

/// Wait for a condition (bounded), never calling poll.
pub(super) fn wait(what: &str, f: &dyn Fn() -> bool) {
    let t0 = Instant::now();
    while !f() && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_micros(200));
    }
    assert!(f(), "{what}");
}

/// Write `text` to the armed instance's marker on `cpu` (a plain marker: no stop).
pub(super) fn note(s: &dyn Recorder, cpu: u32, text: &str) {
    latlab_sys::rt::set_affinity(&[cpu]).unwrap();
    let fd = s.armed_fd().load(Ordering::SeqCst);
    // SAFETY: plain syscall with a valid buffer.
    let n = unsafe { libc::write(fd, text.as_ptr().cast(), text.len()) };
    assert_eq!(n as usize, text.len());
}

/// Stand in for a measuring thread of the recorder that never stops: on `cpu`, write the
/// marker while `armed` (left set) and count it in `marks`, as the hot loop does.
pub(super) fn mark_running(s: &dyn Recorder, cpu: u32) -> (u64, u64) {
    latlab_sys::rt::set_affinity(&[cpu]).unwrap();
    let r = mono_ns();
    let e = r - 300_000;
    let fd = s.armed_fd().load(Ordering::SeqCst);
    assert!(fd >= 0, "not armed");
    let m = format!(
        "LATLAB_STOP cpu={cpu} intended={e} actual={r} latency={}\n",
        r - e
    );
    // SAFETY: plain syscall with a valid buffer.
    let n = unsafe { libc::write(fd, m.as_ptr().cast(), m.len()) };
    assert_eq!(n as usize, m.len());
    s.marks().expect("the recorder that never stops")[cpu as usize].fetch_add(1, Ordering::Release);
    (e, r)
}

#[test]
fn no_tracefs_warns_or_fails_when_required() {
    let t = tempfile::tempdir().unwrap();
    let l = ledger(&t.path().join("run"));
    let mut w = vec![];
    let opts = TraceOptions {
        buffer_kb: 64,
        required: false,
        text_files: false,
        ..opts(1, 2)
    };
    let s = start_at(&t.path().join("none"), &opts, &[0], l.clone(), &mut w).unwrap();
    assert!(s.is_none());
    assert_eq!(w.len(), 1);
    assert!(
        w[0].starts_with("tracing disabled: tracefs is not available"),
        "{w:?}"
    );
    let opts = TraceOptions {
        required: true,
        text_files: false,
        ..opts
    };
    let e = start_at(&t.path().join("none"), &opts, &[0], l, &mut w)
        .err()
        .unwrap();
    assert!(e.to_string().contains("--trace-required"), "{e}");
}
