//! What procfs says of processes and threads: a process's uids and name, this process's
//! threads, the tasks runnable now, the kernel's symbols. Every read is below an injectable
//! root (`/` on the live machine, as in [`crate::inventory`]), so tests read a fake tree.

use std::io;
use std::path::{Path, PathBuf};

/// `/proc` below `root`.
fn proc(root: &Path) -> PathBuf {
    root.join("proc")
}

/// The real and effective uid of a process (`/proc/PID/status`), None when it is gone.
pub fn uids(root: &Path, pid: i32) -> Option<(u32, u32)> {
    let status = std::fs::read_to_string(proc(root).join(pid.to_string()).join("status")).ok()?;
    let mut ids = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .map(|v| v.parse::<u32>().ok());
    Some((ids.next()??, ids.next()??))
}

/// A task's `/proc/PID/comm` as the kernel gives it (with its newline), a small read.
pub fn comm(root: &Path, pid: i64) -> Option<String> {
    std::fs::read_to_string(proc(root).join(pid.to_string()).join("comm")).ok()
}

/// Processes whose name starts with `prefix` (kernel threads such as `timerlat/0`):
/// (pid, name without its newline).
pub fn named(root: &Path, prefix: &str) -> Vec<(i64, String)> {
    let Ok(dir) = std::fs::read_dir(proc(root)) else {
        return vec![];
    };
    let mut v: Vec<(i64, String)> = dir
        .flatten()
        .filter_map(|p| p.file_name().to_str()?.parse::<i64>().ok())
        .filter_map(|pid| Some((pid, comm(root, pid)?.trim_end_matches('\n').to_string())))
        .filter(|(_, c)| c.starts_with(prefix))
        .collect();
    v.sort();
    v
}

/// This process's name (`/proc/self/comm`, without its newline), None when unreadable.
pub fn own_comm(root: &Path) -> Option<String> {
    std::fs::read_to_string(proc(root).join("self/comm"))
        .ok()
        .map(|s| s.trim_end_matches('\n').to_string())
}

/// This process's threads (`/proc/self/task`), by tid; empty when unreadable.
pub fn own_threads(root: &Path) -> Vec<i64> {
    let Ok(dir) = std::fs::read_dir(proc(root).join("self/task")) else {
        return vec![];
    };
    dir.flatten()
        .filter_map(|t| t.file_name().to_str().and_then(|s| s.parse().ok()))
        .collect()
}

/// The name of one of this process's threads (`/proc/self/task/TID/comm`, without its
/// newline), None when it is gone.
pub fn own_thread_comm(root: &Path, tid: i64) -> Option<String> {
    std::fs::read_to_string(proc(root).join(format!("self/task/{tid}/comm")))
        .ok()
        .map(|s| s.trim_end_matches('\n').to_string())
}

/// Tasks runnable now (`R` in `/proc/PID/task/TID/stat`): (tid, CPU, kernel prio).
pub fn runnable(root: &Path) -> Vec<(i64, u32, i64)> {
    let mut v = Vec::new();
    let Ok(procs) = std::fs::read_dir(proc(root)) else {
        return v;
    };
    for p in procs.flatten() {
        let name = p.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(p.path().join("task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
                continue;
            };
            if let Some(x) = parse_runnable_stat(&stat) {
                v.push(x);
            }
        }
    }
    v
}

/// (tid, processor, prio) of a `stat` line in state R. The comm may hold anything: the fields
/// start after the last `)`.
pub fn parse_runnable_stat(s: &str) -> Option<(i64, u32, i64)> {
    let (head, rest) = s.rsplit_once(')')?;
    let pid: i64 = head.split_once(' ')?.0.trim().parse().ok()?;
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    // f[0] = field 3 (state); field N is f[N - 3].
    if f.first()? != &"R" {
        return None;
    }
    let priority: i64 = f.get(18 - 3)?.parse().ok()?;
    let cpu: u32 = f.get(39 - 3)?.parse().ok()?;
    Some((pid, cpu, priority + 100))
}

/// The kernel's symbol table (`/proc/kallsyms`), read in short chunks.
pub fn kallsyms(root: &Path) -> io::Result<Vec<u8>> {
    crate::shortio::read_chunked(std::fs::File::open(proc(root).join("kallsyms"))?, 64 << 10)
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    const STAT: &str = "42 (a) b) R 1 42 42 0 -1 4194560 0 0 0 0 5 1 0 0 20 0 1 0 100 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0";

    /// A fake machine root with `/proc` files.
    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (p, text) in files {
            let p = d.path().join("proc").join(p);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
        d
    }

    #[test]
    fn stat_lines_with_odd_comms() {
        assert_eq!(parse_runnable_stat(STAT), Some((42, 3, 120)));
        let s = STAT.replace(" R ", " S ");
        assert_eq!(parse_runnable_stat(&s), None);
        assert_eq!(parse_runnable_stat("garbage"), None);
    }

    #[test]
    fn reads_are_below_the_root() {
        let d = tree(&[
            ("7/status", "Name:\tx\nUid:\t1000\t0\t0\t0\nGid:\t0\n"),
            ("7/comm", "lat-burst\n"),
            ("8/status", "Name:\ty\n"),
            ("self/comm", "latlab\n"),
            ("self/task/7/comm", "latlab-cpu1\n"),
            ("self/task/9/comm", "latlab\n"),
            ("self/task/notatid/comm", "x\n"),
            ("kallsyms", "ffffffff81000000 T hrtimer_wakeup\n"),
            ("42/task/42/stat", STAT),
            (
                "42/task/43/stat",
                &STAT.replace("42 (a", "43 (a").replace(" R ", " S "),
            ),
            ("self/task/44/stat", &STAT.replace("42 (a", "44 (a")),
        ]);
        let root = d.path();
        assert_eq!(uids(root, 7), Some((1000, 0)));
        assert_eq!(uids(root, 8), None, "no Uid line");
        assert_eq!(uids(root, 99), None, "gone");
        assert_eq!(comm(root, 7).as_deref(), Some("lat-burst\n"));
        assert_eq!(comm(root, 99), None);
        assert_eq!(own_comm(root).as_deref(), Some("latlab"));
        let mut tids = own_threads(root);
        tids.sort();
        assert_eq!(tids, [7, 9, 44]);
        assert_eq!(own_thread_comm(root, 7).as_deref(), Some("latlab-cpu1"));
        assert_eq!(own_thread_comm(root, 99), None);
        assert_eq!(
            kallsyms(root).unwrap(),
            b"ffffffff81000000 T hrtimer_wakeup\n"
        );
        // Only numbered processes' tasks, only those in state R.
        assert_eq!(runnable(root), [(42, 3, 120)]);
    }

    #[test]
    fn an_empty_root_reads_nothing() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        assert_eq!(own_comm(root), None);
        assert!(own_threads(root).is_empty());
        assert!(runnable(root).is_empty());
        assert!(kallsyms(root).is_err());
    }
}
