//! The ledger: every change latlab makes to the machine, written down *before* it is made.
//!
//! One file per latlab process, `/run/latlab/<pid>.json` (`$TMPDIR/latlab-<uid>` when not root;
//! directory overridable with `LATLAB_RUNTIME_DIR`, for tests). The directory is created 0700
//! and the ledgers 0600; a directory or ledger another user owns, or others may write, is
//! refused (its entries would make root undo what someone else wrote down). Each entry is something to undo: a knob's original value,
//! a tracefs instance, a load's process group and cgroup, a scratch directory. A live run
//! undoes its entries itself ([`Ledger::restore_all`]); after a SIGKILL, `latlab cleanup` reads
//! the files of dead pids and undoes them. Writes are atomic (temp file + rename), so a reader
//! sees the previous or the next state, never half of one.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Something latlab changed or created, and how to undo it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Entry {
    /// A file (sysfs/procfs knob) whose original content is restored.
    Knob { path: PathBuf, original: String },
    /// A tracefs instance directory to remove (`rmdir` after turning tracing off).
    TracefsInstance { path: PathBuf },
    /// tracefs mounted by latlab at this path: unmount at the end.
    TracefsMount { path: PathBuf },
    /// A load's process group (killed with SIGKILL) and cgroup (`cgroup.kill`, then rmdir).
    ProcessGroup {
        pgid: i32,
        #[serde(default)]
        cgroup: Option<PathBuf>,
        #[serde(default)]
        name: String,
        /// Start time of the group leader (as [`process_starttime`]), so a recycled pid is not
        /// mistaken for the leader. None in older ledgers and for cgroup-only entries.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        leader_starttime: Option<u64>,
    },
    /// A scratch directory to remove recursively.
    ScratchDir { path: PathBuf },
    /// A measurement under way on these CPUs (measuring threads; senders in the wakeup mode),
    /// written before it starts so that another run can tell ([`measuring_now`]). Nothing to
    /// undo: it ends with its process.
    Measuring { command: String, cpus: Vec<u32> },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LedgerFile {
    pub pid: u32,
    /// Process start time (field 22 of /proc/PID/stat), so a recycled pid is not mistaken
    /// for the owner.
    pub starttime: Option<u64>,
    pub entries: Vec<(u64, Entry)>,
}

/// Handle to an entry, to forget it once undone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EntryId(pub u64);

/// The runtime directory: `LATLAB_RUNTIME_DIR`, else `/run/latlab` for root and
/// `$TMPDIR/latlab-<uid>` for other users.
pub fn runtime_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("LATLAB_RUNTIME_DIR") {
        return PathBuf::from(d);
    }
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if uid == 0 {
        PathBuf::from("/run/latlab")
    } else {
        std::env::temp_dir().join(format!("latlab-{uid}"))
    }
}

/// Whether a process `pid` exists now (`/proc/PID`; a recycled pid counts as existing).
pub fn process_exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Start time of a process in clock ticks since boot, if it exists.
pub fn process_starttime(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // comm may contain spaces and ')': fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[derive(Debug)]
pub struct Ledger {
    path: PathBuf,
    file: LedgerFile,
    next: u64,
}

impl Ledger {
    /// Open this process's ledger (creating the runtime directory).
    pub fn open() -> io::Result<Ledger> {
        Self::open_in(&runtime_dir())
    }

    /// Open a ledger in `dir`, created 0700 if missing; refused (with the path and the fix in
    /// the error) when another user owns `dir` or others may write it.
    pub fn open_in(dir: &Path) -> io::Result<Ledger> {
        Self::open_file(dir, None)
    }

    /// A second ledger of this process, `<pid>-<part>.json` in the runtime directory, for
    /// what lives apart from the run's own ledger (the threshold actions', the end actions',
    /// which run after the run's ledger is closed). `latlab cleanup` reads it as any other.
    pub fn open_part(part: &str) -> io::Result<Ledger> {
        Self::open_file(&runtime_dir(), Some(part))
    }

    fn open_file(dir: &Path, part: Option<&str>) -> io::Result<Ledger> {
        crate::safefile::ensure_private_dir(dir)?;
        let pid = std::process::id();
        let name = match part {
            Some(p) => format!("{pid}-{p}.json"),
            None => format!("{pid}.json"),
        };
        let l = Ledger {
            path: dir.join(name),
            file: LedgerFile {
                pid,
                starttime: process_starttime(pid),
                entries: Vec::new(),
            },
            next: 1,
        };
        l.persist()?;
        Ok(l)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.file.entries.iter().map(|(_, e)| e)
    }

    fn persist(&self) -> io::Result<()> {
        write_file(&self.path, &self.file)
    }

    /// Write down an entry (before the change it describes is made).
    pub fn add(&mut self, e: Entry) -> io::Result<EntryId> {
        let id = self.next;
        self.next += 1;
        self.file.entries.push((id, e));
        if let Err(err) = self.persist() {
            self.file.entries.pop();
            return Err(err);
        }
        Ok(EntryId(id))
    }

    /// Forget an entry that has been undone.
    pub fn forget(&mut self, id: EntryId) -> io::Result<()> {
        self.file.entries.retain(|(i, _)| *i != id.0);
        self.persist()
    }

    /// Save a knob's value, then set it. Setting the same path twice keeps the first original.
    pub fn set_knob(&mut self, path: &Path, value: &str) -> io::Result<EntryId> {
        let existing = self.file.entries.iter().find_map(|(i, e)| match e {
            Entry::Knob { path: p, .. } if p == path => Some(EntryId(*i)),
            _ => None,
        });
        let id = match existing {
            Some(id) => id,
            None => {
                let original = fs::read_to_string(path)?;
                self.add(Entry::Knob {
                    path: path.to_path_buf(),
                    original: knob_value(&original),
                })?
            }
        };
        fs::write(path, value)?;
        Ok(id)
    }

    /// Undo every entry, newest first. Returns one line per thing undone or failed (failures
    /// start with "could not"). What could not be undone stays in the ledger.
    pub fn restore_all(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        let entries = self.file.entries.clone();
        for (id, e) in entries.iter().rev() {
            let (line, ok) = undo_checked(e);
            out.push(if ok || line.starts_with("could not") {
                line
            } else {
                format!("could not finish: {line}")
            });
            if ok {
                let _ = self.forget(EntryId(*id));
            }
        }
        out
    }

    /// Undo everything and delete the ledger file, unless something could not be undone: then
    /// the file keeps those entries, and `latlab cleanup` retries them once this process is
    /// gone.
    pub fn close(mut self) -> Vec<String> {
        let out = self.restore_all();
        if self.file.entries.is_empty() {
            let _ = fs::remove_file(&self.path);
        }
        out
    }

    /// True when every entry has been undone (or none was made).
    pub fn is_empty(&self) -> bool {
        self.file.entries.is_empty()
    }
}

/// The value to write back for a knob whose file read `content`. Files like
/// `/sys/block/*/queue/scheduler` show `[current]` among choices; most show the value.
pub fn knob_value(content: &str) -> String {
    let t = content.trim();
    if let (Some(a), Some(b)) = (t.find('['), t.find(']')) {
        if a < b {
            return t[a + 1..b].to_string();
        }
    }
    t.to_string()
}

/// How long a killed load's cgroup may take to empty before its removal is given up. A
/// SIGKILLed writer blocked in the block layer (dd under dirty-page writeback) leaves only
/// when its I/O completes: seconds on a busy disk, so 2 s was not enough (a CI run left
/// `latlab-<pid>-0-dd` behind).
pub const CGROUP_EMPTY_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// Kill what is left in a cgroup (`cgroup.kill`, where the kernel has it) and remove it,
/// retrying while it is still populated, up to `wait`. Already gone counts as removed. Returns
/// how long its processes took to leave.
pub fn remove_cgroup(cg: &Path, wait: std::time::Duration) -> io::Result<std::time::Duration> {
    let t0 = std::time::Instant::now();
    let deadline = t0 + wait;
    let mut killed = false;
    loop {
        match fs::remove_dir(cg) {
            Ok(()) => return Ok(t0.elapsed()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(t0.elapsed()),
            Err(e) => {
                if std::time::Instant::now() >= deadline {
                    let procs = fs::read_to_string(cg.join("cgroup.procs")).unwrap_or_default();
                    let procs: Vec<&str> = procs.split_whitespace().collect();
                    return Err(io::Error::new(
                        e.kind(),
                        format!(
                            "{e} after {:.0} s; processes still in it: {procs:?}",
                            wait.as_secs_f64()
                        ),
                    ));
                }
                if !killed {
                    // Once: cgroup.kill reaches processes that left the group.
                    let _ = fs::write(cg.join("cgroup.kill"), "1");
                    killed = true;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
}

/// Undo one entry. Idempotent: undoing what is already gone says so and succeeds.
pub fn undo(e: &Entry) -> String {
    undo_checked(e).0
}

/// Undo one entry: what was done, and whether it is fully undone (false: the entry should be
/// kept, to be retried).
pub fn undo_checked(e: &Entry) -> (String, bool) {
    match e {
        Entry::Knob { path, original } => match fs::write(path, original) {
            Ok(()) => (format!("restored {} to {original:?}", path.display()), true),
            Err(err) => (
                format!(
                    "could not restore {} to {original:?}: {err}",
                    path.display()
                ),
                false,
            ),
        },
        Entry::TracefsInstance { path } => {
            if !path.exists() {
                return (
                    format!("tracefs instance {} already gone", path.display()),
                    true,
                );
            }
            let _ = fs::write(path.join("tracing_on"), "0");
            let _ = fs::write(path.join("events/enable"), "0");
            let _ = fs::write(path.join("events/ftrace/print/trigger"), "!traceoff");
            // Removal can race with a reader closing its fds: retry briefly.
            let mut last = None;
            for _ in 0..50 {
                match fs::remove_dir(path) {
                    Ok(()) => {
                        return (format!("removed tracefs instance {}", path.display()), true)
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        return (
                            format!("tracefs instance {} already gone", path.display()),
                            true,
                        )
                    }
                    Err(e) => last = Some(e),
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            (
                format!(
                    "could not remove tracefs instance {}: {}",
                    path.display(),
                    last.map(|e| e.to_string()).unwrap_or_default()
                ),
                false,
            )
        }
        Entry::TracefsMount { path } => {
            let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap_or_default();
            // SAFETY: c is a valid NUL-terminated path.
            let r = unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
            if r == 0 {
                (format!("unmounted tracefs at {}", path.display()), true)
            } else {
                let e = io::Error::last_os_error();
                // EINVAL: not a mount point (any more) — nothing to undo.
                let gone =
                    e.raw_os_error() == Some(libc::EINVAL) || e.kind() == io::ErrorKind::NotFound;
                if gone {
                    (
                        format!("tracefs at {} already unmounted", path.display()),
                        true,
                    )
                } else {
                    (
                        format!("could not unmount tracefs at {}: {e}", path.display()),
                        false,
                    )
                }
            }
        }
        Entry::ProcessGroup {
            pgid,
            cgroup,
            name,
            leader_starttime,
        } => {
            let mut s = String::new();
            let recycled = match (*pgid > 1, leader_starttime) {
                // The leader's pid now belongs to another process: our group is gone (a pid
                // still in use as a group id is never handed out again), and the number may
                // name someone else's group. Never kill it.
                (true, Some(st)) => process_starttime(*pgid as u32).is_some_and(|now| now != *st),
                _ => false,
            };
            if recycled {
                s = format!(
                    "process group {pgid} ({name}) already gone (pid {pgid} now belongs to another process; not killed)"
                );
            } else if *pgid > 1 {
                // SAFETY: plain syscall; a negative pid names the group.
                let r = unsafe { libc::kill(-pgid, libc::SIGKILL) };
                s = if r == 0 {
                    format!("killed process group {pgid} ({name})")
                } else {
                    format!("process group {pgid} ({name}) already gone")
                };
            }
            let mut ok = true;
            if let Some(cg) = cgroup {
                if cg.exists() {
                    let _ = fs::write(cg.join("cgroup.kill"), "1");
                    match remove_cgroup(cg, CGROUP_EMPTY_WAIT) {
                        Ok(waited) => {
                            s.push_str(&format!("; removed cgroup {}", cg.display()));
                            if waited.as_millis() >= 500 {
                                s.push_str(&format!(
                                    " (its processes took {:.1} s to leave)",
                                    waited.as_secs_f64()
                                ));
                            }
                        }
                        Err(e) => {
                            ok = false;
                            s.push_str(&format!("; could not remove cgroup {}: {e}", cg.display()));
                        }
                    }
                }
            }
            (s, ok)
        }
        Entry::Measuring { command, cpus } => (
            format!(
                "{command} on CPUs {} has ended",
                latlab_core::cpulist::format_cpu_list(cpus)
            ),
            true,
        ),
        Entry::ScratchDir { path } => match fs::remove_dir_all(path) {
            Ok(()) => (
                format!("removed scratch directory {}", path.display()),
                true,
            ),
            Err(e) if e.kind() == io::ErrorKind::NotFound => (
                format!("scratch directory {} already gone", path.display()),
                true,
            ),
            Err(e) => (format!("could not remove {}: {e}", path.display()), false),
        },
    }
}

/// Write a ledger file atomically (temp file with an unpredictable name, O_EXCL|O_NOFOLLOW,
/// mode 0600, rename). `latlab cleanup` uses it to keep what it could not undo in a dead
/// run's ledger. No fsync: a ledger must outlive latlab's process (the page cache does), not
/// the machine, whose reboot ends the processes, instances and settings it lists (`/run` is
/// a tmpfs on most systems, where an fsync does nothing). Under a load that restarts, each
/// restart writes the ledger twice, and on a disk-backed `/run` an fsync put the load's
/// supervisor in the kernel for up to 986 µs on a CPU that may be measured
/// (docs/performance.md).
pub fn write_file(path: &Path, file: &LedgerFile) -> io::Result<()> {
    let bytes = serde_json::to_vec_pretty(file).map_err(io::Error::other)?;
    crate::safefile::write_atomic_mode_unsynced(path, &bytes, 0o600)
}

/// Ledgers in `dir` whose owner is no longer alive (pid gone, or recycled). Untrusted ones
/// (see [`orphaned_trusted`]) are left out.
pub fn orphaned(dir: &Path) -> io::Result<Vec<(PathBuf, LedgerFile)>> {
    orphaned_trusted(dir).map(|(o, _)| o)
}

/// Ledgers in `dir` whose owner is no longer alive, and one line per ledger not trusted (not
/// a regular file owned by the caller that others cannot write; or the whole directory not
/// trusted): those are not to be acted on.
#[allow(clippy::type_complexity)]
pub fn orphaned_trusted(dir: &Path) -> io::Result<(Vec<(PathBuf, LedgerFile)>, Vec<String>)> {
    let (all, untrusted) = trusted_ledgers(dir)?;
    let out = all
        .into_iter()
        .filter(|(_, _, alive)| !alive)
        .map(|(p, f, _)| (p, f))
        .collect();
    Ok((out, untrusted))
}

/// A measurement another live latlab process has under way ([`Entry::Measuring`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtherRun {
    pub pid: u32,
    pub command: String,
    pub cpus: Vec<u32>,
}

/// The measurements other live latlab processes have under way, from their ledgers in
/// `dir` (trusted ones only, see [`orphaned_trusted`]), by pid.
pub fn measuring_now(dir: &Path) -> Vec<OtherRun> {
    let me = std::process::id();
    let Ok((all, _)) = trusted_ledgers(dir) else {
        return Vec::new();
    };
    let mut out: Vec<OtherRun> = Vec::new();
    for (_, f, alive) in all {
        if !alive || f.pid == me {
            continue;
        }
        for (_, e) in f.entries {
            if let Entry::Measuring { command, cpus } = e {
                out.push(OtherRun {
                    pid: f.pid,
                    command,
                    cpus,
                });
            }
        }
    }
    out.sort_by_key(|o| o.pid);
    out
}

/// Every trusted ledger in `dir` with whether its owner is alive (pid there, same start
/// time), sorted by path, and one line per ledger not trusted.
#[allow(clippy::type_complexity)]
fn trusted_ledgers(dir: &Path) -> io::Result<(Vec<(PathBuf, LedgerFile, bool)>, Vec<String>)> {
    let mut out = Vec::new();
    let mut untrusted = Vec::new();
    match crate::safefile::check_trusted(dir, true) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((out, untrusted)),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            untrusted.push(format!(
                "skipping the ledgers in {}: {e}; nothing they list is undone (check them, then remove the directory)",
                dir.display()
            ));
            return Ok((out, untrusted));
        }
        Err(e) => return Err(e),
    }
    let rd = fs::read_dir(dir)?;
    for ent in rd {
        let p = ent?.path();
        if p.extension().is_none_or(|e| e != "json") {
            continue;
        }
        if let Err(e) = crate::safefile::check_trusted(&p, false) {
            if e.kind() != io::ErrorKind::NotFound {
                untrusted.push(format!(
                    "skipping ledger {}: {e}; nothing it lists is undone (check it, then remove it)",
                    p.display()
                ));
            }
            continue;
        }
        let Ok(bytes) = fs::read(&p) else { continue };
        let Ok(file) = serde_json::from_slice::<LedgerFile>(&bytes) else {
            continue;
        };
        let alive = match process_starttime(file.pid) {
            Some(st) => file.starttime.is_none_or(|s| s == st),
            None => false,
        };
        out.push((p, file, alive));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    untrusted.sort();
    Ok((out, untrusted))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knob_saved_before_set_and_restored() {
        let dir = tempfile::tempdir().unwrap();
        let knob = dir.path().join("knob");
        fs::write(&knob, "none [mq-deadline] kyber\n").unwrap();
        let mut l = Ledger::open_in(&dir.path().join("run")).unwrap();
        l.set_knob(&knob, "none").unwrap();
        // The ledger on disk already holds the original.
        let on_disk: LedgerFile = serde_json::from_slice(&fs::read(l.path()).unwrap()).unwrap();
        assert_eq!(
            on_disk.entries[0].1,
            Entry::Knob {
                path: knob.clone(),
                original: "mq-deadline".into()
            }
        );
        l.set_knob(&knob, "kyber").unwrap();
        assert_eq!(l.entries().count(), 1);
        let path = l.path().to_path_buf();
        let lines = l.close();
        assert_eq!(fs::read_to_string(&knob).unwrap(), "mq-deadline");
        assert!(lines[0].contains("restored"), "{lines:?}");
        assert!(!path.exists());
    }

    /// A run that cannot undo an entry keeps it in its ledger file (for `latlab cleanup`) and
    /// says so; the rest is undone and forgotten.
    #[test]
    fn close_keeps_what_could_not_be_undone() {
        let dir = tempfile::tempdir().unwrap();
        let knob = dir.path().join("knob");
        fs::write(&knob, "a").unwrap();
        let scratch = dir.path().join("scratch");
        fs::create_dir(&scratch).unwrap();
        let mut l = Ledger::open_in(&dir.path().join("run")).unwrap();
        l.set_knob(&knob, "b").unwrap();
        l.add(Entry::ScratchDir {
            path: scratch.clone(),
        })
        .unwrap();
        let path = l.path().to_path_buf();
        // The knob's file vanishes (its directory with it): it cannot be written back.
        fs::remove_file(&knob).unwrap();
        fs::create_dir(&knob).unwrap();
        let lines = l.close();
        assert!(!scratch.exists());
        assert!(
            lines.iter().any(|l| l.starts_with("could not restore")),
            "{lines:?}"
        );
        let on_disk: LedgerFile = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert_eq!(on_disk.entries.len(), 1, "{on_disk:?}");
        assert!(matches!(&on_disk.entries[0].1, Entry::Knob { path, .. } if *path == knob));
    }

    /// `latlab cleanup` killed load process groups by number; after pid reuse that number can
    /// name someone else's group. A leader whose start time differs is left alone.
    #[test]
    fn recycled_group_leader_is_not_killed() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep")
            .arg("100")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id();
        let st = process_starttime(pid).unwrap();
        let stale = Entry::ProcessGroup {
            pgid: pid as i32,
            cgroup: None,
            name: "stale".into(),
            leader_starttime: Some(st + 1),
        };
        let line = undo(&stale);
        assert!(line.contains("not killed"), "{line}");
        assert!(
            child.try_wait().unwrap().is_none(),
            "a recycled pid's group was killed"
        );
        // The real leader (same start time) is killed.
        let own = Entry::ProcessGroup {
            pgid: pid as i32,
            cgroup: None,
            name: "own".into(),
            leader_starttime: Some(st),
        };
        assert!(undo(&own).contains("killed process group"));
        let status = child.wait().unwrap();
        assert!(!status.success());
    }

    #[test]
    fn scratch_dir_and_orphans() {
        let dir = tempfile::tempdir().unwrap();
        let scratch = dir.path().join("scratch");
        fs::create_dir_all(scratch.join("a/b")).unwrap();
        let rt = dir.path().join("run");
        let mut l = Ledger::open_in(&rt).unwrap();
        l.add(Entry::ScratchDir {
            path: scratch.clone(),
        })
        .unwrap();
        // Our own ledger is not an orphan.
        assert!(orphaned(&rt).unwrap().is_empty());
        // A ledger of a pid that cannot exist is.
        let dead = LedgerFile {
            pid: u32::MAX - 1,
            starttime: Some(1),
            entries: vec![(
                1,
                Entry::ScratchDir {
                    path: scratch.clone(),
                },
            )],
        };
        fs::write(rt.join("dead.json"), serde_json::to_vec(&dead).unwrap()).unwrap();
        let o = orphaned(&rt).unwrap();
        assert_eq!(o.len(), 1);
        assert_eq!(o[0].1.pid, u32::MAX - 1);
        l.restore_all();
        assert!(!scratch.exists());
        assert!(undo(&Entry::ScratchDir { path: scratch }).contains("already gone"));
    }

    /// Another live process's measurement is seen; this process's own and a dead one's are not.
    #[test]
    fn measuring_now_lists_live_other_runs() {
        let dir = tempfile::tempdir().unwrap();
        let rt = dir.path().join("run");
        let mut own = Ledger::open_in(&rt).unwrap();
        let m = |cpus: Vec<u32>| Entry::Measuring {
            command: "latlab run".into(),
            cpus,
        };
        own.add(m(vec![0])).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("100")
            .spawn()
            .unwrap();
        let live = LedgerFile {
            pid: child.id(),
            starttime: process_starttime(child.id()),
            entries: vec![(1, m(vec![1, 2]))],
        };
        write_file(&rt.join("live.json"), &live).unwrap();
        let dead = LedgerFile {
            pid: u32::MAX - 1,
            starttime: Some(1),
            entries: vec![(1, m(vec![1]))],
        };
        write_file(&rt.join("dead.json"), &dead).unwrap();
        assert_eq!(
            measuring_now(&rt),
            vec![OtherRun {
                pid: child.id(),
                command: "latlab run".into(),
                cpus: vec![1, 2]
            }]
        );
        let _ = child.kill();
        let _ = child.wait();
        assert!(measuring_now(&rt).is_empty());
        assert!(undo(&m(vec![1, 2])).contains("has ended"));
    }

    /// A ledger others may write (anyone could have listed what root is to undo) is not
    /// acted on: reported, left out of the orphans.
    #[test]
    fn writable_by_others_ledger_is_not_trusted() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let rt = dir.path().join("run");
        crate::safefile::ensure_private_dir(&rt).unwrap();
        let dead = LedgerFile {
            pid: u32::MAX - 1,
            starttime: Some(1),
            entries: vec![],
        };
        let p = rt.join("dead.json");
        write_file(&p, &dead).unwrap();
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(orphaned(&rt).unwrap().len(), 1);
        fs::set_permissions(&p, fs::Permissions::from_mode(0o666)).unwrap();
        let (o, untrusted) = orphaned_trusted(&rt).unwrap();
        assert!(o.is_empty(), "{o:?}");
        assert_eq!(untrusted.len(), 1);
        assert!(untrusted[0].contains("writable by others"), "{untrusted:?}");
        // A directory others may write: nothing in it is trusted, and no ledger is opened there.
        fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
        fs::set_permissions(&rt, fs::Permissions::from_mode(0o777)).unwrap();
        let (o, untrusted) = orphaned_trusted(&rt).unwrap();
        assert!(o.is_empty() && untrusted.len() == 1, "{o:?} {untrusted:?}");
        let e = Ledger::open_in(&rt).unwrap_err().to_string();
        assert!(e.contains(&rt.display().to_string()), "{e}");
    }
}
