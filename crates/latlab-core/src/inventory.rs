//! The machine inventory: everything about a Linux machine that bounds the latency it can
//! deliver (kernel and preemption model, command line, clocks, frequency and idle states,
//! memory policy, RT throttling, IRQs, virtualization, cgroup limits, tracing support).
//!
//! The types are plain data (serde, `BTreeMap`s so the JSON is deterministic) filled by
//! `latlab_sys::inventory::collect`, recorded in every `run.json` (so `compare` can say what
//! changed) and judged by the pure rules of the `findings` module. The small parsers of the
//! kernel's text formats live here too, so they are tested without a machine.
//!
//! `None` always means "not known"; why it is not known is in [`Inventory::unreadable`] (a file
//! that exists but could not be read, or a file every kernel has that is missing) or
//! [`Inventory::invalid`] (a file whose content made no sense).
//!
//! ```
//! use latlab_core::inventory::{cmdline_params, Inventory};
//! let p = cmdline_params("quiet isolcpus=2-3 nohz_full=2-3 root=/dev/sda");
//! assert_eq!(p.get("isolcpus").map(String::as_str), Some("2-3"));
//! assert!(!p.contains_key("root"));
//! let inv = Inventory::default();
//! assert!(inv.preemption.model.is_none());
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::cpulist::parse_cpu_list;

/// Everything `latlab check` knows about a machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Inventory {
    pub kernel: Kernel,
    pub preemption: Preemption,
    /// The whole kernel command line.
    pub cmdline: Option<String>,
    /// The latency-relevant parameters of the command line (flags map to "").
    #[serde(default)]
    pub cmdline_params: BTreeMap<String, String>,
    pub clocksource: Clocksource,
    pub cpus: Cpus,
    /// Frequency scaling per CPU (empty: no cpufreq, e.g. in most VMs).
    #[serde(default)]
    pub cpufreq: BTreeMap<u32, CpuFreq>,
    /// `/sys/devices/system/cpu/cpufreq/boost` (or intel_pstate's `no_turbo`, inverted).
    pub boost: Option<bool>,
    pub cpuidle: Cpuidle,
    pub memory: Memory,
    pub sched: Sched,
    pub irqs: Irqs,
    pub virt: Virt,
    /// Processes holding `/dev/cpu_dma_latency` open (a PM QoS request keeps CPUs out of deep
    /// idle states while held).
    #[serde(default)]
    pub dma_latency_holders: Vec<Holder>,
    /// cgroup limits on the CPU time of the process that collected the inventory.
    #[serde(default)]
    pub cgroup: Vec<CgroupLimit>,
    pub tracing: Tracing,
    /// The machine's DMI identity (`/sys/class/dmi/id/`); absent without DMI (most ARM
    /// boards) and in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dmi_id: Option<DmiId>,
    /// The device tree's root node (`/proc/device-tree/`); absent without a device tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_tree: Option<DeviceTree>,
    /// Files that could not be read (absolute paths as on the machine).
    #[serde(default)]
    pub unreadable: Vec<String>,
    /// Files whose content could not be understood.
    #[serde(default)]
    pub invalid: Vec<Invalid>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Kernel {
    pub release: Option<String>,
    pub version: Option<String>,
    pub arch: Option<String>,
    pub hostname: Option<String>,
    /// Latency-relevant options of the kernel configuration (`/proc/config.gz` or
    /// `/boot/config-<release>`), e.g. `CONFIG_HZ` → `250`.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
}

/// How preemptible the kernel is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Preemption {
    /// `none`, `voluntary`, `full`, `lazy` or `rt`; `None` when it cannot be told.
    pub model: Option<String>,
    /// Built with PREEMPT_DYNAMIC (the model can be chosen at boot with `preempt=`).
    pub dynamic: bool,
    /// Where the model was read, for the evidence of findings.
    pub source: Option<String>,
    /// The dynamic mode `/sys/kernel/debug/sched/preempt` marks as current (`full`, `lazy`,
    /// `laziest` …), on PREEMPT_RT too, where it says how normal tasks are preempted (a
    /// PREEMPT_RT kernel with PREEMPT_LAZY shows `full (lazy) laziest`); None without debugfs.
    #[serde(default)]
    pub dynamic_mode: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Clocksource {
    pub current: Option<String>,
    #[serde(default)]
    pub available: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Cpus {
    #[serde(default)]
    pub online: Vec<u32>,
    #[serde(default)]
    pub possible: Vec<u32>,
    /// `/sys/devices/system/cpu/isolated` (isolcpus=).
    #[serde(default)]
    pub isolated: Vec<u32>,
    /// `/sys/devices/system/cpu/nohz_full` (`(null)`, the kernel's text without nohz_full=:
    /// none).
    #[serde(default)]
    pub nohz_full: Vec<u32>,
    pub model: Option<String>,
    /// `/sys/devices/system/cpu/smt/control`: on, off, forceoff, notsupported, notimplemented.
    pub smt_control: Option<String>,
    pub smt_active: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct CpuFreq {
    pub driver: Option<String>,
    pub governor: Option<String>,
    pub min_khz: Option<u64>,
    pub max_khz: Option<u64>,
    pub hw_max_khz: Option<u64>,
    /// intel_pstate/amd-pstate energy/performance preference.
    pub epp: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Cpuidle {
    pub driver: Option<String>,
    pub governor: Option<String>,
    /// States per CPU (empty: no cpuidle states, e.g. `idle=poll` or a VM without them).
    #[serde(default)]
    pub states: BTreeMap<u32, Vec<IdleState>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct IdleState {
    pub index: u32,
    pub name: String,
    /// Exit latency in microseconds (`latency`).
    pub latency_us: Option<u64>,
    pub residency_us: Option<u64>,
    /// False when `disable` is 1.
    pub enabled: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Memory {
    pub total_kb: Option<u64>,
    pub available_kb: Option<u64>,
    pub swap_total_kb: Option<u64>,
    pub swap_free_kb: Option<u64>,
    /// Active swap areas (first column of `/proc/swaps`).
    #[serde(default)]
    pub swaps: Vec<String>,
    pub swappiness: Option<u64>,
    /// THP `enabled`: always, madvise or never (the bracketed choice).
    pub thp_enabled: Option<String>,
    pub thp_defrag: Option<String>,
    /// KSM `run`: 0 stopped, 1 running, 2 unmerging.
    pub ksm_run: Option<u64>,
    #[serde(default)]
    pub numa_nodes: BTreeMap<u32, Vec<u32>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Sched {
    /// `sched_rt_runtime_us`: -1 means RT throttling is off.
    pub rt_runtime_us: Option<i64>,
    pub rt_period_us: Option<i64>,
    pub timer_migration: Option<bool>,
    pub nmi_watchdog: Option<bool>,
    pub autogroup: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Irqs {
    /// Whether an `irqbalance` process is running (`None`: /proc could not be scanned).
    pub irqbalance_running: Option<bool>,
    pub default_affinity: Option<String>,
    /// The busiest device IRQs, most interrupts first.
    #[serde(default)]
    pub busiest: Vec<IrqInfo>,
    /// Threaded IRQ handlers (`irq/N-name` kernel threads: every device IRQ on PREEMPT_RT,
    /// with `threadirqs`, or drivers' own threaded handlers), by pid.
    #[serde(default)]
    pub threads: Vec<IrqThread>,
}

/// One IRQ handler thread, from `/proc/PID/comm` and `stat`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct IrqThread {
    pub pid: u32,
    pub comm: String,
    /// N of `irq/N-…`.
    pub irq: Option<u32>,
    /// `fifo`, `rr`, `other`, `batch`, `idle`, `deadline` (stat's policy field).
    pub policy: Option<String>,
    /// The RT priority (1..99; 0 for a normal policy).
    pub rt_priority: Option<u32>,
}

/// A policy number of `/proc/PID/stat` (field 41) as a name.
pub fn policy_name(n: u32) -> &'static str {
    match n {
        0 => "other",
        1 => "fifo",
        2 => "rr",
        3 => "batch",
        5 => "idle",
        6 => "deadline",
        _ => "unknown",
    }
}

/// `(policy, rt_priority)` from a `/proc/PID/stat` line (fields 41 and 40, counted after the
/// comm's closing parenthesis, since a comm may hold blanks and parentheses).
pub fn stat_policy(stat: &str) -> Option<(u32, u32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): field N is f[N - 3].
    Some((f.get(38)?.parse().ok()?, f.get(37)?.parse().ok()?))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct IrqInfo {
    pub irq: u32,
    pub name: String,
    pub count: u64,
    pub affinity: Option<String>,
    pub effective_affinity: Option<String>,
}

/// `/sys/class/dmi/id/`'s world-readable identity files (the serial numbers are left out).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct DmiId {
    pub sys_vendor: Option<String>,
    pub product_name: Option<String>,
    pub product_version: Option<String>,
    pub board_vendor: Option<String>,
    pub board_name: Option<String>,
    pub bios_vendor: Option<String>,
    pub bios_version: Option<String>,
    pub bios_date: Option<String>,
}

/// The device tree's root node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct DeviceTree {
    /// `compatible`'s NUL-separated strings, in order (most specific first).
    #[serde(default)]
    pub compatible: Vec<String>,
    /// `model`, when present.
    pub model: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Virt {
    /// The `hypervisor` CPU flag in `/proc/cpuinfo`.
    pub hypervisor: Option<bool>,
    /// `/sys/class/dmi/id/sys_vendor` or `/sys/hypervisor/type`, when present.
    pub vendor: Option<String>,
    /// Steal time since boot, as a fraction of all CPU time in `/proc/stat`.
    pub steal_since_boot: Option<f64>,
    /// Steal time sampled over [`Virt::steal_sample_ms`] (live machines only).
    pub steal_sampled: Option<f64>,
    pub steal_sample_ms: Option<u64>,
    /// A virtio balloon that negotiated free page reporting (`VIRTIO_BALLOON_F_REPORTING`,
    /// feature bit 5 in `/sys/bus/virtio/devices/*/features`): the guest hands free memory
    /// back to the host. None without a balloon device.
    #[serde(default)]
    pub page_reporting: Option<bool>,
    /// `/sys/module/page_reporting/parameters/page_reporting_order`: free blocks of
    /// 2^order pages are reported. None when the kernel shows -1 (no reporting device has
    /// registered) or has no such parameter.
    #[serde(default)]
    pub page_reporting_order: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Holder {
    pub pid: u32,
    pub comm: String,
}

/// One cgroup control file on the path from the process's cgroup to the root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct CgroupLimit {
    /// The file, e.g. `/sys/fs/cgroup/cpu/latlab/cpu.cfs_quota_us`.
    pub path: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Tracing {
    /// Where tracefs is mounted, if it is.
    pub tracefs: Option<String>,
    /// The kernel supports tracefs (`/proc/filesystems`), mounted or not.
    pub supported: Option<bool>,
    #[serde(default)]
    pub tracers: Vec<String>,
    /// Events latlab uses for spike attribution: `sys/event` → present.
    #[serde(default)]
    pub events: BTreeMap<String, bool>,
    pub timerlat: Option<bool>,
    pub osnoise: Option<bool>,
    /// The osnoise tracer can spin with interrupts disabled (`OSNOISE_IRQ_DISABLE` in
    /// `osnoise/options`): `latlab run --backend hwnoise`, as `rtla hwnoise`.
    #[serde(default)]
    pub hwnoise: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Invalid {
    pub path: String,
    pub value: String,
    pub expected: String,
}

/// The tracepoints latlab's spike attribution reads.
pub const TRACE_EVENTS: &[&str] = &[
    "sched/sched_switch",
    "sched/sched_waking",
    "irq/irq_handler_entry",
    "irq/softirq_entry",
    "irq_vectors/local_timer_entry",
    "timer/hrtimer_expire_entry",
    "ftrace/print",
];

/// Command-line parameters that matter for latency (exact names, or prefixes ending in '.').
pub const LATENCY_PARAMS: &[&str] = &[
    "preempt",
    "isolcpus",
    "nohz_full",
    "nohz",
    "rcu_nocbs",
    "rcu_nocb_poll",
    "irqaffinity",
    "idle",
    "processor.max_cstate",
    "intel_idle.max_cstate",
    "intel_pstate",
    "amd_pstate",
    "cpuidle.off",
    "threadirqs",
    "skew_tick",
    "mitigations",
    "nosmt",
    "nosoftlockup",
    "nowatchdog",
    "nmi_watchdog",
    "tsc",
    "clocksource",
    "transparent_hugepage",
    "hugepages",
    "kthread_cpus",
    "housekeeping",
    "rcupdate.rcu_normal_after_boot",
    "rcupdate.rcu_expedited",
    "rcutree.kthread_prio",
    "audit",
    "quiet",
];

/// The latency-relevant parameters of a kernel command line. Everything after a lone `--`
/// belongs to init and is ignored. Flags without `=` map to "".
pub fn cmdline_params(cmdline: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for word in cmdline.split_whitespace() {
        if word == "--" {
            break;
        }
        let (k, v) = word.split_once('=').unwrap_or((word, ""));
        if LATENCY_PARAMS.contains(&k) && k != "quiet" {
            out.insert(k.to_string(), v.to_string());
        }
    }
    out
}

/// The CPUs of an `isolcpus=` or `nohz_full=` value, skipping flags such as
/// `managed_irq,domain,`.
pub fn param_cpus(value: &str) -> Option<Vec<u32>> {
    let list: Vec<&str> = value
        .split(',')
        .filter(|p| p.starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    parse_cpu_list(&list.join(",")).ok()
}

/// The bracketed choice in files like THP's `enabled` (`always [madvise] never`), or the whole
/// trimmed content when there is no bracket (`none`).
pub fn bracketed(content: &str) -> Option<String> {
    let t = content.trim();
    match (t.find('['), t.find(']')) {
        (Some(a), Some(b)) if a < b => Some(t[a + 1..b].trim().to_string()),
        (None, None) if !t.is_empty() && !t.contains(char::is_whitespace) => Some(t.to_string()),
        _ => None,
    }
}

/// The mode in `/sys/kernel/debug/sched/preempt`: older kernels bracket it (`none
/// voluntary (full)`), with parentheses; accept both.
pub fn preempt_mode(content: &str) -> Option<String> {
    let t = content.trim();
    for (o, c) in [('(', ')'), ('[', ']')] {
        if let (Some(a), Some(b)) = (t.find(o), t.find(c)) {
            if a < b {
                return Some(t[a + 1..b].trim().to_string());
            }
        }
    }
    None
}

/// The preemption model from the `uname -v` string alone: `PREEMPT_RT` is certain; `PREEMPT`
/// alone is full; `PREEMPT_LAZY` is lazy; PREEMPT_DYNAMIC says only that it is chosen at boot.
pub fn version_preemption(version: &str) -> (Option<&'static str>, bool) {
    let words: Vec<&str> = version.split_whitespace().collect();
    let dynamic = words.contains(&"PREEMPT_DYNAMIC");
    let model = if words.contains(&"PREEMPT_RT") {
        Some("rt")
    } else if words.contains(&"PREEMPT_LAZY") {
        Some("lazy")
    } else if words.contains(&"PREEMPT") && !dynamic {
        Some("full")
    } else {
        None
    };
    (model, dynamic)
}

/// The default preemption model a kernel configuration selects.
pub fn config_preemption(config: &BTreeMap<String, String>) -> Option<&'static str> {
    let on = |k: &str| config.get(k).is_some_and(|v| v == "y");
    if on("CONFIG_PREEMPT_RT") {
        Some("rt")
    } else if on("CONFIG_PREEMPT_LAZY") {
        Some("lazy")
    } else if on("CONFIG_PREEMPT") {
        Some("full")
    } else if on("CONFIG_PREEMPT_VOLUNTARY") {
        Some("voluntary")
    } else if on("CONFIG_PREEMPT_NONE") {
        Some("none")
    } else {
        None
    }
}

/// The configuration options kept in [`Kernel::config`].
pub fn config_relevant(key: &str) -> bool {
    key.starts_with("CONFIG_PREEMPT")
        || key.starts_with("CONFIG_HZ")
        || key.starts_with("CONFIG_NO_HZ")
        || key.starts_with("CONFIG_RCU_NOCB")
        || key.starts_with("CONFIG_RCU_BOOST")
        || key == "CONFIG_IRQ_FORCED_THREADING"
        || key == "CONFIG_CPU_IDLE"
        || key == "CONFIG_CPU_FREQ"
        || key == "CONFIG_TRANSPARENT_HUGEPAGE"
        || key == "CONFIG_TIMERLAT_TRACER"
        || key == "CONFIG_OSNOISE_TRACER"
        || key == "CONFIG_FTRACE"
}

/// Parse the `KEY=value` lines of a kernel configuration, keeping the relevant ones.
pub fn parse_config(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| config_relevant(k))
        .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
        .collect()
}

/// CPU time counters of the `cpu` line of `/proc/stat` (ticks): (steal, total).
pub fn stat_steal(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let nums: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|w| w.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is
    // already counted in user/nice.
    let steal = *nums.get(7)?;
    let total = nums.iter().take(8).sum();
    Some((steal, total))
}

/// Each CPU's steal time in `/proc/stat` (its `cpuN` lines; ticks of 1/USER_HZ), as
/// (cpu, steal). A line without the steal column (kernels before 2.6.11) or with a word
/// that is not a number is left out.
pub fn stat_steal_per_cpu(stat: &str) -> Vec<(u32, u64)> {
    stat.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let cpu = w.next()?.strip_prefix("cpu")?.parse().ok()?;
            let steal = w.nth(7)?.parse().ok()?;
            Some((cpu, steal))
        })
        .collect()
}

/// The busiest device IRQs in `/proc/interrupts` (numbered lines only), most first.
pub fn busiest_irqs(interrupts: &str, n: usize) -> Vec<IrqInfo> {
    let mut lines = interrupts.lines();
    let ncpu = lines
        .next()
        .map(|h| h.split_whitespace().count())
        .unwrap_or(0);
    let mut out: Vec<IrqInfo> = lines
        .filter_map(|l| {
            let (irq, rest) = l.trim_start().split_once(':')?;
            let irq: u32 = irq.trim().parse().ok()?;
            let mut words = rest.split_whitespace();
            let mut count = 0u64;
            for _ in 0..ncpu {
                count = count.saturating_add(words.next()?.parse::<u64>().ok()?);
            }
            let name = words.last().unwrap_or("").to_string();
            Some(IrqInfo {
                irq,
                name,
                count,
                affinity: None,
                effective_affinity: None,
            })
        })
        .filter(|i| i.count > 0)
        .collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then(a.irq.cmp(&b.irq)));
    out.truncate(n);
    out
}

/// A value of `/proc/meminfo` in kB.
pub fn meminfo_kb(meminfo: &str, key: &str) -> Option<u64> {
    meminfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k == key).then(|| v.split_whitespace().next()?.parse().ok())?
    })
}

impl Inventory {
    /// Enabled idle states whose exit latency is above `us`, over all CPUs: (state name,
    /// worst exit latency, CPUs).
    pub fn deep_idle_states(&self, us: u64) -> Vec<(String, u64, Vec<u32>)> {
        let mut by: BTreeMap<String, (u64, Vec<u32>)> = BTreeMap::new();
        for (cpu, states) in &self.cpuidle.states {
            for s in states {
                if let Some(l) = s.latency_us.filter(|l| s.enabled && *l > us) {
                    let e = by.entry(s.name.clone()).or_default();
                    e.0 = e.0.max(l);
                    e.1.push(*cpu);
                }
            }
        }
        let mut v: Vec<_> = by.into_iter().map(|(n, (l, c))| (n, l, c)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    /// CPUs isolated by any means (isolcpus=, nohz_full=, or the sysfs files).
    pub fn isolated_cpus(&self) -> Vec<u32> {
        let mut v = self.cpus.isolated.clone();
        v.extend(&self.cpus.nohz_full);
        for k in ["isolcpus", "nohz_full"] {
            if let Some(c) = self.cmdline_params.get(k).and_then(|v| param_cpus(v)) {
                v.extend(c);
            }
        }
        v.sort_unstable();
        v.dedup();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/proc/PID/stat` of an IRQ thread (6.12-rt): policy 1 (fifo), RT priority 50; a comm
    /// with blanks and parentheses does not shift the fields.
    #[test]
    fn stat_policy_reads_fields_after_the_comm() {
        let tail = "S 2 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 -51 0 1 0 35 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 1 50 1 0 0 0 0 0 0 0 0 0 0 0";
        assert_eq!(
            stat_policy(&format!("151 (irq/4-ttyS0) {tail}")),
            Some((1, 50))
        );
        assert_eq!(stat_policy(&format!("9 (a) b (c) {tail}")), Some((1, 50)));
        assert_eq!(stat_policy("9 (short) S 1"), None);
        assert_eq!(policy_name(1), "fifo");
    }

    #[test]
    fn cmdline_stops_at_init_args_and_keeps_flags() {
        let p = cmdline_params(
            "BOOT_IMAGE=/vmlinuz threadirqs isolcpus=managed_irq,domain,2-3 idle=poll -- nosmt",
        );
        assert_eq!(p.get("threadirqs").map(String::as_str), Some(""));
        assert_eq!(p["isolcpus"], "managed_irq,domain,2-3");
        assert_eq!(p["idle"], "poll");
        assert!(!p.contains_key("nosmt"), "after -- belongs to init");
        assert!(!p.contains_key("BOOT_IMAGE"));
        assert_eq!(param_cpus(&p["isolcpus"]), Some(vec![2, 3]));
        assert_eq!(param_cpus("x,y"), Some(vec![]));
    }

    #[test]
    fn bracket_and_preempt_formats() {
        assert_eq!(
            bracketed("always [madvise] never\n").as_deref(),
            Some("madvise")
        );
        assert_eq!(bracketed("none\n").as_deref(), Some("none"));
        assert_eq!(bracketed("a b c"), None);
        assert_eq!(
            preempt_mode("none voluntary (full) lazy\n").as_deref(),
            Some("full")
        );
        assert_eq!(
            preempt_mode("(none) voluntary full").as_deref(),
            Some("none")
        );
        assert_eq!(preempt_mode("garbage"), None);
        assert_eq!(
            version_preemption("#1 SMP PREEMPT_DYNAMIC @0"),
            (None, true)
        );
        assert_eq!(
            version_preemption("#1 SMP PREEMPT_RT Tue"),
            (Some("rt"), false)
        );
        assert_eq!(
            version_preemption("#1 SMP PREEMPT Tue"),
            (Some("full"), false)
        );
        assert_eq!(version_preemption("#1 SMP Tue"), (None, false));
    }

    #[test]
    fn config_default_model() {
        let c = parse_config("# c\nCONFIG_PREEMPT_NONE=y\nCONFIG_HZ=250\nCONFIG_FOO=y\n");
        assert_eq!(config_preemption(&c), Some("none"));
        assert_eq!(c.get("CONFIG_HZ").map(String::as_str), Some("250"));
        assert!(!c.contains_key("CONFIG_FOO"));
        let c = parse_config("CONFIG_PREEMPT_RT=y\nCONFIG_PREEMPT=y\n");
        assert_eq!(config_preemption(&c), Some("rt"));
    }

    #[test]
    fn steal_and_irqs() {
        let stat = "cpu  100 0 50 800 10 0 5 35 7 0\ncpu0 1 2 3\n";
        assert_eq!(stat_steal(stat), Some((35, 1000)));
        assert_eq!(stat_steal("cpu  x y\n"), None);
        let per_cpu = "cpu  1 2 3 4 5 6 7 35 0 0\ncpu0 1 1 1 1 1 1 1 20 0 0\ncpu3 1 1 1 1 1 1 1 15\ncpu7 1 1 1\ncpux 1 1 1 1 1 1 1 9\nintr 5 6\n";
        assert_eq!(stat_steal_per_cpu(per_cpu), vec![(0, 20), (3, 15)]);
        let irq = "           CPU0       CPU1\n 24:  1  0  IO-APIC 5-edge ACPI:Ged\n 36: 0 54493 PCI-MSIX 1-edge virtio1-req.0\n 40: 0 0 PCI x\nLOC: 5 6 Local timer\n";
        let b = busiest_irqs(irq, 5);
        assert_eq!(b.len(), 2);
        assert_eq!(
            (b[0].irq, b[0].count, b[0].name.as_str()),
            (36, 54493, "virtio1-req.0")
        );
    }

    #[test]
    fn deep_states_only_enabled_ones() {
        let mut inv = Inventory::default();
        let st = |i, n: &str, l, e| IdleState {
            index: i,
            name: n.into(),
            latency_us: Some(l),
            residency_us: None,
            enabled: e,
        };
        inv.cpuidle
            .states
            .insert(0, vec![st(0, "POLL", 0, true), st(1, "C6", 133, true)]);
        inv.cpuidle
            .states
            .insert(1, vec![st(0, "POLL", 0, true), st(1, "C6", 133, false)]);
        assert_eq!(
            inv.deep_idle_states(10),
            vec![("C6".to_string(), 133, vec![0])]
        );
        assert_eq!(
            meminfo_kb("MemTotal:  123 kB\nSwapTotal: 0 kB\n", "SwapTotal"),
            Some(0)
        );
    }
}
