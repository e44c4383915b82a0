//! `latlab bench`.

use std::process::ExitCode;

use crate::cli::BenchArgs;

pub fn bench(_args: BenchArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'latlab bench' is not implemented yet")
}
