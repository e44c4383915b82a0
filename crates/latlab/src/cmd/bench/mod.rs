//! `latlab bench …`: benchmarks that print figures (never timed tests). Each one plans from
//! its flags (checked before anything runs), runs on the engine (`latlab_engine::bench`: the
//! runs, alternated in pairs; `latlab_core::bench`: the statistics) and prints its figures.

use std::process::ExitCode;

use crate::cli::{BenchArgs, BenchCommand};

mod db;
mod loads;
mod measure;
mod noise;
mod profile;
mod report;
mod tail;
mod trace;
mod wakeup;

pub fn bench(args: BenchArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        BenchCommand::Wakeup {
            cpu,
            duration,
            pairs,
        } => wakeup::bench(cpu, duration.0, pairs),
        BenchCommand::Measure {
            cpu,
            duration,
            pairs,
        } => measure::bench(cpu, duration.0, pairs),
        BenchCommand::Noise {
            cpu,
            duration,
            pairs,
        } => noise::bench(cpu, duration.0, pairs),
        BenchCommand::Loads {
            profiles,
            duration,
            cpus,
            format,
            results,
            load_dir,
        } => loads::bench(loads::Opts {
            profiles,
            duration,
            cpus,
            format,
            results,
            load_dir,
        }),
        BenchCommand::Trace {
            cpu,
            duration,
            pairs,
            threshold,
            trace_instances,
        } => trace::overhead(cpu, duration.0, pairs, threshold.0, trace_instances),
        BenchCommand::Profile {
            cpu,
            duration,
            pairs,
            loads,
            format,
        } => profile::bench(
            latlab_engine::bench::profile::Plan {
                cpu,
                duration_ns: duration.0,
                loads,
            },
            pairs,
            format,
        ),
        BenchCommand::Analyze {
            trace,
            size,
            keep,
            pairs,
        } => trace::analyze(trace, size.0, keep, pairs),
        BenchCommand::Report { reps } => report::bench(reps),
        BenchCommand::Tail { reps } => tail::bench(reps),
        BenchCommand::Db {
            runs,
            reps,
            postgres,
        } => db::bench(runs, reps, postgres),
    }
}
