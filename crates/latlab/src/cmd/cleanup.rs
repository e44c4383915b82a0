//! `latlab cleanup`: undo what killed latlab runs left behind (the engine's
//! [`latlab_engine::cleanup`]), and say what was done, one line each ("nothing to clean up"
//! when there was nothing); exit 1 when something could not be undone.

use std::process::ExitCode;

use latlab_engine::cleanup;

use crate::cli::CleanupArgs;

pub fn cleanup(_args: CleanupArgs) -> anyhow::Result<ExitCode> {
    let lines = cleanup::cleanup();
    if lines.is_empty() {
        outln!("nothing to clean up")?;
    }
    for l in &lines {
        outln!("{l}")?;
    }
    Ok(if cleanup::failed(&lines) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
