//! Interrupts: the busiest IRQs and their affinities, and one pass over the processes for
//! IRQ threads, irqbalance and the holders of `/dev/cpu_dma_latency`.

use std::fs;
use std::io;
use std::path::Path;

use latlab_core::inventory::*;

use super::reader::{Need::*, Reader};

impl Reader {
    pub(super) fn irqs(&mut self, out: &mut Inventory) {
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
    pub(super) fn processes(&mut self, out: &mut Inventory) {
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
}
