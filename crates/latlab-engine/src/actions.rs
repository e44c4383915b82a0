//! rtla's actions: `--on-threshold ACTION` (repeatable), fired when a sample exceeds
//! `--max-latency`, and `--on-end ACTION`, fired once the run has ended.
//!
//! ```text
//! trace                               the recorder's window of the spike is saved (needs --trace-threshold)
//! signal,num=N,pid=PID|parent         kill(2) a process; pid 1 (also a parent that has become
//!   [,allow-init][,allow-foreign]     init) needs allow-init, another user's process allow-foreign
//! shell,command=CMD                   sh -c CMD, with LATLAB_CPU, LATLAB_LATENCY_NS, LATLAB_RUN_DIR
//! stop                                end the run now (exit 2)
//! continue                            keep measuring (the default)
//! ```
//!
//! Actions run from the collector thread, never on a measuring thread, one at a time and in
//! the order given. A shell command runs as a load's iteration does: under the loads'
//! watchdog (latlab_sys::loads::supervisor::Watched), in a session and a cgroup of its own
//! (both in a ledger first, so `latlab cleanup` finds them after a SIGKILL), with stdout sent
//! to stderr (stdout is latlab's). The collector does not wait for it but polls it each tick,
//! so the measurement's bookkeeping goes on. When it ends, whatever it left running (`cmd &`,
//! `setsid cmd &`) is killed with its cgroup; one that outlives `--action-timeout` is killed
//! the same way; both are reported as warnings in run.json. Without a cgroup (no cgroup v2,
//! not root) its process group is killed instead, and a warning says so once. Threshold
//! crossings while a firing's actions still run are counted, not queued.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use latlab_sys::ledger::Ledger;
use latlab_sys::loads::supervisor::Watched;

/// One action, parsed from its command-line string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Trace,
    Signal {
        num: i32,
        pid: Target,
        /// `allow-init`: pid 1 (or a parent that has become pid 1) may be signalled.
        allow_init: bool,
        /// `allow-foreign`: a process of another user may be signalled.
        allow_foreign: bool,
    },
    Shell {
        command: String,
    },
    Stop,
    Continue,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Pid(i32),
    Parent,
}

/// A run's actions: `--on-threshold`, `--on-end` and how long a shell action may take.
#[derive(Debug, Clone, Default)]
pub struct Actions {
    pub on_threshold: Vec<Action>,
    pub on_end: Vec<Action>,
    pub timeout_ns: u64,
}

/// Parse `name[,key=value...]`. `command=` takes the rest of the string (commas included).
pub fn parse_action(s: &str) -> Result<Action, String> {
    let (name, rest) = match s.split_once(',') {
        Some((n, r)) => (n.trim(), Some(r)),
        None => (s.trim(), None),
    };
    let no_args = |a: Action| match rest {
        Some(r) => Err(format!(
            "'{s}': {name} takes no arguments, but ',{r}' follows; give it alone"
        )),
        None => Ok(a),
    };
    match name {
        "trace" => no_args(Action::Trace),
        "stop" => no_args(Action::Stop),
        "continue" => no_args(Action::Continue),
        "shell" => {
            let r = rest.unwrap_or("");
            let Some(cmd) = r.strip_prefix("command=") else {
                return Err(format!(
                    "'{s}': shell needs command=CMD (e.g. shell,command=echo spike)"
                ));
            };
            if cmd.trim().is_empty() {
                return Err(format!("'{s}': command= is empty; give a shell command"));
            }
            Ok(Action::Shell {
                command: cmd.to_string(),
            })
        }
        "signal" => {
            let (mut num, mut pid, mut allow_init, mut allow_foreign) = (None, None, false, false);
            let mut seen: Vec<&str> = Vec::new();
            for part in rest.unwrap_or("").split(',').filter(|p| !p.is_empty()) {
                let (k, v) = match part.split_once('=') {
                    Some((k, v)) => (k.trim(), Some(v)),
                    None => (part.trim(), None),
                };
                // A key given twice used to be accepted with the last one winning silently
                // (`pid=parent,pid=1`): which one was meant is not for latlab to guess.
                if seen.contains(&k) {
                    return Err(format!("'{s}': {k} is given twice; give each key once"));
                }
                seen.push(k);
                match (k, v) {
                    ("num", Some(v)) => {
                        let n: i32 = v.trim().parse().ok().filter(|n| (1..=64).contains(n)).ok_or_else(
                            || format!("'{s}': num={v} is not a signal number (1-64, e.g. num=10 for SIGUSR1)"),
                        )?;
                        num = Some(n);
                    }
                    ("pid", Some(v)) => {
                        let v = v.trim();
                        pid = Some(if v == "parent" {
                            Target::Parent
                        } else {
                            Target::Pid(v.parse().ok().filter(|p| *p > 0).ok_or_else(|| {
                                format!("'{s}': pid={v} is not a process id (a number above 0, or parent)")
                            })?)
                        });
                    }
                    ("allow-init", None) => allow_init = true,
                    ("allow-foreign", None) => allow_foreign = true,
                    ("num" | "pid", None) => {
                        return Err(format!("'{s}': {k} needs a value ({k}=...)"))
                    }
                    ("allow-init" | "allow-foreign", Some(_)) => {
                        return Err(format!("'{s}': {k} takes no value; give it alone"))
                    }
                    (other, _) => {
                        return Err(format!(
                            "'{s}': unknown key '{other}' (signal takes num=N, pid=PID|parent, allow-init and allow-foreign)"
                        ))
                    }
                }
            }
            match (num, pid) {
                (Some(_), Some(Target::Pid(1))) if !allow_init => Err(format!(
                    "'{s}': pid=1 is init, which a signal can stop or make reboot the system; add allow-init to the action to send it anyway"
                )),
                (Some(num), Some(pid)) => Ok(Action::Signal {
                    num,
                    pid,
                    allow_init,
                    allow_foreign,
                }),
                (None, _) => Err(format!("'{s}': signal needs num=N (e.g. signal,num=10,pid=parent)")),
                (_, None) => Err(format!("'{s}': signal needs pid=PID or pid=parent")),
            }
        }
        "" => Err(format!("'{s}': empty action; give trace, signal,..., shell,command=..., stop or continue")),
        other => Err(format!(
            "'{s}': unknown action '{other}'; use trace, signal,num=N,pid=PID|parent, shell,command=CMD, stop or continue"
        )),
    }
}

/// Check the actions against the rest of the run's flags (before anything is changed).
pub fn check(
    a: &Actions,
    max_latency_ns: Option<u64>,
    trace_threshold_ns: Option<u64>,
) -> crate::Result<()> {
    if !a.on_threshold.is_empty() {
        let Some(max) = max_latency_ns else {
            bail!("--on-threshold: fires when a sample exceeds --max-latency; give --max-latency (e.g. --max-latency 200us)");
        };
        if a.on_threshold.contains(&Action::Trace) {
            match trace_threshold_ns {
                None => bail!("--on-threshold trace: saves the flight recorder's window, which needs --trace-threshold (at or below --max-latency)"),
                Some(t) if t > max => bail!(
                    "--on-threshold trace: --trace-threshold is above --max-latency, so the spike that fires the action would not be traced; use a --trace-threshold at or below --max-latency"
                ),
                _ => {}
            }
        }
    }
    for act in &a.on_end {
        if matches!(act, Action::Trace | Action::Stop | Action::Continue) {
            bail!(
                "--on-end {}: not an action at the end of a run (the run has ended); use signal,... or shell,command=...",
                match act {
                    Action::Trace => "trace",
                    Action::Stop => "stop",
                    _ => "continue",
                }
            );
        }
    }
    // A target that is pid 1 or another user's now is refused now (it may change by the time
    // of the signal, which checks again).
    for (flag, list) in [("--on-threshold", &a.on_threshold), ("--on-end", &a.on_end)] {
        for act in list {
            if let Action::Signal {
                pid,
                allow_init,
                allow_foreign,
                ..
            } = *act
            {
                let now = resolve(pid);
                if let Some(why) = refusal(now, pid, allow_init, allow_foreign) {
                    bail!("{flag} signal: {why}");
                }
            }
        }
    }
    if a.timeout_ns == 0 {
        bail!("--action-timeout: must be more than 0 (e.g. 10s)");
    }
    Ok(())
}

/// The pid a target names now.
fn resolve(t: Target) -> i32 {
    match t {
        Target::Pid(p) => p,
        // SAFETY: getppid has no preconditions.
        Target::Parent => unsafe { libc::getppid() },
    }
}

/// Why a signal to `pid` (what `target` names now) is not to be sent without the action's
/// opt-in, or None: pid 1 (init: SIGINT makes systemd reboot, SIGKILL panics the kernel)
/// without `allow-init`, a process whose real or effective uid is not latlab's real uid
/// without `allow-foreign` (as root, kill(2) reaches every process).
fn refusal(pid: i32, target: Target, allow_init: bool, allow_foreign: bool) -> Option<String> {
    let who = match target {
        Target::Parent => format!("latlab's parent (pid {pid})"),
        Target::Pid(_) => format!("pid {pid}"),
    };
    if pid == 1 && !allow_init {
        let why = if target == Target::Parent {
            " (latlab was orphaned, or runs as a service)"
        } else {
            ""
        };
        return Some(format!(
            "{who} is init{why}, which a signal can stop or make reboot the system; add allow-init to the action to send it anyway"
        ));
    }
    if !allow_foreign {
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        if let Some((real, effective)) = latlab_sys::tasks::uids(Path::new("/"), pid) {
            if real != me || effective != me {
                let uid = if real != me { real } else { effective };
                return Some(format!(
                    "{who} belongs to another user (uid {uid}; latlab runs as uid {me}); add allow-foreign to the action to send it anyway"
                ));
            }
        }
    }
    None
}

/// Send signal `num` to `pid` unless [`refusal`] says no. Through a pidfd where the kernel
/// has them (5.3): the process checked is the process signalled, even if it exits and its
/// pid is reused in between (the signal then fails with ESRCH instead of reaching the pid's
/// new owner).
fn send_signal(
    pid: i32,
    target: Target,
    num: i32,
    allow_init: bool,
    allow_foreign: bool,
) -> Result<(), String> {
    use std::os::fd::{FromRawFd, OwnedFd};
    if pid == 1 && !allow_init {
        return Err(format!(
            "not sent: {}",
            refusal(pid, target, allow_init, allow_foreign).unwrap_or_default()
        ));
    }
    // SAFETY: plain syscall; a non-negative result is a new descriptor we own.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    let pidfd = if raw >= 0 {
        // SAFETY: raw is a fresh descriptor.
        Some(unsafe { OwnedFd::from_raw_fd(raw) })
    } else {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ENOSYS) {
            return Err(e.to_string());
        }
        None
    };
    if let Some(why) = refusal(pid, target, allow_init, allow_foreign) {
        return Err(format!("not sent: {why}"));
    }
    let r = match &pidfd {
        Some(fd) => {
            use std::os::fd::AsRawFd;
            // SAFETY: plain syscall on our pidfd; no siginfo.
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    num,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                )
            }
        }
        // SAFETY: plain syscall.
        None => (unsafe { libc::kill(pid, num) }) as libc::c_long,
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    Ok(())
}

/// What fired an action: the sample's CPU and latency.
#[derive(Debug, Clone, Copy)]
pub struct Firing {
    pub cpu: u32,
    pub latency_ns: u64,
}

/// A shell action's command while it runs, and after, until nothing of it is left.
struct Running {
    w: Watched,
    started: Instant,
    command: String,
    /// When it ended (exited, or was killed at the timeout) and what was left of it was
    /// killed: its processes are leaving its cgroup.
    ended: Option<Instant>,
}

/// Where the actions' cgroups go: the cgroup-v2 root, as the loads'; None without one (not
/// mounted, or not root: creating a cgroup there needs root).
fn cgroup_parent() -> Option<PathBuf> {
    latlab_sys::loads::supervisor::cgroup2_root()
}

/// The fallback to process groups is said once per latlab process.
static NO_CGROUP_SAID: AtomicBool = AtomicBool::new(false);

/// Runs the actions of one list, one at a time, from the collector.
pub struct Runner {
    actions: Vec<Action>,
    /// `--on-threshold` or `--on-end`, for messages.
    flag: &'static str,
    timeout: Duration,
    run_dir: PathBuf,
    /// The firing in progress and the index of its next action.
    current: Option<(Firing, usize)>,
    child: Option<Running>,
    /// This list's ledger (`<pid>-on-threshold.json`, `<pid>-on-end.json`), opened with its
    /// first shell command: the end actions run after the run's own ledger is closed.
    ledger: Option<Arc<Mutex<Ledger>>>,
    pub fired: u64,
    pub skipped: u64,
    /// A `stop` action ran, for this firing.
    pub stop: Option<Firing>,
}

impl Runner {
    pub fn new(actions: &[Action], flag: &'static str, timeout_ns: u64, run_dir: &Path) -> Runner {
        Runner {
            actions: actions.to_vec(),
            flag,
            timeout: Duration::from_nanos(timeout_ns),
            run_dir: std::path::absolute(run_dir).unwrap_or_else(|_| run_dir.to_path_buf()),
            current: None,
            child: None,
            ledger: None,
            fired: 0,
            skipped: 0,
            stop: None,
        }
    }

    /// The list has a `trace` action.
    pub fn traces(&self) -> bool {
        self.actions.contains(&Action::Trace)
    }

    pub fn busy(&self) -> bool {
        self.current.is_some()
    }

    /// A sample exceeded the limit: start the actions, or count it when they still run.
    pub fn fire(&mut self, f: Firing, warnings: &mut Vec<String>) {
        if self.actions.is_empty() {
            return;
        }
        if self.busy() {
            self.skipped += 1;
            return;
        }
        self.fired += 1;
        self.current = Some((f, 0));
        self.poll(warnings);
    }

    /// Advance: reap or time out a running shell (and kill what it left), then run the next
    /// actions until one must be waited for. Never blocks.
    pub fn poll(&mut self, warnings: &mut Vec<String>) {
        if let Some(r) = self.child.as_mut() {
            let flag = self.flag;
            let cmd = &r.command;
            if r.ended.is_none() {
                match r.w.try_wait() {
                    Ok(Some(st)) => {
                        use std::os::unix::process::ExitStatusExt;
                        let st = std::process::ExitStatus::from_raw(st);
                        if !st.success() {
                            warnings.push(format!("{flag} shell,command={cmd}: exited with {st}"));
                        }
                        // An action ends with its command: what it started and left running
                        // (`cmd &`, `setsid cmd &`) goes with it.
                        let left = r.w.remaining();
                        if !left.is_empty() {
                            warnings.push(format!(
                                "{flag} shell,command={cmd}: left {} process{} running when it ended ({}); killed",
                                left.len(),
                                if left.len() == 1 { "" } else { "es" },
                                left.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
                            ));
                        }
                        r.w.kill();
                        r.ended = Some(Instant::now());
                    }
                    Ok(None) if r.started.elapsed() >= self.timeout => {
                        r.w.kill();
                        warnings.push(format!(
                            "{flag} shell,command={cmd}: still running after --action-timeout {}; killed",
                            latlab_core::units::format_duration(self.timeout.as_nanos() as u64)
                        ));
                        r.ended = Some(Instant::now());
                    }
                    Ok(None) => return,
                    Err(e) => {
                        warnings.push(format!(
                            "{flag} shell,command={cmd}: cannot wait for it: {e}"
                        ));
                        r.w.kill();
                        r.ended = Some(Instant::now());
                    }
                }
            }
            if !r.w.try_finish() {
                if r.ended
                    .is_some_and(|t| t.elapsed() < latlab_sys::ledger::CGROUP_EMPTY_WAIT)
                {
                    return;
                }
                if let Some(r) = self.child.take() {
                    let left = r.w.abandon();
                    warnings.push(format!(
                        "{flag} shell,command={}: killed, but {left}",
                        r.command
                    ));
                }
            }
            self.child = None;
        }
        while let Some((f, i)) = self.current {
            let Some(act) = self.actions.get(i).cloned() else {
                self.current = None;
                break;
            };
            self.current = Some((f, i + 1));
            match act {
                Action::Continue => {}
                // The recorder saves the window of every spike at or above --trace-threshold
                // (checked at or below --max-latency): the spike that fired is already being
                // saved by the collector, before the actions run.
                Action::Trace => {}
                Action::Stop => self.stop = Some(f),
                Action::Signal {
                    num,
                    pid,
                    allow_init,
                    allow_foreign,
                } => {
                    // `parent` is resolved now: an orphaned run's parent has become pid 1
                    // (or a subreaper) since the run started.
                    let target = resolve(pid);
                    if let Err(e) = send_signal(target, pid, num, allow_init, allow_foreign) {
                        warnings.push(format!("{} signal,num={num},pid={target}: {e}", self.flag));
                    }
                }
                Action::Shell { command } => match self.spawn(&command, f, warnings) {
                    Ok(w) => {
                        self.child = Some(Running {
                            w,
                            started: Instant::now(),
                            command,
                            ended: None,
                        });
                        return;
                    }
                    Err(e) => warnings.push(format!(
                        "{} shell,command={command}: cannot start it: {e}",
                        self.flag
                    )),
                },
            }
        }
    }

    /// Start a shell action: `/bin/sh -c CMD` under the loads' watchdog, in a session and
    /// cgroup of its own (both in this list's ledger first), stdout and stderr on latlab's
    /// stderr (stdout is latlab's: a summary, JSON).
    fn spawn(
        &mut self,
        command: &str,
        f: Firing,
        warnings: &mut Vec<String>,
    ) -> std::io::Result<Watched> {
        use std::os::fd::AsFd;
        let ledger = match &self.ledger {
            Some(l) => l.clone(),
            None => {
                let part = self.flag.trim_start_matches('-');
                let l = Ledger::open_part(part).map_err(|e| {
                    std::io::Error::new(e.kind(), format!("cannot write latlab's ledger: {e}"))
                })?;
                let l = Arc::new(Mutex::new(l));
                self.ledger = Some(l.clone());
                l
            }
        };
        let parent = cgroup_parent();
        let (w, note) = Watched::start(
            command,
            &format!("{} shell action", self.flag),
            vec![
                ("LATLAB_CPU".into(), f.cpu.to_string().into()),
                ("LATLAB_LATENCY_NS".into(), f.latency_ns.to_string().into()),
                (
                    "LATLAB_RUN_DIR".into(),
                    self.run_dir.clone().into_os_string(),
                ),
            ],
            std::io::stderr().as_fd(),
            parent.as_deref(),
            ledger,
        )?;
        let why = match (&parent, note) {
            (None, _) => Some("no cgroup-v2 hierarchy is mounted".to_string()),
            (Some(_), Some(n)) => Some(n),
            (Some(_), None) => None,
        };
        if let Some(why) = why {
            if !NO_CGROUP_SAID.swap(true, Ordering::Relaxed) {
                warnings.push(format!(
                    "{} shell: actions run in a process group, not a cgroup ({why}): a process an action starts in a session of its own (setsid) survives the action",
                    self.flag
                ));
            }
        }
        Ok(w)
    }

    /// Wait (polling) until the firing in progress is done, at most the timeout per shell.
    pub fn wait(&mut self, warnings: &mut Vec<String>) {
        while self.busy() || self.child.is_some() {
            self.poll(warnings);
            if self.busy() || self.child.is_some() {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    /// The summary of this list's firings, for the record (None when nothing was skipped).
    pub fn summary(&self) -> Option<String> {
        (self.skipped > 0).then(|| {
            format!(
                "{}: the actions ran {} times; {} further samples over --max-latency came while they were running and fired nothing",
                self.flag, self.fired, self.skipped
            )
        })
    }
}

impl Drop for Runner {
    /// An early end (an error, a panic) leaves no shell behind, nor its cgroup; this list's
    /// ledger goes once empty.
    fn drop(&mut self) {
        if let Some(r) = self.child.take() {
            if let Err(e) = r.w.finish() {
                eprintln!(
                    "latlab: warning: {} shell,command={}: killed, but {e}",
                    self.flag, r.command
                );
            }
        }
        if let Some(l) = self.ledger.take() {
            let mut l = l.lock().unwrap_or_else(|e| e.into_inner());
            for line in l.restore_all() {
                if line.starts_with("could not") {
                    eprintln!("latlab: warning: {line}");
                }
            }
            if l.is_empty() {
                let _ = std::fs::remove_file(l.path());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_parse_and_errors_name_the_part() {
        assert_eq!(parse_action("stop"), Ok(Action::Stop));
        assert_eq!(
            parse_action("signal,num=10,pid=parent"),
            Ok(Action::Signal {
                num: 10,
                pid: Target::Parent,
                allow_init: false,
                allow_foreign: false
            })
        );
        assert_eq!(
            parse_action("shell,command=echo a,b"),
            Ok(Action::Shell {
                command: "echo a,b".into()
            })
        );
        assert!(parse_action("signal,num=x,pid=1")
            .unwrap_err()
            .contains("num=x"));
        assert!(parse_action("signal,num=10").unwrap_err().contains("pid="));
        assert!(parse_action("signal,num=10,pid=-3")
            .unwrap_err()
            .contains("pid=-3"));
        assert!(parse_action("signal,num=10,pid=1,x=2")
            .unwrap_err()
            .contains("'x'"));
        // Each key once: `pid=parent,pid=1` was taken as pid=1.
        assert!(parse_action("signal,num=10,pid=parent,pid=5")
            .unwrap_err()
            .contains("pid is given twice"));
        assert!(parse_action("signal,num=10,num=9,pid=5")
            .unwrap_err()
            .contains("num is given twice"));
        // init only when asked for.
        let e = parse_action("signal,num=9,pid=1").unwrap_err();
        assert!(
            e.contains("pid=1 is init") && e.contains("allow-init"),
            "{e}"
        );
        assert_eq!(
            parse_action("signal,num=10,pid=1,allow-init"),
            Ok(Action::Signal {
                num: 10,
                pid: Target::Pid(1),
                allow_init: true,
                allow_foreign: false
            })
        );
        assert_eq!(
            parse_action("signal,allow-foreign,num=10,pid=parent"),
            Ok(Action::Signal {
                num: 10,
                pid: Target::Parent,
                allow_init: false,
                allow_foreign: true
            })
        );
        assert!(parse_action("signal,num=10,pid=5,allow-foreign=yes")
            .unwrap_err()
            .contains("takes no value"));
        assert!(parse_action("shell,cmd=ls")
            .unwrap_err()
            .contains("command="));
        assert!(parse_action("stop,now").unwrap_err().contains(",now"));
        assert!(parse_action("reboot").unwrap_err().contains("'reboot'"));
    }
}
