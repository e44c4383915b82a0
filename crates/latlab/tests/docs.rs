//! The contract in the repository: docs/cli.md must name every flag `latlab … --help` lists
//! (with its default), docs/schema/*.schema.json must be what the serde types generate today,
//! and real run files (sim runs, modes, imports, a scenario) must validate against them.
//!
//! Regenerate the schemas after changing a record or report type:
//! `LATLAB_UPDATE_SCHEMA=1 cargo test -p latlab --test docs`, then review and commit the diff.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn latlab() -> Command {
    Command::cargo_bin("latlab").unwrap()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

// ---------------------------------------------------------------- schemas

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap();
    s.push('\n');
    s
}

/// run.json: what `RunRecord::from_json` accepts (the deserialize contract: keys with a
/// default may be absent, so older records validate too).
fn run_schema() -> Value {
    serde_json::to_value(schemars::schema_for!(latlab_core::record::RunRecord)).unwrap()
}

/// The report JSON: what `report --format json` writes (the serialize contract: every key
/// that is always written is required).
fn report_schema() -> Value {
    let gen = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    serde_json::to_value(gen.into_root_schema_for::<latlab_report::json::Report<'static>>())
        .unwrap()
}

fn schemas() -> [(&'static str, Value); 2] {
    [
        ("docs/schema/run.schema.json", run_schema()),
        ("docs/schema/report.schema.json", report_schema()),
    ]
}

#[test]
fn committed_schemas_are_the_generated_ones() {
    let update = std::env::var_os("LATLAB_UPDATE_SCHEMA").is_some_and(|v| v == "1");
    let mut stale = vec![];
    for (rel, schema) in schemas() {
        let path = root().join(rel);
        let want = pretty(&schema);
        if update {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &want).unwrap();
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(have) if have == want => {}
            _ => stale.push(rel),
        }
    }
    assert!(
        stale.is_empty(),
        "{} differ from the schemas the serde types generate (or are missing); regenerate with \
         `LATLAB_UPDATE_SCHEMA=1 cargo test -p latlab --test docs`, review the diff, update \
         docs/contract.md, and commit them",
        stale.join(", ")
    );
}

struct Validator {
    schemas: boon::Schemas,
    run: boon::SchemaIndex,
    report: boon::SchemaIndex,
}

impl Validator {
    /// Compiled from the committed files (what a user of the repository gets).
    fn committed() -> Validator {
        let mut schemas = boon::Schemas::new();
        let mut c = boon::Compiler::new();
        let mut idx = vec![];
        for rel in [
            "docs/schema/run.schema.json",
            "docs/schema/report.schema.json",
        ] {
            let v: Value = serde_json::from_str(&read(&root().join(rel))).unwrap();
            let url = format!("file:///latlab/{rel}");
            c.add_resource(&url, v).unwrap();
            idx.push(
                c.compile(&url, &mut schemas)
                    .unwrap_or_else(|e| panic!("{rel}: {e}")),
            );
        }
        Validator {
            schemas,
            run: idx[0],
            report: idx[1],
        }
    }

    fn check(&self, which: boon::SchemaIndex, what: &str, v: &Value) {
        if let Err(e) = self.schemas.validate(v, which) {
            panic!("{what} does not validate against its schema:\n{e:#}");
        }
    }

    fn run_json(&self, dir: &Path) {
        let p = dir.join("run.json");
        let v: Value = serde_json::from_str(&read(&p)).unwrap();
        self.check(self.run, &p.display().to_string(), &v);
        let out = latlab()
            .args(["report", "--format", "json"])
            .arg(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "report {}: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        self.check(
            self.report,
            &format!("report --format json {}", dir.display()),
            &r,
        );
    }
}

/// The single run directory a command made under `results`.
fn only_dir(results: &Path, before: &BTreeSet<PathBuf>) -> PathBuf {
    let now: BTreeSet<PathBuf> = std::fs::read_dir(results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let new: Vec<_> = now.difference(before).cloned().collect();
    assert_eq!(new.len(), 1, "expected one new run directory: {new:?}");
    new[0].clone()
}

fn run_dir(results: &Path, args: &[&str]) -> PathBuf {
    let before: BTreeSet<PathBuf> = std::fs::read_dir(results)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    let out = latlab()
        .args(args)
        .arg("--results")
        .arg(results)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "latlab {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    only_dir(results, &before)
}

#[test]
fn real_run_files_validate_against_the_committed_schemas() {
    // One of its runs is traced: as root that is a tracefs instance of its own, which the
    // privileged tests' leftover checks would see (modes' "left behind: latlab-770" in CI),
    // so it runs under their lock.
    let _lock = latlab_sys::privileged::lock();
    let v = Validator::committed();
    let tmp = tempfile::tempdir().unwrap();
    let res = tmp.path().join("results");
    let sim = ["run", "--backend", "sim", "--duration", "3s", "--quiet"];
    let mut dirs = vec![];
    for extra in [
        &[][..],
        &["--cpus", "0", "--trace-threshold", "50us"][..],
        &["--mode", "wakeup", "--cross-cpu"][..],
        &["--mode", "jitter"][..],
        &["--mode", "audio", "--buffers", "3"][..],
    ] {
        let args: Vec<&str> = sim.iter().chain(extra).copied().collect();
        dirs.push(run_dir(&res, &args));
    }
    // A record with mode objects and traced spikes really came out (the keys the schema
    // describes beyond the basics are exercised, not just absent).
    let audio: Value = serde_json::from_str(&read(&dirs[4].join("run.json"))).unwrap();
    assert!(audio["cpus"][0]["mode"]["audio"].is_object(), "{audio:#}");
    let traced: Value = serde_json::from_str(&read(&dirs[1].join("run.json"))).unwrap();
    assert!(traced["trace"].is_object(), "{traced:#}");

    // Every import fixture latlab accepts (some are there to be refused: no histogram).
    let fixtures = root().join("crates/latlab-core/tests/fixtures/import");
    let imports = tmp.path().join("imports");
    let mut n = 0;
    for e in std::fs::read_dir(&fixtures).unwrap() {
        let f = e.unwrap().path();
        let before = std::fs::read_dir(&imports)
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        let out = latlab()
            .arg("import")
            .arg(&f)
            .arg("--results")
            .arg(&imports)
            .output()
            .unwrap();
        if out.status.success() {
            dirs.push(only_dir(&imports, &before));
            n += 1;
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.code() == Some(1) && err.starts_with("latlab: error: "),
                "{err}"
            );
        }
    }
    assert!(n >= 8, "imported fixtures: {n}");

    // A scenario without root: fairness under SCHED_OTHER with a sleeper.
    dirs.push(run_dir(
        &res,
        &[
            "scenario",
            "fairness",
            "--tasks",
            "2",
            "--duration",
            "1s",
            "--sleeper",
        ],
    ));
    let fair: Value = serde_json::from_str(&read(&dirs.last().unwrap().join("run.json"))).unwrap();
    assert_eq!(fair["scenario"]["kind"], "fairness");

    for d in &dirs {
        v.run_json(d);
    }

    // `run --format json` prints the report JSON too.
    let out = latlab()
        .args(sim)
        .args(["--format", "json", "--mode", "audio", "--results"])
        .arg(&res)
        .output()
        .unwrap();
    assert!(out.status.success());
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(r["mode"]["audio"].is_object());
    v.check(v.report, "run --format json", &r);
}

/// The validation above can fail: files that break the contract are rejected.
#[test]
fn the_schemas_reject_what_breaks_the_contract() {
    let v = Validator::committed();
    let tmp = tempfile::tempdir().unwrap();
    let dir = run_dir(
        &tmp.path().join("r"),
        &["run", "--backend", "sim", "--duration", "2s", "--quiet"],
    );
    let good: Value = serde_json::from_str(&read(&dir.join("run.json"))).unwrap();
    v.check(v.run, "the sim run.json", &good);
    let bad = |f: &dyn Fn(&mut Value)| {
        let mut b = good.clone();
        f(&mut b);
        b
    };
    for (what, b) in [
        (
            "latency as a string",
            bad(&|b| b["cpus"][0]["max_ns"] = "12us".into()),
        ),
        (
            "no cpus",
            bad(&|b| drop(b.as_object_mut().unwrap().remove("cpus"))),
        ),
        ("unknown source", bad(&|b| b["source"] = "perf".into())),
        (
            "negative count",
            bad(&|b| b["total"]["samples"] = (-1).into()),
        ),
        (
            "cause kind",
            bad(
                &|b| b["spikes"] = serde_json::json!([{"cpu": 0, "at_ns": 1, "latency_ns": 2, "causes": [{"kind": "gremlin", "name": "x", "ns": 1}]}]),
            ),
        ),
    ] {
        assert!(
            v.schemas.validate(&b, v.run).is_err(),
            "run.json with {what} validated"
        );
    }
    let out = latlab()
        .args(["report", "--format", "json"])
        .arg(&dir)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.check(v.report, "report --format json", &report);
    // The report's keys are required (the serialize contract): a report without `total` fails.
    let mut b = report.clone();
    b.as_object_mut().unwrap().remove("total");
    assert!(v.schemas.validate(&b, v.report).is_err());
    let mut b = report;
    b["cpus"][0]["p99_ns"] = 1.5.into();
    assert!(v.schemas.validate(&b, v.report).is_err());
}

// ---------------------------------------------------------------- docs/cli.md

fn help(path: &[&str]) -> String {
    let out = latlab().args(path).arg("--help").output().unwrap();
    assert!(out.status.success(), "latlab {path:?} --help");
    String::from_utf8(out.stdout).unwrap()
}

/// Subcommand names listed under `Commands:` (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    let mut out = vec![];
    let mut inside = false;
    for l in help.lines() {
        if l == "Commands:" {
            inside = true;
            continue;
        }
        if inside {
            if l.is_empty() || !l.starts_with("  ") {
                break;
            }
            // Continuation lines of a wrapped description are indented further.
            if l.starts_with("   ") {
                continue;
            }
            let name = l.split_whitespace().next().unwrap();
            if name != "help" {
                out.push(name.to_string());
            }
        }
    }
    out
}

/// Every option's long name with its `[default: …]` text (whitespace collapsed), `-h`/`-V` left out.
fn options(help: &str) -> Vec<(String, Option<String>)> {
    let mut blocks: Vec<String> = vec![];
    let mut inside = false;
    for l in help.lines() {
        if l == "Options:" {
            inside = true;
            continue;
        }
        if !inside {
            continue;
        }
        let t = l.trim_start();
        let starts = (t.starts_with("--") || (t.starts_with('-') && t[2..].starts_with(", --")))
            && l.len() - t.len() <= 6;
        if starts {
            blocks.push(String::new());
        }
        if let Some(b) = blocks.last_mut() {
            b.push(' ');
            b.push_str(t);
        }
    }
    let mut out = vec![];
    for b in blocks {
        let b = b.split_whitespace().collect::<Vec<_>>().join(" ");
        let at = b.find("--").unwrap();
        let name: String = b[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if name == "--help" || name == "--version" {
            continue;
        }
        let default = b.find("[default: ").map(|i| {
            let rest = &b[i + "[default: ".len()..];
            rest[..rest.find(']').unwrap()].to_string()
        });
        out.push((name, default));
    }
    out
}

/// The part of docs/cli.md under the heading that names `latlab PATH` (to the next heading of
/// the same or a higher level).
fn section<'a>(doc: &'a str, path: &[&str]) -> Option<&'a str> {
    let title = format!("`latlab {}`", path.join(" "));
    let mut start = None;
    let mut level = 0;
    let mut pos = 0;
    for l in doc.split_inclusive('\n') {
        let hashes = l.chars().take_while(|&c| c == '#').count();
        if hashes > 0 {
            if let Some(s) = start {
                if hashes <= level {
                    return Some(&doc[s..pos]);
                }
            } else if l.trim_end().ends_with(&title) {
                start = Some(pos);
                level = hashes;
            }
        }
        pos += l.len();
    }
    start.map(|s| &doc[s..])
}

#[test]
fn cli_reference_names_every_command_flag_and_default() {
    let doc = read(&root().join("docs/cli.md"));
    let mut problems = vec![];
    let mut leaves = 0;
    let mut flags = 0;
    let mut stack: Vec<Vec<String>> = subcommands(&help(&[]))
        .into_iter()
        .map(|c| vec![c])
        .collect();
    assert!(stack.len() >= 10, "top-level commands: {stack:?}");
    while let Some(path) = stack.pop() {
        let p: Vec<&str> = path.iter().map(String::as_str).collect();
        let h = help(&p);
        let subs = subcommands(&h);
        if !subs.is_empty() {
            for s in subs {
                let mut q = path.clone();
                q.push(s);
                stack.push(q);
            }
            continue;
        }
        leaves += 1;
        let Some(sec) = section(&doc, &p) else {
            problems.push(format!("no section headed `latlab {}`", p.join(" ")));
            continue;
        };
        for (flag, default) in options(&h) {
            flags += 1;
            // The flag's row: a line of the section naming it in code, e.g. "| `--duration D` |".
            let rows: Vec<&str> = sec
                .lines()
                .filter(|l| {
                    l.match_indices(&flag).any(|(i, _)| {
                        let after = l[i + flag.len()..].chars().next();
                        l[..i].ends_with('`')
                            && !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
                    })
                })
                .collect();
            if rows.is_empty() {
                problems.push(format!("latlab {}: {flag} is not documented", p.join(" ")));
                continue;
            }
            if let Some(d) = default {
                if !rows.iter().any(|r| r.contains(&d)) {
                    problems.push(format!(
                        "latlab {}: {flag}: default `{d}` is not on its row",
                        p.join(" ")
                    ));
                }
            }
        }
    }
    assert!(
        leaves >= 17 && flags >= 60,
        "{leaves} commands, {flags} flags"
    );
    assert!(
        problems.is_empty(),
        "docs/cli.md is stale against `latlab … --help`:\n  {}",
        problems.join("\n  ")
    );
}

/// The exit codes docs/cli.md promises, checked on the binary: 1 for a usage error, 2 only
/// for --max-latency.
#[test]
fn cli_reference_exit_codes_hold() {
    let doc = read(&root().join("docs/cli.md"));
    assert!(doc.contains("| `2` |") && doc.contains("| `1` |") && doc.contains("| `0` |"));
    latlab().args(["run", "--no-such-flag"]).assert().code(1);
    let tmp = tempfile::tempdir().unwrap();
    latlab()
        .args(["run", "--backend", "sim", "--duration", "2s", "--quiet"])
        .args(["--max-latency", "1us", "--results"])
        .arg(tmp.path())
        .assert()
        .code(2);
}

/// No reference to a file outside the repository is left.
#[test]
fn nothing_cites_the_design_file_outside_the_repository() {
    let mut hits = vec![];
    let mut stack = vec![root().join("crates"), root().join("docs")];
    let mut files = vec![root().join("README.md")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs" || x == "md") {
                files.push(p);
            }
        }
    }
    // `docs/design.md` is the repository's own; the file outside it lived next to the
    // repository, under `shared/`.
    let needles = [
        ["shared/", "design.md"].concat(),
        ["../", "shared"].concat(),
    ];
    for f in files {
        let text = read(&f);
        if needles.iter().any(|n| text.contains(n.as_str())) {
            hits.push(f.display().to_string());
        }
    }
    assert!(hits.is_empty(), "cite docs/ instead in: {hits:?}");
}

/// The compatibility rule: a record without the optional keys (as older latlab versions wrote
/// them) validates against run.schema.json, and latlab reads it.
#[test]
fn a_record_without_the_optional_keys_validates_and_loads() {
    let v = Validator::committed();
    let tmp = tempfile::tempdir().unwrap();
    let dir = run_dir(
        &tmp.path().join("r"),
        &["run", "--backend", "sim", "--duration", "2s", "--quiet"],
    );
    let mut rec: Value = serde_json::from_str(&read(&dir.join("run.json"))).unwrap();
    let o = rec.as_object_mut().unwrap();
    for k in [
        "tool_version",
        "command_line",
        "started_at",
        "ended_at",
        "machine",
        "inventory",
        "total",
        "spikes",
        "trace",
        "loads",
        "activity",
        "warnings",
        "notes",
    ] {
        assert!(o.remove(k).is_some(), "{k} was in a fresh record");
    }
    let c = rec["config"].as_object_mut().unwrap();
    c.retain(|k, _| k == "backend");
    for cpu in rec["cpus"].as_array_mut().unwrap() {
        let c = cpu.as_object_mut().unwrap();
        for k in ["per_second_max_ns", "top_spikes", "thread"] {
            assert!(c.remove(k).is_some(), "{k}");
        }
    }
    v.check(v.run, "a record without optional keys", &rec);
    let old = tmp.path().join("old");
    std::fs::create_dir(&old).unwrap();
    std::fs::write(old.join("run.json"), serde_json::to_vec(&rec).unwrap()).unwrap();
    v.run_json(&old);
    // Without a required key (`backend`) it is neither valid nor readable.
    rec["config"].as_object_mut().unwrap().remove("backend");
    assert!(v.schemas.validate(&rec, v.run).is_err());
    std::fs::write(old.join("run.json"), serde_json::to_vec(&rec).unwrap()).unwrap();
    latlab().arg("report").arg(&old).assert().code(1);
}
