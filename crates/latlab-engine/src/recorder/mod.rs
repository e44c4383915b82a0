//! The tracefs flight recorder of `latlab run`: behind one trait, [`Recorder`] (what the
//! measuring threads' hook, the session and the collector use), two strategies:
//!
//! - [`running`] (the default: one instance read as binary pages): the recorder never stops;
//!   a spike's marker is an event, a copier reads the marked CPU's pages, and each spike
//!   takes its CPU's events from the previous marker to its own. Its files wait in memory
//!   until the measurement ends.
//! - [`turns`] (`--trace-instances` > 1, or spikes read as text): instances take turns; a
//!   marker stops the armed one in the kernel, a standby takes over within a slice, and the
//!   stopped one is copied for its spike.
//!
//! What they share ([`common`]): the instances (made by the one tracefs set-up,
//! [`crate::instances`]), the hook, the decoder ([`decoder`]), the tallies of run.json's
//! `"trace"` and the spikes' records and files ([`files`]). A spike's capture → analysis →
//! files is pure, in [`latlab_core::trace::capture`]. [`start`] probes tracefs, creates and
//! configures the instances and starts the strategy the options and the kernel call for;
//! [`Recorder::finish`] returns the JSON for `run.json`'s `"trace"`. The instances are
//! removed on every path: `finish`, Drop (panics), and the ledger for SIGKILL.

use std::path::Path;
use std::sync::{Arc, Mutex};

use latlab_sys::ledger::Ledger;
use latlab_sys::tracefs::{self, InstanceSpec};

use crate::instances::Instances;

mod api;
mod common;
mod decoder;
mod files;
mod running;
#[cfg(test)]
mod tests;
mod turns;

pub use api::{Hook, Recorder, TraceOptions};
pub use decoder::{dat_layout, instance_trace_dat, DatError};
pub use files::defer_budget;

use api::Failure;
use common::Common;
use decoder::binary_decoder;
use running::Running;
use turns::Turns;

/// A run's flight recorder.
pub type TraceSession = Box<dyn Recorder>;

/// Why the recorder could not start with `--trace-required` (or could not clear its
/// instances).
#[derive(Debug)]
pub struct StartError(String);

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StartError {}

/// Probe + create + configure + start, on tracefs at `LATLAB_TRACEFS` or
/// `/sys/kernel/tracing`. When tracing is impossible (no tracefs, read-only, events missing):
/// Err if `opts.required`, else Ok(None) after pushing a one-line warning. A leftover
/// latlab-* instance of a dead run: warn ("run `latlab cleanup`") and continue.
pub fn start(
    opts: &TraceOptions,
    cpus: &[u32],
    ledger: Arc<Mutex<Ledger>>,
    warnings: &mut Vec<String>,
) -> Result<Option<TraceSession>, StartError> {
    start_at(&Instances::default_root(), opts, cpus, ledger, warnings)
}

/// [`start`] on a given tracefs root.
pub fn start_at(
    root: &Path,
    opts: &TraceOptions,
    cpus: &[u32],
    ledger: Arc<Mutex<Ledger>>,
    warnings: &mut Vec<String>,
) -> Result<Option<TraceSession>, StartError> {
    let started = match open(root, opts, cpus, ledger, warnings) {
        Ok(common) => start_strategy(common, true),
        Err(why) => Err(Failure::CannotTrace(why)),
    };
    match started {
        Ok(Started::Running(r)) => Ok(Some(Box::new(r))),
        Ok(Started::Turns(t)) => Ok(Some(Box::new(t))),
        Err(Failure::CannotTrace(e)) if opts.required => {
            Err(StartError(format!("--trace-required: cannot trace: {e}")))
        }
        Err(Failure::CannotTrace(e)) => {
            warnings.push(format!("tracing disabled: {e} (measuring without traces)"));
            Ok(None)
        }
        Err(Failure::Io(e)) => Err(StartError(format!("cannot clear the recorder: {e}"))),
    }
}

/// A started recorder, by strategy.
enum Started {
    Running(Running),
    Turns(Turns),
}

/// The strategy the instances call for: one instance read as binary pages never stops; more,
/// or text, take turns. `thread`: with the copier or re-arm thread (tests step without).
fn start_strategy(common: Common, thread: bool) -> Result<Started, Failure> {
    if common.binary.is_ok() && common.instances.all().len() == 1 {
        Running::start(common, thread).map(Started::Running)
    } else {
        Turns::start(common, thread).map(Started::Turns)
    }
}

/// tracefs found or mounted, the instances created and configured (the first required, the
/// others best effort), the warnings said. Err: why tracing is impossible.
fn open(
    root: &Path,
    opts: &TraceOptions,
    cpus: &[u32],
    ledger: Arc<Mutex<Ledger>>,
    warnings: &mut Vec<String>,
) -> Result<Common, String> {
    let mut set = Instances::open(root, ledger).map_err(|e| e.to_string())?;
    for left in tracefs::leftover_instances(set.root()) {
        warnings.push(format!(
            "tracefs instance {} was left by a killed latlab run: run `latlab cleanup` to free its memory",
            left.display()
        ));
    }
    let spec = if opts.timer_irq {
        InstanceSpec::RECORDER_FULL
    } else {
        InstanceSpec::RECORDER
    };
    let first = set
        .create("", opts.buffer_kb, &spec)
        .map_err(|e| e.to_string())?;
    // Standbys: while one stopped instance is copied, another is armed, and a third can
    // take over when that one stops too (spikes come in bursts under load). One instance
    // read as binary pages is re-armed in place; read as text (a layout latlab does not
    // decode) it could not be re-armed before its copy, so it gets two standbys.
    let binary = binary_decoder(&first.raw);
    let (missing, first_warnings) = (first.missing.clone(), first.warnings.clone());
    let instances = match (&binary, opts.instances) {
        (Err(_), 1) => 3,
        (_, n) => n.max(1),
    };
    for k in 1..instances {
        let suffix = ((b'a' + k as u8) as char).to_string();
        if let Err(e) = set.create(&suffix, opts.buffer_kb, &spec) {
            warnings.push(format!(
                "only {k} recorder instance(s) of {instances} ({e}): the recorder re-arms less often while spikes are copied"
            ));
            break;
        }
    }
    if !missing.is_empty() {
        warnings.push(format!(
            "tracing without these events (not in this kernel): {}",
            missing.join(", ")
        ));
    }
    warnings.extend(first_warnings);
    if let Err(why) = &binary {
        warnings.push(format!(
            "the recorder reads spikes' buffers as text (slower, and it delays the measured CPUs): {why}"
        ));
    }
    Ok(Common::new(set, binary, opts, cpus))
}
