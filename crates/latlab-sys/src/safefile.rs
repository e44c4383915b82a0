//! Files latlab writes, written safely (issue 14 §3).
//!
//! - [`write_atomic`]: a regular file (or a name not yet taken) is replaced atomically: a temp
//!   file with an unpredictable name, opened `O_CREAT|O_EXCL|O_NOFOLLOW`, fsynced, renamed over
//!   the name. Anything else is never replaced: a character device (`/dev/null`, a tty), a FIFO
//!   or a socket is written *through* (opened and written, like a shell's `>`); a symlink is
//!   followed — to a regular file, that file is replaced atomically and the link stays; to
//!   anything else, that is written through; a directory is refused. A failed write leaves no
//!   temp file behind.
//!   A file that is replaced keeps its owner and never gains a permission bit: the temp file
//!   gets the old file's mode (less what the caller asks to withhold) and owner; where latlab
//!   may not give it that owner (not root, someone else's file), the old file is written
//!   through instead, as cyclictest writes its `--json` file.
//! - [`read_regular`]: a whole regular file read only up to a limit; a FIFO, a device or a
//!   larger file is refused before anything is read.
//! - [`ensure_private_dir`] / [`check_trusted`]: directories and files latlab keeps its state
//!   in (the runtime directory, ledgers) are created 0700/0600 and refused when another user
//!   owns them or others may write them.

use std::fs;
use std::io::{self, Read, Write};
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
        None => replace(path, bytes, mode, sync, None),
        Some(t) if t.is_file() => replace(path, bytes, mode, sync, lmeta.as_ref()),
        Some(t) if t.is_dir() => Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            "is a directory; give a file name",
        )),
        Some(t) if t.is_symlink() => match fs::metadata(path) {
            // To a regular file: replace the target, keep the link.
            Ok(m) if m.is_file() => match fs::canonicalize(path) {
                Ok(target) => replace(&target, bytes, mode, sync, Some(&m)),
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

/// Open what is there (no create, no replace) and write into it. A FIFO is opened without
/// blocking first: with no reader, that is an error at once (a blocking open would wait for
/// one forever); with a reader, it is written as usual.
fn write_through(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = match fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "is a FIFO that no process reads; start its reader first, or give a file name",
            ))
        }
        Err(e) => return Err(e),
    };
    set_blocking(&f)?;
    // A regular file reached by name here (a symlink's target that changed since it was
    // looked at) is written from its start, as a shell's `>` would.
    if f.metadata()?.is_file() {
        f.set_len(0)?;
    }
    f.write_all(bytes)?;
    f.flush()
}

/// Clear `O_NONBLOCK` on an open file.
fn set_blocking(f: &fs::File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = f.as_raw_fd();
    // SAFETY: F_GETFL/F_SETFL on a descriptor this function's caller owns.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if fl < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A temp file in `path`'s directory with an unpredictable name, written, fsynced (`sync`) and
/// renamed over `path`. On failure the temp file is removed. `old`: the file being replaced,
/// whose owner the new one keeps and whose mode it never exceeds; when the owner cannot be
/// given (someone else's file, latlab not root), the old file is written through instead.
fn replace(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    sync: bool,
    old: Option<&fs::Metadata>,
) -> io::Result<()> {
    let mode = match old {
        Some(m) => mode & m.mode() & 0o777,
        None => mode,
    };
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
    if let Some(m) = old {
        use std::os::fd::AsRawFd;
        // The umask took bits away at creation; set the kept mode exactly (it is never wider
        // than the old file's), and the old owner.
        tmp.as_file()
            .set_permissions(fs::Permissions::from_mode(mode))?;
        // SAFETY: fchown on the temp file this function just created and holds open.
        if unsafe { libc::fchown(tmp.as_file().as_raw_fd(), m.uid(), m.gid()) } != 0 {
            drop(tmp);
            return write_through(path, bytes);
        }
    }
    // In short calls: checkpoints are written while the measurement runs (see shortio).
    crate::shortio::write_chunked(tmp.as_file_mut(), bytes, crate::shortio::WRITE_CHUNK)?;
    if sync {
        tmp.as_file().sync_all()?;
    }
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Read the whole of `path`, a regular file of at most `max` bytes. Anything else is an error
/// before a byte is read: not a regular file (a FIFO would block, a device never end: opened
/// without blocking, refused after `fstat`), or larger than `max` (`ErrorKind::FileTooLarge`,
/// the message giving both sizes; the caller adds how to raise its limit). A file that grows
/// while it is read is cut at `max + 1` bytes and refused the same way.
pub fn read_regular(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let f = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(path)?;
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            if m.is_dir() {
                "is a directory, not a file"
            } else {
                "is not a regular file (a FIFO, a device or a socket)"
            },
        ));
    }
    let too_large = |n: u64| {
        io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("{n} bytes, larger than the limit of {max} bytes"),
        )
    };
    if m.len() > max {
        return Err(too_large(m.len()));
    }
    let mut b = Vec::with_capacity(m.len() as usize);
    f.take(max.saturating_add(1)).read_to_end(&mut b)?;
    if b.len() as u64 > max {
        return Err(too_large(b.len() as u64));
    }
    Ok(b)
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
    fn a_replaced_file_keeps_its_mode_and_never_gains_a_bit() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("t");
        fs::write(&target, "old").unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o600)).unwrap();
        let link = d.path().join("l");
        std::os::unix::fs::symlink("t", &link).unwrap();
        // Through the link and by its own name; 0666 asked, 0600 kept.
        for p in [&link, &target] {
            write_atomic(p, b"new").unwrap();
            assert_eq!(fs::read(&target).unwrap(), b"new");
            let m = fs::metadata(&target).unwrap();
            assert_eq!(m.mode() & 0o7777, 0o600, "{}", p.display());
        }
        // A caller asking for less than the old mode gets less (a ledger is 0600).
        fs::set_permissions(&target, fs::Permissions::from_mode(0o644)).unwrap();
        write_atomic_mode(&target, b"ledger", 0o600).unwrap();
        assert_eq!(fs::metadata(&target).unwrap().mode() & 0o7777, 0o600);
        assert_eq!(entries(d.path()), ["l", "t"]);
    }

    #[test]
    fn a_replaced_file_keeps_its_owner() {
        if euid() != 0 {
            eprintln!("skipping a_replaced_file_keeps_its_owner: needs root to chown");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("t");
        fs::write(&target, "old").unwrap();
        std::os::unix::fs::chown(&target, Some(65534), Some(65534)).unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o640)).unwrap();
        write_atomic(&target, b"new").unwrap();
        let m = fs::metadata(&target).unwrap();
        assert_eq!((m.uid(), m.gid(), m.mode() & 0o7777), (65534, 65534, 0o640));
        assert_eq!(fs::read(&target).unwrap(), b"new");
    }

    #[test]
    fn a_fifo_without_a_reader_is_an_error_at_once() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("f");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path in a private temp dir.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = write_atomic(&fifo, b"x").unwrap_err();
        assert!(e.to_string().contains("no process reads"), "{e}");
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    }

    #[test]
    fn read_regular_refuses_what_is_not_a_small_regular_file() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("big");
        fs::write(&f, vec![b'{'; 100]).unwrap();
        assert_eq!(read_regular(&f, 100).unwrap().len(), 100);
        let e = read_regular(&f, 99).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::FileTooLarge);
        assert!(e.to_string().contains("100 bytes"), "{e}");
        let fifo = d.path().join("f");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: as above.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(read_regular(&fifo, 100)
            .unwrap_err()
            .to_string()
            .contains("not a regular file"));
        assert!(read_regular(Path::new("/dev/zero"), 100).is_err());
        assert!(read_regular(d.path(), 100).is_err());
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
