//! Plans: the CLI's arguments turned into the engine's typed plans, checked, before anything
//! touches the machine, the disk or the ledger. With `cli/`, the only code that reads clap's
//! types.

use std::path::PathBuf;

use latlab_engine::loads::LoadOptions;
use latlab_engine::profile::ProfileOpts;
use latlab_engine::run::{backend, RunPlan, SessionPlan};

use crate::cli::{self, RunArgs};

pub mod modes;
pub mod run;
pub mod scenario;

/// The loads' options from where the loads run (`default_dir` without `--load-dir`).
pub fn load_place(p: &cli::LoadPlace, default_dir: Option<PathBuf>) -> LoadOptions {
    LoadOptions {
        dir: p.load_dir.clone().or(default_dir),
        cpus: p.load_cpus.as_ref().map(|l| l.0.clone()),
        required: false,
        src: None,
        duration_ns: 0,
    }
}

/// The loads' options from the load flags (`run`, `loads run`), for a run of `duration_ns`.
pub fn load_options(l: &cli::LoadArgs, duration_ns: u64) -> LoadOptions {
    LoadOptions {
        required: l.load_required,
        src: l.load_src.clone(),
        duration_ns,
        ..load_place(&l.place, None)
    }
}

/// `latlab run`'s flags (and `profile`'s options) as the engine's plan: every flag typed and
/// checked, the mode validated, the actions checked against the limits.
pub fn run_plan(a: RunArgs, profile: Option<ProfileOpts>) -> anyhow::Result<RunPlan> {
    let mut p = run::plan(&a)?;
    let mp = modes::plan_mode(&a, &mut p, &latlab_sys::rt::online_cpus()?)?;
    let actions = a.actions.actions();
    latlab_engine::actions::check(&actions, p.max_latency_ns, p.trace_threshold_ns)?;
    let load_options = load_options(&a.ext.load, p.duration_ns + p.warmup_ns);
    Ok(RunPlan {
        measure: p,
        mode: mp,
        session: SessionPlan {
            backend: backend::by_name(&a.backend).expect("the CLI's back ends are the engine's"),
            seed: a.sim_seed,
            realtime: a.sim_realtime,
            aligned: a.aligned,
            results: a.results,
            quiet: a.quiet,
            force: a.force,
            loads: a.loads,
            load_options,
            metrics: a.metrics_listen.map(|l| (l, a.metrics_listen_any)),
            db: a.record_db.target(),
            actions,
            profile,
            dma_latency_us: a.dma_latency.0,
            command: format!(
                "latlab {}",
                std::env::args().nth(1).unwrap_or_else(|| "run".into())
            ),
        },
    })
}
