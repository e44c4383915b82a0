//! `latlab cleanup`.

use std::process::ExitCode;

use crate::cli::CleanupArgs;

pub fn cleanup(_args: CleanupArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'latlab cleanup' is not implemented yet")
}
