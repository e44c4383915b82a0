//! The inventory readers on fixture trees (`tests/fixtures/inventory/<tree>`): a tuned
//! PREEMPT_RT box, a default desktop kernel, this VM as captured by `capture.sh`, Debian's
//! 6.12 PREEMPT_RT kernel as captured in the kernel lab, and a tree of garbage. Each test checks what the reader must have understood, and that what it could not
//! understand is reported with its path rather than guessed.

use std::path::PathBuf;

use latlab_core::findings::{findings, Severity};
use latlab_core::inventory::Inventory;
use latlab_sys::inventory::{collect, collect_with, machine, Options};

fn tree(name: &str) -> Inventory {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/inventory")
        .join(name);
    assert!(root.is_dir(), "fixture {} missing", root.display());
    collect(&root)
}

fn ids(inv: &Inventory) -> Vec<(String, Severity)> {
    findings(inv)
        .into_iter()
        .map(|f| (f.id, f.severity))
        .collect()
}

#[test]
fn rt_tuned_box_reads_as_tuned() {
    let inv = tree("rt-tuned");
    assert_eq!(inv.preemption.model.as_deref(), Some("rt"));
    assert_eq!(inv.cpus.isolated, vec![2, 3]);
    assert_eq!(inv.sched.rt_runtime_us, Some(-1));
    assert_eq!(inv.memory.thp_enabled.as_deref(), Some("never"));
    assert_eq!(
        inv.boost,
        Some(false),
        "intel_pstate no_turbo=1 means boost off"
    );
    assert_eq!(inv.dma_latency_holders.len(), 1);
    assert_eq!(inv.dma_latency_holders[0].comm, "tuned");
    let c6 = &inv.cpuidle.states[&0][2];
    assert_eq!(
        (c6.name.as_str(), c6.latency_us, c6.enabled),
        ("C6", Some(170), false)
    );
    assert_eq!(inv.tracing.timerlat, Some(true));
    assert!(inv.tracing.events.values().all(|p| *p));
    assert!(
        inv.unreadable.is_empty() && inv.invalid.is_empty(),
        "{:?} {:?}",
        inv.unreadable,
        inv.invalid
    );
    let f = ids(&inv);
    assert!(f.iter().all(|(_, s)| *s == Severity::Info), "{f:?}");
    let m = machine(&inv);
    assert_eq!(m.preemption.as_deref(), Some("rt"));
    assert_eq!(m.cpus_online, vec![0, 1, 2, 3]);
    assert_eq!(m.virtualized, Some(false));
}

#[test]
fn desktop_kernel_has_the_usual_problems() {
    let inv = tree("desktop");
    assert_eq!(inv.preemption.model.as_deref(), Some("voluntary"));
    assert!(inv.preemption.dynamic);
    assert_eq!(inv.memory.swaps, vec!["/swap.img".to_string()]);
    assert_eq!(inv.irqs.irqbalance_running, Some(true));
    let top: Vec<(&str, u64)> = inv
        .irqs
        .busiest
        .iter()
        .map(|i| (i.name.as_str(), i.count))
        .collect();
    assert_eq!(
        top,
        vec![
            ("i915", 7000),
            ("iwlwifi:default_queue", 2196),
            ("i801_smbus", 30)
        ]
    );
    assert_eq!(inv.irqs.busiest[0].effective_affinity.as_deref(), Some("2"));
    assert_eq!(inv.cgroup.len(), 1, "{:?}", inv.cgroup);
    let f = ids(&inv);
    for (id, sev) in [
        ("preempt.model", Severity::Bad),
        ("cpuidle.deep-states", Severity::Bad),
        ("cpufreq.governor", Severity::Warn),
        ("sched.rt-throttling", Severity::Warn),
        ("mm.thp-always", Severity::Warn),
        ("mm.swap", Severity::Warn),
        ("cpus.no-isolation", Severity::Warn),
        ("trace.events-missing", Severity::Warn),
        ("cpus.smt", Severity::Info),
    ] {
        assert!(
            f.contains(&(id.to_string(), sev)),
            "{id} {sev:?} not in {f:?}"
        );
    }
    assert_eq!(f[0].1, Severity::Bad);
}

#[test]
fn this_vm_as_captured() {
    let inv = tree("this-vm");
    assert_eq!(inv.kernel.release.as_deref(), Some("6.18.44-fc-v769"));
    // PREEMPT_DYNAMIC with no preempt= and no debugfs: the default of the config (through
    // gzip -dc of the captured /proc/config.gz).
    assert_eq!(inv.preemption.model.as_deref(), Some("none"));
    assert_eq!(
        inv.kernel.config.get("CONFIG_HZ").map(String::as_str),
        Some("250")
    );
    assert_eq!(inv.virt.hypervisor, Some(true));
    assert!(inv.virt.steal_since_boot.is_some());
    assert!(
        inv.virt.steal_sampled.is_none(),
        "fixture roots are not sampled"
    );
    assert_eq!(inv.clocksource.current.as_deref(), Some("tsc"));
    assert!(inv.cpufreq.is_empty() && inv.cpuidle.states.is_empty());
    assert_eq!(inv.sched.rt_runtime_us, Some(950000));
    let f = ids(&inv);
    assert!(
        f.contains(&("preempt.model".into(), Severity::Bad)),
        "{f:?}"
    );
    assert!(f.contains(&("virt.guest".into(), Severity::Warn)), "{f:?}");
    // Firecracker's balloon with free page reporting (feature bit 5), order 9 (2 MiB).
    assert_eq!(inv.virt.page_reporting, Some(true));
    assert_eq!(inv.virt.page_reporting_order, Some(9));
    assert!(
        f.contains(&("virt.page_reporting".into(), Severity::Warn)),
        "{f:?}"
    );
    let all = findings(&inv);
    let pr = all.iter().find(|f| f.id == "virt.page_reporting").unwrap();
    assert!(
        pr.evidence.contains("blocks of 2048 KiB"),
        "{}",
        pr.evidence
    );
}

#[test]
fn debian_6_12_rt_as_captured_in_the_kernel_lab() {
    // capture.sh in a guest of scripts/kernel-lab (rt-6.12, 2 CPUs, no tuning): Debian's
    // linux-image-6.12-rt-amd64 as it boots, its config in /boot (no /proc/config.gz).
    let inv = tree("debian-6.12-rt");
    assert_eq!(
        inv.kernel.release.as_deref(),
        Some("6.12.117+deb12-rt-amd64")
    );
    assert_eq!(inv.preemption.model.as_deref(), Some("rt"));
    assert_eq!(
        inv.kernel
            .config
            .get("CONFIG_PREEMPT_RT")
            .map(String::as_str),
        Some("y")
    );
    assert_eq!(inv.tracing.timerlat, Some(true));
    let file = |rel: &str| {
        std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/inventory/debian-6.12-rt")
                .join(rel),
        )
        .unwrap()
    };
    // Without nohz_full= the kernel prints its unallocated mask as "(null)": no CPU.
    let invalid = |p: &str| inv.invalid.iter().any(|i| i.path == p);
    assert_eq!(file("sys/devices/system/cpu/nohz_full"), "(null)\n");
    assert!(inv.cpus.nohz_full.is_empty());
    assert!(
        !invalid("/sys/devices/system/cpu/nohz_full"),
        "{:?}",
        inv.invalid
    );
    // page_reporting_order -1: the kernel's "unset" until a reporting device registers.
    assert_eq!(
        file("sys/module/page_reporting/parameters/page_reporting_order"),
        "-1\n"
    );
    assert_eq!(inv.virt.page_reporting_order, None);
    assert!(
        !invalid("/sys/module/page_reporting/parameters/page_reporting_order"),
        "{:?}",
        inv.invalid
    );
    assert_eq!(inv.virt.page_reporting, None, "no balloon in the guest");
    assert!(
        inv.invalid.is_empty() && inv.unreadable.is_empty(),
        "{:?} {:?}",
        inv.invalid,
        inv.unreadable
    );
    let f = ids(&inv);
    assert!(
        f.iter()
            .all(|(id, _)| !id.starts_with("invalid:") && !id.starts_with("unknown:")),
        "{f:?}"
    );
}

#[test]
fn garbage_gives_findings_not_guesses() {
    let inv = tree("garbage");
    assert_eq!(inv.preemption.model, None);
    assert_eq!(inv.sched.rt_runtime_us, None);
    assert_eq!(inv.memory.thp_enabled, None);
    let bad: Vec<&str> = inv.invalid.iter().map(|i| i.path.as_str()).collect();
    for p in [
        "/proc/sys/kernel/sched_rt_runtime_us",
        "/proc/sys/kernel/timer_migration",
        "/sys/kernel/mm/transparent_hugepage/enabled",
        "/sys/kernel/debug/sched/preempt",
        "/proc/stat",
        "/proc/self/cgroup",
        "/sys/devices/system/cpu/cpu0/cpuidle/state0/latency",
        "/sys/bus/virtio/devices/virtio0/features",
        "/sys/module/page_reporting/parameters/page_reporting_order",
    ] {
        assert!(bad.contains(&p), "{p} not in {bad:?}");
    }
    // A balloon whose features cannot be read is not guessed to report free pages.
    assert_eq!(inv.virt.page_reporting, None);
    // A directory where a file should be: not readable.
    assert!(inv
        .unreadable
        .contains(&"/proc/sys/kernel/sched_rt_period_us".to_string()));
    let f = findings(&inv);
    assert!(f
        .iter()
        .any(|f| f.id == "invalid:/proc/stat" && f.evidence.contains("cpu  x y z")));
    assert!(f
        .iter()
        .any(|f| f.id == "preempt.model" && f.title.contains("unknown")));
    let mut seen = std::collections::BTreeSet::new();
    assert!(
        f.iter().all(|f| seen.insert(f.id.clone())),
        "finding ids are unique"
    );
}

#[test]
fn a_missing_root_is_all_unknown() {
    let d = tempfile::tempdir().unwrap();
    let inv = collect_with(d.path(), &Options { steal_sample: None });
    let f = findings(&inv);
    assert!(f.iter().any(|f| f.id == "unknown:/proc/cmdline"));
    assert!(f.iter().any(|f| f.id == "unknown:/proc/stat"));
}

#[test]
fn live_machine_is_read_without_changes() {
    // Reads the real / (without the one-second steal sample): whatever this machine is, the
    // kernel release and online CPUs are always readable.
    let inv = collect_with(std::path::Path::new("/"), &Options { steal_sample: None });
    assert!(inv.kernel.release.is_some());
    assert!(!inv.cpus.online.is_empty());
    assert!(inv.kernel.arch.is_some());
}

#[test]
fn dmi_and_the_device_tree_are_read_where_present() {
    let inv = tree("debian-6.12-rt");
    let dmi = inv.dmi_id.expect("the lab's QEMU has DMI");
    assert!(dmi.sys_vendor.is_some(), "{dmi:?}");
    assert_eq!(inv.device_tree, None);
    assert_eq!(tree("desktop").dmi_id, None);
    // A board with a device tree and no DMI.
    let d = tempfile::tempdir().unwrap();
    let dt = d.path().join("proc/device-tree");
    std::fs::create_dir_all(&dt).unwrap();
    std::fs::write(
        dt.join("compatible"),
        b"raspberrypi,4-model-b\0brcm,bcm2711\0",
    )
    .unwrap();
    std::fs::write(dt.join("model"), b"Raspberry Pi 4 Model B Rev 1.4\0").unwrap();
    let inv = collect(d.path());
    assert_eq!(inv.dmi_id, None);
    let t = inv.device_tree.unwrap();
    assert_eq!(t.compatible, ["raspberrypi,4-model-b", "brcm,bcm2711"]);
    assert_eq!(t.model.as_deref(), Some("Raspberry Pi 4 Model B Rev 1.4"));
    let v = serde_json::to_value(collect(d.path())).unwrap();
    assert!(v.get("dmi_id").is_none(), "absent, not null, without DMI");
}
