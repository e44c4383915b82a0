//! `latlab compare`.

use std::process::ExitCode;

use crate::cli::CompareArgs;

pub fn compare(_args: CompareArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'latlab compare' is not implemented yet")
}
