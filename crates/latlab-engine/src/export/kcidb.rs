//! A run directory as KCIDB I/O JSON (`latlab_report::kcidb`): the record, its id (run.json's
//! `run_id`, else the id the results database derives from the file's bytes) and the run's
//! files as `file://` URLs of their absolute paths: run.json, report.html, histogram.txt when
//! present, and each traced spike's trace.txt, trace.dat and analysis.txt.

use std::path::Path;

use latlab_report::kcidb::{self, Inputs};

/// The run's files offered as references, when present.
const RUN_FILES: [&str; 3] = ["run.json", "report.html", "histogram.txt"];

/// A spike's files, beside its `trace_file`.
const SPIKE_FILES: [&str; 3] = ["trace.txt", "trace.dat", "analysis.txt"];

/// The run at `run` as KCIDB I/O JSON from `origin` (refused unless `^[a-z0-9_]+$`).
pub fn export(run: &Path, origin: &str) -> crate::Result<Vec<u8>> {
    kcidb::check_origin(origin).map_err(crate::Error::msg)?;
    let json = crate::rundir::run_json_path(run)?;
    let bytes = crate::rundir::read_run_json(&json)?;
    let model = crate::rundir::load_run(run)?;
    if model.record.cpus.is_empty() {
        bail!(
            "{}: no per-CPU latency in this run (a `latlab profile --no-measure` run, or a record whose cpus[] is empty): the kcidb format's tests are each CPU's figures; `latlab report` shows what the run has",
            json.display()
        );
    }
    let dir = std::path::absolute(super::perfetto::run_dir(run))?;
    let present = |rel: &Path| {
        let p = dir.join(rel);
        p.is_file().then(|| (name_of(&p), kcidb::file_url(&p)))
    };
    let spike_files = model
        .record
        .spikes
        .iter()
        .map(|s| {
            let Some(t) = s.trace_file.as_deref().map(Path::new) else {
                return Vec::new();
            };
            // run.json is input: only files inside the run directory are named.
            if !t
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)))
            {
                return Vec::new();
            }
            let at = t.parent().unwrap_or(Path::new(""));
            SPIKE_FILES
                .iter()
                .filter_map(|f| present(&at.join(f)))
                .collect()
        })
        .collect();
    let inputs = Inputs {
        origin: origin.to_string(),
        run_id: model
            .record
            .run_id
            .clone()
            .unwrap_or_else(|| latlab_store::derived_run_id(&bytes)),
        files: RUN_FILES
            .iter()
            .filter_map(|f| present(Path::new(f)))
            .collect(),
        spike_files,
    };
    Ok(kcidb::render(&model, &inputs))
}

fn name_of(p: &Path) -> String {
    p.file_name()
        .map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned())
}
