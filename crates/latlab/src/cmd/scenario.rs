//! `latlab scenario io-read|fairness`: the flags planned (`crate::plan::scenario`), the
//! scenario run by the engine (`latlab_engine::scenario`), its summary printed as `run`'s.

use std::process::ExitCode;

use latlab_engine::scenario::{fairness, io_read};

use crate::cli::scenario::{ScenarioArgs, ScenarioCommand};
use crate::plan::scenario as plan;

pub fn scenario(a: ScenarioArgs) -> anyhow::Result<ExitCode> {
    let (done, format) = match a.command {
        ScenarioCommand::IoRead(i) => (io_read::run(plan::io_read(&i)?)?, i.common.format),
        ScenarioCommand::Fairness(f) => (fairness::run(plan::fairness(&f)?)?, f.common.format),
    };
    crate::cmd::run::print_summary(&done.model, &done.dir, format, false)?;
    Ok(ExitCode::SUCCESS)
}
