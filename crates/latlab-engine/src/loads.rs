//! The loads of a session (`latlab run --load`, `latlab loads run`): glue between the plan
//! and the load supervisor of latlab-sys.
//!
//! Life cycle: [`LoadSession::prepare`] resolves every `--load` and checks tools, scratch space
//! and CPUs before anything starts (bad input fails here, with one line naming the fix);
//! [`LoadSession::start`] creates the per-run scratch directory (ledger first), generates the
//! compile tree and starts the supervisor; [`LoadSession::measurement_started`] marks where the
//! activity deltas begin; [`LoadSession::poll`] reports a required load that keeps crashing;
//! [`LoadSession::stop`] stops everything, removes the scratch directory and returns the
//! records. Dropping a session that was not stopped stops it too (panic path).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Context};
use latlab_core::activity::ActivityRecord;
use latlab_core::record::LoadRecord;
use latlab_sys::ledger::{Entry, EntryId, Ledger};
use latlab_sys::loads::profiles::{self, Metric, Resolved, Scale};
use latlab_sys::loads::supervisor::{self, PartSpec, Supervisor};
use latlab_sys::loads::{gentree, metrics};
use latlab_sys::procstat::Snapshot;
use serde_json::{json, Map};

/// How loads run (from the `--load-*` flags).
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Parent of the per-run scratch directory (default: /var/tmp, on the root filesystem).
    pub dir: Option<PathBuf>,
    /// CPU affinity of the loads.
    pub cpus: Option<Vec<u32>>,
    /// A load that keeps crashing ends the run with an error.
    pub required: bool,
    /// A real source tree for the compile parts.
    pub src: Option<PathBuf>,
    /// Length of the measurement (0: unknown); bounds stress-ng's `--timeout` so loads stop
    /// by themselves even if latlab dies.
    pub duration_ns: u64,
}

fn online_cpus() -> Vec<u32> {
    latlab_sys::rt::online_cpus()
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| {
            let n = std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1);
            (0..n as u32).collect()
        })
}

/// One part as started: which profile it belongs to and where its log is.
/// A part's figures while the run goes on ([`LoadSession::live`]).
#[derive(Debug, Clone, PartialEq)]
pub struct LiveLoad {
    pub profile: String,
    pub part: String,
    pub restarts: u32,
    pub failures: u32,
    /// The throughput its log reports so far, and its unit.
    pub throughput: Option<(f64, &'static str)>,
}

/// How much of a load's log [`LoadSession::live`] reads (its end: the latest iterations).
const LIVE_LOG_TAIL: u64 = 4 << 20;

/// The last `max` bytes of a file, from a line start; None if it cannot be read.
fn read_tail(path: &Path, max: u64) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let from = len.saturating_sub(max);
    f.seek(SeekFrom::Start(from)).ok()?;
    let mut b = Vec::new();
    f.take(max).read_to_end(&mut b).ok()?;
    let s = String::from_utf8_lossy(&b);
    Some(match (from > 0, s.find('\n')) {
        (true, Some(i)) => s[i + 1..].to_string(),
        _ => s.into_owned(),
    })
}

#[derive(Debug, Clone)]
struct Planned {
    spec: PartSpec,
    scratch: Option<PathBuf>,
    metric: Metric,
}

pub struct LoadSession {
    resolved: Vec<Resolved>,
    opts: LoadOptions,
    scratch_parent: PathBuf,
    free_mb: u64,
    need_scratch: bool,
    n: u32,
    ledger: Option<Arc<Mutex<Ledger>>>,
    scratch: Option<(PathBuf, EntryId)>,
    planned: Vec<Planned>,
    sup: Option<Supervisor>,
    at_start: Option<Snapshot>,
    at_measure: Option<Snapshot>,
}

impl LoadSession {
    /// Resolve profiles before anything starts: unknown profile → error listing the known ones;
    /// missing tool → "stress-ng not found: apt-get install stress-ng"; load dir not writable
    /// or too small → error.
    pub fn prepare(profiles: &[String], opts: &LoadOptions) -> crate::Result<LoadSession> {
        let mut resolved = Vec::new();
        for p in profiles {
            let r = profiles::resolve(p)?;
            profiles::check_tools(&r)?;
            resolved.push(r);
        }
        let online = online_cpus();
        if let Some(cpus) = &opts.cpus {
            if let Some(c) = cpus.iter().find(|c| !online.contains(c)) {
                bail!(
                    "--load-cpus: CPU {c} is not online (online: {})",
                    latlab_core::cpulist::format_cpu_list(&online)
                );
            }
        }
        let n = opts.cpus.as_ref().map_or(online.len(), |c| c.len()).max(1) as u32;
        let builtins = || {
            resolved.iter().filter_map(|r| match r {
                Resolved::Builtin(p) => Some(*p),
                Resolved::Command(_) => None,
            })
        };
        let need_mb: u64 = builtins().map(|p| p.scratch_mb).sum();
        let need_scratch = builtins().any(|p| p.needs_scratch());
        let scratch_parent = match &opts.dir {
            // Absolute: the ledger entry must name the same directory for a `latlab cleanup`
            // started from another working directory.
            Some(d) => std::path::absolute(d).unwrap_or_else(|_| d.clone()),
            None if Path::new("/var/tmp").is_dir() => PathBuf::from("/var/tmp"),
            None => std::env::temp_dir(),
        };
        let mut free_mb = 0;
        if need_scratch {
            if !scratch_parent.is_dir() {
                bail!(
                    "--load-dir {}: not a directory; create it or choose another",
                    scratch_parent.display()
                );
            }
            let (free, writable) = latlab_sys::loads::dir_space(&scratch_parent)
                .with_context(|| format!("--load-dir {}", scratch_parent.display()))?;
            if !writable {
                bail!(
                    "--load-dir {}: not writable; choose a writable directory",
                    scratch_parent.display()
                );
            }
            free_mb = free / (1 << 20);
            if free_mb < need_mb {
                bail!(
                    "not enough space for the loads in {}: they need {need_mb} MiB, {free_mb} MiB free; use --load-dir on a larger filesystem",
                    scratch_parent.display()
                );
            }
        }
        if let Some(src) = &opts.src {
            if !src.join("Makefile").is_file() {
                bail!(
                    "--load-src {}: no Makefile there; give a source tree that builds with make",
                    src.display()
                );
            }
            if src.join("Kbuild").exists() && !src.join(".config").exists() {
                bail!(
                    "--load-src {}: a kernel tree without .config; run 'make -C {} tinyconfig' first",
                    src.display(),
                    src.display()
                );
            }
        }
        Ok(LoadSession {
            resolved,
            opts: opts.clone(),
            scratch_parent,
            free_mb,
            need_scratch,
            n,
            ledger: None,
            scratch: None,
            planned: Vec::new(),
            sup: None,
            at_start: None,
            at_measure: None,
        })
    }

    /// Profile names as resolved (for the record's config).
    #[allow(dead_code)] // for `latlab run`
    pub fn names(&self) -> Vec<String> {
        self.resolved.iter().map(|r| r.name()).collect()
    }

    /// Start every load (ledger entries written first). `log_dir` = `<run dir>/loads/`.
    pub fn start(&mut self, ledger: Arc<Mutex<Ledger>>, log_dir: &Path) -> crate::Result<()> {
        self.ledger = Some(ledger.clone());
        self.at_start = Snapshot::read(Path::new("/")).ok();
        std::fs::create_dir_all(log_dir).with_context(|| {
            format!("cannot create the load log directory {}", log_dir.display())
        })?;
        let pid = std::process::id();
        if self.need_scratch {
            let stamp = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() % 1_000_000_000)
                .unwrap_or(0);
            let dir = self
                .scratch_parent
                .join(format!("latlab-loads-{pid}-{stamp}"));
            let id = ledger
                .lock()
                .map_err(|_| anyhow!("ledger lock poisoned"))?
                .add(Entry::ScratchDir { path: dir.clone() })
                .context("cannot write the ledger")?;
            self.scratch = Some((dir.clone(), id));
            std::fs::create_dir(&dir).with_context(|| {
                format!("cannot create the scratch directory {}", dir.display())
            })?;
        }
        // Ports per run, so parallel runs do not collide.
        let port = 20_000 + (pid % 1_000) as u16 * 32;
        let timeout_s = if self.opts.duration_ns == 0 {
            0
        } else {
            self.opts.duration_ns.div_ceil(1_000_000_000) + 30
        };
        let mut specs = Vec::new();
        let mut used_logs = std::collections::HashSet::new();
        for (i, r) in self.resolved.iter().enumerate() {
            type Parts = Vec<(String, String, Metric, bool)>;
            let (profile, parts): (String, Parts) = match r {
                // Any command: its log if it is a tool we know, and its I/O from the kernel.
                Resolved::Command(c) => {
                    (r.name(), vec![("cmd".into(), c.clone(), Metric::Log, true)])
                }
                Resolved::Builtin(p) => {
                    let dir = self
                        .scratch
                        .as_ref()
                        .map(|(d, _)| d.join(format!("{i}-{}", p.name)));
                    if let Some(d) = &dir {
                        std::fs::create_dir_all(d)?;
                    }
                    let (src, target) = match (&self.opts.src, &dir) {
                        (Some(s), _) => (
                            s.clone(),
                            if s.join("Kbuild").exists() {
                                "bzImage".to_string()
                            } else {
                                String::new()
                            },
                        ),
                        (None, Some(d)) if p.compiles => {
                            let s = d.join("src");
                            std::fs::create_dir_all(&s)?;
                            gentree::generate(&s).context("cannot generate the compile tree")?;
                            (s, String::new())
                        }
                        _ => (PathBuf::new(), String::new()),
                    };
                    let scale = Scale {
                        n: self.n,
                        timeout_s,
                        dir: dir
                            .as_ref()
                            .map(|d| d.display().to_string())
                            .unwrap_or_default(),
                        src: src.display().to_string(),
                        target,
                        port: port + (i as u16 % 16) * 2 * 64,
                        free_mb: self.free_mb / self.resolved.len().max(1) as u64,
                    };
                    (
                        p.name.to_string(),
                        p.parts
                            .iter()
                            .map(|part| {
                                (
                                    part.name.to_string(),
                                    scale.expand(part.script),
                                    part.metric,
                                    part.io,
                                )
                            })
                            .collect(),
                    )
                }
            };
            let scratch = self
                .scratch
                .as_ref()
                .map(|(d, _)| d.join(format!("{i}-{profile}")));
            for (part, command, metric, account_io) in parts {
                let base: String = if part == "cmd" {
                    "cmd".to_string()
                } else {
                    format!("{profile}-{part}")
                }
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
                let mut name = format!("{base}.log");
                let mut k = 2;
                while !used_logs.insert(name.clone()) {
                    name = format!("{base}-{k}.log");
                    k += 1;
                }
                let spec = PartSpec {
                    profile: profile.clone(),
                    part,
                    command,
                    log: log_dir.join(name),
                    account_io,
                };
                self.planned.push(Planned {
                    spec: spec.clone(),
                    scratch: scratch.clone(),
                    metric,
                });
                specs.push(spec);
            }
        }
        if !specs.is_empty() {
            let opts = supervisor::Options {
                cpus: self.opts.cpus.clone(),
                tag: format!("latlab-{pid}"),
                ..Default::default()
            };
            self.sup =
                Some(Supervisor::start(specs, opts, ledger).context("cannot start the loads")?);
        }
        Ok(())
    }

    /// Mark the start of measurement (after warm-up): activity deltas are taken from here.
    pub fn measurement_started(&mut self) {
        self.at_measure = Snapshot::read(Path::new("/")).ok();
    }

    /// Called about every 100 ms by the (non-RT) collector. Restarts happen on the supervisor's
    /// own thread; this reports a required load that keeps crashing.
    pub fn poll(&mut self) -> crate::Result<()> {
        let Some(sup) = &self.sup else { return Ok(()) };
        if !self.opts.required {
            return Ok(());
        }
        if let Some(s) = sup.status().into_iter().find(|s| s.crashing) {
            let log = self
                .planned
                .iter()
                .find(|p| p.spec.profile == s.profile && p.spec.part == s.part)
                .map(|p| p.spec.log.display().to_string())
                .unwrap_or_default();
            bail!(
                "load {} ({}) keeps crashing: {} failures in a row, last {}; see {log}",
                s.profile,
                s.part,
                s.consecutive_failures,
                s.last_exit.unwrap_or_else(|| "unknown".into())
            );
        }
        Ok(())
    }

    /// Current status of every part (restarts, failures) for live displays.
    #[allow(dead_code)] // for `latlab run`
    pub fn status(&self) -> Vec<supervisor::PartStatus> {
        self.sup.as_ref().map(|s| s.status()).unwrap_or_default()
    }

    /// Every part's restarts and failures, and its throughput so far where its log reports
    /// one per iteration (hackbench's `Time:`, each finished stress-ng or dbench run): for
    /// `--metrics-listen`, from the collector (a log's last [`LIVE_LOG_TAIL`] bytes are read).
    pub fn live(&self) -> Vec<LiveLoad> {
        let status = self.status();
        self.planned
            .iter()
            .map(|p| {
                let st = status
                    .iter()
                    .find(|s| s.profile == p.spec.profile && s.part == p.spec.part);
                let throughput = (p.metric == Metric::Log)
                    .then(|| read_tail(&p.spec.log, LIVE_LOG_TAIL))
                    .flatten()
                    .and_then(|log| metrics::parse(&p.spec.command, &log))
                    .map(|t| (t.value, t.unit));
                LiveLoad {
                    profile: p.spec.profile.clone(),
                    part: p.spec.part.clone(),
                    restarts: st.map_or(0, |s| s.restarts),
                    failures: st.map_or(0, |s| s.failures),
                    throughput,
                }
            })
            .collect()
    }

    fn remove_scratch(&mut self) -> Option<String> {
        let (dir, id) = self.scratch.take()?;
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Some(format!(
                    "could not remove scratch directory {}: {e}",
                    dir.display()
                ))
            }
        }
        if let Some(l) = &self.ledger {
            if let Ok(mut l) = l.lock() {
                let _ = l.forget(id);
            }
        }
        None
    }

    /// Stop everything, verify nothing remains, remove scratch, forget ledger entries.
    pub fn stop(mut self) -> (Vec<LoadRecord>, Option<ActivityRecord>) {
        let end = Snapshot::read(Path::new("/")).ok();
        let reports = self.sup.take().map(|s| s.stop()).unwrap_or_default();
        let scratch_dir = self.scratch.as_ref().map(|(d, _)| d.clone());
        let scratch_note = self.remove_scratch();
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
        for rep in reports {
            let log = std::fs::read_to_string(&rep.spec.log).unwrap_or_default();
            let planned = self.planned.iter().find(|p| p.spec == rep.spec);
            let metric = planned.map_or(Metric::Log, |p| p.metric);
            let tp = throughput(metric, &rep, &log);
            let mut d = Map::new();
            d.insert("part".into(), json!(rep.spec.part));
            if let Some(Resolved::Builtin(p)) =
                self.resolved.iter().find(|r| r.name() == rep.spec.profile)
            {
                d.insert("models".into(), json!(p.models));
            }
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
            d.insert("cpus".into(), json!(self.opts.cpus));
            d.insert(
                "scratch".into(),
                json!(planned.and_then(|p| p.scratch.clone())),
            );
            d.insert(
                "stop".into(),
                json!({
                    "term_s": rep.stop.term_s,
                    "killed": rep.stop.killed,
                    "survivors": rep.stop.survivors,
                    "zombies": rep.stop.zombies,
                }),
            );
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
            if let Some(io) = &rep.io {
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
            d.insert("ops_source".into(), json!(metric.as_str()));
            if let Some(t) = &tp {
                d.insert("ops_unit".into(), json!(t.unit));
                d.insert("ops_iterations".into(), json!(t.iterations));
                for (k, v) in &t.details {
                    d.insert(k.clone(), v.clone());
                }
            }
            let mut notes = rep.notes.clone();
            notes.extend(scratch_note.clone());
            if !notes.is_empty() {
                d.insert("notes".into(), json!(notes));
            }
            records.push(LoadRecord {
                profile: rep.spec.profile.clone(),
                command: rep.spec.command.clone(),
                exit: rep.last_exit_code,
                ops: tp.map(|t| t.value),
                details: d,
            });
        }
        let activity = match (self.at_measure.as_ref().or(self.at_start.as_ref()), &end) {
            (Some(a), Some(b)) => {
                let mut v = a.delta(b);
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
            _ => None,
        };
        (records, activity)
    }
}

/// A part's throughput from the source its profile names ([`Metric`]).
fn throughput(
    metric: Metric,
    rep: &supervisor::PartReport,
    log: &str,
) -> Option<metrics::Throughput> {
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

impl Drop for LoadSession {
    /// Stops everything if `stop()` was not called (panic or early-error path).
    fn drop(&mut self) {
        if let Some(s) = self.sup.take() {
            let _ = s.stop();
        }
        let _ = self.remove_scratch();
    }
}
