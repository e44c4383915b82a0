//! latlab-sys: everything latlab does to or reads from a Linux machine.
//!
//! The RT measurement threads and their loop, the tracefs recorder, procfs/sysfs readers (with
//! an injectable root for tests), load supervision, and the [`ledger`] through which every
//! change to the machine is saved before it is made and restored after. Statistics and
//! rendering live elsewhere (`latlab-core`, `latlab-report`).

pub mod child;
pub mod hooks;
pub mod hotloop;
pub mod inventory;
pub mod ledger;
pub mod live;
pub mod loads;
pub mod mapfile;
pub mod measure;
pub mod modes;
pub mod osnoise;
pub mod pimutex;
/// Support for the test suites (root checks, the machine-wide lock): only in test builds.
#[cfg(any(test, feature = "test-hooks"))]
pub mod privileged;
pub mod procstat;
pub mod quiet;
pub mod rt;
pub mod safefile;
pub mod scenario;
pub mod shortio;
pub mod tasks;
pub mod timerlat;
pub mod tracefs;
