//! The kernel: release, version, command line and configuration, the preemption model,
//! the scheduler's knobs, and what tracing it offers.

use latlab_core::inventory::{self as inv, *};

use super::reader::{Need::*, Reader};

impl Reader {
    pub(super) fn kernel(&mut self, out: &mut Inventory) {
        let k = &mut out.kernel;
        k.release = self.line("proc/sys/kernel/osrelease", Required);
        k.version = self.line("proc/sys/kernel/version", Required);
        k.arch = self
            .line("proc/sys/kernel/arch", Optional)
            .or_else(|| self.live.then(|| std::env::consts::ARCH.to_string()));
        k.hostname = self.line("proc/sys/kernel/hostname", Optional);
        k.config = self.config(k.release.clone());
        out.cmdline = self
            .read("proc/cmdline", Required)
            .map(|s| s.trim().to_string());
        out.cmdline_params = out
            .cmdline
            .as_deref()
            .map(cmdline_params)
            .unwrap_or_default();
    }

    /// The relevant part of the kernel configuration: `/proc/config.gz` (through `gzip -dc`,
    /// to keep the dependency tree small) or `/boot/config-<release>`.
    pub(super) fn config(
        &mut self,
        release: Option<String>,
    ) -> std::collections::BTreeMap<String, String> {
        let gz = self.path("proc/config.gz");
        if gz.exists() {
            let out = std::process::Command::new("gzip")
                .arg("-dc")
                .arg(&gz)
                .stderr(std::process::Stdio::null())
                .output();
            if let Some(o) = out.ok().filter(|o| o.status.success()) {
                return parse_config(&String::from_utf8_lossy(&o.stdout));
            }
            self.unreadable.insert("/proc/config.gz".into());
        }
        release
            .and_then(|r| self.read(&format!("boot/config-{r}"), Optional))
            .map(|t| parse_config(&t))
            .unwrap_or_default()
    }

    pub(super) fn preemption(&mut self, out: &mut Inventory) {
        let version = out.kernel.version.clone().unwrap_or_default();
        let (vmodel, dynamic) = version_preemption(&version);
        let cfg = config_preemption(&out.kernel.config);
        let dynamic = dynamic
            || out
                .kernel
                .config
                .get("CONFIG_PREEMPT_DYNAMIC")
                .is_some_and(|v| v == "y");
        // The dynamic mode, where debugfs shows it (on PREEMPT_RT too: its lazy mode).
        let rel = "sys/kernel/debug/sched/preempt";
        let mode = if self.exists(rel) {
            self.read(rel, Optional).and_then(|s| preempt_mode(&s))
        } else {
            None
        };
        let p = &mut out.preemption;
        p.dynamic = dynamic;
        p.dynamic_mode = mode;
        let set = |p: &mut Preemption, m: &str, src: &str| {
            p.model = Some(m.to_string());
            p.source = Some(src.to_string());
        };
        if self.flag("sys/kernel/realtime", Optional) == Some(true) {
            return set(p, "rt", "/sys/kernel/realtime");
        }
        if vmodel == Some("rt") {
            return set(p, "rt", "PREEMPT_RT in the kernel version");
        }
        if dynamic {
            let rel = "sys/kernel/debug/sched/preempt";
            // debugfs is often unmounted: only a file that exists and cannot be read matters.
            if let Some(s) = self.read(rel, Optional) {
                match preempt_mode(&s) {
                    Some(m) => return set(p, &m, "/sys/kernel/debug/sched/preempt"),
                    None => self.bad(rel, s.trim(), "modes with the current one in parentheses"),
                }
            }
            if let Some(m) = out.cmdline_params.get("preempt").filter(|m| !m.is_empty()) {
                let m = m.clone();
                return set(p, &m, "preempt= on /proc/cmdline");
            }
        }
        if let Some(m) = vmodel {
            return set(p, m, "the kernel version string");
        }
        if let Some(m) = cfg {
            let src = if dynamic {
                "the kernel config default (PREEMPT_DYNAMIC, no preempt= given)"
            } else {
                "the kernel config"
            };
            set(p, m, src);
        }
    }

    pub(super) fn sched(&mut self, out: &mut Inventory) {
        let s = &mut out.sched;
        s.rt_runtime_us = self.num("proc/sys/kernel/sched_rt_runtime_us", Required);
        s.rt_period_us = self.num("proc/sys/kernel/sched_rt_period_us", Required);
        s.timer_migration = self.flag("proc/sys/kernel/timer_migration", Optional);
        s.nmi_watchdog = self.flag("proc/sys/kernel/nmi_watchdog", Optional);
        s.autogroup = self.flag("proc/sys/kernel/sched_autogroup_enabled", Optional);
    }

    pub(super) fn tracing(&mut self, out: &mut Inventory) {
        let t = &mut out.tracing;
        t.supported = self.read("proc/filesystems", Optional).map(|s| {
            s.lines()
                .any(|l| l.split_whitespace().last() == Some("tracefs"))
        });
        let dir = ["sys/kernel/tracing", "sys/kernel/debug/tracing"]
            .into_iter()
            .find(|d| self.exists(&format!("{d}/available_tracers")));
        let Some(dir) = dir else { return };
        t.tracefs = Some(format!("/{dir}"));
        t.tracers = self
            .read(&format!("{dir}/available_tracers"), Required)
            .map(|s| s.split_whitespace().map(String::from).collect())
            .unwrap_or_default();
        let tr = t.tracers.clone();
        t.timerlat = Some(tr.iter().any(|x| x == "timerlat"));
        t.osnoise = Some(tr.iter().any(|x| x == "osnoise"));
        if t.osnoise == Some(true) {
            t.hwnoise = self
                .read(&format!("{dir}/osnoise/options"), Optional)
                .map(|s| crate::osnoise::has_irqs_off(&s));
        }
        for e in inv::TRACE_EVENTS {
            let present = self.exists(&format!("{dir}/events/{e}"));
            out.tracing.events.insert(e.to_string(), present);
        }
    }
}
