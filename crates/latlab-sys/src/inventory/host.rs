//! Where the machine runs: the hypervisor, free page reporting, steal time, and the cgroup
//! limits on this process's CPU time.

use std::fs;

use latlab_core::inventory::*;

use super::reader::{Need::*, Reader};
use super::Options;

impl Reader {
    /// The DMI identity and the device tree's root node, where the machine has them.
    pub(super) fn firmware(&mut self, out: &mut Inventory) {
        let mut d = DmiId::default();
        for (field, name) in [
            (&mut d.sys_vendor, "sys_vendor"),
            (&mut d.product_name, "product_name"),
            (&mut d.product_version, "product_version"),
            (&mut d.board_vendor, "board_vendor"),
            (&mut d.board_name, "board_name"),
            (&mut d.bios_vendor, "bios_vendor"),
            (&mut d.bios_version, "bios_version"),
            (&mut d.bios_date, "bios_date"),
        ] {
            *field = self.line(&format!("sys/class/dmi/id/{name}"), Optional);
        }
        if d != DmiId::default() {
            out.dmi_id = Some(d);
        }
        let dt = ["proc/device-tree", "sys/firmware/devicetree/base"]
            .into_iter()
            .find(|b| self.exists(b));
        if let Some(base) = dt {
            let strings = |s: String| -> Vec<String> {
                s.split('\0')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(str::to_string)
                    .collect()
            };
            let compatible = self
                .read(&format!("{base}/compatible"), Optional)
                .map(strings)
                .unwrap_or_default();
            let model = self
                .read(&format!("{base}/model"), Optional)
                .and_then(|m| strings(m).into_iter().next());
            out.device_tree = Some(DeviceTree { compatible, model });
        }
    }

    pub(super) fn virt(&mut self, out: &mut Inventory, opts: &Options) {
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
    pub(super) fn cgroup(&mut self, out: &mut Inventory) {
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
}
