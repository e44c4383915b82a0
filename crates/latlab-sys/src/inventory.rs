//! Machine inventory readers: fill a [`latlab_core::inventory::Inventory`] from `/proc` and
//! `/sys` below an injectable root, so tests and `latlab check --root DIR` read fixture trees.
//!
//! Reading never fails as a whole: a file that exists but cannot be read (permission, I/O
//! error), or a file every kernel has that is missing, goes into `Inventory::unreadable`;
//! optional files (no cpufreq in a VM, no `/sys/kernel/realtime` on a non-RT kernel) are
//! simply absent; a value that does not parse goes into `Inventory::invalid` with what was
//! expected. Nothing here writes: in particular `/dev/cpu_dma_latency` is never opened
//! (opening it adds a PM QoS request); its holders are found through `/proc/*/fd`.
//!
//! ```no_run
//! let inv = latlab_sys::inventory::collect(std::path::Path::new("/"));
//! let machine = latlab_sys::inventory::machine(&inv);
//! println!("{:?}", machine.preemption);
//! ```

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use latlab_core::cpulist::parse_cpu_list;
use latlab_core::inventory::{self as inv, *};
use latlab_core::record::Machine;

/// What [`collect_with`] does besides reading files.
#[derive(Debug, Clone)]
pub struct Options {
    /// Sample `/proc/stat` twice this far apart for the current steal time (None: only the
    /// since-boot share, e.g. for fixture trees).
    pub steal_sample: Option<Duration>,
}

impl Options {
    /// Live machines (root `/`) sample steal over a second; other roots do not sample.
    pub fn for_root(root: &Path) -> Options {
        Options {
            steal_sample: (root == Path::new("/")).then(|| Duration::from_secs(1)),
        }
    }
}

/// The inventory of the machine whose `/proc` and `/sys` are below `root` (`/` normally).
pub fn collect(root: &Path) -> Inventory {
    collect_with(root, &Options::for_root(root))
}

pub fn collect_with(root: &Path, opts: &Options) -> Inventory {
    let mut r = Reader {
        root: root.to_path_buf(),
        live: root == Path::new("/"),
        unreadable: BTreeSet::new(),
        invalid: Vec::new(),
    };
    let mut out = Inventory::default();
    r.kernel(&mut out);
    r.preemption(&mut out);
    r.cpus(&mut out);
    r.cpufreq(&mut out);
    r.cpuidle(&mut out);
    r.memory(&mut out);
    r.sched(&mut out);
    r.irqs(&mut out);
    r.processes(&mut out);
    r.virt(&mut out, opts);
    r.cgroup(&mut out);
    r.tracing(&mut out);
    out.unreadable = r.unreadable.into_iter().collect();
    out.invalid = r.invalid;
    out
}

/// The basics every run records, from an inventory.
pub fn machine(inv: &Inventory) -> Machine {
    Machine {
        hostname: inv.kernel.hostname.clone(),
        kernel_release: inv.kernel.release.clone(),
        kernel_version: inv.kernel.version.clone(),
        arch: inv.kernel.arch.clone(),
        cpus_online: inv.cpus.online.clone(),
        cpu_model: inv.cpus.model.clone(),
        preemption: inv.preemption.model.clone(),
        cmdline: inv.cmdline.clone(),
        virtualized: inv.virt.hypervisor,
    }
}

struct Reader {
    root: PathBuf,
    live: bool,
    unreadable: BTreeSet<String>,
    invalid: Vec<Invalid>,
}

/// How much a missing file matters.
#[derive(Clone, Copy, PartialEq)]
enum Need {
    /// Every Linux kernel has it: missing is reported.
    Required,
    /// Absent on some kernels or machines: missing is silent.
    Optional,
}
use Need::*;

impl Reader {
    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn exists(&self, rel: &str) -> bool {
        self.path(rel).exists()
    }

    /// The file's text; None (and a note in `unreadable` when it matters) when it cannot be read.
    fn read(&mut self, rel: &str, need: Need) -> Option<String> {
        match fs::read(self.path(rel)) {
            Ok(b) => Some(String::from_utf8_lossy(&b).into_owned()),
            Err(e) if e.kind() == io::ErrorKind::NotFound && need == Optional => None,
            Err(_) => {
                self.unreadable.insert(format!("/{rel}"));
                None
            }
        }
    }

    /// The trimmed first line, or None when empty.
    fn line(&mut self, rel: &str, need: Need) -> Option<String> {
        let s = self.read(rel, need)?;
        let l = s.lines().next().unwrap_or("").trim().to_string();
        (!l.is_empty()).then_some(l)
    }

    fn bad(&mut self, rel: &str, value: &str, expected: &str) {
        // One finding per file: its id is `invalid:<path>`.
        if self.invalid.iter().any(|i| i.path[1..] == *rel) {
            return;
        }
        self.invalid.push(Invalid {
            path: format!("/{rel}"),
            value: value.chars().take(80).collect(),
            expected: expected.into(),
        });
    }

    fn num<T: FromStr>(&mut self, rel: &str, need: Need) -> Option<T> {
        let s = self.read(rel, need)?;
        match s.trim().parse() {
            Ok(v) => Some(v),
            Err(_) => {
                self.bad(rel, s.trim(), "a number");
                None
            }
        }
    }

    fn flag(&mut self, rel: &str, need: Need) -> Option<bool> {
        match self.num::<i64>(rel, need)? {
            0 => Some(false),
            1 => Some(true),
            v => {
                self.bad(rel, &v.to_string(), "0 or 1");
                None
            }
        }
    }

    fn cpulist(&mut self, rel: &str, need: Need) -> Option<Vec<u32>> {
        let s = self.read(rel, need)?;
        Some(self.parse_cpulist(rel, &s))
    }

    /// The CPUs of a CPU-list file's text; none (and a note in `invalid`) when it is not one.
    fn parse_cpulist(&mut self, rel: &str, s: &str) -> Vec<u32> {
        parse_cpu_list(s.trim()).unwrap_or_else(|_| {
            self.bad(rel, s.trim(), "a CPU list such as 0-3,6");
            vec![]
        })
    }

    fn kernel(&mut self, out: &mut Inventory) {
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
    fn config(&mut self, release: Option<String>) -> std::collections::BTreeMap<String, String> {
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

    fn preemption(&mut self, out: &mut Inventory) {
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

    fn cpus(&mut self, out: &mut Inventory) {
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

    fn cpufreq(&mut self, out: &mut Inventory) {
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

    fn cpuidle(&mut self, out: &mut Inventory) {
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

    fn memory(&mut self, out: &mut Inventory) {
        let m = &mut out.memory;
        if let Some(mi) = self.read("proc/meminfo", Required) {
            m.total_kb = meminfo_kb(&mi, "MemTotal");
            m.available_kb = meminfo_kb(&mi, "MemAvailable");
            m.swap_total_kb = meminfo_kb(&mi, "SwapTotal");
            m.swap_free_kb = meminfo_kb(&mi, "SwapFree");
            if m.total_kb.is_none() {
                self.bad(
                    "proc/meminfo",
                    mi.lines().next().unwrap_or(""),
                    "MemTotal: N kB",
                );
            }
        }
        if let Some(sw) = self.read("proc/swaps", Optional) {
            m.swaps = sw
                .lines()
                .skip(1)
                .filter_map(|l| l.split_whitespace().next().map(String::from))
                .collect();
        }
        m.swappiness = self.num("proc/sys/vm/swappiness", Optional);
        for (rel, slot) in [
            (
                "sys/kernel/mm/transparent_hugepage/enabled",
                &mut m.thp_enabled,
            ),
            (
                "sys/kernel/mm/transparent_hugepage/defrag",
                &mut m.thp_defrag,
            ),
        ] {
            if let Some(s) = self.read(rel, Optional) {
                *slot = bracketed(&s);
                if slot.is_none() {
                    self.bad(rel, s.trim(), "choices with the current one in brackets");
                }
            }
        }
        m.ksm_run = self.num("sys/kernel/mm/ksm/run", Optional);
        if let Ok(rd) = fs::read_dir(self.path("sys/devices/system/node")) {
            let mut nodes: Vec<u32> = rd
                .filter_map(|e| {
                    e.ok()?
                        .file_name()
                        .to_str()?
                        .strip_prefix("node")?
                        .parse()
                        .ok()
                })
                .collect();
            nodes.sort_unstable();
            for n in nodes {
                let cpus = self
                    .cpulist(
                        &format!("sys/devices/system/node/node{n}/cpulist"),
                        Optional,
                    )
                    .unwrap_or_default();
                out.memory.numa_nodes.insert(n, cpus);
            }
        }
    }

    fn sched(&mut self, out: &mut Inventory) {
        let s = &mut out.sched;
        s.rt_runtime_us = self.num("proc/sys/kernel/sched_rt_runtime_us", Required);
        s.rt_period_us = self.num("proc/sys/kernel/sched_rt_period_us", Required);
        s.timer_migration = self.flag("proc/sys/kernel/timer_migration", Optional);
        s.nmi_watchdog = self.flag("proc/sys/kernel/nmi_watchdog", Optional);
        s.autogroup = self.flag("proc/sys/kernel/sched_autogroup_enabled", Optional);
    }

    fn irqs(&mut self, out: &mut Inventory) {
        out.irqs.default_affinity = self.line("proc/irq/default_smp_affinity", Optional);
        let Some(text) = self.read("proc/interrupts", Required) else {
            return;
        };
        let mut busiest = busiest_irqs(&text, 5);
        if busiest.is_empty()
            && !text.trim().is_empty()
            && !text.lines().skip(1).any(|l| l.contains("LOC"))
        {
            self.bad(
                "proc/interrupts",
                text.lines().nth(1).unwrap_or(""),
                "IRQ lines with one count per CPU",
            );
        }
        for i in &mut busiest {
            i.affinity = self.line(&format!("proc/irq/{}/smp_affinity_list", i.irq), Optional);
            i.effective_affinity = self.line(
                &format!("proc/irq/{}/effective_affinity_list", i.irq),
                Optional,
            );
        }
        out.irqs.busiest = busiest;
    }

    /// One pass over `/proc/<pid>`: irqbalance, and holders of `/dev/cpu_dma_latency`.
    fn processes(&mut self, out: &mut Inventory) {
        let Ok(rd) = fs::read_dir(self.path("proc")) else {
            self.unreadable.insert("/proc".into());
            return;
        };
        let mut pids: Vec<u32> = rd
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        pids.sort_unstable();
        let mut irqbalance = false;
        let mut fd_denied = 0usize;
        for pid in pids {
            let dir = self.path(&format!("proc/{pid}"));
            let Ok(comm) = fs::read_to_string(dir.join("comm")) else {
                continue; // exited meanwhile
            };
            let comm = comm.trim().to_string();
            irqbalance |= comm == "irqbalance";
            if comm.starts_with("irq/") {
                let pol = fs::read_to_string(dir.join("stat"))
                    .ok()
                    .and_then(|s| latlab_core::inventory::stat_policy(&s));
                out.irqs.threads.push(IrqThread {
                    pid,
                    irq: comm
                        .strip_prefix("irq/")
                        .and_then(|r| r.split('-').next())
                        .and_then(|n| n.parse().ok()),
                    comm,
                    policy: pol.map(|(p, _)| latlab_core::inventory::policy_name(p).to_string()),
                    rt_priority: pol.map(|(_, r)| r),
                });
                continue; // a kernel thread holds no file descriptors
            }
            match fs::read_dir(dir.join("fd")) {
                Ok(fds) => {
                    let holds = fds.filter_map(|e| e.ok()).any(|e| {
                        fs::read_link(e.path())
                            .is_ok_and(|t| t == Path::new("/dev/cpu_dma_latency"))
                    });
                    if holds {
                        out.dma_latency_holders.push(Holder { pid, comm });
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => fd_denied += 1,
                Err(_) => {}
            }
        }
        out.irqs.irqbalance_running = Some(irqbalance);
        if fd_denied > 0 {
            // One stable entry, not one per pid: the holders of cpu_dma_latency are unknown.
            self.unreadable.insert("/proc/*/fd".to_string());
        }
    }

    fn virt(&mut self, out: &mut Inventory, opts: &Options) {
        out.virt.vendor = self
            .line("sys/hypervisor/type", Optional)
            .or_else(|| self.line("sys/class/dmi/id/sys_vendor", Optional));
        // Free page reporting: a virtio balloon (device id 5) with feature bit 5.
        let mut devs: Vec<String> = fs::read_dir(self.path("sys/bus/virtio/devices"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        devs.sort();
        for d in devs {
            let base = format!("sys/bus/virtio/devices/{d}");
            let id = self.line(&format!("{base}/device"), Optional);
            if id.as_deref() != Some("0x0005") {
                continue;
            }
            let rel = format!("{base}/features");
            match self.line(&rel, Optional) {
                Some(bits) if !bits.is_empty() && bits.bytes().all(|b| b == b'0' || b == b'1') => {
                    let on = bits.as_bytes().get(5) == Some(&b'1');
                    out.virt.page_reporting = Some(out.virt.page_reporting == Some(true) || on);
                }
                Some(bits) => self.bad(&rel, &bits, "a string of 0 and 1, one per feature bit"),
                None => {}
            }
        }
        let rel = "sys/module/page_reporting/parameters/page_reporting_order";
        if let Some(o) = self.line(rel, Optional) {
            match o.parse::<u32>() {
                Ok(v) if v < 64 => out.virt.page_reporting_order = Some(v),
                // The kernel's "not set" until a reporting device registers (6.12: the
                // parameter is read as an int, initialised to -1): nothing reports.
                _ if o == "-1" => {}
                _ => self.bad(rel, &o, "an order (0–63)"),
            }
        }
        let Some(s1) = self.read("proc/stat", Required) else {
            return;
        };
        let Some((steal, total)) = stat_steal(&s1) else {
            self.bad(
                "proc/stat",
                s1.lines().next().unwrap_or(""),
                "a cpu line of tick counters",
            );
            return;
        };
        out.virt.steal_since_boot = (total > 0).then(|| steal as f64 / total as f64);
        if let Some(d) = opts.steal_sample {
            std::thread::sleep(d);
            if let Some((s2, t2)) = self
                .read("proc/stat", Required)
                .as_deref()
                .and_then(stat_steal)
            {
                let (ds, dt) = (s2.saturating_sub(steal), t2.saturating_sub(total));
                out.virt.steal_sampled = (dt > 0).then(|| ds as f64 / dt as f64);
                out.virt.steal_sample_ms = Some(d.as_millis() as u64);
            }
        }
    }

    /// CPU controls on the path from this process's cgroup(s) up to the hierarchy's root.
    fn cgroup(&mut self, out: &mut Inventory) {
        let Some(text) = self.read("proc/self/cgroup", Optional) else {
            return;
        };
        for line in text.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(_), Some(ctrl), Some(path)) = (parts.next(), parts.next(), parts.next())
            else {
                self.bad("proc/self/cgroup", line, "id:controllers:path");
                continue;
            };
            if path.split('/').any(|c| c == "..") {
                self.bad("proc/self/cgroup", line, "a cgroup path without ..");
                continue;
            }
            let (base, files): (String, &[&str]) = if ctrl.is_empty() {
                let unified = "sys/fs/cgroup/unified";
                let b = if self.exists(&format!("{unified}/cgroup.controllers")) {
                    unified
                } else {
                    "sys/fs/cgroup"
                };
                (b.to_string(), &["cpu.max"])
            } else if ctrl.split(',').any(|c| c == "cpu") {
                let b = format!("sys/fs/cgroup/{ctrl}");
                let b = if self.exists(&b) {
                    b
                } else {
                    "sys/fs/cgroup/cpu".to_string()
                };
                (b, &["cpu.cfs_quota_us", "cpu.rt_runtime_us"])
            } else {
                continue;
            };
            let mut rel = path.trim_matches('/').to_string();
            loop {
                let dir = if rel.is_empty() {
                    base.clone()
                } else {
                    format!("{base}/{rel}")
                };
                for f in files {
                    let p = format!("{dir}/{f}");
                    if let Some(v) = self.line(&p, Optional) {
                        out.cgroup.push(CgroupLimit {
                            path: format!("/{p}"),
                            value: v,
                        });
                    }
                }
                if rel.is_empty() {
                    break;
                }
                rel = rel
                    .rsplit_once('/')
                    .map(|(a, _)| a.to_string())
                    .unwrap_or_default();
            }
        }
    }

    fn tracing(&mut self, out: &mut Inventory) {
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
        for e in inv::TRACE_EVENTS {
            let present = self.exists(&format!("{dir}/events/{e}"));
            out.tracing.events.insert(e.to_string(), present);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_root_reports_required_files_and_does_not_panic() {
        let d = tempfile::tempdir().unwrap();
        let inv = collect(d.path());
        assert!(
            inv.unreadable.contains(&"/proc/cmdline".to_string()),
            "{:?}",
            inv.unreadable
        );
        assert!(inv
            .unreadable
            .contains(&"/proc/sys/kernel/osrelease".to_string()));
        assert!(
            inv.kernel.arch.is_none(),
            "nothing from the live machine leaks into a fixture"
        );
        assert!(inv.virt.steal_sampled.is_none());
    }
}
