//! `latlab profile`: a run with the scheduler profile recorded over it (the engine's
//! [`latlab_engine::profile`]).

use std::process::ExitCode;

use latlab_engine::profile::{ProfileOpts, MAX_WINDOW};

use crate::cli::ProfileArgs;

pub fn profile(a: ProfileArgs) -> anyhow::Result<ExitCode> {
    if a.profile_window.0 > MAX_WINDOW {
        anyhow::bail!(
            "--profile-window {}: at most 1GiB (latlab export reads the window whole); give a smaller window",
            a.profile_window.0
        );
    }
    let opts = ProfileOpts {
        top: a.profile_top,
        window_bytes: a.profile_window.0,
        buffer_kb: a.profile_buffer.0.div_ceil(1024).max(64),
        duration_ns: a.run.duration.0,
        no_measure: a.no_measure,
    };
    super::run::run_with(a.run, Some(opts), &mut latlab_engine::run::NoHooks).map(|o| o.code)
}
