//! Starting a command under its watchdog: `posix_spawn` of latlab's own executable (no copy
//! of latlab's address space), held on a pipe until its process group is in the ledger, it is
//! in its cgroup and has its affinity; what comes back is the [`Child`] the caller supervises.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::io_counters::IoCounters;
use super::watchdog::WATCHDOG_ARG;
use crate::ledger::{Entry, EntryId, Ledger};

/// A live iteration of a part (or a watched command): its watchdog, the leader of its group.
pub(super) struct Child {
    pub(super) pid: i32,
    pub(super) entry: EntryId,
    pub(super) started: Instant,
    /// Wait status once reaped.
    pub(super) reaped: Option<i32>,
    /// SIGKILL sent to the rest of the group after the leader exited.
    pub(super) drained: bool,
    /// Write end of the watchdog's pipe: closed when latlab dies, however it dies.
    _alive: OwnedFd,
    /// I/O of this iteration so far (field-wise maximum of the samples).
    pub(super) io: IoCounters,
    /// It was moved into its cgroup (it had one and the move worked).
    pub(super) in_cgroup: bool,
}

fn to_cstring(b: &[u8]) -> io::Result<CString> {
    CString::new(b)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL byte in a load command"))
}

/// What [`spawn_watched`] starts.
pub(super) struct Spawn<'a> {
    /// The `/bin/sh -c` script.
    pub(super) command: &'a str,
    /// Its name in the ledger.
    pub(super) name: String,
    /// Set in its environment (replacing latlab's value). `LATLAB_LOAD` is never inherited.
    pub(super) env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    /// Its stdout and stderr.
    pub(super) out: i32,
    /// The cgroup it goes into (made by the caller).
    pub(super) cgroup: Option<&'a Path>,
    /// Its CPU affinity (None: the calling thread's).
    pub(super) cpus: Option<Vec<u32>>,
}

/// Start `sh -c COMMAND` under a watchdog: latlab's own executable, spawned with
/// `posix_spawn` (no copy of latlab's address space; see the supervisor's docs), in a session and
/// process group of its own, held on the pipe until its group is in the ledger, it is in its
/// cgroup and has its affinity; then let go.
pub(super) fn spawn_watched(p: &Spawn, ledger: &Arc<Mutex<Ledger>>) -> io::Result<Child> {
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
