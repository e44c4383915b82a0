//! What `latlab bench …` runs on the machine; the CLI's `cmd/bench` plans each bench from its
//! flags, calls these and prints the figures (the pure parts — medians, per-pair ratios, the
//! 1 µs histogram figures, the synthetic day run — are `latlab_core::bench`).
//!
//! The runs the benches compare are latlab itself as a child ([`child`]: `latlab run` or
//! `latlab profile`, the whole lifecycle a user runs, in a fresh process each time, so its
//! memory figures are its own), alternated with the other run of their pair; the other tools
//! (cyclictest, rt-tests, `wc`) are children too. The one bench that changes the machine
//! in-process, `bench analyze`'s [`capture`], runs on the session (its tick loop) and the
//! recorder's tracefs set-up.

pub mod capture;
pub mod child;
pub mod db;
pub mod loads;
pub mod measure;
pub mod noise;
pub mod profile;
pub mod trace;
pub mod wakeup;
