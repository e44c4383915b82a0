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
use std::io::{self, Write};

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

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("trace.dat: {what}"))
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

/// Checks `dat` can be written; the first problem found.
fn check(dat: &TraceDat) -> Result<(), String> {
    if let Some(p) = page_size_problem(dat.page_size)
        .or_else(|| long_size_problem(dat.long_size))
        .or_else(|| clock_problem(&dat.clock))
    {
        return Err(p);
    }
    for (sys, _) in &dat.event_formats {
        if sys.as_bytes().contains(&0) {
            return Err(format!("event system name {sys:?} holds a NUL"));
        }
    }
    for (name, len) in [
        ("kallsyms", dat.kallsyms.as_deref().map_or(0, <[u8]>::len)),
        (
            "printk formats",
            dat.printk.as_deref().map_or(0, <[u8]>::len),
        ),
        ("ftrace format count", dat.ftrace_formats.len()),
        ("event system count", dat.event_formats.len()),
    ]
    .into_iter()
    .chain(
        dat.event_formats
            .iter()
            .map(|(_, f)| ("event format count", f.len())),
    ) {
        if u32::try_from(len).is_err() {
            return Err(format!("{name} {len} does not fit in 32 bits"));
        }
    }
    if dat.cpu_stats.iter().any(|t| t.contains(&0)) {
        return Err("a CPU's stats text holds a NUL".into());
    }
    let mut prev: Option<u32> = None;
    for c in &dat.cpus {
        if c.cpu >= MAX_CPUS {
            return Err(format!("CPU {} is not below {MAX_CPUS}", c.cpu));
        }
        if prev.is_some_and(|p| c.cpu <= p) {
            return Err(format!(
                "CPU {} comes after CPU {}: CPUs must ascend",
                c.cpu,
                prev.unwrap_or(0)
            ));
        }
        prev = Some(c.cpu);
        if c.pages.len() % dat.page_size as usize != 0 {
            return Err(format!(
                "CPU {} data is {} bytes, not whole pages of {}",
                c.cpu,
                c.pages.len(),
                dat.page_size
            ));
        }
    }
    Ok(())
}

/// Writes numbers in the file's byte order and counts the bytes written.
struct Out<W> {
    w: W,
    pos: u64,
    big: bool,
}

impl<W: Write> Out<W> {
    fn bytes(&mut self, b: &[u8]) -> io::Result<()> {
        self.w.write_all(b)?;
        self.pos += b.len() as u64;
        Ok(())
    }
    fn u16(&mut self, v: u16) -> io::Result<()> {
        self.bytes(&if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        })
    }
    fn u32(&mut self, v: u32) -> io::Result<()> {
        self.bytes(&if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        })
    }
    fn u64(&mut self, v: u64) -> io::Result<()> {
        self.bytes(&if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        })
    }
    /// A length as u32 (checked by [`check`] before anything is written).
    fn len32(&mut self, n: usize) -> io::Result<()> {
        self.u32(u32::try_from(n).map_err(|_| invalid(format!("{n} does not fit in 32 bits")))?)
    }
    fn sized64(&mut self, b: &[u8]) -> io::Result<()> {
        self.u64(b.len() as u64)?;
        self.bytes(b)
    }
    fn zeros(&mut self, mut n: u64) -> io::Result<()> {
        const Z: [u8; 4096] = [0; 4096];
        while n > 0 {
            let k = n.min(Z.len() as u64) as usize;
            self.bytes(&Z[..k])?;
            n -= k as u64;
        }
        Ok(())
    }
}

/// Writes `dat` as a version-6 trace.dat. Refuses (`InvalidInput`, nothing written) what the
/// format cannot hold: a page size that is not a power of two from 16 bytes to 1 GiB, a long
/// size other than 4 or 8, a clock with spaces, brackets or NULs, a stats text with a NUL, CPUs out of order or from
/// [`MAX_CPUS`] up, CPU data that is not whole pages, a system name with a NUL, texts or counts
/// beyond 32 bits where the format has 32.
pub fn write(dat: &TraceDat, out: impl Write) -> io::Result<()> {
    check(dat).map_err(invalid)?;
    let mut o = Out {
        w: out,
        pos: 0,
        big: dat.big_endian,
    };
    o.bytes(MAGIC)?;
    o.bytes(VERSION.as_bytes())?;
    o.bytes(&[0, u8::from(dat.big_endian), dat.long_size])?;
    o.u32(dat.page_size)?;

    o.bytes(b"header_page\0")?;
    o.sized64(&dat.header_page)?;
    o.bytes(b"header_event\0")?;
    o.sized64(&dat.header_event)?;

    o.len32(dat.ftrace_formats.len())?;
    for f in &dat.ftrace_formats {
        o.sized64(f)?;
    }
    o.len32(dat.event_formats.len())?;
    for (sys, formats) in &dat.event_formats {
        o.bytes(sys.as_bytes())?;
        o.bytes(&[0])?;
        o.len32(formats.len())?;
        for f in formats {
            o.sized64(f)?;
        }
    }
    for text in [&dat.kallsyms, &dat.printk] {
        let t = text.as_deref().unwrap_or_default();
        o.len32(t.len())?;
        o.bytes(t)?;
    }
    o.sized64(&dat.cmdlines)?;

    let count = dat.cpus.last().map_or(0, |c| c.cpu + 1);
    o.u32(count)?;
    let clock = format!("[{}]", dat.clock);
    o.bytes(b"options  \0")?;
    o.u16(OPTION_TRACECLOCK)?;
    o.len32(clock.len() + 1)?;
    o.bytes(clock.as_bytes())?;
    o.bytes(&[0])?;
    for t in &dat.cpu_stats {
        o.u16(OPTION_CPUSTAT)?;
        o.len32(t.len() + 1)?;
        o.bytes(t)?;
        o.bytes(&[0])?;
    }
    o.u16(OPTION_DONE)?;
    o.bytes(b"flyrecord\0")?;

    // Where the pages go: after the offset table and the clock, from the next page boundary.
    let page = u64::from(dat.page_size);
    let table_end = o.pos + 16 * u64::from(count) + 8 + clock.len() as u64;
    let data_start = table_end.div_ceil(page) * page;
    let mut next = data_start;
    let mut given = dat.cpus.iter().peekable();
    for cpu in 0..count {
        let size = match given.next_if(|c| c.cpu == cpu) {
            Some(c) => c.pages.len() as u64,
            None => 0,
        };
        o.u64(next)?;
        o.u64(size)?;
        next += size;
    }
    o.sized64(clock.as_bytes())?;
    debug_assert_eq!(o.pos, table_end);
    o.zeros(data_start - table_end)?;
    for c in &dat.cpus {
        o.bytes(&c.pages)?;
    }
    o.w.flush()
}

/// A cursor over untrusted bytes: every read is bounds-checked and errors name the offset.
struct In<'a> {
    b: &'a [u8],
    pos: usize,
    big: bool,
}

impl<'a> In<'a> {
    fn err<T>(&self, at: usize, what: impl Into<String>) -> Result<T, TraceDatError> {
        Err(TraceDatError {
            offset: at as u64,
            what: what.into(),
        })
    }
    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], TraceDatError> {
        let left = self.b.len() - self.pos;
        match usize::try_from(n) {
            Ok(n) if n <= left => {
                let s = &self.b[self.pos..self.pos + n];
                self.pos += n;
                Ok(s)
            }
            _ => self.err(
                self.pos,
                format!("{what}: needs {n} bytes, the file has {left} left (truncated?)"),
            ),
        }
    }
    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], TraceDatError> {
        let s = self.take(N as u64, what)?;
        let mut a = [0; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    fn u16(&mut self, what: &str) -> Result<u16, TraceDatError> {
        let a = self.array(what)?;
        Ok(if self.big {
            u16::from_be_bytes(a)
        } else {
            u16::from_le_bytes(a)
        })
    }
    fn u32(&mut self, what: &str) -> Result<u32, TraceDatError> {
        let a = self.array(what)?;
        Ok(if self.big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        })
    }
    fn u64(&mut self, what: &str) -> Result<u64, TraceDatError> {
        let a = self.array(what)?;
        Ok(if self.big {
            u64::from_be_bytes(a)
        } else {
            u64::from_le_bytes(a)
        })
    }
    /// A NUL-terminated string (the NUL consumed, not returned).
    fn cstr(&mut self, what: &str) -> Result<&'a [u8], TraceDatError> {
        let rest = &self.b[self.pos..];
        match rest.iter().position(|&c| c == 0) {
            Some(n) => {
                self.pos += n + 1;
                Ok(&rest[..n])
            }
            None => self.err(self.pos, format!("{what}: no terminating NUL (truncated?)")),
        }
    }
    /// `u64 size` then that many bytes.
    fn sized64(&mut self, what: &str) -> Result<&'a [u8], TraceDatError> {
        let n = self.u64(&format!("size of {what}"))?;
        self.take(n, what)
    }
    fn sized32(&mut self, what: &str) -> Result<&'a [u8], TraceDatError> {
        let n = self.u32(&format!("size of {what}"))?;
        self.take(u64::from(n), what)
    }
    /// Exactly `want` (a fixed tag such as `"flyrecord\0"`).
    fn tag(&mut self, want: &[u8]) -> Result<(), TraceDatError> {
        let at = self.pos;
        let name = String::from_utf8_lossy(want.strip_suffix(b"\0").unwrap_or(want)).into_owned();
        let got = self.take(want.len() as u64, &format!("{:?}", name.trim_end()))?;
        if got != want {
            return self.err(at, format!("expected {:?}", name.trim_end()));
        }
        Ok(())
    }
}

/// The clock named by a `trace_clock` text: the entry in brackets (`local [mono] global` or
/// `[mono]`), as trace-cmd reads it.
fn current_clock(text: &[u8]) -> Option<&[u8]> {
    text.split(|b| b.is_ascii_whitespace())
        .find_map(|t| t.strip_prefix(b"["))
        .map(|t| t.split(|&b| b == b']').next().unwrap_or(t))
}

/// Parses a version-6 trace.dat (see the module doc for what is accepted). Borrows the texts and
/// pages from `b`.
pub fn read(b: &[u8]) -> Result<TraceDat<'_>, TraceDatError> {
    let mut r = In {
        b,
        pos: 0,
        big: false,
    };
    if b.len() < MAGIC.len() || &b[..MAGIC.len()] != MAGIC {
        return r.err(
            0,
            "not a trace-cmd trace.dat (its first bytes are not 17 08 44 \"tracing\")",
        );
    }
    r.pos = MAGIC.len();
    let at = r.pos;
    let version = r.cstr("file version")?;
    if version != VERSION.as_bytes() {
        let v = String::from_utf8_lossy(&version[..version.len().min(16)]).into_owned();
        let hint = if v == "7" {
            ": convert it with `trace-cmd convert --file-version 6 -i IN -o OUT`"
        } else {
            ""
        };
        return r.err(
            at,
            format!("file version {v:?} is not supported, only 6{hint}"),
        );
    }
    let at = r.pos;
    let [endian, long_size] = r.array::<2>("endianness and long size")?;
    r.big = match endian {
        0 => false,
        1 => true,
        e => return r.err(at, format!("endianness flag {e} is neither 0 nor 1")),
    };
    if let Some(p) = long_size_problem(long_size) {
        return r.err(at + 1, p);
    }
    let at = r.pos;
    let page_size = r.u32("page size")?;
    if let Some(p) = page_size_problem(page_size) {
        return r.err(at, p);
    }

    r.tag(b"header_page\0")?;
    let header_page = r.sized64("header_page")?;
    r.tag(b"header_event\0")?;
    let header_event = r.sized64("header_event")?;

    // Counts come from the file: no capacity from them, each entry consumes at least 8 bytes, so
    // a count the input cannot back fails at the first missing entry.
    let n = r.u32("ftrace format count")?;
    let mut ftrace_formats = Vec::new();
    for _ in 0..n {
        ftrace_formats.push(Cow::Borrowed(r.sized64("ftrace event format")?));
    }
    let n = r.u32("event system count")?;
    let mut event_formats = Vec::new();
    for _ in 0..n {
        let at = r.pos;
        let sys = r.cstr("event system name")?;
        let Ok(sys) = std::str::from_utf8(sys) else {
            return r.err(at, "event system name is not UTF-8");
        };
        let m = r.u32("event format count")?;
        let mut formats = Vec::new();
        for _ in 0..m {
            formats.push(Cow::Borrowed(r.sized64("event format")?));
        }
        event_formats.push((sys.to_string(), formats));
    }
    let kallsyms = r.sized32("kallsyms")?;
    let printk = r.sized32("printk formats")?;
    let cmdlines = r.sized64("saved cmdlines")?;
    let at = r.pos;
    let mut count = r.u32("CPU count")?;
    if count > MAX_CPUS {
        return r.err(at, format!("CPU count {count} is more than {MAX_CPUS}"));
    }

    let mut has_clock = false;
    let mut cpu_stats = Vec::new();
    let mut at = r.pos;
    let mut kind = r.array::<10>("\"options\" or \"flyrecord\"")?;
    if &kind == b"options  \0" {
        loop {
            let at = r.pos;
            let id = r.u16("option id")?;
            if id == OPTION_DONE {
                break;
            }
            let data = r.sized32("option")?;
            has_clock |= id == OPTION_TRACECLOCK;
            if id == OPTION_CPUCOUNT && data.len() >= 4 {
                // trace-cmd reads this many offset/size pairs instead (`trace-cmd convert`
                // from version 7 writes it).
                let n = [data[0], data[1], data[2], data[3]];
                count = if r.big {
                    u32::from_be_bytes(n)
                } else {
                    u32::from_le_bytes(n)
                };
                if count > MAX_CPUS {
                    return r.err(
                        at,
                        format!("CPU count option {count} is more than {MAX_CPUS}"),
                    );
                }
            }
            if id == OPTION_CPUSTAT {
                // A C string: what comes before its first NUL.
                let text = data.split(|&c| c == 0).next().unwrap_or_default();
                cpu_stats.push(Cow::Borrowed(text));
            }
        }
        at = r.pos;
        kind = r.array::<10>("\"flyrecord\"")?;
    }
    match &kind {
        b"flyrecord\0" => {}
        b"latency  \0" => {
            return r.err(
                at,
                "a latency (text) trace is not supported, only flyrecord (raw pages)",
            )
        }
        _ => return r.err(at, "expected \"options\" or \"flyrecord\""),
    }

    let mut table = Vec::new();
    for cpu in 0..count {
        let at = r.pos;
        let offset = r.u64("CPU data offset")?;
        let size = r.u64("CPU data size")?;
        table.push((cpu, at, offset, size));
    }
    let clock = if has_clock {
        let at = r.pos;
        let text = r.sized64("trace clock")?;
        let Some(c) = current_clock(text) else {
            return r.err(at, "the trace clock text names no clock in brackets");
        };
        let Ok(c) = std::str::from_utf8(c) else {
            return r.err(at, "the trace clock is not UTF-8");
        };
        if let Some(p) = clock_problem(c) {
            return r.err(at, p);
        }
        Cow::Borrowed(c)
    } else {
        Cow::Borrowed(DEFAULT_CLOCK)
    };

    let mut cpus = Vec::new();
    for (cpu, at, offset, size) in table {
        let mut pages: &[u8] = &[];
        if size > 0 {
            let what = format!("CPU {cpu} data ({size} bytes at offset {offset})");
            let end = offset.checked_add(size);
            let Some(end) = end.filter(|&e| e <= b.len() as u64) else {
                return r.err(
                    at,
                    format!(
                        "{what} ends past the end of the file ({} bytes; truncated?)",
                        b.len()
                    ),
                );
            };
            if offset % u64::from(page_size) != 0 || size % u64::from(page_size) != 0 {
                return r.err(
                    at,
                    format!("{what} is not whole pages of {page_size} at a page-aligned offset"),
                );
            }
            // In bounds: end <= b.len(), so both fit in usize.
            pages = &b[offset as usize..end as usize];
        }
        cpus.push(CpuData {
            cpu,
            pages: Cow::Borrowed(pages),
        });
    }
    Ok(TraceDat {
        big_endian: r.big,
        long_size,
        page_size,
        clock,
        header_page: Cow::Borrowed(header_page),
        header_event: Cow::Borrowed(header_event),
        ftrace_formats,
        event_formats,
        kallsyms: some(kallsyms),
        printk: some(printk),
        cmdlines: Cow::Borrowed(cmdlines),
        cpus,
        cpu_stats,
    })
}

/// A text that may be absent: None when empty.
fn some(t: &[u8]) -> Option<Cow<'_, [u8]>> {
    (!t.is_empty()).then_some(Cow::Borrowed(t))
}
