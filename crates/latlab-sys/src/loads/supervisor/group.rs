//! What a part's processes are and how they are reached: its process group (found in /proc),
//! its cgroup-v2 child (made with a ledger entry first), and the signals sent to both.

use std::ffi::CString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::spawn::Child;
use crate::ledger::{Entry, EntryId, Ledger};

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

pub(super) fn create_cgroup(
    ledger: &Arc<Mutex<Ledger>>,
    path: &Path,
    name: &str,
) -> io::Result<EntryId> {
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
pub(super) fn remaining(c: &Child, cgroup: Option<&Path>) -> (Vec<i32>, usize) {
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

pub(super) fn signal_group(c: &Child, cgroup: Option<&Path>, sig: i32) {
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
