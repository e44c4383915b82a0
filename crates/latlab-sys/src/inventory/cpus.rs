//! The CPUs: online, isolated and nohz_full ones, SMT, the clocksource and model, and each
//! CPU's frequency scaling and idle states.

use latlab_core::inventory::*;

use super::reader::{Need::*, Reader};

impl Reader {
    pub(super) fn cpus(&mut self, out: &mut Inventory) {
        let c = &mut out.cpus;
        let base = "sys/devices/system/cpu";
        c.online = self
            .cpulist(&format!("{base}/online"), Required)
            .unwrap_or_default();
        c.possible = self
            .cpulist(&format!("{base}/possible"), Optional)
            .unwrap_or_default();
        c.isolated = self
            .cpulist(&format!("{base}/isolated"), Optional)
            .unwrap_or_default();
        // Without nohz_full= the kernel prints its never-allocated mask as `(null)` (Debian's
        // 6.12 PREEMPT_RT): no CPU.
        c.nohz_full = match self.read(&format!("{base}/nohz_full"), Optional) {
            Some(s) if s.trim() == "(null)" => vec![],
            Some(s) => self.parse_cpulist(&format!("{base}/nohz_full"), &s),
            None => vec![],
        };
        c.smt_control = self.line(&format!("{base}/smt/control"), Optional);
        c.smt_active = self.flag(&format!("{base}/smt/active"), Optional);
        out.clocksource.current = self.line(
            "sys/devices/system/clocksource/clocksource0/current_clocksource",
            Required,
        );
        out.clocksource.available = self
            .read(
                "sys/devices/system/clocksource/clocksource0/available_clocksource",
                Optional,
            )
            .map(|s| s.split_whitespace().map(String::from).collect())
            .unwrap_or_default();
        if let Some(ci) = self.read("proc/cpuinfo", Required) {
            let field = |k: &str| {
                ci.lines().find_map(|l| {
                    let (a, b) = l.split_once(':')?;
                    (a.trim() == k).then(|| b.trim().to_string())
                })
            };
            out.cpus.model = field("model name")
                .or_else(|| field("Model"))
                .or_else(|| field("cpu model"));
            // x86 lists CPU flags; other architectures have no hypervisor flag there.
            out.virt.hypervisor =
                field("flags").map(|f| f.split_whitespace().any(|w| w == "hypervisor"));
        }
    }

    pub(super) fn cpufreq(&mut self, out: &mut Inventory) {
        for cpu in out.cpus.online.clone() {
            let d = format!("sys/devices/system/cpu/cpu{cpu}/cpufreq");
            if !self.exists(&d) {
                continue;
            }
            let f = CpuFreq {
                driver: self.line(&format!("{d}/scaling_driver"), Optional),
                governor: self.line(&format!("{d}/scaling_governor"), Required),
                min_khz: self.num(&format!("{d}/scaling_min_freq"), Optional),
                max_khz: self.num(&format!("{d}/scaling_max_freq"), Optional),
                hw_max_khz: self.num(&format!("{d}/cpuinfo_max_freq"), Optional),
                epp: self.line(&format!("{d}/energy_performance_preference"), Optional),
            };
            out.cpufreq.insert(cpu, f);
        }
        out.boost = self
            .flag("sys/devices/system/cpu/cpufreq/boost", Optional)
            .or_else(|| {
                self.flag("sys/devices/system/cpu/intel_pstate/no_turbo", Optional)
                    .map(|nt| !nt)
            });
    }

    pub(super) fn cpuidle(&mut self, out: &mut Inventory) {
        let base = "sys/devices/system/cpu/cpuidle";
        out.cpuidle.driver = self.line(&format!("{base}/current_driver"), Optional);
        out.cpuidle.governor = self
            .line(&format!("{base}/current_governor"), Optional)
            .or_else(|| self.line(&format!("{base}/current_governor_ro"), Optional));
        for cpu in out.cpus.online.clone() {
            let mut states = Vec::new();
            for i in 0..32u32 {
                let d = format!("sys/devices/system/cpu/cpu{cpu}/cpuidle/state{i}");
                if !self.exists(&d) {
                    break;
                }
                let disabled = self.flag(&format!("{d}/disable"), Optional);
                states.push(IdleState {
                    index: i,
                    name: self
                        .line(&format!("{d}/name"), Required)
                        .unwrap_or_else(|| format!("state{i}")),
                    latency_us: self.num(&format!("{d}/latency"), Required),
                    residency_us: self.num(&format!("{d}/residency"), Optional),
                    enabled: disabled != Some(true),
                });
            }
            if !states.is_empty() {
                out.cpuidle.states.insert(cpu, states);
            }
        }
    }
}
