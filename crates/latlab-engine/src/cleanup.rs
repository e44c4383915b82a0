//! `latlab cleanup`: undo what killed latlab runs left behind, and say what was done, one line
//! each ("nothing to clean up" when there was nothing).
//!
//! 1. Ledgers of dead latlab processes in the runtime directory (`/run/latlab`, or
//!    `LATLAB_RUNTIME_DIR`): every entry is undone newest first (knobs restored, tracefs
//!    instances removed, load process groups killed, cgroups and scratch directories removed),
//!    then the ledger file is deleted. What could not be undone (a cgroup whose killed process
//!    is still stuck in I/O, say) stays in the file, so the next `cleanup` retries it, and the
//!    exit code is 1.
//! 2. tracefs instances named `latlab-<pid>` (under `/sys/kernel/tracing` and
//!    `/sys/kernel/debug/tracing`) whose pid no longer exists: a run killed before its ledger
//!    recorded the instance still leaves nothing behind. Instances outlive an unmount, so when
//!    tracefs is mounted nowhere, cleanup mounts it to look (and unmounts it again).
//! 3. Load cgroups named `latlab-<pid>-…` (under the cgroup v2 root) whose pid no longer
//!    exists: killed and removed, for the same reason.
//!
//! Only ledgers latlab can trust are acted on: a ledger (or runtime directory) owned by another
//! user, or writable by group or others, could list anything for root to "undo"; it is skipped
//! with a warning line (`latlab: warning: skipping ledger …`) and nothing it lists is undone.
//!
//! What a live process owns is never touched: its ledger is not orphaned, and an instance whose
//! pid exists is skipped (even if the pid was recycled: better a leftover than a broken run).

use std::fs;
use std::path::Path;

use latlab_sys::ledger::{
    orphaned_trusted, process_exists, runtime_dir, undo, undo_checked, write_file, Entry,
};
use latlab_sys::tracefs::MOUNT_POINTS;

/// Undo what dead latlab processes left behind (see the module documentation): one line per
/// thing done or found, each failure's line starting with "could not" (see [`failed`]).
/// Ledgers that cannot be trusted are skipped with a warning on stderr.
pub fn cleanup() -> Vec<String> {
    let mut lines = Vec::new();
    let dir = runtime_dir();
    match orphaned_trusted(&dir) {
        Ok((list, untrusted)) => {
            for w in untrusted {
                crate::warn(&w);
            }
            for (path, file) in list {
                undo_ledger(&path, file, &mut lines);
            }
        }
        Err(e) => lines.push(format!(
            "could not read ledgers in {}: {e} (run as root, or set LATLAB_RUNTIME_DIR)",
            dir.display()
        )),
    }
    if MOUNT_POINTS
        .iter()
        .any(|b| Path::new(b).join("instances").is_dir())
    {
        for base in MOUNT_POINTS {
            lines.extend(stale_instances(Path::new(base)));
        }
    } else {
        lines.extend(stale_instances_unmounted());
    }
    if let Some(root) = latlab_sys::loads::supervisor::cgroup2_root() {
        lines.extend(stale_cgroups(&root));
    }
    lines
}

/// Whether [`cleanup`]'s `lines` say something could not be undone: every failure line starts
/// with "could not" (names inside a line are the system's text).
pub fn failed(lines: &[String]) -> bool {
    lines
        .iter()
        .any(|l| l.trim_start().starts_with("could not"))
}

/// Undo a dead process's ledger at `path`, newest entry first; what could not be undone
/// stays in it for the next cleanup, else the ledger goes.
fn undo_ledger(path: &Path, mut file: latlab_sys::ledger::LedgerFile, lines: &mut Vec<String>) {
    lines.push(format!(
        "ledger {} of dead latlab pid {}: {} entries",
        path.display(),
        file.pid,
        file.entries.len()
    ));
    let mut kept = Vec::new();
    for (id, e) in file.entries.iter().rev() {
        let (line, ok) = undo_checked(e);
        if ok {
            lines.push(format!("  {line}"));
        } else {
            lines.push(format!(
                "  could not finish: {line} (kept in the ledger; run `latlab cleanup` again)"
            ));
            kept.push((*id, e.clone()));
        }
    }
    if kept.is_empty() {
        match fs::remove_file(path) {
            Ok(()) => lines.push(format!("  removed ledger {}", path.display())),
            Err(e) => lines.push(format!("  could not remove ledger {}: {e}", path.display())),
        }
    } else {
        kept.reverse();
        file.entries = kept;
        if let Err(e) = write_file(path, &file) {
            lines.push(format!(
                "  could not rewrite ledger {}: {e}",
                path.display()
            ));
        }
    }
}

/// Entries of `dir` named `latlab-<pid>` or `latlab-<pid>-<suffix>` (with `suffixed`: only the
/// latter) whose pid is dead, sorted. A live pid's entry is skipped, even a recycled one: better
/// a leftover than a broken run.
fn dead_runs_entries(dir: &Path, suffixed: bool) -> Vec<(String, u32)> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = rd
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    names
        .into_iter()
        .filter_map(|name| {
            let pid = instance_pid(&name)?;
            let shape = !suffixed || name.starts_with(&format!("latlab-{pid}-"));
            (shape && !process_exists(pid)).then_some((name, pid))
        })
        .collect()
}

/// Remove `instances/latlab-<pid>[-…]` below one tracefs mount whose pid is dead.
fn stale_instances(tracefs: &Path) -> Vec<String> {
    let dir = tracefs.join("instances");
    dead_runs_entries(&dir, false)
        .into_iter()
        .map(|(name, pid)| {
            let path = dir.join(&name);
            format!(
                "{} (pid {pid} is dead)",
                undo(&Entry::TracefsInstance { path })
            )
        })
        .collect()
}

/// Load cgroups `latlab-<pid>-…` directly under the cgroup v2 root whose pid is dead: what a
/// run killed before its ledger entry was undone (or whose ledger is gone) left.
fn stale_cgroups(root: &Path) -> Vec<String> {
    dead_runs_entries(root, true)
        .into_iter()
        .map(|(name, pid)| {
            let cg = root.join(&name);
            match latlab_sys::ledger::remove_cgroup(&cg, latlab_sys::ledger::CGROUP_EMPTY_WAIT) {
                Ok(_) => format!("removed cgroup {} (pid {pid} is dead)", cg.display()),
                Err(e) => format!("could not remove cgroup {}: {e}", cg.display()),
            }
        })
        .collect()
}

/// tracefs is mounted nowhere, yet instances outlive an unmount (a later run may have mounted
/// and unmounted it after the killed one): mount it for the look, through a ledger of our own
/// so a killed cleanup is undone too, then unmount it again. Needs root; without it there is
/// nothing to look at.
fn stale_instances_unmounted() -> Vec<String> {
    use latlab_sys::ledger::Ledger;
    use latlab_sys::tracefs;
    let Ok(mut ledger) = Ledger::open() else {
        return vec![];
    };
    let root = Path::new(tracefs::DEFAULT_ROOT);
    let mut out = Vec::new();
    if let Ok(t) = tracefs::ensure_mounted(root, &mut ledger) {
        out = stale_instances(&t.root);
        if !out.is_empty() {
            out.push(format!(
                "  (tracefs was not mounted: mounted at {} to look, unmounted again)",
                t.root.display()
            ));
        }
    }
    // Undoes our mount, if we made one, and removes this ledger.
    let _ = ledger.close();
    out
}

/// The pid in `latlab-<pid>` or `latlab-<pid>-<suffix>`.
fn instance_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("latlab-")?;
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let after = &rest[digits.len()..];
    if !(after.is_empty() || after.starts_with('-')) {
        return None;
    }
    digits.parse().ok().filter(|p| *p > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_names() {
        assert_eq!(instance_pid("latlab-123"), Some(123));
        assert_eq!(instance_pid("latlab-123-spike"), Some(123));
        assert_eq!(instance_pid("latlab-"), None);
        assert_eq!(instance_pid("latlab-12x"), None);
        assert_eq!(instance_pid("other-123"), None);
    }
}
