//! An instance's per-CPU buffers, by path (for a thread without the [`super::Recorder`] at
//! hand): cleared, their statistics read, their binary pages copied.

use std::fs::{self, File};
use std::io;
use std::path::Path;

/// Empty every CPU's buffer of the instance at `dir`.
pub fn clear_at(dir: &Path) -> io::Result<()> {
    File::options()
        .write(true)
        .truncate(true)
        .open(dir.join("trace"))
        .map(drop)
}

/// Events the ring of the instance at `dir` overwrote on `cpu` since the last clear.
pub fn overruns_at(dir: &Path, cpu: u32) -> Option<u64> {
    let s = fs::read_to_string(dir.join(format!("per_cpu/cpu{cpu}/stats"))).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("overrun:"))
        .and_then(|v| v.trim().parse().ok())
}

/// `entries` (events still in the ring) and `overrun` (events it overwrote since the last
/// clear) of the instance at `dir` on `cpu`, from one read of `per_cpu/cpuN/stats`.
pub fn cpu_stats_at(dir: &Path, cpu: u32) -> Option<(u64, u64)> {
    parse_cpu_stats(&fs::read_to_string(dir.join(format!("per_cpu/cpu{cpu}/stats"))).ok()?)
}

/// `entries` and `overrun` of a `per_cpu/cpuN/stats` text.
fn parse_cpu_stats(s: &str) -> Option<(u64, u64)> {
    let field = |k: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some((field("entries:")?, field("overrun:")?))
}

/// [`cpu_stats_at`] through an open `per_cpu/cpuN/stats` file (read again from its start).
pub fn cpu_stats_of(f: &File) -> Option<(u64, u64)> {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 512];
    let n = f.read_at(&mut buf, 0).ok()?;
    parse_cpu_stats(std::str::from_utf8(&buf[..n]).ok()?)
}

/// `per_cpu/cpuN/trace_pipe_raw` of the instance at `dir`, opened non-blocking (for a thread
/// without the [`Recorder`] at hand; [`Recorder::open_cpu_raw`] is this).
pub fn open_cpu_raw_at(dir: &Path, cpu: u32) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(dir.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw")))
}

/// Read binary pages (an [`Recorder::open_cpu_raw`] file) until the buffer is empty (EAGAIN)
/// or ends: one `page`-byte read per page (the kernel copies a page and formats nothing),
/// calling `tick` every `every` bytes. A read that returns less than a page ends the copy
/// (the whole pages before it are kept: the decoder reads whole pages only).
pub fn read_pages(
    f: impl io::Read,
    page: usize,
    every: usize,
    tick: impl FnMut(),
) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    read_pages_into(f, page, &mut out, every, tick)?;
    Ok(out)
}

/// [`read_pages`], appending to `out` (whose capacity a caller may keep from copy to copy, so
/// a copy allocates nothing once it has grown), with `tick` also before the first read
/// (`every` = `page`: before every read, as the recorder's quiet windows want). Returns the
/// bytes appended; on an error, the pages read before it stay in `out`.
pub fn read_pages_into(
    mut f: impl io::Read,
    page: usize,
    out: &mut Vec<u8>,
    every: usize,
    mut tick: impl FnMut(),
) -> io::Result<usize> {
    let page = page.max(1);
    let start = out.len();
    let mut since = 0usize;
    if every <= page {
        tick();
    }
    loop {
        let len = out.len();
        out.resize(len + page, 0);
        match f.read(&mut out[len..]) {
            Ok(n) if n == page => {
                since += n;
                if since >= every {
                    since = 0;
                    tick();
                }
            }
            Ok(_) => {
                out.truncate(len);
                return Ok(len - start);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => out.truncate(len),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                out.truncate(len);
                return Ok(len - start);
            }
            Err(e) => {
                out.truncate(len);
                return Err(e);
            }
        }
    }
}
