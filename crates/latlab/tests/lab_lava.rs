//! Issue 32 §1: contrib/lava/latlab.yaml run the way LAVA runs a test definition, with LAVA's
//! own test-shell scripts, in the kernel lab's guest (rt-6.12, 2 CPUs), latlab measuring for
//! real. What is LAVA's: `lava-test-runner`, `lava-test-shell`, `lava-test-case`,
//! `lava-common-functions` and the rest of `lava_dispatcher/lava_test_shell/` from Debian's
//! `lava-dispatcher` package (`scripts/lava-test-shell fetch`, cached beside the lab's kernels),
//! copied unchanged to the overlay's `bin/`. What is reproduced here: the overlay's layout
//! (`/lava-1/0/lava-test-runner.conf`, `/lava-1/0/tests/0_latlab/` with the repository, `uuid`,
//! `testdef.yaml` and `run.sh`) and `run.sh` itself, written line for line as
//! `lava_dispatcher/actions/deploy/testdef.py` (`TestOverlayAction.handle_parameters`,
//! `TestRunnerAction.run`) writes it; the signals are read back with the dispatcher's pattern
//! (`actions/test/shell.py`: `<LAVA_SIGNAL_(\S+) ([^>]+)>`, `handle_testcase`'s `KEY=VALUE`
//! split). `lava-run` itself is not used: see docs/testing.md ("LAVA").
//!
//! One boot; without the lab (qemu, busybox, the kernel) or the fetched scripts the test skips,
//! a failure under `LATLAB_REQUIRE_PRIVILEGED=1`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

mod support;
use support::lab::Lab;

/// The job's `parameters` for the definition (LAVA's "test parameters from job submission").
const JOB_PARAMS: [(&str, &str); 4] = [
    ("BACKEND", "real"),
    ("DURATION", "3s"),
    // TCG misses many 1 ms periods; 5 ms as the other lab tests.
    ("INTERVAL", "5ms"),
    ("MAX_LATENCY", "100ms"),
];

/// Where LAVA's POSIX overlay goes (`deployment_data.py`: `lava_test_results_dir` `/lava-%s`,
/// job 1), stage 0, the definition's level name `0_latlab`.
const LAVA: &str = "/lava-1";
const TESTRUN_ID: &str = "0_latlab";
const UUID: &str = "1_1.3.2.4.1";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `scripts/lava-test-shell dir`: the cached scripts, or why they are missing.
fn lava_scripts() -> Result<PathBuf, String> {
    let out = Command::new(repo().join("scripts/lava-test-shell"))
        .arg("dir")
        .output()
        .map_err(|e| format!("cannot run scripts/lava-test-shell: {e}"))?;
    if out.status.success() {
        Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// The definition's `params` (in order) and `run: steps`, read from its YAML (flat: `KEY:
/// "VALUE"` under `params:`, `- STEP` under `run: steps:`).
fn testdef(yaml: &str) -> (Vec<(String, String)>, Vec<String>) {
    let (mut params, mut steps, mut section) = (vec![], vec![], "");
    for line in yaml.lines() {
        let t = line.trim();
        if !line.starts_with(' ') && t.ends_with(':') {
            section = t;
            continue;
        }
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        match section {
            "params:" => {
                let (k, v) = t.split_once(": ").expect("KEY: VALUE");
                params.push((k.to_string(), v.trim_matches('"').to_string()));
            }
            "run:" => {
                if let Some(s) = t.strip_prefix("- ") {
                    steps.push(s.to_string());
                }
            }
            _ => {}
        }
    }
    (params, steps)
}

/// run.sh as testdef.py writes it (lava-signal: stdout).
fn run_sh(yaml: &str) -> String {
    let (params, steps) = testdef(yaml);
    assert!(
        params.len() >= 10 && steps.len() == 2,
        "{params:?} {steps:?}"
    );
    let mut s = String::from("###default parameters from test definition###\n");
    for (k, v) in &params {
        s += &format!("{k}='{v}'\n");
    }
    s += "######\n###test parameters from job submission###\n";
    for (k, v) in JOB_PARAMS {
        s += &format!("{k}='{v}'\n");
    }
    s += "######\nset -e\nset -x\n";
    s += &format!("export TESTRUN_ID={TESTRUN_ID}\ncd {LAVA}/0/tests/{TESTRUN_ID}\n");
    s += "UUID=`cat uuid`\nset +x\necho \"<LAVA_SIGNAL_STARTRUN $TESTRUN_ID $UUID>\"\nset -x\n";
    for st in steps {
        s += &st;
        s += "\n";
    }
    s += "set +x\necho \"<LAVA_SIGNAL_ENDRUN $TESTRUN_ID $UUID>\"\n";
    s
}

/// A shell line writing `text` to `path` (a quoted here-document).
fn put(path: &str, text: &str) -> String {
    assert!(!text.contains("LAVA_PROOF_EOF"));
    format!("cat >'{path}' <<'LAVA_PROOF_EOF'\n{text}LAVA_PROOF_EOF\n")
}

/// The guest's job: the overlay as LAVA deploys it, then what the dispatcher types on the
/// console of a POSIX device (`lava-test-runner` on the stage's directory).
fn job(scripts: &Path) -> String {
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    let def = repo().join("contrib/lava");
    let yaml = read(&def.join("latlab.yaml"));
    let dir = format!("{LAVA}/0/tests/{TESTRUN_ID}");
    let mut j = format!("set -e\nmkdir -p {LAVA}/bin {dir}/contrib/lava\n");
    for e in std::fs::read_dir(scripts).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        if p.is_file() && name.starts_with("lava-") {
            j += &put(&format!("{LAVA}/bin/{name}"), &read(&p));
        }
    }
    j += &put(&format!("{dir}/contrib/lava/latlab.yaml"), &yaml);
    j += &put(
        &format!("{dir}/contrib/lava/latlab-lava.sh"),
        &read(&def.join("latlab-lava.sh")),
    );
    j += &put(&format!("{dir}/testdef.yaml"), &yaml);
    j += &put(&format!("{dir}/run.sh"), &run_sh(&yaml));
    j += &format!("echo {UUID} >{dir}/uuid\necho {dir} >{LAVA}/0/lava-test-runner.conf\n");
    j += &format!("chmod +x {LAVA}/bin/* {dir}/contrib/lava/latlab-lava.sh\n");
    j += &format!(
        "up() {{ cut -d' ' -f1 /proc/uptime; }}\na=$(up)\nset +e\n\
         export SHELL=/bin/sh\n{LAVA}/bin/lava-test-runner {LAVA}/0 >/lab/lava.log 2>&1\n\
         echo $? >/lab/lava.rc\necho \"lava-test-runner $a $(up)\" >/lab/times\n\
         cp -r {LAVA}/0/results /lab/lava-results\n"
    );
    j
}

/// The dispatcher's signals in `log`: `<LAVA_SIGNAL_(\S+) ([^>]+)>` → (name, params).
fn signals(log: &str) -> Vec<(String, Vec<String>)> {
    let mut v = vec![];
    let mut rest = log;
    while let Some(i) = rest.find("<LAVA_SIGNAL_") {
        rest = &rest[i + "<LAVA_SIGNAL_".len()..];
        let Some(end) = rest.find('>') else { break };
        let body = &rest[..end];
        let Some((name, params)) = body.split_once(' ') else {
            continue;
        };
        if !name.is_empty() && !name.contains(char::is_whitespace) && !params.is_empty() {
            v.push((
                name.to_string(),
                params.split_whitespace().map(String::from).collect(),
            ));
        }
    }
    v
}

/// `handle_testcase`: each `KEY=VALUE` (key lower-cased); anything else is malformed.
fn handle_testcase(params: &[String]) -> BTreeMap<String, String> {
    params
        .iter()
        .map(|p| {
            let parts: Vec<&str> = p.split('=').collect();
            assert_eq!(parts.len(), 2, "malformed parameter for signal: {p}");
            (parts[0].to_lowercase(), parts[1].to_string())
        })
        .collect()
}

#[test]
fn definition_under_lava_test_shell() {
    let test = "definition_under_lava_test_shell";
    let scripts = match lava_scripts() {
        Ok(d) => d,
        Err(why) => return support::cannot_run(test, &why),
    };
    let Some(g) = Lab::new("rt-6.12", 2, 150).run(test, &job(&scripts)) else {
        return;
    };
    assert_eq!(g.exit, 0, "{}", g.job_log);
    let log = g.read("lava.log");
    eprintln!(
        "{test}: lava-test-runner (guest uptime, s): {}",
        g.read("times")
    );
    eprintln!("{test}: lava.log:\n{log}");
    assert_eq!(g.read("lava.rc").trim(), "0", "{log}");
    let sigs = signals(&log);
    let names: Vec<&str> = sigs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"STARTRUN"), "{log}");
    assert_eq!(names.last(), Some(&"ENDRUN"), "{log}");
    assert_eq!(sigs[0].1, [TESTRUN_ID, UUID]);
    assert_eq!(sigs.last().unwrap().1, [TESTRUN_ID, UUID]);
    assert!(log.contains("<LAVA_TEST_RUNNER EXIT>"), "{log}");
    let mut cases = BTreeMap::new();
    for (n, p) in &sigs[1..sigs.len() - 1] {
        assert_eq!(n, "TESTCASE", "{log}");
        let d = handle_testcase(p);
        let id = d["test_case_id"].clone();
        assert!(["pass", "fail"].contains(&d["result"].as_str()), "{d:?}");
        assert!(cases.insert(id, d).is_none(), "a case twice: {log}");
    }
    assert_eq!(cases["latlab-run"]["result"], "pass");
    let mut expected = vec!["latlab-run".to_string(), "max-latency-gate".into()];
    for who in ["cpu0", "cpu1", "all"] {
        for stat in ["min", "avg", "p99", "p99.9", "max"] {
            expected.push(format!("{who}-{stat}-latency"));
        }
        expected.push(format!("{who}-missed-periods"));
    }
    let mut got: Vec<String> = cases.keys().cloned().collect();
    expected.sort();
    got.sort();
    assert_eq!(got, expected, "{log}");
    let results = support::only_run_dir(&g.path("lava-results"));
    for (id, d) in &cases {
        if id == "latlab-run" {
            continue;
        }
        let units = if id.ends_with("missed-periods") {
            "periods"
        } else {
            "us"
        };
        assert_eq!(
            d.get("units").map(String::as_str),
            Some(units),
            "{id}: {d:?}"
        );
        let m: f64 = d["measurement"].parse().expect("a decimal measurement");
        assert!(m >= 0.0, "{id}: {m}");
        // What lava-test-case wrote in the results directory LAVA collects.
        let f = |k: &str| std::fs::read_to_string(results.join("results").join(id).join(k));
        assert_eq!(f("result").unwrap().trim(), d["result"], "{id}");
        assert_eq!(f("units").unwrap().trim(), units, "{id}");
        assert_eq!(f("measurement").unwrap().trim(), d["measurement"], "{id}");
    }
    let rc = std::fs::read_to_string(results.join("return_code")).unwrap();
    assert_eq!(
        rc.trim(),
        "0",
        "run.sh's status (lava-test-shell's return_code)"
    );
    eprintln!("{test}: {:.1} s in all", g.wall.as_secs_f64());
}
