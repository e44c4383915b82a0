//! A load's watchdog: latlab's own executable, started with [`WATCHDOG_ARG`], leads the
//! load's session and process group, runs the load as its child and kills the whole group
//! (and its cgroup) when the pipe to latlab closes, however latlab died.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;

/// The hidden first argument that makes latlab's own executable a load's watchdog
/// ([`watchdog_main`]); `latlab`'s `main` checks for it before anything else.
pub const WATCHDOG_ARG: &str = "__load-watchdog";

/// A load's watchdog: latlab's executable started by `spawn_watched` with `WATCHDOG_ARG PARENT
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
