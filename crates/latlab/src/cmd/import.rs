//! `latlab import`.

use std::process::ExitCode;

use crate::cli::ImportArgs;

pub fn import(_args: ImportArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("'latlab import' is not implemented yet")
}
