//! `latlab analyze`.

use std::process::ExitCode;

use crate::cli::AnalyzeArgs;

pub fn analyze(_args: AnalyzeArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'latlab analyze' is not implemented yet")
}
