//! trace-cmd's `trace.dat` file format: [`write()`] one from what a tracefs instance gave (the raw
//! ring-buffer pages of `per_cpu/cpuN/trace_pipe_raw` and the text files that describe them),
//! and [`read()`] one back (latlab's own and trace-cmd's uncompressed version-6 files), so a spike
//! opens in `trace-cmd report -i FILE` and KernelShark.
//!
//! # Why version 6
//!
//! trace-cmd 3.x reads versions 6 and 7; it writes 7 by default. We write **6**:
//! - every reader takes it: trace-cmd 2.x and 3.x, KernelShark 1.x (trace-cmd 2.x's library) and
//!   2.x (libtracecmd), and tools written against the old format;
//! - its layout is one fixed sequence (magic, headers, formats, kallsyms, printk, cmdlines, CPU
//!   count, options, `flyrecord`, one offset/size pair per CPU, the clock, the pages) with no
//!   strings table, section headers, option-section chains or compression header: fewer offsets
//!   to get wrong, and a reader that checks every one of them stays short;
//! - what version 7 adds (compression, several instances in one file, CPU ids in the buffer
//!   option, guest/host time sync) is nothing a spike needs: one instance, a few pages per CPU.
//!
//! Its one limit: a CPU's number is its position in the offset table, so a file holds CPUs
//! `0..count`; CPUs without data have size 0 (trace-cmd itself writes them so). [`read()`] returns
//! every CPU of the table, with or without data.
//!
//! # Layout written (all numbers in the file's byte order)
//!
//! ```text
//! 17 08 44 "tracing" "6\0" endian(u8: 0 little, 1 big) long_size(u8) page_size(u32)
//! "header_page\0"  u64 size, events/header_page
//! "header_event\0" u64 size, events/header_event
//! u32 count, then per ftrace event: u64 size, events/ftrace/NAME/format
//! u32 systems, then per system: "system\0" u32 count, per event: u64 size, its format
//! u32 size, /proc/kallsyms text (0: none)
//! u32 size, printk_formats text (0: none)
//! u64 size, saved_cmdlines text
//! u32 CPU count
//! "options  \0"  option TRACECLOCK (id 4, u32 size, "[clock]\0"),
//!                per CPU stats text option CPUSTAT (id 2, u32 size, "CPU: N\n...\0"),
//!                u16 0 (end of options)
//! "flyrecord\0"  per CPU: u64 offset, u64 size
//! u64 size, "[clock]"  (present because the TRACECLOCK option is)
//! zero padding to a page boundary, then each CPU's pages, each CPU at a page-aligned offset
//! ```
//!
//! The clock matters: without it trace-cmd assumes `local` and, for clocks that are not
//! nanosecond counters, prints raw numbers instead of seconds.
//!
//! # The reader
//!
//! [`read()`] parses files from anywhere: every size is checked against the input before it is
//! used, nothing is allocated from a length the input has not backed, it never panics, and an
//! error says what is wrong and where (`trace.dat: ... at offset N`). It takes what [`write()`]
//! writes and trace-cmd's own uncompressed version-6 files (unknown options are skipped, a
//! missing TRACECLOCK option means `local` and a CPUCOUNT option sets the number of CPUs, as in
//! trace-cmd). It refuses version 7 (convert with
//! `trace-cmd convert --file-version 6`), latency (text) traces, and CPU data that is not whole
//! pages at page-aligned offsets. It does not decode the pages: the raw decoder does that.
//!
//! Pure: no I/O beyond the `impl Write` given and the bytes given.

use std::borrow::Cow;

mod reader;
mod writer;

pub use reader::read;
pub use writer::write;

/// The first 10 bytes of every trace.dat: `17 08 44` and `tracing`.
pub const MAGIC: &[u8; 10] = b"\x17\x08\x44tracing";
/// The file version written and read.
pub const VERSION: &str = "6";
/// The most CPUs a file may hold (the offset table has one 16-byte entry per CPU up to the
/// highest; the kernel's own limit, `NR_CPUS`, is at most 8192 today).
pub const MAX_CPUS: u32 = 1 << 16;
/// Smallest and largest page (ring-buffer sub-buffer) size accepted, powers of two.
pub const MIN_PAGE_SIZE: u32 = 16;
pub const MAX_PAGE_SIZE: u32 = 1 << 30;

const OPTION_DONE: u16 = 0;
const OPTION_CPUSTAT: u16 = 2;
const OPTION_TRACECLOCK: u16 = 4;
const OPTION_CPUCOUNT: u16 = 8;
/// trace-cmd's clock when a file does not name one.
const DEFAULT_CLOCK: &str = "local";

/// One CPU's ring-buffer pages, as `per_cpu/cpuN/trace_pipe_raw` returned them (whole pages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuData<'a> {
    pub cpu: u32,
    /// A multiple of the page size; empty for a CPU without data.
    pub pages: Cow<'a, [u8]>,
}

/// The contents of a version-6 trace.dat (uncompressed, one instance, flyrecord).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceDat<'a> {
    /// Byte order of the numbers in the file and in the pages (the traced machine's).
    pub big_endian: bool,
    /// `sizeof(long)` of the traced machine's user space (4 or 8); trace-cmd takes the kernel's
    /// from `header_page`.
    pub long_size: u8,
    /// Ring-buffer page (sub-buffer) size: a power of two; every CPU's data is whole pages.
    pub page_size: u32,
    /// The trace clock (`mono` in latlab's instances): no spaces, brackets or NULs.
    pub clock: Cow<'a, str>,
    /// `events/header_page` and `events/header_event` as the kernel wrote them.
    pub header_page: Cow<'a, [u8]>,
    pub header_event: Cow<'a, [u8]>,
    /// `events/ftrace/*/format` files (`print` is the one markers need).
    pub ftrace_formats: Vec<Cow<'a, [u8]>>,
    /// Per event system (`sched`, `irq`, ...): its events' `format` files.
    pub event_formats: Vec<(String, Vec<Cow<'a, [u8]>>)>,
    /// `/proc/kallsyms` text (resolves `%ps` like a marker's caller); None: not recorded. An
    /// empty text is written as None.
    pub kallsyms: Option<Cow<'a, [u8]>>,
    /// `printk_formats` text (for `trace_printk()` events); None: not recorded.
    pub printk: Option<Cow<'a, [u8]>>,
    /// `saved_cmdlines` text (`PID COMM` lines): the task names trace-cmd shows.
    pub cmdlines: Cow<'a, [u8]>,
    /// CPUs in ascending order of their number, each at most once.
    pub cpus: Vec<CpuData<'a>>,
    /// Ring-buffer statistics, one text per CPU (`CPU: N` then its `per_cpu/cpuN/stats`, as
    /// trace-cmd records them; `trace-cmd report --stat` prints them): no NULs.
    pub cpu_stats: Vec<Cow<'a, [u8]>>,
}

impl TraceDat<'_> {
    /// The same contents with every byte owned.
    pub fn into_owned(self) -> TraceDat<'static> {
        fn own(b: Cow<'_, [u8]>) -> Cow<'static, [u8]> {
            Cow::Owned(b.into_owned())
        }
        TraceDat {
            big_endian: self.big_endian,
            long_size: self.long_size,
            page_size: self.page_size,
            clock: Cow::Owned(self.clock.into_owned()),
            header_page: own(self.header_page),
            header_event: own(self.header_event),
            ftrace_formats: self.ftrace_formats.into_iter().map(own).collect(),
            event_formats: self
                .event_formats
                .into_iter()
                .map(|(s, f)| (s, f.into_iter().map(own).collect()))
                .collect(),
            kallsyms: self.kallsyms.map(own),
            printk: self.printk.map(own),
            cmdlines: own(self.cmdlines),
            cpus: self
                .cpus
                .into_iter()
                .map(|c| CpuData {
                    cpu: c.cpu,
                    pages: own(c.pages),
                })
                .collect(),
            cpu_stats: self.cpu_stats.into_iter().map(own).collect(),
        }
    }
}

/// Why [`read()`] refused a file: what is wrong and the byte offset where it was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("trace.dat: {what} at offset {offset}")]
pub struct TraceDatError {
    pub offset: u64,
    pub what: String,
}

fn page_size_problem(p: u32) -> Option<String> {
    (!p.is_power_of_two() || !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&p)).then(|| {
        format!("page size {p} is not a power of two from {MIN_PAGE_SIZE} to {MAX_PAGE_SIZE}")
    })
}

fn clock_problem(c: &str) -> Option<String> {
    let bad = c.is_empty()
        || c.bytes()
            .any(|b| b.is_ascii_whitespace() || matches!(b, b'[' | b']' | 0));
    bad.then(|| format!("clock {c:?} is empty or holds a space, bracket or NUL"))
}

fn long_size_problem(l: u8) -> Option<String> {
    (!matches!(l, 4 | 8)).then(|| format!("long size {l} is neither 4 nor 8"))
}
