//! The results database against hostile or careless input (issue 30): no secret recorded,
//! every wait bounded and a signal obeyed while waiting, run ids that are UUIDs, database paths
//! through symlinked directories, in-memory and URI databases refused, files of other users
//! refused, and every pushed record checked before anything is written.

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

use support::pg::{pg_server, PgServer};
use support::{latlab, privileged, read_json, run_dirs};

/// `latlab ARGS` (with `env`), its output.
fn run_latlab(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = latlab();
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// A sim run of 1 s on CPU 0 under `results` with `extra` flags: its output and directory.
fn sim(results: &Path, extra: &[&str], env: &[(&str, &str)]) -> (Output, PathBuf) {
    let before = run_dirs(results);
    let mut args = vec![
        "run",
        "--backend",
        "sim",
        "--duration",
        "1s",
        "--cpus",
        "0",
        "-q",
        "--format",
        "json",
        "--results",
        results.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = run_latlab(&args, env);
    let dir = run_dirs(results)
        .into_iter()
        .find(|d| !before.contains(d))
        .expect("a new run directory");
    (out, dir)
}

fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every file under `dir`, with its path.
fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v = vec![];
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            v.extend(files_under(&p));
        } else {
            v.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
    v
}

fn holds(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

// ------------------------------------------------------------------ 1: secrets

/// The password of the secret test.
const SECRET: &str = "secretpw";

/// What the secret test's commands printed, by command.
#[derive(Default)]
struct Outputs(Vec<(String, Vec<u8>)>);

impl Outputs {
    fn keep(&mut self, what: &str, o: &Output) {
        self.0.push((format!("{what} stdout"), o.stdout.clone()));
        self.0.push((format!("{what} stderr"), o.stderr.clone()));
    }
}

/// A run.json as an older latlab wrote it: no run id, the password in its command line. Made
/// under `t` from run `a`'s record and pushed to each of `dbs`; returns its directory.
fn push_old_record(
    t: &Path,
    a: &Path,
    dbs: [&str; 2],
    env: &[(&str, &str)],
    outputs: &mut Outputs,
) -> PathBuf {
    let old = t.join("old");
    std::fs::create_dir(&old).unwrap();
    let mut v = read_json(&a.join("run.json"));
    v.as_object_mut().unwrap().remove("run_id");
    v["command_line"] = format!(
        "latlab run --db postgres://lab:{SECRET}@db.example/latlab --db=host=h password={SECRET}"
    )
    .into();
    v["label"] = "old".into();
    std::fs::write(old.join("run.json"), serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    let old_s = old.to_str().unwrap();
    for db in dbs {
        let o = run_latlab(&["db", "push", old_s, "--db", db], env);
        ok(&o, "db push");
        outputs.keep("db push", &o);
    }
    old
}

/// Every way a run is shown, each of which must succeed, its output kept: `report` in every
/// format of `runs` (run a's and b's directories, the old record's, run a's id), `compare`
/// (by directory and by id), `history` in every format, `db pull` of run a and of the old
/// record into `pulled` (two directories).
fn show_every_way(
    runs: [&str; 4],
    pulled: [&Path; 2],
    env: &[(&str, &str)],
    outputs: &mut Outputs,
) {
    let [a_s, _, old_s, id] = runs;
    let old_id = {
        let o = run_latlab(&["history", "--format", "json", "--label", "old"], env);
        ok(&o, "history");
        let h: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        h["runs"][0]["run_id"].as_str().unwrap().to_string()
    };
    let mut commands: Vec<Vec<String>> = vec![];
    for dir in runs {
        for f in ["text", "json", "html", "markdown", "cyclictest"] {
            commands.push(vec![
                "report".into(),
                dir.into(),
                "--format".into(),
                f.into(),
            ]);
        }
    }
    commands.push(vec!["compare".into(), a_s.into(), old_s.into()]);
    commands.push(vec!["compare".into(), id.into(), old_id.clone()]);
    for f in ["text", "json", "html"] {
        commands.push(vec!["history".into(), "--format".into(), f.into()]);
    }
    let pulled_s = pulled[0].to_str().unwrap().to_string();
    let pulled_old_s = pulled[1].to_str().unwrap().to_string();
    commands.push(vec![
        "db".into(),
        "pull".into(),
        id.into(),
        "-o".into(),
        pulled_s,
    ]);
    commands.push(vec![
        "db".into(),
        "pull".into(),
        old_id,
        "-o".into(),
        pulled_old_s,
    ]);
    for c in &commands {
        let args: Vec<&str> = c.iter().map(String::as_str).collect();
        let o = run_latlab(&args, env);
        ok(&o, &c.join(" "));
        outputs.keep(&c.join(" "), &o);
    }
}

/// Where the secret is: the outputs that hold it, the files under `dirs` that do, the SQLite
/// database's files under `t`, PostgreSQL's dump.
fn secret_leaks(outputs: &Outputs, dirs: [&Path; 3], t: &Path, pg: &PgServer) -> Vec<String> {
    let mut leaks = vec![];
    for (what, bytes) in &outputs.0 {
        if holds(bytes, SECRET) {
            leaks.push(what.clone());
        }
    }
    for dir in dirs {
        for (p, bytes) in files_under(dir) {
            if holds(&bytes, SECRET) {
                leaks.push(p.display().to_string());
            }
        }
    }
    for (p, bytes) in files_under(t) {
        let n = p.file_name().unwrap().to_string_lossy().to_string();
        if n.starts_with("runs.sqlite") && holds(&bytes, SECRET) {
            leaks.push(p.display().to_string());
        }
    }
    if pg.dump().contains(SECRET) {
        leaks.push("the PostgreSQL database (pg_dump)".into());
    }
    leaks
}

/// A PostgreSQL password given to `--db` (as a URL's password, as `password=` in its query,
/// in `--db=URL` form, with `PGPASSWORD` and `LATLAB_DB` set too) is in no file of the run
/// directory, no output of `run`, `report`, `compare`, `history` or `db pull`, and not in the
/// database (PostgreSQL's dump, SQLite's file); nor is the password an older latlab recorded
/// in a run.json that is pushed later.
#[test]
fn no_secret_is_recorded_written_stored_or_shown_privileged() {
    let name = "no_secret_is_recorded_written_stored_or_shown_privileged";
    let Some(_g) = privileged::guard(name) else {
        return;
    };
    let Some(pg) = pg_server(name) else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let results = t.path().join("r");
    // Trust authentication: the server takes any password.
    let with_password = format!(
        "postgres://postgres:{SECRET}@127.0.0.1:{}/postgres",
        pg.port
    );
    let in_query = format!(
        "postgres://postgres@127.0.0.1:{}/postgres?password={SECRET}",
        pg.port
    );
    let sqlite = t.path().join("runs.sqlite");
    let env_db = format!(
        "postgres://postgres:{SECRET}@127.0.0.1:{}/postgres",
        pg.port
    );
    let env = [("PGPASSWORD", SECRET), ("LATLAB_DB", env_db.as_str())];
    let mut outputs = Outputs::default();

    let (o, a) = sim(&results, &["--db", &with_password, "--label", "a"], &env);
    ok(&o, "run --db URL");
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    outputs.keep("run a", &o);
    let db_eq = format!("--db={in_query}");
    let (o, b) = sim(&results, &[&db_eq, "--label", "b"], &env);
    ok(&o, "run --db=URL");
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    outputs.keep("run b", &o);
    // The environment's database (not on the command line).
    let (o, _) = sim(&results, &["--label", "c"], &env);
    ok(&o, "run with LATLAB_DB");
    outputs.keep("run c", &o);
    let rec = read_json(&a.join("run.json"));
    assert!(
        rec["command_line"]
            .as_str()
            .unwrap()
            .contains("--db postgres://postgres:***@127.0.0.1"),
        "{}",
        rec["command_line"]
    );

    let dbs = [with_password.as_str(), sqlite.to_str().unwrap()];
    let old = push_old_record(t.path(), &a, dbs, &env, &mut outputs);
    let (a_s, b_s, old_s) = (
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        old.to_str().unwrap(),
    );
    let id = rec["run_id"].as_str().unwrap();
    let pulled = t.path().join("pulled");
    let pulled_old = t.path().join("pulled-old");
    show_every_way(
        [a_s, b_s, old_s, id],
        [&pulled, &pulled_old],
        &env,
        &mut outputs,
    );

    let leaks = secret_leaks(&outputs, [&results, &pulled, &pulled_old], t.path(), &pg);
    assert!(leaks.is_empty(), "the secret is in: {leaks:#?}");
    // The masked URL still says which database it was.
    let stored = read_json(&pulled_old.join("run.json"));
    assert!(
        stored["command_line"]
            .as_str()
            .unwrap()
            .contains("postgres://lab:***@db.example/latlab"),
        "{}",
        stored["command_line"]
    );
}

/// `latlab ARGS` fails with exit 1 and one line `latlab: error: …` containing every `want`.
fn fails_with(args: &[&str], want: &[&str]) {
    let out = latlab().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("latlab: error: "), "{args:?}: {err}");
    for w in want {
        assert!(err.contains(w), "{args:?}: want {w:?} in {err}");
    }
}

/// A run recorded in `db` whose database cannot be used: the run is kept and the one warning
/// says why (`want`) and how to push it later.
fn run_kept_with_warning(db: &str, want: &str) {
    let t = tempfile::tempdir().unwrap();
    let results = t.path().join("r");
    let (o, dir) = sim(&results, &["--db", db], &[]);
    assert_eq!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("latlab: warning: the run was not stored in the results database: ")
            && err.contains(want)
            && err.contains("latlab db push "),
        "{err}"
    );
    assert!(dir.join("run.json").is_file());
}

fn history_ids(db: &str, env: &[(&str, &str)]) -> Vec<String> {
    let mut args = vec!["history", "--format", "json"];
    if !db.is_empty() {
        args.extend(["--db", db]);
    }
    let o = run_latlab(&args, env);
    ok(&o, "history");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap().to_string())
        .collect()
}

// ------------------------------------------------------------------ 8: symlinked directories

/// A symlinked directory above the database file is followed (`--db link/x.sqlite`, and the
/// default database under a HOME reached through a symlink, as /home → var/home on Fedora
/// Silverblue); a database file that is itself a symlink is refused.
#[test]
fn a_symlinked_directory_above_the_database_works_a_symlinked_file_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let real = t.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = t.path().join("link");
    std::os::unix::fs::symlink("real", &link).unwrap();
    let results = t.path().join("r");
    let db = link.join("x.sqlite");
    let db_s = db.to_str().unwrap();
    let (o, dir) = sim(&results, &["--db", db_s], &[]);
    ok(&o, "run --db link/x.sqlite");
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let id = read_json(&dir.join("run.json"))["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(history_ids(db_s, &[]), [id]);
    assert!(std::fs::metadata(real.join("x.sqlite")).unwrap().len() > 0);

    // The default database, HOME through a symlink.
    let home = t.path().join("var-home");
    std::fs::create_dir(&home).unwrap();
    let home_link = t.path().join("home");
    std::os::unix::fs::symlink("var-home", &home_link).unwrap();
    let env_home = home_link.to_str().unwrap();
    let mut c = latlab();
    c.args([
        "run",
        "--backend",
        "sim",
        "--duration",
        "1s",
        "--cpus",
        "0",
        "-q",
        "--format",
        "json",
    ])
    .arg("--results")
    .arg(&results)
    .env("HOME", env_home)
    .env_remove("XDG_DATA_HOME")
    .env_remove("LATLAB_DB");
    let o = c.output().unwrap();
    ok(&o, "run with HOME through a symlink");
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut c = latlab();
    c.args(["history", "--format", "json"])
        .env("HOME", env_home)
        .env_remove("XDG_DATA_HOME")
        .env_remove("LATLAB_DB");
    let o = c.output().unwrap();
    ok(&o, "history with HOME through a symlink");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["runs"].as_array().unwrap().len(), 1, "{v}");
    assert!(
        std::fs::metadata(home.join(".local/share/latlab/runs.sqlite"))
            .unwrap()
            .len()
            > 0
    );

    // The database file itself a symlink: refused, also when it was made through a link.
    let file_link = t.path().join("f.sqlite");
    std::os::unix::fs::symlink(real.join("x.sqlite"), &file_link).unwrap();
    fails_with(
        &["history", "--db", file_link.to_str().unwrap()],
        &["is a symlink"],
    );
    let via = link.join("y.sqlite");
    std::os::unix::fs::symlink("x.sqlite", &via).unwrap();
    fails_with(
        &["history", "--db", via.to_str().unwrap()],
        &["is a symlink"],
    );
}

// ------------------------------------------------------------------ 10: in-memory, URIs

/// `:memory:` and SQLite `file:` URIs keep nothing (or reach SQLite past latlab's checks):
/// refused, and nothing is created for them.
#[test]
fn in_memory_databases_and_sqlite_uris_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let uri_dir = format!("file:{}/zz/x.db", t.path().display());
    for db in [
        ":memory:",
        "sqlite::memory:",
        "file:x.db?mode=memory",
        "FILE:x.db",
        "sqlite:file:x.db",
        uri_dir.as_str(),
    ] {
        let mut c = latlab();
        c.current_dir(t.path()).args(["history", "--db", db]);
        let o = c.output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{db}: {err}");
        assert!(
            err.starts_with("latlab: error: --db ") && err.lines().count() == 1,
            "{db}: {err}"
        );
        assert!(
            err.contains("in-memory database keeps nothing")
                || err.contains("SQLite URIs (file:…) are not taken"),
            "{db}: {err}"
        );
    }
    run_kept_with_warning(":memory:", "in-memory database keeps nothing");
    run_kept_with_warning(
        "file:x.db?mode=memory",
        "SQLite URIs (file:…) are not taken",
    );
    assert!(
        std::fs::read_dir(t.path()).unwrap().next().is_none(),
        "nothing is created: {:?}",
        files_under(t.path())
    );
    // A plain relative path to a file of that name is still a file.
    let mut c = latlab();
    c.current_dir(t.path())
        .args(["history", "--db", "./file:x.db"]);
    ok(&c.output().unwrap(), "history --db ./file:x.db");
    assert!(t.path().join("file:x.db").is_file());
}

// ------------------------------------------------------------------ 11: other users' files

/// A database file (or its -wal, -shm or -journal) owned by another user, or writable by group
/// or others, is refused with the fix in the message; a run keeps its directory and warns.
#[test]
fn a_database_of_another_user_or_writable_by_others_is_refused_privileged() {
    let name = "a_database_of_another_user_or_writable_by_others_is_refused_privileged";
    let Some(_g) = privileged::guard(name) else {
        return;
    };
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    // A sticky world-writable directory, as /tmp.
    let shared = t.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let db = shared.join("runs.sqlite");
    let db_s = db.to_str().unwrap();
    ok(
        &run_latlab(&["history", "--db", db_s], &[]),
        "a fresh database",
    );
    let nobody = 65534;

    std::os::unix::fs::chown(&db, Some(nobody), None).unwrap();
    fails_with(
        &["history", "--db", db_s],
        &["is owned by uid 65534, not by you", "chown"],
    );
    run_kept_with_warning(db_s, "is owned by uid 65534, not by you");
    std::os::unix::fs::chown(&db, Some(0), None).unwrap();
    ok(&run_latlab(&["history", "--db", db_s], &[]), "owned again");

    for mode in [0o666, 0o620, 0o602] {
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(mode)).unwrap();
        fails_with(
            &["history", "--db", db_s],
            &["is writable by others", "chmod go-w"],
        );
    }
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).unwrap();
    ok(
        &run_latlab(&["history", "--db", db_s], &[]),
        "private again",
    );

    // A companion file planted by another user.
    for suffix in ["-wal", "-shm", "-journal"] {
        let p = shared.join(format!("runs.sqlite{suffix}"));
        let _ = std::fs::remove_file(&p);
        std::fs::write(&p, b"").unwrap();
        std::os::unix::fs::chown(&p, Some(nobody), None).unwrap();
        fails_with(
            &["history", "--db", db_s],
            &[&format!("runs.sqlite{suffix} is owned by uid 65534")],
        );
        std::fs::remove_file(&p).unwrap();
    }
    ok(
        &run_latlab(&["history", "--db", db_s], &[]),
        "nothing planted",
    );
}

// ------------------------------------------------------------------ 3: bounded waits, signals

/// A `latlab run` recording in `db`, started: stdout discarded, stderr kept.
fn spawn_run(results: &Path, db: &str, timeout: &str) -> std::process::Child {
    support::command()
        .args([
            "run",
            "--backend",
            "sim",
            "--duration",
            "1s",
            "--cpus",
            "0",
            "-q",
            "--db",
            db,
        ])
        .arg("--results")
        .arg(results)
        .env("LATLAB_DB_TIMEOUT", timeout)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait for `child` to end; a latlab still running after `secs` (far beyond every bound the
/// tests set) is killed and the test fails: it hung. Its exit status and stderr.
fn finish(mut child: std::process::Child, secs: u64) -> (std::process::ExitStatus, String) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "latlab still waiting after {secs} s: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn signal(child: &std::process::Child, sig: i32) {
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
}

/// The run ended normally with its directory kept and one warning containing `want`.
fn kept_with(status: std::process::ExitStatus, err: &str, results: &Path, want: &str) {
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("latlab: warning: the run was not stored in the results database: ")
            && err.contains(want)
            && err.contains("latlab db push "),
        "want {want:?} in: {err}"
    );
    let dir = run_dirs(results).pop().expect("the run directory");
    assert_eq!(read_json(&dir.join("run.json"))["complete"], true);
}

/// A TCP server that accepts and never answers: its port, and a channel told of each
/// connection (the connections stay open as long as the test runs).
fn silent_server() -> (u16, std::sync::mpsc::Receiver<()>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut held = vec![];
        for c in l.incoming() {
            held.push(c);
            let _ = tx.send(());
        }
    });
    (port, rx)
}

/// A server that accepts and never answers: connecting gives up at the bound (the run is kept,
/// `db push` later), also for commands that read the database; SIGTERM and SIGINT during the
/// wait end it at once.
#[test]
fn a_server_that_never_answers_costs_the_bound_and_a_signal_ends_the_wait() {
    let (port, accepted) = silent_server();
    let url = format!("postgres://latlab@127.0.0.1:{port}/latlab");
    let t = tempfile::tempdir().unwrap();
    let results = t.path().join("r");
    let (st, err) = finish(spawn_run(&results, &url, "1s"), 120);
    kept_with(
        st,
        &err,
        &results,
        &format!(
            "the results database {url} did not answer within 1s (connecting); LATLAB_DB_TIMEOUT"
        ),
    );
    let o = run_latlab(&["history", "--db", &url], &[("LATLAB_DB_TIMEOUT", "1s")]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("did not answer within 1s (connecting)"), "{e}");

    for sig in [libc::SIGTERM, libc::SIGINT] {
        while accepted.try_recv().is_ok() {}
        let child = spawn_run(&results, &url, "1h");
        accepted
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("latlab connects");
        signal(&child, sig);
        let (st, err) = finish(child, 120);
        kept_with(
            st,
            &err,
            &results,
            &format!("gave up on the results database {url} (connecting): a signal arrived"),
        );
    }
}

/// A SQLite database whose trigger never ends (planted in the file): the statement is stopped
/// at the bound, and at once by SIGTERM; a write lock another process holds costs the bound.
#[test]
fn a_sqlite_statement_or_lock_that_never_ends_costs_the_bound_and_a_signal_ends_it() {
    let t = tempfile::tempdir().unwrap();
    let results = t.path().join("r");
    let db = t.path().join("trigger.sqlite");
    let db_s = db.to_str().unwrap();
    {
        let mut s = latlab_store::open(Some(db_s)).unwrap();
        s.batch(
            "CREATE TRIGGER spin AFTER INSERT ON machines BEGIN
                 SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c);
             END",
        )
        .unwrap();
    }
    let (st, err) = finish(spawn_run(&results, db_s, "1s"), 120);
    kept_with(
        st,
        &err,
        &results,
        "did not answer within 1s (a statement that did not end); LATLAB_DB_TIMEOUT",
    );

    // SIGTERM once the run directory is written (the wait starts right after): sent again
    // until latlab ends, in case the first came a moment before the wait.
    let before = run_dirs(&results);
    let mut child = spawn_run(&results, db_s, "1h");
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(120),
            "latlab still running after 120 s"
        );
        let written = run_dirs(&results)
            .iter()
            .any(|d| !before.contains(d) && d.join("report.html").exists());
        if written {
            signal(&child, libc::SIGTERM);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    kept_with(status, &err, &results, "(a statement): a signal arrived");

    // A write lock held by another process.
    let locked = t.path().join("locked.sqlite");
    let locked_s = locked.to_str().unwrap();
    let mut holder = latlab_store::open(Some(locked_s)).unwrap();
    holder.begin_write().unwrap();
    let (st, err) = finish(spawn_run(&results, locked_s, "1s"), 120);
    kept_with(
        st,
        &err,
        &results,
        "did not answer within 1s (waiting for its lock, which another process holds)",
    );
    holder.rollback();
}

/// A table another PostgreSQL session keeps locked: the insert gives up at the bound (the
/// server's lock_timeout), and at once on SIGTERM.
#[test]
fn a_postgres_lock_another_session_holds_costs_the_bound_and_a_signal_ends_the_wait_privileged() {
    let name =
        "a_postgres_lock_another_session_holds_costs_the_bound_and_a_signal_ends_the_wait_privileged";
    let Some(_g) = privileged::guard(name) else {
        return;
    };
    let Some(pg) = pg_server(name) else {
        return;
    };
    let url = pg.url();
    let t = tempfile::tempdir().unwrap();
    let results = t.path().join("r");
    let mut holder = latlab_store::open(Some(&url)).unwrap();
    holder.batch("BEGIN; LOCK TABLE runs").unwrap();
    let (st, err) = finish(spawn_run(&results, &url, "2s"), 120);
    kept_with(
        st,
        &err,
        &results,
        "did not answer within 2s (waiting for a lock another session holds); LATLAB_DB_TIMEOUT",
    );

    let child = spawn_run(&results, &url, "1h");
    let start = std::time::Instant::now();
    loop {
        let waiting = holder
            .query(
                "SELECT COUNT(*) FROM pg_locks WHERE NOT granted",
                &[],
                &[latlab_store::Ty::I],
            )
            .unwrap()[0][0]
            .int()
            .unwrap();
        if waiting > 0 {
            break;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(120),
            "latlab never waited for the lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    signal(&child, libc::SIGTERM);
    let (st, err) = finish(child, 120);
    kept_with(st, &err, &results, "a signal arrived");
    holder.rollback();
    assert_eq!(
        history_ids(&url, &[]),
        Vec::<String>::new(),
        "nothing stored"
    );
}

// ------------------------------------------------------------------ 6: run ids, integer keys

/// A copy of `src`'s run directory under `dst` with its run.json changed by `f`.
fn doctored(src: &Path, dst: &Path, f: impl FnOnce(&mut serde_json::Value)) -> PathBuf {
    std::fs::create_dir_all(dst).unwrap();
    let mut v = read_json(&src.join("run.json"));
    f(&mut v);
    std::fs::write(dst.join("run.json"), serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    dst.to_path_buf()
}

/// A sim run recorded nowhere: its directory.
fn unrecorded_run(results: &Path) -> PathBuf {
    let (o, dir) = sim(results, &["--no-db"], &[]);
    ok(&o, "run --no-db");
    dir
}

/// A run id that is not a UUID (1 MB of it, a short word, a UUID in capitals) is refused by
/// `db push`, with a short message; the rows of a run reference it by an integer key (the
/// run id is stored once).
fn run_ids_are_uuids(db: &str) {
    let t = tempfile::tempdir().unwrap();
    let run = unrecorded_run(&t.path().join("r"));
    let id = read_json(&run.join("run.json"))["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    for (i, bad) in [
        "x".repeat(1 << 20),
        "abcd".into(),
        id.to_uppercase(),
        String::new(),
    ]
    .into_iter()
    .enumerate()
    {
        let d = doctored(&run, &t.path().join(format!("bad{i}")), |v| {
            v["run_id"] = bad.clone().into()
        });
        let o = run_latlab(&["db", "push", d.to_str().unwrap(), "--db", db], &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.lines().count() == 1
                && err.len() < 400
                && err.contains("run_id")
                && err.contains("is not a UUID"),
            "{}",
            &err[..err.len().min(600)]
        );
    }
    assert!(history_ids(db, &[]).is_empty(), "nothing stored");

    let o = run_latlab(&["db", "push", run.to_str().unwrap(), "--db", db], &[]);
    ok(&o, "db push");
    assert_eq!(history_ids(db, &[]), std::slice::from_ref(&id));
    // The children reference the run by its integer key; the id is in `runs` only.
    let mut s = latlab_store::open(Some(db)).unwrap();
    for table in [
        "cpu_stats",
        "histograms",
        "spikes",
        "spike_causes",
        "loads",
        "findings",
    ] {
        let n = s
            .query(
                &format!(
                    "SELECT COUNT(*) FROM {table} c JOIN runs r ON r.id = c.run WHERE r.run_id = ?"
                ),
                &[latlab_store::Val::T(Some(id.clone()))],
                &[latlab_store::Ty::I],
            )
            .unwrap_or_else(|e| panic!("{table}: {e}"))[0][0]
            .int()
            .unwrap();
        if matches!(table, "cpu_stats" | "histograms" | "findings") {
            assert!(n > 0, "{table}: no rows of the run");
        }
        s.query(
            &format!("SELECT run_id FROM {table}"),
            &[],
            &[latlab_store::Ty::T],
        )
        .expect_err("no run id column in the children");
    }
}

#[test]
fn sqlite_run_ids_are_uuids_and_rows_reference_runs_by_integer_keys() {
    let t = tempfile::tempdir().unwrap();
    run_ids_are_uuids(t.path().join("runs.sqlite").to_str().unwrap());
}

#[test]
fn postgres_run_ids_are_uuids_and_rows_reference_runs_by_integer_keys_privileged() {
    let name = "postgres_run_ids_are_uuids_and_rows_reference_runs_by_integer_keys_privileged";
    let Some(_g) = privileged::guard(name) else {
        return;
    };
    let Some(pg) = pg_server(name) else {
        return;
    };
    run_ids_are_uuids(&pg.url());
}

/// A database of schema version 1 (latlab_store's fixture: runs keyed by their text id,
/// a run id that is not a UUID among them) is migrated: every run, row and byte is kept,
/// readable by id, and the children reference runs by integer keys.
fn migrates_from_version_1(db: &str) {
    use latlab_store::Ty;
    let fixture = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../latlab-store/tests/fixtures/schema-v1.sql"),
    )
    .unwrap();
    let mut s = latlab_store::open_at_version(Some(db), 1).unwrap();
    s.batch(&fixture).unwrap();
    let tables = [
        "cpu_stats",
        "histograms",
        "spikes",
        "spike_causes",
        "loads",
        "findings",
    ];
    let count = |s: &mut Box<dyn latlab_store::Store>, sql: &str| {
        s.query(sql, &[], &[Ty::I]).unwrap()[0][0].int().unwrap()
    };
    let before: Vec<i64> = tables
        .iter()
        .map(|t| count(&mut s, &format!("SELECT COUNT(*) FROM {t}")))
        .collect();
    let runs = s.list(&Default::default()).unwrap();
    assert_eq!(runs.len(), 5);
    let jsons: Vec<(String, Vec<u8>)> = runs.iter().map(|r| s.get(&r.run_id).unwrap()).collect();
    drop(s);

    let mut s = latlab_store::open(Some(db)).unwrap();
    assert_eq!(
        latlab_store::schema::current(s.as_mut()).unwrap(),
        latlab_store::schema::version()
    );
    assert_eq!(s.list(&Default::default()).unwrap(), runs);
    for (id, bytes) in &jsons {
        assert_eq!(&s.get(id).unwrap().1, bytes, "{id}");
    }
    for (t, n) in tables.iter().zip(&before) {
        let joined = count(
            &mut s,
            &format!("SELECT COUNT(*) FROM {t} c JOIN runs r ON r.id = c.run"),
        );
        assert_eq!(joined, *n, "{t}");
    }
    assert!(before.iter().all(|&n| n > 0), "{before:?}");
    // The legacy id stays readable; its rows are there.
    let legacy = count(
        &mut s,
        "SELECT COUNT(*) FROM histograms h JOIN runs r ON r.id = h.run WHERE r.run_id = 'legacy-id-of-an-older-push'",
    );
    assert!(legacy > 0);
    // New runs go on being stored, and a run of the fixture is there once.
    let t = tempfile::tempdir().unwrap();
    let run = unrecorded_run(&t.path().join("r"));
    let p = s
        .push(&std::fs::read(run.join("run.json")).unwrap())
        .unwrap();
    assert!(p.added);
    let again = s.push(&jsons[0].1).unwrap();
    assert!(!again.added, "{}", again.run_id);
    let n = count(&mut s, "SELECT COUNT(*) FROM runs");
    assert_eq!(n, 6);
    let max = s.query("SELECT MAX(id) FROM runs", &[], &[Ty::I]).unwrap()[0][0]
        .int()
        .unwrap();
    assert_eq!(max, 6, "keys continue after the migrated runs");
}

#[test]
fn sqlite_migrates_a_version_1_database() {
    let t = tempfile::tempdir().unwrap();
    migrates_from_version_1(t.path().join("runs.sqlite").to_str().unwrap());
}

#[test]
fn postgres_migrates_a_version_1_database_privileged() {
    let name = "postgres_migrates_a_version_1_database_privileged";
    let Some(_g) = privileged::guard(name) else {
        return;
    };
    let Some(pg) = pg_server(name) else {
        return;
    };
    migrates_from_version_1(&pg.url());
}

// ------------------------------------------------------------------ 17: checked before written

/// `db push` of 12 run directories, the last with a NUL in a string PostgreSQL cannot store:
/// refused before anything is written, naming the directory and the field, the same on both
/// engines.
fn every_record_is_checked_before_anything_is_written(db: &str) {
    let t = tempfile::tempdir().unwrap();
    let results = t.path().join("r");
    let run = unrecorded_run(&results);
    let mut dirs: Vec<PathBuf> = (0..11)
        .map(|i| {
            doctored(&run, &t.path().join(format!("ok{i}")), |v| {
                v["run_id"] = format!("00000000-0000-4000-8000-{i:012}").into();
                v["label"] = format!("ok{i}").into();
            })
        })
        .collect();
    for (field, f) in [
        (
            "label",
            Box::new(|v: &mut serde_json::Value| v["label"] = "a\u{0}b".into())
                as Box<dyn Fn(&mut serde_json::Value)>,
        ),
        (
            "machine.hostname",
            Box::new(|v: &mut serde_json::Value| v["machine"]["hostname"] = "h\u{0}".into()),
        ),
        (
            "loads[0].command",
            Box::new(
                |v: &mut serde_json::Value| v["loads"] = serde_json::json!([{"profile": "p", "command": "x\u{0}y", "exit": 0, "ops": null}]),
            ),
        ),
    ] {
        let bad = doctored(&run, &t.path().join("bad"), |v| {
            v["run_id"] = "00000000-0000-4000-8000-999999999999".into();
            f(v)
        });
        dirs.push(bad.clone());
        let mut args = vec!["db".to_string(), "push".into()];
        args.extend(dirs.iter().map(|d| d.to_str().unwrap().to_string()));
        args.extend(["--db".into(), db.into()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run_latlab(&args, &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{field}: {err}");
        assert!(
            err.lines().count() == 1
                && err.contains(&bad.join("run.json").display().to_string())
                && err.contains(&format!("{field} holds a NUL character")),
            "{field}: {err}"
        );
        assert!(o.stdout.is_empty());
        assert!(
            history_ids(db, &[]).is_empty(),
            "{field}: something was stored"
        );
        dirs.pop();
    }
    let mut args = vec!["db".to_string(), "push".into()];
    args.extend(dirs.iter().map(|d| d.to_str().unwrap().to_string()));
    args.extend(["--db".into(), db.into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = run_latlab(&args, &[]);
    ok(&o, "db push of the good ones");
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("11 added, 0 already present"));
}

#[test]
fn sqlite_push_checks_every_record_before_writing() {
    let t = tempfile::tempdir().unwrap();
    every_record_is_checked_before_anything_is_written(
        t.path().join("runs.sqlite").to_str().unwrap(),
    );
}

#[test]
fn postgres_push_checks_every_record_before_writing_privileged() {
    let name = "postgres_push_checks_every_record_before_writing_privileged";
    let Some(_g) = privileged::guard(name) else {
        return;
    };
    let Some(pg) = pg_server(name) else {
        return;
    };
    every_record_is_checked_before_anything_is_written(&pg.url());
}
