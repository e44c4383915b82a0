//! The trace feature end to end: `latlab analyze` on committed fixtures (no root), and the
//! privileged ground truth — a real recorder, a real FIFO sleeper and a real higher-priority
//! burst of known length — that the attribution must name, within 20 %.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../latlab-core/tests/fixtures/trace")
        .join(name)
}

fn latlab() -> Command {
    Command::cargo_bin("latlab").unwrap()
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
fn analyze_rejects_garbage_and_truncation_with_file_and_line() {
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
    // A real trace cut in the middle of its last event.
    let full = std::fs::read_to_string(fixture("trace-worst-window-cpu1.txt")).unwrap();
    let cut = &full[..full.rfind("sched_switch:").unwrap() + 30];
    let p = dir.path().join("cut.txt");
    std::fs::write(&p, cut).unwrap();
    let lines = cut.lines().count();
    latlab()
        .arg("analyze")
        .arg(&p)
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!("cut.txt:{lines}:")))
        .stderr(predicate::str::contains("sched_switch"));
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
