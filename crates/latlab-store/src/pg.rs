//! The PostgreSQL engine (the `postgres` crate's sync client, no TLS): for a lab where every
//! machine writes to one server. A connection times out after 10 s unless the URL sets
//! `connect_timeout`.

use std::time::Duration;

use postgres::types::ToSql;
use postgres::{Client, Config, NoTls};

use crate::{msg, Result, Store, StoreError, Ty, Url, Val};

pub struct Pg {
    client: Client,
    shown: String,
}

/// Any number that is not latlab's migrations' advisory lock.
const MIGRATION_LOCK: i64 = 0x6c61_746c_6162;

impl Pg {
    pub fn connect(url: &str) -> Result<Pg> {
        let shown = Url::Postgres(url.into()).shown();
        let mut cfg: Config = url.parse().map_err(|e: postgres::Error| {
            msg(format!(
                "--db {shown}: not a PostgreSQL URL ({}); write it as postgres://user@host:port/dbname",
                crate::escape(&latlab_core::secrets::mask(&e.to_string()))
            ))
        })?;
        if cfg.get_connect_timeout().is_none() {
            cfg.connect_timeout(Duration::from_secs(10));
        }
        let client = cfg.connect(NoTls).map_err(|e| {
            msg(format!(
                "cannot connect to the results database {shown}: {}",
                crate::escape(&latlab_core::secrets::mask(&describe(&e)))
            ))
        })?;
        Ok(Pg { client, shown })
    }

    fn err(&self, e: postgres::Error) -> StoreError {
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
        let b = params(p);
        let refs: Vec<&(dyn ToSql + Sync)> = b.iter().map(|b| b.as_ref()).collect();
        self.client
            .execute(&numbered(sql), &refs)
            .map_err(|e| self.err(e))
    }

    fn query(&mut self, sql: &str, p: &[Val], types: &[Ty]) -> Result<Vec<Vec<Val>>> {
        let b = params(p);
        let refs: Vec<&(dyn ToSql + Sync)> = b.iter().map(|b| b.as_ref()).collect();
        let rows = self
            .client
            .query(&numbered(sql), &refs)
            .map_err(|e| self.err(e))?;
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
                    .map_err(|e| self.err(e))
            })
            .collect()
    }

    fn batch(&mut self, sql: &str) -> Result<()> {
        self.client.batch_execute(sql).map_err(|e| self.err(e))
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
