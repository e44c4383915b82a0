//! Text from records reaches terminals and files escaped: a label taken from an imported
//! file's name (ESC sequences, CR, newline, a bidi override, bytes that are not UTF-8) and a
//! policy edited into run.json come out as visible `\u{..}` escapes in `histogram.txt`,
//! `summary.txt` and `latlab report --format text|markdown|cyclictest`, never raw.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn latlab() -> Command {
    Command::cargo_bin("latlab").unwrap()
}

/// The file name's stem: ESC (clear screen, window title), CR, newline, U+202E (right-to-left
/// override), U+2066 (isolate) and the invalid byte 0xff.
const STEM: &[u8] = b"evil\x1b[2J\x1b]0;t\x07\r\n\xe2\x80\xae\xe2\x81\xa6\xffx";
/// How the label shows.
const SHOWN: &str = r"evil\u{1b}[2J\u{1b}]0;t\u{7}\u{d}\u{a}\u{202e}\u{2066}\u{fffd}x";

/// Nothing in `out` but printable text, newlines and (cyclictest columns) tabs.
fn assert_inert(what: &str, out: &[u8]) -> String {
    let s = String::from_utf8(out.to_vec()).unwrap();
    for c in s.chars() {
        assert!(
            c == '\n' || c == '\t' || !latlab_report::escape::needs_escape(c),
            "{what}: raw {c:?} in:\n{s}"
        );
    }
    s
}

fn import_evil(tmp: &Path) -> PathBuf {
    let mut name = STEM.to_vec();
    name.extend_from_slice(b".txt");
    let file = tmp.join(OsStr::from_bytes(&name));
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../latlab-core/tests/fixtures/import/cyclictest-h100.txt");
    std::fs::copy(fixture, &file).unwrap();
    let out = latlab()
        .arg("import")
        .arg(&file)
        .arg("--results")
        .arg(tmp.join("results"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

fn report(run: &Path, format: &str) -> String {
    let out = latlab()
        .arg("report")
        .arg(run)
        .args(["--format", format])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_inert(&format!("report --format {format}"), &out.stdout)
}

#[test]
fn an_imported_label_is_escaped_in_every_text_output() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = import_evil(tmp.path());
    let hist = assert_inert(
        "histogram.txt",
        &std::fs::read(dir.join("histogram.txt")).unwrap(),
    );
    let first = format!("# latlab {SHOWN} (cyclictest -h format)\n");
    assert!(hist.starts_with(&first), "{hist}");
    let summary = assert_inert(
        "summary.txt",
        &std::fs::read(dir.join("summary.txt")).unwrap(),
    );
    assert!(
        summary.starts_with(&format!("latlab report: {SHOWN}\n")),
        "{summary}"
    );
    assert!(report(&dir, "cyclictest").starts_with(&first));
    assert!(report(&dir, "text").starts_with(&format!("latlab report: {SHOWN}\n")));
    let md = report(&dir, "markdown");
    assert!(
        md.contains(r"evil\u{1b}\[2J\u{1b}\]0;t\u{7}\u{d}\u{a}\u{202e}"),
        "{md}"
    );
}

#[test]
fn a_policy_from_run_json_is_escaped_in_the_text_report() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = import_evil(tmp.path());
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    v["config"]["policy"] = "fifo\x1b[2J\r\n\u{202e}\u{fffd}".into();
    v["config"]["priority"] = 95.into();
    let f = tmp.path().join("edited.json");
    std::fs::write(&f, serde_json::to_vec(&v).unwrap()).unwrap();
    let text = report(&f, "text");
    assert!(
        text.contains(r"fifo\u{1b}[2J\u{d}\u{a}\u{202e}\u{fffd} 95"),
        "{text}"
    );
}

/// `history` shows each stored run's start time and id: both come from a pushed run.json,
/// so a hostile one could carry ESC sequences (`\x1b[1A\x1b[2K` erases the row above).
#[test]
fn history_text_escapes_what_a_pushed_record_carries() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = import_evil(tmp.path());
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    v["started_at"] = "2026-11-27T10:00:00Z\x1b[1A\x1b[2K".into();
    std::fs::write(dir.join("run.json"), serde_json::to_vec(&v).unwrap()).unwrap();
    let db = tmp.path().join("db.sqlite");
    let push = latlab()
        .args(["db", "push"])
        .arg(&dir)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert!(
        push.status.success(),
        "{}",
        String::from_utf8_lossy(&push.stderr)
    );
    let out = latlab()
        .args(["history", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = assert_inert("history", &out.stdout);
    assert!(text.contains(r"\u{1b}[1A\u{1b}[2K"), "{text}");
}

/// Errors quote what they refuse: serde's "unknown variant" names the value as found in the
/// file, and it reaches the terminal through the one escaping (`report` and `db push`).
#[test]
fn an_error_quoting_a_bad_value_is_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = import_evil(tmp.path());
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
    v["source"] = "\x1b[2Jevil".into();
    std::fs::write(dir.join("run.json"), serde_json::to_vec(&v).unwrap()).unwrap();
    let db = tmp.path().join("db.sqlite");
    let cmds: [Vec<std::ffi::OsString>; 2] = [
        vec!["report".into(), dir.clone().into()],
        vec![
            "db".into(),
            "push".into(),
            dir.clone().into(),
            "--db".into(),
            db.into(),
        ],
    ];
    for args in cmds {
        let out = latlab().args(&args).output().unwrap();
        assert!(!out.status.success(), "{args:?} accepted the bad source");
        let err = assert_inert("stderr", &out.stderr);
        assert!(err.contains(r"\u{1b}[2Jevil"), "{args:?}: {err}");
    }
}
