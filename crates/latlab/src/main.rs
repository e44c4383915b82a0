//! latlab: a Linux latency lab. See README.md and `latlab --help`.

use std::process::ExitCode;

use clap::Parser;

mod cli;
mod cli_modes;
mod cli_scenario;
mod cmd;
mod load_session;
mod rundir;
mod trace_session;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match cmd::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("latlab: error: {e:#}");
            ExitCode::from(1)
        }
    }
}
