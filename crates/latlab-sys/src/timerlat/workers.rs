//! The threads that wait for the timer: latlab's worker processes on `timerlat_fd`, or the
//! kernel's `timerlat/N` threads given the run's policy and priority.

use std::ffi::CString;
use std::io;
use std::path::Path;

use crate::rt::Policy;

/// One worker process per measured CPU, each waiting on its CPU's `timerlat_fd`.
pub(super) struct UserWorkers {
    /// (CPU, pid) of each live worker.
    pub pids: Vec<(u32, libc::pid_t)>,
}

fn sched(policy: Policy) -> libc::c_int {
    policy.raw()
}

impl UserWorkers {
    /// Start a worker on each of `cpus` (`osnoise/` at `osnoise`); each has opened its
    /// `timerlat_fd` when this returns. On an error the workers started are ended.
    pub fn start(
        osnoise: &Path,
        cpus: &[u32],
        policy: Policy,
        priority: u32,
    ) -> Result<UserWorkers, String> {
        let mut w = UserWorkers { pids: Vec::new() };
        for &cpu in cpus {
            match spawn(osnoise, cpu, policy, priority) {
                Ok(pid) => w.pids.push((cpu, pid)),
                Err(e) => {
                    w.stop();
                    return Err(e);
                }
            }
        }
        Ok(w)
    }

    /// End every worker (SIGKILL: the kernel closes its `timerlat_fd` and cancels its timer)
    /// and reap it.
    pub fn stop(&mut self) {
        for (_, pid) in self.pids.drain(..) {
            // SAFETY: plain syscalls on our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                let mut st = 0;
                while libc::waitpid(pid, &mut st, 0) < 0
                    && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
                {
                }
            }
        }
    }
}

impl Drop for UserWorkers {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Fork one worker for `cpu`. The child only makes system calls (no allocation, no lock: the
/// parent has other threads): it dies with the thread that forked it (`PR_SET_PDEATHSIG`),
/// blocks every signal, pins itself, takes the policy, opens its `timerlat_fd`, says so on
/// a pipe (0, or the errno) and reads until it is killed.
fn spawn(osnoise: &Path, cpu: u32, policy: Policy, priority: u32) -> Result<libc::pid_t, String> {
    let path = osnoise.join(format!("per_cpu/cpu{cpu}/timerlat_fd"));
    let c_path = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| format!("{}: a NUL byte in the path", path.display()))?;
    let name = CString::new(format!("latlab-tl/{cpu}")).expect("no NUL");
    let policy_c = sched(policy);
    let param = libc::sched_param {
        sched_priority: if policy.is_rt() { priority as i32 } else { 0 },
    };
    let mut fds = [0; 2];
    // SAFETY: fds has room for two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!(
            "cannot create a pipe: {}",
            io::Error::last_os_error()
        ));
    }
    // SAFETY: plain syscall.
    let parent = unsafe { libc::getpid() };
    // SAFETY: after fork the child calls only async-signal-safe functions on data prepared
    // before it, then `_exit`s.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: see above; every pointer is to data made before the fork.
        unsafe {
            libc::close(fds[0]);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            let mut all: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::sigprocmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
            libc::prctl(libc::PR_SET_NAME, name.as_ptr());
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu as usize, &mut set);
            let tell = |v: i32| {
                let b = v.to_ne_bytes();
                libc::write(fds[1], b.as_ptr().cast(), 4);
            };
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0
                || libc::sched_setscheduler(0, policy_c, &param) != 0
            {
                tell(-*libc::__errno_location());
                libc::_exit(2);
            }
            let fd = libc::open(c_path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            if fd < 0 {
                tell(*libc::__errno_location());
                libc::_exit(2);
            }
            tell(0);
            libc::close(fds[1]);
            let mut buf = [0u8; 1024];
            loop {
                let r = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
                if r < 0 && *libc::__errno_location() != libc::EINTR {
                    libc::_exit(3);
                }
            }
        }
    }
    // SAFETY: closing our copy of the write end.
    unsafe { libc::close(fds[1]) };
    if pid < 0 {
        let e = io::Error::last_os_error();
        // SAFETY: our read end.
        unsafe { libc::close(fds[0]) };
        return Err(format!("cannot start the CPU {cpu} worker: {e}"));
    }
    let mut b = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        // SAFETY: b has room for 4 - got bytes at got.
        let n = unsafe { libc::read(fds[0], b[got..].as_mut_ptr().cast(), 4 - got) };
        if n > 0 {
            got += n as usize;
        } else if n == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break;
        }
    }
    // SAFETY: our read end.
    unsafe { libc::close(fds[0]) };
    let code = if got == 4 {
        i32::from_ne_bytes(b)
    } else {
        i32::MIN
    };
    if code == 0 {
        return Ok(pid);
    }
    // SAFETY: our own child.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    Err(match code {
        i32::MIN => format!(
            "the CPU {cpu} worker ended before opening {}",
            path.display()
        ),
        c if c < 0 => format!(
            "the CPU {cpu} worker cannot be pinned or take {} priority {priority}: {}",
            policy.as_str(),
            io::Error::from_raw_os_error(-c)
        ),
        c => format!(
            "cannot open {}: {}{}",
            path.display(),
            io::Error::from_raw_os_error(c),
            match c {
                libc::EBUSY => " (another timerlat user holds it: rtla -u?)",
                libc::EINVAL => " (the tracer is not running with NO_OSNOISE_WORKLOAD)",
                _ => "",
            }
        ),
    })
}

/// The kernel's `timerlat/N` threads (`prefix` `timerlat/`; the osnoise tracer's are
/// `osnoise/N`) of `cpus` given `policy` and `priority` (they start with the tracer, at FIFO
/// 95 for timerlat, and end with it: nothing to restore). Their pids by CPU.
pub(crate) fn kernel_threads(
    prefix: &str,
    cpus: &[u32],
    policy: Policy,
    priority: u32,
) -> Result<Vec<(u32, libc::pid_t)>, String> {
    let mut found = Vec::new();
    for (pid, comm) in crate::tasks::named(Path::new("/"), prefix) {
        let pid = pid as libc::pid_t;
        let Some(n) = comm.strip_prefix(prefix) else {
            continue;
        };
        let Ok(cpu) = n.parse::<u32>() else { continue };
        if cpus.contains(&cpu) {
            found.push((cpu, pid));
        }
    }
    found.sort();
    for &(cpu, pid) in &found {
        let param = libc::sched_param {
            sched_priority: if policy.is_rt() { priority as i32 } else { 0 },
        };
        // SAFETY: plain syscall.
        if unsafe { libc::sched_setscheduler(pid, sched(policy), &param) } != 0 {
            return Err(format!(
                "cannot give the kernel's {prefix}{cpu} thread {} priority {priority}: {}",
                policy.as_str(),
                io::Error::last_os_error()
            ));
        }
    }
    Ok(found)
}
