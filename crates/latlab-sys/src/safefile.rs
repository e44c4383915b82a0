//! Files latlab writes, written safely (issue 14 §3).
//!
//! - [`write_atomic`]: a regular file (or a name not yet taken) is replaced atomically: a temp
//!   file with an unpredictable name, opened `O_CREAT|O_EXCL|O_NOFOLLOW`, fsynced, renamed over
//!   the name. Anything else is never replaced: a character device (`/dev/null`, a tty), a FIFO
//!   or a socket is written *through* (opened and written, like a shell's `>`); a symlink is
//!   followed — to a regular file, that file is replaced atomically and the link stays; to
//!   anything else, that is written through; a directory is refused. A failed write leaves no
//!   temp file behind.
//! - [`ensure_private_dir`] / [`check_trusted`]: directories and files latlab keeps its state
//!   in (the runtime directory, ledgers) are created 0700/0600 and refused when another user
//!   owns them or others may write them.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Mode bits that let someone other than the owner write.
const OTHERS_WRITE: u32 = 0o022;

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// Write `bytes` to `path` (see the module doc). New files get `mode` (less the umask).
pub fn write_atomic_mode(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    write_safely(path, bytes, mode, true)
}

/// [`write_atomic`] without the fsync before the rename: for files that are best effort (a
/// spike's trace and analysis, megabytes each, written while the measurement runs). An fsync
/// submits the file's writeback from the calling thread, a stretch of kernel work that a
/// measuring thread on that CPU cannot preempt on a kernel without full preemption; without
/// it the kernel's flusher writes the pages back in its own time. A crash soon after may leave
/// such a file empty, never another file overwritten.
pub fn write_atomic_unsynced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_safely(path, bytes, 0o666, false)
}

/// [`write_atomic_unsynced`] with the new file's `mode` (less the umask): for state that only
/// has to outlive latlab's process, not the machine (a run's checkpoint, a ledger). The page
/// cache outlives a SIGKILL, and the rename still gives a reader the old or the new file.
pub fn write_atomic_mode_unsynced(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    write_safely(path, bytes, mode, false)
}

fn write_safely(path: &Path, bytes: &[u8], mode: u32, sync: bool) -> io::Result<()> {
    let lmeta = match fs::symlink_metadata(path) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let ft = lmeta.as_ref().map(|m| m.file_type());
    match ft {
        None => replace(path, bytes, mode, sync),
        Some(t) if t.is_file() => replace(path, bytes, mode, sync),
        Some(t) if t.is_dir() => Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            "is a directory; give a file name",
        )),
        Some(t) if t.is_symlink() => match fs::metadata(path) {
            // To a regular file: replace the target, keep the link.
            Ok(m) if m.is_file() => match fs::canonicalize(path) {
                Ok(target) => replace(&target, bytes, mode, sync),
                Err(_) => write_through(path, bytes),
            },
            Ok(m) if m.is_dir() => Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                "is a symlink to a directory; give a file name",
            )),
            // A device, FIFO (`/proc/self/fd/1`) or socket: written through.
            Ok(_) => write_through(path, bytes),
            // Dangling: never replace the link by a file (nor create its target).
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!("is a symlink whose target cannot be used ({e}); remove the link or give another name"),
            )),
        },
        // Character/block device, FIFO, socket.
        Some(_) => write_through(path, bytes),
    }
}

/// [`write_atomic_mode`] with mode 0666 (less the umask), as `File::create`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_mode(path, bytes, 0o666)
}

/// Open what is there (no create, no replace) and write into it.
fn write_through(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)?;
    f.write_all(bytes)?;
    f.flush()
}

/// A temp file in `path`'s directory with an unpredictable name, written, fsynced (`sync`) and
/// renamed over `path`. On failure the temp file is removed.
fn replace(path: &Path, bytes: &[u8], mode: u32, sync: bool) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let prefix = format!(".{name}.");
    let mut tmp = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .rand_bytes(12)
        .make_in(dir, |p| {
            fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(p)
        })?;
    // In short calls: checkpoints are written while the measurement runs (see shortio).
    crate::shortio::write_chunked(tmp.as_file_mut(), bytes, crate::shortio::WRITE_CHUNK)?;
    if sync {
        tmp.as_file().sync_all()?;
    }
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Why `path` (already lstat'ed) is not to be trusted by this user, or None.
fn distrust(path: &Path, m: &fs::Metadata, want_dir: bool) -> Option<String> {
    let what = if want_dir { "directory" } else { "file" };
    let ft = m.file_type();
    if ft.is_symlink() {
        return Some(format!("{} is a symlink, not a {what}", path.display()));
    }
    if want_dir && !ft.is_dir() || !want_dir && !ft.is_file() {
        return Some(format!("{} is not a {what}", path.display()));
    }
    let me = euid();
    if m.uid() != me {
        return Some(format!(
            "{} is owned by uid {}, not by you (uid {me})",
            path.display(),
            m.uid()
        ));
    }
    if m.mode() & OTHERS_WRITE != 0 {
        return Some(format!(
            "{} is writable by others (mode {:o})",
            path.display(),
            m.mode() & 0o7777
        ));
    }
    None
}

/// Ok when `path` is a directory (`dir`) or regular file owned by the caller and not writable
/// by group or others (not following a symlink); else an error saying which.
pub fn check_trusted(path: &Path, dir: bool) -> io::Result<()> {
    let m = fs::symlink_metadata(path)?;
    match distrust(path, &m, dir) {
        None => Ok(()),
        Some(why) => Err(io::Error::new(io::ErrorKind::PermissionDenied, why)),
    }
}

/// Create `dir` (and missing parents) with mode 0700 if it does not exist, then check it is
/// ours and private. The error names the path and the fix.
pub fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent)?;
    }
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {
            // The umask may have taken bits away, never added: set exactly 0700.
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    check_trusted(dir, true).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "refusing to use {}: {e}; remove it (latlab creates it mode 0700) or set LATLAB_RUNTIME_DIR to a directory you own that others cannot write",
                dir.display()
            ),
        )
    })?;
    // Ours and not writable by others, but readable (made by hand, or by an older latlab):
    // private from now on.
    let m = fs::symlink_metadata(dir)?;
    if m.mode() & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt;

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// The unsynced variant keeps every other guarantee: a regular file replaced with no temp
    /// file left, a device written through, a dangling link refused.
    #[test]
    fn unsynced_writes_are_as_safe_as_synced_ones() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("trace.txt");
        write_atomic_unsynced(&p, b"one").unwrap();
        write_atomic_unsynced(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(entries(d.path()), ["trace.txt"]);
        write_atomic_unsynced(Path::new("/dev/null"), b"x").unwrap();
        assert!(fs::symlink_metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
        let link = d.path().join("dangling");
        std::os::unix::fs::symlink(d.path().join("nowhere/x"), &link).unwrap();
        assert!(write_atomic_unsynced(&link, b"x").is_err());
        assert!(!d.path().join("nowhere").exists());
    }

    #[test]
    fn regular_file_replaced_and_no_temp_left() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.txt");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(entries(d.path()), ["out.txt"]);
    }

    /// The old scheme wrote `.NAME.tmp.PID` with `File::create`, following a symlink planted
    /// there: the link's target was overwritten. Names are unpredictable now and opened
    /// O_EXCL|O_NOFOLLOW: a link at the old name is left alone, its target untouched.
    #[test]
    fn planted_symlink_at_old_temp_name_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        fs::write(&victim, "precious").unwrap();
        let p = d.path().join("run.json");
        let planted = d
            .path()
            .join(format!(".run.json.tmp.{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        write_atomic(&p, b"record").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(fs::read(&p).unwrap(), b"record");
        assert!(fs::symlink_metadata(&planted)
            .unwrap()
            .file_type()
            .is_symlink());
        // No temp file is left: only the planted link, the record and the victim.
        assert_eq!(entries(d.path()).len(), 3, "{:?}", entries(d.path()));
    }

    #[test]
    fn symlink_to_file_keeps_the_link() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target.txt");
        fs::write(&target, "old").unwrap();
        let link = d.path().join("link.txt");
        std::os::unix::fs::symlink("target.txt", &link).unwrap();
        write_atomic(&link, b"new").unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read(&target).unwrap(), b"new");
        assert_eq!(entries(d.path()), ["link.txt", "target.txt"]);
    }

    #[test]
    fn dangling_symlink_and_directory_refused() {
        let d = tempfile::tempdir().unwrap();
        let link = d.path().join("dangling");
        std::os::unix::fs::symlink("nowhere", &link).unwrap();
        assert!(write_atomic(&link, b"x").is_err());
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(!d.path().join("nowhere").exists());
        assert!(write_atomic(d.path(), b"x").is_err());
    }

    #[test]
    fn dev_null_written_through() {
        write_atomic(Path::new("/dev/null"), b"report").unwrap();
        let m = fs::symlink_metadata("/dev/null").unwrap();
        assert!(m.file_type().is_char_device());
    }

    #[test]
    fn private_dir_created_0700_and_foreign_modes_refused() {
        let d = tempfile::tempdir().unwrap();
        let rt = d.path().join("a/latlab");
        ensure_private_dir(&rt).unwrap();
        let m = fs::metadata(&rt).unwrap();
        assert_eq!(m.mode() & 0o777, 0o700);
        fs::set_permissions(&rt, fs::Permissions::from_mode(0o770)).unwrap();
        let e = ensure_private_dir(&rt).unwrap_err().to_string();
        assert!(
            e.contains("writable by others") && e.contains("LATLAB_RUNTIME_DIR"),
            "{e}"
        );
        // Ours, readable by others but not writable: used, and made private.
        fs::set_permissions(&rt, fs::Permissions::from_mode(0o755)).unwrap();
        ensure_private_dir(&rt).unwrap();
        assert_eq!(fs::metadata(&rt).unwrap().mode() & 0o777, 0o700);
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&rt, &link).unwrap();
        assert!(ensure_private_dir(&link).is_err());
    }
}
