//! A PostgreSQL server of the tests' own (`initdb` + `pg_ctl` as the `postgres` user in a
//! temp directory, a free loopback port, trust authentication), for the results database's
//! tests on PostgreSQL.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// A PostgreSQL server of its own in a temp directory, on a free loopback port, run as the
/// `postgres` user; stopped (and its directory removed) when dropped, also on a panic.
pub struct PgServer {
    pub dir: tempfile::TempDir,
    pub bin: PathBuf,
    pub port: u16,
}

impl PgServer {
    /// None (with the reason) when PostgreSQL's server binaries or its user are absent.
    pub fn start() -> Result<PgServer, String> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .map_err(|_| {
                "no /usr/lib/postgresql (install Debian's postgresql: scripts/deps.sh)".to_string()
            })?
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("bin"))
            .find(|b| b.join("initdb").exists() && b.join("pg_ctl").exists())
            .ok_or("no initdb/pg_ctl under /usr/lib/postgresql/*/bin")?;
        let uid = Command::new("id")
            .args(["-u", "postgres"])
            .output()
            .map_err(|e| e.to_string())?;
        let gid = Command::new("id")
            .args(["-g", "postgres"])
            .output()
            .map_err(|e| e.to_string())?;
        if !uid.status.success() {
            return Err("no `postgres` system user".into());
        }
        let num = |o: &std::process::Output| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .parse::<u32>()
                .unwrap()
        };
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::chown(dir.path(), Some(num(&uid)), Some(num(&gid))).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let data = dir.path().join("data");
        let as_pg = |prog: &str| {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(bin.join(prog));
            c
        };
        let st = as_pg("initdb")
            .arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "initdb failed");
        let server = PgServer {
            dir,
            bin: bin.clone(),
            port,
        };
        let opts = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            server.dir.path().display()
        );
        let st = as_pg("pg_ctl")
            .arg("-D")
            .arg(&data)
            .args(["-o", &opts, "-w", "-l"])
            .arg(server.dir.path().join("log"))
            .arg("start")
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(
            st.success(),
            "pg_ctl start failed: {}",
            std::fs::read_to_string(server.dir.path().join("log")).unwrap_or_default()
        );
        Ok(server)
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Everything the database holds, as SQL text (`pg_dump`).
    pub fn dump(&self) -> String {
        let out = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join("pg_dump"))
            .arg("-h")
            .arg(self.dir.path())
            .args(["-p", &self.port.to_string(), "postgres"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pg_dump: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .status();
    }
}

/// The server, or None after saying why (a failure under LATLAB_REQUIRE_PRIVILEGED=1).
pub fn pg_server(test: &str) -> Option<PgServer> {
    match PgServer::start() {
        Ok(s) => Some(s),
        Err(why) => {
            super::cannot_run(test, &why);
            None
        }
    }
}
