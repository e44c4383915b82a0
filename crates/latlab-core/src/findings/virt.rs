//! Rules on virtualization: steal time, running as a guest, free page reporting.

use super::Severity::{Bad, Warn};
use super::{f, Finding, STEAL_BAD};
use crate::inventory::Inventory;

/// Steal time or a hypervisor (`virt.steal`, `virt.guest`), free page reporting
/// (`virt.page_reporting`).
pub(super) fn virt(inv: &Inventory, out: &mut Vec<Finding>) {
    let steal = inv.virt.steal_sampled.or(inv.virt.steal_since_boot);
    if let Some(s) = steal.filter(|s| *s >= STEAL_BAD) {
        out.push(f(
            "virt.steal",
            Bad,
            format!("the host steals {:.1} % of CPU time", s * 100.0),
            steal_evidence(inv),
            "While the hypervisor runs something else, a vCPU does not run at all: every \
             latency includes the host's scheduling, which the guest cannot see or fix.",
            "pin the vCPUs to dedicated host cores, or measure on bare metal",
        ));
    } else if inv.virt.hypervisor == Some(true) {
        out.push(f(
            "virt.guest",
            Warn,
            "running in a virtual machine".into(),
            format!(
                "hypervisor flag in /proc/cpuinfo{}; {}",
                inv.virt
                    .vendor
                    .as_ref()
                    .map(|v| format!(", vendor {v}"))
                    .unwrap_or_default(),
                steal_evidence(inv)
            ),
            "The host can stall a vCPU at any moment (exits, host interrupts, other guests); \
             such stalls show up as latency with no kernel event in the guest.",
            "read worst cases as bounds of this VM and its host, not of the kernel; use \
             dedicated host cores for guests that need low latency",
        ));
    }

    if inv.virt.page_reporting == Some(true) {
        let order = inv.virt.page_reporting_order;
        out.push(f(
            "virt.page_reporting",
            Warn,
            "the guest gives its free memory back to the host (free page reporting)".into(),
            format!(
                "a virtio balloon negotiated VIRTIO_BALLOON_F_REPORTING \
                 (/sys/bus/virtio/devices/*/features bit 5){}",
                order
                    .map(|o| format!(
                        "; page_reporting_order {o}: free blocks of {} KiB are reported",
                        4u64 << o.min(40)
                    ))
                    .unwrap_or_default()
            ),
            "The host drops the memory it is given back, and the next use of it makes the \
             host fault it in while the vCPU waits: any allocation in the guest (a fork, a \
             growing heap, the page cache) can stall its CPU. Measured on such a VM: a first \
             touch costs 6 µs a page against 2 µs on reuse, single pages 3–45 ms; the stalls \
             show as latency with no kernel event (hypervisor).",
            "turn free page reporting off in the VMM (QEMU: -device \
             virtio-balloon,free-page-reporting=off; Firecracker: the balloon's \
             free_page_reporting false) for latency work; latlab keeps its own memory \
             allocated and locked while it measures",
        ));
    }
}

fn steal_evidence(inv: &Inventory) -> String {
    let mut parts = Vec::new();
    if let (Some(s), Some(ms)) = (inv.virt.steal_sampled, inv.virt.steal_sample_ms) {
        parts.push(format!("steal {:.2} % over {ms} ms", s * 100.0));
    }
    if let Some(s) = inv.virt.steal_since_boot {
        parts.push(format!("steal {:.2} % since boot", s * 100.0));
    }
    if parts.is_empty() {
        "steal time unknown (/proc/stat)".into()
    } else {
        format!("{} (/proc/stat)", parts.join(", "))
    }
}
