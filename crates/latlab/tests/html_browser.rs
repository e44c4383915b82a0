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

/// The DOM of `page` after chromium loaded it (scripts run).
fn dump_dom(page: &Path) -> String {
    let browser = if browser_installed_as("chromium") {
        "chromium"
    } else {
        "chromium-browser"
    };
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new("timeout")
        .arg("120")
        .arg(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.canonicalize().unwrap().display()))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn browser_installed_as(b: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {b}"))
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A copy of run directory `from` at `to` with a profile: two CPUs over 30 ms with known run
/// queues, switches to named tasks (one name is markup), a migration.
fn profile_run(from: &Path, to: &Path) -> PathBuf {
    use latlab_core::profile::{Ev, PEvent, Profiler};
    std::fs::create_dir_all(to.join("profile")).unwrap();
    let mut p = Profiler::new(&[0, 1], 0, 30_000_000);
    p.watch(50, 0);
    let ev = |ts, cpu, ev| PEvent {
        ts,
        cpu,
        lost_before: false,
        lost_after: false,
        ev,
    };
    let switch = |prev_pid, next_pid| Ev::Switch {
        prev_pid,
        prev_prio: 120,
        prev_runnable: false,
        prev_dead: false,
        next_pid,
        next_prio: 120,
    };
    for k in 0..30u64 {
        let t = k * 1_000_000;
        let wake = |pid, cpu| Ev::Wakeup {
            pid,
            prio: 4,
            target_cpu: Some(cpu),
            new: false,
        };
        p.event(&ev(t, 0, wake(50, 0)));
        p.event(&ev(t + 3_000, 0, switch(0, 50)));
        p.event(&ev(t + 40_000, 0, wake(60 + (k % 3) as i64, 0)));
        p.event(&ev(t + 60_000, 0, switch(50, 60 + (k % 3) as i64)));
        p.event(&ev(t + 500_000, 0, switch(60 + (k % 3) as i64, 0)));
        p.event(&ev(t + 100_000, 1, wake(70, 1)));
        p.event(&ev(t + 120_000, 1, switch(0, 70)));
        p.event(&ev(t + 700_000, 1, switch(70, 0)));
    }
    p.event(&ev(
        29_900_000,
        1,
        Ev::Migrate {
            pid: 70,
            orig: 1,
            dest: 0,
        },
    ));
    let (mut record, series) = p.finish(
        30_000_000,
        50,
        |pid| match pid {
            60 => "<script>x</script>".into(),
            50 => "latlab-cpu0".into(),
            _ => format!("task{pid}"),
        },
        0,
        0,
    );
    record.series = Some("profile/series.bin".into());
    std::fs::write(to.join("profile/series.bin"), series.to_bytes()).unwrap();
    let mut run: serde_json::Value =
        serde_json::from_slice(&std::fs::read(from.join("run.json")).unwrap()).unwrap();
    run["profile"] = serde_json::to_value(&record).unwrap();
    std::fs::write(to.join("run.json"), serde_json::to_vec(&run).unwrap()).unwrap();
    to.to_path_buf()
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
    // The report has its three plots (CCDF, histogram, per-second maxima) and the two of its
    // tail fit (the fitted tail over the CCDF, the quantile-quantile plot), the comparison its
    // two (CCDF, histogram).
    assert!(text.contains("report.html: 5 SVGs"), "{text}");
    assert!(text.contains("compare.html: 2 SVGs"), "{text}");
    for png in [dir.join("report.png"), dir.join("compare.png")] {
        assert_eq!(png_size(&png), (1200, 2400), "{}", png.display());
        eprintln!("screenshot: {}", png.display());
    }

    // A profile run's report: its heat maps are images the browser decodes, with their
    // legends. The profile is made here (the sim run plus a reconstruction of known events
    // and its series file), so this test needs no tracefs; tests/profile.rs has real ones.
    let prof = profile_run(&sim, &dir.join("profile-run"));
    let prof_html = dir.join("profile.html");
    latlab(&[
        "report".as_ref(),
        prof.as_os_str(),
        "--format".as_ref(),
        "html".as_ref(),
        "-o".as_ref(),
        prof_html.as_os_str(),
    ]);
    let html = std::fs::read_to_string(&prof_html).unwrap();
    assert!(!html.contains("<script"), "a task name became a tag");
    assert_eq!(html.matches("<img class=\"map\"").count(), 4);
    let (ok, text) = check_html(&[&prof_html]);
    eprintln!("{text}");
    assert!(ok, "check-html failed on the profile report:\n{text}");
    // The report itself has no script: a copy with one that counts, once the page has
    // loaded, the maps the browser decoded (naturalWidth > 0) and the legend entries.
    let probe = dir.join("profile-probe.html");
    std::fs::write(
        &probe,
        html.replace(
            "</body>",
            "<script>window.addEventListener('load',()=>{const m=[...document.querySelectorAll('img.map')];\
             document.body.setAttribute('data-maps',m.filter(i=>i.complete&&i.naturalWidth===1000&&i.naturalHeight>0).length+'/'+m.length);\
             document.body.setAttribute('data-legend',document.querySelectorAll('p.legend > span').length);});</script></body>",
        ),
    )
    .unwrap();
    let dom = dump_dom(&probe);
    assert!(
        dom.contains("data-maps=\"4/4\""),
        "maps not decoded: {}",
        &dom[..dom.len().min(300)]
    );
    // 8 run-queue entries (idle, 1, 2, 3–4, 5–8, 9–16, > 16, unknown); idle, the 5 tasks
    // (50, 60, 61, 62, 70), other tasks, migration, no switch, unknown.
    assert!(
        dom.contains("data-legend=\"18\""),
        "legend: {}",
        &dom[..dom.len().min(300)]
    );

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

/// Issue 17 part 4: a run whose spikes carry lanes (`latlab analyze` of the real 13 ms spike,
/// spliced into a sim run's record) renders them in a real browser: check-html passes, and the
/// page's layout (measured by a script added to a copy of the report, read back from the DOM)
/// has one lane SVG per spike with a non-zero size and its segments drawn.
#[test]
fn spike_lanes_render_in_a_headless_browser() {
    let test = "spike_lanes_render_in_a_headless_browser";
    if !browser_installed() {
        if std::env::var("LATLAB_REQUIRE_PRIVILEGED").is_ok_and(|v| v == "1") {
            panic!("{test}: LATLAB_REQUIRE_PRIVILEGED=1 but chromium is not installed (apt-get install chromium)");
        }
        eprintln!("skipping {test}: chromium is not installed (apt-get install chromium)");
        return;
    }
    let _lock = privileged::lock();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("html_browser_lanes");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let results = dir.join("results");
    latlab(&[
        "run".as_ref(),
        "--backend".as_ref(),
        "sim".as_ref(),
        "--duration".as_ref(),
        "1s".as_ref(),
        "--quiet".as_ref(),
        "--results".as_ref(),
        results.as_os_str(),
    ]);
    let run = std::fs::read_dir(&results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .next()
        .expect("the sim run directory");
    let fixture =
        repo().join("crates/latlab-core/tests/fixtures/trace/trace-worst-window-cpu1.txt");
    let analysis: serde_json::Value = serde_json::from_str(&latlab(&[
        "analyze".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        fixture.as_os_str(),
    ]))
    .unwrap();
    let spikes = analysis["spikes"].as_array().unwrap().clone();
    assert_eq!(spikes.len(), 2);
    assert!(spikes.iter().all(|s| s["lanes"]["segments"].is_array()));
    let p = run.join("run.json");
    let mut rec: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    rec["spikes"] = serde_json::Value::Array(spikes);
    std::fs::write(&p, serde_json::to_vec(&rec).unwrap()).unwrap();

    let report = dir.join("lanes.html");
    latlab(&[
        "report".as_ref(),
        run.as_os_str(),
        "--format".as_ref(),
        "html".as_ref(),
        "-o".as_ref(),
        report.as_os_str(),
    ]);
    let html = std::fs::read_to_string(&report).unwrap();
    assert_eq!(html.matches("class=\"plot lanes\"").count(), 2);
    let (ok, text) = check_html(&[&report]);
    eprintln!("{text}");
    assert!(ok, "check-html failed:\n{text}");
    // The three plots, the tail fit's two, the two spikes' lanes and the zoom on the last
    // stretch of the one whose 13 ms stall squeezes it.
    assert!(text.contains("lanes.html: 8 SVGs"), "{text}");
    assert_eq!(html.matches("class=\"plot lanes zoom\"").count(), 1);

    // The layout: each lane SVG's size and its segments with a non-zero box, as the browser
    // laid them out.
    const MEASURE: &str = "<script>document.body.setAttribute('data-lanes',[...document.querySelectorAll('svg.lanes:not(.zoom)')].map(s=>{const b=s.getBoundingClientRect();const n=[...s.querySelectorAll('rect.seg')].filter(r=>{const c=r.getBoundingClientRect();return c.width>0&&c.height>0}).length;return Math.round(b.width)+'x'+Math.round(b.height)+':'+n}).join(' '))</script>";
    // Issue 31: the verdict is laid out above the first plot, and every in-page link (the
    // contents, the spike rows to their lanes) has its target.
    const ORDER: &str = "<script>{const top=e=>e.getBoundingClientRect().top+window.scrollY;const v=document.getElementById('verdict');const p=document.querySelector('svg.plot');const l=[...document.querySelectorAll('a[href^=\"#\"]')];const broken=l.filter(a=>!document.getElementById(a.getAttribute('href').slice(1))).length;document.body.setAttribute('data-order',(v&&p&&top(v)<top(p)?'verdict-first':'plot-first')+':'+broken+':'+l.length)}</script>";
    let measured = dir.join("measure.html");
    std::fs::write(
        &measured,
        html.replace("</body>", &format!("{MEASURE}{ORDER}</body>")),
    )
    .unwrap();
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg("B=$(command -v chromium || command -v chromium-browser); timeout 120 $B --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking --disable-component-update --disable-sync --user-data-dir=\"$1\" --window-size=1200,2400 --dump-dom \"file://$2\" 2>/dev/null")
        .arg("sh")
        .arg(profile.path())
        .arg(&measured)
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let attr = dom
        .split("data-lanes=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_else(|| panic!("no measurement in the DOM: {}", &dom[..dom.len().min(400)]));
    let sizes: Vec<(f64, f64, usize)> = attr
        .split(' ')
        .map(|m| {
            let (wh, n) = m.split_once(':').unwrap();
            let (w, h) = wh.split_once('x').unwrap();
            (w.parse().unwrap(), h.parse().unwrap(), n.parse().unwrap())
        })
        .collect();
    let order = dom
        .split("data-order=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_else(|| panic!("no order in the DOM: {}", &dom[..dom.len().min(400)]));
    eprintln!("verdict and links as laid out (first:broken links:links): {order}");
    let (first, links) = order.split_once(':').unwrap();
    let (broken, links) = links.split_once(':').unwrap();
    assert_eq!((first, broken), ("verdict-first", "0"), "{order}");
    // The contents (≥ 6 sections), the verdict's two, the two spike rows.
    assert!(links.parse::<usize>().unwrap() >= 10, "{order}");
    eprintln!("lane SVGs as laid out (width x height: segments drawn): {attr}");
    assert_eq!(sizes.len(), 2, "{attr}");
    for (i, (w, h, n)) in sizes.iter().enumerate() {
        let segs = rec["spikes"][i]["lanes"]["segments"]
            .as_array()
            .unwrap()
            .len();
        assert!(*w > 100.0 && *h > 50.0, "{attr}");
        assert_eq!(*n, segs, "spike {i}: {attr}");
    }
}
