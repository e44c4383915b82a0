//! The recorder that never stops, on real tracefs (root).

use std::path::Path;
use std::sync::{Arc, Mutex};

use latlab_sys::ledger::Ledger;

use super::super::tests::{ev, instances_left, make_session, mark_running, note, wait};
use super::super::{Recorder, Started};
use super::*;

/// The recorder of one instance on CPUs 0 and 1; with the copier (`copier`), as `latlab run`
/// has it, or read by the collector only.
fn session(copier: bool) -> (tempfile::TempDir, Arc<Mutex<Ledger>>, Running) {
    match make_session(1, copier) {
        (t, l, Started::Running(s)) => (t, l, s),
        _ => panic!("binary pages on this kernel: the running recorder"),
    }
}

/// One instance (the default) never stops: a spike's marker is a plain event, the
/// instance records on, and each spike's trace is its CPU's session, from the previous
/// spike's marker to its own. What came between the two markers (a note) and the second
/// marker are the second capture's only, and nothing of the first is in it: without the
/// split at the marker, capture 1 holds both. The files wait in memory until the run ends.
#[test]
fn the_recorder_never_stops_and_each_spike_gets_its_session() {
    let Some(_g) =
        latlab_sys::privileged::guard("the_recorder_never_stops_and_each_spike_gets_its_session")
    else {
        return;
    };
    // session() asserts "binary pages on this kernel: the running recorder".
    let (t, _l, s) = session(false);
    assert!(!s.stops());
    let (e1, r1) = mark_running(&s, 1);
    assert!(
        s.common.instances.all()[0].is_on(),
        "a marker does not stop it"
    );
    note(&s, 1, "BETWEEN_1_AND_2\n");
    let (e2, r2) = mark_running(&s, 1);
    let run = t.path().join("rundir");
    let v = two_sessions_apart(s, &run, [(e1, r1), (e2, r2)], "BETWEEN_1_AND_2");
    assert_eq!(
        v["stop"], "never: each spike's trace ends at its marker",
        "{v}"
    );
    assert!(v["rearm_mean_ns"].is_null(), "never re-armed: {v}");
    assert_eq!(v["files_written_while_measuring"], 0, "{v}");
}

/// Hand both spikes (on CPU 1: intended, actual) to the collector and check that each
/// capture holds its own session: `note` (written between the two markers) and spike 2's
/// marker in capture 2 only, in its text and in its `trace.dat` (trimmed pages, not just
/// the text), nothing of spike 1 there. The files are written by finish, not before.
fn two_sessions_apart(
    mut s: Running,
    run: &Path,
    spikes: [(u64, u64); 2],
    note: &str,
) -> serde_json::Value {
    for (e, r) in spikes {
        let sp = s.on_spike(&ev(1, e, r, true), run).expect("traced");
        assert!(!sp.causes.is_empty() || !sp.timeline.is_empty());
    }
    assert!(
        !run.join("spikes/001/trace.txt").exists() && !run.join("spikes/001").exists(),
        "files written while measuring"
    );
    assert!(
        s.common.instances.all()[0].is_on(),
        "still recording after both copies"
    );
    let v = serde_json::to_value(s.finish()).unwrap();
    let [(e1, _), (e2, _)] = spikes;
    let (m1, m2) = (format!("intended={e1}"), format!("intended={e2}"));
    let has = |b: &[u8], w: &str| b.windows(w.len()).any(|x| x == w.as_bytes());
    for ext in ["txt", "dat"] {
        let read = |n: u32| std::fs::read(run.join(format!("spikes/{n:03}/trace.{ext}"))).unwrap();
        let (c1, c2) = (read(1), read(2));
        assert!(has(&c1, &m1), "capture 1 ({ext}) lacks its marker");
        assert!(
            !has(&c1, note) && !has(&c1, &m2),
            "capture 1 ({ext}) holds session 2"
        );
        assert!(
            has(&c2, note) && has(&c2, &m2),
            "capture 2 ({ext}) lacks its session"
        );
        assert!(!has(&c2, &m1), "capture 2 ({ext}) holds spike 1");
    }
    assert!(run.join("spikes/002/analysis.txt").exists());
    assert_eq!(v["traced"], 2);
    assert_eq!(v["unmatched"], 0, "{v}");
    assert_eq!(v["instances"].as_array().map(Vec::len), Some(1), "{v}");
    assert!(v["removal_error"].is_null(), "{v}");
    assert!(instances_left().is_empty());
    v
}

/// The same with the copier thread, as `latlab run` has it: it reads the marked CPU's
/// pages with no call from the collector; what the kernel wrote after that copy and a
/// second spike are the second capture's only. Then spikes on both CPUs at once (a VM
/// stalled on both) are traced each from its own CPU's session, and the copy delay is
/// recorded.
#[test]
fn the_copier_reads_marked_cpus_without_the_collector() {
    let Some(_g) =
        latlab_sys::privileged::guard("the_copier_reads_marked_cpus_without_the_collector")
    else {
        return;
    };
    let (t, _l, s) = session(true);
    assert!(s.copier.is_some());
    let run = s.tapes.clone();
    let (e1, r1) = mark_running(&s, 1);
    wait("read by the copier", &|| run.copied_marks(1) >= 1);
    note(&s, 1, "AFTER_COPY_1\n");
    let (e2, r2) = mark_running(&s, 1);
    wait("read again by the copier", &|| run.copied_marks(1) >= 2);
    let run_dir = t.path().join("rundir");
    let mut s = s;
    for (e, r) in [(e1, r1), (e2, r2)] {
        s.on_spike(&ev(1, e, r, true), &run_dir).expect("traced");
    }
    let (e3, r3) = mark_running(&s, 0);
    let (e4, r4) = mark_running(&s, 1);
    for (cpu, e, r) in [(0, e3, r3), (1, e4, r4)] {
        let sp = s.on_spike(&ev(cpu, e, r, true), &run_dir).expect("traced");
        assert_eq!(sp.cpu, cpu);
    }
    let v = serde_json::to_value(s.finish()).unwrap();
    assert_eq!(v["traced"], 4, "{v}");
    assert_eq!(v["unmatched"], 0, "{v}");
    let has = |n: u32, w: &str| {
        let t = std::fs::read_to_string(run_dir.join(format!("spikes/{n:03}/trace.txt"))).unwrap();
        t.contains(w)
    };
    assert!(has(2, "AFTER_COPY_1") && !has(1, "AFTER_COPY_1"));
    assert!(has(3, &format!("intended={e3}")) && !has(3, &format!("intended={e4}")));
    assert!(has(4, &format!("intended={e4}")) && !has(4, &format!("intended={e2}")));
    let d = v["copy_delay_max_ns"]
        .as_u64()
        .expect("copy delays recorded");
    assert!(d > 0 && d < 5_000_000_000, "{v}");
    assert_eq!(v["captures"][2]["cpu"], 0);
    // Removed although the test still holds the copier's state (its files were closed).
    assert!(v["removal_error"].is_null(), "{v}");
    assert!(instances_left().is_empty());
    drop(run);
}

/// --trace-max-spikes: after the last spike traced, the threads write no more markers
/// (`armed` cleared), and a later spike is counted over the cap.
#[test]
fn the_running_recorder_stops_marking_at_the_cap() {
    let Some(_g) = latlab_sys::privileged::guard("the_running_recorder_stops_marking_at_the_cap")
    else {
        return;
    };
    let (t, _l, mut s) = session(false);
    s.common.max_spikes = 1;
    let (e, r) = mark_running(&s, 0);
    let run = t.path().join("rundir");
    s.on_spike(&ev(0, e, r, true), &run).expect("traced");
    assert!(!s.is_armed(), "still marking after the cap");
    assert!(s
        .on_spike(&ev(0, e + 1_000_000, r + 1_000_000, false), &run)
        .is_none());
    let v = serde_json::to_value(s.finish()).unwrap();
    assert_eq!(
        (&v["traced"], &v["not_traced"], &v["over_max_spikes"]),
        (&1.into(), &1.into(), &1.into()),
        "{v}"
    );
    assert!(run.join("spikes/001/trace.dat").exists());
}
