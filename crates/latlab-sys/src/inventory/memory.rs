//! Memory: sizes, swap, transparent huge pages, KSM and NUMA nodes.

use std::fs;

use latlab_core::inventory::*;

use super::reader::{Need::*, Reader};

impl Reader {
    pub(super) fn memory(&mut self, out: &mut Inventory) {
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
}
