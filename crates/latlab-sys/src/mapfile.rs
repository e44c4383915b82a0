//! A file mapped read-only, whose shrinking under latlab is an error, not a crash.
//!
//! Mapping a large trace saves a third of `latlab analyze`'s time (no copy into fresh heap
//! pages), but a page of a mapping past the end of its file faults with SIGBUS: a trace
//! truncated by another process while latlab reads it killed latlab with no word (exit 135).
//! [`Mapped::open`] installs, once, a SIGBUS handler that checks the faulting address: inside
//! a live mapping, it writes that mapping's one-line error (prepared when the file was mapped:
//! nothing is formatted or allocated in the handler) and ends the process with exit code 1;
//! anywhere else, the signal goes to the handler that was there before (Rust's runtime's, or
//! the default action), so a SIGBUS that is a bug still looks like one.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Once;

/// The live mapping's range and its message (one mapping at a time is watched: the last
/// opened; `analyze` maps one file).
static START: AtomicUsize = AtomicUsize::new(0);
static LEN: AtomicUsize = AtomicUsize::new(0);
static MSG: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static MSG_LEN: AtomicUsize = AtomicUsize::new(0);
static INSTALL: Once = Once::new();
/// The SIGBUS action before latlab's, for faults outside the mapping.
static mut OLD: std::mem::MaybeUninit<libc::sigaction> = std::mem::MaybeUninit::uninit();

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    let (start, len) = (START.load(Ordering::Acquire), LEN.load(Ordering::Acquire));
    if len > 0 && addr >= start && addr - start < len {
        let (msg, n) = (MSG.load(Ordering::Acquire), MSG_LEN.load(Ordering::Acquire));
        // SAFETY: write(2) and _exit(2) are async-signal-safe; `msg` points to `n` bytes
        // leaked when the mapping was made and never freed while the range is set.
        unsafe {
            if !msg.is_null() {
                libc::write(2, msg.cast(), n);
            }
            libc::_exit(1);
        }
    }
    // Not ours: what was there before handles it.
    // SAFETY: OLD was written by sigaction before this handler was installed.
    unsafe {
        let old = (*std::ptr::addr_of!(OLD)).assume_init_ref();
        if old.sa_flags & libc::SA_SIGINFO != 0 && old.sa_sigaction > libc::SIG_IGN {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(old.sa_sigaction);
            f(sig, info, ctx);
        } else if old.sa_sigaction > libc::SIG_IGN {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(old.sa_sigaction);
            f(sig);
        } else {
            // The default action: restore it; returning re-runs the faulting access.
            libc::signal(libc::SIGBUS, libc::SIG_DFL);
        }
    }
}

fn install() {
    INSTALL.call_once(|| {
        // SAFETY: a zeroed sigaction is valid; the handler only uses async-signal-safe calls.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_sigbus as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(
                libc::SIGBUS,
                &sa,
                (*std::ptr::addr_of_mut!(OLD)).as_mut_ptr(),
            );
        }
    });
}

/// A regular file mapped read-only and private; see the module documentation.
pub struct Mapped {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only and owned; &[u8] views of it are shared between threads.
unsafe impl Send for Mapped {}
// SAFETY: as above.
unsafe impl Sync for Mapped {}

impl Mapped {
    /// Map `file` (already open, a non-empty regular file); `error` is the line printed, with
    /// `latlab: error: ` before it, if the file shrinks while mapped.
    pub fn open(file: &File, error: &str) -> io::Result<Mapped> {
        let len = usize::try_from(file.metadata()?.len())
            .map_err(|_| io::Error::other("too large to map"))?;
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty file"));
        }
        install();
        // SAFETY: a new private read-only mapping of an open file; checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let msg = format!("latlab: error: {error}\n")
            .into_bytes()
            .into_boxed_slice();
        let n = msg.len();
        let old = MSG.swap(Box::leak(msg).as_mut_ptr(), Ordering::AcqRel);
        let old_n = MSG_LEN.swap(n, Ordering::AcqRel);
        LEN.store(0, Ordering::Release);
        START.store(ptr as usize, Ordering::Release);
        LEN.store(len, Ordering::Release);
        if !old.is_null() {
            // SAFETY: the previous message, leaked by an earlier open; no range refers to it
            // any more (LEN was reset before the swap of START).
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(old, old_n)) });
        }
        Ok(Mapped { ptr, len })
    }

    /// [`Mapped::open`] by path, the message naming the path.
    pub fn open_path(path: &Path) -> io::Result<Mapped> {
        let f = File::open(path)?;
        Mapped::open(
            &f,
            &format!(
                "{}: the file shrank while latlab read it (another process truncated or rewrote it); read a copy that nothing writes",
                latlab_core::escape::escape(&path.display().to_string())
            ),
        )
    }
}

impl std::ops::Deref for Mapped {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `len` readable bytes at `ptr` while the mapping lives.
        unsafe { std::slice::from_raw_parts(self.ptr.cast(), self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        if START.load(Ordering::Acquire) == self.ptr as usize {
            LEN.store(0, Ordering::Release);
        }
        // SAFETY: unmapping the mapping this value owns.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapping_reads_the_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, b"hello trace").unwrap();
        let m = Mapped::open_path(&p).unwrap();
        assert_eq!(&m[..], b"hello trace");
        drop(m);
        std::fs::write(&p, b"").unwrap();
        assert!(Mapped::open_path(&p).is_err());
    }

    /// The child half of the test below: map a file, truncate it, touch its last page.
    #[test]
    fn child_truncates_its_mapping() {
        let Some(p) = std::env::var_os("LATLAB_MAPFILE_CHILD") else {
            return;
        };
        let p = Path::new(&p);
        let m = Mapped::open_path(p).unwrap();
        File::options()
            .write(true)
            .open(p)
            .unwrap()
            .set_len(0)
            .unwrap();
        let last = m[m.len() - 1];
        // Unreachable when the handler works: the read above faults.
        panic!("read {last} past the end of a truncated file");
    }

    /// A mapped file truncated while latlab reads it (`analyze` of a trace another process
    /// rewrites) died of SIGBUS, exit 135 and no word: now one line and exit code 1. Run in a
    /// child process (this test binary again), since the process ends.
    #[test]
    fn a_file_truncated_while_mapped_is_one_error_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("trace\x1b[2J.txt");
        std::fs::write(&p, vec![b'x'; 3 * 4096 + 10]).unwrap();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "mapfile::tests::child_truncates_its_mapping",
                "--nocapture",
            ])
            .env("LATLAB_MAPFILE_CHILD", &p)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{:?}: {err}", out.status);
        let line = err
            .lines()
            .find(|l| l.starts_with("latlab: error: "))
            .unwrap_or_else(|| panic!("no error line: {err}"));
        assert!(line.contains("shrank while latlab read it"), "{line}");
        assert!(line.contains(r"trace\u{1b}[2J.txt"), "{line}");
    }

    /// A SIGBUS that is not the mapping's (a bug) is not dressed up as one: the process dies
    /// of the signal as before.
    #[test]
    fn child_raises_sigbus_elsewhere() {
        if std::env::var_os("LATLAB_MAPFILE_RAISE").is_none() {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let (ours, other) = (d.path().join("ours"), d.path().join("other"));
        std::fs::write(&ours, b"abc").unwrap();
        std::fs::write(&other, vec![b'x'; 8192]).unwrap();
        let _m = Mapped::open_path(&ours).unwrap();
        // Another mapping, not latlab's watched one, faulting past its file's end.
        let f = File::open(&other).unwrap();
        // SAFETY: a private read-only mapping of an open file, read once below (the read
        // faults: the test expects the process to die of it).
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                8192,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                f.as_raw_fd(),
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            File::options()
                .write(true)
                .open(&other)
                .unwrap()
                .set_len(0)
                .unwrap();
            std::ptr::read_volatile(p.cast::<u8>().add(4096));
        }
    }

    #[test]
    fn a_sigbus_elsewhere_is_still_a_sigbus() {
        use std::os::unix::process::ExitStatusExt;
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "mapfile::tests::child_raises_sigbus_elsewhere"])
            .env("LATLAB_MAPFILE_RAISE", "1")
            .output()
            .unwrap();
        assert_eq!(out.status.signal(), Some(libc::SIGBUS), "{:?}", out.status);
    }
}
