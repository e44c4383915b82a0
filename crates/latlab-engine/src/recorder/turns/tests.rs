//! Instances taking turns, on real tracefs (root).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use latlab_sys::ledger::Ledger;
use latlab_sys::rt::now_ns as mono_ns;

use super::super::tests::{
    ev, instances_left, ledger, make_session, mark, opts, start_stepped, wait,
};
use super::super::{binary_decoder, Recorder, Started};
use super::arm::RAW_POLL_EVERY;
use super::*;

/// A session of `instances` taking turns on CPUs 0 and 1, stepped by the test (no re-arm
/// thread).
fn session(instances: u32) -> (tempfile::TempDir, Arc<Mutex<Ledger>>, Turns) {
    match make_session(instances, false) {
        (t, l, Started::Turns(s)) => (t, l, s),
        _ => panic!("instances taking turns"),
    }
}

/// The same with the re-arm thread running, as `latlab run` has it.
fn session_with_rearm(instances: u32) -> (tempfile::TempDir, Arc<Mutex<Ledger>>, Turns) {
    let (t, l, s) = match make_session(instances, true) {
        (t, l, Started::Turns(s)) => (t, l, s),
        _ => panic!("instances taking turns"),
    };
    assert!(s.rearm.is_some());
    (t, l, s)
}

/// A real session of two instances on CPU 0, stepped.
fn turns_stepped(
    opts: &super::super::TraceOptions,
    l: Arc<Mutex<Ledger>>,
    w: &mut Vec<String>,
) -> Turns {
    match start_stepped(opts, &[0], l, w) {
        Started::Turns(s) => s,
        _ => panic!("instances taking turns"),
    }
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
    let opts = opts(1, 2);
    let mut s = turns_stepped(&opts, l.clone(), &mut w);
    assert_eq!(s.common.instances.all()[0].clock, "mono");
    assert!(s.is_armed());
    assert_eq!(instances_left().len(), 2, "the ping-pong pair");
    let armed_fd = s.armed_fd();
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
        let fd = armed_fd.swap(-1, Ordering::SeqCst);
        assert!(fd >= 0, "not armed");
        let n = unsafe { libc::write(fd, m.as_ptr().cast(), m.len()) };
        assert_eq!(n as usize, m.len());
        (e, r)
    })
    .join()
    .unwrap();
    // The trigger stopped the recorder in the kernel.
    assert!(
        !s.common.instances.all()[0].is_on(),
        "trigger did not stop the instance"
    );
    let run = t.path().join("rundir");
    let sp = s
        .on_spike(&ev(0, e, r, true), &run)
        .expect("a traced spike");
    assert_eq!(sp.trace_file.as_deref(), Some("spikes/001/trace.dat"));
    let trace = std::fs::read_to_string(run.join("spikes/001/trace.txt")).unwrap();
    assert!(trace.contains("LATLAB_STOP"), "{trace}");
    assert!(run.join("spikes/001/analysis.txt").exists());
    assert!(sp.causes.iter().map(|c| c.ns).sum::<u64>() <= sp.latency_ns);
    // max_spikes reached: no instance re-armed; later spikes are counted.
    assert!(s.common.instances.all().iter().all(|r| !r.is_on()));
    assert!(!s.is_armed());
    assert!(s.on_spike(&ev(0, e, r, false), &run).is_none());
    let v = serde_json::to_value(s.finish()).unwrap();
    // Read as binary pages, decoded and rendered by latlab.
    assert_eq!(v["read_as"], "binary", "{v}");
    let c = &v["captures"][0];
    assert_eq!(
        (&c["read_as"], &c["spike"], &c["cpu"]),
        (&"binary".into(), &1.into(), &0.into())
    );
    assert!(
        c["pages"].as_u64().unwrap() >= 1 && c["events"].as_u64().unwrap() >= 1,
        "{c}"
    );
    assert_eq!(c["bytes"].as_u64().unwrap() % 4096, 0, "{c}");
    assert!(
        trace.starts_with("# tracer: nop (latlab: CPU 0 decoded from"),
        "{trace}"
    );
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
        let _s = turns_stepped(&opts, l2, &mut w);
        assert_eq!(instances_left().len(), 2);
        panic!("collector panic");
    });
    assert!(res.is_err());
    assert!(instances_left().is_empty(), "instance left after a panic");
    assert_eq!(l.lock().unwrap().entries().count(), 0);
}

/// The ping-pong: a marker stops instance A; one poll arms B (running, its fd in the
/// atomic) before A's trace is copied; the copy makes A the standby. And the ring-full
/// bug: a marker whose spike record never arrives is reaped, so the recorder re-arms.
#[test]
fn ping_pong_rearms_before_the_copy_and_reaps_orphans() {
    let Some(_g) =
        latlab_sys::privileged::guard("ping_pong_rearms_before_the_copy_and_reaps_orphans")
    else {
        return;
    };
    let (t, l, mut s) = session(2);
    // Both instances in the ledger (plus the mount, when the session mounted tracefs).
    let mount = s.common.instances.mounted() as usize;
    assert_eq!(l.lock().unwrap().entries().count(), 2 + mount);
    let fd_a = s.armed_fd().load(Ordering::SeqCst);
    assert_eq!(fd_a, s.common.instances.all()[0].marker_fd());
    let (e1, r1) = mark(&s, 0);
    assert!(!s.common.instances.all()[0].is_on(), "the marker stopped A");
    s.poll();
    assert!(s.is_armed(), "re-armed before the copy");
    assert_eq!(
        s.armed_fd().load(Ordering::SeqCst),
        s.common.instances.all()[1].marker_fd()
    );
    assert!(s.common.instances.all()[1].is_on());
    assert!(s.wants_collector());
    let run = t.path().join("rundir");
    let sp = s.on_spike(&ev(0, e1, r1, true), &run).expect("traced");
    assert_eq!(sp.trace_file.as_deref(), Some("spikes/001/trace.dat"));
    let trace = std::fs::read_to_string(run.join("spikes/001/trace.txt")).unwrap();
    assert!(trace.contains(&format!("intended={e1}")), "{trace}");
    assert!(!s.wants_collector());
    assert!(s.common.instances.all()[1].is_on(), "B still armed");
    // Ring full: B's marker is written, its spike record never arrives.
    let _ = mark(&s, 1);
    s.poll();
    assert!(s.is_armed(), "A took over");
    assert_eq!(s.armed_fd().load(Ordering::SeqCst), fd_a);
    // Only a drain that began well after the stop may call B an orphan.
    s.reap(Instant::now());
    assert!(s.wants_collector());
    s.reap(Instant::now() + ORPHAN_AFTER);
    assert!(!s.wants_collector());
    assert_eq!(s.orphaned, 1);
    // A's next marker: B (recycled) takes over again; the recorder never stays disarmed.
    let (e3, r3) = mark(&s, 0);
    s.poll();
    assert!(s.is_armed());
    assert!(s.common.instances.all()[1].is_on());
    let sp = s.on_spike(&ev(0, e3, r3, true), &run).expect("traced");
    assert_eq!(sp.trace_file.as_deref(), Some("spikes/002/trace.dat"));
    let trace2 = std::fs::read_to_string(run.join("spikes/002/trace.txt")).unwrap();
    assert!(trace2.contains(&format!("intended={e3}")));
    // A was read (consumed), not cleared, before it was armed again: nothing of spike 1.
    assert!(!trace2.contains(&format!("intended={e1}")), "{trace2}");
    let v = serde_json::to_value(s.finish()).unwrap();
    assert_eq!(v["traced"], 2);
    assert_eq!(v["orphaned"], 1);
    // The collector's copies and the orphan were consumed by reading: no clear (an RCU
    // grace period, and every page reset with interrupts off, on a measured CPU).
    assert_eq!(v["rearm_cleared"], 0, "{v}");
    assert_eq!(v["rearm_reused"], 3, "{v}");
    assert!(v["rearm_max_ns"].as_u64().unwrap() > 0);
    assert!(v["removal_error"].is_null(), "{v}");
    assert!(instances_left().is_empty());
    assert_eq!(l.lock().unwrap().entries().count(), 0);
}

/// A layout latlab does not decode (here a 32-bit commit) is refused with its reason, and
/// a session without a decoder reads spikes as text and says so in run.json.
#[test]
fn an_unknown_layout_falls_back_to_the_text_copy() {
    let Some(_g) = latlab_sys::privileged::guard("an_unknown_layout_falls_back_to_the_text_copy")
    else {
        return;
    };
    let (t, _l, mut s) = session(2);
    let mut layout = s.common.instances.all()[0]
        .raw
        .clone()
        .expect("this kernel's layout");
    assert!(binary_decoder(&Ok(layout.clone())).is_ok());
    layout.header_page = layout.header_page.replace(
        "local_t commit;\toffset:8;\tsize:8;",
        "local_t commit;\toffset:8;\tsize:4;",
    );
    s.common.binary = binary_decoder(&Ok(layout));
    let why = s.common.binary.as_ref().unwrap_err().clone();
    assert!(why.contains("4-byte commit"), "{why}");
    let (e, r) = mark(&s, 0);
    s.poll();
    let run = t.path().join("rundir");
    let sp = s.on_spike(&ev(0, e, r, true), &run).expect("traced");
    assert!(!sp.causes.is_empty() || !sp.timeline.is_empty());
    // No trace.dat without a decoded layout: the text is the spike's trace file.
    assert_eq!(sp.trace_file.as_deref(), Some("spikes/001/trace.txt"));
    assert!(!run.join("spikes/001/trace.dat").exists());
    let trace = std::fs::read_to_string(run.join("spikes/001/trace.txt")).unwrap();
    assert!(trace.contains(&format!("intended={e}")), "{trace}");
    assert!(
        trace.starts_with("# tracer: nop\n"),
        "the kernel's own text"
    );
    let v = serde_json::to_value(s.finish()).unwrap();
    assert_eq!(v["read_as"], "text");
    assert_eq!(v["binary_fallback"], why.as_str());
    assert_eq!(v["captures"][0]["read_as"], "text");
    assert!(v["captures"][0]["events"].as_u64().unwrap() > 0, "{v}");
}

/// The re-arm thread arms a standby after a marker with no call from the collector (which
/// under load waits long for a CPU), copies the stopped instance's pages and makes it a
/// standby again: two spikes in a row with two instances are both traced, the collector
/// only handing them over afterwards.
#[test]
fn the_rearm_thread_rearms_and_copies_without_the_collector() {
    let Some(_g) =
        latlab_sys::privileged::guard("the_rearm_thread_rearms_and_copies_without_the_collector")
    else {
        return;
    };
    let (t, _l, mut s) = session_with_rearm(2);
    let (e1, r1) = mark(&s, 0);
    wait("B armed by the thread", &|| s.is_armed());
    assert_eq!(
        s.armed_fd().load(Ordering::SeqCst),
        s.common.instances.all()[1].marker_fd()
    );
    assert!(s.common.instances.all()[1].is_on());
    wait("A copied by the thread", &|| {
        s.arm.lock().pending[0].copy.is_some()
    });
    assert!(s.arm.lock().pending[0].rearmed_ns.expect("re-armed") > r1);
    let (e2, r2) = mark(&s, 1);
    wait("A armed again by the thread", &|| s.is_armed());
    assert_eq!(
        s.armed_fd().load(Ordering::SeqCst),
        s.common.instances.all()[0].marker_fd()
    );
    assert!(s.wants_collector());
    let run = t.path().join("rundir");
    for (n, (cpu, e, r)) in [(0, e1, r1), (1, e2, r2)].into_iter().enumerate() {
        let sp = s.on_spike(&ev(cpu, e, r, true), &run).expect("traced");
        let f = run.join(format!("spikes/{:03}/trace.txt", n + 1));
        let trace = std::fs::read_to_string(f).unwrap();
        assert!(trace.contains(&format!("intended={e}")), "{trace}");
        assert!(sp.trace_file.is_some());
    }
    // A again: re-armed without a clear (its copy consumed the ring), so its next capture
    // holds the third spike and nothing of the first.
    let (e3, r3) = mark(&s, 0);
    wait("A copied again by the thread", &|| {
        s.arm
            .lock()
            .pending
            .front()
            .is_some_and(|p| p.copy.is_some())
    });
    s.on_spike(&ev(0, e3, r3, true), &run).expect("traced");
    let trace = std::fs::read_to_string(run.join("spikes/003/trace.txt")).unwrap();
    assert!(trace.contains(&format!("intended={e3}")), "{trace}");
    assert!(!trace.contains(&format!("intended={e1}")), "{trace}");
    let v = serde_json::to_value(s.finish()).unwrap();
    assert_eq!(v["traced"], 3);
    assert_eq!(v["rearm_reused"], 3, "{v}");
    assert_eq!(v["rearm_cleared"], 0, "{v}");
    assert_eq!(v["captures"][1]["cpu"], 1);
    assert_eq!(v["captures"][1]["read_as"], "binary");
    assert!(v["removal_error"].is_null(), "{v}");
    assert!(instances_left().is_empty());
}

/// A VM stalled on both CPUs: CPU 0's marker stops the recorder, CPU 1's thread (woken
/// during the same stall) finds it stopped. Its window began before the stop, so it is read
/// from CPU 0's capture; a spike whose window began after the stop is not.
#[test]
fn a_spike_that_found_the_recorder_stopped_is_read_from_the_capture() {
    let Some(_g) = latlab_sys::privileged::guard(
        "a_spike_that_found_the_recorder_stopped_is_read_from_the_capture",
    ) else {
        return;
    };
    let (t, _l, mut s) = session_with_rearm(2);
    // A measuring thread on CPU 1: SCHED_FIFO (no timer slack: its hrtimer expires at the
    // intended time exactly), one absolute sleep.
    let (e2, r2) = std::thread::spawn(|| unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(1, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set),
            0
        );
        let p = libc::sched_param { sched_priority: 1 };
        assert_eq!(libc::sched_setscheduler(0, libc::SCHED_FIFO, &p), 0);
        let e = mono_ns() + 200_000;
        let ts = libc::timespec {
            tv_sec: (e / 1_000_000_000) as i64,
            tv_nsec: (e % 1_000_000_000) as i64,
        };
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        );
        (e, mono_ns())
    })
    .join()
    .unwrap();
    let (e1, r1) = mark(&s, 0);
    assert!(r1 > r2);
    let t0 = Instant::now();
    while s
        .arm
        .lock()
        .pending
        .front()
        .is_none_or(|p| p.copy.is_none())
    {
        assert!(t0.elapsed() < Duration::from_secs(2), "not copied");
        std::thread::sleep(Duration::from_micros(200));
    }
    let run = t.path().join("rundir");
    s.on_spike(&ev(0, e1, r1, true), &run).expect("traced");
    // CPU 1's clock read 20 µs after the stop (its marker was not written).
    let late = r1 + 20_000;
    let sp = s
        .on_spike(&ev(1, e2, late, false), &run)
        .expect("read from spike 1's capture");
    assert_eq!((sp.cpu, sp.at_ns, sp.latency_ns), (1, e2, late - e2));
    let a = std::fs::read_to_string(run.join("spikes/002/analysis.txt")).unwrap();
    assert!(a.contains("read from the capture of spike 1"), "{a}");
    assert!(run.join("spikes/002/trace.txt").is_file());
    // A window that began after the stop is not in the capture.
    assert!(s
        .on_spike(&ev(1, r1 + 10_000, r1 + 400_000, false), &run)
        .is_none());
    let v = serde_json::to_value(s.finish()).unwrap();
    assert_eq!(
        (v["traced"].as_u64(), v["covered"].as_u64()),
        (Some(2), Some(1)),
        "{v}"
    );
    assert_eq!(v["not_traced"], 1);
    assert!(instances_left().is_empty());
}

/// Three instances: A's spike is being copied and B stops meanwhile; the copy itself polls,
/// so C is armed before the copy ends (with two polls around the copy only, the recorder
/// stayed disarmed for the whole copy: hundreds of ms under load).
#[test]
fn a_third_instance_is_armed_during_a_copy() {
    let Some(_g) = latlab_sys::privileged::guard("a_third_instance_is_armed_during_a_copy") else {
        return;
    };
    let (_t, l, mut s) = session(3);
    assert_eq!(instances_left().len(), 3);
    // Scheduler events on CPU 0, in A's buffer: children of a thread pinned there.
    // SAFETY: plain syscall on this (test) thread with a valid set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set),
            0
        );
    }
    for _ in 0..300 {
        let _ = std::process::Command::new("true").status();
    }
    let _ = mark(&s, 0);
    s.poll();
    assert_eq!(
        s.armed_fd().load(Ordering::SeqCst),
        s.common.instances.all()[1].marker_fd(),
        "B armed"
    );
    // B's spike comes while A is still waiting for its copy: nothing polls but the copy.
    let _ = mark(&s, 0);
    assert!(!s.is_armed());
    let c = s.drain_polling(0).expect("a binary copy");
    let pages = &c.pages.iter().find(|p| p.0 == 0).expect("CPU 0's pages").1;
    assert!(
        pages.len() >= RAW_POLL_EVERY,
        "A's copy holds {} bytes, fewer than one poll interval",
        pages.len()
    );
    assert!(s.is_armed(), "C armed during the copy");
    assert_eq!(
        s.armed_fd().load(Ordering::SeqCst),
        s.common.instances.all()[2].marker_fd()
    );
    assert!(s.common.instances.all()[2].is_on());
    let v = serde_json::to_value(s.finish()).unwrap();
    assert!(v["removal_error"].is_null(), "{v}");
    assert!(instances_left().is_empty());
    assert_eq!(l.lock().unwrap().entries().count(), 0);
}
