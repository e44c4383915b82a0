//! `latlab run`: the flags planned (`crate::plan`), the run done by the engine
//! (`latlab_engine::run`), its summary printed.

use std::path::Path;
use std::process::ExitCode;

use latlab_core::model::RunModel;
use latlab_engine::profile::ProfileOpts;
use latlab_engine::run::{Hooks, Outcome};

use crate::cli::{RunArgs, RunFormat};

pub fn run(a: RunArgs) -> anyhow::Result<ExitCode> {
    run_with(a, None, &mut Summary::default()).map(|o| o.code)
}

/// A run of `a` (with `profile`, `latlab profile`), the summary printed by `hooks`.
pub fn run_with(
    a: RunArgs,
    profile: Option<ProfileOpts>,
    hooks: &mut dyn Hooks,
) -> anyhow::Result<Outcome> {
    let format = a.format;
    let quiet = a.quiet;
    let plan = crate::plan::run_plan(a, profile)?;
    let mut summary = Summary {
        format: Some(format),
        quiet,
        inner: Some(hooks),
    };
    Ok(latlab_engine::run::run(plan, &mut summary)?)
}

/// Prints latlab's summary on stdout once the run is written (`--format text|json`), after
/// what `inner` (a front end) does with the run.
#[derive(Default)]
pub struct Summary<'a> {
    format: Option<RunFormat>,
    quiet: bool,
    inner: Option<&'a mut dyn Hooks>,
}

impl Hooks for Summary<'_> {
    fn event_threshold_ns(&self) -> u64 {
        self.inner
            .as_ref()
            .map_or(u64::MAX, |h| h.event_threshold_ns())
    }
    fn on_start(&mut self, t0_ns: u64, dma: Option<i32>) {
        if let Some(h) = self.inner.as_mut() {
            h.on_start(t0_ns, dma);
        }
    }
    fn on_events(&mut self, events: &[latlab_sys::measure::SpikeEvent]) {
        if let Some(h) = self.inner.as_mut() {
            h.on_events(events);
        }
    }
    fn ticks(&self) -> bool {
        self.inner.as_ref().is_some_and(|h| h.ticks())
    }
    fn on_tick(&mut self, threads: &[std::sync::Arc<latlab_sys::live::ThreadShared>]) {
        if let Some(h) = self.inner.as_mut() {
            h.on_tick(threads);
        }
    }
    fn summary(&self) -> bool {
        self.inner.as_ref().is_none_or(|h| h.summary())
    }
    fn on_finished(&mut self, model: &RunModel, dir: &Path) -> latlab_engine::Result<()> {
        if let Some(h) = self.inner.as_mut() {
            h.on_finished(model, dir)?;
        }
        if !self.summary() {
            return Ok(());
        }
        match self.format {
            Some(f) => Ok(print_summary(model, dir, f, self.quiet)?),
            None => Ok(()),
        }
    }
}

/// latlab's summary of a written run on stdout, in `format` (text, with where the results
/// are; json, saying where on stderr unless quiet).
pub fn print_summary(
    model: &RunModel,
    dir: &Path,
    format: RunFormat,
    quiet: bool,
) -> anyhow::Result<()> {
    let out = match format {
        RunFormat::Text => {
            let mut s = latlab_report::render(model, latlab_report::Format::Text);
            s.extend_from_slice(format!("\nresults: {}\n", dir.display()).as_bytes());
            s
        }
        RunFormat::Json => {
            if !quiet {
                eprintln!("results: {}", dir.display());
            }
            latlab_report::render(model, latlab_report::Format::Json)
        }
    };
    crate::stdout::emit(&out, None)
}
