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
//! split).
//!
//! `definition_under_lava_run` then runs the same definition with LAVA's dispatcher itself,
//! `lava-run`, on a QEMU device: contrib/lava/qemu-job.yaml, as a LAVA lab would.
//!
//! One boot each; without the lab (qemu, busybox, the kernel) or the fetched LAVA packages the
//! tests skip, a failure under `LATLAB_REQUIRE_PRIVILEGED=1`.

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
    let got: Vec<String> = cases.keys().cloned().collect();
    assert_eq!(got, expected_cases(), "{log}");
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

/// The cases the definition reports for a 2-CPU guest with a latency gate.
fn expected_cases() -> Vec<String> {
    let mut expected = vec!["latlab-run".to_string(), "max-latency-gate".into()];
    for who in ["cpu0", "cpu1", "all"] {
        for stat in ["min", "avg", "p99", "p99.9", "max"] {
            expected.push(format!("{who}-{stat}-latency"));
        }
        expected.push(format!("{who}-missed-periods"));
    }
    expected.sort();
    expected
}

/// `scripts/lava-test-shell dispatcher`: LAVA's unpacked dispatcher, or why it is missing.
fn lava_dispatcher() -> Result<PathBuf, String> {
    let out = Command::new(repo().join("scripts/lava-test-shell"))
        .arg("dispatcher")
        .output()
        .map_err(|e| format!("cannot run scripts/lava-test-shell: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let d = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    // Its python3 modules and libraries are Debian packages (scripts/deps.sh).
    let help = Command::new(d.join("lava-run"))
        .arg("--help")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", d.join("lava-run").display()))?;
    if !help.status.success() {
        let err = String::from_utf8_lossy(&help.stderr);
        return Err(format!(
            "lava-run does not start (bash scripts/deps.sh installs its python3 modules and libraries): {}",
            err.trim().lines().last().unwrap_or("")
        ));
    }
    Ok(d)
}

/// A device dictionary as lava-server keeps one: lava-server's own `qemu` device type, amd64,
/// TCG (no KVM on these machines; one thread, as scripts/kernel-lab boots), 2 CPUs.
const DEVICE: &str = "{% extends 'qemu.jinja2' %}
{% set arch = 'amd64' %}
{% set no_kvm = True %}
{% set memory = 1024 %}
{% set extra_options = ['-smp 2', '-accel tcg,thread=single', '-cpu max', '-no-reboot'] %}
";

/// Renders a device dictionary (stdin) with lava-server's templates (argv[1]) as lava-server
/// renders one for the dispatcher (Jinja2, trim_blocks, no autoescape).
const RENDER: &str = "import sys, jinja2
env = jinja2.Environment(loader=jinja2.FileSystemLoader(sys.argv[1]), trim_blocks=True, autoescape=False)
sys.stdout.write(env.from_string(sys.stdin.read()).render())
";

/// Runs `cmd`, panicking with its output unless it succeeds; its stdout.
fn ok(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `results` lines of lava-run's log (one YAML flow mapping a line, JSON but for the `! `
/// tag LAVA puts before some strings): each one's `msg`.
fn lava_results(log: &str) -> Vec<serde_json::Value> {
    log.lines()
        .filter(|l| l.contains("\"lvl\": \"results\""))
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(&l.replace(": ! \"", ": \""))
                .unwrap_or_else(|e| panic!("a results line that is not JSON ({e}): {l}"));
            v["msg"].clone()
        })
        .collect()
}

/// The device: lava-server's qemu.jinja2 rendered with [`DEVICE`].
fn render_device(disp: &Path) -> String {
    let mut render = Command::new("/usr/bin/python3");
    render
        .args(["-c", RENDER])
        .arg(disp.join("device-types"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = render.spawn().expect("run /usr/bin/python3");
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(DEVICE.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "rendering the device: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let device = String::from_utf8(out.stdout).unwrap();
    assert!(device.contains("qemu-system-x86_64"), "{device}");
    device
}

/// The repository LAVA clones: this tree's contrib/lava, committed in `dir/repo`.
fn definition_repo(dir: &Path) -> PathBuf {
    let repo_dir = dir.join("repo");
    std::fs::create_dir_all(repo_dir.join("contrib/lava")).unwrap();
    for f in ["latlab.yaml", "latlab-lava.sh"] {
        std::fs::copy(
            repo().join("contrib/lava").join(f),
            repo_dir.join("contrib/lava").join(f),
        )
        .unwrap();
    }
    let git = |args: &[&str]| {
        ok(Command::new("git")
            .current_dir(&repo_dir)
            .args(["-c", "user.name=latlab", "-c", "user.email=latlab@invalid"])
            .args(args));
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "the definition"]);
    repo_dir
}

/// Each case LAVA recorded: the run passed; every figure with its units and a decimal
/// measurement; the gate's verdict agrees with its measurement (the worst latency, µs, against
/// the job's 100 ms).
fn check_cases(cases: &BTreeMap<String, serde_json::Value>) {
    assert_eq!(cases["latlab-run"]["result"], "pass");
    for (id, c) in cases {
        if id == "latlab-run" {
            continue;
        }
        let units = if id.ends_with("missed-periods") {
            "periods"
        } else {
            "us"
        };
        assert_eq!(c["units"], units, "{id}: {c}");
        assert!(c["result"] == "pass" || c["result"] == "fail", "{id}: {c}");
        let m: f64 = c["measurement"]
            .as_str()
            .and_then(|m| m.parse().ok())
            .unwrap_or_else(|| panic!("{id}: no decimal measurement: {c}"));
        assert!(m >= 0.0, "{id}: {m}");
    }
    let gate = &cases["max-latency-gate"];
    let worst: f64 = gate["measurement"].as_str().unwrap().parse().unwrap();
    let max: f64 = cases["all-max-latency"]["measurement"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(worst, max, "{gate}");
    assert_eq!(
        gate["result"],
        if worst > 100_000.0 { "fail" } else { "pass" },
        "{gate}"
    );
}

/// Issue 32 §1 with LAVA itself: `lava-run`, LAVA's dispatcher (Debian's lava-dispatcher
/// 2023.01, unpacked by `scripts/lava-test-shell fetch`), runs contrib/lava/qemu-job.yaml on
/// a device of lava-server's own `qemu` device type, rendered from its Jinja2 template as
/// lava-server renders a device dictionary: QEMU boots the kernel lab's rt-6.12 with a
/// ramdisk holding latlab (`scripts/kernel-lab initramfs`), LAVA appends its overlay to the
/// ramdisk, clones the definition from a git repository, waits for the prompt and runs it.
/// The figures checked are the ones LAVA recorded (its `results` log lines), not what the
/// guest printed.
#[test]
fn definition_under_lava_run() {
    let test = "definition_under_lava_run";
    let disp = match lava_dispatcher() {
        Ok(d) => d,
        Err(why) => return support::cannot_run(test, &why),
    };
    if let Err(why) = Lab::available("rt-6.12") {
        return support::cannot_run(test, &format!("the kernel lab cannot boot here: {why}"));
    }
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();

    let device = render_device(&disp);
    std::fs::write(dir.join("device.yaml"), &device).unwrap();

    // The ramdisk: busybox, latlab (the build under test) and its libraries.
    let initrd = dir.join("initrd.cpio");
    ok(Command::new(support::lab::script())
        .env("TMPDIR", dir)
        .args(["initramfs", "--kernel", "rt-6.12", "--bin"])
        .arg(support::lab::guest_bin())
        .arg(&initrd));
    // The kernel from the lab's cache, beside the dispatcher's directory.
    let kernel = disp.parent().unwrap().join("rt-6.12/vmlinuz");
    assert!(kernel.is_file(), "{}", kernel.display());

    let repo_dir = definition_repo(dir);

    let job = std::fs::read_to_string(repo().join("contrib/lava/qemu-job.yaml")).unwrap();
    let url = |p: &Path| format!("file://{}", p.display());
    let job = job
        .replace("@KERNEL_URL@", &url(&kernel))
        .replace("@RAMDISK_URL@", &url(&initrd))
        .replace("@REPOSITORY@", &repo_dir.display().to_string());
    for token in ["@KERNEL_URL@", "@RAMDISK_URL@", "@REPOSITORY@"] {
        assert!(!job.contains(token), "{token} left in {job}");
    }
    std::fs::write(dir.join("job.yaml"), &job).unwrap();

    // lava-run keeps each job's files under /var/lib/lava/dispatcher/tmp/JOB (removed at its
    // end): the directories it makes for that are removed too when they were not here before.
    let var = Path::new("/var/lib/lava");
    let var_was_there = var.exists();
    let job_id = std::process::id().to_string();
    std::fs::create_dir(dir.join("out")).unwrap();
    let lock = support::lab::lab_lock();
    let start = std::time::Instant::now();
    let run = Command::new("timeout")
        .args(["-k", "10", "600"])
        .arg(disp.join("lava-run"))
        .args(["--job-id", &job_id, "--output-dir"])
        .arg(dir.join("out"))
        .arg("--device")
        .arg(dir.join("device.yaml"))
        .arg(dir.join("job.yaml"))
        .output()
        .expect("run lava-run");
    let wall = start.elapsed();
    drop(lock);
    if !var_was_there {
        for d in ["dispatcher/tmp", "dispatcher", ""] {
            let _ = std::fs::remove_dir(var.join(d));
        }
        assert!(!var.exists(), "lava-run left files in {}", var.display());
    }
    // lava-run logs to stderr (YAMLLogger), one line an entry.
    let log = String::from_utf8_lossy(&run.stderr);
    let stdout = String::from_utf8_lossy(&run.stdout);
    let tail = |s: &str| {
        s.lines()
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        run.status.success(),
        "lava-run: {} after {:.0} s\n{}\n{}",
        run.status,
        wall.as_secs_f64(),
        tail(&stdout),
        tail(&log)
    );
    let results = lava_results(&log);
    let of = |def: &str| -> BTreeMap<String, serde_json::Value> {
        results
            .iter()
            .filter(|r| r["definition"] == def)
            .map(|r| (r["case"].as_str().unwrap().to_string(), r.clone()))
            .collect()
    };
    let lava = of("lava");
    assert_eq!(lava["job"]["result"], "pass", "{}", tail(&log));
    assert_eq!(
        lava["0_latlab"]["result"], "pass",
        "{:#?}",
        lava["0_latlab"]
    );
    let cases = of("0_latlab");
    for c in cases.values() {
        eprintln!("{test}: LAVA recorded {c}");
    }
    let got: Vec<String> = cases.keys().cloned().collect();
    assert_eq!(got, expected_cases(), "{}", tail(&log));
    check_cases(&cases);
    eprintln!("{test}: lava-run {:.1} s", wall.as_secs_f64());
}
