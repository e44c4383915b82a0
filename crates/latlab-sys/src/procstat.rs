//! Snapshots of system activity counters — `/proc/softirqs`, `/proc/interrupts`,
//! `/proc/loadavg` — and their deltas over a run, for `RunRecord.activity`. The RCU seed's
//! evidence is the RCU softirq count; the others show what a load did to the machine (NET_RX
//! for loopback traffic, TIMER and LOC for hrtimers, disk IRQs for I/O loads). The root is
//! injectable so tests read a fake tree.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

use latlab_core::activity::{ActivityRecord, CounterDelta, LoadAvg};

/// One interrupt or softirq line: per-CPU counts and, for interrupts, its description.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Counter {
    pub per_cpu: Vec<u64>,
    pub desc: String,
}

/// The counters at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub at: Instant,
    pub softirqs: BTreeMap<String, Counter>,
    pub interrupts: BTreeMap<String, Counter>,
    /// 1, 5 and 15 minute load averages, and "running/total" tasks.
    pub loadavg: Option<(f64, f64, f64, String)>,
}

/// Parse the tables shared by `/proc/softirqs` and `/proc/interrupts`: a header of CPU names,
/// then `NAME: count count … [description]`. Lines like `ERR: 0` have fewer columns.
pub fn parse_table(text: &str) -> BTreeMap<String, Counter> {
    let mut out = BTreeMap::new();
    let mut lines = text.lines();
    let ncpu = lines
        .next()
        .map(|h| {
            h.split_whitespace()
                .filter(|w| w.starts_with("CPU"))
                .count()
        })
        .unwrap_or(0);
    for l in lines {
        let Some((name, rest)) = l.split_once(':') else {
            continue;
        };
        let mut per_cpu = Vec::with_capacity(ncpu);
        let mut words = rest.split_whitespace().peekable();
        while per_cpu.len() < ncpu {
            match words.peek().and_then(|w| w.parse::<u64>().ok()) {
                Some(v) => {
                    per_cpu.push(v);
                    words.next();
                }
                None => break,
            }
        }
        let desc = words.collect::<Vec<_>>().join(" ");
        out.insert(name.trim().to_string(), Counter { per_cpu, desc });
    }
    out
}

/// `0.52 0.58 0.59 1/257 12345`.
pub fn parse_loadavg(text: &str) -> Option<(f64, f64, f64, String)> {
    let w: Vec<&str> = text.split_whitespace().collect();
    Some((
        w.first()?.parse().ok()?,
        w.get(1)?.parse().ok()?,
        w.get(2)?.parse().ok()?,
        w.get(3)?.to_string(),
    ))
}

impl Snapshot {
    /// Read the counters below `root` (`/` on a live system).
    pub fn read(root: &Path) -> io::Result<Snapshot> {
        let p = |f: &str| -> PathBuf { root.join("proc").join(f) };
        let softirqs = parse_table(&std::fs::read_to_string(p("softirqs"))?);
        let interrupts = std::fs::read_to_string(p("interrupts"))
            .map(|t| parse_table(&t))
            .unwrap_or_default();
        let loadavg = std::fs::read_to_string(p("loadavg"))
            .ok()
            .and_then(|t| parse_loadavg(&t));
        Ok(Snapshot {
            at: Instant::now(),
            softirqs,
            interrupts,
            loadavg,
        })
    }

    /// What happened between `self` (earlier) and `later`, as the JSON stored in the record:
    /// `{interval_s, softirqs: {NAME: {total, per_s, per_cpu}}, interrupts: {…, desc},
    /// loadavg_start, loadavg_end}`. Interrupt lines that did not change are left out.
    pub fn delta(&self, later: &Snapshot) -> ActivityRecord {
        let secs = later.at.saturating_duration_since(self.at).as_secs_f64();
        let table = |a: &BTreeMap<String, Counter>, b: &BTreeMap<String, Counter>, all: bool| {
            let mut m = BTreeMap::new();
            for (k, cb) in b {
                let ca = a.get(k);
                let per_cpu: Vec<u64> = cb
                    .per_cpu
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        // Counters that went backwards (a CPU went offline) count from zero.
                        let old = ca.and_then(|c| c.per_cpu.get(i)).copied().unwrap_or(0);
                        v.checked_sub(old).unwrap_or(*v)
                    })
                    .collect();
                let total: u64 = per_cpu.iter().fold(0u64, |s, v| s.saturating_add(*v));
                if total == 0 && !all {
                    continue;
                }
                m.insert(
                    k.clone(),
                    CounterDelta {
                        total,
                        per_s: if secs > 0.0 { total as f64 / secs } else { 0.0 },
                        per_cpu,
                        desc: cb.desc.clone(),
                    },
                );
            }
            m
        };
        let la = |l: &Option<(f64, f64, f64, String)>| {
            l.as_ref().map(|(a, b, c, r)| LoadAvg {
                one: *a,
                five: *b,
                fifteen: *c,
                tasks: r.clone(),
            })
        };
        ActivityRecord {
            interval_s: secs,
            softirqs: table(&self.softirqs, &later.softirqs, true),
            interrupts: table(&self.interrupts, &later.interrupts, false),
            loadavg_start: la(&self.loadavg),
            loadavg_end: la(&later.loadavg),
            from: None,
            scratch_dir: None,
        }
    }
}

/// Every CPU's steal time now, in ns, and the CLOCK_MONOTONIC instant of the reading:
/// `/proc/stat`'s `cpuN` lines, whose ticks are 1/USER_HZ s (`sysconf(_SC_CLK_TCK)`). None
/// when the file cannot be read.
pub fn steal_now() -> Option<(u64, Vec<(u32, u64)>)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let at = crate::rt::now_ns();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let ns_per_tick = if hz > 0 {
        1_000_000_000 / hz as u64
    } else {
        10_000_000
    };
    let v = latlab_core::inventory::stat_steal_per_cpu(&text)
        .into_iter()
        .map(|(cpu, ticks)| (cpu, ticks.saturating_mul(ns_per_tick)))
        .collect();
    Some((at, v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tree(dir: &Path, rcu: (u64, u64), loc: (u64, u64), la: &str) {
        std::fs::create_dir_all(dir.join("proc")).unwrap();
        std::fs::write(
            dir.join("proc/softirqs"),
            format!(
                "                    CPU0       CPU1\n          HI:          1          0\n         RCU:     {}     {}\n",
                rcu.0, rcu.1
            ),
        )
        .unwrap();
        std::fs::write(
            dir.join("proc/interrupts"),
            format!(
                "           CPU0       CPU1\n 24:          1          0  IO-APIC   5-edge      ACPI:Ged\nLOC:     {}     {}   Local timer interrupts\nERR:          0\n",
                loc.0, loc.1
            ),
        )
        .unwrap();
        std::fs::write(dir.join("proc/loadavg"), la).unwrap();
    }

    #[test]
    fn deltas_from_a_fake_tree() {
        let d = tempfile::tempdir().unwrap();
        tree(
            d.path(),
            (100, 200),
            (1000, 2000),
            "0.10 0.20 0.30 1/100 5\n",
        );
        let a = Snapshot::read(d.path()).unwrap();
        assert_eq!(a.interrupts["24"].desc, "IO-APIC 5-edge ACPI:Ged");
        assert_eq!(a.interrupts["ERR"].per_cpu, vec![0]);
        tree(
            d.path(),
            (150, 1200),
            (1100, 2000),
            "2.00 1.00 0.50 3/120 9\n",
        );
        let b = Snapshot::read(d.path()).unwrap();
        let v = serde_json::to_value(a.delta(&b)).unwrap();
        assert_eq!(v["softirqs"]["RCU"]["total"], json!(1050));
        assert_eq!(v["softirqs"]["RCU"]["per_cpu"], json!([50, 1000]));
        assert_eq!(v["softirqs"]["HI"]["total"], json!(0));
        assert_eq!(v["interrupts"]["LOC"]["total"], json!(100));
        assert_eq!(
            v["interrupts"]["LOC"]["desc"],
            json!("Local timer interrupts")
        );
        // Unchanged interrupt lines are left out.
        assert!(v["interrupts"].get("24").is_none());
        assert_eq!(v["loadavg_end"]["1m"], json!(2.0));
        assert_eq!(v["loadavg_start"]["tasks"], json!("1/100"));
    }

    #[test]
    fn live_proc_reads() {
        let s = Snapshot::read(Path::new("/")).unwrap();
        assert!(s.softirqs.contains_key("RCU"), "{:?}", s.softirqs.keys());
        assert!(s.loadavg.is_some());
    }

    #[test]
    fn missing_root_is_an_error() {
        assert!(Snapshot::read(Path::new("/nonexistent-latlab")).is_err());
    }
}
