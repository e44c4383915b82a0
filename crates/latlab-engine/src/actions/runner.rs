//! The actions of one list run from the collector, one at a time: a signal at once, a shell
//! command under the loads' watchdog in a session and cgroup of its own, polled each tick
//! until nothing of it is left.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use latlab_sys::ledger::Ledger;
use latlab_sys::loads::supervisor::Watched;

use super::signal::{resolve, send_signal};
use super::Action;

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
