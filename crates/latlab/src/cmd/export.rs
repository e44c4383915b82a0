//! `latlab export RUN --format perfetto|kcidb -o FILE`: a run for other tools, made by the
//! engine (`latlab_engine::export`): its traces as Perfetto's protobuf trace, or its record as
//! KCIDB I/O JSON.

use std::process::ExitCode;

use anyhow::Context;

use crate::cli::{ExportArgs, ExportFormat};

pub fn export(a: ExportArgs) -> anyhow::Result<ExitCode> {
    let (bytes, summary, problems) = match a.format {
        ExportFormat::Perfetto => {
            let e = latlab_engine::export::perfetto::export(&a.run)?;
            let s = format!(
                "{} window(s), {} events ({} of other kinds left out)",
                e.windows, e.written, e.skipped
            );
            (e.bytes, s, e.problems)
        }
        ExportFormat::Kcidb => {
            let b = latlab_engine::export::kcidb::export(&a.run, &a.kcidb_origin)?;
            (b, "KCIDB I/O JSON".to_string(), Vec::new())
        }
    };
    latlab_sys::safefile::write_atomic(&a.output, &bytes)
        .with_context(|| format!("cannot write {}", a.output.display()))?;
    for p in &problems {
        warnln!("{p}");
    }
    outln!("{}: {summary}, {} bytes", a.output.display(), bytes.len())?;
    Ok(ExitCode::SUCCESS)
}
