//! The heat maps' data and its side file, `profile/series.bin`.

use super::{MAX_MIGRATION_POINTS, MAX_PIXELS, MAX_SERIES_CPUS, MAX_SWITCH_POINTS};

/// The heat maps' data: per CPU, the largest run-queue length in each pixel of `pixel_ns`
/// from `start_ns` ([`PIXEL_UNKNOWN`](super::PIXEL_UNKNOWN): no known state), the switch
/// points (time, CPU, the task switched to), the migrations into profiled CPUs (time, pid,
/// from, to) and the names of the tasks switched to most often (untrusted text).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Series {
    pub start_ns: u64,
    pub pixel_ns: u64,
    pub cpus: Vec<(u32, Vec<u8>)>,
    pub switches: Vec<(u64, u32, i64)>,
    pub switches_dropped: u64,
    pub migrations: Vec<(u64, i64, u32, u32)>,
    pub migrations_dropped: u64,
    pub names: Vec<(i64, String)>,
}

/// `s` cut to at most `n` bytes, on a character boundary.
pub(super) fn cut(mut s: String, n: usize) -> String {
    if s.len() > n {
        let mut i = n;
        while !s.is_char_boundary(i) {
            i -= 1;
        }
        s.truncate(i);
    }
    s
}

/// Names kept in a series file at most (a file saying more is not one of latlab's).
const MAX_SERIES_NAMES: usize = 4096;

impl Series {
    /// The side file `profile/series.bin` (docs/design.md, "Profile"): little-endian,
    /// `LATLABRQ` magic, u32 version (2), u64 start_ns, u64 pixel_ns, u32 CPUs; per CPU u32
    /// cpu, u32 pixel count, the pixels (u8 each); u64 switch points, each u64 ts, u32 cpu,
    /// i32 pid; u64 switch points dropped; (version 2:) u64 migrations, each u64 ts, i32 pid,
    /// u32 orig, u32 dest; u64 migrations dropped; u32 names, each i32 pid, u8 length, the
    /// name's bytes (UTF-8).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(b"LATLABRQ");
        b.extend_from_slice(&2u32.to_le_bytes());
        b.extend_from_slice(&self.start_ns.to_le_bytes());
        b.extend_from_slice(&self.pixel_ns.to_le_bytes());
        b.extend_from_slice(&(self.cpus.len() as u32).to_le_bytes());
        for (cpu, px) in &self.cpus {
            b.extend_from_slice(&cpu.to_le_bytes());
            b.extend_from_slice(&(px.len() as u32).to_le_bytes());
            b.extend_from_slice(px);
        }
        let pid32 = |pid: i64| (pid.clamp(i32::MIN as i64, i32::MAX as i64) as i32).to_le_bytes();
        b.extend_from_slice(&(self.switches.len() as u64).to_le_bytes());
        for &(ts, cpu, pid) in &self.switches {
            b.extend_from_slice(&ts.to_le_bytes());
            b.extend_from_slice(&cpu.to_le_bytes());
            b.extend_from_slice(&pid32(pid));
        }
        b.extend_from_slice(&self.switches_dropped.to_le_bytes());
        b.extend_from_slice(&(self.migrations.len() as u64).to_le_bytes());
        for &(ts, pid, orig, dest) in &self.migrations {
            b.extend_from_slice(&ts.to_le_bytes());
            b.extend_from_slice(&pid32(pid));
            b.extend_from_slice(&orig.to_le_bytes());
            b.extend_from_slice(&dest.to_le_bytes());
        }
        b.extend_from_slice(&self.migrations_dropped.to_le_bytes());
        let names = &self.names[..self.names.len().min(MAX_SERIES_NAMES)];
        b.extend_from_slice(&(names.len() as u32).to_le_bytes());
        for (pid, name) in names {
            let name = cut(name.clone(), 255);
            b.extend_from_slice(&pid32(*pid));
            b.push(name.len() as u8);
            b.extend_from_slice(name.as_bytes());
        }
        b
    }

    /// Read [`Series::to_bytes`]'s format back (version 2, or 1: no migrations or names);
    /// None when the bytes are not one (untrusted).
    pub fn from_bytes(b: &[u8]) -> Option<Series> {
        let mut r = Reader { b, at: 0 };
        if r.take(8)? != b"LATLABRQ" {
            return None;
        }
        let version = r.u32()?;
        if !(1..=2).contains(&version) {
            return None;
        }
        let (start_ns, pixel_ns, n) = (r.u64()?, r.u64()?, r.u32()?);
        if pixel_ns == 0 {
            return None;
        }
        // No kernel has more CPUs (NR_CPUS is at most 8192): more is no series of latlab's.
        if n as usize > MAX_SERIES_CPUS {
            return None;
        }
        let mut cpus: Vec<(u32, Vec<u8>)> = Vec::new();
        for _ in 0..n {
            let cpu = r.u32()?;
            if cpus.iter().any(|c| c.0 == cpu) {
                return None;
            }
            let len = r.u32()? as usize;
            if len > MAX_PIXELS {
                return None;
            }
            cpus.push((cpu, r.take(len)?.to_vec()));
        }
        let k = r.u64()?;
        if k > MAX_SWITCH_POINTS as u64 {
            return None;
        }
        let mut switches = Vec::with_capacity(k as usize);
        for _ in 0..k {
            switches.push((r.u64()?, r.u32()?, r.u32()? as i32 as i64));
        }
        let switches_dropped = r.u64()?;
        let mut s = Series {
            start_ns,
            pixel_ns,
            cpus,
            switches,
            switches_dropped,
            ..Series::default()
        };
        if version >= 2 {
            let k = r.u64()?;
            if k > MAX_MIGRATION_POINTS as u64 {
                return None;
            }
            s.migrations.reserve(k as usize);
            for _ in 0..k {
                s.migrations
                    .push((r.u64()?, r.u32()? as i32 as i64, r.u32()?, r.u32()?));
            }
            s.migrations_dropped = r.u64()?;
            let k = r.u32()? as usize;
            if k > MAX_SERIES_NAMES {
                return None;
            }
            for _ in 0..k {
                let pid = r.u32()? as i32 as i64;
                let len = r.take(1)?[0] as usize;
                let name = String::from_utf8_lossy(r.take(len)?).into_owned();
                s.names.push((pid, name));
            }
        }
        (r.at == b.len()).then_some(s)
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}
