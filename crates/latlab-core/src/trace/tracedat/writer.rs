//! The writer: a [`TraceDat`] as a version-6 trace.dat.

use std::io::{self, Write};

use super::{
    clock_problem, long_size_problem, page_size_problem, TraceDat, MAGIC, MAX_CPUS, VERSION,
};
use super::{OPTION_CPUSTAT, OPTION_DONE, OPTION_TRACECLOCK};

fn invalid(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("trace.dat: {what}"))
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
