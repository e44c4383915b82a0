//! The kernel's timerlat tracer as latlab's measurement (`latlab run --backend timerlat`).
//!
//! The tracer runs in latlab's own tracefs instance (`instances/latlab-<pid>-timerlat`, never
//! the top level); its settings are global (`osnoise/`: the CPUs, the period, the stop
//! thresholds, the workload option), so each is saved in the ledger before it is changed and
//! restored at the end, or by `latlab cleanup` after a SIGKILL. Measuring threads are either
//! latlab's own, one process per CPU waiting on `osnoise/per_cpu/cpuN/timerlat_fd` (as
//! `rtla timerlat -u`: each activation then gives the IRQ, thread and return-to-user latency),
//! or, where the kernel has no `timerlat_fd` (6.1), the kernel's `timerlat/N` threads (as
//! `rtla timerlat -k`: IRQ and thread latency). The samples are read from the instance's
//! binary pages ([`latlab_core::trace::raw::TimerlatDecoder`]) by one reader thread on a
//! housekeeping CPU, which publishes them into each CPU's [`ThreadShared`] as the hot loop
//! does, so the run's collector sees a measurement like any other.
//!
//! Why processes and not threads: stopping the tracer (`tracing_on` 0, the tracer changed, the
//! instance removed, `osnoise/cpus` written) while a thread holds a `timerlat_fd` makes the
//! kernel SIGKILL that thread's process (trace_osnoise.c `stop_kthread`). A worker process
//! keeps that from ever taking latlab itself, which then still restores the machine.
//!
//! [`ThreadShared`]: crate::live::ThreadShared

mod engine;
pub(crate) mod setup;
pub(crate) mod workers;

pub use engine::{tracefs_root, Config, Engine};
pub use setup::{
    conflicts, hwlat_beside, probe, Instance, InstanceConfig, Threads, OSNOISE_CONFLICTS,
    TIMERLAT_CONFLICTS,
};

#[cfg(test)]
mod tests;
