//! latlab itself, and the tools it is compared with, as child processes. A run the benches
//! compare is `latlab run` or `latlab profile` with the bench's flags: the whole lifecycle a
//! user runs (plan, session, engine), in a fresh process each time — so its peak RSS is its
//! own, and nothing a run leaves in its process (memory locked, a heap kept, its threads'
//! CPUs, signal handlers) reaches the next run or the tool it is compared with.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use latlab_sys::child::{self, Finished, Options};
use serde_json::Value;
use tempfile::TempDir;

/// Pair `i` (from 1) of an alternated comparison: `a` first in odd pairs, `b` first in even
/// ones, so the machine's drift within a pair favours neither. The figures, in (a, b) order.
pub fn alternated<A, B>(
    i: u32,
    a: impl FnOnce() -> crate::Result<A>,
    b: impl FnOnce() -> crate::Result<B>,
) -> crate::Result<(A, B)> {
    if a_first(i) {
        let a = a()?;
        Ok((a, b()?))
    } else {
        let b = b()?;
        Ok((a()?, b))
    }
}

/// Whether `a` goes first in pair `i` (from 1) of [`alternated`]: in odd pairs.
pub fn a_first(i: u32) -> bool {
    i % 2 == 1
}

/// Run a tool to its end (stdout captured, stderr this process's); an error only when it
/// cannot start.
pub fn tool(cmd: &mut Command, o: &Options) -> crate::Result<Finished> {
    let name = cmd.get_program().to_string_lossy().into_owned();
    Ok(child::run(cmd, o).with_context(|| format!("cannot start {name}"))?)
}

/// An error unless `f` exited 0 or 2 (2: a sample above `--max-latency`, still a run).
pub fn ran(f: &Finished, what: &str) -> crate::Result<()> {
    if f.status.success() || f.status.code() == Some(2) {
        Ok(())
    } else {
        bail!("{what} failed: {}", f.status)
    }
}

/// `latlab COMMAND --quiet --format json --results DIR` and the bench's flags, to be run.
pub struct LatlabRun {
    cmd: Command,
    what: String,
    opts: Options,
    results: PathBuf,
    /// The private temp dir the run directory goes to (removed with the [`Ran`]), unless the
    /// bench gave its own.
    own: Option<TempDir>,
}

impl LatlabRun {
    /// `latlab command`, its run directory in `results`, else in a private temp dir.
    pub fn new(command: &str, results: Option<&Path>) -> crate::Result<LatlabRun> {
        let exe = std::env::current_exe().context("cannot find latlab's own executable")?;
        let (results, own) = match results {
            Some(r) => (r.to_path_buf(), None),
            None => {
                let t = crate::rundir::private_temp_dir("latlab-bench-")?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        let mut cmd = Command::new(exe);
        cmd.args([command, "--quiet", "--format", "json", "--results"])
            .arg(&results);
        Ok(LatlabRun {
            cmd,
            what: format!("latlab {command}"),
            opts: Options::default(),
            results,
            own,
        })
    }

    pub fn args<S: AsRef<OsStr>>(mut self, args: impl IntoIterator<Item = S>) -> LatlabRun {
        self.cmd.args(args);
        self
    }

    /// The benches' measurement: FIFO 95, 1 ms, on `cpu`, for `duration` (as `--duration`
    /// takes it).
    pub fn measuring(self, cpu: u32, duration: &str) -> LatlabRun {
        self.args(["--priority", "95", "--interval", "1ms", "--cpus"])
            .args([&cpu.to_string(), "--duration", duration])
    }

    /// The process (its main thread, collector, …) on `cpu`; its measuring threads pin
    /// themselves.
    pub fn pinned(mut self, cpu: u32) -> LatlabRun {
        self.opts.pin = Some(cpu);
        self
    }

    /// Its own peak RSS watched (`VmHWM`), besides wait4's.
    pub fn watch_hwm(mut self) -> LatlabRun {
        self.opts.watch_hwm = true;
        self
    }

    /// Its stderr kept for the caller, not printed.
    pub fn capture_stderr(mut self) -> LatlabRun {
        self.opts.capture_stderr = true;
        self
    }

    /// Run it to its end, whatever its exit.
    pub fn run_any(mut self) -> crate::Result<Ran> {
        let before = entries(&self.results);
        let f = child::run(&mut self.cmd, &self.opts)
            .with_context(|| format!("cannot start {}", self.what))?;
        let dir = entries(&self.results).difference(&before).next().cloned();
        Ok(Ran {
            f,
            what: self.what,
            dir,
            _own: self.own,
        })
    }

    /// Run it to its end: an error unless it exited 0 or 2.
    pub fn run(self) -> crate::Result<Ran> {
        let r = self.run_any()?;
        ran(&r.f, &r.what)?;
        Ok(r)
    }
}

fn entries(p: &Path) -> BTreeSet<PathBuf> {
    std::fs::read_dir(p)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// A latlab child that has ended, and its run directory (removed with it when it is in the
/// bench's temp dir).
pub struct Ran {
    pub f: Finished,
    what: String,
    dir: Option<PathBuf>,
    _own: Option<TempDir>,
}

impl Ran {
    /// The run directory it made.
    pub fn dir(&self) -> crate::Result<&Path> {
        match &self.dir {
            Some(d) => Ok(d),
            None => bail!("{} left no run directory", self.what),
        }
    }

    /// Its JSON summary (stdout).
    pub fn summary(&self) -> crate::Result<Value> {
        Ok(serde_json::from_slice(&self.f.stdout)
            .with_context(|| format!("{}'s JSON summary", self.what))?)
    }

    /// The last `latlab: error` line it printed (its stderr captured), else its exit.
    pub fn error_line(&self) -> String {
        let err = String::from_utf8_lossy(&self.f.stderr);
        err.lines()
            .rev()
            .find(|l| l.starts_with("latlab: error"))
            .map_or_else(
                || format!("{} failed: {}", self.what, self.f.status),
                str::to_string,
            )
    }
}

/// The `u64` at `key` of a summary's `total` (0 when absent).
pub fn total(summary: &Value, key: &str) -> u64 {
    summary["total"][key].as_u64().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_alternate_which_goes_first() {
        for (i, first) in [(1, "a"), (2, "b"), (3, "a")] {
            let order = std::cell::RefCell::new(Vec::new());
            let (a, b) = alternated(
                i,
                || {
                    order.borrow_mut().push("a");
                    Ok(1)
                },
                || {
                    order.borrow_mut().push("b");
                    Ok(2)
                },
            )
            .unwrap();
            assert_eq!((a, b), (1, 2), "the figures in (a, b) order");
            assert_eq!(order.borrow()[0], first, "pair {i}");
            assert_eq!(order.borrow().len(), 2);
        }
    }

    #[test]
    fn an_exit_other_than_0_or_2_is_an_error() {
        let exit = |code: i32| {
            let mut c = Command::new("sh");
            c.args(["-c", &format!("exit {code}")]);
            tool(&mut c, &Options::default()).unwrap()
        };
        assert!(ran(&exit(0), "t").is_ok());
        assert!(ran(&exit(2), "t").is_ok());
        let e = ran(&exit(1), "latlab run").unwrap_err().to_string();
        assert!(e.starts_with("latlab run failed: exit status: 1"), "{e}");
        let e = tool(&mut Command::new("/nonexistent/tool"), &Options::default());
        assert!(e
            .unwrap_err()
            .to_string()
            .starts_with("cannot start /nonexistent/tool"));
    }
}
