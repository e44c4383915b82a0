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

mod runner;
mod signal;

pub use runner::{Firing, Runner};
use signal::{refusal, resolve};

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
