//! The schema, as versioned migrations: `latlab_migrations` holds one row per version
//! applied. A database holding a version this latlab does not know was written by a newer
//! latlab and is refused (nothing is written to it).
//!
//! The SQL is the common part of SQLite's and PostgreSQL's: TEXT, BIGINT (booleans as 0/1),
//! DOUBLE PRECISION; times as RFC 3339 text plus seconds since the epoch for ordering.

use crate::{msg, Result, Store, Ty, Val};

/// Migrations in order; the schema version is their count.
pub const MIGRATIONS: &[&str] = &[
    // 1: the first schema.
    "CREATE TABLE machines (
        machine_id TEXT PRIMARY KEY,
        hostname TEXT,
        cpu_model TEXT,
        dmi TEXT,
        arch TEXT,
        first_seen_unix BIGINT NOT NULL
    );
    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        machine_id TEXT NOT NULL REFERENCES machines (machine_id),
        label TEXT NOT NULL,
        kernel_release TEXT,
        kernel_version TEXT,
        preemption TEXT,
        source TEXT NOT NULL,
        mode TEXT NOT NULL,
        config_json TEXT NOT NULL,
        started_at TEXT,
        started_unix BIGINT,
        stored_unix BIGINT NOT NULL,
        duration_ns BIGINT,
        complete BIGINT NOT NULL,
        cpus BIGINT NOT NULL,
        samples BIGINT NOT NULL,
        min_ns BIGINT,
        mean_ns BIGINT,
        median_ns BIGINT,
        p99_ns BIGINT,
        p999_ns BIGINT,
        p9999_ns BIGINT,
        max_ns BIGINT,
        missed BIGINT NOT NULL,
        tool_version TEXT,
        run_json TEXT NOT NULL
    );
    CREATE INDEX runs_time ON runs (started_unix);
    CREATE INDEX runs_machine ON runs (machine_id);
    CREATE INDEX runs_kernel ON runs (kernel_release);
    CREATE INDEX runs_label ON runs (label);
    CREATE TABLE cpu_stats (
        run_id TEXT NOT NULL REFERENCES runs (run_id),
        cpu BIGINT NOT NULL,
        samples BIGINT NOT NULL,
        min_ns BIGINT,
        mean_ns BIGINT,
        median_ns BIGINT,
        p99_ns BIGINT,
        p999_ns BIGINT,
        p9999_ns BIGINT,
        max_ns BIGINT,
        missed BIGINT NOT NULL,
        PRIMARY KEY (run_id, cpu)
    );
    CREATE TABLE histograms (
        run_id TEXT NOT NULL REFERENCES runs (run_id),
        cpu BIGINT NOT NULL,
        lower_ns BIGINT NOT NULL,
        count BIGINT NOT NULL,
        PRIMARY KEY (run_id, cpu, lower_ns)
    );
    CREATE TABLE spikes (
        run_id TEXT NOT NULL REFERENCES runs (run_id),
        idx BIGINT NOT NULL,
        cpu BIGINT NOT NULL,
        at_ns BIGINT NOT NULL,
        latency_ns BIGINT NOT NULL,
        trace_file TEXT,
        PRIMARY KEY (run_id, idx)
    );
    CREATE TABLE spike_causes (
        run_id TEXT NOT NULL REFERENCES runs (run_id),
        spike_idx BIGINT NOT NULL,
        idx BIGINT NOT NULL,
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        pid BIGINT NOT NULL,
        ns BIGINT NOT NULL,
        PRIMARY KEY (run_id, spike_idx, idx)
    );
    CREATE TABLE loads (
        run_id TEXT NOT NULL REFERENCES runs (run_id),
        idx BIGINT NOT NULL,
        profile TEXT NOT NULL,
        command TEXT NOT NULL,
        exit_code BIGINT,
        ops DOUBLE PRECISION,
        PRIMARY KEY (run_id, idx)
    );
    CREATE TABLE findings (
        run_id TEXT NOT NULL REFERENCES runs (run_id),
        idx BIGINT NOT NULL,
        finding_id TEXT NOT NULL,
        severity TEXT NOT NULL,
        title TEXT NOT NULL,
        PRIMARY KEY (run_id, idx)
    );",
];

/// The schema version this latlab writes.
pub fn version() -> i64 {
    MIGRATIONS.len() as i64
}

/// The version the database holds (0: empty).
pub fn current(s: &mut (impl Store + ?Sized)) -> Result<i64> {
    let r = s.query("SELECT MAX(version) FROM latlab_migrations", &[], &[Ty::I])?;
    Ok(r.first().and_then(|r| r[0].int()).unwrap_or(0))
}

/// Bring the database to [`version`], in one transaction; refuse a newer one.
pub fn migrate(s: &mut (impl Store + ?Sized)) -> Result<()> {
    // The common case first, without a write lock: the database is current.
    if let Ok(have) = current(s) {
        if have > version() {
            return Err(newer(s.shown(), have));
        }
        if have == version() {
            return Ok(());
        }
    }
    s.begin_write()?;
    let r = (|| {
        s.lock_migrations()?;
        s.batch(
            "CREATE TABLE IF NOT EXISTS latlab_migrations (version BIGINT PRIMARY KEY, applied_unix BIGINT NOT NULL)",
        )?;
        // Another process may have migrated while this one waited for the lock.
        let have = current(s)?;
        if have > version() {
            return Err(newer(s.shown(), have));
        }
        for (i, m) in MIGRATIONS.iter().enumerate().skip(have as usize) {
            s.batch(m)?;
            s.exec(
                "INSERT INTO latlab_migrations (version, applied_unix) VALUES (?, ?)",
                &[Val::I(Some(i as i64 + 1)), Val::I(Some(crate::now_unix()))],
            )?;
        }
        Ok(())
    })();
    match r {
        Ok(()) => s.commit(),
        Err(e) => {
            s.rollback();
            Err(e)
        }
    }
}

fn newer(db: String, have: i64) -> crate::StoreError {
    msg(format!(
        "the results database {db} has schema version {have}, newer than this latlab knows ({}): use a newer latlab",
        version()
    ))
}
