//! latlab: a Linux latency lab. See README.md and `latlab --help`.

use std::process::ExitCode;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::Parser;

// First: its `out!`/`outln!` macros are used by every command module below.
#[macro_use]
mod stdout;

mod cli;
mod cmd;
mod plan;

fn main() -> ExitCode {
    // A load's watchdog (latlab_sys::loads::supervisor): latlab's own executable, started by
    // the load supervisor; nothing else of latlab runs in it.
    let args: Vec<std::ffi::OsString> = std::env::args_os().take(6).collect();
    if args
        .get(1)
        .is_some_and(|a| a == latlab_sys::loads::supervisor::WATCHDOG_ARG)
    {
        latlab_sys::loads::supervisor::watchdog_main(&args);
    }
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    match cmd::dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            // Errors quote input (a file's values, a serde message naming a bad variant):
            // one escaping for all of them, so nothing in them reaches the terminal raw.
            eprintln!(
                "latlab: error: {}",
                latlab_core::escape::escape(&format!("{e:#}"))
            );
            ExitCode::from(1)
        }
    }
}

/// Help and version print and exit 0; every usage error (unknown flag or command, bad value)
/// exits 1, as every other error does. clap's own code for them is 2, which latlab reserves for
/// "a sample exceeded --max-latency": a typo in a CI job must not read as a latency failure.
fn usage_error(e: clap::Error) -> ExitCode {
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            // A closed or full stdout while printing help: nothing more to say.
            let _ = e.print();
            ExitCode::SUCCESS
        }
        // A value latlab's own parser refused: one line naming the flag, as every other
        // error (`latlab: error: --interval: 'soon' is not a latency: expected …`).
        ErrorKind::ValueValidation => {
            let arg = match e.get(ContextKind::InvalidArg) {
                Some(ContextValue::String(a)) => a.split(' ').next().unwrap_or(a).to_string(),
                _ => "a flag".into(),
            };
            match std::error::Error::source(&e) {
                Some(why) => eprintln!(
                    "latlab: error: {arg}: {}",
                    latlab_core::escape::escape(&why.to_string())
                ),
                None => eprintln!("latlab: error: {arg}: invalid value"),
            }
            ExitCode::from(1)
        }
        // Two flags that exclude each other: one line naming both (`profile --no-measure
        // --interval 1ms`: there is no measuring thread to take the interval).
        ErrorKind::ArgumentConflict => {
            let name = |k: ContextKind| match e.get(k) {
                Some(ContextValue::String(a)) => a.split(' ').next().unwrap_or(a).to_string(),
                Some(ContextValue::Strings(v)) => v
                    .iter()
                    .map(|a| a.split(' ').next().unwrap_or(a))
                    .collect::<Vec<_>>()
                    .join(", "),
                _ => "another flag".into(),
            };
            eprintln!(
                "latlab: error: {} cannot be used with {}; remove one of them",
                name(ContextKind::InvalidArg),
                name(ContextKind::PriorArg)
            );
            ExitCode::from(1)
        }
        // `latlab` alone, `latlab bench`: the help, as a usage error.
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(1)
        }
        // A mistyped command: one line, with the command it is one typo away from.
        ErrorKind::InvalidSubcommand => {
            let word = match e.get(ContextKind::InvalidSubcommand) {
                Some(ContextValue::String(w)) => w.clone(),
                _ => String::new(),
            };
            let cmd = <cli::Cli as clap::CommandFactory>::command();
            let names: Vec<String> = cmd
                .get_subcommands()
                .map(|c| c.get_name().to_string())
                .collect();
            let hint = latlab_core::suggest::closest(&word, names.iter().map(String::as_str))
                .map(|c| format!("; did you mean '{c}'?"))
                .unwrap_or_default();
            eprintln!(
                "latlab: error: unknown command '{}'{hint} (latlab --help lists the commands)",
                latlab_core::escape::escape(&word)
            );
            ExitCode::from(1)
        }
        // Everything else clap refuses (an unknown flag, a missing argument, a value not among
        // the choices): clap's first line and its tip, in latlab's one-line form.
        _ => {
            let text = e.render().to_string();
            let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
            let first = lines.next().unwrap_or("invalid command line");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            let rest: Vec<&str> = lines
                .filter(|l| l.starts_with("tip:") || l.starts_with("[possible values"))
                .collect();
            let mut line = latlab_core::escape::escape(first);
            if !rest.is_empty() {
                line = format!("{line}; {}", latlab_core::escape::escape(&rest.join("; ")));
            }
            eprintln!("latlab: error: {line} (add --help for usage)");
            ExitCode::from(1)
        }
    }
}
