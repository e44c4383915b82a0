//! "What changed": the configuration, machine and inventory keys whose values differ between
//! the compared runs, one short value per run.
//!
//! Records are flattened to `path → value`. Lists of plain values read as one value
//! (`tsc, kvm-clock`); lists of objects are keyed by what names each element — an IRQ by its
//! number, a task by its comm, a file by its path — so that moving one IRQ shows as that IRQ's
//! affinity (`inventory.irqs.busiest[irq=36].affinity: 0-1 → 1`), never as the whole list.
//! Readings of the moment are left out: free memory, steal time, interrupt counts, and the pids
//! in lists (latlab's own pid holding /dev/cpu_dma_latency differs in every run; an IRQ
//! thread's pid in every boot): they differ between any two runs and would bury the kernel,
//! command line or governor change a reader is looking for.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::RunModel;

use super::Change;

/// At most this many "what changed" rows (inventories can be large).
const MAX_CHANGES: usize = 200;

/// A value longer than this is cut (with `…`).
const MAX_VALUE: usize = 200;

/// Fields that name an element of a list of objects, in order of preference.
const ID_KEYS: &[&str] = &["irq", "cpu", "comm", "name", "path"];

/// Fields of list elements that are readings of the moment.
const MOMENT_KEYS: &[&str] = &["pid"];

/// Inventory values that are readings of the moment, not the machine's set-up.
const MEASURED: &[&str] = &[
    "/memory/available_kb",
    "/memory/swap_free_kb",
    "/virt/steal_since_boot",
    "/virt/steal_sampled",
    "/virt/steal_sample_ms",
];

fn clip(mut s: String) -> String {
    if s.len() > MAX_VALUE {
        let mut cut = MAX_VALUE;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

fn scalar(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn join(prefix: &str, k: &str) -> String {
    if prefix.is_empty() {
        k.to_string()
    } else {
        format!("{prefix}.{k}")
    }
}

/// Flatten a JSON value to `path → compact value`.
pub(super) fn flatten(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                flatten(&join(prefix, k), x, out);
            }
        }
        serde_json::Value::Null => {}
        serde_json::Value::Array(xs) => flatten_list(prefix, xs, out),
        other => {
            out.insert(prefix.to_string(), clip(scalar(other).unwrap_or_default()));
        }
    }
}

fn flatten_list(prefix: &str, xs: &[serde_json::Value], out: &mut BTreeMap<String, String>) {
    if xs.is_empty() {
        out.insert(prefix.to_string(), "(none)".into());
        return;
    }
    if let Some(vals) = xs.iter().map(scalar).collect::<Option<Vec<_>>>() {
        out.insert(prefix.to_string(), clip(vals.join(", ")));
        return;
    }
    if !xs.iter().all(|x| x.is_object()) {
        out.insert(
            prefix.to_string(),
            clip(serde_json::Value::from(xs).to_string()),
        );
        return;
    }
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for (i, x) in xs.iter().enumerate() {
        let serde_json::Value::Object(m) = x else {
            continue;
        };
        let id = ID_KEYS
            .iter()
            .find_map(|k| m.get(*k).and_then(scalar).map(|v| (*k, v)));
        let mut key = match &id {
            Some((k, v)) => format!("{prefix}[{k}={v}]"),
            None => format!("{prefix}[{i}]"),
        };
        // Two elements with one name (two threads of one comm): the second by its place.
        if !seen.insert(key.clone()) {
            key = format!("{prefix}[{i}]");
            seen.insert(key.clone());
        }
        let mut leaves = 0;
        for (k, v) in m {
            if id.as_ref().is_some_and(|(ik, _)| ik == k) || MOMENT_KEYS.contains(&k.as_str()) {
                continue;
            }
            let before = out.len();
            flatten(&join(&key, k), v, out);
            leaves += out.len() - before;
        }
        if leaves == 0 {
            out.insert(key, "present".into());
        }
    }
}

/// The inventory without the readings listed in [`MEASURED`] and without the interrupt
/// counts of the busiest IRQs (their names and affinities stay: those are set-up).
fn settings_only(inv: &serde_json::Value) -> serde_json::Value {
    let mut v = inv.clone();
    for p in MEASURED {
        if let Some((parent, key)) = p.rsplit_once('/') {
            if let Some(serde_json::Value::Object(o)) = v.pointer_mut(parent) {
                o.remove(key);
            }
        }
    }
    if let Some(serde_json::Value::Array(irqs)) = v.pointer_mut("/irqs/busiest") {
        for irq in irqs.iter_mut() {
            if let serde_json::Value::Object(o) = irq {
                o.remove("count");
            }
        }
    }
    v
}

/// Keys of config, machine, inventory and the run's provenance that differ between runs.
pub(super) fn changes(runs: &[RunModel]) -> Vec<Change> {
    let maps: Vec<BTreeMap<String, String>> = runs
        .iter()
        .map(|r| {
            let mut m = BTreeMap::new();
            let rec = &r.record;
            m.insert("source".into(), rec.source.as_str().into());
            if let Some(c) = &rec.command_line {
                m.insert("command_line".into(), c.clone());
            }
            if let Ok(v) = serde_json::to_value(&rec.config) {
                flatten("config", &v, &mut m);
            }
            if let Ok(v) = serde_json::to_value(&rec.machine) {
                flatten("machine", &v, &mut m);
            }
            if let Some(inv) = &rec.inventory {
                flatten("inventory", &settings_only(inv), &mut m);
            }
            m
        })
        .collect();
    let keys: BTreeSet<&String> = maps.iter().flat_map(|m| m.keys()).collect();
    let mut out = Vec::new();
    for k in keys {
        let vals: Vec<Option<String>> = maps.iter().map(|m| m.get(k).cloned()).collect();
        if vals.iter().any(|v| *v != vals[0]) {
            out.push(Change {
                key: k.clone(),
                values: vals,
            });
            if out.len() >= MAX_CHANGES {
                break;
            }
        }
    }
    out
}

/// The runs' labels as a reader tells them apart: a label two runs share (the default one,
/// the kernel's release, on one machine) gets the run's start time, or its place when that
/// does not tell them apart either.
pub(super) fn distinct_labels(runs: &[RunModel]) -> Vec<String> {
    let count = |l: &str| runs.iter().filter(|r| r.record.label == l).count();
    let mut out: Vec<String> = runs
        .iter()
        .map(|r| {
            let l = &r.record.label;
            match &r.record.started_at {
                Some(t) if count(l) > 1 => format!("{l} ({t})"),
                _ => l.clone(),
            }
        })
        .collect();
    let dup: Vec<bool> = out
        .iter()
        .map(|l| out.iter().filter(|x| *x == l).count() > 1)
        .collect();
    for (i, l) in out.iter_mut().enumerate() {
        if dup[i] {
            *l = format!("{l} #{}", i + 1);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(v: serde_json::Value) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        flatten("inventory", &settings_only(&v), &mut m);
        m
    }

    /// A list of IRQs is keyed by IRQ: moving one IRQ is one short row; the counts and the
    /// pids (readings of the moment) are not rows at all.
    #[test]
    fn lists_are_keyed_by_what_names_their_elements() {
        let m = flat(serde_json::json!({
            "irqs": {
                "busiest": [
                    {"irq": 36, "name": "virtio1-req.0", "affinity": "0-1", "count": 2293865},
                    {"irq": 4, "name": "ttyS0", "affinity": "0", "count": 12},
                ],
                "threads": [{"comm": "irq/4-ttyS0", "irq": 4, "pid": 50, "rt_priority": 50}],
            },
            "dma_latency_holders": [{"pid": 17470, "comm": "latlab"}],
            "clocksource": {"available": ["tsc", "kvm-clock"]},
        }));
        assert_eq!(m["inventory.irqs.busiest[irq=36].affinity"], "0-1");
        assert_eq!(m["inventory.irqs.busiest[irq=4].name"], "ttyS0");
        assert!(!m.keys().any(|k| k.ends_with(".count")), "{m:?}");
        assert_eq!(m["inventory.irqs.threads[irq=4].rt_priority"], "50");
        assert_eq!(m["inventory.irqs.threads[irq=4].comm"], "irq/4-ttyS0");
        assert!(!m.keys().any(|k| k.ends_with(".pid")), "{m:?}");
        assert_eq!(m["inventory.dma_latency_holders[comm=latlab]"], "present");
        assert_eq!(m["inventory.clocksource.available"], "tsc, kvm-clock");
        let m = flat(serde_json::json!({"cpus": {"isolated": []}}));
        assert_eq!(m["inventory.cpus.isolated"], "(none)");
        assert!(m.values().all(|v| v.len() <= MAX_VALUE + '…'.len_utf8()));
    }

    #[test]
    fn elements_sharing_a_name_keep_their_place() {
        let m = flat(serde_json::json!({"t": [{"comm": "x", "v": 1}, {"comm": "x", "v": 2}]}));
        assert_eq!(m["inventory.t[comm=x].v"], "1");
        assert_eq!(m["inventory.t[1].v"], "2");
    }
}
