//! `latlab cyclictest`: cyclictest's flags on latlab's engine. Its output is compared line by
//! line with real cyclictest run here with the same flags (the shape of each line, numbers
//! aside; privileged: both use SCHED_FIFO and /dev/cpu_dma_latency), read back by latlab's
//! importers (round trip), and leaves a normal run directory. Bad flags exit 1 naming them.

use std::path::Path;
use std::process::Output;

mod support;
use support::{latlab, only_run_dir, privileged, read_json};

fn ours(results: &Path, flags: &str) -> Output {
    latlab()
        .arg("cyclictest")
        .arg("--results")
        .arg(results)
        .args(flags.split_whitespace())
        .output()
        .unwrap()
}

fn real(flags: &str) -> Output {
    std::process::Command::new("cyclictest")
        .args(flags.split_whitespace())
        .output()
        .expect("rt-tests' cyclictest is installed (scripts/test installs it)")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// A line's shape: every run of digits and spaces is one `N` (widths vary with the values;
/// tabs, words and punctuation stay).
fn shape(line: &str) -> String {
    let mut s = String::new();
    let mut in_num = false;
    for c in line.chars() {
        if c.is_ascii_digit() || c == ' ' {
            if !in_num {
                s.push('N');
                in_num = true;
            }
        } else {
            s.push(c);
            in_num = false;
        }
    }
    s
}

/// The shapes of every line, the overflow cycle lines reduced to their start (how many
/// cycles a thread lists depends on the values).
fn shapes(out: &str) -> Vec<String> {
    out.lines()
        .map(|l| {
            if l.starts_with("# Thread ") && !l.starts_with("# Thread Ids") {
                "# Thread N: ...".into()
            } else if l.starts_with("T:") && l.contains("Spike:") {
                "spike".into()
            } else {
                shape(l)
            }
        })
        .collect()
}

/// cyclictest 2.x's `T:` line, as its format string
/// `T:%2d (%5d) P:%2d I:%ld C:%7lu Min:%7ld Act:%5ld Avg:%5ld Max:%8ld` prints it.
fn is_t_line(l: &str) -> bool {
    let f: Vec<&str> = l.split_whitespace().collect();
    l.starts_with("T:")
        && ["P:", "I:", "C:", "Min:", "Act:", "Avg:", "Max:"]
            .iter()
            .all(|k| l.contains(k))
        && f.len() >= 8
}

fn same_layout(flags: &str, ours_flags: &str) {
    let t = tempfile::tempdir().unwrap();
    let r = real(flags);
    assert!(r.status.success(), "cyclictest {flags}: {r:?}");
    let o = ours(t.path(), ours_flags);
    assert!(
        o.status.code() == Some(0) || o.status.code() == Some(2),
        "latlab cyclictest {ours_flags}: {o:?}"
    );
    let (rs, os) = (stdout(&r), stdout(&o));
    assert_eq!(
        shapes(&os),
        shapes(&rs),
        "latlab cyclictest {ours_flags}:\n{os}\ncyclictest {flags}:\n{rs}"
    );
    assert!(!os.is_empty());
}

/// What a terminal shows once `out` is written: line after line, `ESC [ n A` moving the
/// cursor n lines up (cyclictest's live redraw), a line written over another replacing it.
/// Also how many times the cursor went up.
fn screen(out: &str) -> (String, usize) {
    let (mut rows, mut row, mut line, mut ups) = (Vec::<String>::new(), 0usize, String::new(), 0);
    let mut chars = out.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => {
                assert_eq!(
                    chars.next(),
                    Some('['),
                    "an escape other than ESC [ n A: {out:?}"
                );
                let mut n = String::new();
                while let Some(d) = chars.next_if(|d| d.is_ascii_digit()) {
                    n.push(d);
                }
                assert_eq!(
                    chars.next(),
                    Some('A'),
                    "an escape other than ESC [ n A: {out:?}"
                );
                row -= n.parse::<usize>().unwrap();
                ups += 1;
            }
            '\n' => {
                if row == rows.len() {
                    rows.push(String::new());
                }
                rows[row] = std::mem::take(&mut line);
                row += 1;
            }
            c => line.push(c),
        }
    }
    (rows.join("\n") + "\n", ups)
}

/// Without -q, cyclictest redraws its `policy:` header and `T:` lines in place while it
/// measures; `latlab cyclictest` does too, and the terminal ends with the same screen.
#[test]
fn live_lines_redraw_in_place_as_cyclictests() {
    let Some(_g) = privileged::guard("live_lines_redraw_in_place_as_cyclictests") else {
        return;
    };
    let flags = "-t -p80 -D2 -m";
    let t = tempfile::tempdir().unwrap();
    let r = real(flags);
    assert!(r.status.success(), "cyclictest {flags}: {r:?}");
    let o = ours(t.path(), flags);
    assert_eq!(o.status.code(), Some(0), "latlab cyclictest {flags}: {o:?}");
    let ((rs, rups), (os, oups)) = (screen(&stdout(&r)), screen(&stdout(&o)));
    assert_eq!(
        shapes(&os),
        shapes(&rs),
        "latlab cyclictest {flags}:\n{os}\ncyclictest {flags}:\n{rs}"
    );
    assert!(os.contains("policy: fifo: loadavg: "), "{os}");
    // cyclictest redraws every 10 ms, latlab every 100 ms: 2 s give ~20 redraws.
    assert!(
        oups >= 5 && rups >= 5,
        "redraws: latlab {oups}, cyclictest {rups}"
    );
    let threads = latlab_sys::rt::online_cpus().unwrap().len();
    let t_lines: Vec<&str> = os.lines().filter(|l| l.starts_with("T:")).collect();
    assert_eq!(t_lines.len(), threads, "{os}");
    assert!(t_lines.iter().all(|l| is_t_line(l)), "{os}");
    // The screen's last T: lines are the run's: its directory counts the same samples.
    let run = read_json(&only_run_dir(t.path()).join("run.json"));
    for (i, l) in t_lines.iter().enumerate() {
        let c = l
            .split("C:")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap();
        assert_eq!(
            c.parse::<u64>().unwrap(),
            run["cpus"][i]["samples"].as_u64().unwrap(),
            "{l}"
        );
    }
}

#[test]
fn quiet_t_lines_match_cyclictest() {
    let Some(_g) = privileged::guard("quiet_t_lines_match_cyclictest") else {
        return;
    };
    same_layout("-t -p80 -D1 -q", "-t -p80 -D1 -q");
    same_layout(
        "-t1 -a1 -p 80 -i 500 -l 300 -mq -N",
        "-t1 -a1 -p 80 -i 500 -l 300 -mq -N",
    );
    let t = tempfile::tempdir().unwrap();
    let o = ours(t.path(), "-S -p80 -D1 -q");
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("T:")).collect();
    assert_eq!(lines.len(), latlab_sys::rt::online_cpus().unwrap().len());
    assert!(lines.iter().all(|l| is_t_line(l)), "{out}");
    // cyclictest's default distance: 500 µs more per thread.
    if lines.len() > 1 {
        assert!(lines[1].contains(" I:1500 "), "{out}");
    }
    // And a normal run directory, which `report` reads.
    let dir = only_run_dir(t.path());
    latlab().arg("report").arg(&dir).assert().success();
}

#[test]
fn histogram_dump_matches_cyclictest_and_imports_back() {
    let Some(_g) = privileged::guard("histogram_dump_matches_cyclictest_and_imports_back") else {
        return;
    };
    same_layout("-t -p80 -D1 -q -h 40", "-t -p80 -D1 -q -h 40");
    same_layout("-t -p80 -D1 -q -H 40", "-t -p80 -D1 -q -H40");
    // --histfile: the same dump in the file, nothing of it on stdout.
    let t = tempfile::tempdir().unwrap();
    let (rf, of) = (t.path().join("real.txt"), t.path().join("ours.txt"));
    let r = real(&format!("-t -p80 -D1 -q -H 30 --histfile={}", rf.display()));
    let o = ours(
        &t.path().join("r"),
        &format!("-t -p80 -D1 -q -H 30 --histfile={}", of.display()),
    );
    assert!(r.status.success() && o.status.success(), "{o:?}");
    assert_eq!(shapes(&stdout(&o)), shapes(&stdout(&r)));
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    assert_eq!(shapes(&read(&of)), shapes(&read(&rf)), "{}", read(&of));
    // Round trip: the importer reads the dump back, sample for sample.
    let t = tempfile::tempdir().unwrap();
    let o = ours(&t.path().join("r"), "-t -p80 -D1 -q -H 300");
    let dump = t.path().join("dump.txt");
    std::fs::write(&dump, &o.stdout).unwrap();
    let run = read_json(&only_run_dir(&t.path().join("r")).join("run.json"));
    latlab()
        .args(["import", "--from", "cyclictest", "--results"])
        .arg(t.path().join("imp"))
        .arg(&dump)
        .assert()
        .success();
    let imp = read_json(&only_run_dir(&t.path().join("imp")).join("run.json"));
    let counts = |r: &serde_json::Value| -> Vec<u64> {
        r["cpus"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["histogram"]["count"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(counts(&imp), counts(&run));
    assert_eq!(
        imp["total"]["max_ns"].as_u64().unwrap() / 1000,
        run["total"]["max_ns"].as_u64().unwrap() / 1000
    );
}

#[test]
fn verbose_lines_match_cyclictest_and_import_back() {
    let Some(_g) = privileged::guard("verbose_lines_match_cyclictest_and_import_back") else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let r = stdout(&real("-t -p80 -l 200 -v -q"));
    let o = ours(&t.path().join("r"), "-t -p80 -l 200 -v -q");
    assert!(o.status.success(), "{o:?}");
    let os = stdout(&o);
    let head = |s: &str| -> Vec<String> {
        s.lines()
            .take_while(|l| !l.starts_with(' '))
            .map(shape)
            .collect()
    };
    assert_eq!(head(&os), head(&r), "{os}");
    let sample = |l: &&str| {
        let f: Vec<&str> = l.split(':').collect();
        l.len() == 26 && f.len() == 3 && f.iter().all(|x| x.trim().parse::<u64>().is_ok())
    };
    let samples: Vec<&str> = os.lines().filter(|l| l.starts_with(' ')).collect();
    assert!(samples.iter().all(sample), "{os}");
    assert!(r.lines().filter(|l| l.starts_with(' ')).all(|l| sample(&l)));
    // Each thread's sample lines are its `C:` count.
    let t_lines: Vec<&str> = os.lines().filter(|l| l.starts_with("T:")).collect();
    for (i, tl) in t_lines.iter().enumerate() {
        let c: usize = tl
            .split("C:")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let n = samples
            .iter()
            .filter(|l| l.split(':').next().unwrap().trim() == i.to_string())
            .count();
        assert_eq!(n, c, "thread {i}: {os}");
        assert!(c > 0);
    }
    // The verbose importer reads them back.
    let f = t.path().join("v.txt");
    std::fs::write(&f, &o.stdout).unwrap();
    latlab()
        .args(["import", "--from", "cyclictest-verbose", "--results"])
        .arg(t.path().join("imp"))
        .arg(&f)
        .assert()
        .success();
    let imp = read_json(&only_run_dir(&t.path().join("imp")).join("run.json"));
    assert_eq!(
        imp["total"]["samples"].as_u64().unwrap() as usize,
        samples.len()
    );
}

fn keys(v: &serde_json::Value) -> Vec<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

#[test]
fn json_file_has_cyclictests_schema_and_imports_back() {
    let Some(_g) = privileged::guard("json_file_has_cyclictests_schema_and_imports_back") else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let rj = t.path().join("real.json");
    let oj = t.path().join("ours.json");
    for (flags, nsecs) in [("-t -p80 -D1 -q -h 50", false), ("-t -p80 -D1 -q -N", true)] {
        let r = real(&format!("{flags} --json={}", rj.display()));
        assert!(r.status.success());
        let o = ours(
            &t.path().join("r"),
            &format!("{flags} --json={}", oj.display()),
        );
        assert!(o.status.success(), "{o:?}");
        let (r, o) = (read_json(&rj), read_json(&oj));
        assert_eq!(keys(&o), keys(&r));
        assert_eq!(keys(&o["sysinfo"]), keys(&r["sysinfo"]));
        assert_eq!(keys(&o["thread"]), keys(&r["thread"]));
        assert_eq!(keys(&o["thread"]["0"]), keys(&r["thread"]["0"]));
        assert_eq!(o["resolution_in_ns"], u8::from(nsecs));
        assert_eq!(o["num_threads"], r["num_threads"]);
        // Values sane: the histogram's buckets below -h, summing to at most the cycles.
        for th in o["thread"].as_object().unwrap().values() {
            let h = th["histogram"].as_object().unwrap();
            assert_eq!(h.is_empty(), !flags.contains("-h"));
            let sum: u64 = h.values().map(|n| n.as_u64().unwrap()).sum();
            assert!(sum <= th["cycles"].as_u64().unwrap());
            assert!(h.keys().all(|k| k.parse::<u64>().unwrap() < 50));
            assert!(th["min"].as_u64().unwrap() <= th["max"].as_u64().unwrap());
        }
        // Round trip through the JSON importer (which needs a histogram: -h).
        if nsecs {
            continue;
        }
        let imp = t.path().join(if nsecs { "impn" } else { "imph" });
        latlab()
            .args(["import", "--from", "cyclictest-json", "--results"])
            .arg(&imp)
            .arg(&oj)
            .assert()
            .success();
        let run = read_json(&only_run_dir(&imp).join("run.json"));
        assert_eq!(
            run["cpus"][0]["histogram"]["count"].as_u64(),
            o["thread"]["0"]["cycles"].as_u64()
        );
    }
}

#[test]
fn breaktrace_stops_the_run_and_reports_like_cyclictest() {
    let Some(_g) = privileged::guard("breaktrace_stops_the_run_and_reports_like_cyclictest") else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let r = real("-p80 -D5 -q -b 1");
    let o = ours(t.path(), "-p80 -D5 -q -b 1");
    // A sample exceeded the break value (= --max-latency): latlab's exit 2.
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert_eq!(shapes(&stdout(&o)), shapes(&stdout(&r)), "{}", stdout(&o));
    let run = read_json(&only_run_dir(t.path()).join("run.json"));
    assert!(run["warnings"].to_string().contains("--on-threshold stop"));
    // Stopped within a collector tick or so of the first sample above 1 µs, not after 5 s.
    let measured = run["config"]["measured_ns"].as_u64().unwrap();
    assert!(measured < 1_000_000_000, "{measured}");
}

#[test]
fn spike_list_matches_cyclictest() {
    let Some(_g) = privileged::guard("spike_list_matches_cyclictest") else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    // 1 µs: every sample is a spike, on both sides.
    let r = stdout(&real("-p80 -l 100 -q --spike 1"));
    let o = stdout(&ours(t.path(), "-p80 -l 100 -q --spike=1"));
    let dedup = |s: &str| {
        let mut v = shapes(s);
        v.dedup();
        v
    };
    assert_eq!(dedup(&o), dedup(&r), "{o}");
    let n = o.lines().filter(|l| l.contains("Spike:")).count();
    assert!(o.contains(&format!("spikes = {n}\n")), "{o}");
    // Every sample is listed, and every one of the 100 periods (`-l 100`: 100 ms) is a sample
    // or a missed period (one may be cut at the end). Not a share of samples: fc7's VM stalled
    // three times for 10 ms, and 72 periods of 100 had a sample.
    let run = read_json(&only_run_dir(t.path()).join("run.json"));
    let cpu = &run["cpus"][0];
    let (samples, missed) = (
        cpu["samples"].as_u64().unwrap(),
        cpu["missed_periods"].as_u64().unwrap(),
    );
    assert_eq!(n as u64, samples, "{o}");
    assert!(
        (99..=100).contains(&(samples + missed)),
        "{samples} + {missed}: {o}"
    );
}

/// Without root: the sim backend, for what needs no comparison.
fn sim(results: &Path, flags: &str) -> Output {
    ours(results, &format!("--backend sim {flags}"))
}

#[test]
fn sim_histfile_goes_to_the_file_and_h_is_not_help() {
    let t = tempfile::tempdir().unwrap();
    let hf = t.path().join("hist.txt");
    let o = sim(
        &t.path().join("r"),
        &format!("-t -D1 -q -h 200 --histfile={}", hf.display()),
    );
    assert!(o.status.success(), "{o:?}");
    assert!(o.stdout.is_empty(), "{}", stdout(&o));
    let h = std::fs::read_to_string(&hf).unwrap();
    assert!(h.starts_with("# Histogram\n000000 "), "{h}");
    assert_eq!(
        h.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .count(),
        200
    );
    assert!(h.contains("\n# Histogram Overflows: "));
    let run_dir = only_run_dir(&t.path().join("r"));
    latlab().arg("report").arg(&run_dir).assert().success();
    // --help is help; -h is the histogram.
    let o = latlab().args(["cyclictest", "--help"]).output().unwrap();
    assert!(o.status.success());
    assert!(stdout(&o).contains("-h/--histogram US"));
}

#[test]
fn bad_flags_exit_1_naming_them() {
    let t = tempfile::tempdir().unwrap();
    for (flags, want) in [
        (
            "-D1 -x",
            "-x (--posix_timers): this cyclictest flag is not supported",
        ),
        ("-D1 --smi", "--smi: this cyclictest flag is not supported"),
        ("-D1 -Z", "-Z: not a cyclictest flag"),
        ("-D1 --frobnicate=2", "--frobnicate: not a cyclictest flag"),
        ("-D1 -h", "-h (--histogram): needs a value"),
        ("-D1 -i abc", "-i abc: not a whole number"),
        ("-q", "no -D or -l"),
        (
            "-D1 -t 999",
            "-t 999: latlab measures with one thread per CPU",
        ),
        ("-D1 --policy=idle", "--policy idle: not supported"),
        // Refusals name the cyclictest flag and value as typed, not the `latlab run` flag
        // they became (`--interval 5us`, `--hist-limit 1m40s`).
        ("-D1 -i 5", "-i 5: below the 10us minimum"),
        (
            "-D1 -h 100000000",
            "-h 100000000: must be whole microseconds",
        ),
        (
            "-D1 -i 99999999999999999999",
            "-i 99999999999999999999: too large",
        ),
        ("-D1 -p -1", "-p -1: must not be negative"),
        ("-D 99999999999999d", "-D 99999999999999d: not a duration"),
        (
            "-D1 --json=/nonexistent-latlab/x.json",
            "--json=/nonexistent-latlab/x.json: the directory /nonexistent-latlab does not exist",
        ),
    ] {
        let o = sim(&t.path().join("r"), flags);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{flags}: {err}");
        assert_eq!(err.lines().count(), 1, "{flags}: {err}");
        assert!(err.starts_with("latlab: error: "), "{err}");
        assert!(err.contains(want), "{flags}: {err}");
        assert!(o.stdout.is_empty());
    }
    assert!(!t.path().join("r").exists());
}

/// `-b 0` is no break trace, as in cyclictest (`if (tracelimit)`): the run goes its whole
/// length and exits 0; it stopped at the first sample with exit 2.
#[test]
fn breaktrace_zero_is_off() {
    let t = tempfile::tempdir().unwrap();
    let o = sim(&t.path().join("r"), "-D1 -q -b 0");
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let run = read_json(&only_run_dir(&t.path().join("r")).join("run.json"));
    assert!(
        run["total"]["samples"].as_u64().unwrap() > 500,
        "{}",
        run["total"]
    );
}

/// `--db URL` and `--no-db`, as for `latlab run`: the run lands in that database, or in none.
#[test]
fn db_and_no_db_reach_the_run() {
    let t = tempfile::tempdir().unwrap();
    let db = t.path().join("runs.sqlite");
    let o = sim(
        &t.path().join("r"),
        &format!("-D1 -q --db {}", db.display()),
    );
    assert!(o.status.success(), "{o:?}");
    let list = |db: &Path| {
        let o = latlab()
            .args(["history", "--format", "json", "--db"])
            .arg(db)
            .output()
            .unwrap();
        assert!(o.status.success(), "{o:?}");
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["runs"]
            .as_array()
            .map_or(0, Vec::len)
    };
    assert_eq!(list(&db), 1);
    let o = latlab()
        .env("LATLAB_DB", &db)
        .args([
            "cyclictest",
            "--backend",
            "sim",
            "-D1",
            "-q",
            "--no-db",
            "--results",
        ])
        .arg(t.path().join("r2"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    assert_eq!(list(&db), 1, "--no-db recorded the run");
}

/// `--priospread`: thread i runs at PRIO − i, on the machine (read back from the kernel while
/// the run goes on), on the `T:` lines and in run.json.
#[test]
fn priospread_gives_each_thread_one_priority_less() {
    let Some(_g) = privileged::guard("priospread_gives_each_thread_one_priority_less") else {
        return;
    };
    let n = latlab_sys::rt::online_cpus().unwrap().len();
    if n < 2 {
        support::cannot_run("priospread", "needs 2 CPUs");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let child = support::command()
        .args(["cyclictest", "--results"])
        .arg(t.path())
        .args(["-t", "-p80", "--priospread", "-D3", "-q"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The measuring threads' priorities, as the kernel has them, once set.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut seen: Vec<(String, i32)> = Vec::new();
    while std::time::Instant::now() < deadline {
        seen.clear();
        let tasks = format!("/proc/{}/task", child.id());
        for e in std::fs::read_dir(&tasks).into_iter().flatten().flatten() {
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            if comm.starts_with("latlab-cpu") {
                let tid: i32 = e.file_name().to_string_lossy().parse().unwrap();
                let mut p = libc::sched_param { sched_priority: 0 };
                // SAFETY: a valid pointer; a thread that ended gives an error, skipped.
                if unsafe { libc::sched_getparam(tid, &mut p) } == 0 {
                    seen.push((comm.trim().to_string(), p.sched_priority));
                }
            }
        }
        seen.sort();
        if seen.len() == n && seen.iter().all(|s| s.1 > 0) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let mut prios: Vec<i32> = seen.iter().map(|s| s.1).collect();
    prios.sort_unstable_by(|a, b| b.cmp(a));
    let want: Vec<i32> = (0..n as i32).map(|i| 80 - i).collect();
    assert_eq!(prios, want, "{seen:?}");
    let so = stdout(&out);
    assert!(so.contains(" P:80 ") && so.contains(" P:79 "), "{so}");
    let run = read_json(&only_run_dir(t.path()).join("run.json"));
    assert_eq!(run["cpus"][1]["thread"]["priority"], 79);
}
