//! The trace feature end to end: `latlab analyze` on committed fixtures (no root), and the
//! privileged ground truth — a real recorder, a real FIFO sleeper and a real higher-priority
//! burst of known length — that the attribution must name, within 20 %.

use std::path::{Path, PathBuf};

use predicates::prelude::*;

mod support;
use support::latlab;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../latlab-core/tests/fixtures/trace")
        .join(name)
}

#[test]
fn analyze_names_the_blocking_task_of_a_real_spike() {
    let out = latlab()
        .args(["analyze", "--format", "json", "--threshold", "1ms"])
        .arg(fixture("trace-worst-window-cpu1.txt"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let spikes = v["spikes"].as_array().unwrap();
    assert_eq!(spikes.len(), 1);
    let s = &spikes[0];
    assert_eq!(s["cpu"], 1);
    assert_eq!(s["latency_ns"], 13_351_484);
    assert_eq!(s["at_ns"], 1_549_930_731_883u64);
    let c0 = &s["causes"][0];
    assert_eq!(c0["kind"], "preempt_off");
    assert_eq!(c0["name"], "rust-lld");
    assert_eq!(c0["pid"], 15780);
    assert_eq!(c0["prio"], 120);
    let share = c0["ns"].as_u64().unwrap() as f64 / 13_351_484.0;
    assert!(share > 0.98, "{share}");
    // Causes sorted, adding up to at most the latency.
    let ns: Vec<u64> = s["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["ns"].as_u64().unwrap())
        .collect();
    assert!(ns.windows(2).all(|w| w[0] >= w[1]));
    assert!(ns.iter().sum::<u64>() <= 13_351_484);
    let sum = &v["summary"][0];
    assert_eq!(sum["kind"], "preempt_off");
    assert_eq!(sum["name"], "rust-lld");
    assert_eq!(sum["spikes"], 1);
}

#[test]
fn analyze_text_output_has_timeline_and_table() {
    latlab()
        .arg("analyze")
        .arg(fixture("trace-worst-window-cpu1.txt"))
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "preempt_off rust-lld (pid 15780, prio 120)",
        ))
        .stdout(predicate::str::contains("switched in"))
        .stdout(predicate::str::contains("what delays this machine"));
}

#[test]
fn analyze_escapes_odd_task_names() {
    // A comm with an ANSI escape and a newline must not reach the terminal raw.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.txt");
    let tau = "x\x1b[31mevil\nname";
    let text = format!(
        "  a-1 [000] d..1.  1.000000: hrtimer_start: hrtimer=h function=hrtimer_wakeup expires=1000100000 softexpires=1000100000 mode=ABS\n\
         {tau}-7 [000] d..2.  1.000001: sched_switch: prev_comm={tau} prev_pid=7 prev_prio=19 prev_state=S ==> next_comm=hog next_pid=8 next_prio=120\n\
         hog-8 [000] d.h..  1.000100: local_timer_entry: vector=236\n\
         hog-8 [000] d.h2.  1.000101: sched_waking: comm={tau} pid=7 prio=19 target_cpu=000\n\
         hog-8 [000] dNh..  1.000102: local_timer_exit: vector=236\n\
         hog-8 [000] d..2.  1.000900: sched_switch: prev_comm=hog prev_pid=8 prev_prio=120 prev_state=R ==> next_comm={tau} next_pid=7 next_prio=19\n"
    );
    std::fs::write(&p, text).unwrap();
    let out = latlab().arg("analyze").arg(&p).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(!s.contains('\x1b'), "{s}");
    assert!(s.contains("preempt_off hog (pid 8, prio 120)"), "{s}");
}

#[test]
fn analyze_rejects_garbage_and_warns_on_truncation_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("garbage.txt");
    std::fs::write(&p, b"\x00\xff not a trace\nat all\n").unwrap();
    latlab()
        .arg("analyze")
        .arg(&p)
        .assert()
        .code(1)
        .stderr(predicate::str::starts_with("latlab: error: "))
        .stderr(predicate::str::contains("garbage.txt:1:"));
    // A real trace cut in the middle of its last event: that event is skipped and said so,
    // the rest is analyzed.
    let full = std::fs::read_to_string(fixture("trace-worst-window-cpu1.txt")).unwrap();
    let cut = &full[..full.rfind("sched_switch:").unwrap() + 30];
    let p = dir.path().join("cut.txt");
    std::fs::write(&p, cut).unwrap();
    let lines = cut.lines().count();
    latlab()
        .arg("analyze")
        .arg(&p)
        .assert()
        .code(0)
        .stdout(predicate::str::contains(format!(
            "warning: 1 line skipped: not trace events (first: line {lines}: sched_switch"
        )))
        .stdout(predicate::str::contains(format!(
            "warning: line {lines}: the last line is cut short"
        )))
        .stdout(predicate::str::contains(
            "spike 1: CPU 1, python3 (pid 15520)",
        ));
    latlab()
        .args(["analyze", "/nonexistent/trace.txt"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("/nonexistent/trace.txt"));
    latlab()
        .arg("analyze")
        .arg(fixture("trace-events.txt"))
        .args(["--threshold", "fast"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("--threshold"));
}

/// A trace in the kernel's own layout (that of the fixture trace-events.txt) on CPU 0: τ (`tau`,
/// pid 7, FIFO 80) arms its timer for 1.000100 and sleeps, `odd` (pid 9, named as given) runs
/// and switches to `hog` (pid 8, CFS), which keeps the CPU past the timer; τ's marker (the
/// last line) ends an 840 µs sample.
fn kernel_trace(odd: &str) -> String {
    let l = |task: &str, pid: i64, flags: &str, ts: &str, body: &str| {
        format!("{task:>16}-{pid:<7} [000] {flags} {ts:>12}: {body}\n")
    };
    [
        l("tau", 7, "d..1.", "1.000000", "hrtimer_start: hrtimer=h function=hrtimer_wakeup expires=1000100000 softexpires=1000100000 mode=ABS"),
        l("tau", 7, "d..2.", "1.000001", &format!("sched_switch: prev_comm=tau prev_pid=7 prev_prio=19 prev_state=S ==> next_comm={odd} next_pid=9 next_prio=120")),
        l(odd, 9, "d.h..", "1.000010", "local_timer_entry: vector=236"),
        l(odd, 9, "d.h..", "1.000012", "local_timer_exit: vector=236"),
        l(odd, 9, "d..2.", "1.000020", &format!("sched_switch: prev_comm={odd} prev_pid=9 prev_prio=120 prev_state=S ==> next_comm=hog next_pid=8 next_prio=120")),
        l("hog", 8, "d.h..", "1.000100", "local_timer_entry: vector=236"),
        l("hog", 8, "d.h2.", "1.000101", "sched_waking: comm=tau pid=7 prio=19 target_cpu=000"),
        l("hog", 8, "dNh..", "1.000102", "local_timer_exit: vector=236"),
        l("hog", 8, "d..2.", "1.000900", "sched_switch: prev_comm=hog prev_pid=8 prev_prio=120 prev_state=R ==> next_comm=tau next_pid=7 next_prio=19"),
        l("tau", 7, "....1", "1.000950", "tracing_mark_write: LATLAB_STOP cpu=0 intended=1000100000 actual=1000940000 latency=840000"),
    ]
    .concat()
}

/// `latlab analyze --format json` on `text`: (exit code, JSON, stderr).
fn analyze_json(text: &str) -> (i32, serde_json::Value, String) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.txt");
    std::fs::write(&p, text).unwrap();
    let out = latlab()
        .args(["analyze", "--format", "json"])
        .arg(&p)
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap_or(-1), v, err)
}

/// The spike of [`kernel_trace`]: 840 µs, the hog named first.
fn assert_hog_spike(v: &serde_json::Value) {
    let s = &v["spikes"];
    assert_eq!(s.as_array().map(Vec::len), Some(1), "{v:#}");
    assert_eq!(s[0]["latency_ns"], 840_000, "{v:#}");
    assert_eq!(s[0]["causes"][0]["kind"], "preempt_off", "{v:#}");
    assert_eq!(s[0]["causes"][0]["name"], "hog", "{v:#}");
}

/// Regression (issue 14): a task named with newlines (prctl(PR_SET_NAME), any user) on the
/// measured CPU made `analyze` reject the whole trace. Two newlines in the names on both sides
/// of a switch now parse; three still cost lines, which are skipped, counted and named (line
/// numbers), and the spike is reported.
#[test]
fn regression_analyze_a_task_named_with_newlines_costs_lines_not_the_trace() {
    let (code, v, err) = analyze_json(&kernel_trace("a\nb\nc"));
    assert_eq!(code, 0, "{err}");
    assert_hog_spike(&v);
    assert_eq!(v["skipped_lines"], 0, "{v:#}");
    assert_eq!(v["warnings"], serde_json::json!([]), "{v:#}");

    let (code, v, err) = analyze_json(&kernel_trace("a\nb\nc\nd"));
    assert_eq!(code, 0, "{err}");
    assert_hog_spike(&v);
    assert!(v["skipped_lines"].as_u64().unwrap() >= 1, "{v:#}");
    assert_eq!(v["skipped"][0]["line"], 2, "{v:#}");
    assert_eq!(v["skipped"][0]["error"], "sched_switch: no next_pid=field");
    let w = v["warnings"][0].as_str().unwrap();
    assert!(
        w.contains("lines skipped: not trace events (first: line 2: sched_switch"),
        "{w}"
    );
    // The text output says it too, one line, escaped.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.txt");
    std::fs::write(&p, kernel_trace("a\nb\nc\nd")).unwrap();
    latlab()
        .arg("analyze")
        .arg(&p)
        .assert()
        .success()
        .stdout(
            predicate::str::is_match(
                r"(?m)^warning: \d+ lines skipped: not trace events \(first: line 2: sched_switch",
            )
            .unwrap(),
        )
        .stdout(predicate::str::contains(
            "preempt_off hog (pid 8, prio 120)",
        ));
}

/// A trace cut inside its last marker (`latency=8400` for 840000) gave a spike of 8.4 µs,
/// silently: the cut field is not read (latency = actual − intended) and a warning names the
/// line. Time going backwards on a CPU is warned about, and the spike kept.
#[test]
fn analyze_warns_on_a_cut_last_marker_and_on_time_going_backwards() {
    let full = kernel_trace("odd");
    let (code, v, err) = analyze_json(&full[..full.len() - 3]);
    assert_eq!(code, 0, "{err}");
    assert_hog_spike(&v);
    assert_eq!(
        v["warnings"],
        serde_json::json!(["line 10: the last latlab marker is cut short: its last field is not read (no newline at the end: a truncated file?)"])
    );

    let back = full.replace("1.000102: local_timer_exit", "1.000040: local_timer_exit");
    let (code, v, err) = analyze_json(&back);
    assert_eq!(code, 0, "{err}");
    assert_eq!(v["spikes"][0]["latency_ns"], 840_000, "{v:#}");
    assert_eq!(v["spikes"][0]["causes"][0]["name"], "hog", "{v:#}");
    let w = v["warnings"][0].as_str().unwrap();
    assert!(
        w.starts_with("time goes backwards 1 time (first: line 8, CPU 0, 61.0 us before"),
        "{w}"
    );
}

/// `analyze` exited 0 when its output was lost: stdout closed (`>&-`: Rust's runtime puts
/// /dev/null there) or full (`> /dev/full`). Now exit 1 and one `latlab: error:` line; a
/// plain `> /dev/null` stays a success.
#[test]
fn analyze_lost_output_is_an_error() {
    use std::os::unix::process::CommandExt;
    let run = |stdout: std::process::Stdio, close: bool| {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("latlab"));
        cmd.arg("analyze")
            .arg(fixture("trace-worst-window-cpu1.txt"))
            .stdout(stdout);
        if close {
            // SAFETY: between fork and exec only close(2), async-signal-safe.
            unsafe {
                cmd.pre_exec(|| {
                    libc::close(1);
                    Ok(())
                });
            }
        }
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    for (what, (code, err)) in [
        ("closed", run(std::process::Stdio::inherit(), true)),
        ("/dev/full", run(full.into(), false)),
    ] {
        assert_eq!(code, Some(1), "{what}: {err}");
        assert_eq!(err.lines().count(), 1, "{what}: {err}");
        assert!(
            err.starts_with("latlab: error: cannot write the analysis to stdout: "),
            "{what}: {err}"
        );
    }
    let null = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .unwrap();
    let (code, err) = run(null.into(), false);
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn analyze_kernel_format_fixtures_parse() {
    for f in ["trace-events.txt", "trace-worst-window-cpu1.txt"] {
        latlab()
            .args(["analyze", "--format", "json"])
            .arg(fixture(f))
            .assert()
            .success();
    }
}

// ---------------------------------------------------------------------------------------------
// Privileged ground truth.

mod rt {
    //! Minimal RT helpers for the ground-truth test (the engine's own live in latlab-sys).
    pub fn now() -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: valid pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    pub fn sleep_until(t: u64) {
        let ts = libc::timespec {
            tv_sec: (t / 1_000_000_000) as libc::time_t,
            tv_nsec: (t % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: valid pointer; EINTR just ends the sleep early, which the callers tolerate.
        unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
    }

    /// Pin the calling thread to `cpu`, make it SCHED_FIFO `prio`, and name it.
    pub fn setup(cpu: usize, prio: i32, name: &str) -> i64 {
        // SAFETY: plain syscalls on the calling thread with valid arguments.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            assert_eq!(
                libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set),
                0
            );
            let p = libc::sched_param {
                sched_priority: prio,
            };
            assert_eq!(libc::sched_setscheduler(0, libc::SCHED_FIFO, &p), 0);
            let c = std::ffi::CString::new(name).unwrap();
            libc::prctl(libc::PR_SET_NAME, c.as_ptr());
            libc::syscall(libc::SYS_gettid)
        }
    }
}

/// One run of the burst experiment (see the test below): the recorder cleared and started, a
/// FIFO-90 helper spinning 3 ms mid-period and a FIFO-80 sleeper of 1 ms period on `cpu`.
/// Returns (helper tid, sleeper tid, burst end, the delayed wake-up's due time, its latency), or
/// why the clocks say the burst did not delay a sleeping thread.
fn burst_attempt(
    rec: &latlab_sys::tracefs::Recorder,
    cpu: usize,
) -> Result<(i64, i64, u64, u64, u64), String> {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Barrier};
    const PERIOD: u64 = 1_000_000;
    const BURST: u64 = 3_000_000;
    rec.clear().unwrap();
    rec.start().unwrap();
    // The start is set once both threads are FIFO on `cpu` (a new thread is an ordinary one
    // until then, and may wait long for a CPU when the machine is loaded).
    let ready = Arc::new(Barrier::new(3));
    let t0 = Arc::new(AtomicU64::new(0));
    // The helper's clock when it began to spin (0 before): the sleeper marks the first wake-up
    // due after it, if it was asleep then.
    let began = Arc::new(AtomicU64::new(0));
    let fd = rec.marker_fd();
    let (b, go, start_at) = (began.clone(), ready.clone(), t0.clone());
    let helper = std::thread::spawn(move || {
        let tid = rt::setup(cpu, 90, "lat-burst");
        go.wait();
        go.wait();
        // Mid-way between two wake-ups, 150 ms in: both threads are settled by then.
        let burst_at = start_at.load(Ordering::SeqCst) + 150 * PERIOD + PERIOD / 2;
        rt::sleep_until(burst_at);
        let start = rt::now();
        b.store(start, Ordering::SeqCst);
        while rt::now() < start + BURST {
            std::hint::spin_loop();
        }
        (tid, start - burst_at, rt::now())
    });
    let (b, go, start_at) = (began.clone(), ready.clone(), t0.clone());
    let sleeper = std::thread::spawn(move || {
        let tid = rt::setup(cpu, 80, "lat-sleeper");
        go.wait();
        go.wait();
        let mut e = start_at.load(Ordering::SeqCst);
        let mut last_read = 0;
        let mut found = None;
        for _ in 0..300 {
            rt::sleep_until(e);
            let r = rt::now();
            let lat = r - e;
            let began = b.load(Ordering::SeqCst);
            if found.is_none() && began != 0 && last_read < began && e >= began && lat > PERIOD {
                let m = format!("LATLAB_STOP cpu={cpu} intended={e} actual={r} latency={lat}\n");
                // SAFETY: valid fd and buffer.
                unsafe { libc::write(fd, m.as_ptr().cast(), m.len()) };
                found = Some((e, lat));
            }
            last_read = r;
            e += PERIOD;
        }
        (tid, found)
    });
    ready.wait();
    t0.store(rt::now() + 20_000_000, Ordering::SeqCst);
    ready.wait();
    let (htid, late, hend) = helper.join().unwrap();
    let (stid, found) = sleeper.join().unwrap();
    let Some((e, lat)) = found else {
        return Err(format!(
            "no wake-up due inside the burst was delayed over 1 ms (burst {late} ns after its time)"
        ));
    };
    if e >= hend {
        return Err(format!(
            "the delayed wake-up came due {} ns after the burst",
            e - hend
        ));
    }
    assert!(!rec.is_on(), "the marker did not stop the recorder");
    Ok((htid, stid, hend, e, lat))
}

/// A FIFO-80 sleeper (1 ms period) and, on the same CPU, a FIFO-90 helper that busy-loops for
/// 3 ms at a known moment. The recorder must catch the spike, and the attribution must name the
/// helper (comm and pid) for the time it actually kept the sleeper waiting, within 20 %.
#[test]
fn ground_truth_higher_priority_burst_is_attributed_to_the_helper() {
    use latlab_core::record::CauseKind;
    use latlab_core::trace::{analyze_text, AnalyzeOptions, SampleMode};
    use latlab_sys::ledger::{undo, Entry, Ledger};
    use latlab_sys::tracefs::{self, Recorder, RecorderConfig};

    let Some(_g) = latlab_sys::privileged::guard("ground_truth_higher_priority_burst") else {
        return;
    };
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpu = ncpu - 1;
    let tmp = tempfile::tempdir().unwrap();
    let mut ledger = Ledger::open_in(&tmp.path().join("run")).unwrap();
    let tfs = tracefs::ensure_mounted(Path::new(tracefs::DEFAULT_ROOT), &mut ledger).unwrap();
    let cfg = RecorderConfig {
        name: format!("latlab-{}", std::process::id()),
        buffer_kb: 1024,
    };
    let rec = Recorder::create(&tfs.root, &cfg, &mut ledger).unwrap();
    assert_eq!(rec.clock, "mono");
    // The experiment holds only when the clocks of both threads say so: the sleeper was asleep
    // when the burst began and its timer came due while the helper spun. A VM stall can move
    // the burst (CI, 2026-11-29: the helper's clock read came 45 ms late, after the sleeper's
    // due time, and the delay seen was a timer interrupt 48 ms late, no preemption at all;
    // here under stress-ng, a burst 69 ms late when the threads' start was not awaited);
    // such an attempt proves nothing about attribution and is run again, at most three times.
    let mut refused = Vec::new();
    let (htid, stid, hend, e, lat) = loop {
        match burst_attempt(&rec, cpu) {
            Ok(a) => break a,
            Err(why) if refused.len() < 2 => refused.push(why),
            Err(why) => {
                refused.push(why);
                panic!("no attempt set the experiment up: {refused:?}");
            }
        }
    };
    if !refused.is_empty() {
        eprintln!("attempts run again: {refused:?}");
    }
    let text = String::from_utf8_lossy(&rec.read_cpu(cpu as u32).unwrap()).into_owned();
    // Kept for diagnosis when an assertion fails; removed at the end on success.
    let keep = std::env::temp_dir().join(format!("latlab-ground-truth-{}.txt", std::process::id()));
    std::fs::write(&keep, &text).unwrap();

    // Remove the instance (and unmount if we mounted) before asserting: leave the machine clean.
    let dir = rec.dir().to_path_buf();
    rec.remove(&mut ledger).unwrap();
    assert!(!dir.exists());
    let leftovers: Vec<_> = std::fs::read_dir(tfs.root.join("instances"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n == &format!("latlab-{}", std::process::id()))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    if let Some(id) = tfs.mounted {
        undo(&Entry::TracefsMount {
            path: tfs.root.clone(),
        });
        ledger.forget(id).unwrap();
    }

    let a = analyze_text(
        &text,
        &AnalyzeOptions {
            threshold_ns: 0,
            mode: Some(SampleMode::Markers),
            gaps: Vec::new(),
        },
    )
    .unwrap();
    let s = a
        .spikes
        .iter()
        .find(|s| s.intended_ns == e)
        .unwrap_or_else(|| panic!("no sample for the marker in {}", keep.display()));
    assert_eq!(s.pid, stid);
    assert_eq!(s.latency_ns, lat);
    // What the helper really took from the sleeper: from the wake-up target (inside the
    // burst) to the burst's end.
    let truth = hend - e;
    let got: u64 = s
        .causes
        .iter()
        .filter(|c| c.kind == CauseKind::Task && c.name == "lat-burst" && c.pid == htid)
        .map(|c| c.ns)
        .sum();
    let top = &s.causes[0];
    eprintln!(
        "ground truth: latency {lat} ns, helper truth {truth} ns, attributed {got} ns; timeline:\n{}",
        latlab_report::timeline::lines(&s.to_spike()).join("\n")
    );
    assert_eq!(
        (top.kind, top.name.as_str(), top.pid),
        (CauseKind::Task, "lat-burst", htid)
    );
    assert_eq!(top.prio, 9, "FIFO 90 shows as kernel prio 9");
    // Within 20 % of the truth; what the helper is not charged may only be a silent gap
    // (`hypervisor`/`unknown`: the VM stopped, no event says what ran), which this VM has
    // for milliseconds at a time: such a stall is excluded, never charged to another cause.
    let silent: u64 = s
        .causes
        .iter()
        .filter(|c| matches!(c.kind, CauseKind::Hypervisor | CauseKind::Unknown))
        .map(|c| c.ns)
        .sum();
    assert!(
        got as f64 <= truth as f64 * 1.2,
        "attributed {got} ns vs {truth} ns: more than the helper took"
    );
    assert!(
        (got + silent) as f64 >= truth as f64 * 0.8,
        "attributed {got} ns (+ {silent} ns of silent gaps) vs {truth} ns"
    );
    assert!(s.explained_ns() <= s.latency_ns);
    // The sleeper's own way back (switch-in → its clock read) is labelled, never a plain
    // `task lat-sleeper` that reads like another task delaying it.
    assert!(
        !s.causes.iter().any(|c| c.name == "lat-sleeper"),
        "{:?}",
        s.causes
    );
    // What else is charged to the sleeper's pid ran in its context: an IRQ or a softirq that
    // came after its switch-in (CI, 2026-11-28: a virtio disk completion's `softirq BLOCK (in
    // lat-sleeper)` of 11 µs), a real delay of its way back, named as such.
    for c in s.causes.iter().filter(|c| c.pid == stid) {
        match c.kind {
            CauseKind::Task => assert_eq!(c.name, "switch-to-user (lat-sleeper)", "{c:?}"),
            CauseKind::Softirq | CauseKind::Irq => {
                assert!(c.name.ends_with("(in lat-sleeper)"), "{c:?}")
            }
            _ => panic!("{c:?} charged to the sleeper"),
        }
    }
    let _ = std::fs::remove_file(&keep);
}

/// Not a test: captures a large real trace for the `analyze` throughput benchmark, through
/// the recorder (ledgered instance, 64 MiB per CPU) under hackbench. Run with
/// `LATLAB_BENCH_TRACE=/tmp/big.txt cargo test -p latlab --test trace capture -- --ignored`.
#[test]
#[ignore]
fn capture_hackbench_trace_for_the_benchmark() {
    use latlab_sys::ledger::{undo, Entry, Ledger};
    use latlab_sys::tracefs::{self, Recorder, RecorderConfig};
    let Some(out) = std::env::var_os("LATLAB_BENCH_TRACE") else {
        return;
    };
    let Some(_g) = latlab_sys::privileged::guard("capture_hackbench_trace") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut ledger = Ledger::open_in(&tmp.path().join("run")).unwrap();
    let tfs = tracefs::ensure_mounted(Path::new(tracefs::DEFAULT_ROOT), &mut ledger).unwrap();
    let rec = Recorder::create(
        &tfs.root,
        &RecorderConfig {
            name: format!("latlab-{}", std::process::id()),
            buffer_kb: 65536,
        },
        &mut ledger,
    )
    .unwrap();
    rec.clear().unwrap();
    rec.start().unwrap();
    let st = std::process::Command::new("hackbench")
        .args(["-l", "2000", "-g", "4"])
        .output();
    rec.stop().unwrap();
    let text = std::fs::read(rec.dir().join("trace")).unwrap();
    std::fs::write(&out, &text).unwrap();
    rec.remove(&mut ledger).unwrap();
    if let Some(id) = tfs.mounted {
        undo(&Entry::TracefsMount {
            path: tfs.root.clone(),
        });
        ledger.forget(id).unwrap();
    }
    assert!(st.is_ok_and(|o| o.status.success()), "hackbench failed");
    eprintln!("captured {} bytes", text.len());
}

/// Regression (found by the ground truth): a real trace in which the kernel's `sched_switch`
/// into the burst task is missing. The attribution said "idle while runnable"; the PID
/// column of the following events shows who really ran.
#[test]
fn regression_missing_sched_switch_recovered_from_pid_column() {
    let out = latlab()
        .args(["analyze", "--format", "json"])
        .arg(fixture("trace-missing-switch-cpu1.txt"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = &v["spikes"][0];
    assert_eq!(s["latency_ns"], 2_615_242);
    assert_eq!(s["causes"][0]["kind"], "task");
    assert_eq!(s["causes"][0]["name"], "lat-burst");
    assert_eq!(s["causes"][0]["pid"], 3210);
    assert_eq!(s["causes"][0]["prio"], 9);
}

// ---------------------------------------------------------------------------------------------
// The instance is removed on every exit path of a traced run.

/// Is `instances/<name>` absent? When tracefs is not mounted (the run unmounted what it
/// mounted), mount it for the check: an unmount does not remove instances.
fn instance_gone(name: &str) -> bool {
    let root = Path::new(latlab_sys::tracefs::DEFAULT_ROOT);
    if root.join("instances").is_dir() {
        return !root.join("instances").join(name).exists();
    }
    let st = std::process::Command::new("mount")
        .args(["-t", "tracefs", "nodev"])
        .arg(root)
        .status()
        .unwrap();
    assert!(st.success(), "cannot mount tracefs to check");
    let gone = !root.join("instances").join(name).exists();
    let _ = std::process::Command::new("umount").arg(root).status();
    gone
}

/// A 30 s traced run on `cpus` (threshold 5 ms, 512 KiB per CPU) into `results`, stdout
/// discarded.
fn traced_run(results: &Path, cpus: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("latlab"));
    cmd.args(["run", "--duration", "30s", "--cpus", cpus, "--quiet"])
        .args([
            "--trace-threshold",
            "5ms",
            "--trace-buffer",
            "512KiB",
            "--results",
        ])
        .arg(results)
        .stdout(std::process::Stdio::null());
    cmd
}

/// Start a traced run (exit path under test decided by `how`), wait until its instance exists,
/// end it, and check that instance and ledger are gone.
fn traced_run_ends_clean(how: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let mut cmd = traced_run(tmp.path(), "0");
    cmd.stderr(std::process::Stdio::piped());
    if how == "panic" {
        cmd.env("LATLAB_INJECT_PANIC_MS", "1000");
    }
    let mut child = cmd.spawn().unwrap();
    let pid = child.id();
    let name = format!("latlab-{pid}");
    let inst = Path::new(latlab_sys::tracefs::DEFAULT_ROOT)
        .join("instances")
        .join(&name);
    // Synchronise on the observable state: the instance exists while the run measures.
    let t0 = std::time::Instant::now();
    while !inst.exists() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before creating its instance"
        );
        assert!(t0.elapsed().as_secs() < 20, "no instance {name} after 20 s");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    match how {
        // SAFETY: signalling our own child.
        "SIGINT" => unsafe { libc::kill(pid as i32, libc::SIGINT) },
        // SAFETY: as above.
        "SIGTERM" => unsafe { libc::kill(pid as i32, libc::SIGTERM) },
        _ => 0,
    };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if how == "panic" {
        assert!(
            !out.status.success(),
            "the injected panic did not end the run: {err}"
        );
        assert!(err.contains("injected collector panic"), "{err}");
    } else {
        assert!(out.status.success(), "{how}: {:?} {err}", out.status);
    }
    assert!(instance_gone(&name), "{how}: instance {name} left behind");
    // The standbys (--trace-instances, default 3).
    for suffix in ["b", "c"] {
        let standby = format!("{name}-{suffix}");
        assert!(
            instance_gone(&standby),
            "{how}: instance {standby} left behind"
        );
    }
    let ledger = latlab_sys::ledger::runtime_dir().join(format!("{pid}.json"));
    assert!(!ledger.exists(), "{how}: ledger {} left", ledger.display());
}

#[test]
fn instance_removed_after_sigint() {
    let Some(_g) = latlab_sys::privileged::guard("instance_removed_after_sigint") else {
        return;
    };
    traced_run_ends_clean("SIGINT");
}

#[test]
fn instance_removed_after_sigterm() {
    let Some(_g) = latlab_sys::privileged::guard("instance_removed_after_sigterm") else {
        return;
    };
    traced_run_ends_clean("SIGTERM");
}

#[test]
fn instance_removed_after_collector_panic() {
    let Some(_g) = latlab_sys::privileged::guard("instance_removed_after_collector_panic") else {
        return;
    };
    traced_run_ends_clean("panic");
}

/// Pin the calling (CFS) thread to `cpu` and name it.
fn pin_cfs(cpu: usize, name: &str) {
    // SAFETY: plain syscalls on the calling thread with valid arguments.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set),
            0
        );
        let c = std::ffi::CString::new(name).unwrap();
        libc::prctl(libc::PR_SET_NAME, c.as_ptr());
    }
}

/// What the loopback flood test recorded: the trace text of the measured CPU (also saved at
/// `keep`, for a failure to point at), the sleeper's thread id, the datagrams sent.
struct Flood {
    text: String,
    keep: PathBuf,
    stid: i64,
    sent: u64,
}

/// Record `cpu` with a tracefs instance while a UDP sender pinned there floods a receiver on
/// CPU 0 and a FIFO-80 sleeper on `cpu` wakes up every 1 ms, 1500 times; then remove the
/// instance (and unmount tracefs if it was mounted for this).
fn flood_and_trace(cpu: usize) -> Flood {
    use latlab_sys::ledger::{undo, Entry, Ledger};
    use latlab_sys::tracefs::{self, Recorder, RecorderConfig};
    use std::net::UdpSocket;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    let tmp = tempfile::tempdir().unwrap();
    let mut ledger = Ledger::open_in(&tmp.path().join("run")).unwrap();
    let tfs = tracefs::ensure_mounted(Path::new(tracefs::DEFAULT_ROOT), &mut ledger).unwrap();
    let rec = Recorder::create(
        &tfs.root,
        &RecorderConfig {
            name: format!("latlab-{}", std::process::id()),
            buffer_kb: 4096,
        },
        &mut ledger,
    )
    .unwrap();
    rec.clear().unwrap();
    rec.start().unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(std::time::Duration::from_millis(50)))
        .unwrap();
    let addr = rx.local_addr().unwrap();
    let (s1, s2) = (stop.clone(), stop.clone());
    let receiver = std::thread::spawn(move || {
        pin_cfs(0, "lat-udp-rx");
        let mut buf = [0u8; 2048];
        while !s1.load(Ordering::Relaxed) {
            let _ = rx.recv(&mut buf);
        }
    });
    let n2 = sent.clone();
    let sender = std::thread::spawn(move || {
        pin_cfs(cpu, "lat-udp-tx");
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let msg = [0x5au8; 1200];
        while !s2.load(Ordering::Relaxed) {
            if tx.send_to(&msg, addr).is_ok() {
                n2.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    const PERIOD: u64 = 1_000_000;
    let sleeper = std::thread::spawn(move || {
        let tid = rt::setup(cpu, 80, "lat-sleeper");
        let mut e = rt::now() + 20 * PERIOD;
        for _ in 0..1500 {
            rt::sleep_until(e);
            e += PERIOD;
        }
        tid
    });
    let stid = sleeper.join().unwrap();
    rec.stop().unwrap();
    stop.store(true, Ordering::Relaxed);
    sender.join().unwrap();
    receiver.join().unwrap();
    let text = String::from_utf8_lossy(&rec.read_cpu(cpu as u32).unwrap()).into_owned();
    let keep = std::env::temp_dir().join(format!("latlab-net-rx-{}.txt", std::process::id()));
    std::fs::write(&keep, &text).unwrap();
    let dir = rec.dir().to_path_buf();
    rec.remove(&mut ledger).unwrap();
    assert!(!dir.exists());
    if let Some(id) = tfs.mounted {
        undo(&Entry::TracefsMount {
            path: tfs.root.clone(),
        });
        ledger.forget(id).unwrap();
    }
    Flood {
        text,
        keep,
        stid,
        sent: sent.load(Ordering::Relaxed),
    }
}

/// Ground truth from the raw events: NET_RX intervals on `cpu`, minus hard IRQs inside (the
/// pieces of NET_RX time, IRQs cut out).
fn net_rx_pieces(text: &str, cpu: usize) -> Vec<(u64, u64)> {
    use latlab_core::trace::{EventKind, Parser, Record};

    let mut net: Vec<(u64, u64)> = Vec::new(); // pieces of NET_RX time, IRQs cut out
    let (mut in_net, mut piece, mut depth) = (false, None::<u64>, 0u32);
    for r in Parser::new(text) {
        assert!(!matches!(r, Record::Skipped { .. }), "{r:?}");
        let Record::Event(ev) = r else {
            (in_net, piece, depth) = (false, None, 0); // lost events: history is incomplete
            continue;
        };
        if ev.cpu != cpu as u32 {
            continue;
        }
        match &ev.kind {
            EventKind::SoftirqEntry { name, .. } if name == "NET_RX" => {
                (in_net, piece, depth) = (true, Some(ev.ts), 0);
            }
            EventKind::SoftirqExit { name, .. } if name == "NET_RX" => {
                if let (true, 0, Some(a)) = (in_net, depth, piece) {
                    net.push((a, ev.ts));
                }
                (in_net, piece, depth) = (false, None, 0);
            }
            EventKind::IrqEntry { .. } | EventKind::VectorEntry { .. } if in_net => {
                if let Some(a) = piece.take() {
                    net.push((a, ev.ts));
                }
                depth += 1;
            }
            EventKind::IrqExit { .. } | EventKind::VectorExit { .. } if in_net && depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    piece = Some(ev.ts);
                }
            }
            EventKind::SchedSwitch { .. } => (in_net, piece, depth) = (false, None, 0),
            _ => {}
        }
    }
    net
}

/// Loopback UDP flood pinned to the measured CPU: the NET_RX softirq runs there (raised by the
/// loopback transmit, run on the sender's `local_bh_enable` or in ksoftirqd), between a FIFO-80
/// sleeper's intended wake-ups and its switch-ins. What is reliable on this VM, and asserted:
/// some wake-up windows contain NET_RX work, the attribution names it `softirq NET_RX`, and for
/// every wake-up the time it charges to NET_RX equals, within 1 µs, the NET_RX time computed
/// directly from the saved softirq_entry/exit events (net of hard IRQs nested inside), clipped
/// to the window from the intended time to the switch-in. How large a spike the flood causes
/// varies run to run, so no latency figure is asserted.
#[test]
fn ground_truth_loopback_net_rx_softirq_matches_the_trace_events() {
    use latlab_core::record::CauseKind;
    use latlab_core::trace::{analyze_text, AnalyzeOptions, SampleMode};

    let Some(_g) = latlab_sys::privileged::guard("ground_truth_loopback_net_rx_softirq") else {
        return;
    };
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpu = ncpu - 1;
    let Flood {
        text,
        keep,
        stid,
        sent,
    } = flood_and_trace(cpu);
    assert!(sent > 1000, "the flood did not run");

    let net = net_rx_pieces(&text, cpu);
    let a = analyze_text(
        &text,
        &AnalyzeOptions {
            threshold_ns: 0,
            mode: Some(SampleMode::Wakeups),
            gaps: Vec::new(),
        },
    )
    .unwrap();
    let samples: Vec<_> = a.spikes.iter().filter(|s| s.pid == stid).collect();
    assert!(
        samples.len() > 20,
        "too few sleeper wake-ups in the trace ({}): {}",
        samples.len(),
        keep.display()
    );
    let mut with_net = 0;
    for s in &samples {
        let Some(sw) = s.switch_in_ns else { continue };
        let truth: u64 = net
            .iter()
            .map(|&(a, b)| b.min(sw).saturating_sub(a.max(s.intended_ns)))
            .sum();
        let got: u64 = s
            .causes
            .iter()
            .filter(|c| {
                c.kind == CauseKind::Softirq
                    && (c.name == "NET_RX" || c.name.starts_with("NET_RX (in "))
            })
            .map(|c| c.ns)
            .sum();
        if got > 0 {
            with_net += 1;
        }
        assert!(
            got.abs_diff(truth) <= 1_000,
            "wake-up at {}: NET_RX attributed {got} ns, trace events say {truth} ns; trace {}\n{}",
            s.intended_ns,
            keep.display(),
            latlab_report::timeline::lines(&s.to_spike()).join("\n")
        );
    }
    eprintln!(
        "loopback flood: {} datagrams, {} sleeper wake-ups traced, {with_net} with NET_RX; worst: {:?}",
        sent,
        samples.len(),
        samples
            .iter()
            .max_by_key(|s| s.latency_ns)
            .map(|s| latlab_report::timeline::lines(&s.to_spike()).join("\n"))
    );
    assert!(
        with_net > 0,
        "no wake-up window held NET_RX work: {}",
        keep.display()
    );
    let _ = std::fs::remove_file(&keep);
}

/// Issue 14, end to end: a real traced run (`latlab run --trace-threshold`) while a task named
/// with newlines (`lat\nbur\nst`, as prctl(PR_SET_NAME) allows any user) runs on the measured
/// CPU, at FIFO 98 above the measuring thread (95), in 2 ms bursts: every spike it causes is
/// traced with its switch lines cut over several text lines. Its trace was rejected whole
/// ("trace not analyzable"); now each spike's analysis exists and names that task.
#[test]
fn traced_run_with_a_newline_named_task_on_the_measured_cpu_is_analyzed() {
    let Some(_g) = latlab_sys::privileged::guard("traced_run_with_a_newline_named_task") else {
        return;
    };
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpu = ncpu - 1;
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("latlab"))
        .args(["run", "--duration", "4s", "--quiet", "--cpus"])
        .arg(cpu.to_string())
        .args([
            "--trace-threshold",
            "500us",
            "--trace-buffer",
            "512KiB",
            "--results",
        ])
        .arg(&results)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let inst = Path::new(latlab_sys::tracefs::DEFAULT_ROOT)
        .join("instances")
        .join(format!("latlab-{}", child.id()));
    // The run measures once its instance exists.
    let t0 = std::time::Instant::now();
    while !inst.exists() {
        assert!(child.try_wait().unwrap().is_none(), "the run ended early");
        assert!(t0.elapsed().as_secs() < 20, "no instance after 20 s");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    const NAME: &str = "lat\nbur\nst";
    let helper = std::thread::spawn(move || {
        let tid = rt::setup(cpu, 98, NAME);
        let mut next = rt::now() + 200_000_000;
        for _ in 0..6 {
            rt::sleep_until(next);
            let start = rt::now();
            while rt::now() < start + 2_000_000 {
                std::hint::spin_loop();
            }
            next += 400_000_000;
        }
        tid
    });
    let tid = helper.join().unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?} {err}", out.status);
    let run = std::fs::read_dir(&results)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.join("run.json").exists())
        .unwrap_or_else(|| panic!("no run directory in {}", results.display()));
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("run.json")).unwrap()).unwrap();
    assert!(
        v["trace"]["traced"].as_u64().unwrap() >= 1,
        "{:#}",
        v["trace"]
    );
    let traced = support::traced_spikes(&v);
    assert!(!traced.is_empty(), "{:#}", v["spikes"]);
    let mut named = 0;
    for s in &traced {
        let tf = run.join(s["trace_file"].as_str().unwrap());
        let analysis = std::fs::read_to_string(tf.with_file_name("analysis.txt")).unwrap();
        assert!(!analysis.contains("not analyzable"), "{analysis}");
        let causes = s["causes"].as_array().unwrap();
        named += causes.iter().any(|c| c["pid"] == tid && c["name"] == NAME) as usize;
    }
    // The bursts delayed the measuring thread: the helper is named in a spike's causes, with
    // its newlines (the trace holds them raw: the parser kept its lines).
    let with_name: Vec<String> = traced
        .iter()
        .map(|s| run.join(s["trace_file"].as_str().unwrap()))
        .filter(|tf| {
            let t = print_trace(tf);
            // In any of its events: a switch to it from the idle task is not traced, so a
            // burst on an idle CPU shows the name in its wake-up and switch-out only.
            t.contains("comm=lat\nbur\nst ")
        })
        .map(|tf| tf.display().to_string())
        .collect();
    if with_name.is_empty() {
        let keep = std::env::temp_dir().join("latlab-newline-task-run");
        let _ = std::fs::remove_dir_all(&keep);
        let _ = std::fs::rename(&run, &keep);
        panic!(
            "the task's name is in no trace (kept in {})",
            keep.display()
        );
    }
    assert!(
        named >= 1,
        "no traced spike names the task: {:#}",
        v["spikes"]
    );
    assert_eq!(v["trace"]["unmatched"], 0, "{:#}", v["trace"]);

    // Issue 17 part 4: every traced spike has its lanes, the helper's bursts among them (a
    // `task` segment with its pid), and the HTML report draws one lane SVG per spike, the
    // name escaped.
    let mut in_lanes = 0;
    let mut with_segments = 0;
    for s in &traced {
        let segs = s["lanes"]["segments"]
            .as_array()
            .unwrap_or_else(|| panic!("a traced spike without lanes: {s:#}"));
        // A spike the trace explains has its stretches (one it does not cover, none).
        let explained = !s["causes"].as_array().unwrap().is_empty();
        assert_eq!(!segs.is_empty(), explained, "{s:#}");
        with_segments += explained as usize;
        in_lanes += segs
            .iter()
            .any(|g| g["pid"] == tid && g["name"] == NAME && g["lane"] == "task")
            as usize;
    }
    assert!(in_lanes >= 1, "the helper is in no lane: {:#}", v["spikes"]);
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("latlab"))
        .args(["report", "--format", "html"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(out.status.success());
    let html = String::from_utf8(out.stdout).unwrap();
    let spikes = v["spikes"].as_array().unwrap().len();
    let drawn = html.matches("class=\"plot lanes\"").count();
    assert!(spikes <= 100, "{spikes} spikes: more than the report draws");
    assert_eq!(drawn, with_segments, "{spikes} spikes");
    assert_eq!(
        html.matches("no lane data in this record").count(),
        spikes - traced.len()
    );
    assert_eq!(
        html.matches("the trace covers none of this spike").count(),
        traced.len() - with_segments
    );
    assert!(html.contains("lat\\u{a}bur\\u{a}st"), "the name, escaped");
    assert!(!html.contains(NAME), "the name with raw newlines");
}

/// `--trace-text` keeps each spike's text beside its trace.dat: the text `analyze
/// --print-trace` renders from the file, but for the `%p` pointers (each process hashes them
/// with its own key, as the kernel does).
#[test]
fn trace_text_writes_the_text_that_print_trace_renders() {
    let Some(_g) = latlab_sys::privileged::guard("trace_text_writes_the_text") else {
        return;
    };
    let (_t, run, rec) = spiky_run(&["--cpus", "1", "--duration", "1s", "--trace-text"], 1);
    assert_eq!(rec["spikes"][0]["trace_file"], "spikes/001/trace.dat");
    let written = std::fs::read_to_string(run.join("spikes/001/trace.txt")).expect("trace.txt");
    let printed = print_trace(&run.join("spikes/001/trace.dat"));
    // `=` then 16 hex digits: a hashed pointer.
    let blank = |t: &str| -> String {
        t.split_inclusive([' ', '\n'])
            .map(|w| match w.split_once('=') {
                Some((k, v))
                    if v.trim_end().len() == 16
                        && v.trim_end().bytes().all(|b| b.is_ascii_hexdigit()) =>
                {
                    format!("{k}=P{}", &v[16..])
                }
                _ => w.to_string(),
            })
            .collect()
    };
    assert!(written.lines().count() > 10, "{written}");
    assert_eq!(blank(&printed), blank(&written));
}

/// A run in which every sample above 1 µs is a spike, the first `traced` of them traced:
/// its results directory (kept alive), run directory and run.json.
fn spiky_run(
    args: &[&str],
    traced: u32,
) -> (tempfile::TempDir, std::path::PathBuf, serde_json::Value) {
    let t = tempfile::tempdir().unwrap();
    let st = support::command()
        .args(["run", "--quiet", "--trace-threshold", "1us"])
        .args(["--trace-max-spikes", &traced.to_string()])
        .args(args)
        .arg("--results")
        .arg(t.path())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let run = support::only_run_dir(t.path());
    let rec = support::read_json(&run.join("run.json"));
    (t, run, rec)
}

/// In `trace-cmd report -t`'s text, whether the task on `cpu` (`[001]`) at `at_ns` was the
/// idle task (pid 0), as the analyzer reads a CPU's lines: the last switch's next task, unless
/// a later line's TASK-PID column, up to the first line after `at_ns`, shows another task (its
/// switch is missing from the trace: fc3 saw qemu's pid on CPU 1 after its switch to idle, up
/// to E and past it). None: no line of `cpu` at or before `at_ns`. A line it cannot read is
/// left out.
fn idle_at_in_report(report: &str, cpu: &str, at_ns: u64) -> Option<bool> {
    let mut current: Option<i64> = None;
    for (t, pid, next) in report.lines().filter_map(|l| cpu_line(l, cpu)) {
        if t > at_ns {
            // Another task's line: it ran since the last line, before E too.
            if current.is_some() {
                current = Some(pid);
            }
            break;
        }
        current = Some(next.unwrap_or(pid));
    }
    current.map(|p| p == 0)
}

/// A line of `cpu` in `trace-cmd report -t`'s text: its time (ns), its TASK-PID column's pid,
/// and for a `sched_switch` the next task's pid (trace-cmd's `comm:pid [prio]`, whose comm may
/// hold blanks and colons, or the kernel's `next_pid=N`). None: another CPU's line, or one
/// this cannot read.
fn cpu_line(l: &str, cpu: &str) -> Option<(u64, i64, Option<i64>)> {
    let (head, rest) = l.split_once(&format!("{cpu} "))?;
    let pid = head.trim().rsplit('-').next()?.parse().ok()?;
    let (ts, ev) = rest.trim_start().split_once(": ")?;
    let (s, ns) = ts.trim().split_once('.')?;
    let t = s.parse::<u64>().ok()? * 1_000_000_000 + ns.parse::<u64>().ok()?;
    let next = match ev.strip_prefix("sched_switch:") {
        None => None,
        Some(sw) => {
            let r = sw.split_once("==> ")?.1.trim();
            let digits = match r.split_once("next_pid=") {
                Some((_, p)) => p.split_whitespace().next()?,
                None => r
                    .rsplit_once(" [")
                    .map_or(r, |(a, _)| a)
                    .rsplit(':')
                    .next()?,
            };
            Some(digits.parse().ok()?)
        }
    };
    Some((t, pid, next))
}

/// The oracle on fc3's lines: the switch to idle, then qemu's pid in the TASK-PID column
/// up to E and past it (its switch back missing): not idle. The same lines with the switch
/// back, or without qemu's lines: as the switches say.
#[test]
fn the_idle_oracle_reads_the_pid_column_past_a_missing_switch() {
    let lines = [
        " qemu-system-x86-7650  [001] 37963.209713868: sched_switch:         qemu-system-x86:7650 [120] S ==> swapper/1:0 [120]",
        " qemu-system-x86-7650  [001] 37963.212121197: softirq_exit:         vec=9 [action=RCU]",
        " qemu-system-x86-7650  [001] 37963.212431129: sched_waking:         comm=latlab-cpu1 pid=9344 prio=4 target_cpu=001",
        "     latlab-cpu1-9344  [000] 37963.212431130: sched_waking:         comm=x pid=1 prio=120 target_cpu=000",
    ];
    let e = 37_963_212_405_772;
    let report = lines.join("\n");
    assert_eq!(idle_at_in_report(&report, "[001]", e), Some(false));
    // qemu's only line after E: it ran since the switch, before E too.
    let after = [lines[0], lines[2]].join("\n");
    assert_eq!(idle_at_in_report(&after, "[001]", e), Some(false));
    // Idle, and an idle line after E.
    let idle = [
        lines[0],
        "          <idle>-0     [001] 37963.212431129: sched_waking:         comm=latlab-cpu1 pid=9344 prio=4 target_cpu=001",
    ]
    .join("\n");
    assert_eq!(idle_at_in_report(&idle, "[001]", e), Some(true));
    assert_eq!(
        idle_at_in_report(&report, "[001]", 37_963_209_000_000),
        None
    );
    assert_eq!(idle_at_in_report(&report, "[002]", e), None);
    // A comm with blanks and colons, the kernel's own layout, and a line it cannot read (left
    // out, not the end of the reading).
    let odd = [
        "       a b:c-77     [001] 37963.200000000: sched_switch:         a b:c:77 [120] S ==> swapper/1:0 [120]",
        "          <idle>-0     [001] 37963.201000000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=we b:x next_pid=9 next_prio=120",
        "       we b:x-9     [001] 37963.202000000: sched_switch:         garbled ==> ???",
    ]
    .join("\n");
    assert_eq!(
        idle_at_in_report(&odd, "[001]", 37_963_200_500_000),
        Some(true)
    );
    assert_eq!(idle_at_in_report(&odd, "[001]", e), Some(false));
}

/// `trace-cmd report` of a trace.dat (the oracle; it only reads the file), its status checked.
fn trace_cmd_report(dat: &std::path::Path, flags: &[&str]) -> String {
    let out = std::process::Command::new("trace-cmd")
        .arg("report")
        .args(flags)
        .arg("-i")
        .arg(dat)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A trace file's events as the kernel's text (`latlab analyze --print-trace`).
fn print_trace(f: &std::path::Path) -> String {
    let out = support::command()
        .args(["analyze", "--print-trace"])
        .arg(f)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        f.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 text")
}

/// A traced spike is saved as trace-cmd's file, and by default as that alone (issue 31: the
/// text was 2–3 times its size): trace-cmd reads it back (the oracle) and shows the spike's
/// own marker; `latlab analyze --print-trace` renders it as the kernel's text on demand, and
/// `latlab analyze` finds in the file and in that text the same spike, with the same causes.
#[test]
fn a_spike_is_saved_as_trace_dat_that_trace_cmd_and_analyze_read() {
    let Some(_g) = latlab_sys::privileged::guard("a_spike_is_saved_as_trace_dat") else {
        return;
    };
    if which("trace-cmd").is_none() {
        return support::cannot_run(
            "a_spike_is_saved_as_trace_dat",
            "trace-cmd is not installed (bash scripts/deps.sh installs it)",
        );
    }
    // Every sample above 1 µs is a spike: the first two are traced.
    let (_t, run, rec) = spiky_run(&["--cpus", "1", "--duration", "2s"], 2);
    let at = rec["spikes"][0]["at_ns"].as_u64().expect("a traced spike");
    let dat = run.join("spikes/001/trace.dat");
    let bytes = std::fs::read(&dat).expect("spikes/001/trace.dat");
    assert!(bytes.starts_with(latlab_core::trace::tracedat::MAGIC));
    assert_eq!(rec["spikes"][0]["trace_file"], "spikes/001/trace.dat");
    let names: Vec<String> = std::fs::read_dir(run.join("spikes/001"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n == "trace.txt"),
        "no trace.txt without --trace-text: {names:?}"
    );
    // The text, rendered on demand: the kernel's layout, the marker among its events.
    let text = print_trace(&dat);
    assert!(text.starts_with("# tracer: nop"), "{}", &text[..100]);
    assert!(text.contains(&format!("LATLAB_STOP cpu=1 intended={at} ")));
    std::fs::write(run.join("spikes/001/printed.txt"), &text).unwrap();

    let report = trace_cmd_report(&dat, &[]);
    let marker = format!("LATLAB_STOP cpu=1 intended={at} ");
    assert!(
        report.contains(&marker),
        "trace-cmd does not show {marker:?}"
    );
    assert!(report.contains("sched_switch:"), "no scheduler events");
    // Exit from idle, against trace-cmd: the spike's `timer_due` says the CPU was idle at E
    // exactly when trace-cmd's lines of CPU 1 show the idle task there (its last switch at or
    // before E went to pid 0, and no later line's TASK-PID column shows another task ran).
    let full = trace_cmd_report(&dat, &["-t"]);
    let cpu1 = || {
        full.lines()
            .filter(|l| l.contains("[001] ") || l.contains("LOST"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let idle_at_e = idle_at_in_report(&full, "[001]", at).unwrap_or_else(|| {
        panic!(
            "no line of CPU 1 before the intended wake-up {at}; trace-cmd's CPU 1:\n{}",
            cpu1()
        )
    });
    let due = &rec["spikes"][0]["timeline_events"][0];
    assert_eq!(due["what"], "timer_due", "{due}");
    assert_eq!(
        due["from_idle"] == true,
        idle_at_e,
        "{due}, E = {at}; trace-cmd's CPU 1:\n{}\nthe spike: {}",
        cpu1(),
        rec["spikes"][0]
    );

    let spikes = |f: &str| {
        let out = support::command()
            .args(["analyze", "--format", "json"])
            .arg(run.join("spikes/001").join(f))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{f}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["spikes"].clone()
    };
    let from_dat = spikes("trace.dat");
    assert!(
        from_dat.as_array().is_some_and(|s| !s.is_empty()),
        "{from_dat}"
    );
    assert_eq!(from_dat, spikes("printed.txt"));
    // `analyze` gives the spike the lanes the recorder recorded (the same analyzer).
    let same = from_dat
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["at_ns"] == at)
        .unwrap_or_else(|| panic!("spike at {at} not in {from_dat:#}"));
    assert!(rec["spikes"][0]["lanes"]["segments"].is_array(), "{rec:#}");
    // The trace alone never says `hypervisor`: `analyze` leaves a silent gap `unknown`. The
    // recorder judged its silent gaps with the steal time it read around the spike (run.json
    // `spikes[].steal`); judged with that same evidence, `analyze`'s lanes are the recorder's.
    let segs = same["lanes"]["segments"].as_array().unwrap();
    assert!(
        segs.iter().all(|g| g["cause"] != "hypervisor"),
        "a verdict of hypervisor from the trace alone: {same:#}"
    );
    let mut judged = same.clone();
    judged["steal"] = rec["spikes"][0]["steal"].clone();
    let mut judged: latlab_core::record::SpikeRecord =
        serde_json::from_value(judged).expect("analyze's spike reads as a spike record");
    judged.judge_silent();
    assert_eq!(
        serde_json::to_value(&judged.lanes).unwrap(),
        rec["spikes"][0]["lanes"],
        "steal evidence: {}",
        rec["spikes"][0]["steal"]
    );
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.is_file())
}

/// Issue 17 part 4: `latlab analyze` gives each spike its lanes (the kernel fixture: the timer
/// IRQ from its entry to its exit, the hog to τ's switch-in, τ from there to its clock read),
/// and the HTML report of a run holding those spikes draws one lane SVG per spike, names
/// escaped (a hog named `<script>h\nx`), and says "no lane data" for a spike of an older record.
#[test]
fn html_report_draws_each_traced_spike_as_lanes() {
    const ODD: &str = "<script>h\nx";
    let (code, v, err) = analyze_json(&kernel_trace("odd").replace("hog", ODD));
    assert_eq!(code, 0, "{err}");
    let seg = |s: &serde_json::Value| {
        (
            s["lane"].as_str().unwrap().to_string(),
            s["name"].as_str().unwrap().to_string(),
            s["start_ns"].as_i64().unwrap(),
            s["end_ns"].as_i64().unwrap(),
        )
    };
    let lanes: Vec<_> = v["spikes"][0]["lanes"]["segments"]
        .as_array()
        .unwrap_or_else(|| panic!("no lanes: {v:#}"))
        .iter()
        .map(seg)
        .collect();
    let own = |l: &str, n: &str, a, b| (l.to_string(), n.to_string(), a, b);
    assert_eq!(
        lanes,
        [
            own("irq", "local_timer", 0, 2_000),
            own("task", ODD, 2_000, 800_000),
            own("measuring", "switch-to-user (tau)", 800_000, 840_000),
        ]
    );
    let (code, worst, err) =
        analyze_json(&std::fs::read_to_string(fixture("trace-worst-window-cpu1.txt")).unwrap());
    assert_eq!(code, 0, "{err}");

    // A run holding these spikes, and one from an older record (no lanes).
    let t = tempfile::tempdir().unwrap();
    let st = support::command()
        .args(["run", "--backend", "sim", "--duration", "1s", "--quiet"])
        .arg("--results")
        .arg(t.path())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let run = support::only_run_dir(t.path());
    let mut rec = support::read_json(&run.join("run.json"));
    let mut old = v["spikes"][0].clone();
    old.as_object_mut().unwrap().remove("lanes");
    old.as_object_mut().unwrap().remove("timeline_events");
    let worst = worst["spikes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["latency_ns"] == 13_351_484)
        .expect("the 13 ms spike")
        .clone();
    rec["spikes"] = serde_json::json!([v["spikes"][0], worst, old]);
    std::fs::write(run.join("run.json"), serde_json::to_vec(&rec).unwrap()).unwrap();
    let out = support::command()
        .args(["report", "--format", "html"])
        .arg(&run)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = String::from_utf8(out.stdout).unwrap();
    assert_eq!(html.matches("class=\"plot lanes\"").count(), 2, "{html}");
    assert_eq!(html.matches("no lane data in this record").count(), 1);
    assert!(!html.contains("<script>"), "a task name became a tag");
    assert!(!html.contains("h\nx"), "a raw newline from a task name");
    // The hog's segment, labelled with its escaped name and duration; rust-lld's 13 ms, cut
    // by timer ticks and softirqs into seven stretches (1.4 µs to 3986 µs: the wider ones
    // labelled, all with their tooltip).
    assert!(
        html.contains("&lt;script&gt;h\\u{a}x 798 µs</text>"),
        "{html}"
    );
    // In the spikes' own pictures (a zoomed picture of a last stretch repeats what it shows).
    let mut main = html.clone();
    while let Some(i) = main.find("class=\"plot lanes zoom\"") {
        let start = main[..i].rfind("<svg").unwrap();
        let end = i + main[i..].find("</svg>").unwrap() + "</svg>".len();
        main.replace_range(start..end, "");
    }
    assert_eq!(
        main.matches("tasks: preempt_off rust-lld (pid 15780)")
            .count(),
        7
    );
    assert!(html.contains(">rust-lld 3986 µs</text>"), "{html}");
}

/// The recorder's copier (`latlab-trace`): with every CPU measured it pins itself to the last
/// one, whose quiet windows it reads in; with a CPU left unmeasured it stays there (the
/// housekeeping CPUs), never on the measured one.
#[test]
fn the_copier_pins_itself_to_the_cpu_whose_quiet_windows_it_uses() {
    let Some(_g) = latlab_sys::privileged::guard(
        "the_copier_pins_itself_to_the_cpu_whose_quiet_windows_it_uses",
    ) else {
        return;
    };
    let online = latlab_sys::rt::online_cpus().unwrap();
    if online.len() < 2 {
        eprintln!("skipped: needs two online CPUs");
        return;
    }
    let last = *online.last().unwrap();
    let allowed = |pid: u32| -> Option<String> {
        for t in std::fs::read_dir(format!("/proc/{pid}/task"))
            .ok()?
            .flatten()
        {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            if comm.trim() == "latlab-trace" {
                let st = std::fs::read_to_string(t.path().join("status")).ok()?;
                return st
                    .lines()
                    .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                    .map(|v| v.trim().to_string());
            }
        }
        None
    };
    let rest = if last == 1 {
        "1".to_string()
    } else {
        format!("1-{last}")
    };
    for (cpus, want) in [("all", last.to_string()), ("0", rest)] {
        let tmp = tempfile::tempdir().unwrap();
        let mut child = traced_run(tmp.path(), cpus)
            .arg("--no-db")
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        // The copier pins itself at its first look after the measuring threads started.
        let t0 = std::time::Instant::now();
        let seen = loop {
            let a = allowed(pid);
            if a.as_deref() == Some(want.as_str()) || t0.elapsed().as_secs() >= 20 {
                break a;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        assert!(child.wait().unwrap().success());
        assert_eq!(seen.as_deref(), Some(want.as_str()), "--cpus {cpus}");
    }
}

/// CPU `cpu`'s steal time now, ns (`/proc/stat`, ticks of 1/USER_HZ).
fn steal_of(cpu: u32) -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let ticks = latlab_core::inventory::stat_steal_per_cpu(&stat)
        .into_iter()
        .find(|&(c, _)| c == cpu)
        .map(|(_, t)| t)
        .expect("no steal column for the CPU in /proc/stat");
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    ticks * (1_000_000_000 / hz)
}

/// A traced run's spikes carry their CPU's steal time around them (`spikes[].steal`, issue 31
/// §2: the evidence for a "hypervisor" verdict): the window holds the spike, and the steal is
/// no more than what `/proc/stat` counted on that CPU over the whole run, read before and
/// after it (the CPU's own counter, not another's or the sum); its silent gaps are the
/// host's exactly when that steal holds them; the text report prints it after every silent
/// stretch.
#[test]
fn traced_spikes_carry_the_steal_of_their_cpu_around_them() {
    let Some(_g) = support::privileged::guard("trace_steal_evidence") else {
        return;
    };
    let cpu = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32 - 1;
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("r");
    let before = steal_of(cpu);
    latlab()
        .args(["run", "--duration", "3s", "--cpus", &cpu.to_string(), "-q"])
        // The smallest threshold latlab takes: every wake-up is above it.
        .args(["--trace-threshold", "1us", "--trace-max-spikes", "4"])
        .arg("--results")
        .arg(&results)
        .assert()
        .success();
    let after = steal_of(cpu);
    let run = support::only_run_dir(&results);
    let rec = support::read_json(&run.join("run.json"));
    let spikes: Vec<_> = rec["spikes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["trace_file"].is_string())
        .collect();
    assert!(!spikes.is_empty(), "no traced spike");
    for s in &spikes {
        let n = |v: &serde_json::Value, k: &str| {
            v[k].as_u64().unwrap_or_else(|| panic!("no {k} in {v}"))
        };
        let e = &s["steal"];
        let (at, lat) = (n(s, "at_ns"), n(s, "latency_ns"));
        let (from, window, stolen) = (n(e, "from_ns"), n(e, "window_ns"), n(e, "steal_ns"));
        assert_eq!(n(s, "cpu"), cpu as u64);
        assert!(from <= at && from + window >= at + lat, "{s}");
        assert!(
            stolen <= after - before,
            "{stolen} ns of {} ns: {s}",
            after - before
        );
        // The verdict on its silent gaps follows that evidence: the host's only when the
        // steal holds them all, within /proc/stat's 10 ms tick.
        let silent: Vec<&serde_json::Value> = s["causes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["name"].as_str().unwrap().starts_with("silent gap"))
            .collect();
        let total: u64 = silent.iter().map(|c| n(c, "ns")).sum();
        let want = if stolen > 0 && stolen + 10_000_000 >= total {
            "hypervisor"
        } else {
            "unknown"
        };
        for c in silent {
            assert_eq!(c["kind"], want, "{s}");
        }
    }
    eprintln!(
        "steal on CPU {cpu}: {} ns over the run; the spikes': {:?}",
        after - before,
        spikes
            .iter()
            .map(|s| (
                s["steal"]["steal_ns"].as_u64(),
                s["steal"]["window_ns"].as_u64()
            ))
            .collect::<Vec<_>>()
    );
    let out = latlab().arg("report").arg(&run).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    // The spike lines (`  #001 CPU 1 …`): each silent stretch with its evidence.
    for l in text
        .lines()
        .filter(|l| l.trim_start().starts_with('#') && l.contains("silent gap"))
    {
        let evidence = format!(" on CPU {cpu} in the ");
        assert_eq!(
            l.matches("silent gap").count(),
            l.matches(&evidence).count(),
            "{l}"
        );
    }
}

/// A spike keeps the other measured CPU's events of its window (from 10 ms before its
/// intended wake-up to its clock read) in its trace.dat, and `spikes[].others` counts that
/// CPU's events inside the spike's silent stretches (`silent gap`, `switch-to-user`): the
/// oracle is trace-cmd reading the same file (issue 31 §2).
#[test]
fn a_spike_keeps_the_other_cpus_window_and_counts_their_events_in_its_silent_stretches() {
    let Some(_g) = latlab_sys::privileged::guard("a_spike_keeps_the_other_cpus_window") else {
        return;
    };
    if which("trace-cmd").is_none() {
        return support::cannot_run(
            "a_spike_keeps_the_other_cpus_window",
            "trace-cmd is not installed (bash scripts/deps.sh installs it)",
        );
    }
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("a_spike_keeps_the_other_cpus_window: one CPU here, no other CPU to keep");
        return;
    }
    // The recorder that never stops, and instances taking turns.
    for instances in ["1", "2"] {
        other_cpus_window_of_a_run(instances);
    }
}

fn other_cpus_window_of_a_run(instances: &str) {
    let args = [
        "--cpus",
        "0,1",
        "--duration",
        "2s",
        "--trace-instances",
        instances,
    ];
    let (_t, run, rec) = spiky_run(&args, 4);
    let traced = support::traced_spikes(&rec);
    assert!(!traced.is_empty(), "{:#}", rec["trace"]);
    let n = |v: &serde_json::Value| v.as_i64().unwrap_or_else(|| panic!("not a number: {v}"));
    // A spike's silent stretches, from its lanes: its silent gaps and its own switch-to-user.
    let spans_of = |s: &serde_json::Value| -> Vec<(i64, i64)> {
        let (cpu, at) = (n(&s["cpu"]), n(&s["at_ns"]));
        s["lanes"]["segments"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|g| {
                n(&g["cpu"]) == cpu
                    && (g["lane"] == "measuring"
                        || g["name"].as_str().unwrap().starts_with("silent gap"))
            })
            .map(|g| (at + n(&g["start_ns"]), at + n(&g["end_ns"])))
            .filter(|(a, b)| b > a)
            .collect()
    };
    // A spike has the other CPU's evidence when it has a silent stretch and its capture holds
    // that CPU's pages. Without: one read from another spike's capture (instances taking
    // turns: `covered`), or one whose capture began late (a re-armed instance holds only
    // what came after it was armed; seen: 2 events) and covers no stretch of the spike or
    // has nothing of the other CPU: its trace.dat then shows no event of it either.
    let with: Vec<_> = traced.iter().filter(|s| s["others"].is_object()).collect();
    assert!(
        with.iter().all(|s| !spans_of(s).is_empty()),
        "evidence without a silent stretch: {with:#?}"
    );
    assert!(
        !with.is_empty(),
        "no traced spike with others: {:#}",
        rec["trace"]
    );
    let mut without = 0;
    for s in traced
        .iter()
        .filter(|s| !s["others"].is_object() && !spans_of(s).is_empty())
    {
        let tag = format!("[{:03}]", 1 - n(&s["cpu"]));
        let report = trace_cmd_report(&run.join(s["trace_file"].as_str().unwrap()), &[]);
        assert!(
            !report.lines().any(|l| l.contains(&tag)),
            "the other CPU's events but no evidence: {s:#}"
        );
        without += 1;
    }
    eprintln!(
        "{instances} instance(s): {} of {} traced spikes with others, {without} with a silent stretch and no other CPU's events, {} covered",
        with.len(),
        traced.len(),
        rec["trace"]["covered"]
    );
    for s in with {
        let (cpu, at, lat) = (n(&s["cpu"]), n(&s["at_ns"]), n(&s["latency_ns"]));
        let other = 1 - cpu;
        let spans = spans_of(s);
        let o = &s["others"];
        let silent: i64 = spans.iter().map(|(a, b)| b - a).sum();
        assert_eq!(n(&o["silent_ns"]), silent, "{o}");
        assert_eq!(o["cpus"].as_array().unwrap().len(), 1, "{o}");
        assert_eq!(n(&o["cpus"][0]["cpu"]), other, "{o}");
        // trace-cmd's view of the same file: the other CPU's events, in the window.
        let dat = run.join(s["trace_file"].as_str().unwrap());
        let report = trace_cmd_report(&dat, &["-t"]);
        let tag = format!("[{other:03}]");
        let theirs: Vec<i64> = report
            .lines()
            .filter_map(|l| {
                let rest = &l[l.find(&tag)? + tag.len()..];
                let ts = rest.trim_start().split(':').next()?;
                let (sec, ns) = ts.split_once('.')?;
                Some(sec.parse::<i64>().ok()? * 1_000_000_000 + ns.parse::<i64>().ok()?)
            })
            .collect();
        assert!(
            theirs
                .iter()
                .all(|&ts| ts >= at - 10_000_000 && ts <= at + lat),
            "CPU {other}'s events outside the spike's window"
        );
        let inside = theirs
            .iter()
            .filter(|&&ts| spans.iter().any(|&(a, b)| ts >= a && ts < b))
            .count() as i64;
        assert_eq!(n(&o["cpus"][0]["events"]), inside, "{o}");
    }
}
