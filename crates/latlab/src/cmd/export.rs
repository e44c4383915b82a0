//! `latlab export RUN --format perfetto -o FILE`.

use std::process::ExitCode;

use crate::cli::ExportArgs;

pub fn export(_a: ExportArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not yet")
}
