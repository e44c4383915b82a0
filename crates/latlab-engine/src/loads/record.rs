//! Stopping a session's loads and what the record keeps of them: one [`LoadRecord`] per part
//! (its life, CPU time, stop, I/O and throughput) and the machine's activity over the run.

use std::path::{Path, PathBuf};

use latlab_core::activity::ActivityRecord;
use latlab_core::record::LoadRecord;
use latlab_sys::loads::profiles::{Metric, Resolved};
use latlab_sys::loads::supervisor::{self, PartReport};
use latlab_sys::loads::{gentree, metrics};
use latlab_sys::procstat::Snapshot;
use serde_json::{json, Map, Value};

use super::{LoadSession, Planned};

impl LoadSession {
    /// Stop everything, verify nothing remains, remove scratch, forget ledger entries.
    pub fn stop(mut self) -> (Vec<LoadRecord>, Option<ActivityRecord>) {
        let end = Snapshot::read(Path::new("/")).ok();
        let reports = self.sup.take().map(|s| s.stop()).unwrap_or_default();
        let scratch_dir = self.scratch.as_ref().map(|(d, _)| d.clone());
        let scratch_note = self.remove_scratch();
        let mut records = self.model_only_records();
        for rep in reports {
            records.push(self.part_record(&rep, scratch_note.as_deref()));
        }
        let activity = self.activity(end.as_ref(), scratch_dir);
        (records, activity)
    }

    /// A record for each built-in profile without parts (it only names models).
    fn model_only_records(&self) -> Vec<LoadRecord> {
        let mut records = Vec::new();
        for r in self.resolved.iter() {
            if let Resolved::Builtin(p) = r {
                if p.parts.is_empty() {
                    let mut d = Map::new();
                    d.insert("models".into(), json!(p.models));
                    records.push(LoadRecord {
                        profile: p.name.into(),
                        command: String::new(),
                        exit: None,
                        ops: None,
                        details: d,
                    });
                }
            }
        }
        records
    }

    /// One part's record from its report and its log.
    fn part_record(&self, rep: &PartReport, scratch_note: Option<&str>) -> LoadRecord {
        let log = std::fs::read_to_string(&rep.spec.log).unwrap_or_default();
        let planned = self.planned.iter().find(|p| p.spec == rep.spec);
        let metric = planned.map_or(Metric::Log, |p| p.metric);
        let tp = throughput(metric, rep, &log);
        let mut d = Map::new();
        d.insert("part".into(), json!(rep.spec.part));
        if let Some(Resolved::Builtin(p)) =
            self.resolved.iter().find(|r| r.name() == rep.spec.profile)
        {
            d.insert("models".into(), json!(p.models));
        }
        let life_s = insert_life(&mut d, rep);
        d.insert("cpus".into(), json!(self.opts.cpus));
        d.insert(
            "scratch".into(),
            json!(planned.and_then(|p: &Planned| p.scratch.clone())),
        );
        insert_stop(&mut d, rep);
        let clean = rep.exits.get("exit 0").copied().unwrap_or(0);
        d.insert("iterations_completed".into(), json!(clean));
        // The generated tree reports each object file: progress within a build, which
        // a short run never finishes (about 27 s on 2 CPUs).
        if metric == Metric::Iterations && self.opts.src.is_none() && life_s > 0.0 {
            let files = gentree::compiled_files(&log);
            d.insert("compiled_files".into(), json!(files));
            d.insert("compiled_files_per_s".into(), json!(files as f64 / life_s));
        }
        if clean > 0 {
            d.insert(
                "s_per_iteration".into(),
                json!(rep.clean_iterations_s / clean as f64),
            );
        }
        insert_io(&mut d, rep);
        d.insert("ops_source".into(), json!(metric.as_str()));
        if let Some(t) = &tp {
            d.insert("ops_unit".into(), json!(t.unit));
            d.insert("ops_iterations".into(), json!(t.iterations));
            for (k, v) in &t.details {
                d.insert(k.clone(), v.clone());
            }
        }
        let mut notes = rep.notes.clone();
        notes.extend(scratch_note.map(str::to_string));
        if !notes.is_empty() {
            d.insert("notes".into(), json!(notes));
        }
        LoadRecord {
            profile: rep.spec.profile.clone(),
            command: rep.spec.command.clone(),
            exit: rep.last_exit_code,
            ops: tp.map(|t| t.value),
            details: d,
        }
    }

    /// The counters' deltas from the measurement's start (else the loads') to `end`.
    fn activity(
        &self,
        end: Option<&Snapshot>,
        scratch_dir: Option<PathBuf>,
    ) -> Option<ActivityRecord> {
        let a = self.at_measure.as_ref().or(self.at_start.as_ref())?;
        let mut v = a.delta(end?);
        v.from = Some(
            if self.at_measure.is_some() {
                "measurement start"
            } else {
                "load start"
            }
            .into(),
        );
        v.scratch_dir = scratch_dir.map(|d| d.to_string_lossy().into_owned());
        Some(v)
    }
}

/// A part's life: its log, start and stop, starts, restarts, failures, exits and CPU time.
/// Returns its life in seconds.
fn insert_life(d: &mut Map<String, Value>, rep: &PartReport) -> f64 {
    d.insert("log".into(), json!(rep.spec.log));
    d.insert("started_unix_s".into(), json!(rep.started_unix_s));
    d.insert("stopped_unix_s".into(), json!(rep.stopped_unix_s));
    d.insert("starts".into(), json!(rep.starts));
    d.insert("restarts".into(), json!(rep.restarts));
    d.insert("failures".into(), json!(rep.failures));
    d.insert("crashing".into(), json!(rep.crashing));
    d.insert("exits".into(), json!(rep.exits));
    d.insert("final_status".into(), json!(rep.final_status));
    d.insert(
        "cpu_s".into(),
        json!(rep.cgroup_cpu_s.unwrap_or(rep.rusage_cpu_s)),
    );
    let life_s = (rep.stopped_unix_s - rep.started_unix_s).max(0.0);
    if life_s > 0.0 {
        // CPUs' worth of time the load used over its life (1.0 = one CPU busy).
        d.insert(
            "cpu_per_s".into(),
            json!(rep.cgroup_cpu_s.unwrap_or(rep.rusage_cpu_s) / life_s),
        );
    }
    d.insert(
        "cpu_source".into(),
        json!(if rep.cgroup_cpu_s.is_some() {
            "cgroup cpu.stat usage_usec"
        } else {
            "wait4 rusage (processes reaped by their parents)"
        }),
    );
    d.insert("rusage_cpu_s".into(), json!(rep.rusage_cpu_s));
    d.insert("cgroup_cpu_s".into(), json!(rep.cgroup_cpu_s));
    d.insert("cgroup".into(), json!(rep.cgroup));
    d.insert("pgids".into(), json!(rep.pgids));
    life_s
}

/// How the part was stopped: TERM's wait, what was killed, what survived.
fn insert_stop(d: &mut Map<String, Value>, rep: &PartReport) {
    d.insert(
        "stop".into(),
        json!({
            "term_s": rep.stop.term_s,
            "killed": rep.stop.killed,
            "survivors": rep.stop.survivors,
            "zombies": rep.stop.zombies,
        }),
    );
}

/// The part's I/O counters and rates, when they were sampled.
fn insert_io(d: &mut Map<String, Value>, rep: &PartReport) {
    let Some(io) = &rep.io else { return };
    let t = &io.total;
    d.insert("io_source".into(), json!(supervisor::IO_SOURCE));
    d.insert("io_interval_s".into(), json!(io.interval_s));
    d.insert("io_samples".into(), json!(io.samples));
    d.insert("io_read_bytes".into(), json!(t.read_bytes));
    d.insert("io_write_bytes".into(), json!(t.write_bytes));
    d.insert(
        "io_cancelled_write_bytes".into(),
        json!(t.cancelled_write_bytes),
    );
    d.insert("io_rchar".into(), json!(t.rchar));
    d.insert("io_wchar".into(), json!(t.wchar));
    if io.interval_s > 0.0 {
        let mbs = |b: u64| b as f64 / 1e6 / io.interval_s;
        d.insert("io_read_mb_per_s".into(), json!(mbs(t.read_bytes)));
        d.insert("io_write_mb_per_s".into(), json!(mbs(t.write_bytes)));
    }
}

/// A part's throughput from the source its profile names ([`Metric`]).
fn throughput(metric: Metric, rep: &PartReport, log: &str) -> Option<metrics::Throughput> {
    let io_rate = |bytes: fn(&supervisor::IoCounters) -> u64| {
        let io = rep.io.as_ref().filter(|io| io.interval_s > 0.0)?;
        Some(metrics::Throughput {
            value: bytes(&io.total) as f64 / 1e6 / io.interval_s,
            unit: "MB/s",
            iterations: rep.starts as usize,
            details: Map::new(),
        })
    };
    match metric {
        Metric::Log => metrics::parse(&rep.spec.command, log),
        Metric::IoWrite => io_rate(|t| t.write_bytes),
        Metric::IoRead => io_rate(|t| t.read_bytes),
        Metric::Iterations => {
            let life = rep.stopped_unix_s - rep.started_unix_s;
            let clean = rep.exits.get("exit 0").copied().unwrap_or(0);
            (life > 0.0).then(|| metrics::Throughput {
                value: clean as f64 / life,
                unit: "iterations/s",
                iterations: clean as usize,
                details: Map::new(),
            })
        }
    }
}
