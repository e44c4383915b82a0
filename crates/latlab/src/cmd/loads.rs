//! `latlab loads`.

use std::process::ExitCode;

use crate::cli::LoadsArgs;

pub fn loads(_args: LoadsArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'latlab loads' is not implemented yet")
}
