//! `latlab check`.

use std::process::ExitCode;

use crate::cli::CheckArgs;

pub fn check(_args: CheckArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'latlab check' is not implemented yet")
}
