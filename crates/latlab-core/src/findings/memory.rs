//! Rules on memory: transparent huge pages, swap, KSM.

use super::Severity::{Info, Warn};
use super::{f, Finding};
use crate::inventory::Inventory;

/// THP always, swap, KSM (`mm.thp-always`, `mm.swap`, `mm.ksm`).
pub(super) fn memory(inv: &Inventory, out: &mut Vec<Finding>) {
    if inv.memory.thp_enabled.as_deref() == Some("always") {
        out.push(f(
            "mm.thp-always",
            Warn,
            "transparent huge pages: always".into(),
            format!(
                "/sys/kernel/mm/transparent_hugepage/enabled = always (defrag {})",
                inv.memory.thp_defrag.as_deref().unwrap_or("unknown")
            ),
            "Page faults may compact memory to build a huge page, and khugepaged collapses \
             pages in the background: both add millisecond stalls.",
            "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (or \
             transparent_hugepage=madvise on the command line)",
        ));
    }
    if !inv.memory.swaps.is_empty() || inv.memory.swap_total_kb.is_some_and(|s| s > 0) {
        out.push(f(
            "mm.swap",
            Warn,
            "swap is on".into(),
            format!(
                "{} ({} kB total, {} kB free)",
                if inv.memory.swaps.is_empty() {
                    "SwapTotal in /proc/meminfo".to_string()
                } else {
                    format!("/proc/swaps: {}", inv.memory.swaps.join(", "))
                },
                opt(inv.memory.swap_total_kb),
                opt(inv.memory.swap_free_kb)
            ),
            "A page of a latency-critical task that was swapped out costs a disk read on its \
             next touch. latlab locks its own memory (mlockall); other tasks are not locked.",
            "swapoff -a, or mlockall() in every latency-critical program",
        ));
    }
    if inv.memory.ksm_run == Some(1) {
        out.push(f(
            "mm.ksm",
            Info,
            "KSM is merging pages".into(),
            "/sys/kernel/mm/ksm/run = 1".into(),
            "ksmd scans memory in the background, and a write to a merged page takes a \
             copy-on-write fault.",
            "echo 0 > /sys/kernel/mm/ksm/run",
        ));
    }
}

fn opt(v: Option<u64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "?".into())
}
