//! `latlab profile`'s run in the text, markdown and JSON reports: the scheduler profile (the
//! run-queue shares per CPU, the worst waits, the measuring threads' waits) is shown, before
//! the per-CPU statistics in text, task names escaped; the report JSON carries `profile` as
//! run.json does.

use latlab_core::hist::{Histogram, Layout};
use latlab_core::model::RunModel;
use latlab_core::profile::{Ev, PEvent, ProfileRecord, Profiler};
use latlab_core::record::*;
use latlab_core::stats::Stats;
use latlab_report::{render, Format};

fn ev(ts: u64, cpu: u32, ev: Ev) -> PEvent {
    PEvent {
        ts,
        cpu,
        lost_before: false,
        lost_after: false,
        ev,
    }
}

fn switch(prev: i64, prev_prio: i64, next: i64, next_prio: i64) -> Ev {
    Ev::Switch {
        prev_pid: prev,
        prev_prio,
        prev_runnable: false,
        prev_dead: false,
        next_pid: next,
        next_prio,
    }
}

/// A profile of 1 ms on CPUs 0 and 1: latlab's measuring thread (tid 9) wakes five times on
/// CPU 0 and waits 2 µs each time, preempted once by pid 77; a task `<hog>` (pid 50) waits 30 µs on CPU 1 three times.
fn profile() -> ProfileRecord {
    let mut p = Profiler::new(&[0, 1], 1_000, 1_000_000);
    p.watch(9, 0);
    for k in 0..5u64 {
        let t = 1_000 + k * 100_000;
        let wake = |pid, prio, cpu| Ev::Wakeup {
            pid,
            prio,
            target_cpu: Some(cpu),
            new: false,
        };
        p.event(&ev(t, 0, wake(9, 4, 0)));
        p.event(&ev(t + 2_000, 0, switch(0, 120, 9, 4)));
        if k == 4 {
            // Preempted once by pid 77, switched in again without a wake-up.
            let preempted = Ev::Switch {
                prev_pid: 9,
                prev_prio: 4,
                prev_runnable: true,
                prev_dead: false,
                next_pid: 77,
                next_prio: 2,
            };
            p.event(&ev(t + 5_000, 0, preempted));
            p.event(&ev(t + 6_000, 0, switch(77, 2, 9, 4)));
        }
        p.event(&ev(t + 9_000, 0, switch(9, 4, 0, 120)));
        if k < 3 {
            p.event(&ev(t, 1, wake(50, 120, 1)));
            p.event(&ev(t + 30_000, 1, switch(0, 120, 50, 120)));
            p.event(&ev(t + 40_000, 1, switch(50, 120, 0, 120)));
        }
    }
    let comm = |pid: i64| match pid {
        9 => "latlab-cpu0".to_string(),
        50 => "<hog>\x1b[31m".to_string(),
        _ => format!("task {pid}"),
    };
    p.finish(1_001_000, 10, comm, 0, 0).0
}

fn model() -> RunModel {
    let layout = Layout::new(1_000, 300_000).unwrap();
    let mut h = Histogram::new(layout);
    for v in [20_000, 30_000, 40_000] {
        h.record(v);
    }
    RunModel::new(RunRecord {
        schema_version: SCHEMA_VERSION,
        run_id: None,
        label: "profile".into(),
        source: Source::Latlab,
        complete: true,
        tool_version: None,
        command_line: None,
        started_at: None,
        ended_at: None,
        config: RunConfig {
            mode: "timer".into(),
            backend: "real".into(),
            cpus: vec![0],
            ..RunConfig::default()
        },
        machine: Machine::default(),
        inventory: None,
        total: Stats::default(),
        cpus: vec![CpuRecord {
            cpu: 0,
            stats: Stats::default(),
            histogram: h.to_record(),
            per_second_max_ns: vec![],
            top_spikes: vec![],
            thread: ThreadInfo::default(),
            mode: None,
        }],
        spikes: vec![],
        trace: None,
        loads: vec![],
        activity: None,
        warnings: vec![],
        notes: vec![],
        scenario: None,
        profile: Some(profile()),
        intervals: None,
        until: None,
    })
    .unwrap()
}

#[test]
fn text_shows_the_profile_before_the_statistics() {
    let m = model();
    let p = m.record.profile.as_ref().unwrap();
    let hog = p
        .wait
        .iter()
        .find(|w| w.pid == 50)
        .expect("the hog's waits");
    assert_eq!(hog.max_ns, Some(30_000));
    let text = String::from_utf8(render(&m, Format::Text)).unwrap();
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("no {needle:?} in:\n{text}"))
    };
    let rq = at("Scheduler profile: run-queue length per CPU");
    let waits = at("Run-queue waits, worst p99 first");
    let measuring = at("latlab's measuring threads, as the scheduler saw them");
    let stats = at("\nCPU 0\n");
    assert!(rq < waits && waits < measuring && measuring < stats);
    // latlab's own threads apart from the workload's.
    let own = at("latlab's own threads' run-queue waits");
    assert!(waits < own && own < measuring);
    assert!(text[own..measuring].contains("latlab-cpu0"));
    assert!(!text[waits..own].contains("latlab-cpu0"));
    // A row per profiled CPU with its shares.
    let rows: Vec<&str> = text[rq..waits]
        .lines()
        .filter(|l| l.trim_start().starts_with(['0', '1']) && l.contains('%'))
        .collect();
    assert_eq!(rows.len(), 2, "{}", &text[rq..waits]);
    // The hog's row: its waits (30 µs), its name escaped.
    let row = text[waits..measuring]
        .lines()
        .find(|l| l.contains("<hog>"))
        .unwrap_or_else(|| panic!("no hog row:\n{}", &text[waits..measuring]));
    assert!(
        row.contains("\\u{1b}[31m") && row.contains("30 µs"),
        "{row}"
    );
    assert!(!text.contains('\x1b'));
    // The measuring thread's run-queue wait of 2 µs.
    let wait = text[measuring..stats]
        .lines()
        .find(|l| l.contains("run-queue wait"))
        .unwrap();
    assert!(wait.contains("2 µs"), "{wait}");
    // Its preemption, and who preempted it.
    assert!(
        text[measuring..stats].contains("switched in without a wake-up): CPU 0 once (task 77 1)."),
        "{}",
        &text[measuring..stats]
    );
}

#[test]
fn markdown_shows_the_profile() {
    let md = String::from_utf8(render(&model(), Format::Markdown)).unwrap();
    for h in [
        "### Scheduler profile: run-queue length per CPU",
        "### Run-queue waits, worst p99 first",
        "### latlab's measuring threads, as the scheduler saw them",
    ] {
        assert!(md.contains(h), "no {h:?} in:\n{md}");
    }
    assert!(md.contains("\\<hog\\>") && !md.contains("<hog>") && !md.contains('\x1b'));
}

#[test]
fn json_has_the_profile_of_run_json() {
    let m = model();
    let v: serde_json::Value = serde_json::from_slice(&render(&m, Format::Json)).unwrap();
    assert_eq!(
        v["profile"],
        serde_json::to_value(m.record.profile.as_ref().unwrap()).unwrap()
    );
    // Absent for a run without a profile.
    let mut r = m.record.clone();
    r.profile = None;
    let v: serde_json::Value =
        serde_json::from_slice(&render(&RunModel::new(r).unwrap(), Format::Json)).unwrap();
    assert!(v.get("profile").is_none());
}
