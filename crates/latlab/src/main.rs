//! latlab: a Linux latency lab. See README.md and `latlab --help`.

use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::Parser;

mod cli;
mod cli_modes;
mod cli_scenario;
mod cmd;
mod load_session;
mod rundir;
mod trace_session;

fn main() -> ExitCode {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    match cmd::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("latlab: error: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// Help and version print and exit 0; every usage error (unknown flag or command, bad value)
/// exits 1, as every other error does. clap's own code for them is 2, which latlab reserves for
/// "a sample exceeded --max-latency": a typo in a CI job must not read as a latency failure.
fn usage_error(e: clap::Error) -> ExitCode {
    let ok = matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion);
    // A closed or full stdout/stderr while printing help or the error: nothing more to say.
    let _ = e.print();
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
