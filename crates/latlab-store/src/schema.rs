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
    // 2: runs get an integer key, `id`, and the rows of a run reference it (`run`) instead of
    // repeating its text id (issue 30: a 1 MB run id made a 222 MB file). Tables are made
    // anew, filled from the old ones (ids in the order the runs were stored), the old ones
    // dropped and the new ones renamed.
    "CREATE TABLE runs_v2 (
        id {serial},
        run_id TEXT NOT NULL UNIQUE,
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
    INSERT INTO runs_v2 (run_id, machine_id, label, kernel_release, kernel_version, preemption, source,
        mode, config_json, started_at, started_unix, stored_unix, duration_ns, complete, cpus, samples,
        min_ns, mean_ns, median_ns, p99_ns, p999_ns, p9999_ns, max_ns, missed, tool_version, run_json)
    SELECT run_id, machine_id, label, kernel_release, kernel_version, preemption, source,
        mode, config_json, started_at, started_unix, stored_unix, duration_ns, complete, cpus, samples,
        min_ns, mean_ns, median_ns, p99_ns, p999_ns, p9999_ns, max_ns, missed, tool_version, run_json
    FROM runs ORDER BY stored_unix, run_id;
    CREATE TABLE cpu_stats_v2 (
        run BIGINT NOT NULL REFERENCES runs_v2 (id),
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
        PRIMARY KEY (run, cpu)
    );
    INSERT INTO cpu_stats_v2 (run, cpu, samples, min_ns, mean_ns, median_ns, p99_ns, p999_ns, p9999_ns, max_ns, missed)
    SELECT r.id, c.cpu, c.samples, c.min_ns, c.mean_ns, c.median_ns, c.p99_ns, c.p999_ns, c.p9999_ns, c.max_ns, c.missed
    FROM cpu_stats c JOIN runs_v2 r ON r.run_id = c.run_id;
    CREATE TABLE histograms_v2 (
        run BIGINT NOT NULL REFERENCES runs_v2 (id),
        cpu BIGINT NOT NULL,
        lower_ns BIGINT NOT NULL,
        count BIGINT NOT NULL,
        PRIMARY KEY (run, cpu, lower_ns)
    );
    INSERT INTO histograms_v2 (run, cpu, lower_ns, count)
    SELECT r.id, h.cpu, h.lower_ns, h.count FROM histograms h JOIN runs_v2 r ON r.run_id = h.run_id;
    CREATE TABLE spikes_v2 (
        run BIGINT NOT NULL REFERENCES runs_v2 (id),
        idx BIGINT NOT NULL,
        cpu BIGINT NOT NULL,
        at_ns BIGINT NOT NULL,
        latency_ns BIGINT NOT NULL,
        trace_file TEXT,
        PRIMARY KEY (run, idx)
    );
    INSERT INTO spikes_v2 (run, idx, cpu, at_ns, latency_ns, trace_file)
    SELECT r.id, s.idx, s.cpu, s.at_ns, s.latency_ns, s.trace_file FROM spikes s JOIN runs_v2 r ON r.run_id = s.run_id;
    CREATE TABLE spike_causes_v2 (
        run BIGINT NOT NULL REFERENCES runs_v2 (id),
        spike_idx BIGINT NOT NULL,
        idx BIGINT NOT NULL,
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        pid BIGINT NOT NULL,
        ns BIGINT NOT NULL,
        PRIMARY KEY (run, spike_idx, idx)
    );
    INSERT INTO spike_causes_v2 (run, spike_idx, idx, kind, name, pid, ns)
    SELECT r.id, c.spike_idx, c.idx, c.kind, c.name, c.pid, c.ns FROM spike_causes c JOIN runs_v2 r ON r.run_id = c.run_id;
    CREATE TABLE loads_v2 (
        run BIGINT NOT NULL REFERENCES runs_v2 (id),
        idx BIGINT NOT NULL,
        profile TEXT NOT NULL,
        command TEXT NOT NULL,
        exit_code BIGINT,
        ops DOUBLE PRECISION,
        PRIMARY KEY (run, idx)
    );
    INSERT INTO loads_v2 (run, idx, profile, command, exit_code, ops)
    SELECT r.id, l.idx, l.profile, l.command, l.exit_code, l.ops FROM loads l JOIN runs_v2 r ON r.run_id = l.run_id;
    CREATE TABLE findings_v2 (
        run BIGINT NOT NULL REFERENCES runs_v2 (id),
        idx BIGINT NOT NULL,
        finding_id TEXT NOT NULL,
        severity TEXT NOT NULL,
        title TEXT NOT NULL,
        PRIMARY KEY (run, idx)
    );
    INSERT INTO findings_v2 (run, idx, finding_id, severity, title)
    SELECT r.id, f.idx, f.finding_id, f.severity, f.title FROM findings f JOIN runs_v2 r ON r.run_id = f.run_id;
    DROP TABLE findings;
    DROP TABLE loads;
    DROP TABLE spike_causes;
    DROP TABLE spikes;
    DROP TABLE histograms;
    DROP TABLE cpu_stats;
    DROP TABLE runs;
    ALTER TABLE runs_v2 RENAME TO runs;
    ALTER TABLE cpu_stats_v2 RENAME TO cpu_stats;
    ALTER TABLE histograms_v2 RENAME TO histograms;
    ALTER TABLE spikes_v2 RENAME TO spikes;
    ALTER TABLE spike_causes_v2 RENAME TO spike_causes;
    ALTER TABLE loads_v2 RENAME TO loads;
    ALTER TABLE findings_v2 RENAME TO findings;
    CREATE INDEX runs_time ON runs (started_unix);
    CREATE INDEX runs_machine ON runs (machine_id);
    CREATE INDEX runs_kernel ON runs (kernel_release);
    CREATE INDEX runs_label ON runs (label);",
];

/// A migration's SQL for this engine: `{serial}` is an integer primary key the database
/// numbers (SQLite's rowid alias; a PostgreSQL identity column).
fn for_engine(engine: &str, sql: &str) -> String {
    let serial = match engine {
        "postgres" => "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
        _ => "INTEGER PRIMARY KEY",
    };
    sql.replace("{serial}", serial)
}

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
    migrate_to(s, version())
}

/// Bring the database to version `target` (at most [`version`]; the tests of a migration
/// start from the version before it), in one transaction; refuse a newer one.
pub fn migrate_to(s: &mut (impl Store + ?Sized), target: i64) -> Result<()> {
    let target = target.min(version());
    // The common case first, without a write lock: the database is current.
    if let Ok(have) = current(s) {
        if have > version() {
            return Err(newer(s.shown(), have));
        }
        if have >= target {
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
        for (i, m) in MIGRATIONS
            .iter()
            .enumerate()
            .take(target as usize)
            .skip(have as usize)
        {
            s.batch_slow(&for_engine(s.engine(), m))?;
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
