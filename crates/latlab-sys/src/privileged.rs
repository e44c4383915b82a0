//! Support for tests that need root, tracefs or SCHED_FIFO.
//!
//! They run for real where they can (CI runs as root). Elsewhere they skip with a message
//! saying why, and `LATLAB_REQUIRE_PRIVILEGED=1` turns such a skip into a failure. They also
//! run one at a time, across test binaries: RT threads on both CPUs of a small machine distort
//! each other and can starve the test harness itself.

use std::fs::File;

/// Why privileged tests cannot run here, or None when they can.
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not running as root".into());
    }
    None
}

/// True when the test may go on. Prints why it skips; panics when skipping is not allowed.
pub fn check(test: &str) -> bool {
    match unavailable() {
        None => true,
        Some(why) => {
            if std::env::var("LATLAB_REQUIRE_PRIVILEGED").is_ok_and(|v| v == "1") {
                panic!("{test}: LATLAB_REQUIRE_PRIVILEGED=1 but {why}");
            }
            eprintln!("skipping {test}: {why} (privileged test; run as root to include it)");
            false
        }
    }
}

/// Holds the machine-wide lock for privileged tests; released on drop.
pub struct PrivilegedLock(#[allow(dead_code)] File);

/// Take the machine-wide privileged-test lock (blocks until free).
pub fn lock() -> PrivilegedLock {
    let f = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(std::env::temp_dir().join("latlab-privileged-tests.lock"))
        .expect("open the privileged-test lock file");
    f.lock().expect("lock the privileged-test lock file");
    PrivilegedLock(f)
}

/// `check` + `lock` in one: `let Some(_g) = privileged::guard("name") else { return };`
pub fn guard(test: &str) -> Option<PrivilegedLock> {
    check(test).then(lock)
}
