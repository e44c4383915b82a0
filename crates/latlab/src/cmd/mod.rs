//! One module per command; `dispatch` routes to them.

use std::process::ExitCode;

use crate::cli::{Cli, Command};

pub mod analyze;
pub mod bench;
pub mod check;
pub mod cleanup;
pub mod compare;
pub mod cyclictest;
pub mod db;
pub mod export;
pub mod import;
pub mod loads;
pub mod plan;
pub mod profile;
pub mod report;
pub mod run;
pub mod scenario;

pub fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Run(a) => run::run(a),
        Command::Report(a) => report::report(a),
        Command::Compare(a) => compare::compare(a),
        Command::Import(a) => import::import(a),
        Command::Analyze(a) => analyze::analyze(a),
        Command::Check(a) => check::check(a),
        Command::Loads(a) => loads::loads(a),
        Command::Cleanup(a) => cleanup::cleanup(a),
        Command::Bench(a) => bench::bench(a),
        Command::Scenario(a) => scenario::scenario(a),
        Command::History(a) => db::history(a),
        Command::Db(a) => db::db(a),
        Command::Profile(a) => profile::profile(a),
        Command::Export(a) => export::export(a),
        Command::Cyclictest(a) => cyclictest::cyclictest(a),
        Command::Plan(a) => plan::plan(a),
        Command::Man(a) => crate::cli::man::man(a),
        Command::Completions(a) => crate::cli::man::completions(a),
    }
}
