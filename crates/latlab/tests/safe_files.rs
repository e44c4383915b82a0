//! Files latlab writes (issue 14 §3): `-o` never replaces a device, FIFO or symlink; the
//! runtime directory and ledgers are private and checked; `cleanup` acts only on ledgers it can
//! trust; a results filesystem too full for the record is refused before measuring, and a record
//! whose final write fails is kept in the runtime directory, with no temp file left behind.
//!
//! Tests that mount, mknod or chown are privileged (the machine-wide lock; they fail, not skip,
//! under LATLAB_REQUIRE_PRIVILEGED=1 without root).

use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use latlab_sys::ledger::{Entry, LedgerFile};

fn latlab() -> Command {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("latlab"));
    c.stdin(Stdio::null());
    c
}

fn cstr(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A finished sim run in `results`, and its directory.
fn sim_run(results: &Path, rt: &Path) -> PathBuf {
    let o = latlab()
        .args(["run", "--backend", "sim", "--duration", "2s", "--quiet"])
        .arg("--results")
        .arg(results)
        .env("LATLAB_RUNTIME_DIR", rt)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    run_dirs(results).pop().expect("a run directory")
}

fn run_dirs(results: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() && !p.file_name().unwrap().to_string_lossy().starts_with("fill"))
        .collect();
    v.sort();
    v
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// What `latlab report RUN` prints on stdout.
fn report_stdout(run: &Path) -> Vec<u8> {
    let o = latlab().arg("report").arg(run).output().unwrap();
    assert!(o.status.success(), "{}", err(&o));
    o.stdout
}

fn report_to(run: &Path, out: &Path) -> Output {
    latlab()
        .arg("report")
        .arg(run)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap()
}

/// `-o` a character device: written through, the node stays a device. Checked first on a
/// `null` node made in a temp directory (so a regression cannot replace the machine's
/// /dev/null), then on /dev/null itself.
#[test]
fn report_to_a_char_device_writes_through() {
    let Some(_g) = latlab_sys::privileged::guard("report_to_a_char_device_writes_through") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let run = sim_run(&d.path().join("r"), &d.path().join("rt"));
    let null = d.path().join("null");
    // SAFETY: valid path; makedev(1, 3) is the null device.
    let r = unsafe {
        libc::mknod(
            cstr(&null).as_ptr(),
            libc::S_IFCHR | 0o666,
            libc::makedev(1, 3),
        )
    };
    assert_eq!(r, 0, "mknod: {}", std::io::Error::last_os_error());
    let o = report_to(&run, &null);
    assert!(o.status.success(), "{}", err(&o));
    let m = fs::symlink_metadata(&null).unwrap();
    assert!(
        m.file_type().is_char_device(),
        "the device node was replaced: {m:?}"
    );
    assert_eq!(
        names(d.path()),
        ["null", "r", "rt"],
        "a file was left beside the device"
    );

    let o = report_to(&run, Path::new("/dev/null"));
    assert!(o.status.success(), "{}", err(&o));
    let m = fs::symlink_metadata("/dev/null").unwrap();
    assert!(m.file_type().is_char_device());
    assert_eq!(m.rdev(), libc::makedev(1, 3));
}

/// `-o` a FIFO with a reader: the reader gets the report; the FIFO stays a FIFO.
#[test]
fn report_to_a_fifo_reaches_its_reader() {
    let d = tempfile::tempdir().unwrap();
    let run = sim_run(&d.path().join("r"), &d.path().join("rt"));
    let fifo = d.path().join("fifo");
    // SAFETY: valid path.
    assert_eq!(unsafe { libc::mkfifo(cstr(&fifo).as_ptr(), 0o600) }, 0);
    let f2 = fifo.clone();
    // Blocks in open until latlab opens the FIFO for writing, then reads to EOF.
    let reader = std::thread::spawn(move || fs::read(f2).unwrap());
    let o = report_to(&run, &fifo);
    assert!(o.status.success(), "{}", err(&o));
    assert!(
        fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(),
        "the FIFO was replaced by a file"
    );
    let got = reader.join().unwrap();
    assert_eq!(got, report_stdout(&run));
}

/// `-o` a symlink: followed, never replaced. To a regular file, the target gets the report
/// (atomically) and the link stays; to `/proc/self/fd/1`, the report goes to stdout.
#[test]
fn report_to_a_symlink_keeps_the_link() {
    let d = tempfile::tempdir().unwrap();
    let run = sim_run(&d.path().join("r"), &d.path().join("rt"));
    let out = d.path().join("out");
    fs::create_dir(&out).unwrap();
    fs::write(out.join("target.txt"), "old").unwrap();
    std::os::unix::fs::symlink("target.txt", out.join("link.txt")).unwrap();
    let o = report_to(&run, &out.join("link.txt"));
    assert!(o.status.success(), "{}", err(&o));
    assert!(fs::symlink_metadata(out.join("link.txt"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        fs::read(out.join("target.txt")).unwrap(),
        report_stdout(&run)
    );
    assert_eq!(names(&out), ["link.txt", "target.txt"]);

    std::os::unix::fs::symlink("/proc/self/fd/1", out.join("stdout")).unwrap();
    let o = report_to(&run, &out.join("stdout"));
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(o.stdout, report_stdout(&run));
    assert!(fs::symlink_metadata(out.join("stdout"))
        .unwrap()
        .file_type()
        .is_symlink());

    // A dangling link is refused (its target is not created), the link kept.
    std::os::unix::fs::symlink("nowhere", out.join("dangling")).unwrap();
    let o = report_to(&run, &out.join("dangling"));
    assert_eq!(o.status.code(), Some(1));
    assert!(err(&o).starts_with("latlab: error: -o "), "{}", err(&o));
    assert_eq!(err(&o).lines().count(), 1, "{}", err(&o));
    assert!(!out.join("nowhere").exists());
}

/// A ledger written by `write_file` does not follow a symlink planted at the old temp name
/// (`NAME.json.tmp`), leaves no temp file, and is mode 0600.
#[test]
fn ledger_write_ignores_a_planted_temp_symlink() {
    let d = tempfile::tempdir().unwrap();
    let victim = d.path().join("victim");
    fs::write(&victim, "precious").unwrap();
    let rt = d.path().join("rt");
    fs::create_dir(&rt).unwrap();
    std::os::unix::fs::symlink(&victim, rt.join("123.json.tmp")).unwrap();
    let file = LedgerFile {
        pid: 123,
        starttime: None,
        entries: vec![],
    };
    latlab_sys::ledger::write_file(&rt.join("123.json"), &file).unwrap();
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
    assert_eq!(names(&rt), ["123.json", "123.json.tmp"]);
    assert_eq!(
        fs::metadata(rt.join("123.json")).unwrap().mode() & 0o777,
        0o600
    );
}

/// A runtime directory others may write is refused, with its path and the fix in one line;
/// a fresh one is created 0700.
#[test]
fn runtime_dir_writable_by_others_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let rt = d.path().join("rt");
    let run = |rt: &Path| {
        latlab()
            .args(["run", "--backend", "sim", "--duration", "1s", "--quiet"])
            .arg("--results")
            .arg(d.path().join("r"))
            .env("LATLAB_RUNTIME_DIR", rt)
            .output()
            .unwrap()
    };
    let o = run(&rt);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(fs::metadata(&rt).unwrap().mode() & 0o777, 0o700);
    fs::set_permissions(&rt, fs::Permissions::from_mode(0o770)).unwrap();
    let o = run(&rt);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    let e = err(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.starts_with("latlab: error: "), "{e}");
    assert!(
        e.contains(&rt.display().to_string()) && e.contains("writable by others"),
        "{e}"
    );
}

/// A runtime directory owned by another user (uid 65534) is refused.
#[test]
fn runtime_dir_owned_by_another_user_is_refused() {
    let Some(_g) = latlab_sys::privileged::guard("runtime_dir_owned_by_another_user_is_refused")
    else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let rt = d.path().join("rt");
    fs::create_dir(&rt).unwrap();
    fs::set_permissions(&rt, fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&rt, Some(65534), Some(65534)).unwrap();
    let o = latlab()
        .args(["run", "--backend", "sim", "--duration", "1s", "--quiet"])
        .arg("--results")
        .arg(d.path().join("r"))
        .env("LATLAB_RUNTIME_DIR", &rt)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    let e = err(&o);
    assert!(
        e.contains("owned by uid 65534") && e.contains("LATLAB_RUNTIME_DIR"),
        "{e}"
    );
    assert!(
        names(&rt).is_empty(),
        "a ledger was written there: {:?}",
        names(&rt)
    );
}

/// A dead pid's ledger listing a scratch directory, in `rt`.
fn plant_ledger(rt: &Path, name: &str, scratch: &Path) -> PathBuf {
    let file = LedgerFile {
        pid: u32::MAX - 1,
        starttime: Some(1),
        entries: vec![(
            1,
            Entry::ScratchDir {
                path: scratch.to_path_buf(),
            },
        )],
    };
    let p = rt.join(name);
    fs::write(&p, serde_json::to_vec(&file).unwrap()).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
    p
}

/// `latlab cleanup` does not act on a ledger another user owns or others may write (it could
/// list anything for root to remove); it says so in a warning line. A trusted one is undone.
#[test]
fn cleanup_skips_untrusted_ledgers() {
    let Some(_g) = latlab_sys::privileged::guard("cleanup_skips_untrusted_ledgers") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let rt = d.path().join("rt");
    fs::create_dir(&rt).unwrap();
    fs::set_permissions(&rt, fs::Permissions::from_mode(0o700)).unwrap();
    let keep1 = d.path().join("keep1");
    let keep2 = d.path().join("keep2");
    let gone = d.path().join("gone");
    for s in [&keep1, &keep2, &gone] {
        fs::create_dir(s).unwrap();
    }
    let foreign = plant_ledger(&rt, "1.json", &keep1);
    std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
    let open = plant_ledger(&rt, "2.json", &keep2);
    fs::set_permissions(&open, fs::Permissions::from_mode(0o666)).unwrap();
    let own = plant_ledger(&rt, "3.json", &gone);
    let o = latlab()
        .arg("cleanup")
        .env("LATLAB_RUNTIME_DIR", &rt)
        .output()
        .unwrap();
    let e = err(&o);
    assert!(keep1.exists(), "a foreign-owned ledger was acted on: {e}");
    assert!(keep2.exists(), "a world-writable ledger was acted on: {e}");
    assert!(foreign.exists() && open.exists());
    assert!(
        !gone.exists() && !own.exists(),
        "the trusted ledger was not undone: {e}"
    );
    let warnings: Vec<&str> = e
        .lines()
        .filter(|l| l.starts_with("latlab: warning: skipping ledger"))
        .collect();
    assert_eq!(warnings.len(), 2, "{e}");
    assert!(
        warnings.iter().any(|l| l.contains("owned by uid 65534")),
        "{e}"
    );
    assert!(
        warnings.iter().any(|l| l.contains("writable by others")),
        "{e}"
    );
}

/// A tmpfs mounted for the test; unmounted on drop (also when the test fails).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Tmpfs {
        fs::create_dir_all(at).unwrap();
        let data = CString::new(format!("size={size},mode=0700")).unwrap();
        let (src, fstype) = (
            CString::new("latlab-test").unwrap(),
            CString::new("tmpfs").unwrap(),
        );
        // SAFETY: valid NUL-terminated strings.
        let r = unsafe {
            libc::mount(
                src.as_ptr(),
                cstr(at).as_ptr(),
                fstype.as_ptr(),
                0,
                data.as_ptr().cast(),
            )
        };
        assert_eq!(r, 0, "mount tmpfs: {}", std::io::Error::last_os_error());
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // SAFETY: valid path.
        unsafe { libc::umount2(cstr(&self.0).as_ptr(), libc::MNT_DETACH) };
    }
}

/// Fill the filesystem of `dir` until ENOSPC.
fn fill(dir: &Path) {
    use std::io::Write;
    let mut f = fs::File::create(dir.join("fill")).unwrap();
    let chunk = vec![0xa5u8; 64 * 1024];
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
                break;
            }
        }
    }
    let _ = f.sync_all();
}

/// A full results filesystem: refused before anything is measured (no run directory, no
/// waiting out --duration), with a one-line error that says what to do.
#[test]
fn full_results_disk_is_refused_before_measuring() {
    let Some(_g) = latlab_sys::privileged::guard("full_results_disk_is_refused_before_measuring")
    else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let mnt = d.path().join("mnt");
    let _m = Tmpfs::mount(&mnt, "4m");
    fill(&mnt);
    let t0 = Instant::now();
    let o = latlab()
        .args([
            "run",
            "--backend",
            "sim",
            "--sim-realtime",
            "--duration",
            "10s",
            "--quiet",
        ])
        .arg("--results")
        .arg(&mnt)
        .env("LATLAB_RUNTIME_DIR", d.path().join("rt"))
        .output()
        .unwrap();
    let took = t0.elapsed();
    let e = err(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.starts_with("latlab: error: --results ") && e.contains("not enough free space"),
        "{e}"
    );
    assert!(took < Duration::from_secs(5), "it measured first: {took:?}");
    assert_eq!(
        names(&mnt),
        ["fill"],
        "something was created on the full disk"
    );
}

/// Space runs out during the run (the results tmpfs is filled once the first checkpoint is
/// there): the final record is kept in the runtime directory, the error says where in one
/// line, it is complete and `latlab report` reads it, and no temp file is left behind.
#[test]
fn disk_full_at_the_end_keeps_the_record() {
    let Some(_g) = latlab_sys::privileged::guard("disk_full_at_the_end_keeps_the_record") else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let mnt = d.path().join("mnt");
    let rt = d.path().join("rt");
    let _m = Tmpfs::mount(&mnt, "8m");
    let mut child = latlab()
        .args([
            "run",
            "--backend",
            "sim",
            "--sim-realtime",
            "--duration",
            "3s",
            "--quiet",
        ])
        .args(["--label", "full"])
        .arg("--results")
        .arg(&mnt)
        .env("LATLAB_RUNTIME_DIR", &rt)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The first checkpoint is written when measurement starts.
    let deadline = Instant::now() + Duration::from_secs(20);
    let run = loop {
        if let Some(r) = run_dirs(&mnt).pop().filter(|r| r.join("run.json").exists()) {
            break r;
        }
        assert!(Instant::now() < deadline, "no checkpoint appeared");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before its checkpoint"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    fill(&mnt);
    assert!(
        child.try_wait().unwrap().is_none(),
        "the run ended before the disk was filled: not the case under test"
    );
    let o = child.wait_with_output().unwrap();
    let e = err(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    let kept = rt.join(format!(
        "{}.run.json",
        run.file_name().unwrap().to_string_lossy()
    ));
    assert!(e.contains("No space left on device"), "{e}");
    assert!(
        e.contains(&format!("the record was kept in {}", kept.display())),
        "{e}"
    );
    let rec: serde_json::Value = serde_json::from_slice(&fs::read(&kept).unwrap()).unwrap();
    assert_eq!(rec["complete"], true);
    assert_eq!(fs::metadata(&kept).unwrap().mode() & 0o777, 0o600);
    let moved = d.path().join("moved");
    fs::create_dir(&moved).unwrap();
    fs::copy(&kept, moved.join("run.json")).unwrap();
    assert!(!report_stdout(&moved).is_empty());
    let tmps: Vec<String> = names(&run)
        .into_iter()
        .filter(|n| n.contains("tmp"))
        .collect();
    assert!(tmps.is_empty(), "temp files left: {tmps:?}");
}

/// `latlab import` and `latlab scenario` create run directories too: on a full results
/// filesystem they are refused the same way, before anything is created or measured.
#[test]
fn full_results_disk_refuses_import_and_scenario() {
    let Some(_g) = latlab_sys::privileged::guard("full_results_disk_refuses_import_and_scenario")
    else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let mnt = d.path().join("mnt");
    let _m = Tmpfs::mount(&mnt, "4m");
    fill(&mnt);
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../latlab-core/tests/fixtures/import/cyclictest-h100.txt");
    let import = latlab()
        .arg("import")
        .arg(&fixture)
        .arg("--results")
        .arg(&mnt)
        .output()
        .unwrap();
    let scenario = latlab()
        .args(["scenario", "fairness", "--duration", "1s"])
        .arg("--results")
        .arg(&mnt)
        .env("LATLAB_RUNTIME_DIR", d.path().join("rt"))
        .output()
        .unwrap();
    for (what, o) in [("import", import), ("scenario", scenario)] {
        let e = err(&o);
        assert_eq!(o.status.code(), Some(1), "{what}: {e}");
        assert_eq!(e.lines().count(), 1, "{what}: {e}");
        assert!(e.contains("not enough free space"), "{what}: {e}");
    }
    assert_eq!(
        names(&mnt),
        ["fill"],
        "something was created on the full disk"
    );
}

/// A sim run given one spike with a text trace (what `export` needs; no root).
fn with_a_text_spike(run: &Path) {
    fs::create_dir_all(run.join("spikes/001")).unwrap();
    let text = "               t-5       [000] d..2.   100.000500: sched_switch: prev_comm=a prev_pid=5 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120\n";
    fs::write(run.join("spikes/001/trace.txt"), text).unwrap();
    let mut rec: serde_json::Value =
        serde_json::from_slice(&fs::read(run.join("run.json")).unwrap()).unwrap();
    rec["spikes"] = serde_json::json!([{
        "cpu": 0, "at_ns": 100_000_100_000u64, "latency_ns": 300_000,
        "trace_file": "spikes/001/trace.txt"
    }]);
    fs::write(run.join("run.json"), serde_json::to_vec(&rec).unwrap()).unwrap();
}

/// An output reached through a symlink (or by its own name) is replaced keeping the target's
/// owner and mode: a 0600 file of another user's stays theirs and 0600 (`chmod 600 t; chown
/// nobody t; ln -s t l; latlab cyclictest --json=l` made it root's and 0644). Every writer of
/// a user-named file: cyclictest's `--json` and `--histfile`, `report -o`, `export -o`.
#[test]
fn output_through_a_symlink_keeps_the_targets_owner_and_mode() {
    let Some(_g) =
        latlab_sys::privileged::guard("output_through_a_symlink_keeps_the_targets_owner_and_mode")
    else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let run = sim_run(&d.path().join("r"), &d.path().join("rt"));
    with_a_text_spike(&run);
    let plant = |name: &str| -> PathBuf {
        let t = d.path().join(format!("{name}.target"));
        fs::write(&t, "old").unwrap();
        std::os::unix::fs::chown(&t, Some(65534), Some(65534)).unwrap();
        fs::set_permissions(&t, fs::Permissions::from_mode(0o600)).unwrap();
        let l = d.path().join(format!("{name}.link"));
        std::os::unix::fs::symlink(&t, &l).unwrap();
        l
    };
    let (json, hist, rep, exp) = (
        plant("json"),
        plant("hist"),
        plant("report"),
        plant("export"),
    );
    let o = latlab()
        .args(["cyclictest", "--backend", "sim", "-D1", "-q", "-h", "50"])
        .arg(format!("--json={}", json.display()))
        .arg(format!("--histfile={}", hist.display()))
        .arg("--results")
        .arg(d.path().join("c"))
        .env("LATLAB_RUNTIME_DIR", d.path().join("rt"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    let o = report_to(&run, &rep);
    assert!(o.status.success(), "{}", err(&o));
    let o = latlab()
        .arg("export")
        .arg(&run)
        .args(["--format", "perfetto", "-o"])
        .arg(&exp)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", err(&o));
    for l in [json, hist, rep, exp] {
        assert!(fs::symlink_metadata(&l).unwrap().file_type().is_symlink());
        let m = fs::metadata(&l).unwrap();
        assert_ne!(fs::read(&l).unwrap(), b"old", "{} not written", l.display());
        assert_eq!(
            (m.uid(), m.gid(), m.mode() & 0o7777),
            (65534, 65534, 0o600),
            "{}",
            l.display()
        );
    }
}

/// `export -o FIFO` with no process reading it hung in `open`: now one line at once; with a
/// reader it is written through (as `report -o`).
#[test]
fn export_to_a_fifo_without_a_reader_is_an_error_at_once() {
    let d = tempfile::tempdir().unwrap();
    let run = sim_run(&d.path().join("r"), &d.path().join("rt"));
    with_a_text_spike(&run);
    let fifo = d.path().join("fifo");
    // SAFETY: valid path.
    assert_eq!(unsafe { libc::mkfifo(cstr(&fifo).as_ptr(), 0o600) }, 0);
    let mut child = latlab()
        .arg("export")
        .arg(&run)
        .args(["--format", "perfetto", "-o"])
        .arg(&fifo)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A hang is the defect: give it far longer than it needs, then fail rather than wait.
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("export -o FIFO without a reader still waits after 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let o = child.wait_with_output().unwrap();
    assert_eq!(status.code(), Some(1), "{}", err(&o));
    assert!(err(&o).contains("no process reads"), "{}", err(&o));
    assert_eq!(err(&o).lines().count(), 1, "{}", err(&o));
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
}
