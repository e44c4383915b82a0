//! latlab's results database: one schema (written by hand, [`schema`]) behind one trait,
//! [`Store`], with two engines: SQLite ([`sqlite`], embedded, the default: a file under the
//! user's data directory) and PostgreSQL ([`pg`], `postgres://…`, for a lab where many
//! machines write to one server).
//!
//! An engine only runs SQL ([`Store::exec`], [`Store::query`], transactions); everything
//! latlab does with a database — push a run, list runs, fetch one — is written once, as the
//! trait's provided methods, with the same SQL text on both engines (`?` placeholders, turned
//! into `$N` for PostgreSQL).
//!
//! A run is stored once, by its run id: a push inserts the run row with `ON CONFLICT DO
//! NOTHING` inside a transaction and inserts the rest only when that row was new, so a run
//! pushed twice, or by two processes at once, is stored once. The whole `run.json` is kept
//! byte for byte (`runs.run_json`): `db pull` writes it back exactly.

// Without its engines (the fuzz build) the waits and helpers only they use are unused.
#![cfg_attr(not(feature = "engines"), allow(dead_code, unused_imports))]

use std::fmt;
use std::path::PathBuf;

use latlab_core::record::RunRecord;

pub mod limits;
#[cfg(feature = "engines")]
pub mod pg;
pub mod rows;
pub mod schema;
#[cfg(feature = "engines")]
pub mod sqlite;

pub use limits::Limits;
pub use rows::{is_run_id, prepare, run_id_of, Prepared};

/// A parameter or a column value (typed, so a NULL has a type on PostgreSQL).
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    I(Option<i64>),
    F(Option<f64>),
    T(Option<String>),
}

impl Val {
    pub fn int(&self) -> Option<i64> {
        match self {
            Val::I(v) => *v,
            _ => None,
        }
    }
    pub fn text(&self) -> Option<&str> {
        match self {
            Val::T(v) => v.as_deref(),
            _ => None,
        }
    }
}

fn t(s: impl Into<String>) -> Val {
    Val::T(Some(s.into()))
}
/// Nanoseconds and counts are u64 in latlab, BIGINT (i64) in the database: beyond 2^63 they
/// are stored as i64::MAX (292 years of nanoseconds; no real count gets there).
pub(crate) fn u(v: u64) -> Val {
    Val::I(Some(i64::try_from(v).unwrap_or(i64::MAX)))
}
pub(crate) fn ou(v: Option<u64>) -> Val {
    Val::I(v.map(|v| i64::try_from(v).unwrap_or(i64::MAX)))
}

/// The type of a column a query reads.
#[derive(Debug, Clone, Copy)]
pub enum Ty {
    I,
    F,
    T,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A message for the user, naming the database and what to do.
    #[error("{0}")]
    Msg(String),
    /// A run id matches no stored run.
    #[error("no run with id `{0}` in the results database {1}")]
    NotFound(String, String),
}

pub type Result<T> = std::result::Result<T, StoreError>;

fn msg(s: impl Into<String>) -> StoreError {
    StoreError::Msg(s.into())
}

/// Where a database is: parsed from `--db` / `LATLAB_DB`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Url {
    Sqlite(PathBuf),
    Postgres(String),
}

impl Url {
    /// `postgres://…` or `postgresql://…`: PostgreSQL; `sqlite:PATH`, `sqlite://PATH` or a
    /// plain path: a SQLite file. Any other `scheme://` is refused.
    pub fn parse(s: &str) -> Result<Url> {
        let shown = escape(s);
        if s.is_empty() {
            return Err(msg(
                "--db: empty database URL: give a SQLite file path or postgres://host/dbname",
            ));
        }
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            return Ok(Url::Postgres(s.to_string()));
        }
        if let Some(p) = s
            .strip_prefix("sqlite://")
            .or_else(|| s.strip_prefix("sqlite:"))
        {
            if p.is_empty() {
                return Err(msg(format!(
                    "--db {shown}: no file after sqlite:; give sqlite:PATH"
                )));
            }
            return sqlite_path(p, &shown);
        }
        if let Some(i) = s.find("://") {
            let scheme = &s[..i];
            if !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
            {
                return Err(msg(format!(
                    "--db {shown}: unknown database scheme `{}`; use a SQLite file path (sqlite:PATH) or postgres://host/dbname",
                    escape(scheme)
                )));
            }
        }
        sqlite_path(s, &shown)
    }

    /// The URL for messages: a PostgreSQL password replaced by `***`, control characters
    /// escaped.
    pub fn shown(&self) -> String {
        match self {
            Url::Sqlite(p) => escape(&p.display().to_string()),
            Url::Postgres(u) => escape(&latlab_core::secrets::mask(u)),
        }
    }
}

/// A SQLite file path, refusing what SQLite would not take as a plain file: `:memory:` (an
/// in-memory database keeps nothing) and `file:` URIs (their query can ask for memory, or any
/// VFS option).
fn sqlite_path(p: &str, shown: &str) -> Result<Url> {
    if p == ":memory:" {
        return Err(msg(format!(
            "--db {shown}: an in-memory database keeps nothing; give the path of a SQLite database file (or --no-db to not record runs)"
        )));
    }
    if p.get(..5).is_some_and(|f| f.eq_ignore_ascii_case("file:")) {
        return Err(msg(format!(
            "--db {shown}: SQLite URIs (file:…) are not taken; give the path of a SQLite database file (./{shown} for a file of that name)"
        )));
    }
    Ok(Url::Sqlite(PathBuf::from(p)))
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown())
    }
}

/// Untrusted text for a terminal line.
pub fn escape(s: &str) -> String {
    s.escape_debug().to_string()
}

/// The default database: `$XDG_DATA_HOME/latlab/runs.sqlite`, else
/// `~/.local/share/latlab/runs.sqlite`.
pub fn default_path() -> Result<PathBuf> {
    let base = match std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(h) => PathBuf::from(h).join(".local/share"),
            None => {
                return Err(msg(
                    "no results database: neither XDG_DATA_HOME nor HOME is set; give one with --db PATH (or LATLAB_DB), or --no-db",
                ))
            }
        },
    };
    Ok(base.join("latlab").join("runs.sqlite"))
}

/// Open (creating and migrating as needed) the database `url`; None: the default one, whose
/// directory is made (mode 0700) and checked. Each wait is bounded by `LATLAB_DB_TIMEOUT`
/// (10 s when unset).
#[cfg(feature = "engines")]
pub fn open(url: Option<&str>) -> Result<Box<dyn Store>> {
    open_with(url, Limits::from_env()?)
}

/// [`open`] with these limits (a signal flag, a bound of the caller's).
#[cfg(feature = "engines")]
pub fn open_with(url: Option<&str>, limits: Limits) -> Result<Box<dyn Store>> {
    open_migrated(url, limits, schema::version())
}

/// A database brought to schema version `version` only, for the tests of a later migration.
#[cfg(feature = "engines")]
#[doc(hidden)]
pub fn open_at_version(url: Option<&str>, version: i64) -> Result<Box<dyn Store>> {
    open_migrated(url, Limits::from_env()?, version)
}

#[cfg(feature = "engines")]
fn open_migrated(url: Option<&str>, limits: Limits, version: i64) -> Result<Box<dyn Store>> {
    let url = match url {
        Some(u) => Url::parse(u)?,
        None => {
            let p = default_path()?;
            if let Some(dir) = p.parent() {
                latlab_sys::safefile::ensure_private_dir(dir).map_err(|e| {
                    msg(format!(
                        "cannot use the results database directory {}: {e}; give another database with --db PATH (or LATLAB_DB)",
                        escape(&dir.display().to_string())
                    ))
                })?;
            }
            Url::Sqlite(p)
        }
    };
    let mut s: Box<dyn Store> = match &url {
        Url::Sqlite(p) => Box::new(sqlite::Sqlite::open(p, limits)?),
        Url::Postgres(u) => Box::new(pg::Pg::connect(u, limits)?),
    };
    schema::migrate_to(s.as_mut(), version)?;
    Ok(s)
}

/// A fresh random run id (made at run start): a UUID v4.
pub fn new_run_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

const NAMESPACE: uuid::Uuid = uuid::Uuid::from_bytes([
    0x6c, 0x61, 0x74, 0x6c, 0x61, 0x62, 0x2d, 0x72, 0x75, 0x6e, 0x2d, 0x69, 0x64, 0x2d, 0x76, 0x31,
]);

/// The stable run id of a record without one (imports, records of older latlabs): a UUID v5
/// (SHA-1) of its bytes, so the same file always gets the same id.
pub fn derived_run_id(bytes: &[u8]) -> String {
    uuid::Uuid::new_v5(&NAMESPACE, bytes).to_string()
}

/// What identifies a machine: host name, CPU model and the DMI vendor where present.
pub struct MachineKey {
    pub hostname: Option<String>,
    pub cpu_model: Option<String>,
    pub dmi: Option<String>,
    pub arch: Option<String>,
}

impl MachineKey {
    pub fn of(r: &RunRecord) -> MachineKey {
        let dmi = r
            .inventory
            .as_ref()
            .and_then(|i| {
                i.pointer("/dmi/product_name")
                    .or_else(|| i.pointer("/virt/vendor"))
            })
            .and_then(|v| v.as_str())
            .map(str::to_string);
        MachineKey {
            hostname: r.machine.hostname.clone(),
            cpu_model: r.machine.cpu_model.clone(),
            dmi,
            arch: r.machine.arch.clone(),
        }
    }

    /// The stable hash of the key: 16 hex digits of a UUID v5 of its parts.
    pub fn id(&self) -> String {
        let mut b = Vec::new();
        for part in [&self.hostname, &self.cpu_model, &self.dmi] {
            b.extend_from_slice(part.as_deref().unwrap_or("").as_bytes());
            b.push(0);
        }
        let u = uuid::Uuid::new_v5(&NAMESPACE, &b);
        u.simple().to_string()[..16].to_string()
    }
}

/// One row of `history` (latlab-core's, so that latlab-report renders it).
pub use latlab_core::history::RunRow;

/// `history`'s filters (all optional; together they narrow).
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Host name, or a prefix of the machine id.
    pub machine: Option<String>,
    /// Kernel release, exactly.
    pub kernel: Option<String>,
    pub label: Option<String>,
    /// Only runs at or after this time (seconds since the epoch).
    pub since_unix: Option<i64>,
}

/// What a push did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    pub run_id: String,
    /// False: a run with this id was already stored (nothing was written).
    pub added: bool,
}

fn now_unix() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// A run's start as seconds since the epoch: RFC 3339 (latlab's own `started_at`) or RFC 2822
/// (what cyclictest's `--json` writes, kept as it was by the import). None otherwise: the run
/// is then placed by when it was stored.
pub(crate) fn parse_time(s: &str) -> Option<i64> {
    s.parse::<jiff::Timestamp>()
        .ok()
        .or_else(|| {
            jiff::fmt::rfc2822::parse(s.trim())
                .ok()
                .map(|z| z.timestamp())
        })
        .map(|t| t.as_second())
}

#[cfg(test)]
mod time_tests {
    #[test]
    fn starts_are_read_in_latlabs_and_cyclictests_forms() {
        assert_eq!(
            super::parse_time("2026-11-01T03:52:17Z"),
            Some(1_793_505_137)
        );
        assert_eq!(
            super::parse_time("Sun, 01 Nov 2026 03:52:17 +0000"),
            Some(1_793_505_137)
        );
        assert_eq!(
            super::parse_time("Sun, 01 Nov 2026 04:52:17 +0100"),
            Some(1_793_505_137)
        );
        assert_eq!(super::parse_time("yesterday"), None);
    }
}

/// Rows per multi-row INSERT (PostgreSQL round trips are the cost; 200 rows × 8 columns stays
/// far below both engines' parameter limits).
const BATCH: usize = 200;

/// The database engine: SQL in, rows out. latlab's own operations are the provided methods.
pub trait Store {
    /// `sqlite` or `postgres`.
    fn engine(&self) -> &'static str;
    /// The database for messages (no password).
    fn shown(&self) -> String;
    /// Run one statement; the rows it changed.
    fn exec(&mut self, sql: &str, params: &[Val]) -> Result<u64>;
    /// Run a query; each row's columns read as `types`.
    fn query(&mut self, sql: &str, params: &[Val], types: &[Ty]) -> Result<Vec<Vec<Val>>>;
    /// Run statements without parameters (schema changes).
    fn batch(&mut self, sql: &str) -> Result<()>;
    /// [`Store::batch`] for statements that may take long on a large database (a migration
    /// copies every row): bounded by [`limits::MIGRATION_FACTOR`] times the bound.
    fn batch_slow(&mut self, sql: &str) -> Result<()> {
        self.batch(sql)
    }
    /// Begin a transaction that will write (SQLite takes the write lock at once, so two
    /// writers queue instead of failing on upgrade).
    fn begin_write(&mut self) -> Result<()>;
    /// Serialise migrations between processes (PostgreSQL: an advisory transaction lock;
    /// SQLite's write lock already does).
    fn lock_migrations(&mut self) -> Result<()> {
        Ok(())
    }

    fn commit(&mut self) -> Result<()> {
        self.batch("COMMIT")
    }
    fn rollback(&mut self) {
        let _ = self.batch("ROLLBACK");
    }

    /// Store a run (its `run.json` bytes, as written, with any secret in them masked:
    /// latlab_core::secrets), checked whole first ([`prepare`]). Idempotent by run id.
    fn push(&mut self, bytes: &[u8]) -> Result<Pushed> {
        let p = prepare(bytes)?;
        self.store(&p)
    }

    /// Store a run [`prepare`]d, in one transaction. Idempotent by run id.
    fn store(&mut self, p: &Prepared) -> Result<Pushed> {
        self.begin_write()?;
        match insert_run(self, p) {
            Ok(added) => {
                self.commit()?;
                Ok(Pushed {
                    run_id: p.run_id.clone(),
                    added,
                })
            }
            Err(e) => {
                self.rollback();
                Err(e)
            }
        }
    }

    /// The stored `run.json` of the run whose id is `id` or starts with `id` (at least 4
    /// characters; an ambiguous prefix is an error): (full id, bytes).
    fn get(&mut self, id: &str) -> Result<(String, Vec<u8>)> {
        let rows = if id.len() >= 4 && id.len() < 36 {
            self.query(
                "SELECT run_id, run_json FROM runs WHERE substr(run_id, 1, length(?)) = ? ORDER BY run_id LIMIT 2",
                &[t(id), t(id)],
                &[Ty::T, Ty::T],
            )?
        } else {
            self.query(
                "SELECT run_id, run_json FROM runs WHERE run_id = ?",
                &[t(id)],
                &[Ty::T, Ty::T],
            )?
        };
        match rows.len() {
            0 => Err(StoreError::NotFound(escape(id), self.shown())),
            1 => {
                let r = &rows[0];
                Ok((
                    r[0].text().unwrap_or_default().to_string(),
                    r[1].text().unwrap_or_default().as_bytes().to_vec(),
                ))
            }
            _ => Err(msg(format!(
                "run id prefix `{}` matches more than one run in {}; give more of it (latlab history lists the ids)",
                escape(id),
                self.shown()
            ))),
        }
    }

    /// Runs matching `f`, oldest first.
    fn list(&mut self, f: &Filter) -> Result<Vec<RunRow>> {
        let mut sql = String::from(
            "SELECT r.run_id, r.label, r.machine_id, m.hostname, r.kernel_release, r.kernel_version, \
             r.preemption, r.source, r.started_at, COALESCE(r.started_unix, r.stored_unix), r.duration_ns, \
             r.complete, r.cpus, r.samples, r.p99_ns, r.p999_ns, r.max_ns, r.missed, r.config_json \
             FROM runs r JOIN machines m ON m.machine_id = r.machine_id WHERE 1 = 1",
        );
        let mut p = vec![];
        if let Some(m) = &f.machine {
            sql.push_str(" AND (m.hostname = ? OR substr(r.machine_id, 1, length(?)) = ?)");
            p.extend([t(m.as_str()), t(m.as_str()), t(m.as_str())]);
        }
        if let Some(k) = &f.kernel {
            sql.push_str(" AND r.kernel_release = ?");
            p.push(t(k.as_str()));
        }
        if let Some(l) = &f.label {
            sql.push_str(" AND r.label = ?");
            p.push(t(l.as_str()));
        }
        if let Some(s) = f.since_unix {
            sql.push_str(" AND COALESCE(r.started_unix, r.stored_unix) >= ?");
            p.push(Val::I(Some(s)));
        }
        sql.push_str(" ORDER BY COALESCE(r.started_unix, r.stored_unix), r.run_id");
        use Ty::*;
        let rows = self.query(
            &sql,
            &p,
            &[T, T, T, T, T, T, T, T, T, I, I, I, I, I, I, I, I, I, T],
        )?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let s = |i: usize| r[i].text().map(str::to_string);
                // The loads and the period, from the stored configuration (a record of any
                // age: what is missing or not a string is left out).
                let config: serde_json::Value = r[18]
                    .text()
                    .and_then(|c| serde_json::from_str(c).ok())
                    .unwrap_or_default();
                let loads = config["loads"]
                    .as_array()
                    .map(|l| {
                        l.iter()
                            .filter_map(|x| x.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default();
                RunRow {
                    run_id: s(0).unwrap_or_default(),
                    label: s(1).unwrap_or_default(),
                    machine_id: s(2).unwrap_or_default(),
                    hostname: s(3),
                    kernel_release: s(4),
                    kernel_version: s(5),
                    preemption: s(6),
                    source: s(7).unwrap_or_default(),
                    started_at: s(8),
                    time_unix: r[9].int().unwrap_or(0),
                    duration_ns: r[10].int(),
                    loads,
                    interval_ns: config["interval_ns"].as_i64(),
                    complete: r[11].int() == Some(1),
                    cpus: r[12].int().unwrap_or(0),
                    samples: r[13].int().unwrap_or(0),
                    p99_ns: r[14].int(),
                    p999_ns: r[15].int(),
                    max_ns: r[16].int(),
                    missed: r[17].int().unwrap_or(0),
                }
            })
            .collect())
    }

    /// Stored runs.
    fn count_runs(&mut self) -> Result<i64> {
        let r = self.query("SELECT COUNT(*) FROM runs", &[], &[Ty::I])?;
        Ok(r.first().and_then(|r| r[0].int()).unwrap_or(0))
    }
}

/// Insert `rows` (each `cols.len()` values) into `table`, [`BATCH`] rows per statement.
fn insert_rows(
    s: &mut (impl Store + ?Sized),
    table: &str,
    cols: &[&str],
    rows: Vec<Vec<Val>>,
) -> Result<()> {
    let one = format!("({})", vec!["?"; cols.len()].join(", "));
    for chunk in rows.chunks(BATCH) {
        let sql = format!(
            "INSERT INTO {table} ({}) VALUES {}",
            cols.join(", "),
            vec![one.as_str(); chunk.len()].join(", ")
        );
        let params: Vec<Val> = chunk.iter().flatten().cloned().collect();
        s.exec(&sql, &params)?;
    }
    Ok(())
}

/// The inserts of one push, in its transaction: false when the run was already there.
fn insert_run(s: &mut (impl Store + ?Sized), p: &Prepared) -> Result<bool> {
    let now = Val::I(Some(now_unix()));
    let mut machine = p.machine.clone();
    machine.push(now.clone());
    s.exec(
        &format!(
            "INSERT INTO machines ({}, first_seen_unix) VALUES ({}) ON CONFLICT (machine_id) DO NOTHING",
            rows::MACHINE.join(", "),
            vec!["?"; machine.len()].join(", ")
        ),
        &machine,
    )?;
    let mut run = p.run.clone();
    run.push(now);
    let key = s.query(
        &format!(
            "INSERT INTO runs ({}, stored_unix) VALUES ({}) ON CONFLICT (run_id) DO NOTHING RETURNING id",
            rows::RUN.join(", "),
            vec!["?"; run.len()].join(", ")
        ),
        &run,
        &[Ty::I],
    )?;
    let Some(key) = key.first().and_then(|r| r[0].int()) else {
        return Ok(false);
    };
    for (table, cols, rows) in &p.children {
        let mut all = vec!["run"];
        all.extend_from_slice(cols);
        let keyed = rows
            .iter()
            .map(|r| {
                let mut v = Vec::with_capacity(r.len() + 1);
                v.push(Val::I(Some(key)));
                v.extend_from_slice(r);
                v
            })
            .collect();
        insert_rows(s, table, &all, keyed)?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            Url::parse("/x/y.sqlite").unwrap(),
            Url::Sqlite("/x/y.sqlite".into())
        );
        assert_eq!(
            Url::parse("sqlite:a.db").unwrap(),
            Url::Sqlite("a.db".into())
        );
        assert_eq!(
            Url::parse("sqlite:///a.db").unwrap(),
            Url::Sqlite("/a.db".into())
        );
        assert!(matches!(
            Url::parse("postgresql://h/db").unwrap(),
            Url::Postgres(_)
        ));
        let e = Url::parse("mysql://h/db").unwrap_err().to_string();
        assert!(e.contains("unknown database scheme `mysql`"), "{e}");
        assert!(Url::parse("").is_err());
    }

    #[test]
    fn passwords_are_not_shown() {
        let u = Url::parse("postgres://lab:s3cret@db.example/latlab?x=1").unwrap();
        assert_eq!(u.shown(), "postgres://lab:***@db.example/latlab?x=1");
        let u = Url::parse("postgres://lab@db/latlab").unwrap();
        assert_eq!(u.shown(), "postgres://lab@db/latlab");
    }

    #[test]
    fn derived_ids_are_stable_and_differ() {
        assert_eq!(derived_run_id(b"a"), derived_run_id(b"a"));
        assert_ne!(derived_run_id(b"a"), derived_run_id(b"b"));
        assert_ne!(new_run_id(), new_run_id());
    }
}
