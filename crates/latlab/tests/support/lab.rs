//! The kernel lab from the tests: boots a Debian kernel under QEMU with `scripts/kernel-lab`
//! (docs/testing.md, "Kernel lab"), the binary under test in its initramfs, runs a shell
//! script in the guest and hands back the directory the guest wrote through its 9p share.
//!
//! A guest takes one core of the test machine (TCG with one host thread: measured 0.8 CPU on
//! average over a boot) and touches nothing of the host's kernel settings or tracefs, so it
//! runs under the machine-wide lab lock — never two guests at a time — but not the privileged
//! one: `scripts/test` runs the lab's test binaries in their own `cargo test` beside the
//! others. When the lab cannot run here (no qemu, no busybox, the kernel not fetched)
//! the test skips with the reason, a failure under `LATLAB_REQUIRE_PRIVILEGED=1`.
//!
//! ```ignore
//! let Some(g) = lab::run("my_test", "rt-6.12", 2, "latlab run --duration 3s", 240) else {
//!     return;
//! };
//! assert_eq!(g.exit, 0, "{}", g.job_log);
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The kernels the lab boots (`scripts/kernel-lab fetch` names).
pub const KERNELS: [&str; 3] = ["rt-6.12", "stock-6.1", "rt-6.1"];

/// Takes the machine-wide lab lock (blocks until free; released when the file is dropped): one
/// guest at a time, whichever test process boots it.
pub fn lab_lock() -> std::fs::File {
    let f = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(std::env::temp_dir().join("latlab-lab-tests.lock"))
        .expect("open the lab lock file");
    f.lock().expect("lock the lab lock file");
    f
}

/// `scripts/kernel-lab`'s exit statuses (its header).
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_NO_TOOL: i32 = 3;
pub const EXIT_NO_KERNEL: i32 = 4;
pub const EXIT_HUNG: i32 = 5;
pub const EXIT_NO_JOB: i32 = 6;
pub const EXIT_NO_TRACEFS: i32 = 7;

/// The latlab binary the guest runs: the test build (target/debug), or with
/// `LATLAB_LAB_PROFILE=PROFILE` the build of that Cargo profile (`release`; `ci`, set by
/// `scripts/test`: the release code at opt-level 1), brought up to date once per test process
/// by `cargo build --profile PROFILE` — under TCG several times faster than the unoptimised
/// one in the guest's own steps (analysis, loads' supervision, report writing). The guest
/// checks its structure either way.
pub fn guest_bin() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let debug = super::bin();
        let Some(profile) = std::env::var("LATLAB_LAB_PROFILE")
            .ok()
            .filter(|p| !p.is_empty() && p != "dev")
        else {
            return debug;
        };
        let out = Command::new(env!("CARGO"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["build", "--profile", &profile, "--locked", "-p", "latlab"])
            .args(["--bin", "latlab"])
            .output()
            .expect("run cargo build");
        assert!(
            out.status.success(),
            "LATLAB_LAB_PROFILE={profile}: cargo build --profile {profile} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // target/debug/latlab → target/PROFILE/latlab (CARGO_TARGET_DIR included).
        let built = debug
            .parent()
            .and_then(Path::parent)
            .expect("the test binary lives in <target>/debug")
            .join(&profile)
            .join("latlab");
        assert!(
            built.is_file(),
            "LATLAB_LAB_PROFILE={profile}: no {} after cargo build",
            built.display()
        );
        built
    })
    .clone()
}

/// The lab script.
pub fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/kernel-lab")
}

/// The release of the kernel the lab boots as `kernel` (`uname -r` in the guest), from the cache.
pub fn release(kernel: &str) -> Option<String> {
    let out = Command::new(script())
        .args(["release", kernel])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A host tool to copy into the guest (`--bin`): its path, or why it is missing.
pub fn tool(name: &str) -> Result<PathBuf, String> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("{name} is not installed (scripts/deps.sh installs it)"))
}

/// `scripts/rtla-build path`: rtla 6.12 built from Debian's linux-source-6.12 (its
/// auto-analysis; Debian's own rtla is 6.1), or why it is missing.
pub fn rtla_6_12() -> Result<std::path::PathBuf, String> {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/rtla-build");
    let out = std::process::Command::new(script)
        .arg("path")
        .output()
        .map_err(|e| format!("cannot run scripts/rtla-build: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().into())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// The lab's ground-truth injectors (`support/lab_inject.c`), built static for the guest with
/// the host's gcc into `target/tmp/lab/`: its path, or why it cannot be built.
pub fn inject() -> Result<PathBuf, String> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/lab_inject.c");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("lab/lab_inject");
    std::fs::create_dir_all(out.parent().unwrap()).map_err(|e| e.to_string())?;
    let gcc = tool("gcc")?;
    let o = Command::new(gcc)
        .args(["-static", "-O2", "-pthread", "-Wall", "-o"])
        .arg(&out)
        .arg(&src)
        .output()
        .map_err(|e| format!("cannot run gcc: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "gcc -static cannot build {} (libc6-dev's static libc?): {}",
            src.display(),
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    Ok(out)
}

/// What one boot did.
#[derive(Debug)]
pub struct Guest {
    /// The share (`/lab` in the guest): job.sh, job.log, exit, console.log and what the
    /// script wrote. It stays after the test, under `target/tmp/lab/`.
    pub dir: PathBuf,
    /// The script's exit status in the guest.
    pub exit: i32,
    /// The script's stdout and stderr.
    pub job_log: String,
    /// The guest kernel's uptime when the script started (its boot time).
    pub boot_seconds: f64,
    /// From the start of `scripts/kernel-lab run` to its end.
    pub wall: Duration,
}

impl Guest {
    /// A file the guest wrote, relative to the share.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// A text file the guest wrote (panics, with the job log, when it is missing).
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| {
            panic!(
                "{}: {e}\njob.log:\n{}",
                self.path(rel).display(),
                self.job_log
            )
        })
    }

    /// A JSON file the guest wrote.
    pub fn json(&self, rel: &str) -> serde_json::Value {
        let text = self.read(rel);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{rel}: {e}: {text}\njob.log:\n{}", self.job_log))
    }
}

/// What `scripts/kernel-lab run` did, for the callers that expect it to fail.
#[derive(Debug)]
pub struct Launch {
    /// Its exit status (None: killed by a signal).
    pub status: Option<i32>,
    /// Its stderr (one line on failure).
    pub stderr: String,
    /// Its stdout.
    pub stdout: String,
    /// The share.
    pub dir: PathBuf,
    /// The temp directory it was given (TMPDIR): where its initramfs was built.
    pub tmpdir: PathBuf,
    pub wall: Duration,
}

/// One boot: the kernel, the CPUs, and what goes into the guest.
#[derive(Debug, Clone)]
pub struct Lab {
    pub kernel: String,
    pub smp: u32,
    pub mem_mib: Option<u32>,
    pub append: Option<String>,
    /// Binaries for the guest besides latlab (the binary under test, always there).
    pub bins: Vec<PathBuf>,
    /// Time limit of the boot and the script.
    pub timeout_s: u32,
}

impl Lab {
    pub fn new(kernel: &str, smp: u32, timeout_s: u32) -> Lab {
        Lab {
            kernel: kernel.into(),
            smp,
            mem_mib: None,
            append: None,
            bins: vec![],
            timeout_s,
        }
    }

    /// Ok when `kernel` can boot here, else the reason (`scripts/kernel-lab check`).
    pub fn available(kernel: &str) -> Result<(), String> {
        let out = Command::new(script())
            .args(["check", kernel])
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script().display()))?;
        if out.status.success() {
            Ok(())
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            let err = err.trim();
            Err(err.strip_prefix("kernel-lab: ").unwrap_or(err).to_string())
        }
    }

    /// Runs `scripts/kernel-lab run` with `script` under the lab lock, the share in
    /// `target/tmp/lab/<name>` (emptied first), whatever comes of it.
    pub fn launch(&self, name: &str, job: &str) -> Launch {
        let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("lab");
        let dir = base.join(name);
        let tmpdir = base.join(format!("{name}.tmp"));
        for d in [&dir, &tmpdir] {
            if d.exists() {
                std::fs::remove_dir_all(d).unwrap();
            }
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(dir.join("job.sh"), job).unwrap();
        let mut cmd = Command::new(script());
        cmd.env("TMPDIR", &tmpdir)
            .args(["run", "--kernel", &self.kernel])
            .args(["--smp", &self.smp.to_string()])
            .args(["--timeout", &self.timeout_s.to_string()])
            .arg("--share")
            .arg(&dir)
            .arg("--bin")
            .arg(guest_bin());
        if let Some(m) = self.mem_mib {
            cmd.args(["--mem", &m.to_string()]);
        }
        if let Some(a) = &self.append {
            cmd.args(["--append", a]);
        }
        for b in &self.bins {
            cmd.arg("--bin").arg(b);
        }
        cmd.arg(dir.join("job.sh"));
        let _lock = lab_lock();
        let start = Instant::now();
        let out = cmd.output().expect("run scripts/kernel-lab");
        let wall = start.elapsed();
        Launch {
            status: out.status.code(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            dir,
            tmpdir,
            wall,
        }
    }

    /// Boots, runs `script` in the guest and returns what it wrote; None when the lab cannot
    /// run here (the test skipped, through [`super::cannot_run`]). Panics when the guest did
    /// not run the script to its end (hung, boot failure), with the end of its console.
    pub fn run(&self, test: &str, job: &str) -> Option<Guest> {
        if let Err(why) = Lab::available(&self.kernel) {
            super::cannot_run(test, &format!("the kernel lab cannot boot here: {why}"));
            return None;
        }
        let l = self.launch(test, job);
        match l.status {
            Some(0) => {}
            Some(EXIT_NO_TOOL | EXIT_NO_KERNEL | EXIT_NO_TRACEFS) => {
                super::cannot_run(
                    test,
                    &format!("the kernel lab cannot run this here: {}", l.stderr.trim()),
                );
                return None;
            }
            s => {
                // The guest's console, line by line through latlab's escaper (the BIOS
                // writes terminal escapes).
                let console = std::fs::read(l.dir.join("console.log")).unwrap_or_default();
                let console = String::from_utf8_lossy(&console);
                let lines: Vec<&str> = console.lines().collect();
                let tail: Vec<String> = lines[lines.len().saturating_sub(30)..]
                    .iter()
                    .map(|l| latlab_report::escape::escape(l.trim_end_matches('\r')))
                    .collect();
                panic!(
                    "{test}: scripts/kernel-lab run on {} exited {s:?}: {}\nconsole.log (end):\n{}",
                    self.kernel,
                    latlab_report::escape::escape(l.stderr.trim()),
                    tail.join("\n")
                );
            }
        }
        let read = |f: &str| std::fs::read_to_string(l.dir.join(f)).unwrap_or_default();
        let exit = read("exit")
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{test}: no exit status in {}", l.dir.display()));
        let boot_seconds = read("boot-seconds").trim().parse().unwrap_or(f64::NAN);
        let left: Vec<_> = std::fs::read_dir(&l.tmpdir).unwrap().collect();
        assert!(left.is_empty(), "{test}: the lab left {left:?}");
        eprintln!(
            "{test}: {} with {} CPUs booted in {boot_seconds:.1} s, {:.1} s in all",
            self.kernel,
            self.smp,
            l.wall.as_secs_f64()
        );
        Some(Guest {
            exit,
            job_log: read("job.log"),
            boot_seconds,
            wall: l.wall,
            dir: l.dir,
        })
    }
}

/// The boot the tests of one file share: the first test to ask boots, the others read what it
/// wrote. A boot that failed (a panic: hung, crashed) is kept as its message, so every test
/// fails with it instead of booting again.
pub type Once = std::sync::OnceLock<Result<Option<Guest>, String>>;

impl Lab {
    /// Adds the host's tools `names` to the initramfs; false when one is missing (the test
    /// skipped, saying which).
    pub fn tools(&mut self, test: &str, names: &[&str]) -> bool {
        for t in names {
            match tool(t) {
                Ok(p) => self.bins.push(p),
                Err(why) => {
                    super::cannot_run(test, &why);
                    return false;
                }
            }
        }
        true
    }

    /// Adds the lab's injector (support/lab_inject.c); false when it cannot be built.
    pub fn injector(&mut self, test: &str) -> bool {
        self.bin(test, inject())
    }

    /// Adds a binary the test found or built; false (the test skipped, or failed under
    /// `LATLAB_REQUIRE_PRIVILEGED=1`) when it says why it has none.
    pub fn bin(&mut self, test: &str, found: Result<PathBuf, String>) -> bool {
        match found {
            Ok(p) => {
                self.bins.push(p);
                true
            }
            Err(why) => {
                super::cannot_run(test, &why);
                false
            }
        }
    }

    /// Runs `job` once for all the tests of a file (`cell` is the file's static [`Once`]):
    /// `make` builds the lab (None: skipped), the job must end with status 0, the guest's
    /// `times` file (each step's guest uptimes) is printed. None: the lab cannot run here.
    pub fn once(
        cell: &'static Once,
        test: &str,
        make: impl FnOnce() -> Option<Lab>,
        job: &str,
    ) -> Option<&'static Guest> {
        let r = cell.get_or_init(|| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let g = make()?.run(test, job)?;
                assert_eq!(g.exit, 0, "{}", g.job_log);
                eprintln!("{test}: steps (guest uptime, s):\n{}", g.read("times"));
                Some(g)
            }))
            .map_err(|e| {
                e.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "the boot panicked".into())
            })
        });
        match r {
            Ok(g) => g.as_ref(),
            Err(e) => panic!("the lab's boot failed: {e}"),
        }
    }
}

/// Boots `kernel` on `smp` CPUs with latlab, runs `script` there within `timeout_s` seconds
/// (boot included). None: the lab cannot run here and the test skipped.
pub fn run(test: &str, kernel: &str, smp: u32, script: &str, timeout_s: u32) -> Option<Guest> {
    Lab::new(kernel, smp, timeout_s).run(test, script)
}

/// The processes whose command line mentions `needle` (e.g. a share's path): QEMU left
/// behind.
pub fn processes_mentioning(needle: &str) -> Vec<(u32, String)> {
    let mut v = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(needle) {
            v.push((pid, cmd));
        }
    }
    v
}

/// A run.json histogram (`cpus[].histogram`, `cpus[].mode.irq`, …) as a histogram.
pub fn hist(v: &serde_json::Value) -> latlab_core::hist::Histogram {
    let r: latlab_core::hist::HistogramRecord = serde_json::from_value(v.clone()).unwrap();
    latlab_core::hist::Histogram::from_record(&r).unwrap()
}

/// Two measurements of one latency overlap: each one's median lies within the other's range
/// (its minimum to its p99, or to its limit when the p99 lies beyond it: rtla's histogram ends
/// at its last bucket and counts what is beyond with no value). A median must be known.
pub fn medians_overlap(
    what: &str,
    a: &latlab_core::hist::Histogram,
    b: &latlab_core::hist::Histogram,
) {
    use latlab_core::hist::Quantile;
    let p50 = |h: &latlab_core::hist::Histogram| {
        h.quantile(Quantile::P50)
            .unwrap_or_else(|| panic!("{what}: a median beyond the histogram's limit"))
    };
    eprintln!(
        "{what}: latlab p50 {} of {}, the other p50 {} of {} ({} over its limit)",
        p50(a),
        a.count(),
        p50(b),
        b.count(),
        b.unknown_above()
    );
    for (x, y) in [(a, b), (b, a)] {
        let m = p50(x);
        let hi = y.quantile(Quantile::P99).unwrap_or(y.layout().limit_ns());
        assert!(
            y.min().unwrap() <= m && m <= hi,
            "{what}: a median {m} ns outside the other's range"
        );
    }
}
