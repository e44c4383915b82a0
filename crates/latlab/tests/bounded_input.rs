//! Bounded input (issue 14 §4): `latlab import` keeps memory proportional to the file, refuses
//! special files at once, reads `-` from stdin, caps the input size; numbers that would wrap
//! are errors (exit 1, one line); a closed or full stdout is an error, not a panic.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;

mod support;
use support::{bin, run_dirs};

fn latlab() -> Command {
    let mut c = Command::cargo_bin("latlab").unwrap();
    // Nothing here may hang: a hang is a failure, not a stuck test run.
    c.timeout(Duration::from_secs(30));
    c
}

/// The one stderr line of a failed command: `latlab: error: …`, exit 1.
/// `latlab import FILE [EXTRA...] --results RESULTS`, run to its end (the command times out
/// rather than hang), its output.
fn import(file: &Path, results: &Path, extra: &[&str]) -> std::process::Output {
    latlab()
        .arg("import")
        .arg(file)
        .args(extra)
        .arg("--results")
        .arg(results)
        .output()
        .unwrap()
}

fn one_error_line(out: &std::process::Output) -> String {
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8(out.stderr.clone()).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("latlab: error: "), "{err}");
    err
}

/// A cyclictest -h histogram of `threads` columns with a single sample at 9 999 999 µs each
/// (rt-tests ≥ 2.7 omits empty buckets): under 1 KB of text.
fn sparse_far_histogram(threads: usize) -> String {
    let row = |v: &str| vec![v; threads].join(" ");
    format!(
        "# Histogram\n9999999 {}\n# Total: {}\n# Min Latencies: {}\n# Avg Latencies: {}\n# Max Latencies: {}\n# Histogram Overflows: {}\n",
        row("000001"),
        row("000000001"),
        row("9999999"),
        row("9999999"),
        row("9999999"),
        row("00000"),
    )
}

/// The issue's file: 20 columns, one bucket at 9 999 999 µs. It took 18 s and 1.5 GB (a dense
/// 1 µs histogram to 10 s per column); now it imports under a 200 MB address-space limit in a
/// moment, with the exact maximum.
#[test]
fn far_sparse_histogram_imports_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let text = sparse_far_histogram(20);
    assert!(text.len() < 1_100, "{}", text.len());
    let f = dir.path().join("h20.txt");
    std::fs::write(&f, &text).unwrap();
    let results = dir.path().join("r");
    let mut cmd = StdCommand::new(bin());
    // --no-db: what is measured here is the parser's memory and time, not the database's.
    cmd.arg("import")
        .arg(&f)
        .arg("--no-db")
        .arg("--results")
        .arg(&results)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 200 << 20,
                rlim_max: 200 << 20,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let t0 = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(20) {
            child.kill().unwrap();
            panic!("import of a 1 KB file still running after 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    let took = t0.elapsed();
    assert!(
        status.success(),
        "{status:?} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let run = run_dirs(&results);
    assert_eq!(run.len(), 1);
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run[0].join("run.json")).unwrap()).unwrap();
    let cpus = json["cpus"].as_array().unwrap();
    assert_eq!(cpus.len(), 20);
    for c in cpus {
        assert_eq!(c["histogram"]["max_ns"], 9_999_999_000u64, "{c}");
        assert_eq!(c["histogram"]["count"], 1);
        assert_eq!(c["histogram"]["min_ns"], 9_999_999_000u64);
    }
    assert_eq!(json["total"]["max_ns"], 9_999_999_000u64);
    // The linear part is latlab's default, not 10 s of 1 µs buckets.
    assert_eq!(cpus[0]["histogram"]["limit_ns"], 10_000_000);
    // histogram.txt follows the layout: 10 000 rows, not 10 million.
    let h = std::fs::read_to_string(run[0].join("histogram.txt")).unwrap();
    assert!(h.lines().count() < 10_100, "{}", h.lines().count());
    // And the report reads it back.
    let rep = latlab()
        .args(["report", "--format", "json"])
        .arg(&run[0])
        .output()
        .unwrap();
    assert!(rep.status.success(), "{rep:?}");
    let r: serde_json::Value = serde_json::from_slice(&rep.stdout).unwrap();
    assert_eq!(r["total"]["max_ns"], 9_999_999_000u64, "{r}");
}

/// More threads than can be imported is a clear error, not gigabytes.
#[test]
fn too_many_columns_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("wide.txt");
    std::fs::write(&f, sparse_far_histogram(1025)).unwrap();
    let out = import(&f, &dir.path().join("r"), &[]);
    let err = one_error_line(&out);
    assert!(
        err.contains("1025 threads (columns): at most 1024"),
        "{err}"
    );
    assert!(run_dirs(&dir.path().join("r")).is_empty());
}

/// `/dev/zero` used to be read until memory ran out: refused at once, saying to use `-`.
#[test]
fn dev_zero_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let out = latlab()
        .args(["import", "/dev/zero", "--results"])
        .arg(dir.path())
        .output()
        .unwrap();
    let err = one_error_line(&out);
    assert!(
        err.contains("/dev/zero: is a character device, not a regular file")
            && err.contains("use '-' and redirect"),
        "{err}"
    );
    assert!(t0.elapsed() < Duration::from_secs(10));
}

/// A FIFO without a writer used to hang the open: refused at once.
#[test]
fn fifo_without_writer_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // Times out (fails) after 30 s instead of hanging.
    let out = import(&fifo, &dir.path().join("r"), &[]);
    let err = one_error_line(&out);
    assert!(
        err.contains("is a FIFO, not a regular file") && err.contains("latlab import - <"),
        "{err}"
    );
}

/// `-` reads standard input (where anything can be redirected), within the size cap.
#[test]
fn dash_reads_stdin_and_the_size_cap_holds() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("r");
    let text = sparse_far_histogram(2);
    let out = latlab()
        .args(["import", "-", "--results"])
        .arg(&results)
        .write_stdin(text.clone())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let run = run_dirs(&results);
    assert_eq!(run.len(), 1);
    assert!(run[0].to_string_lossy().ends_with("-stdin"), "{run:?}");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run[0].join("run.json")).unwrap()).unwrap();
    assert_eq!(json["total"]["samples"], 2);

    // Larger than --max-input-size: from stdin and from a file.
    let out = latlab()
        .args(["import", "-", "--max-input-size", "100", "--results"])
        .arg(&results)
        .write_stdin(text.clone())
        .output()
        .unwrap();
    let err = one_error_line(&out);
    assert!(
        err.contains("standard input: larger than the --max-input-size limit of 100 bytes"),
        "{err}"
    );
    let f = dir.path().join("h.txt");
    let text = sparse_far_histogram(20); // 1043 bytes
    assert!(text.len() > 1024);
    std::fs::write(&f, &text).unwrap();
    let out = import(&f, &results, &["--max-input-size", "1K"]);
    let err = one_error_line(&out);
    assert!(
        err.contains("h.txt: 1043 bytes, larger than the --max-input-size limit of 1024 bytes"),
        "{err}"
    );
    assert_eq!(run_dirs(&results).len(), 1, "nothing written on errors");
}

/// Numbers that wrapped in release builds are errors naming the flag or field.
#[test]
fn wrapping_numbers_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("r");
    // CPU 1's interval was 10 µs + 18446744073709546615 ns = 5.9 µs.
    let out = latlab()
        .args([
            "run",
            "--backend",
            "sim",
            "--duration",
            "1s",
            "--cpus",
            "0-1",
            "--interval",
            "10us",
            "--distance",
            "18446744073709546615ns",
            "--results",
        ])
        .arg(&results)
        .output()
        .unwrap();
    let err = one_error_line(&out);
    assert!(err.contains("--distance 18446744073709546615ns"), "{err}");
    for interval in ["18446744073709551615ns", "18446744073709552us", "2h"] {
        let out = latlab()
            .args(["run", "--backend", "sim", "--duration", "1s", "--cpus", "0"])
            .args(["--interval", interval, "--results"])
            .arg(&results)
            .output()
            .unwrap();
        let err = one_error_line(&out);
        assert!(err.contains("--interval"), "{interval}: {err}");
    }
    assert!(run_dirs(&results).is_empty());

    // cyclictest --json with -i 18446744073709552 (µs) became 384 ns.
    let f = dir.path().join("i.json");
    std::fs::write(
        &f,
        r#"{"cmdline:": "cyclictest -h 100 -i 18446744073709552", "thread": {"0": {"histogram": {"5": 1}, "cycles": 1, "min": 5, "max": 5, "avg": 5}}}"#,
    )
    .unwrap();
    let out = import(&f, &results, &[]);
    let err = one_error_line(&out);
    assert!(
        err.contains("-i interval (µs) 18446744073709552 is too large"),
        "{err}"
    );
    assert!(run_dirs(&results).is_empty());
}

/// The cyclictest JSON reader kept the last of duplicate keys; now it names the key.
#[test]
fn duplicate_json_keys_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("d.json");
    let t = |c: u64| {
        format!(r#"{{"histogram": {{"5": {c}}}, "cycles": {c}, "min": 5, "max": 5, "avg": 5}}"#)
    };
    std::fs::write(
        &f,
        format!("{{\"thread\": {{\n\"0\": {},\n\"0\": {}}}}}\n", t(1), t(2)),
    )
    .unwrap();
    let out = import(&f, &dir.path().join("r"), &[]);
    let err = one_error_line(&out);
    assert!(err.contains("duplicate key \"0\""), "{err}");
}

/// stdout closed (`>&-`) or full (`> /dev/full`): exit 1 with one line, never a panic (101)
/// and never a path silently lost.
#[test]
fn closed_or_full_stdout_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("h.txt");
    std::fs::write(&f, sparse_far_histogram(1)).unwrap();
    let results = dir.path().join("r");
    let out = StdCommand::new("sh")
        .arg("-c")
        .arg(r#"exec "$0" import "$1" --results "$2" >&-"#)
        .arg(bin())
        .arg(&f)
        .arg(&results)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = one_error_line(&out);
    assert!(err.contains("stdout is closed"), "{err}");
    assert!(run_dirs(&results).is_empty(), "refused before writing");

    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = StdCommand::new(bin())
        .arg("import")
        .arg(&f)
        .arg("--results")
        .arg(&results)
        .stdout(full)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = one_error_line(&out);
    assert!(err.contains("cannot write to stdout"), "{err}");
    // Nothing lost: the directory the message names exists.
    let run = run_dirs(&results);
    assert_eq!(run.len(), 1);
    let name = run[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(err.contains(&name), "{err}");
    let _ = std::io::stderr().flush();
}

/// `latlab ARGS` under an address-space limit of `mib` MiB, to its end (killed after 60 s: a
/// hang is a failure), its output.
fn latlab_within(mib: u64, args: &[&std::ffi::OsStr]) -> std::process::Output {
    let mut cmd = StdCommand::new(bin());
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: mib << 20,
                rlim_max: mib << 20,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let t0 = Instant::now();
    let mut child = cmd.spawn().unwrap();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("{args:?} still running after 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// A jitterdebugger results.json of 800 000 CPUs (65 MB) took 1.32 GB before "at most 1024":
/// now refused while it is parsed, under a 300 MiB address-space limit, naming the limit.
#[test]
fn a_jitterdebugger_file_of_800k_cpus_is_refused_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("results.json");
    let mut s = String::from(r#"{"version": 3, "cpu": {"#);
    for c in 0..800_000 {
        if c > 0 {
            s.push(',');
        }
        s.push_str(&format!(
            r#""{c}": {{"histogram": {{"17": 1}}, "count": 1, "min": 17, "max": 17}}"#
        ));
    }
    s.push_str("}}");
    std::fs::write(&f, &s).unwrap();
    let out = latlab_within(
        300,
        &[
            "import".as_ref(),
            f.as_os_str(),
            "--no-db".as_ref(),
            "--results".as_ref(),
            dir.path().join("r").as_os_str(),
        ],
    );
    let err = one_error_line(&out);
    assert!(err.contains("more than 1024"), "{err}");
    assert!(err.contains("at most 1024 CPUs"), "{err}");
}

/// A jitterdebugger CPU with 3 million histogram keys was accepted (695 MB, a 188 MB run.json):
/// jitterdebugger writes at most 1000, and more is refused.
#[test]
fn a_jitterdebugger_histogram_of_3m_keys_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("results.json");
    let mut s = String::from(r#"{"version": 3, "cpu": {"0": {"histogram": {"#);
    for k in 0..3_000_000u64 {
        if k > 0 {
            s.push(',');
        }
        s.push_str(&format!(r#""{k}": 1"#));
    }
    s.push_str(r#"}, "count": 3000000, "min": 0, "max": 2999999}}}"#);
    std::fs::write(&f, &s).unwrap();
    let out = latlab_within(
        300,
        &[
            "import".as_ref(),
            f.as_os_str(),
            "--no-db".as_ref(),
            "--results".as_ref(),
            dir.path().join("r").as_os_str(),
        ],
    );
    let err = one_error_line(&out);
    assert!(
        err.contains("more than 1000 histogram entries in one CPU"),
        "{err}"
    );
    assert!(run_dirs(&dir.path().join("r")).is_empty());
}

/// `truncate -s 3G run.json; latlab report d` took 3.15 GB and 15 s: a run.json of zeros is
/// refused at its first bytes, and a larger one than the limit before it is read, under a
/// 200 MiB address-space limit; the message says how to raise the limit.
#[test]
fn a_huge_run_json_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("d");
    std::fs::create_dir(&run).unwrap();
    let f = std::fs::File::create(run.join("run.json")).unwrap();
    f.set_len(3 << 30).unwrap();
    let out = latlab_within(200, &["report".as_ref(), run.as_os_str()]);
    let err = one_error_line(&out);
    assert!(err.contains("not a latlab run record"), "{err}");
    // A file that starts as JSON but is larger than the limit.
    f.set_len(0).unwrap();
    std::fs::write(run.join("run.json"), b"{\"schema_version\": 1}").unwrap();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(run.join("run.json"))
        .unwrap();
    f.set_len(600 << 20).unwrap();
    for args in [
        vec!["report".as_ref(), run.as_os_str()],
        vec!["compare".as_ref(), run.as_os_str(), run.as_os_str()],
        vec![
            "db".as_ref(),
            "push".as_ref(),
            run.as_os_str(),
            "--db".as_ref(),
            dir.path().join("db.sqlite").as_os_str(),
        ],
    ] {
        let out = latlab_within(200, &args);
        let err = one_error_line(&out);
        assert!(
            err.contains("larger than the limit of 536870912 bytes"),
            "{err}"
        );
        assert!(err.contains("LATLAB_MAX_RUN_JSON"), "{err}");
    }
}

/// `export` read a spike's trace.dat whole, 1 GB: refused past 256 MiB, naming the limit.
#[test]
fn export_refuses_a_spike_trace_larger_than_latlab_writes() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("r");
    latlab()
        .args([
            "run",
            "--backend",
            "sim",
            "--duration",
            "1s",
            "-q",
            "--no-db",
            "--results",
        ])
        .arg(&results)
        .assert()
        .success();
    let run = run_dirs(&results).pop().unwrap();
    std::fs::create_dir_all(run.join("spikes/001")).unwrap();
    std::fs::File::create(run.join("spikes/001/trace.dat"))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let p = run.join("run.json");
    let mut rec: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    rec["spikes"] = serde_json::json!([{
        "cpu": 0, "at_ns": 1_000_000u64, "latency_ns": 300_000,
        "trace_file": "spikes/001/trace.txt"
    }]);
    std::fs::write(&p, serde_json::to_vec(&rec).unwrap()).unwrap();
    let out = latlab_within(
        300,
        &[
            "export".as_ref(),
            run.as_os_str(),
            "--format".as_ref(),
            "perfetto".as_ref(),
            "-o".as_ref(),
            dir.path().join("t.pftrace").as_os_str(),
        ],
    );
    let err = one_error_line(&out);
    assert!(
        err.contains("larger than the limit of 268435456 bytes"),
        "{err}"
    );
}
