//! `latlab scenario`'s plans: its flags checked and typed, before anything starts.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail};
use latlab_core::cpulist::format_cpu_list;
use latlab_engine::scenario::{FairnessPlan, IoReadPlan, ScenarioPlan, RT_MAX_NS};
use latlab_sys::rt::{self, Policy};

use crate::cli::scenario::{FairnessArgs, IoReadArgs, ScenarioCommon};

/// What every scenario's flags give: its label (`name` by default), and where the loads' files
/// go (`default_dir` when `--load-dir` is not given).
fn common(c: &ScenarioCommon, name: &str, default_dir: Option<PathBuf>) -> ScenarioPlan {
    ScenarioPlan {
        label: c.label.clone().unwrap_or_else(|| name.into()),
        results: c.results.clone(),
        warmup_ns: c.warmup.0,
        load_options: super::load_place(&c.place, default_dir),
        db: c.record_db.target(),
    }
}

pub fn io_read(a: &IoReadArgs) -> anyhow::Result<IoReadPlan> {
    if a.file_size.0 == 0 {
        bail!("--file-size: must be more than 0 (e.g. 200M)");
    }
    if a.repeat == 0 || a.repeat > 1000 {
        bail!("--repeat {}: give 1 to 1000", a.repeat);
    }
    if a.small_files > 1_000_000 {
        bail!("--small-files {}: give at most 1000000", a.small_files);
    }
    let dir = match &a.dir {
        Some(d) => d.clone(),
        None if Path::new("/var/tmp").is_dir() => PathBuf::from("/var/tmp"),
        None => std::env::temp_dir(),
    };
    let loads = if a.loads.is_empty() {
        vec!["io-write".into()]
    } else if a.loads.iter().any(|l| l == "none") {
        vec![]
    } else {
        a.loads.clone()
    };
    Ok(IoReadPlan {
        file_size: a.file_size.0,
        small_files: a.small_files,
        common: common(&a.common, "io-read", Some(dir.clone())),
        dir,
        iosched: a.iosched.clone(),
        loads,
        repeat: a.repeat,
    })
}

pub fn fairness(a: &FairnessArgs) -> anyhow::Result<FairnessPlan> {
    if a.tasks == 0 || a.tasks > 1024 {
        bail!(
            "--tasks {}: give 1 to 1024 tasks (2 or more to judge fairness)",
            a.tasks
        );
    }
    let duration_ns = a.duration.0;
    if duration_ns == 0 {
        bail!("--duration: must be more than 0 (e.g. 10s)");
    }
    let policy = Policy::from(a.policy);
    let online = rt::online_cpus()?;
    let cpus = match &a.cpus {
        None => {
            let last = rt::usable_cpus()?.pop();
            vec![last.ok_or_else(|| anyhow!("no online CPU is available to this process"))?]
        }
        Some(l) => {
            if let Some(c) = l.0.iter().find(|c| !online.contains(c)) {
                bail!(
                    "--cpus {l}: CPU {c} is not online (online: {}); choose online CPUs",
                    format_cpu_list(&online)
                );
            }
            l.0.clone()
        }
    };
    if policy.is_rt() {
        if !(1..=99).contains(&a.priority) {
            bail!(
                "--priority {}: must be 1..99 for --policy {}",
                a.priority,
                policy.as_str()
            );
        }
        if !rt::can_use_rt() {
            bail!(
                "--policy {} needs root (or CAP_SYS_NICE): run as root, or use --policy other",
                policy.as_str()
            );
        }
        if online.iter().all(|c| cpus.contains(c)) {
            bail!(
                "--cpus {}: real-time CPU hogs on every online CPU could lock the machine; leave at least one CPU out (e.g. --cpus {})",
                format_cpu_list(&cpus),
                online.last().copied().unwrap_or(0)
            );
        }
        if duration_ns > RT_MAX_NS {
            bail!(
                "--duration {}: real-time hogs run at most 10m; give a shorter --duration",
                a.duration
            );
        }
    }
    let sleeper_interval_ns = if a.sleeper {
        let i = a.sleeper_interval.0;
        if i < 100_000 || i > duration_ns {
            bail!(
                "--sleeper-interval {}: give 100us up to the --duration",
                a.sleeper_interval
            );
        }
        Some(i)
    } else {
        None
    };
    Ok(FairnessPlan {
        tasks: a.tasks,
        duration_ns,
        policy,
        priority: if policy.is_rt() { a.priority } else { 0 },
        cpus,
        sleeper_interval_ns,
        force: a.force,
        loads: a.loads.clone(),
        common: common(&a.common, "fairness", None),
    })
}
