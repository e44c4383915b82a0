//! The HTML report and comparison opened in a real headless browser (Debian's chromium):
//! `scripts/check-html.sh` fails on console errors, a missing or empty SVG plot, or no
//! screenshot. Treated like a privileged test: it runs where chromium is installed, skips with
//! a message elsewhere, fails when `LATLAB_REQUIRE_PRIVILEGED=1` (CI installs chromium), and
//! takes the machine-wide lock so a browser never competes with RT test threads.
//!
//! The screenshots stay in `target/tmp/html_browser/` for a human to look at.

use std::path::{Path, PathBuf};
use std::process::Command;

use latlab_sys::privileged;

mod support;
use support::bin;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn browser_installed() -> bool {
    ["chromium", "chromium-browser"].iter().any(|b| {
        Command::new("sh")
            .arg("-c")
            .arg(format!("command -v {b}"))
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

fn latlab(args: &[&std::ffi::OsStr]) -> String {
    let out = Command::new(bin()).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "latlab {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn check_html(files: &[&Path]) -> (bool, String) {
    let out = Command::new("sh")
        .arg(repo().join("scripts/check-html.sh"))
        .args(files)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Width and height from a PNG's IHDR chunk.
fn png_size(p: &Path) -> (u32, u32) {
    let b = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert!(b.len() > 24 && b.starts_with(b"\x89PNG\r\n\x1a\n") && &b[12..16] == b"IHDR");
    let be = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    (be(16), be(20))
}

#[test]
fn html_report_and_compare_render_in_a_headless_browser() {
    let test = "html_report_and_compare_render_in_a_headless_browser";
    if !browser_installed() {
        if std::env::var("LATLAB_REQUIRE_PRIVILEGED").is_ok_and(|v| v == "1") {
            panic!("{test}: LATLAB_REQUIRE_PRIVILEGED=1 but chromium is not installed (apt-get install chromium)");
        }
        eprintln!("skipping {test}: chromium is not installed (apt-get install chromium)");
        return;
    }
    let _lock = privileged::lock();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("html_browser");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let results = dir.join("results");

    // A sim run (its label carries markup, which must stay text) and an imported cyclictest run.
    let out = latlab(&[
        "run".as_ref(),
        "--backend".as_ref(),
        "sim".as_ref(),
        "--duration".as_ref(),
        "3s".as_ref(),
        "--quiet".as_ref(),
        "--label".as_ref(),
        "sim <script>x</script>".as_ref(),
        "--results".as_ref(),
        results.as_os_str(),
    ]);
    assert!(out.contains("sim"), "{out}");
    let fixture = repo().join("crates/latlab-core/tests/fixtures/import/cyclictest-h2000-2cpu.txt");
    let imported = latlab(&[
        "import".as_ref(),
        fixture.as_os_str(),
        "--label".as_ref(),
        "cyclictest".as_ref(),
        "--results".as_ref(),
        results.as_os_str(),
    ]);
    let imported = PathBuf::from(imported.trim());
    let sim = std::fs::read_dir(&results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p != &imported)
        .expect("the sim run directory");

    let report = dir.join("report.html");
    let compare = dir.join("compare.html");
    latlab(&[
        "report".as_ref(),
        sim.as_os_str(),
        "--format".as_ref(),
        "html".as_ref(),
        "-o".as_ref(),
        report.as_os_str(),
    ]);
    latlab(&[
        "compare".as_ref(),
        sim.as_os_str(),
        imported.as_os_str(),
        "--format".as_ref(),
        "html".as_ref(),
        "-o".as_ref(),
        compare.as_os_str(),
    ]);
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(!html.contains("<script"), "the label became a tag");

    let (ok, text) = check_html(&[&report, &compare]);
    eprintln!("{text}");
    assert!(ok, "check-html failed:\n{text}");
    // The report has its three plots (CCDF, histogram, per-second maxima), the comparison
    // its two (CCDF, histogram).
    assert!(text.contains("report.html: 3 SVGs"), "{text}");
    assert!(text.contains("compare.html: 2 SVGs"), "{text}");
    for png in [dir.join("report.png"), dir.join("compare.png")] {
        assert_eq!(png_size(&png), (1200, 2400), "{}", png.display());
        eprintln!("screenshot: {}", png.display());
    }

    // The checker itself catches what it is there for: a script error and no drawn plot.
    let bad = dir.join("bad.html");
    std::fs::write(
        &bad,
        "<!DOCTYPE html><html><body><svg></svg><script>no_such_function()</script></body></html>",
    )
    .unwrap();
    let (ok, text) = check_html(&[&bad]);
    assert!(!ok, "check-html passed a broken page:\n{text}");
    assert!(text.contains("no_such_function"), "{text}");
    assert!(text.contains("0 drawn series"), "{text}");
}
