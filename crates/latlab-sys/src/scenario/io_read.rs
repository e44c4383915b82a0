//! The io-read scenario (Love, OLS 2003, §4.3: "I/O read latency under streaming writes"):
//! the files it reads, how their page cache is dropped, the two timed readers, and which block
//! device (and I/O scheduler) backs a directory.
//!
//! Timed regions hold only the measured system calls (`read(2)`; `open`+`read`+`close` per
//! small file) between two `clock_gettime` calls, recording into histograms and buffers that
//! were allocated before; paths are prepared as C strings beforehand.

use std::ffi::CString;
use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use latlab_core::hist::Histogram;
use latlab_core::units::Nanos;

use crate::rt::now_ns;

/// Size of each `read(2)` of the big file (as `cat`/coreutils read: 128 KiB).
pub const READ_SIZE: usize = 128 << 10;
/// Small files per subdirectory of the tree.
const PER_DIR: usize = 32;

/// The block device behind a directory.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BlockDevice {
    /// `major:minor` of the filesystem (`st_dev`), or of the mount source for anonymous devices.
    pub dev: Option<String>,
    /// Kernel name of that device (`vda1`, `dm-0`, `nvme0n1p2`).
    pub name: Option<String>,
    /// The whole disk whose queue schedules the I/O (`vda`, `nvme0n1`; for device-mapper the
    /// dm device itself, which has no scheduler: see `slaves`).
    pub disk: Option<String>,
    /// Devices under a device-mapper/md device (`/sys/block/dm-0/slaves`).
    pub slaves: Vec<String>,
    /// `/sys/block/<disk>/queue/scheduler`, when it exists.
    pub scheduler_path: Option<PathBuf>,
    /// The scheduler in use (`mq-deadline`, `none`, …).
    pub scheduler: Option<String>,
    /// The schedulers the queue offers.
    pub available: Vec<String>,
    /// Why something is unknown.
    pub note: Option<String>,
}

/// Parse a scheduler file: `none [mq-deadline] kyber bfq` → (current, available).
pub fn parse_scheduler(s: &str) -> (Option<String>, Vec<String>) {
    let mut current = None;
    let mut all = Vec::new();
    for w in s.split_whitespace() {
        if let Some(n) = w.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
            current = Some(n.to_string());
            all.push(n.to_string());
        } else {
            all.push(w.to_string());
        }
    }
    if current.is_none() && all.len() == 1 {
        current = all.first().cloned();
    }
    (current, all)
}

/// The block device behind `dir`, read from `sys` (normally `/sys`) and `mountinfo`
/// (normally `/proc/self/mountinfo`). Unknown parts are None with a `note` saying why.
pub fn block_device(dir: &Path) -> BlockDevice {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    match fs::metadata(dir) {
        Ok(m) => block_device_of(Path::new("/sys"), m.dev(), dir, &mountinfo),
        Err(e) => BlockDevice {
            note: Some(format!("cannot stat {}: {e}", dir.display())),
            ..Default::default()
        },
    }
}

fn major_minor(dev: u64) -> (u64, u64) {
    (libc::major(dev) as u64, libc::minor(dev) as u64)
}

/// As [`block_device`], with an injectable sysfs root and mountinfo text (for tests).
pub fn block_device_of(sys: &Path, st_dev: u64, dir: &Path, mountinfo: &str) -> BlockDevice {
    let mut out = BlockDevice::default();
    let (mut maj, mut min) = major_minor(st_dev);
    if maj == 0 {
        // An anonymous device (btrfs subvolume, overlayfs, tmpfs): the mount's source may
        // still name a block device.
        match mount_source(mountinfo, dir).and_then(|src| {
            let m = fs::metadata(&src).ok()?;
            use std::os::unix::fs::FileTypeExt;
            m.file_type()
                .is_block_device()
                .then(|| major_minor(m.rdev()))
        }) {
            Some((a, b)) => (maj, min) = (a, b),
            None => {
                out.dev = Some(format!("{maj}:{min}"));
                out.note = Some(
                    "the filesystem is not on a block device (tmpfs, overlayfs, network?): no I/O scheduler applies"
                        .into(),
                );
                return out;
            }
        }
    }
    out.dev = Some(format!("{maj}:{min}"));
    let link = sys.join(format!("dev/block/{maj}:{min}"));
    let Ok(real) = fs::canonicalize(&link) else {
        out.note = Some(format!("{} does not exist", link.display()));
        return out;
    };
    let name = real
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    out.name = Some(name.clone());
    // A partition's sysfs directory sits inside its disk's and has a `partition` file.
    let disk_dir = if real.join("partition").exists() {
        real.parent().map(Path::to_path_buf).unwrap_or(real.clone())
    } else {
        real.clone()
    };
    let disk = disk_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or(name);
    out.disk = Some(disk.clone());
    if let Ok(rd) = fs::read_dir(disk_dir.join("slaves")) {
        let mut s: Vec<String> = rd
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        s.sort();
        out.slaves = s;
    }
    let sched = disk_dir.join("queue/scheduler");
    match fs::read_to_string(&sched) {
        Ok(s) => {
            let (cur, all) = parse_scheduler(&s);
            out.scheduler = cur;
            out.available = all;
            out.scheduler_path = Some(sys.join(format!("block/{disk}/queue/scheduler")));
            if !out.slaves.is_empty() {
                out.note = Some(format!(
                    "{disk} is a stacked device over {}: their queues schedule the I/O",
                    out.slaves.join(", ")
                ));
            }
        }
        Err(_) => {
            out.note = Some(format!("{disk} has no queue/scheduler in sysfs"));
        }
    }
    out
}

/// The source device of the mount holding `dir` (longest mount point that prefixes it).
fn mount_source(mountinfo: &str, dir: &Path) -> Option<PathBuf> {
    let dir = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut best: Option<(usize, PathBuf)> = None;
    for line in mountinfo.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some(sep) = f.iter().position(|w| *w == "-") else {
            continue;
        };
        let (Some(mp), Some(src)) = (f.get(4), f.get(sep + 2)) else {
            continue;
        };
        let mp = mp.replace("\\040", " ");
        if dir.starts_with(&mp) && best.as_ref().is_none_or(|(l, _)| mp.len() >= *l) {
            best = Some((mp.len(), PathBuf::from(src)));
        }
    }
    best.map(|(_, p)| p).filter(|p| p.starts_with("/dev/"))
}

/// The files one run reads.
#[derive(Debug)]
pub struct Files {
    pub big: PathBuf,
    pub big_size: u64,
    /// The small files in directory-walk order (as `find` lists them: readdir order,
    /// directories first visited depth-first).
    pub small: Vec<CString>,
    pub small_bytes: u64,
}

/// Create the big file (non-zero data, so no filesystem can store it sparse or compressed
/// away) and a tree of `n_small` small files (1–8 KiB) under `scratch`, then flush them all.
pub fn create_files(
    scratch: &Path,
    size: u64,
    n_small: usize,
    stop: &AtomicBool,
) -> io::Result<Files> {
    let big = scratch.join("big");
    let mut f = fs::File::create(&big)?;
    let mut block = vec![0u8; 1 << 20];
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for b in block.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b.copy_from_slice(&x.to_le_bytes()[..b.len()]);
    }
    let mut left = size;
    while left > 0 {
        if stop.load(Ordering::Relaxed) {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "interrupted"));
        }
        let n = left.min(block.len() as u64) as usize;
        f.write_all(&block[..n])?;
        left -= n as u64;
    }
    f.sync_all()?;
    drop(f);
    let tree = scratch.join("small");
    fs::create_dir(&tree)?;
    let mut small_bytes = 0u64;
    for i in 0..n_small {
        let d = tree.join(format!("d{:03}", i / PER_DIR));
        if i % PER_DIR == 0 {
            fs::create_dir(&d)?;
        }
        let len = 1024 * (1 + (i * 7) % 8);
        fs::write(d.join(format!("f{i:05}")), &block[i % 4096..i % 4096 + len])?;
        small_bytes += len as u64;
    }
    sync_fs(scratch)?;
    let small = walk(&tree)?;
    Ok(Files {
        big,
        big_size: size,
        small,
        small_bytes,
    })
}

/// Regular files under `dir` in `find`'s order: readdir order, depth first.
fn walk(dir: &Path) -> io::Result<Vec<CString>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let mut subdirs = Vec::new();
        for e in fs::read_dir(&d)? {
            let e = e?;
            let t = e.file_type()?;
            if t.is_dir() {
                subdirs.push(e.path());
            } else if t.is_file() {
                out.push(
                    CString::new(e.path().as_os_str().as_bytes())
                        .map_err(|_| io::Error::other("NUL in a path"))?,
                );
            }
        }
        // Visit in readdir order: the stack pops the last pushed first.
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(out)
}

fn sync_fs(dir: &Path) -> io::Result<()> {
    let f = fs::File::open(dir)?;
    use std::os::fd::AsRawFd;
    // SAFETY: a valid open fd.
    if unsafe { libc::syncfs(f.as_raw_fd()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// How the page cache was dropped before each measurement (recorded in the run).
pub const DROP_METHOD: &str = "fdatasync + posix_fadvise(POSIX_FADV_DONTNEED) on every file read (page cache of those files only; dentries/inodes stay cached)";

/// Drop the page cache of every file of the run: flush, then `POSIX_FADV_DONTNEED`.
pub fn drop_cache(files: &Files) -> io::Result<()> {
    fn one(p: &Path) -> io::Result<()> {
        let f = fs::File::open(p)?;
        f.sync_data()?;
        use std::os::fd::AsRawFd;
        // SAFETY: a valid open fd; offset 0, len 0 = the whole file.
        let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        Ok(())
    }
    one(&files.big)?;
    for p in &files.small {
        one(Path::new(std::ffi::OsStr::from_bytes(p.as_bytes())))?;
    }
    Ok(())
}

/// One timed pass over the files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pass {
    /// From before the first system call to after the last.
    pub total_ns: Nanos,
    /// Timed operations: `read(2)` calls (big file) or files (small files).
    pub ops: u64,
    pub bytes: u64,
    /// Stopped early by the stop flag.
    pub interrupted: bool,
}

fn open_ro(p: &CString) -> io::Result<libc::c_int> {
    // SAFETY: p is a valid NUL-terminated path.
    let fd = unsafe { libc::open(p.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// Read the big file sequentially in [`READ_SIZE`] calls; each call's latency goes to `hist`.
/// The total includes the open and the close.
pub fn read_big(
    path: &Path,
    buf: &mut [u8],
    hist: &mut Histogram,
    stop: &AtomicBool,
) -> io::Result<Pass> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::other("NUL"))?;
    let mut pass = Pass::default();
    let t0 = now_ns();
    let fd = open_ro(&c)?;
    loop {
        if stop.load(Ordering::Relaxed) {
            pass.interrupted = true;
            break;
        }
        let a = now_ns();
        // SAFETY: buf is valid for buf.len() bytes.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        let b = now_ns();
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            // SAFETY: fd is ours.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        if n == 0 {
            break;
        }
        hist.record(b - a);
        pass.ops += 1;
        pass.bytes += n as u64;
    }
    // SAFETY: fd is ours.
    unsafe { libc::close(fd) };
    pass.total_ns = now_ns() - t0;
    Ok(pass)
}

/// The `find | cat` pattern: open, read to the end and close each small file in walk order;
/// each file's time goes to `hist`.
pub fn read_small(
    files: &[CString],
    buf: &mut [u8],
    hist: &mut Histogram,
    stop: &AtomicBool,
) -> io::Result<Pass> {
    let mut pass = Pass::default();
    let t0 = now_ns();
    for p in files {
        if stop.load(Ordering::Relaxed) {
            pass.interrupted = true;
            break;
        }
        let a = now_ns();
        let fd = open_ro(p)?;
        let mut bytes = 0u64;
        loop {
            // SAFETY: buf is valid for buf.len() bytes.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                // SAFETY: fd is ours.
                unsafe { libc::close(fd) };
                return Err(e);
            }
            if n == 0 {
                break;
            }
            bytes += n as u64;
        }
        // SAFETY: fd is ours.
        unsafe { libc::close(fd) };
        let b = now_ns();
        hist.record(b - a);
        pass.ops += 1;
        pass.bytes += bytes;
    }
    pass.total_ns = now_ns() - t0;
    Ok(pass)
}

#[cfg(test)]
mod tests {
    use super::*;
    use latlab_core::hist::Layout;

    #[test]
    fn scheduler_file() {
        assert_eq!(
            parse_scheduler("none [mq-deadline] kyber bfq\n"),
            (
                Some("mq-deadline".into()),
                vec![
                    "none".into(),
                    "mq-deadline".into(),
                    "kyber".into(),
                    "bfq".into()
                ]
            )
        );
        assert_eq!(
            parse_scheduler("none\n"),
            (Some("none".into()), vec!["none".into()])
        );
        assert_eq!(parse_scheduler(""), (None, vec![]));
    }

    /// A fake sysfs: disk `vda` (254:0) with partition `vda1` (254:1) and `dm-0` (253:0)
    /// stacked over `vda1`.
    fn fake_sys() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let s = t.path();
        let vda = s.join("devices/virtual/block/vda");
        fs::create_dir_all(vda.join("queue")).unwrap();
        fs::write(vda.join("queue/scheduler"), "none [mq-deadline] kyber\n").unwrap();
        fs::create_dir_all(vda.join("vda1")).unwrap();
        fs::write(vda.join("vda1/partition"), "1\n").unwrap();
        let dm = s.join("devices/virtual/block/dm-0");
        fs::create_dir_all(dm.join("queue")).unwrap();
        fs::write(dm.join("queue/scheduler"), "none\n").unwrap();
        fs::create_dir_all(dm.join("slaves/vda1")).unwrap();
        fs::create_dir_all(s.join("dev/block")).unwrap();
        fs::create_dir_all(s.join("block")).unwrap();
        std::os::unix::fs::symlink(&vda, s.join("dev/block/254:0")).unwrap();
        std::os::unix::fs::symlink(vda.join("vda1"), s.join("dev/block/254:1")).unwrap();
        std::os::unix::fs::symlink(&dm, s.join("dev/block/253:0")).unwrap();
        t
    }

    #[test]
    fn partitions_resolve_to_their_disk() {
        let t = fake_sys();
        let b = block_device_of(t.path(), libc::makedev(254, 1), Path::new("/"), "");
        assert_eq!(b.name.as_deref(), Some("vda1"));
        assert_eq!(b.disk.as_deref(), Some("vda"));
        assert_eq!(b.scheduler.as_deref(), Some("mq-deadline"));
        assert_eq!(b.available.len(), 3);
        assert_eq!(
            b.scheduler_path,
            Some(t.path().join("block/vda/queue/scheduler"))
        );
        let w = block_device_of(t.path(), libc::makedev(254, 0), Path::new("/"), "");
        assert_eq!(w.disk.as_deref(), Some("vda"));
    }

    #[test]
    fn device_mapper_names_its_slaves_and_unknowns_say_why() {
        let t = fake_sys();
        let b = block_device_of(t.path(), libc::makedev(253, 0), Path::new("/"), "");
        assert_eq!(b.disk.as_deref(), Some("dm-0"));
        assert_eq!(b.slaves, vec!["vda1".to_string()]);
        assert_eq!(b.scheduler.as_deref(), Some("none"));
        assert!(b.note.unwrap().contains("vda1"));
        let u = block_device_of(t.path(), libc::makedev(8, 0), Path::new("/"), "");
        assert!(u.disk.is_none() && u.note.is_some(), "{u:?}");
        // An anonymous device whose mount source is no block device (tmpfs).
        let mi = "30 1 0:25 / /tmp rw - tmpfs tmpfs rw\n";
        let a = block_device_of(t.path(), libc::makedev(0, 25), Path::new("/tmp/x"), mi);
        assert!(a.scheduler.is_none());
        assert!(a.note.unwrap().contains("not on a block device"));
    }

    #[test]
    fn files_are_created_walked_and_read() {
        let t = tempfile::tempdir().unwrap();
        let stop = AtomicBool::new(false);
        let f = create_files(t.path(), 3 * READ_SIZE as u64 + 5, 70, &stop).unwrap();
        assert_eq!(f.small.len(), 70);
        drop_cache(&f).unwrap();
        let mut buf = vec![0u8; READ_SIZE];
        let mut h = Histogram::new(Layout::default());
        let p = read_big(&f.big, &mut buf, &mut h, &stop).unwrap();
        assert_eq!(p.bytes, 3 * READ_SIZE as u64 + 5);
        assert_eq!(p.ops, 4);
        assert_eq!(h.count(), 4);
        assert!(p.total_ns >= h.sum() as u64);
        let mut hs = Histogram::new(Layout::default());
        let s = read_small(&f.small, &mut buf, &mut hs, &stop).unwrap();
        assert_eq!((s.ops, s.bytes), (70, f.small_bytes));
        assert_eq!(hs.count(), 70);
        // Walk order: every file of a directory before the next directory.
        let names: Vec<String> = f
            .small
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        let dirs: Vec<&str> = names
            .iter()
            .map(|n| n.rsplit('/').nth(1).unwrap())
            .collect();
        let mut seen = Vec::new();
        for d in &dirs {
            if seen.last() != Some(d) {
                assert!(!seen.contains(d), "{d} visited twice: {dirs:?}");
                seen.push(d);
            }
        }
        assert_eq!(seen.len(), 3);
        stop.store(true, Ordering::Relaxed);
        let p = read_big(&f.big, &mut buf, &mut h, &stop).unwrap();
        assert!(p.interrupted && p.ops == 0);
    }
}
