//! The load supervisor: starts each part of a load in its own session and process group (and
//! its own cgroup-v2 child where the v2 hierarchy exists), restarts it when it exits, and stops
//! it so that nothing is left: SIGTERM to the group, a grace period, then SIGKILL to the group
//! and `cgroup.kill`, and a check by process group and cgroup that everything is gone.
//!
//! Each part's group leader is a small watchdog that runs the load as its child and kills the
//! whole group and cgroup when the pipe to latlab closes, however latlab died; the load process
//! itself has `PR_SET_PDEATHSIG` for the watchdog. The watchdog is latlab's own executable
//! started with `posix_spawn` ([`WATCHDOG_ARG`], [`watchdog_main`]): glibc spawns with
//! `CLONE_VM | CLONE_VFORK`, so nothing of latlab's address space is copied. It used to be a
//! `fork` of latlab, which copied latlab's page tables and its hundreds of MiB of locked
//! mappings with the forking CPU in the kernel for 220–340 µs at every load restart (the
//! recorder named `preempt_off latlab-loads` 84–294 µs on measured CPUs); the watchdog's own
//! fork of the load copies a small process.
//! All spawning happens on one long-lived thread (`latlab-loads`). The watchdog is held on a
//! pipe until the parent has written its process group to the ledger, moved it into its
//! cgroup and set its affinity, so no load code runs unrecorded.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::ledger::{Entry, EntryId, Ledger};

/// One command to supervise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartSpec {
    /// The profile as the user named it (`stress-kernel`, `cmd:…`).
    pub profile: String,
    /// The part of the profile (`compile`, `stress-ng`, …).
    pub part: String,
    /// The exact `/bin/sh -c` script.
    pub command: String,
    /// stdout and stderr go here (appended across restarts).
    pub log: PathBuf,
    /// Account its I/O from the kernel ([`IoReport`]).
    pub account_io: bool,
}

/// The kernel's I/O counters of a process (`/proc/<pid>/io`), bytes. A process's counters
/// include those of the children it has reaped (the kernel adds them in `wait`), so the sum
/// over the live (and zombie) processes of a part is its total so far, with nothing counted
/// twice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoCounters {
    /// Bytes passed to read-like syscalls (page cache hits included).
    pub rchar: u64,
    /// Bytes passed to write-like syscalls.
    pub wchar: u64,
    /// Bytes fetched from storage.
    pub read_bytes: u64,
    /// Bytes sent (or, buffered, dirtied) to storage.
    pub write_bytes: u64,
    /// Dirty bytes that were truncated before writeback (`rm` of a file being written).
    pub cancelled_write_bytes: u64,
}

impl IoCounters {
    /// Parse the text of `/proc/<pid>/io`; None when a field is missing.
    pub fn parse(s: &str) -> Option<IoCounters> {
        let get = |k: &str| -> Option<u64> {
            s.lines().find_map(|l| {
                let (key, v) = l.split_once(':')?;
                (key.trim() == k).then(|| v.trim().parse().ok())?
            })
        };
        Some(IoCounters {
            rchar: get("rchar")?,
            wchar: get("wchar")?,
            read_bytes: get("read_bytes")?,
            write_bytes: get("write_bytes")?,
            cancelled_write_bytes: get("cancelled_write_bytes")?,
        })
    }

    fn zip(&mut self, o: &IoCounters, f: impl Fn(u64, u64) -> u64) {
        self.rchar = f(self.rchar, o.rchar);
        self.wchar = f(self.wchar, o.wchar);
        self.read_bytes = f(self.read_bytes, o.read_bytes);
        self.write_bytes = f(self.write_bytes, o.write_bytes);
        self.cancelled_write_bytes = f(self.cancelled_write_bytes, o.cancelled_write_bytes);
    }

    pub fn add(&mut self, o: &IoCounters) {
        self.zip(o, u64::saturating_add);
    }

    /// Field-wise maximum: both sides are lower bounds of a monotonic total.
    pub fn max(&mut self, o: &IoCounters) {
        self.zip(o, u64::max);
    }
}

/// A part's I/O as the kernel accounted it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IoReport {
    pub total: IoCounters,
    /// From the part's first start to the last sample before it was stopped.
    pub interval_s: f64,
    /// /proc samples taken.
    pub samples: u64,
}

/// How [`IoReport`] is measured, for the record.
pub const IO_SOURCE: &str = "sum of /proc/<pid>/io over the part's cgroup (or process group), sampled every 100 ms (500 ms without a cgroup) and just before the stop; iterations that ended by themselves: at least wait4's rusage (ru_inblock/ru_oublock)";

/// Interval of the /proc I/O samples.
const IO_SAMPLE: Duration = Duration::from_millis(100);

#[derive(Debug, Clone)]
pub struct Options {
    /// CPU affinity of the loads (None: inherit).
    pub cpus: Option<Vec<u32>>,
    /// Where to create the cgroup-v2 children (None: process groups only).
    pub cgroup_parent: Option<PathBuf>,
    /// Between SIGTERM and SIGKILL.
    pub grace: Duration,
    /// Prefix of the cgroup names (unique per run).
    pub tag: String,
    /// Consecutive failures after which a part counts as crashing.
    pub crash_after: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            cpus: None,
            cgroup_parent: cgroup2_root(),
            grace: Duration::from_secs(10),
            tag: format!("latlab-{}", std::process::id()),
            crash_after: 3,
        }
    }
}

/// The cgroup-v2 mount: `/sys/fs/cgroup` on pure-v2 hosts, `/sys/fs/cgroup/unified` on hybrid
/// ones. Never a v1 hierarchy: a new v1 `cpu` group has `cpu.rt_runtime_us=0`, and SCHED_FIFO
/// fails inside it.
pub fn cgroup2_root() -> Option<PathBuf> {
    const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
    for p in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
        let c = CString::new(p).ok()?;
        // SAFETY: c is a valid path; st is plain data filled by the kernel.
        let mut st: libc::statfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0
            && st.f_type as i64 == CGROUP2_SUPER_MAGIC
        {
            return Some(PathBuf::from(p));
        }
    }
    None
}

/// What `poll` sees of a part.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartStatus {
    pub profile: String,
    pub part: String,
    pub restarts: u32,
    pub failures: u32,
    pub consecutive_failures: u32,
    /// `consecutive_failures` reached the limit.
    pub crashing: bool,
    pub last_exit: Option<String>,
}

/// How the stop went for one part.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StopReport {
    /// From SIGTERM to nothing left (or to the end of the grace period).
    pub term_s: f64,
    /// SIGKILL / cgroup.kill were needed.
    pub killed: bool,
    /// Processes still present after SIGKILL (should be empty).
    pub survivors: Vec<i32>,
    /// Dead processes of the group not yet reaped by their (foreign) parent.
    pub zombies: usize,
}

/// Everything recorded about one part over the session.
#[derive(Debug, Clone, PartialEq)]
pub struct PartReport {
    pub spec: PartSpec,
    pub cgroup: Option<PathBuf>,
    pub started_unix_s: f64,
    pub stopped_unix_s: f64,
    pub starts: u32,
    pub restarts: u32,
    pub failures: u32,
    pub crashing: bool,
    /// Exit statuses of iterations that ended by themselves, counted (`exit 0`, `signal 11`).
    pub exits: BTreeMap<String, u32>,
    /// Last exit code of an iteration that ended by itself.
    pub last_exit_code: Option<i32>,
    /// The status of the iteration latlab stopped.
    pub final_status: Option<String>,
    /// User+system CPU seconds of waited-for processes (wait4 rusage).
    pub rusage_cpu_s: f64,
    /// `usage_usec` of the part's cgroup (includes everything that ran in it).
    pub cgroup_cpu_s: Option<f64>,
    /// Wall time of the iterations that ended by themselves with exit 0.
    pub clean_iterations_s: f64,
    /// The kernel's I/O accounting (parts with `account_io`).
    pub io: Option<IoReport>,
    pub pgids: Vec<i32>,
    pub stop: StopReport,
    pub notes: Vec<String>,
}

/// Running supervisor; [`Supervisor::stop`] returns the reports.
pub struct Supervisor {
    status: Arc<Mutex<Vec<PartStatus>>>,
    stop: Arc<AtomicBool>,
    wake: mpsc::Sender<()>,
    thread: Option<std::thread::JoinHandle<Vec<PartReport>>>,
}

impl Supervisor {
    /// Start every part (ledger entries are written before each creation). Returns once all
    /// are running, or with the first error after undoing what was started.
    pub fn start(
        specs: Vec<PartSpec>,
        opts: Options,
        ledger: Arc<Mutex<Ledger>>,
    ) -> io::Result<Supervisor> {
        let status = Arc::new(Mutex::new(
            specs
                .iter()
                .map(|s| PartStatus {
                    profile: s.profile.clone(),
                    part: s.part.clone(),
                    ..Default::default()
                })
                .collect(),
        ));
        let stop = Arc::new(AtomicBool::new(false));
        let (wake_tx, wake_rx) = mpsc::channel::<()>();
        let (ready_tx, ready_rx) = mpsc::channel::<io::Result<()>>();
        let (st, sp) = (status.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("latlab-loads".into())
            .spawn(move || run_thread(specs, opts, ledger, st, sp, wake_rx, ready_tx))?;
        let mut sup = Supervisor {
            status,
            stop,
            wake: wake_tx,
            thread: Some(thread),
        };
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(sup),
            Ok(Err(e)) => {
                sup.finish();
                Err(e)
            }
            Err(_) => {
                sup.finish();
                Err(io::Error::other("the load supervisor thread died"))
            }
        }
    }

    /// A copy of every part's status.
    pub fn status(&self) -> Vec<PartStatus> {
        self.status.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn finish(&mut self) -> Vec<PartReport> {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.wake.send(());
        match self.thread.take() {
            Some(t) => t.join().unwrap_or_default(),
            None => Vec::new(),
        }
    }

    /// Stop every part and wait until nothing of them remains.
    pub fn stop(mut self) -> Vec<PartReport> {
        self.finish()
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.finish();
    }
}

fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A live iteration of a part.
struct Child {
    pid: i32,
    entry: EntryId,
    started: Instant,
    /// Wait status once reaped.
    reaped: Option<i32>,
    /// SIGKILL sent to the rest of the group after the leader exited.
    drained: bool,
    /// Write end of the watchdog's pipe: closed when latlab dies, however it dies.
    _alive: OwnedFd,
    /// I/O of this iteration so far (field-wise maximum of the samples).
    io: IoCounters,
    /// It was moved into its cgroup (it had one and the move worked).
    in_cgroup: bool,
}

struct PartState {
    spec: PartSpec,
    report: PartReport,
    cgroup_entry: Option<EntryId>,
    child: Option<Child>,
    /// Earliest restart time.
    restart_at: Option<Instant>,
    quick_exits: u32,
    /// Failures since the last clean exit.
    consec: u32,
    first_start: Instant,
    /// I/O of the finished iterations.
    io_done: IoCounters,
    io_samples: u64,
    io_last_sample: Option<Instant>,
    /// Time of the last sample before the stop.
    io_end: Option<Instant>,
}

fn run_thread(
    specs: Vec<PartSpec>,
    opts: Options,
    ledger: Arc<Mutex<Ledger>>,
    status: Arc<Mutex<Vec<PartStatus>>>,
    stop: Arc<AtomicBool>,
    wake: mpsc::Receiver<()>,
    ready: mpsc::Sender<io::Result<()>>,
) -> Vec<PartReport> {
    // Loads are SCHED_OTHER whatever the caller runs at.
    let mut parts: Vec<PartState> = Vec::new();
    let mut first_err = None;
    for (i, spec) in specs.into_iter().enumerate() {
        let mut st = PartState {
            report: PartReport {
                spec: spec.clone(),
                cgroup: None,
                started_unix_s: now_unix(),
                stopped_unix_s: 0.0,
                starts: 0,
                restarts: 0,
                failures: 0,
                crashing: false,
                exits: BTreeMap::new(),
                last_exit_code: None,
                final_status: None,
                rusage_cpu_s: 0.0,
                cgroup_cpu_s: None,
                clean_iterations_s: 0.0,
                io: None,
                pgids: Vec::new(),
                stop: StopReport::default(),
                notes: Vec::new(),
            },
            spec,
            cgroup_entry: None,
            child: None,
            restart_at: None,
            quick_exits: 0,
            consec: 0,
            first_start: Instant::now(),
            io_done: IoCounters::default(),
            io_samples: 0,
            io_last_sample: None,
            io_end: None,
        };
        if let Some(parent) = &opts.cgroup_parent {
            let name: String = format!("{}-{i}-{}", opts.tag, st.spec.part)
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            let path = parent.join(name);
            match create_cgroup(&ledger, &path, &st.spec.profile) {
                Ok(id) => {
                    st.cgroup_entry = Some(id);
                    st.report.cgroup = Some(path);
                }
                Err(e) => st
                    .report
                    .notes
                    .push(format!("no cgroup ({}): {e}", path.display())),
            }
        }
        if first_err.is_none() {
            match spawn(&st, &opts, &ledger) {
                Ok(c) => {
                    st.report.pgids.push(c.pid);
                    st.report.starts = 1;
                    st.child = Some(c);
                }
                Err(e) => {
                    first_err = Some(io::Error::new(
                        e.kind(),
                        format!(
                            "could not start load {} ({}): {e}",
                            st.spec.profile, st.spec.part
                        ),
                    ))
                }
            }
        }
        parts.push(st);
    }
    let failed = first_err.is_some();
    let _ = ready.send(match first_err {
        Some(e) => Err(e),
        None => Ok(()),
    });
    if !failed {
        while !stop.load(Ordering::SeqCst) {
            for p in parts.iter_mut() {
                // Without a cgroup the members are found by a scan of /proc: less often.
                let every = if p.report.cgroup.is_some() {
                    IO_SAMPLE
                } else {
                    IO_SAMPLE * 5
                };
                if p.io_last_sample.is_none_or(|t| t.elapsed() >= every) {
                    sample_io(p);
                }
                tick(p, &opts, &ledger);
            }
            if let Ok(mut s) = status.lock() {
                for (p, s) in parts.iter().zip(s.iter_mut()) {
                    s.restarts = p.report.restarts;
                    s.failures = p.report.failures;
                    s.crashing = p.report.crashing;
                    s.consecutive_failures = p.consec;
                    s.last_exit = last_exit(p);
                }
            }
            let _ = wake.recv_timeout(Duration::from_millis(50));
        }
    }
    stop_all(&mut parts, &opts, &ledger);
    parts.into_iter().map(|p| p.report).collect()
}

fn last_exit(p: &PartState) -> Option<String> {
    p.report
        .final_status
        .clone()
        .or_else(|| p.report.last_exit_code.map(|c| format!("exit {c}")))
}

fn create_cgroup(ledger: &Arc<Mutex<Ledger>>, path: &Path, name: &str) -> io::Result<EntryId> {
    let id = ledger
        .lock()
        .map_err(|_| io::Error::other("ledger lock poisoned"))?
        .add(Entry::ProcessGroup {
            pgid: 0,
            cgroup: Some(path.to_path_buf()),
            name: name.to_string(),
            leader_starttime: None,
        })?;
    if let Err(e) = std::fs::create_dir(path) {
        if let Ok(mut l) = ledger.lock() {
            let _ = l.forget(id);
        }
        return Err(e);
    }
    Ok(id)
}

fn to_cstring(b: &[u8]) -> io::Result<CString> {
    CString::new(b)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL byte in a load command"))
}

/// The hidden first argument that makes latlab's own executable a load's watchdog
/// ([`watchdog_main`]); `latlab`'s `main` checks for it before anything else.
pub const WATCHDOG_ARG: &str = "__load-watchdog";

/// Start one iteration of a part: latlab's own executable as its watchdog, spawned with
/// `posix_spawn` (no copy of latlab's address space; see the module docs) and held on the
/// pipe until it is recorded.
fn spawn(p: &PartState, opts: &Options, ledger: &Arc<Mutex<Ledger>>) -> io::Result<Child> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&p.spec.log)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.spec.log.display())))?;
    spawn_watched(
        &Spawn {
            command: &p.spec.command,
            name: format!("{} ({})", p.spec.profile, p.spec.part),
            env: vec![("LATLAB_LOAD".into(), p.spec.profile.clone().into())],
            out: log.as_raw_fd(),
            cgroup: p.report.cgroup.as_deref(),
            // Without --load-cpus: every CPU latlab could use, not the housekeeping CPUs this
            // thread is confined to (`rt::confine_calling_thread`).
            cpus: Some(opts.cpus.clone().unwrap_or_else(crate::rt::initial_cpus)),
        },
        ledger,
    )
}

/// What [`spawn_watched`] starts.
struct Spawn<'a> {
    /// The `/bin/sh -c` script.
    command: &'a str,
    /// Its name in the ledger.
    name: String,
    /// Set in its environment (replacing latlab's value). `LATLAB_LOAD` is never inherited.
    env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    /// Its stdout and stderr.
    out: i32,
    /// The cgroup it goes into (made by the caller).
    cgroup: Option<&'a Path>,
    /// Its CPU affinity (None: the calling thread's).
    cpus: Option<Vec<u32>>,
}

/// Start `sh -c COMMAND` under a watchdog: latlab's own executable, spawned with
/// `posix_spawn` (no copy of latlab's address space; see the module docs), in a session and
/// process group of its own, held on the pipe until its group is in the ledger, it is in its
/// cgroup and has its affinity; then let go.
fn spawn_watched(p: &Spawn, ledger: &Arc<Mutex<Ledger>>) -> io::Result<Child> {
    let exe = to_cstring(b"/proc/self/exe")?;
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    let kill_file = p.cgroup.and_then(|cg| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(cg.join("cgroup.kill"))
            .ok()
    });
    let argv_c = [
        to_cstring(b"latlab-watchdog")?,
        to_cstring(WATCHDOG_ARG.as_bytes())?,
        to_cstring(parent.to_string().as_bytes())?,
        to_cstring(if kill_file.is_some() { b"1" } else { b"0" })?,
        to_cstring(p.command.as_bytes())?,
    ];
    let mut argv: Vec<*mut libc::c_char> = argv_c.iter().map(|c| c.as_ptr() as *mut _).collect();
    argv.push(std::ptr::null_mut());
    let mut env_c = Vec::new();
    for (k, v) in std::env::vars_os() {
        if k == "LATLAB_LOAD" || p.env.iter().any(|(n, _)| *n == k) {
            continue;
        }
        let mut kv = k.as_bytes().to_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        if let Ok(c) = CString::new(kv) {
            env_c.push(c);
        }
    }
    for (k, v) in &p.env {
        let mut kv = k.as_bytes().to_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        env_c.push(to_cstring(&kv)?);
    }
    let mut envp: Vec<*mut libc::c_char> = env_c.iter().map(|c| c.as_ptr() as *mut _).collect();
    envp.push(std::ptr::null_mut());
    let mut fds = [0i32; 2];
    // SAFETY: fds is a valid 2-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 returned two fresh fds that we own.
    let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // The watchdog gets the pipe as 0, cgroup.kill as 1 and the output as 2; every other
    // descriptor of latlab is close-on-exec (Rust opens them so; the pipe too), so the
    // watchdog holds none of them: not the recorder's tracefs files (an instance cannot be
    // removed while they are open), /dev/cpu_dma_latency or other watchdogs' pipes.
    let spawned = posix_spawn_watchdog(
        &exe,
        &argv,
        &envp,
        [
            rd.as_raw_fd(),
            kill_file.as_ref().map_or(-1, |f| f.as_raw_fd()),
            p.out,
        ],
    );
    let pid = spawned?;
    drop(rd);
    // The child is held: record it, place it, then let it go.
    let entry = ledger
        .lock()
        .map_err(|_| io::Error::other("ledger lock poisoned"))
        .and_then(|mut l| {
            l.add(Entry::ProcessGroup {
                pgid: pid,
                cgroup: None,
                name: p.name.clone(),
                // The child is held on the pipe, alive: its start time is readable now.
                leader_starttime: crate::ledger::process_starttime(pid as u32),
            })
        });
    let entry = match entry {
        Ok(e) => e,
        Err(e) => {
            // SAFETY: plain syscalls on our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
            return Err(e);
        }
    };
    // Failure leaves it supervised by process group only; stop still works.
    let in_cgroup = p
        .cgroup
        .is_some_and(|cg| std::fs::write(cg.join("cgroup.procs"), pid.to_string()).is_ok());
    // SAFETY: plain syscalls on our own child with initialised arguments.
    unsafe {
        let param = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(pid, libc::SCHED_OTHER, &param);
        if let Some(cpus) = p.cpus.as_ref().filter(|c| !c.is_empty()) {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &c in cpus {
                if (c as usize) < libc::CPU_SETSIZE as usize {
                    libc::CPU_SET(c as usize, &mut set);
                }
            }
            libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
        libc::write(wr.as_raw_fd(), b"g".as_ptr() as *const libc::c_void, 1);
    }
    Ok(Child {
        pid,
        entry,
        _alive: wr,
        started: Instant::now(),
        reaped: None,
        drained: false,
        io: IoCounters::default(),
        in_cgroup,
    })
}

/// One command run once under a watchdog (`latlab run`'s shell actions), as a load's
/// iteration is: its own session and process group, and its own cgroup where it can have one
/// (`latlab-<pid>-action-<n>` under the cgroup-v2 root), both in the ledger before they
/// exist, so `latlab cleanup` finds them after a SIGKILL, and the watchdog kills them when
/// latlab dies. [`Watched::kill`] reaches every process it started, also one that left the
/// group with `setsid` (the cgroup's `cgroup.kill`). Dropped unfinished, it is killed and
/// waited for.
pub struct Watched {
    child: Child,
    cgroup: Option<(PathBuf, EntryId)>,
    ledger: Arc<Mutex<Ledger>>,
    /// Nothing of it is left and its ledger entries are forgotten (or left on purpose).
    done: bool,
}

/// Numbers the cgroups of [`Watched`] commands within this process.
static WATCHED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl Watched {
    /// Start `sh -c command` with `env` set, its stdout and stderr on `out`, named `name` in
    /// the ledger; in a cgroup of its own under `cgroup_parent` when given. The note says why
    /// it has none when it should have had one (then its process group is all there is).
    pub fn start(
        command: &str,
        name: &str,
        env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
        out: std::os::fd::BorrowedFd<'_>,
        cgroup_parent: Option<&Path>,
        ledger: Arc<Mutex<Ledger>>,
    ) -> io::Result<(Watched, Option<String>)> {
        let mut note = None;
        let mut cgroup = None;
        if let Some(parent) = cgroup_parent {
            let n = WATCHED.fetch_add(1, Ordering::Relaxed);
            let path = parent.join(format!("latlab-{}-action-{n}", std::process::id()));
            match create_cgroup(&ledger, &path, name) {
                Ok(id) => cgroup = Some((path, id)),
                Err(e) => note = Some(format!("cannot create cgroup {}: {e}", path.display())),
            }
        }
        let spawned = spawn_watched(
            &Spawn {
                command,
                name: name.to_string(),
                env,
                out: out.as_raw_fd(),
                cgroup: cgroup.as_ref().map(|c: &(PathBuf, EntryId)| c.0.as_path()),
                cpus: None,
            },
            &ledger,
        );
        let child = match spawned {
            Ok(c) => c,
            Err(e) => {
                if let Some((cg, id)) = cgroup {
                    if std::fs::remove_dir(&cg).is_ok() {
                        if let Ok(mut l) = ledger.lock() {
                            let _ = l.forget(id);
                        }
                    }
                }
                return Err(e);
            }
        };
        if let (Some((cg, _)), false) = (&cgroup, child.in_cgroup) {
            note = Some(format!("cannot move it into cgroup {}", cg.display()));
        }
        Ok((
            Watched {
                child,
                cgroup,
                ledger,
                done: false,
            },
            note,
        ))
    }

    /// Its cgroup, if it has one.
    pub fn cgroup(&self) -> Option<&Path> {
        self.cgroup.as_ref().map(|c| c.0.as_path())
    }

    fn cgroup_if_in(&self) -> Option<&Path> {
        self.cgroup().filter(|_| self.child.in_cgroup)
    }

    /// The command's wait status once it has ended (the watchdog passes the shell's on).
    /// Never blocks.
    pub fn try_wait(&mut self) -> io::Result<Option<i32>> {
        if let Some(s) = self.child.reaped {
            return Ok(Some(s));
        }
        let mut status = 0;
        // SAFETY: plain syscall on our own child; WNOHANG never blocks.
        match unsafe { libc::waitpid(self.child.pid, &mut status, libc::WNOHANG) } {
            0 => Ok(None),
            r if r == self.child.pid => {
                self.child.reaped = Some(status);
                Ok(Some(status))
            }
            _ => {
                let e = io::Error::last_os_error();
                // Reaped by someone else (should not happen): it is gone.
                self.child.reaped = Some(0);
                Err(e)
            }
        }
    }

    /// Live processes of it: in its process group or its cgroup (what `cmd &` left behind,
    /// also after `setsid`), the watchdog until it is reaped.
    pub fn remaining(&self) -> Vec<i32> {
        remaining(&self.child, self.cgroup_if_in()).0
    }

    /// SIGKILL every process of it: its process group, and its cgroup (`cgroup.kill`).
    pub fn kill(&mut self) {
        signal_group(&self.child, self.cgroup_if_in(), libc::SIGKILL);
    }

    /// Once it has ended and was killed: reap the watchdog, remove the cgroup when nothing is
    /// left and forget the ledger entries. Never blocks; true when nothing of it is left.
    pub fn try_finish(&mut self) -> bool {
        if self.done {
            return true;
        }
        if self.child.reaped.is_none() && !matches!(self.try_wait(), Ok(Some(_)) | Err(_)) {
            return false;
        }
        if !self.remaining().is_empty() {
            return false;
        }
        if let Some((cg, id)) = &self.cgroup {
            match std::fs::remove_dir(cg) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(_) => return false,
            }
            if let Ok(mut l) = self.ledger.lock() {
                let _ = l.forget(*id);
            }
        }
        if let Ok(mut l) = self.ledger.lock() {
            let _ = l.forget(self.child.entry);
        }
        self.done = true;
        true
    }

    /// Kill it and wait until nothing of it is left (up to [`crate::ledger::CGROUP_EMPTY_WAIT`]).
    /// Err says what is left; its ledger entries stay, for `latlab cleanup`.
    pub fn finish(mut self) -> Result<(), String> {
        self.finish_blocking()
    }

    fn finish_blocking(&mut self) -> Result<(), String> {
        self.kill();
        let t0 = Instant::now();
        while !self.try_finish() {
            if t0.elapsed() >= crate::ledger::CGROUP_EMPTY_WAIT {
                self.done = true;
                return Err(self.leftover());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// What is left of it, for a message.
    fn leftover(&self) -> String {
        let left = self.remaining();
        match self.cgroup() {
            Some(cg) => format!(
                "processes {left:?} or cgroup {} still there after {:.0} s (left in the ledger for latlab cleanup)",
                cg.display(),
                crate::ledger::CGROUP_EMPTY_WAIT.as_secs_f64()
            ),
            None => format!(
                "processes {left:?} still there after {:.0} s (left in the ledger for latlab cleanup)",
                crate::ledger::CGROUP_EMPTY_WAIT.as_secs_f64()
            ),
        }
    }

    /// Give up on it without waiting: its ledger entries stay (for `latlab cleanup`), and
    /// what is left is described.
    pub fn abandon(mut self) -> String {
        self.done = true;
        self.leftover()
    }
}

impl Drop for Watched {
    /// An early end (an error, a panic) leaves nothing of it behind.
    fn drop(&mut self) {
        if !self.done {
            let _ = self.finish_blocking();
        }
    }
}

/// `posix_spawn` `exe` with `fds` as its descriptors 0, 1, 2 (-1: closed), every signal
/// at its default and none blocked. glibc spawns with `CLONE_VM | CLONE_VFORK`: nothing of
/// latlab's address space is copied. A `fork` of latlab (its page tables, hundreds of locked
/// MiB of mappings) kept the forking CPU in the kernel for 220–340 µs per load restart
/// (measured with the syscalls events), on a CPU that may be measured.
fn posix_spawn_watchdog(
    exe: &CString,
    argv: &[*mut libc::c_char],
    envp: &[*mut libc::c_char],
    fds: [i32; 3],
) -> io::Result<i32> {
    // Above 2, so no dup2 below overwrites a source still to be duplicated.
    let mut high = [-1i32; 3];
    let mut owned = Vec::new();
    for (k, &fd) in fds.iter().enumerate() {
        if fd >= 0 {
            // SAFETY: fcntl on a descriptor we hold; the result is a new one we own.
            let d = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
            if d < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: d is a fresh descriptor.
            owned.push(unsafe { OwnedFd::from_raw_fd(d) });
            high[k] = d;
        }
    }
    // SAFETY: the attribute and file-action objects are initialised before use and destroyed
    // after; argv and envp are NUL-terminated arrays of C strings that outlive the call.
    unsafe {
        let mut fa: libc::posix_spawn_file_actions_t = std::mem::zeroed();
        let mut at: libc::posix_spawnattr_t = std::mem::zeroed();
        libc::posix_spawn_file_actions_init(&mut fa);
        libc::posix_spawnattr_init(&mut at);
        for (k, &d) in high.iter().enumerate() {
            if d >= 0 {
                libc::posix_spawn_file_actions_adddup2(&mut fa, d, k as i32);
            } else {
                libc::posix_spawn_file_actions_addclose(&mut fa, k as i32);
            }
        }
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::posix_spawnattr_setsigdefault(&mut at, &all);
        libc::posix_spawnattr_setsigmask(&mut at, &none);
        libc::posix_spawnattr_setflags(
            &mut at,
            (libc::POSIX_SPAWN_SETSIGDEF | libc::POSIX_SPAWN_SETSIGMASK) as libc::c_short,
        );
        let mut pid: libc::pid_t = 0;
        let r = libc::posix_spawn(
            &mut pid,
            exe.as_ptr(),
            &fa,
            &at,
            argv.as_ptr(),
            envp.as_ptr(),
        );
        libc::posix_spawn_file_actions_destroy(&mut fa);
        libc::posix_spawnattr_destroy(&mut at);
        drop(owned);
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        Ok(pid)
    }
}

/// A load's watchdog: latlab's executable started by [`spawn`] with `WATCHDOG_ARG PARENT
/// KILL COMMAND`, the hold pipe as 0, cgroup.kill as 1 (KILL = 1) and the log as 2. It makes
/// its own session, waits for latlab's go-ahead, forks the load (`/bin/sh -c COMMAND`, with
/// `PR_SET_PDEATHSIG`) — a fork of this small process, not of latlab — and stays as the
/// group's [`watchdog`]. Never returns.
pub fn watchdog_main(args: &[std::ffi::OsString]) -> ! {
    let arg = |k: usize| args.get(k).map(|a| a.as_bytes().to_vec());
    let (Some(parent), Some(kill), Some(command)) = (arg(2), arg(3), arg(4)) else {
        eprintln!("latlab: error: {WATCHDOG_ARG} is latlab's own: it is not for users");
        std::process::exit(1);
    };
    let parent: i32 = std::str::from_utf8(&parent)
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(-1);
    let has_kill = kill == b"1";
    // Everything the load's child needs, prepared before the fork.
    let (Ok(sh), Ok(a0), Ok(a1), Ok(cmd), Ok(null)) = (
        CString::new("/bin/sh"),
        CString::new("sh"),
        CString::new("-c"),
        CString::new(command),
        CString::new("/dev/null"),
    ) else {
        std::process::exit(1);
    };
    let argv = [a0.as_ptr(), a1.as_ptr(), cmd.as_ptr(), std::ptr::null()];
    let env_c: Vec<CString> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).ok()
        })
        .collect();
    let mut envp: Vec<*const libc::c_char> = env_c.iter().map(|c| c.as_ptr()).collect();
    envp.push(std::ptr::null());
    // SAFETY: a single-threaded process (nothing but main runs yet); plain system calls on
    // data prepared above.
    unsafe {
        libc::prctl(
            libc::PR_SET_NAME,
            c"latlab-watch".as_ptr() as libc::c_ulong,
            0,
            0,
            0,
        );
        libc::setsid();
        if libc::getppid() != parent {
            libc::_exit(1);
        }
        // Rust's runtime ignores SIGPIPE; the load gets every signal at its default.
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = libc::SIG_DFL;
        for sig in 1..32 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
        close_range(3, u32::MAX);
        let null_fd = libc::open(null.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        let mut b = 0u8;
        if libc::read(0, &mut b as *mut u8 as *mut libc::c_void, 1) != 1 {
            libc::_exit(1);
        }
        // The load runs in a child. PR_SET_PDEATHSIG covers only the process that set it (a
        // fork clears it), so the load's own children would outlive a SIGKILLed latlab: the
        // watchdog notices latlab's death as EOF on the pipe and kills the group and cgroup.
        let me = libc::getpid();
        let gc = libc::fork();
        if gc < 0 {
            libc::_exit(126);
        }
        if gc == 0 {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            );
            // The watchdog died before the prctl: no death signal will come.
            if libc::getppid() != me {
                libc::_exit(1);
            }
            if null_fd >= 0 {
                libc::dup2(null_fd, 0);
            } else {
                libc::close(0);
            }
            libc::dup2(2, 1);
            libc::execve(sh.as_ptr(), argv.as_ptr(), envp.as_ptr());
            libc::_exit(127);
        }
        if null_fd >= 0 {
            libc::close(null_fd);
        }
        watchdog(gc, 0, if has_kill { 1 } else { -1 })
    }
}

/// Close `lo..=hi` (nothing when `lo > hi`): close_range(2), or close() one by one up to the
/// descriptor limit on kernels without it (before 5.9).
fn close_range(lo: u32, hi: u32) {
    if lo > hi {
        return;
    }
    // SAFETY: plain system calls on our own descriptor table.
    unsafe {
        if libc::syscall(libc::SYS_close_range, lo, hi, 0) == 0 {
            return;
        }
        let max = libc::sysconf(libc::_SC_OPEN_MAX).clamp(1024, 1 << 20) as u32;
        for fd in lo..=hi.min(max) {
            libc::close(fd as i32);
        }
    }
}

/// The group leader after fork: waits for the load (grandchild `gc`) and passes its status
/// on, or kills the whole group when the pipe to latlab reports EOF. Only async-signal-safe
/// calls: it runs in the child of a multi-threaded process and never execs.
///
/// # Safety
/// Call only in a freshly forked child, with `rd` the read end of the hold pipe.
unsafe fn watchdog(gc: i32, rd: i32, kill_fd: i32) -> ! {
    // Stop requests go to the load; the watchdog leaves with it (SIGKILL still kills it).
    let mut sa: libc::sigaction = std::mem::zeroed();
    sa.sa_sigaction = libc::SIG_IGN;
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
    // Keep only the pipe (as fd 0) and cgroup.kill (fd 1): other inherited fds (other loads'
    // pipes) would delay their EOF.
    libc::dup2(rd, 0);
    if kill_fd >= 0 {
        libc::dup2(kill_fd, 1);
    } else {
        libc::close(1);
    }
    libc::syscall(libc::SYS_close_range, 2u32, u32::MAX, 0u32);
    loop {
        let mut st = 0;
        if libc::waitpid(gc, &mut st, libc::WNOHANG) == gc {
            if libc::WIFEXITED(st) {
                libc::_exit(libc::WEXITSTATUS(st));
            }
            let sig = libc::WTERMSIG(st);
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &dfl, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig);
        }
        let mut pfd = libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        };
        if libc::poll(&mut pfd, 1, 100) > 0 {
            // latlab is gone (the pipe only ever closes).
            if kill_fd >= 0 {
                libc::write(1, b"1".as_ptr() as *const libc::c_void, 1);
            }
            libc::kill(0, libc::SIGKILL);
            libc::_exit(137);
        }
    }
}

/// Reap the leader without blocking; adds its rusage. True once reaped.
fn reap(c: &mut Child, report: &mut PartReport) -> bool {
    if c.reaped.is_some() {
        return true;
    }
    let mut status = 0;
    // SAFETY: rusage is plain data; pid is our child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(c.pid, &mut status, libc::WNOHANG, &mut ru) };
    if r == c.pid {
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        report.rusage_cpu_s += tv(ru.ru_utime) + tv(ru.ru_stime);
        // The kernel's read_bytes/write_bytes of the iteration and what it reaped, in
        // 512-byte units: a lower bound that misses nothing the samples missed at the end.
        c.io.max(&IoCounters {
            read_bytes: (ru.ru_inblock.max(0) as u64) * 512,
            write_bytes: (ru.ru_oublock.max(0) as u64) * 512,
            ..IoCounters::default()
        });
        c.reaped = Some(status);
        true
    } else if r < 0 {
        // ECHILD: someone else reaped it (should not happen); treat as gone.
        c.reaped = Some(0);
        true
    } else {
        false
    }
}

fn describe(status: i32) -> (String, Option<i32>) {
    if libc::WIFEXITED(status) {
        let c = libc::WEXITSTATUS(status);
        (format!("exit {c}"), Some(c))
    } else if libc::WIFSIGNALED(status) {
        (format!("signal {}", libc::WTERMSIG(status)), None)
    } else {
        (format!("status {status}"), None)
    }
}

/// Processes (pid, is_zombie) whose process group is `pgid`, from /proc.
pub fn group_members(pgid: i32) -> Vec<(i32, bool)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let mut f = stat[close + 1..].split_whitespace();
        let state = f.next().unwrap_or("");
        let _ppid = f.next();
        if f.next().and_then(|s| s.parse::<i32>().ok()) == Some(pgid) {
            out.push((pid, state == "Z" || state == "X"));
        }
    }
    out
}

/// Pids listed in a cgroup's `cgroup.procs` (empty when the cgroup is gone).
pub fn cgroup_procs(cg: &Path) -> Vec<i32> {
    std::fs::read_to_string(cg.join("cgroup.procs"))
        .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

/// Live (non-zombie) processes left of an iteration, by group and by cgroup.
fn remaining(c: &Child, cgroup: Option<&Path>) -> (Vec<i32>, usize) {
    let members = group_members(c.pid);
    let zombies = members.iter().filter(|m| m.1).count();
    let mut live: Vec<i32> = members.into_iter().filter(|m| !m.1).map(|m| m.0).collect();
    if let Some(cg) = cgroup {
        for p in cgroup_procs(cg) {
            // A zombie still listed is dead; only count live ones.
            let zombie = std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    s.rfind(')')
                        .map(|i| s[i + 1..].trim_start().starts_with('Z'))
                })
                .unwrap_or(true);
            if !zombie && !live.contains(&p) {
                live.push(p);
            }
        }
    }
    (live, zombies)
}

fn signal_group(c: &Child, cgroup: Option<&Path>, sig: i32) {
    // SAFETY: plain syscalls; -pid names the group the child created with setsid.
    unsafe {
        libc::kill(-c.pid, sig);
        if c.reaped.is_none() {
            libc::kill(c.pid, sig);
        }
    }
    if sig == libc::SIGKILL {
        if let Some(cg) = cgroup {
            let _ = std::fs::write(cg.join("cgroup.kill"), "1");
        }
    }
}

/// Sum of `/proc/<pid>/io` over `pids` (processes that vanished in between are skipped).
pub fn io_of(pids: &[i32]) -> IoCounters {
    let mut sum = IoCounters::default();
    for pid in pids {
        if let Some(c) = std::fs::read_to_string(format!("/proc/{pid}/io"))
            .ok()
            .and_then(|s| IoCounters::parse(&s))
        {
            sum.add(&c);
        }
    }
    sum
}

/// Sample the I/O of a part's live iteration (see [`IoCounters`]): every process of its
/// cgroup, or of its process group without one; zombies too, whose counts are not yet
/// passed to their parent.
fn sample_io(p: &mut PartState) {
    if !p.spec.account_io {
        return;
    }
    let Some(c) = &mut p.child else { return };
    if c.reaped.is_some() {
        return;
    }
    let pids: Vec<i32> = match &p.report.cgroup {
        Some(cg) => cgroup_procs(cg),
        None => group_members(c.pid).into_iter().map(|m| m.0).collect(),
    };
    c.io.max(&io_of(&pids));
    p.io_samples += 1;
    p.io_last_sample = Some(Instant::now());
}

/// One supervision step: notice an exit, drain the group, restart when due.
fn tick(p: &mut PartState, opts: &Options, ledger: &Arc<Mutex<Ledger>>) {
    if let Some(c) = &mut p.child {
        if c.reaped.is_none() {
            if !reap(c, &mut p.report) {
                return;
            }
            let status = c.reaped.unwrap_or(0);
            let (desc, code) = describe(status);
            *p.report.exits.entry(desc).or_insert(0) += 1;
            p.report.last_exit_code = code;
            let ran = c.started.elapsed();
            if code == Some(0) {
                p.consec = 0;
                p.report.crashing = false;
                p.report.clean_iterations_s += ran.as_secs_f64();
            } else {
                p.report.failures += 1;
                p.consec += 1;
                p.report.crashing = p.consec >= opts.crash_after;
            }
            // Back off from a load that exits at once, so it cannot become a fork storm.
            let delay = if ran < Duration::from_secs(1) {
                p.quick_exits += 1;
                Duration::from_millis(100 << p.quick_exits.min(5).saturating_sub(1))
            } else {
                p.quick_exits = 0;
                Duration::ZERO
            };
            p.restart_at = Some(Instant::now() + delay);
        }
        // The leader is gone: whatever it left behind in its group goes too.
        let (live, _) = remaining(c, p.report.cgroup.as_deref());
        if !live.is_empty() {
            if !c.drained {
                signal_group(c, p.report.cgroup.as_deref(), libc::SIGKILL);
                c.drained = true;
            }
            return;
        }
        if let Ok(mut l) = ledger.lock() {
            let _ = l.forget(c.entry);
        }
        p.io_done.add(&c.io);
        p.child = None;
    }
    if p.restart_at.is_some_and(|t| Instant::now() >= t) {
        p.restart_at = None;
        match spawn(p, opts, ledger) {
            Ok(c) => {
                p.report.restarts += 1;
                p.report.starts += 1;
                if p.report.pgids.len() < 64 {
                    p.report.pgids.push(c.pid);
                }
                p.child = Some(c);
            }
            Err(e) => {
                p.report.failures += 1;
                p.consec += 1;
                p.report.crashing = p.consec >= opts.crash_after;
                p.report.notes.push(format!("restart failed: {e}"));
                p.restart_at = Some(Instant::now() + Duration::from_secs(1));
            }
        }
    }
}

/// SIGTERM every group, wait out the grace period, SIGKILL what is left, verify, remove the
/// cgroups and forget the ledger entries.
fn stop_all(parts: &mut [PartState], opts: &Options, ledger: &Arc<Mutex<Ledger>>) {
    // The last I/O sample, just before the signals: a process killed before its parent
    // reaps it takes its counts along.
    for p in parts.iter_mut() {
        sample_io(p);
        p.io_end = Some(Instant::now());
    }
    let t0 = Instant::now();
    for p in parts.iter_mut() {
        if let Some(c) = &p.child {
            signal_group(c, p.report.cgroup.as_deref(), libc::SIGTERM);
        }
    }
    let done = |p: &mut PartState| -> bool {
        match &mut p.child {
            None => true,
            Some(c) => {
                let reaped = reap(c, &mut p.report);
                reaped && remaining(c, p.report.cgroup.as_deref()).0.is_empty()
            }
        }
    };
    let mut pending: Vec<usize> = (0..parts.len()).collect();
    while !pending.is_empty() && t0.elapsed() < opts.grace {
        pending.retain(|&i| {
            let d = done(&mut parts[i]);
            if d {
                parts[i].report.stop.term_s = t0.elapsed().as_secs_f64();
            }
            !d
        });
        if !pending.is_empty() {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    for &i in &pending {
        let p = &mut parts[i];
        p.report.stop.term_s = t0.elapsed().as_secs_f64();
        p.report.stop.killed = true;
        if let Some(c) = &p.child {
            signal_group(c, p.report.cgroup.as_deref(), libc::SIGKILL);
        }
    }
    let t1 = Instant::now();
    while !pending.is_empty() && t1.elapsed() < Duration::from_secs(5) {
        pending.retain(|&i| !done(&mut parts[i]));
        if !pending.is_empty() {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    for p in parts.iter_mut() {
        p.report.stopped_unix_s = now_unix();
        if let Some(c) = &p.child {
            p.io_done.add(&c.io);
        }
        if p.spec.account_io {
            p.report.io = Some(IoReport {
                total: p.io_done,
                interval_s: p.io_end.map_or(0.0, |e| (e - p.first_start).as_secs_f64()),
                samples: p.io_samples,
            });
        }
        if let Some(c) = p.child.take() {
            let (live, zombies) = remaining(&c, p.report.cgroup.as_deref());
            p.report.stop.survivors = live.clone();
            p.report.stop.zombies = zombies;
            if let Some(s) = c.reaped {
                p.report.final_status = Some(describe(s).0);
            }
            if live.is_empty() {
                if let Ok(mut l) = ledger.lock() {
                    let _ = l.forget(c.entry);
                }
            } else {
                p.report.notes.push(format!(
                    "processes survived SIGKILL: {live:?} (left in the ledger for latlab cleanup)"
                ));
            }
        }
        if let Some(cg) = &p.report.cgroup {
            p.report.cgroup_cpu_s = std::fs::read_to_string(cg.join("cpu.stat"))
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find_map(|l| l.strip_prefix("usage_usec "))
                        .and_then(|v| v.trim().parse::<f64>().ok())
                })
                .map(|us| us / 1e6);
            // The group's processes are gone or reported as survivors; a killed one blocked
            // in I/O may still be leaving the cgroup (see CGROUP_EMPTY_WAIT).
            let wait = if p.report.stop.survivors.is_empty() {
                crate::ledger::CGROUP_EMPTY_WAIT
            } else {
                Duration::from_secs(2)
            };
            let removed = match crate::ledger::remove_cgroup(cg, wait) {
                Ok(waited) => {
                    if waited.as_millis() >= 500 {
                        p.report.notes.push(format!(
                            "its processes took {:.1} s to leave cgroup {}",
                            waited.as_secs_f64(),
                            cg.display()
                        ));
                    }
                    true
                }
                Err(e) => {
                    p.report
                        .notes
                        .push(format!("could not remove cgroup {}: {e}", cg.display()));
                    false
                }
            };
            if removed {
                if let (Some(id), Ok(mut l)) = (p.cgroup_entry, ledger.lock()) {
                    let _ = l.forget(id);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/proc/self/io` as captured on the VM; a missing field is no record, not a zero.
    #[test]
    fn io_counters_parse() {
        let s = "rchar: 6976\nwchar: 0\nsyscr: 10\nsyscw: 0\nread_bytes: 0\nwrite_bytes: 4096\ncancelled_write_bytes: 0\n";
        let c = IoCounters::parse(s).unwrap();
        assert_eq!((c.rchar, c.wchar, c.write_bytes), (6976, 0, 4096));
        assert!(IoCounters::parse("rchar: 1\nwchar: 2\n").is_none());
        let mut a = c;
        a.max(&IoCounters {
            read_bytes: 512,
            write_bytes: 1024,
            ..IoCounters::default()
        });
        assert_eq!((a.rchar, a.read_bytes, a.write_bytes), (6976, 512, 4096));
        a.add(&c);
        assert_eq!((a.rchar, a.write_bytes), (2 * 6976, 8192));
    }

    /// The sum over pids reads the live kernel counters: this process's rchar grows when it
    /// reads a file, and a pid that does not exist adds nothing.
    #[test]
    fn io_of_reads_live_counters() {
        let me = std::process::id() as i32;
        let before = io_of(&[me]);
        let n = std::fs::read("/proc/self/status").unwrap().len() as u64;
        let after = io_of(&[me, i32::MAX]);
        assert!(after.rchar >= before.rchar + n, "{before:?} {after:?}");
    }
}
