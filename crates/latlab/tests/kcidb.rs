//! `latlab export RUN --format kcidb`: KCIDB I/O JSON, validated by the real `kcidb-io` package
//! (`kcidb_io.schema.V5_3.validate_exactly`, and `LATEST.validate`) for a simulated run with a
//! failed `--max-latency`, one with a passed gate and `--until`, an imported cyclictest file,
//! a traced run's directory (a sim run given spikes, their trace files and the recorder's
//! summary: tracing needs root) and a record full of hostile text (the fuzz corpus'
//! escapes.json); bad input (an origin KCIDB refuses, an output that cannot be written) is one
//! line and exit 1.
//!
//! The package comes from PyPI into a venv at `target/kcidb-venv` (`python3 -m venv`, `pip
//! install kcidb-io`) the first time; without python3, its venv module or the registry the test
//! skips saying why (a failure under `LATLAB_REQUIRE_PRIVILEGED=1`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

mod support;
use support::{edit_run_json, import_dir, import_fixture, latlab, read_json, sim_run_dir};

/// The venv's python with kcidb_io importable, or why there is none.
fn python() -> &'static Result<PathBuf, String> {
    static PY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PY.get_or_init(|| {
        let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap();
        let venv = target.join("kcidb-venv");
        let py = venv.join("bin/python3");
        let ok = |py: &Path| {
            Command::new(py)
                .args(["-c", "import kcidb_io"])
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if ok(&py) {
            return Ok(py);
        }
        let run = |c: &mut Command, what: &str| -> Result<(), String> {
            let o = c.output().map_err(|e| format!("{what}: {e}"))?;
            if o.status.success() {
                Ok(())
            } else {
                let err = String::from_utf8_lossy(&o.stderr);
                Err(format!(
                    "{what} failed: {}",
                    err.lines().last().unwrap_or("").trim()
                ))
            }
        };
        run(
            Command::new("python3")
                .args(["-m", "venv", "--clear"])
                .arg(&venv),
            "python3 -m venv (Debian: apt-get install python3-venv; scripts/deps.sh does)",
        )?;
        run(
            Command::new(venv.join("bin/pip")).args([
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "kcidb-io",
            ]),
            "pip install kcidb-io (from PyPI)",
        )?;
        if ok(&py) {
            Ok(py)
        } else {
            Err("kcidb_io does not import after pip install kcidb-io".into())
        }
    })
}

/// Every file validated by kcidb-io: None when this machine cannot (skip said why).
fn validate(test: &str, files: &[&Path]) -> Option<()> {
    let py = match python() {
        Ok(p) => p,
        Err(why) => {
            support::cannot_run(test, why);
            return None;
        }
    };
    let script = "import json, sys, kcidb_io\n\
        for f in sys.argv[1:]:\n\
        \x20   d = json.load(open(f))\n\
        \x20   kcidb_io.schema.V5_3.validate_exactly(d)\n\
        \x20   kcidb_io.schema.LATEST.validate(d)\n\
        \x20   assert kcidb_io.schema.LATEST.is_compatible(d), f\n\
        print('valid', len(sys.argv) - 1)\n";
    let o = Command::new(py)
        .arg("-c")
        .arg(script)
        .args(files)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "kcidb-io refused {files:?}:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    Some(())
}

/// `latlab export RUN --format kcidb -o OUT [extra]`: the document.
fn export(run: &Path, out: &Path, extra: &[&str]) -> serde_json::Value {
    let o = latlab()
        .args(["export", "--format", "kcidb", "-o"])
        .arg(out)
        .args(extra)
        .arg(run)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    read_json(out)
}

fn test<'a>(d: &'a serde_json::Value, path: &str) -> &'a serde_json::Value {
    d["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["path"] == path)
        .unwrap_or_else(|| panic!("no test {path} in {d}"))
}

/// Ids are `ORIGIN:RUN_ID…`, unique, and the tests hang off the one build and checkout.
fn check_ids(d: &serde_json::Value, origin: &str, run_id: &str) {
    let prefix = format!("{origin}:{run_id}");
    assert_eq!(d["checkouts"][0]["id"], prefix.as_str());
    assert_eq!(d["builds"][0]["id"], prefix.as_str());
    let tests = d["tests"].as_array().unwrap();
    let mut ids = std::collections::BTreeSet::new();
    for t in tests {
        assert_eq!(t["build_id"], prefix.as_str());
        assert_eq!(t["origin"], origin);
        let id = t["id"].as_str().unwrap();
        assert_eq!(id, format!("{prefix}:{}", t["path"].as_str().unwrap()));
        assert!(ids.insert(id.to_string()), "{id} twice");
    }
}

#[test]
fn sim_runs_with_gates_validate() {
    let t = tempfile::tempdir().unwrap();
    let failed = sim_run_dir(&t.path().join("r"), "failed", &["--max-latency", "1us"]);
    let passed = sim_run_dir(
        &t.path().join("r"),
        "passed",
        &[
            "--max-latency",
            "1s",
            "--until",
            "p99:50%",
            "--mode",
            "wakeup",
        ],
    );
    let (fo, po) = (t.path().join("failed.json"), t.path().join("passed.json"));
    let f = export(&failed, &fo, &["--kcidb-origin", "lab_ci"]);
    let p = export(&passed, &po, &[]);
    let Some(()) = validate("sim_runs_with_gates_validate", &[&fo, &po]) else {
        return;
    };
    let rec = read_json(&failed.join("run.json"));
    check_ids(&f, "lab_ci", rec["run_id"].as_str().unwrap());
    assert_eq!(
        f["checkouts"][0]["misc"]["kernel_release"],
        rec["machine"]["kernel_release"]
    );
    let gate = test(&f, "latlab.gate.max_latency");
    assert_eq!(gate["status"], "FAIL");
    assert_eq!(gate["misc"]["limit_ns"], 1000);
    assert_eq!(test(&f, "latlab")["status"], "FAIL");
    let cpu = rec["cpus"][0]["cpu"].as_u64().unwrap();
    let max = test(&f, &format!("latlab.timer.cpu{cpu}.max"));
    assert_eq!(max["status"], "DONE");
    assert_eq!(max["number"]["unit"], "s");
    assert_eq!(max["number"]["prefix"], "metric");
    assert_eq!(max["misc"]["ns"], rec["cpus"][0]["max_ns"]);
    let v = max["number"]["value"].as_f64().unwrap();
    assert!((v * 1e9 - rec["cpus"][0]["max_ns"].as_f64().unwrap()).abs() < 0.5);
    let files: Vec<&str> = test(&f, "latlab")["output_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(
        files.contains(&"run.json") && files.contains(&"report.html"),
        "{files:?}"
    );
    let url = test(&f, "latlab")["output_files"][0]["url"]
        .as_str()
        .unwrap();
    assert!(
        url.starts_with("file:///") && url.ends_with("/run.json"),
        "{url}"
    );
    // The passed run: its gates pass, the mode names the paths, the default origin.
    check_ids(
        &p,
        "latlab",
        read_json(&passed.join("run.json"))["run_id"]
            .as_str()
            .unwrap(),
    );
    assert_eq!(test(&p, "latlab.gate.max_latency")["status"], "PASS");
    assert_eq!(test(&p, "latlab.gate.until")["status"], "PASS");
    assert_eq!(test(&p, "latlab")["status"], "PASS");
    test(&p, "latlab.wakeup.all.p99_9");
    // The same run exported again: the same bytes.
    let again = t.path().join("again.json");
    export(&failed, &again, &["--kcidb-origin", "lab_ci"]);
    assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(&fo).unwrap());
}

#[test]
fn an_import_and_a_traced_run_validate() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path().join("r");
    let import = import_dir(&r, &import_fixture("cyclictest-h2000-2cpu.txt"), "cyc");
    // A traced run's directory: tracing needs root, so a sim run is given what the recorder
    // writes (spikes with causes and trace files, the recorder's summary).
    let traced = sim_run_dir(&r, "traced", &[]);
    std::fs::create_dir_all(traced.join("spikes/001")).unwrap();
    std::fs::write(traced.join("spikes/001/trace.txt"), "# tracer: nop\n").unwrap();
    std::fs::write(traced.join("spikes/001/analysis.txt"), "irq\n").unwrap();
    edit_run_json(&traced, |rec| {
        rec["spikes"] = serde_json::json!([{
            "cpu": 0, "at_ns": 1_000, "latency_ns": 150_000,
            "causes": [{"kind": "irq", "name": "IRQ 4 (ttyS0)", "pid": 0, "prio": 0, "ns": 120_000},
                       {"kind": "task", "name": "kworker/0:1 42 prio 120", "pid": 42, "prio": 120, "ns": 20_000}],
            "trace_file": "spikes/001/trace.txt"
        }, {
            "cpu": 0, "at_ns": 9_000, "latency_ns": 90_000, "causes": [],
            "trace_file": "../../etc/passwd"
        }]);
        // What the inventory reads on a board with a device tree and DMI.
        rec["inventory"]["device_tree"] = serde_json::json!({"compatible": ["raspberrypi,4-model-b", "brcm,bcm2711"], "model": null});
        rec["inventory"]["dmi_id"] =
            serde_json::json!({"sys_vendor": "Acme", "product_name": null});
    });
    let escapes = t.path().join("escapes");
    std::fs::create_dir_all(&escapes).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/run_json/escapes.json"),
        escapes.join("run.json"),
    )
    .unwrap();
    let outs: Vec<PathBuf> = ["import", "traced", "escapes"]
        .iter()
        .map(|n| t.path().join(format!("{n}.json")))
        .collect();
    let i = export(&import, &outs[0], &[]);
    let tr = export(&traced, &outs[1], &[]);
    let e = export(&escapes, &outs[2], &["--kcidb-origin", "x"]);
    let files: Vec<&Path> = outs.iter().map(PathBuf::as_path).collect();
    let Some(()) = validate("an_import_and_a_traced_run_validate", &files) else {
        return;
    };
    let rec = read_json(&import.join("run.json"));
    check_ids(&i, "latlab", rec["run_id"].as_str().unwrap());
    assert_eq!(test(&i, "latlab")["misc"]["source"], "cyclictest");
    assert_eq!(test(&i, "latlab")["status"], "DONE");
    for c in rec["cpus"].as_array().unwrap() {
        test(&i, &format!("latlab.timer.cpu{}.max", c["cpu"]));
    }
    let env = &test(&tr, "latlab.timer.all.max")["environment"];
    assert_eq!(
        env["compatible"],
        serde_json::json!(["raspberrypi,4-model-b", "brcm,bcm2711"])
    );
    assert_eq!(env["misc"]["dmi"]["sys_vendor"], "Acme");
    let spikes = test(&tr, "latlab.trace.spikes");
    assert_eq!(spikes["number"]["value"], 2);
    let s = test(&tr, "latlab.trace.spikes.001");
    assert_eq!(s["misc"]["causes"][0]["name"], "IRQ 4 (ttyS0)");
    let names: Vec<&str> = s["output_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["trace.txt", "analysis.txt"]);
    let outside = test(&tr, "latlab.trace.spikes.002");
    assert!(
        outside.get("output_files").is_none(),
        "a trace path outside the run directory is not named: {outside}"
    );
    assert!(e["tests"].as_array().unwrap().len() > 3);
}

/// A real traced run (root, tracefs): the recorder's spikes, their files and causes as
/// KCIDB tests, validated by kcidb-io.
#[test]
fn a_real_traced_run_validates() {
    let Some(_g) = latlab_sys::privileged::guard("a_real_traced_run_validates") else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let o = latlab()
        .args([
            "run",
            "--cpus",
            "0",
            "--duration",
            "2s",
            "--interval",
            "500us",
        ])
        // 1 µs: every wake-up is a spike on any machine, so three are traced.
        .args(["--trace-threshold", "1us", "--trace-max-spikes", "3"])
        .args(["--no-db", "--quiet", "--results"])
        .arg(t.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run = support::only_run_dir(t.path());
    let rec = read_json(&run.join("run.json"));
    let traced = rec["spikes"].as_array().map_or(0, |s| s.len());
    assert!(traced >= 1, "no spike traced: {}", rec["trace"]);
    let out = t.path().join("kcidb.json");
    let d = export(&run, &out, &[]);
    let Some(()) = validate("a_real_traced_run_validates", &[&out]) else {
        return;
    };
    check_ids(&d, "latlab", rec["run_id"].as_str().unwrap());
    assert_eq!(
        test(&d, "latlab.trace.spikes")["number"]["value"],
        traced as u64
    );
    // Each traced spike is a test with its files (the recorder wrote them in the run).
    for i in 1..=traced {
        let s = test(&d, &format!("latlab.trace.spikes.{i:03}"));
        assert!(
            s["output_files"].as_array().is_some_and(|f| !f.is_empty()),
            "{s}"
        );
    }
}

#[test]
fn bad_input_is_one_line() {
    let t = tempfile::tempdir().unwrap();
    let run = sim_run_dir(&t.path().join("r"), "bad", &[]);
    for origin in ["Lab", "my-lab", "", "a:b"] {
        let o = latlab()
            .args([
                "export",
                "--format",
                "kcidb",
                "--kcidb-origin",
                origin,
                "-o",
            ])
            .arg(t.path().join("x.json"))
            .arg(&run)
            .output()
            .unwrap();
        let err = String::from_utf8(o.stderr).unwrap();
        assert_eq!(o.status.code(), Some(1), "{origin:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("latlab: error: --kcidb-origin ")
                && err.contains("[a-z0-9_]") | err.contains("lowercase"),
            "{err}"
        );
        assert!(!t.path().join("x.json").exists());
    }
    support::unwritable_outputs(&["export", "--format", "kcidb"], &run, t.path());
    // A run without a measured CPU has no tests to give.
    edit_run_json(&run, |rec| rec["cpus"] = serde_json::json!([]));
    let o = latlab()
        .args(["export", "--format", "kcidb", "-o"])
        .arg(t.path().join("x.json"))
        .arg(&run)
        .output()
        .unwrap();
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no per-CPU latency"), "{err}");
    assert!(!t.path().join("x.json").exists());
}
