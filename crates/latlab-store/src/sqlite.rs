//! The SQLite engine (rusqlite, SQLite built in): one file, many readers, writers queued by
//! SQLite's lock, WAL journal. A lock wait and a statement are bounded ([`crate::limits`]):
//! the busy handler waits for the lock until the deadline, the progress handler stops a
//! statement that runs past it (a planted trigger that never ends), both at once on a signal.
//!
//! The file is created 0600 with O_EXCL|O_NOFOLLOW when missing; an existing path that is not
//! a regular file (a symlink, a FIFO, a directory) is refused, never opened, and so is a file
//! (or its -wal, -shm, -journal) owned by another user or writable by group or others. The
//! directories above the file are resolved first: a symlinked directory is followed.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OpenFlags};

use crate::limits::{GaveUp, Limits, Watch, MIGRATION_FACTOR};
use crate::{escape, msg, Result, Store, StoreError, Ty, Val};

pub struct Sqlite {
    conn: Connection,
    path: PathBuf,
    watch: Arc<Watch>,
}

/// SQLite virtual-machine steps between two looks at the deadline.
const PROGRESS_STEPS: i32 = 1000;

impl Sqlite {
    pub fn open(path: &Path, limits: Limits) -> Result<Sqlite> {
        let shown = escape(&path.display().to_string());
        let path = resolve(path, &shown)?;
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(msg(format!(
                    "--db {shown}: is a symlink; give the path of the database file itself"
                )))
            }
            Ok(m) if !m.file_type().is_file() => {
                return Err(msg(format!(
                    "--db {shown}: not a regular file (a directory or device); give the path of a SQLite database file"
                )))
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                match OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&path)
                {
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => {
                        return Err(msg(format!(
                            "--db {shown}: cannot create the database file: {e}; check that its directory exists and is writable"
                        )))
                    }
                }
            }
            Err(e) => return Err(msg(format!("--db {shown}: {e}"))),
        }
        // The file and the journals SQLite keeps next to it: another user's, or one others
        // may write, could hold anything (a trigger that never ends, rows of their choosing).
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut p = path.clone().into_os_string();
            p.push(suffix);
            let p = PathBuf::from(p);
            match latlab_sys::safefile::check_trusted(&p, false) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && !suffix.is_empty() => {}
                Err(e) => {
                    return Err(msg(format!(
                        "--db {shown}: refusing the results database: {}; whoever can write it decides what latlab reads and runs there: use a database file of your own (`chown` it to yourself, `chmod go-w` it) or give another with --db",
                        escape(&e.to_string())
                    )))
                }
            }
        }
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_NOFOLLOW,
        )
        .map_err(|e| {
            msg(format!(
                "--db {shown}: cannot open the SQLite database: {e}"
            ))
        })?;
        let watch = Watch::new(limits);
        let s = Sqlite { conn, path, watch };
        s.conn
            .busy_handler(Some(crate::limits::busy))
            .map_err(|e| s.err(e))?;
        let w = s.watch.clone();
        s.conn
            .progress_handler(PROGRESS_STEPS, Some(move || w.expired()));
        // The first read of the file: a file that is not a database fails here.
        s.armed(|c| c.pragma_update(None, "journal_mode", "WAL"))?;
        s.armed(|c| c.pragma_update(None, "foreign_keys", "ON"))?;
        Ok(s)
    }

    /// Run `f` with the statement bound armed; its error as latlab's.
    fn armed<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T> {
        self.armed_for(1, f)
    }

    /// [`Sqlite::armed`], bounded by `times` the bound.
    fn armed_for<T>(
        &self,
        times: u32,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T> {
        self.watch.arm(times);
        let r = f(&self.conn);
        self.watch.disarm();
        r.map_err(|e| self.err_after(e, times))
    }

    fn err(&self, e: rusqlite::Error) -> StoreError {
        self.err_after(e, 1)
    }

    /// The error of a statement bounded by `times` the bound.
    fn err_after(&self, e: rusqlite::Error, times: u32) -> StoreError {
        let shown = escape(&self.path.display().to_string());
        if let Some(why) = self.watch.why() {
            let what = match e.sqlite_error_code() {
                Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                    "waiting for its lock, which another process holds"
                }
                _ if why == GaveUp::Signal => "a statement",
                _ => "a statement that did not end",
            };
            let limits = self.watch.limits();
            return limits.gave_up_after(why, &shown, what, limits.timeout * times);
        }
        let corrupt = matches!(
            e.sqlite_error_code(),
            Some(rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt)
        );
        if corrupt {
            msg(format!(
                "the results database {shown} is not a SQLite database or is corrupt ({e}); move it away (latlab starts a new one) or give another with --db"
            ))
        } else {
            msg(format!("the results database {shown}: {e}"))
        }
    }
}

/// `path` with the directories above the file resolved (a symlinked directory — a HOME reached
/// through /home → var/home — is followed; SQLite's no-follow open refuses a symlink anywhere
/// in the path), the file name kept as given. A missing directory is made, private.
fn resolve(path: &Path, shown: &str) -> Result<PathBuf> {
    let Some(name) = path.file_name() else {
        return Err(msg(format!(
            "--db {shown}: not a file path; give the path of a SQLite database file"
        )));
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.exists() {
        latlab_sys::safefile::ensure_private_dir(dir)
            .map_err(|e| msg(format!("--db {shown}: cannot create its directory: {e}")))?;
    }
    let dir = std::fs::canonicalize(dir)
        .map_err(|e| msg(format!("--db {shown}: cannot resolve its directory: {e}")))?;
    Ok(dir.join(name))
}

fn to_sql(v: &Val) -> SqlValue {
    match v {
        Val::I(Some(i)) => SqlValue::Integer(*i),
        Val::F(Some(f)) => SqlValue::Real(*f),
        Val::T(Some(s)) => SqlValue::Text(s.clone()),
        _ => SqlValue::Null,
    }
}

impl Store for Sqlite {
    fn engine(&self) -> &'static str {
        "sqlite"
    }

    fn shown(&self) -> String {
        escape(&self.path.display().to_string())
    }

    fn exec(&mut self, sql: &str, params: &[Val]) -> Result<u64> {
        let p: Vec<SqlValue> = params.iter().map(to_sql).collect();
        self.armed(|c| {
            c.prepare_cached(sql)
                .and_then(|mut st| st.execute(rusqlite::params_from_iter(p)))
                .map(|n| n as u64)
        })
    }

    fn query(&mut self, sql: &str, params: &[Val], types: &[Ty]) -> Result<Vec<Vec<Val>>> {
        let p: Vec<SqlValue> = params.iter().map(to_sql).collect();
        self.armed(|c| {
            let mut st = c.prepare_cached(sql)?;
            let rows = st.query_map(rusqlite::params_from_iter(p), |row| {
                types
                    .iter()
                    .enumerate()
                    .map(|(i, ty)| {
                        Ok(match ty {
                            Ty::I => Val::I(row.get(i)?),
                            Ty::F => Val::F(row.get(i)?),
                            Ty::T => Val::T(row.get(i)?),
                        })
                    })
                    .collect::<rusqlite::Result<Vec<Val>>>()
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })
    }

    fn batch(&mut self, sql: &str) -> Result<()> {
        self.armed(|c| c.execute_batch(sql))
    }

    fn batch_slow(&mut self, sql: &str) -> Result<()> {
        self.armed_for(MIGRATION_FACTOR, |c| c.execute_batch(sql))
    }

    fn begin_write(&mut self) -> Result<()> {
        self.batch("BEGIN IMMEDIATE")
    }
}
