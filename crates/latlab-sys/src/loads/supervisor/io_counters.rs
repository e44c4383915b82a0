//! A part's I/O as the kernel accounts it: `/proc/<pid>/io` read, summed over a part's
//! processes and kept as a monotonic total.

use std::time::Duration;

/// The kernel's I/O counters of a process (`/proc/<pid>/io`), bytes. A process's counters
/// include those of the children it has reaped (the kernel adds them in `wait`), so the sum
/// over the live (and zombie) processes of a part is its total so far, with nothing counted
/// twice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoCounters {
    /// Bytes passed to read-like syscalls (page cache hits included).
    pub rchar: u64,
    /// Bytes passed to write-like syscalls.
    pub wchar: u64,
    /// Bytes fetched from storage.
    pub read_bytes: u64,
    /// Bytes sent (or, buffered, dirtied) to storage.
    pub write_bytes: u64,
    /// Dirty bytes that were truncated before writeback (`rm` of a file being written).
    pub cancelled_write_bytes: u64,
}

impl IoCounters {
    /// Parse the text of `/proc/<pid>/io`; None when a field is missing.
    pub fn parse(s: &str) -> Option<IoCounters> {
        let get = |k: &str| -> Option<u64> {
            s.lines().find_map(|l| {
                let (key, v) = l.split_once(':')?;
                (key.trim() == k).then(|| v.trim().parse().ok())?
            })
        };
        Some(IoCounters {
            rchar: get("rchar")?,
            wchar: get("wchar")?,
            read_bytes: get("read_bytes")?,
            write_bytes: get("write_bytes")?,
            cancelled_write_bytes: get("cancelled_write_bytes")?,
        })
    }

    fn zip(&mut self, o: &IoCounters, f: impl Fn(u64, u64) -> u64) {
        self.rchar = f(self.rchar, o.rchar);
        self.wchar = f(self.wchar, o.wchar);
        self.read_bytes = f(self.read_bytes, o.read_bytes);
        self.write_bytes = f(self.write_bytes, o.write_bytes);
        self.cancelled_write_bytes = f(self.cancelled_write_bytes, o.cancelled_write_bytes);
    }

    pub fn add(&mut self, o: &IoCounters) {
        self.zip(o, u64::saturating_add);
    }

    /// Field-wise maximum: both sides are lower bounds of a monotonic total.
    pub fn max(&mut self, o: &IoCounters) {
        self.zip(o, u64::max);
    }
}

/// A part's I/O as the kernel accounted it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IoReport {
    pub total: IoCounters,
    /// From the part's first start to the last sample before it was stopped.
    pub interval_s: f64,
    /// /proc samples taken.
    pub samples: u64,
}

/// How [`IoReport`] is measured, for the record.
pub const IO_SOURCE: &str = "sum of /proc/<pid>/io over the part's cgroup (or process group), sampled every 100 ms (500 ms without a cgroup) and just before the stop; iterations that ended by themselves: at least wait4's rusage (ru_inblock/ru_oublock)";

/// Interval of the /proc I/O samples.
pub(super) const IO_SAMPLE: Duration = Duration::from_millis(100);

/// Sum of `/proc/<pid>/io` over `pids` (processes that vanished in between are skipped).
pub fn io_of(pids: &[i32]) -> IoCounters {
    let mut sum = IoCounters::default();
    for pid in pids {
        if let Some(c) = std::fs::read_to_string(format!("/proc/{pid}/io"))
            .ok()
            .and_then(|s| IoCounters::parse(&s))
        {
            sum.add(&c);
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/proc/self/io` as captured on the VM; a missing field is no record, not a zero.
    #[test]
    fn io_counters_parse() {
        let s = "rchar: 6976\nwchar: 0\nsyscr: 10\nsyscw: 0\nread_bytes: 0\nwrite_bytes: 4096\ncancelled_write_bytes: 0\n";
        let c = IoCounters::parse(s).unwrap();
        assert_eq!((c.rchar, c.wchar, c.write_bytes), (6976, 0, 4096));
        assert!(IoCounters::parse("rchar: 1\nwchar: 2\n").is_none());
        let mut a = c;
        a.max(&IoCounters {
            read_bytes: 512,
            write_bytes: 1024,
            ..IoCounters::default()
        });
        assert_eq!((a.rchar, a.read_bytes, a.write_bytes), (6976, 512, 4096));
        a.add(&c);
        assert_eq!((a.rchar, a.write_bytes), (2 * 6976, 8192));
    }

    /// The sum over pids reads the live kernel counters: this process's rchar grows when it
    /// reads a file, and a pid that does not exist adds nothing.
    #[test]
    fn io_of_reads_live_counters() {
        let me = std::process::id() as i32;
        let before = io_of(&[me]);
        let n = std::fs::read("/proc/self/status").unwrap().len() as u64;
        let after = io_of(&[me, i32::MAX]);
        assert!(after.rchar >= before.rchar + n, "{before:?} {after:?}");
    }
}
