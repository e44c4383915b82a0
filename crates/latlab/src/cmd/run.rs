//! `latlab run`.

use std::process::ExitCode;

use crate::cli::RunArgs;

pub fn run(_args: RunArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'latlab run' is not implemented yet")
}
