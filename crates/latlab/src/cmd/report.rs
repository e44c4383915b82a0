//! `latlab report`.

use std::process::ExitCode;

use crate::cli::ReportArgs;

pub fn report(_args: ReportArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'latlab report' is not implemented yet")
}
