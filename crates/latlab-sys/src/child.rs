//! A child process run to its end, with what it cost: its stdout (and, when asked, stderr),
//! wait4's peak RSS (`ru_maxrss`: the largest of the child and the descendants it waited
//! for) and, when asked, the child's own peak RSS (`VmHWM` of `/proc/PID/status`, read every
//! 50 ms while it runs: it only grows). The child can be pinned to one CPU from its start
//! (before `exec`), so its main thread never runs elsewhere.

use std::io::{self, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How a child is run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// The CPU the child (every thread it starts with) is confined to.
    pub pin: Option<u32>,
    /// Its stderr is captured (else it is this process's).
    pub capture_stderr: bool,
    /// Its own peak RSS is watched (`VmHWM`).
    pub watch_hwm: bool,
}

/// A child that has ended.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    /// Empty unless [`Options::capture_stderr`].
    pub stderr: Vec<u8>,
    /// wait4's `ru_maxrss` (KiB).
    pub maxrss_kib: u64,
    /// The child's own `VmHWM` (KiB), 0 unless [`Options::watch_hwm`].
    pub hwm_kib: u64,
}

/// `VmHWM` of a process (KiB), if it still has one.
pub fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Run `cmd` to its end as `o` says (see the module documentation).
pub fn run(cmd: &mut Command, o: &Options) -> io::Result<Finished> {
    cmd.stdout(Stdio::piped()).stderr(if o.capture_stderr {
        Stdio::piped()
    } else {
        Stdio::inherit()
    });
    if let Some(cpu) = o.pin {
        if cpu as usize >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} is beyond this system's CPU set"),
            ));
        }
        // SAFETY: the set is plain data prepared before the fork; between fork and exec only
        // sched_setaffinity (async-signal-safe) runs, on that memory.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: cpu is below CPU_SETSIZE (checked above).
        unsafe { libc::CPU_SET(cpu as usize, &mut set) };
        unsafe {
            cmd.pre_exec(move || {
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = cmd.spawn()?;
    let pid = child.id();
    let done = Arc::new(AtomicBool::new(false));
    // The child is not reaped before `done` is set (wait4 below), so the pid stays its own.
    let watcher = o.watch_hwm.then(|| {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut hwm = 0;
            while !done.load(Ordering::Acquire) {
                if let Some(v) = vm_hwm_kib(pid) {
                    hwm = hwm.max(v);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            hwm
        })
    });
    // stderr is drained on its own thread, so neither pipe can fill while the other is read.
    let stderr = child.stderr.take().map(|mut e| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = e.read_to_end(&mut v);
            v
        })
    });
    let mut stdout = Vec::new();
    let read = child.stdout.take().expect("piped").read_to_end(&mut stdout);
    let mut status = 0;
    // SAFETY: rusage is plain data written by the kernel.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our child, not yet reaped.
    let r = unsafe { libc::wait4(pid as i32, &mut status, 0, &mut ru) };
    let waited = io::Error::last_os_error();
    done.store(true, Ordering::Release);
    let hwm_kib = watcher.map_or(0, |w| w.join().unwrap_or(0));
    let stderr = stderr.map_or_else(Vec::new, |e| e.join().unwrap_or_default());
    if r < 0 {
        return Err(io::Error::new(waited.kind(), format!("wait4: {waited}")));
    }
    read?;
    Ok(Finished {
        status: ExitStatus::from_raw(status),
        stdout,
        stderr,
        maxrss_kib: ru.ru_maxrss.max(0) as u64,
        hwm_kib,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_hwm_of_this_process() {
        let kib = vm_hwm_kib(std::process::id()).expect("VmHWM of a live process");
        assert!(kib > 0);
        assert_eq!(vm_hwm_kib(u32::MAX), None);
    }

    /// Both pipes are read whatever their size (a child that fills stderr before it writes
    /// stdout does not hang), the status is the child's, and the memory figures are its.
    #[test]
    fn a_child_runs_to_its_end_with_its_output_and_memory() {
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "head -c 200000 /dev/zero | tr '\\0' e >&2; echo out; exit 3",
        ]);
        let f = run(
            &mut cmd,
            &Options {
                capture_stderr: true,
                watch_hwm: true,
                ..Options::default()
            },
        )
        .unwrap();
        assert_eq!(f.status.code(), Some(3));
        assert_eq!(f.stdout, b"out\n");
        assert_eq!(f.stderr.len(), 200_000);
        assert!(f.maxrss_kib > 0);
        let e = run(
            &mut Command::new("/nonexistent/latlab-child"),
            &Options::default(),
        );
        assert!(e.is_err());
    }

    /// Pinned, the child runs on that CPU only (it says so itself).
    #[test]
    fn a_pinned_child_runs_on_its_cpu() {
        let cpu = *crate::rt::allowed_cpus().unwrap().last().unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "grep Cpus_allowed_list /proc/self/status"]);
        let f = run(
            &mut cmd,
            &Options {
                pin: Some(cpu),
                ..Options::default()
            },
        )
        .unwrap();
        let out = String::from_utf8_lossy(&f.stdout);
        assert_eq!(
            out.split_whitespace().nth(1),
            Some(cpu.to_string().as_str()),
            "{out}"
        );
    }
}
