//! Test hooks: faults the test suites inject into a real run through the environment. They
//! exist only in builds with the `test-hooks` feature, which `cargo test` turns on (the
//! `latlab` crate's dev-dependency on this one) and release builds never do: without it each
//! hook is a constant `None`, and the code it guards is compiled away.

/// `LATLAB_INJECT_SLOW_ITER=N`: period N (0-based) of every jitter/audio thread does twice the
/// work (tests/modes.rs checks the slow period shows in the execution-time histogram).
pub fn slow_iteration() -> Option<u64> {
    env_u64("LATLAB_INJECT_SLOW_ITER")
}

/// `LATLAB_INJECT_PANIC_MS=N`: the run's collector panics N ms into the measurement (the
/// fault suite checks a crashed collector still leaves the machine as it found it).
pub fn collector_panic_ms() -> Option<u64> {
    env_u64("LATLAB_INJECT_PANIC_MS")
}

/// `LATLAB_INTERVAL_MS=N`: a run closes its per-interval histograms every N ms instead of
/// every minute (tests/plots.rs draws a heat map of a few seconds).
pub fn interval_ms() -> Option<u64> {
    env_u64("LATLAB_INTERVAL_MS")
}

#[cfg(feature = "test-hooks")]
fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

#[cfg(not(feature = "test-hooks"))]
fn env_u64(_name: &str) -> Option<u64> {
    None
}
