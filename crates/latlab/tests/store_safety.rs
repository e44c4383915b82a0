//! The results database against hostile or careless input (issue 30): no secret recorded,
//! every wait bounded and a signal obeyed while waiting, run ids that are UUIDs, database paths
//! through symlinked directories, in-memory and URI databases refused, files of other users
//! refused, and every pushed record checked before anything is written.

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

use support::pg::pg_server;
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
    const SECRET: &str = "secretpw";
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
    let mut outputs: Vec<(String, Vec<u8>)> = vec![];
    let mut keep = |what: &str, o: &Output| {
        outputs.push((format!("{what} stdout"), o.stdout.clone()));
        outputs.push((format!("{what} stderr"), o.stderr.clone()));
    };

    let (o, a) = sim(&results, &["--db", &with_password, "--label", "a"], &env);
    ok(&o, "run --db URL");
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    keep("run a", &o);
    let db_eq = format!("--db={in_query}");
    let (o, b) = sim(&results, &[&db_eq, "--label", "b"], &env);
    ok(&o, "run --db=URL");
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    keep("run b", &o);
    // The environment's database (not on the command line).
    let (o, _) = sim(&results, &["--label", "c"], &env);
    ok(&o, "run with LATLAB_DB");
    keep("run c", &o);
    let rec = read_json(&a.join("run.json"));
    assert!(
        rec["command_line"]
            .as_str()
            .unwrap()
            .contains("--db postgres://postgres:***@127.0.0.1"),
        "{}",
        rec["command_line"]
    );

    // A run.json as an older latlab wrote it: no run id, the password in its command line.
    let old = t.path().join("old");
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
    for db in [with_password.as_str(), sqlite.to_str().unwrap()] {
        let o = run_latlab(&["db", "push", old_s, "--db", db], &env);
        ok(&o, "db push");
        keep("db push", &o);
    }

    let (a_s, b_s) = (a.to_str().unwrap(), b.to_str().unwrap());
    let id = rec["run_id"].as_str().unwrap();
    let pulled = t.path().join("pulled");
    let pulled_old = t.path().join("pulled-old");
    let old_id = {
        let o = run_latlab(&["history", "--format", "json", "--label", "old"], &env);
        ok(&o, "history");
        let h: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        h["runs"][0]["run_id"].as_str().unwrap().to_string()
    };
    let mut commands: Vec<Vec<String>> = vec![];
    for dir in [a_s, b_s, old_s, id] {
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
    let pulled_s = pulled.to_str().unwrap().to_string();
    let pulled_old_s = pulled_old.to_str().unwrap().to_string();
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
        let o = run_latlab(&args, &env);
        ok(&o, &c.join(" "));
        keep(&c.join(" "), &o);
    }

    let mut leaks = vec![];
    for (what, bytes) in &outputs {
        if holds(bytes, SECRET) {
            leaks.push(what.clone());
        }
    }
    for dir in [&results, &pulled, &pulled_old] {
        for (p, bytes) in files_under(dir) {
            if holds(&bytes, SECRET) {
                leaks.push(p.display().to_string());
            }
        }
    }
    for (p, bytes) in files_under(t.path()) {
        let n = p.file_name().unwrap().to_string_lossy().to_string();
        if n.starts_with("runs.sqlite") && holds(&bytes, SECRET) {
            leaks.push(p.display().to_string());
        }
    }
    if pg.dump().contains(SECRET) {
        leaks.push("the PostgreSQL database (pg_dump)".into());
    }
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
