//! Starting a session's loads: the scratch directory (ledger first), each profile's parts
//! with their commands scaled to the machine and their logs named, the supervisor.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Context};
use latlab_sys::ledger::{Entry, Ledger};
use latlab_sys::loads::gentree;
use latlab_sys::loads::profiles::{Metric, Profile, Resolved, Scale};
use latlab_sys::loads::supervisor::{self, PartSpec, Supervisor};
use latlab_sys::procstat::Snapshot;

use super::{LoadSession, Planned};

/// A part to start: its name, its command, where its throughput comes from, and whether its
/// I/O is accounted.
type Part = (String, String, Metric, bool);

/// What every profile's parts are scaled by: this run's ports and stress-ng timeout.
struct RunScale {
    port: u16,
    timeout_s: u64,
}

impl LoadSession {
    /// Start every load (ledger entries written first). `log_dir` = `<run dir>/loads/`.
    pub fn start(&mut self, ledger: Arc<Mutex<Ledger>>, log_dir: &Path) -> crate::Result<()> {
        self.ledger = Some(ledger.clone());
        self.at_start = Snapshot::read(Path::new("/")).ok();
        std::fs::create_dir_all(log_dir).with_context(|| {
            format!("cannot create the load log directory {}", log_dir.display())
        })?;
        let pid = std::process::id();
        if self.need_scratch {
            self.create_scratch(&ledger, pid)?;
        }
        // Ports per run, so parallel runs do not collide.
        let run = RunScale {
            port: 20_000 + (pid % 1_000) as u16 * 32,
            timeout_s: if self.opts.duration_ns == 0 {
                0
            } else {
                self.opts.duration_ns.div_ceil(1_000_000_000) + 30
            },
        };
        let mut specs = Vec::new();
        let mut used_logs = HashSet::new();
        for (i, r) in self.resolved.iter().enumerate() {
            let (profile, parts): (String, Vec<Part>) = match r {
                // Any command: its log if it is a tool we know, and its I/O from the kernel.
                Resolved::Command(c) => {
                    (r.name(), vec![("cmd".into(), c.clone(), Metric::Log, true)])
                }
                Resolved::Builtin(p) => (p.name.to_string(), self.builtin_parts(i, p, &run)?),
            };
            let scratch = self
                .scratch
                .as_ref()
                .map(|(d, _)| d.join(format!("{i}-{profile}")));
            for (part, command, metric, account_io) in parts {
                let name = log_name(&mut used_logs, &profile, &part);
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

    /// The per-run scratch directory, in the ledger before it exists.
    fn create_scratch(&mut self, ledger: &Arc<Mutex<Ledger>>, pid: u32) -> crate::Result<()> {
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
        std::fs::create_dir(&dir)
            .with_context(|| format!("cannot create the scratch directory {}", dir.display()))?;
        Ok(())
    }

    /// The parts of the `i`-th profile, a built-in one: its directory in the scratch space
    /// made, its source tree found or generated, its scripts expanded for this run.
    fn builtin_parts(&self, i: usize, p: &Profile, run: &RunScale) -> crate::Result<Vec<Part>> {
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
            timeout_s: run.timeout_s,
            dir: dir
                .as_ref()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
            src: src.display().to_string(),
            target,
            port: run.port + (i as u16 % 16) * 2 * 64,
            free_mb: self.free_mb / self.resolved.len().max(1) as u64,
        };
        Ok(p.parts
            .iter()
            .map(|part| {
                (
                    part.name.to_string(),
                    scale.expand(part.script),
                    part.metric,
                    part.io,
                )
            })
            .collect())
    }
}

/// A part's log file name: `<profile>-<part>.log` (`cmd.log` for a command) with anything
/// but letters, digits and `-` made `_`, numbered when taken.
fn log_name(used: &mut HashSet<String>, profile: &str, part: &str) -> String {
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
    while !used.insert(name.clone()) {
        name = format!("{base}-{k}.log");
        k += 1;
    }
    name
}
