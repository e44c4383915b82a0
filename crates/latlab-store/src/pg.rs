//! The PostgreSQL engine (the `postgres` crate's sync client, no TLS): for a lab where every
//! machine writes to one server.
//!
//! Every wait is bounded ([`crate::limits`]): the client lives on a thread of its own, and
//! the caller waits for each answer — the connection (TCP connect and the start-up exchange,
//! which the crate's `connect_timeout` does not cover), each statement — at most the bound, or
//! until a signal (a statement: the bound and 2 s, for the server's own bounds to speak
//! first). A wait that ends so gives the connection up: the server is asked to cancel
//! the statement and the thread is left to end with the process. The server bounds the
//! session too: `lock_timeout` is the bound, `statement_timeout` the bound and 1 s, so a lock
//! another session holds, or a statement that does not end, ends in the server's own error
//! (which says which), with the transaction rolled back.

use std::sync::mpsc;

use postgres::error::SqlState;
use postgres::types::ToSql;
use postgres::{CancelToken, Client, Config, NoTls};

use crate::limits::{wait, GaveUp, Limits, MIGRATION_FACTOR};
use crate::{msg, Result, Store, StoreError, Ty, Url, Val};

/// One piece of work for the client's thread.
type Job = Box<dyn FnOnce(&mut Client) + Send>;

/// The client's thread, while it is still waited for.
struct Conn {
    jobs: mpsc::Sender<Job>,
    cancel: CancelToken,
}

pub struct Pg {
    /// None once a wait was given up (the connection is no longer used).
    conn: Option<Conn>,
    shown: String,
    limits: Limits,
}

/// The session's statement_timeout is the bound and this; latlab waits for the server's answer
/// the bound and twice this.
const SERVER_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Any number that is not latlab's migrations' advisory lock.
const MIGRATION_LOCK: i64 = 0x6c61_746c_6162;

impl Pg {
    pub fn connect(url: &str, limits: Limits) -> Result<Pg> {
        let shown = Url::Postgres(url.into()).shown();
        let mut cfg: Config = url.parse().map_err(|e: postgres::Error| {
            msg(format!(
                "--db {shown}: not a PostgreSQL URL ({}); write it as postgres://user@host:port/dbname",
                crate::escape(&latlab_core::secrets::mask(&e.to_string()))
            ))
        })?;
        if cfg
            .get_connect_timeout()
            .is_none_or(|t| *t > limits.timeout)
        {
            cfg.connect_timeout(limits.timeout);
        }
        let (ready_tx, ready_rx) = mpsc::channel();
        let (jobs, job_rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("latlab-db".into())
            .spawn(move || {
                let mut client = match cfg.connect(NoTls) {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = ready_tx.send(Err(describe(&e)));
                        return;
                    }
                };
                if ready_tx.send(Ok(client.cancel_token())).is_err() {
                    return;
                }
                for job in job_rx {
                    job(&mut client);
                }
            })
            .map_err(|e| msg(format!("cannot start the database client's thread: {e}")))?;
        let cannot = |e: &str| {
            msg(format!(
                "cannot connect to the results database {shown}: {}",
                crate::escape(&latlab_core::secrets::mask(e))
            ))
        };
        let cancel = match wait(&ready_rx, &limits) {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(cannot(&e)),
            Err(None) => return Err(cannot("the client's thread ended")),
            Err(Some(why)) => return Err(limits.gave_up(why, &shown, "connecting")),
        };
        let mut pg = Pg {
            conn: Some(Conn { jobs, cancel }),
            shown,
            limits,
        };
        // The server bounds each lock wait of the session (the bound) and each statement (a
        // moment more, so that a lock wait says so).
        let lock_ms = pg.limits.timeout.as_millis().max(1);
        let statement_ms = (pg.limits.timeout + SERVER_GRACE).as_millis();
        pg.batch(&format!(
            "SET lock_timeout = {lock_ms}; SET statement_timeout = {statement_ms}"
        ))?;
        Ok(pg)
    }

    /// Run `f` on the client's thread and wait for its answer within the bound.
    fn call<R: Send + 'static>(
        &mut self,
        what: &str,
        f: impl FnOnce(&mut Client) -> std::result::Result<R, postgres::Error> + Send + 'static,
    ) -> Result<R> {
        self.call_for(1, what, f)
    }

    /// [`Pg::call`] for a statement bounded by `times` the bound.
    fn call_for<R: Send + 'static>(
        &mut self,
        times: u32,
        what: &str,
        f: impl FnOnce(&mut Client) -> std::result::Result<R, postgres::Error> + Send + 'static,
    ) -> Result<R> {
        let Some(conn) = &self.conn else {
            return Err(msg(format!(
                "the results database {}: the connection was given up",
                self.shown
            )));
        };
        let (tx, rx) = mpsc::channel();
        let job: Job = Box::new(move |c: &mut Client| {
            let _ = tx.send(f(c));
        });
        if conn.jobs.send(job).is_err() {
            self.conn = None;
            return Err(msg(format!(
                "the results database {}: the client's thread ended",
                self.shown
            )));
        }
        // The server's own bound (statement_timeout, lock_timeout) ends a statement with a
        // clean rollback and says why; latlab gives up on a server that has not answered a
        // moment after it.
        let patience = Limits {
            timeout: self.limits.timeout * times + 2 * SERVER_GRACE,
            cancel: self.limits.cancel.clone(),
        };
        match wait(&rx, &patience) {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(self.err(e)),
            Err(why) => {
                let conn = self.conn.take().expect("checked above");
                // Ask the server to stop the statement; it may not answer either, so not waited
                // for.
                let token = conn.cancel;
                let _ = std::thread::Builder::new()
                    .name("latlab-db-cancel".into())
                    .spawn(move || {
                        let _ = token.cancel_query(NoTls);
                    });
                Err(match why {
                    Some(why) => patience.gave_up(why, &self.shown, what),
                    None => msg(format!(
                        "the results database {}: the client's thread ended",
                        self.shown
                    )),
                })
            }
        }
    }

    fn err(&self, e: postgres::Error) -> StoreError {
        // The server's own bounds (the session's statement_timeout and lock_timeout).
        let what = match e.code() {
            Some(c) if *c == SqlState::LOCK_NOT_AVAILABLE => {
                Some("waiting for a lock another session holds")
            }
            Some(c) if *c == SqlState::QUERY_CANCELED => Some("a statement that did not end"),
            _ => None,
        };
        if let Some(what) = what {
            return self.limits.gave_up(GaveUp::Timeout, &self.shown, what);
        }
        msg(format!(
            "the results database {}: {}",
            self.shown,
            crate::escape(&latlab_core::secrets::mask(&describe(&e)))
        ))
    }
}

/// The error with its causes (the crate's own Display says only "error connecting to server").
fn describe(e: &postgres::Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

/// `?` placeholders become `$1`, `$2`, … (latlab's SQL has no `?` inside literals).
fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(c);
        }
    }
    out
}

fn params(v: &[Val]) -> Vec<Box<dyn ToSql + Sync>> {
    v.iter()
        .map(|v| -> Box<dyn ToSql + Sync> {
            match v {
                Val::I(x) => Box::new(*x),
                Val::F(x) => Box::new(*x),
                Val::T(x) => Box::new(x.clone()),
            }
        })
        .collect()
}

impl Store for Pg {
    fn engine(&self) -> &'static str {
        "postgres"
    }

    fn shown(&self) -> String {
        self.shown.clone()
    }

    fn exec(&mut self, sql: &str, p: &[Val]) -> Result<u64> {
        let (sql, p) = (numbered(sql), p.to_vec());
        self.call("a statement", move |c| {
            let b = params(&p);
            let refs: Vec<&(dyn ToSql + Sync)> = b.iter().map(|b| b.as_ref()).collect();
            c.execute(&sql, &refs)
        })
    }

    fn query(&mut self, sql: &str, p: &[Val], types: &[Ty]) -> Result<Vec<Vec<Val>>> {
        let (sql, p, types) = (numbered(sql), p.to_vec(), types.to_vec());
        self.call("a query", move |c| {
            let b = params(&p);
            let refs: Vec<&(dyn ToSql + Sync)> = b.iter().map(|b| b.as_ref()).collect();
            let rows = c.query(&sql, &refs)?;
            rows.iter()
                .map(|row| {
                    types
                        .iter()
                        .enumerate()
                        .map(|(i, ty)| {
                            Ok(match ty {
                                Ty::I => Val::I(row.try_get(i)?),
                                Ty::F => Val::F(row.try_get(i)?),
                                Ty::T => Val::T(row.try_get(i)?),
                            })
                        })
                        .collect::<std::result::Result<Vec<Val>, postgres::Error>>()
                })
                .collect()
        })
    }

    fn batch(&mut self, sql: &str) -> Result<()> {
        let sql = sql.to_string();
        self.call("a statement", move |c| c.batch_execute(&sql))
    }

    fn batch_slow(&mut self, sql: &str) -> Result<()> {
        // In the migration's transaction: the server's statement bound is longer until it ends.
        let long = (self.limits.timeout * MIGRATION_FACTOR + SERVER_GRACE).as_millis();
        let sql = format!("SET LOCAL statement_timeout = {long}; {sql}");
        self.call_for(MIGRATION_FACTOR, "a migration", move |c| {
            c.batch_execute(&sql)
        })
    }

    fn begin_write(&mut self) -> Result<()> {
        self.batch("BEGIN")
    }

    fn lock_migrations(&mut self) -> Result<()> {
        self.exec(
            "SELECT pg_advisory_xact_lock(?)",
            &[Val::I(Some(MIGRATION_LOCK))],
        )
        .map(|_| ())
    }
}
