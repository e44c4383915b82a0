//! The reader: a version-6 trace.dat from untrusted bytes, every size checked before use.

use std::borrow::Cow;

use super::{
    clock_problem, long_size_problem, page_size_problem, CpuData, TraceDat, TraceDatError,
};
use super::{DEFAULT_CLOCK, MAGIC, MAX_CPUS, OPTION_CPUCOUNT, OPTION_CPUSTAT, OPTION_DONE};
use super::{OPTION_TRACECLOCK, VERSION};

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
    let (long_size, page_size) = preamble(&mut r)?;

    r.tag(b"header_page\0")?;
    let header_page = r.sized64("header_page")?;
    r.tag(b"header_event\0")?;
    let header_event = r.sized64("header_event")?;
    let (ftrace_formats, event_formats) = formats(&mut r)?;
    let kallsyms = r.sized32("kallsyms")?;
    let printk = r.sized32("printk formats")?;
    let cmdlines = r.sized64("saved cmdlines")?;
    let at = r.pos;
    let count = r.u32("CPU count")?;
    if count > MAX_CPUS {
        return r.err(at, format!("CPU count {count} is more than {MAX_CPUS}"));
    }
    let options = options(&mut r, count)?;

    let mut table = Vec::new();
    for cpu in 0..options.count {
        let at = r.pos;
        let offset = r.u64("CPU data offset")?;
        let size = r.u64("CPU data size")?;
        table.push(TableEntry {
            cpu,
            at,
            offset,
            size,
        });
    }
    let clock = clock(&mut r, options.has_clock)?;
    let cpus = cpu_data(&r, table, page_size)?;
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
        cpu_stats: options.cpu_stats,
    })
}

/// The magic, the version, the byte order (set in `r`), the long size and the page size.
fn preamble(r: &mut In<'_>) -> Result<(u8, u32), TraceDatError> {
    let b = r.b;
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
    Ok((long_size, page_size))
}

/// The ftrace events' formats, and each event system's.
type Formats<'a> = (Vec<Cow<'a, [u8]>>, Vec<(String, Vec<Cow<'a, [u8]>>)>);

/// The `format` files: the ftrace events', then per event system its events'.
fn formats<'a>(r: &mut In<'a>) -> Result<Formats<'a>, TraceDatError> {
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
    Ok((ftrace_formats, event_formats))
}

/// What the options section said.
struct Options<'a> {
    /// The number of CPUs in the offset table (the CPU count, or a CPUCOUNT option's).
    count: u32,
    /// A TRACECLOCK option was present: the clock text follows the offset table.
    has_clock: bool,
    cpu_stats: Vec<Cow<'a, [u8]>>,
}

/// The options, if any, up to and including the `flyrecord` tag; `count` is the CPU count
/// read before them.
fn options<'a>(r: &mut In<'a>, count: u32) -> Result<Options<'a>, TraceDatError> {
    let mut o = Options {
        count,
        has_clock: false,
        cpu_stats: Vec::new(),
    };
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
            o.has_clock |= id == OPTION_TRACECLOCK;
            if id == OPTION_CPUCOUNT && data.len() >= 4 {
                // trace-cmd reads this many offset/size pairs instead (`trace-cmd convert`
                // from version 7 writes it).
                let n = [data[0], data[1], data[2], data[3]];
                o.count = if r.big {
                    u32::from_be_bytes(n)
                } else {
                    u32::from_le_bytes(n)
                };
                if o.count > MAX_CPUS {
                    return r.err(
                        at,
                        format!("CPU count option {} is more than {MAX_CPUS}", o.count),
                    );
                }
            }
            if id == OPTION_CPUSTAT {
                // A C string: what comes before its first NUL.
                let text = data.split(|&c| c == 0).next().unwrap_or_default();
                o.cpu_stats.push(Cow::Borrowed(text));
            }
        }
        at = r.pos;
        kind = r.array::<10>("\"flyrecord\"")?;
    }
    match &kind {
        b"flyrecord\0" => Ok(o),
        b"latency  \0" => r.err(
            at,
            "a latency (text) trace is not supported, only flyrecord (raw pages)",
        ),
        _ => r.err(at, "expected \"options\" or \"flyrecord\""),
    }
}

/// One entry of the flyrecord's offset table, and where it was read.
struct TableEntry {
    cpu: u32,
    at: usize,
    offset: u64,
    size: u64,
}

/// The trace clock: the text after the offset table when a TRACECLOCK option said so, else
/// trace-cmd's default.
fn clock<'a>(r: &mut In<'a>, has_clock: bool) -> Result<Cow<'a, str>, TraceDatError> {
    if !has_clock {
        return Ok(Cow::Borrowed(DEFAULT_CLOCK));
    }
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
    Ok(Cow::Borrowed(c))
}

/// Each CPU's pages, as the offset table places them (checked: inside the file, whole pages at
/// a page-aligned offset).
fn cpu_data<'a>(
    r: &In<'a>,
    table: Vec<TableEntry>,
    page_size: u32,
) -> Result<Vec<CpuData<'a>>, TraceDatError> {
    let b = r.b;
    let mut cpus = Vec::new();
    for TableEntry {
        cpu,
        at,
        offset,
        size,
    } in table
    {
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
    Ok(cpus)
}

/// A text that may be absent: None when empty.
fn some(t: &[u8]) -> Option<Cow<'_, [u8]>> {
    (!t.is_empty()).then_some(Cow::Borrowed(t))
}
