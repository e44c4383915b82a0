//! The results database on both engines: SQLite (a temp file) and PostgreSQL (a real server
//! these tests start in a temp directory). Runs and imports land, a push is idempotent,
//! `history` filters, `db pull` writes a run back that `report`s the same, concurrent pushers
//! store each run once, and bad databases are clear errors.

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;
use support::pg::pg_server;
use support::{latlab, only_run_dir, privileged, read_json};

/// A sim run of 1 s on CPU 0 recorded in `db`: its run directory.
fn sim_run(db: &str, results: &Path, label: &str, seed: u32) -> PathBuf {
    let before = support::run_dirs(results);
    let out = latlab()
        .args([
            "run",
            "--backend",
            "sim",
            "--duration",
            "1s",
            "--cpus",
            "0",
            "-q",
        ])
        .args([
            "--label",
            label,
            "--sim-seed",
            &seed.to_string(),
            "--db",
            db,
        ])
        .arg("--results")
        .arg(results)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = support::run_dirs(results);
    after.into_iter().find(|d| !before.contains(d)).unwrap()
}

fn history(db: &str, args: &[&str]) -> Vec<Value> {
    let out = latlab()
        .args(["history", "--format", "json", "--db", db])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["runs"].as_array().unwrap().clone()
}

fn stdout_of(args: &[&str]) -> String {
    let out = latlab().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn run_id(dir: &Path) -> String {
    read_json(&dir.join("run.json"))["run_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// What both engines must do alike.
fn engine_behaviour(db: &str) {
    let t = tempfile::tempdir().unwrap();
    let results = t.path().join("results");
    let a = sim_run(db, &results, "alpha", 1);
    let b = sim_run(db, &results, "beta", 2);
    let (ida, idb) = (run_id(&a), run_id(&b));
    assert_ne!(ida, idb);
    assert_eq!(ida.len(), 36, "{ida}");

    // Both runs landed, oldest first, with their numbers.
    let runs = history(db, &[]);
    let ids: Vec<&str> = runs.iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    assert!(
        ids.contains(&ida.as_str()) && ids.contains(&idb.as_str()),
        "{ids:?}"
    );
    let ra = runs.iter().find(|r| r["run_id"] == ida.as_str()).unwrap();
    let rec = read_json(&a.join("run.json"));
    assert_eq!(ra["max_ns"], rec["total"]["max_ns"]);
    assert_eq!(ra["p999_ns"], rec["total"]["p999_ns"]);
    assert_eq!(ra["p99_ns"], rec["total"]["p99_ns"]);
    assert_eq!(ra["samples"], rec["total"]["samples"]);
    assert_eq!(ra["label"], "alpha");

    // Filters.
    let only_beta = history(db, &["--label", "beta"]);
    assert!(
        only_beta.iter().all(|r| r["label"] == "beta"),
        "{only_beta:?}"
    );
    assert!(only_beta.iter().any(|r| r["run_id"] == idb.as_str()));
    let kernel = rec["machine"]["kernel_release"].as_str().unwrap();
    assert!(history(db, &["--kernel", kernel]).len() >= 2);
    assert!(history(db, &["--kernel", "no-such-kernel"]).is_empty());
    let host = rec["machine"]["hostname"].as_str().unwrap();
    assert!(history(db, &["--machine", host]).len() >= 2);
    assert!(history(db, &["--machine", "no-such-host"]).is_empty());
    assert!(history(db, &["--since", "1h"]).len() >= 2);

    // Push is idempotent: the runs are there once.
    let out = stdout_of(&[
        "db",
        "push",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--db",
        db,
    ]);
    assert!(out.starts_with("0 added, 2 already present"), "{out}");
    let n = history(db, &[])
        .iter()
        .filter(|r| r["run_id"] == ida.as_str())
        .count();
    assert_eq!(n, 1);

    // An import (no run id of its own: derived) lands too; pushing it again adds nothing.
    let ct = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../latlab-core/tests/fixtures/import/cyclictest-h100.txt");
    let imp = t.path().join("imp");
    let out = latlab()
        .args(["import", "--label", "imported", "--db", db])
        .arg(&ct)
        .arg("--results")
        .arg(&imp)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let idir = only_run_dir(&imp);
    let iid = run_id(&idir);
    assert!(history(db, &["--label", "imported"])
        .iter()
        .any(|r| r["run_id"] == iid.as_str()));
    let out = stdout_of(&["db", "push", idir.to_str().unwrap(), "--db", db]);
    assert!(out.starts_with("0 added, 1 already present"), "{out}");

    // Pull: the same run.json byte for byte, and the same reports.
    let pulled = t.path().join("pulled");
    stdout_of(&[
        "db",
        "pull",
        &ida,
        "-o",
        pulled.to_str().unwrap(),
        "--db",
        db,
    ]);
    assert_eq!(
        std::fs::read(a.join("run.json")).unwrap(),
        std::fs::read(pulled.join("run.json")).unwrap()
    );
    for fmt in ["text", "json", "html", "cyclictest"] {
        assert_eq!(
            stdout_of(&["report", a.to_str().unwrap(), "--format", fmt]),
            stdout_of(&["report", pulled.to_str().unwrap(), "--format", fmt]),
            "report --format {fmt}"
        );
    }
    // report and compare take a run id (a prefix too).
    assert_eq!(
        stdout_of(&["report", a.to_str().unwrap()]),
        stdout_of(&["report", &ida[..8], "--db", db])
    );
    assert_eq!(
        stdout_of(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]),
        stdout_of(&["compare", &ida, &idb, "--db", db])
    );
    // An html history page with the plots.
    let page = stdout_of(&["history", "--format", "html", "--db", db]);
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert_eq!(page.matches("<svg").count(), 4, "four long-term plots");
    assert!(page.contains(&ida));
}

#[test]
fn sqlite_records_runs_and_imports_filters_and_round_trips() {
    let t = tempfile::tempdir().unwrap();
    let db = t.path().join("runs.sqlite");
    engine_behaviour(db.to_str().unwrap());
}

#[test]
fn no_db_records_nothing_and_a_broken_db_keeps_the_run() {
    let t = tempfile::tempdir().unwrap();
    let db = t.path().join("runs.sqlite");
    let results = t.path().join("r");
    let out = latlab()
        .args([
            "run",
            "--backend",
            "sim",
            "--duration",
            "1s",
            "--cpus",
            "0",
            "-q",
            "--no-db",
        ])
        .arg("--results")
        .arg(&results)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!db.exists(), "--no-db created the database");

    // An unreachable server: the run is kept, the warning says how to push it later.
    let out = latlab()
        .args([
            "run",
            "--backend",
            "sim",
            "--duration",
            "1s",
            "--cpus",
            "0",
            "-q",
        ])
        .args([
            "--db",
            "postgres://latlab@127.0.0.1:1/latlab?connect_timeout=2",
        ])
        .arg("--results")
        .arg(&results)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("latlab: warning: the run was not stored in the results database: cannot connect to the results database postgres://latlab@127.0.0.1:1/latlab"), "{err}");
    assert!(err.contains("latlab db push "), "{err}");
    assert_eq!(support::run_dirs(&results).len(), 2);
}

/// `latlab ARGS` fails with exit 1 and one line `latlab: error: …` containing `want`.
fn fails_with(args: &[&str], want: &str) {
    let out = latlab().args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{args:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("latlab: error: ") && err.contains(want),
        "{args:?}: {err}"
    );
}

#[test]
fn bad_databases_are_clear_errors() {
    let t = tempfile::tempdir().unwrap();
    fails_with(
        &["history", "--db", "mysql://h/x"],
        "unknown database scheme `mysql`",
    );
    fails_with(
        &[
            "history",
            "--db",
            "postgres://127.0.0.1:1/x?connect_timeout=2",
        ],
        "cannot connect to the results database postgres://127.0.0.1:1/x",
    );
    let corrupt = t.path().join("corrupt.sqlite");
    std::fs::write(&corrupt, vec![0x5a; 8192]).unwrap();
    fails_with(
        &["history", "--db", corrupt.to_str().unwrap()],
        "is not a SQLite database or is corrupt",
    );
    // A database a newer latlab migrated.
    let newer = t.path().join("newer.sqlite");
    let mut s = latlab_store::open(Some(newer.to_str().unwrap())).unwrap();
    s.exec(
        "INSERT INTO latlab_migrations (version, applied_unix) VALUES (?, ?)",
        &[
            latlab_store::Val::I(Some(99)),
            latlab_store::Val::I(Some(0)),
        ],
    )
    .unwrap();
    drop(s);
    fails_with(
        &["history", "--db", newer.to_str().unwrap()],
        &format!(
            "has schema version 99, newer than this latlab knows ({}): use a newer latlab",
            latlab_store::schema::version()
        ),
    );
    // Not a regular file.
    fails_with(
        &["history", "--db", t.path().to_str().unwrap()],
        "not a regular file",
    );
    // An id that is nowhere.
    let db = t.path().join("empty.sqlite");
    fails_with(
        &["report", "deadbeef", "--db", db.to_str().unwrap()],
        "deadbeef: no such run directory or file, and no run with that id",
    );
    fails_with(
        &[
            "db",
            "pull",
            "deadbeef",
            "-o",
            t.path().join("x").to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
        ],
        "no run with id `deadbeef`",
    );
}

// ---------------------------------------------------------------- PostgreSQL

#[test]
fn postgres_records_runs_and_imports_filters_and_round_trips_privileged() {
    let Some(_g) =
        privileged::guard("postgres_records_runs_and_imports_filters_and_round_trips_privileged")
    else {
        return;
    };
    let Some(pg) =
        pg_server("postgres_records_runs_and_imports_filters_and_round_trips_privileged")
    else {
        return;
    };
    engine_behaviour(&pg.url());
}

/// 8 processes at once push 8 distinct runs plus one they all share: 9 runs stored, each
/// once, whatever the interleaving; the same on SQLite.
fn concurrent_pushes(db: &str) {
    let t = tempfile::tempdir().unwrap();
    let results = t.path().join("r");
    let scratch = t.path().join("scratch.sqlite");
    let dirs: Vec<PathBuf> = (0..9)
        .map(|i| {
            sim_run(
                scratch.to_str().unwrap(),
                &results,
                &format!("c{i}"),
                10 + i,
            )
        })
        .collect();
    let shared = &dirs[8];
    let children: Vec<_> = (0..8)
        .map(|i| {
            support::command()
                .args(["db", "push", "--db", db])
                .arg(&dirs[i])
                .arg(shared)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut added_shared = 0;
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let s = String::from_utf8(out.stdout).unwrap();
        if s.starts_with("2 added") {
            added_shared += 1;
        } else {
            assert!(s.starts_with("1 added, 1 already present"), "{s}");
        }
    }
    assert_eq!(
        added_shared, 1,
        "the shared run was added by exactly one pusher"
    );
    let runs = history(db, &[]);
    assert_eq!(runs.len(), 9, "{runs:?}");
    for d in &dirs {
        let id = run_id(d);
        assert_eq!(
            runs.iter().filter(|r| r["run_id"] == id.as_str()).count(),
            1
        );
    }
}

#[test]
fn sqlite_concurrent_pushes_store_each_run_once() {
    let t = tempfile::tempdir().unwrap();
    concurrent_pushes(t.path().join("runs.sqlite").to_str().unwrap());
}

#[test]
fn postgres_concurrent_pushes_store_each_run_once_privileged() {
    let Some(_g) = privileged::guard("postgres_concurrent_pushes_store_each_run_once_privileged")
    else {
        return;
    };
    let Some(pg) = pg_server("postgres_concurrent_pushes_store_each_run_once_privileged") else {
        return;
    };
    concurrent_pushes(&pg.url());
}
