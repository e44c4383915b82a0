//! What is offered, who else is there, and that a failed start leaves the machine as it was
//! (on a fake tracefs tree: plain files).

use std::fs;
use std::path::Path;

use super::*;
use crate::ledger::Ledger;

/// A fake tracefs root of a kernel with the tracers `tracers`; `osnoise/` and the
/// `timerlat_fd` of `fd_cpus` when `timerlat` is among them.
fn fake(root: &Path, tracers: &str, fd_cpus: &[u32]) {
    fs::create_dir_all(root.join("instances")).unwrap();
    fs::write(root.join("available_tracers"), format!("{tracers}\n")).unwrap();
    fs::write(root.join("current_tracer"), "nop\n").unwrap();
    if !tracers.contains("timerlat") {
        return;
    }
    let o = root.join("osnoise");
    fs::create_dir_all(&o).unwrap();
    fs::write(o.join("cpus"), "0-3\n").unwrap();
    fs::write(o.join("timerlat_period_us"), "1000\n").unwrap();
    fs::write(o.join("stop_tracing_us"), "250\n").unwrap();
    fs::write(o.join("stop_tracing_total_us"), "0\n").unwrap();
    fs::write(
        o.join("options"),
        "DEFAULTS OSNOISE_WORKLOAD NO_PANIC_ON_STOP NO_OSNOISE_PREEMPT_DISABLE\n",
    )
    .unwrap();
    for c in fd_cpus {
        let d = o.join(format!("per_cpu/cpu{c}"));
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("timerlat_fd"), "").unwrap();
    }
}

#[test]
fn a_kernel_without_timerlat_is_named_with_its_option() {
    let t = tempfile::tempdir().unwrap();
    fake(t.path(), "blk function nop", &[]);
    let e = probe(t.path(), &[0]).unwrap_err();
    assert!(e.contains("CONFIG_TIMERLAT_TRACER"), "{e}");
    assert!(e.contains("blk function nop"), "{e}");
    assert!(!e.contains('\n'), "one line: {e}");
}

#[test]
fn user_threads_where_every_cpu_has_its_timerlat_fd() {
    let t = tempfile::tempdir().unwrap();
    fake(t.path(), "timerlat osnoise nop", &[0, 1]);
    assert_eq!(probe(t.path(), &[0, 1]), Ok(Threads::User));
    // CPU 2 has none (a 6.1 kernel has none at all): the kernel's threads.
    assert_eq!(probe(t.path(), &[1, 2]), Ok(Threads::Kernel));
}

#[test]
fn another_tracer_or_osnoise_user_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    fake(root, "timerlat osnoise function nop", &[0]);
    assert_eq!(
        conflicts(root, "latlab-1-timerlat", TIMERLAT_CONFLICTS),
        None
    );
    // latlab's own instance is not another user.
    let own = root.join("instances/latlab-1-timerlat");
    fs::create_dir_all(&own).unwrap();
    fs::write(own.join("current_tracer"), "timerlat\n").unwrap();
    assert_eq!(
        conflicts(root, "latlab-1-timerlat", TIMERLAT_CONFLICTS),
        None
    );
    // rtla's instance.
    let rtla = root.join("instances/timerlat_hist");
    fs::create_dir_all(&rtla).unwrap();
    fs::write(rtla.join("current_tracer"), "timerlat\n").unwrap();
    let c = conflicts(root, "latlab-1-timerlat", TIMERLAT_CONFLICTS).unwrap();
    assert!(c.contains("'timerlat_hist'") && c.contains("rtla"), "{c}");
    fs::write(rtla.join("current_tracer"), "nop\n").unwrap();
    assert_eq!(
        conflicts(root, "latlab-1-timerlat", TIMERLAT_CONFLICTS),
        None
    );
    // hwlat in another instance: beside timerlat with a warning (its thread holds interrupts
    // off), refused by the osnoise back end (they share tracing_thresh).
    let hw = root.join("instances/lab-hwlat");
    fs::create_dir_all(&hw).unwrap();
    fs::write(hw.join("current_tracer"), "hwlat\n").unwrap();
    fs::create_dir_all(root.join("hwlat_detector")).unwrap();
    fs::write(root.join("hwlat_detector/width"), "20000\n").unwrap();
    fs::write(root.join("hwlat_detector/window"), "100000\n").unwrap();
    assert_eq!(
        conflicts(root, "latlab-1-timerlat", TIMERLAT_CONFLICTS),
        None
    );
    let w = hwlat_beside(root, "latlab-1-timerlat").unwrap();
    assert!(
        w.contains("'lab-hwlat'") && w.contains("20000 µs of every 100000 µs"),
        "{w}"
    );
    let c = conflicts(root, "latlab-1-timerlat", OSNOISE_CONFLICTS).unwrap();
    assert!(
        c.contains("'lab-hwlat'") && c.contains("tracing_thresh"),
        "{c}"
    );
    fs::write(hw.join("current_tracer"), "nop\n").unwrap();
    assert_eq!(hwlat_beside(root, "latlab-1-timerlat"), None);
    assert_eq!(
        conflicts(root, "latlab-1-timerlat", OSNOISE_CONFLICTS),
        None
    );
    // A tracer in the top level.
    fs::write(root.join("current_tracer"), "function\n").unwrap();
    let c = conflicts(root, "latlab-1-timerlat", TIMERLAT_CONFLICTS).unwrap();
    assert!(c.contains("top-level") && c.contains("'function'"), "{c}");
}

#[test]
fn a_failed_start_restores_every_osnoise_setting() {
    // The settings are changed (ledger first), then the instance cannot be configured (a
    // plain directory has no trace_clock): everything is put back and the ledger is empty.
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("tracing");
    fake(&root, "timerlat osnoise nop", &[0, 1]);
    let before = |f: &str| fs::read_to_string(root.join("osnoise").join(f)).unwrap();
    let files = ["cpus", "timerlat_period_us", "stop_tracing_us", "options"];
    let orig: Vec<String> = files.iter().map(|f| before(f)).collect();
    let mut ledger = Ledger::open_in(&t.path().join("run")).unwrap();
    let cfg = InstanceConfig {
        name: "latlab-1-timerlat".into(),
        cpus: vec![0, 1],
        period_us: 200,
        threads: Threads::User,
        buffer_kb: 1024,
    };
    let e = Instance::start(&root, &cfg, &mut ledger).unwrap_err();
    assert!(e.contains("timerlat instance"), "{e}");
    assert!(
        ledger.is_empty(),
        "{:?}",
        ledger.entries().collect::<Vec<_>>()
    );
    for (f, o) in files.iter().zip(&orig) {
        let now = before(f);
        match *f {
            // The options file is a list: the workload option written back restores it.
            "options" => assert_eq!(now, "OSNOISE_WORKLOAD"),
            _ => assert_eq!(now.trim_end_matches(['\0', '\n']), o.trim(), "{f}"),
        }
    }
}

#[test]
fn settings_are_in_the_ledger_before_they_change() {
    // What a SIGKILL mid-run leaves: the ledger names every osnoise setting with its
    // original value, so `latlab cleanup` restores it.
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("tracing");
    fake(&root, "timerlat osnoise nop", &[0]);
    let mut ledger = Ledger::open_in(&t.path().join("run")).unwrap();
    let mut knobs = Vec::new();
    let o = root.join("osnoise");
    super::setup::knob_for_test(
        &mut ledger,
        &mut knobs,
        &o.join("timerlat_period_us"),
        "250",
    );
    super::setup::workload_for_test(&mut ledger, &mut knobs, &o.join("options"), Threads::User);
    assert_eq!(
        fs::read_to_string(o.join("timerlat_period_us")).unwrap(),
        "250"
    );
    assert_eq!(
        fs::read_to_string(o.join("options")).unwrap(),
        "NO_OSNOISE_WORKLOAD"
    );
    let saved: Vec<_> = ledger.entries().cloned().collect();
    assert_eq!(
        saved,
        vec![
            crate::ledger::Entry::Knob {
                path: o.join("timerlat_period_us"),
                original: "1000".into()
            },
            crate::ledger::Entry::Knob {
                path: o.join("options"),
                original: "OSNOISE_WORKLOAD".into()
            },
        ]
    );
    // cleanup's path: the ledger alone restores them.
    for l in ledger.restore_all() {
        assert!(!l.starts_with("could not"), "{l}");
    }
    assert_eq!(
        fs::read_to_string(o.join("timerlat_period_us")).unwrap(),
        "1000"
    );
    assert_eq!(
        fs::read_to_string(o.join("options")).unwrap(),
        "OSNOISE_WORKLOAD"
    );
}
