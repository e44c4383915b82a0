//! The end of a load: SIGTERM to every group, the grace period, SIGKILL (and `cgroup.kill`)
//! to what is left, a check that nothing is, then the cgroups removed and the ledger entries
//! forgotten.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::group::{remaining, signal_group};
use super::io_counters::IoReport;
use super::part::{describe, reap, sample_io, PartState};
use super::{now_unix, Options};
use crate::ledger::Ledger;

/// SIGTERM every group, wait out the grace period, SIGKILL what is left, verify, remove the
/// cgroups and forget the ledger entries.
pub(super) fn stop_all(parts: &mut [PartState], opts: &Options, ledger: &Arc<Mutex<Ledger>>) {
    // The last I/O sample, just before the signals: a process killed before its parent
    // reaps it takes its counts along.
    for p in parts.iter_mut() {
        sample_io(p);
        p.io_end = Some(Instant::now());
    }
    let t0 = Instant::now();
    for p in parts.iter_mut() {
        if let Some(c) = &p.child {
            signal_group(c, p.report.cgroup.as_deref(), libc::SIGTERM);
        }
    }
    let done = |p: &mut PartState| -> bool {
        match &mut p.child {
            None => true,
            Some(c) => {
                let reaped = reap(c, &mut p.report);
                reaped && remaining(c, p.report.cgroup.as_deref()).0.is_empty()
            }
        }
    };
    let mut pending: Vec<usize> = (0..parts.len()).collect();
    while !pending.is_empty() && t0.elapsed() < opts.grace {
        pending.retain(|&i| {
            let d = done(&mut parts[i]);
            if d {
                parts[i].report.stop.term_s = t0.elapsed().as_secs_f64();
            }
            !d
        });
        if !pending.is_empty() {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    for &i in &pending {
        let p = &mut parts[i];
        p.report.stop.term_s = t0.elapsed().as_secs_f64();
        p.report.stop.killed = true;
        if let Some(c) = &p.child {
            signal_group(c, p.report.cgroup.as_deref(), libc::SIGKILL);
        }
    }
    let t1 = Instant::now();
    while !pending.is_empty() && t1.elapsed() < Duration::from_secs(5) {
        pending.retain(|&i| !done(&mut parts[i]));
        if !pending.is_empty() {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    for p in parts.iter_mut() {
        settle(p, ledger);
    }
}

/// After the signals: a part's stop, its I/O and its final status recorded, its ledger entries
/// forgotten when nothing is left, its cgroup read and removed.
fn settle(p: &mut PartState, ledger: &Arc<Mutex<Ledger>>) {
    p.report.stopped_unix_s = now_unix();
    if let Some(c) = &p.child {
        p.io_done.add(&c.io);
    }
    if p.spec.account_io {
        p.report.io = Some(IoReport {
            total: p.io_done,
            interval_s: p.io_end.map_or(0.0, |e| (e - p.first_start).as_secs_f64()),
            samples: p.io_samples,
        });
    }
    if let Some(c) = p.child.take() {
        let (live, zombies) = remaining(&c, p.report.cgroup.as_deref());
        p.report.stop.survivors = live.clone();
        p.report.stop.zombies = zombies;
        if let Some(s) = c.reaped {
            p.report.final_status = Some(describe(s).0);
        }
        if live.is_empty() {
            if let Ok(mut l) = ledger.lock() {
                let _ = l.forget(c.entry);
            }
        } else {
            p.report.notes.push(format!(
                "processes survived SIGKILL: {live:?} (left in the ledger for latlab cleanup)"
            ));
        }
    }
    if let Some(cg) = p.report.cgroup.clone() {
        remove_cgroup(p, &cg, ledger);
    }
}

/// The part's cgroup: its CPU time read, then removed (waiting for processes still leaving
/// it) and its ledger entry forgotten.
fn remove_cgroup(p: &mut PartState, cg: &Path, ledger: &Arc<Mutex<Ledger>>) {
    p.report.cgroup_cpu_s = std::fs::read_to_string(cg.join("cpu.stat"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("usage_usec "))
                .and_then(|v| v.trim().parse::<f64>().ok())
        })
        .map(|us| us / 1e6);
    // The group's processes are gone or reported as survivors; a killed one blocked
    // in I/O may still be leaving the cgroup (see CGROUP_EMPTY_WAIT).
    let wait = if p.report.stop.survivors.is_empty() {
        crate::ledger::CGROUP_EMPTY_WAIT
    } else {
        Duration::from_secs(2)
    };
    let removed = match crate::ledger::remove_cgroup(cg, wait) {
        Ok(waited) => {
            if waited.as_millis() >= 500 {
                p.report.notes.push(format!(
                    "its processes took {:.1} s to leave cgroup {}",
                    waited.as_secs_f64(),
                    cg.display()
                ));
            }
            true
        }
        Err(e) => {
            p.report
                .notes
                .push(format!("could not remove cgroup {}: {e}", cg.display()));
            false
        }
    };
    if removed {
        if let (Some(id), Ok(mut l)) = (p.cgroup_entry, ledger.lock()) {
            let _ = l.forget(id);
        }
    }
}
