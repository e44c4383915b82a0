//! `latlab check`: read the machine's inventory, judge it, print the findings worst first with
//! their fixes, then the inventory. Changes nothing on the machine; on a live machine it samples
//! `/proc/stat` for a second to see the current steal time. Works without root and says what it
//! could not read. The hidden `--root DIR` reads a saved or fixture tree instead of `/`.

use std::path::PathBuf;
use std::process::ExitCode;

use latlab_core::findings::findings;
use latlab_report::check::{render_json, render_text};

use crate::cli::{CheckArgs, RunFormat};

pub fn check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let root = args.root.unwrap_or_else(|| PathBuf::from("/"));
    if !root.is_dir() {
        anyhow::bail!(
            "--root {}: not a directory; give a tree holding proc/ and sys/ (or leave --root out)",
            root.display()
        );
    }
    let inv = latlab_sys::inventory::collect(&root);
    let found = findings(&inv);
    let bytes = match args.format {
        RunFormat::Text => render_text(&inv, &found),
        RunFormat::Json => render_json(&inv, &found),
    };
    crate::stdout::write(&bytes)?;
    Ok(ExitCode::SUCCESS)
}
