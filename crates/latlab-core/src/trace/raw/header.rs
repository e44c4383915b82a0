//! `events/header_page` and `events/header_event`: the sub-buffer page layout and the event
//! header, as the running kernel publishes them. Every offset and size is read from these
//! texts; a layout that differs from what the decoder understands is a [`RawError`].

use super::RawError;

/// Where the page header's fields are (bytes from the page start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLayout {
    /// `u64 timestamp`: the time of the page's first event, the base of its deltas.
    pub ts_offset: usize,
    /// `local_t commit`: bytes of data written (low 27 bits) and flags (bits 31, 30).
    pub commit_offset: usize,
    /// 8 (64-bit kernels); a 4-byte commit is refused.
    pub commit_size: usize,
    /// `char data`: where events start, and how many bytes the page can hold.
    pub data_offset: usize,
    pub data_size: usize,
}

impl PageLayout {
    /// Bytes per page (what one read of `trace_pipe_raw` returns at most).
    pub fn page_size(&self) -> usize {
        self.data_offset + self.data_size
    }

    /// The page's `timestamp` (its first event's time at most: the base of the deltas), or
    /// None when `page` is shorter than the header. Host byte order, as the decoder reads.
    pub fn time_stamp(&self, page: &[u8]) -> Option<u64> {
        let b = page.get(self.ts_offset..self.ts_offset + 8)?;
        Some(u64::from_ne_bytes(b.try_into().ok()?))
    }
}

/// The event header's encoding (`header_event`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventHeader {
    pub type_len_bits: u32,
    pub time_delta_bits: u32,
    pub padding: u32,
    pub time_extend: u32,
    pub time_stamp: u32,
    /// The largest type_len that still means "data of type_len × 4 bytes".
    pub data_max: u32,
}

/// One `field: TYPE NAME; offset:N; size:N; signed:N;` line, split.
pub(super) struct FieldLine<'a> {
    pub decl: &'a str,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
}

/// Parse a `field:` line (of `header_page` or of an event's `format`). None when it is not one.
pub(super) fn field_line(l: &str) -> Option<FieldLine<'_>> {
    let l = l.trim().strip_prefix("field:")?;
    let mut parts = l.split(';').map(str::trim);
    let decl = parts.next()?.trim();
    let mut offset = None;
    let mut size = None;
    let mut signed = None;
    for p in parts {
        if let Some(v) = p.strip_prefix("offset:") {
            offset = v.trim().parse().ok();
        } else if let Some(v) = p.strip_prefix("size:") {
            size = v.trim().parse().ok();
        } else if let Some(v) = p.strip_prefix("signed:") {
            signed = Some(v.trim() == "1");
        }
    }
    Some(FieldLine {
        decl,
        offset: offset?,
        size: size?,
        signed: signed.unwrap_or(false),
    })
}

fn err(what: impl Into<String>) -> RawError {
    RawError::new(what)
}

/// Parse `events/header_page`.
pub fn parse_header_page(text: &str) -> Result<PageLayout, RawError> {
    let mut ts = None;
    let mut commit = None;
    let mut data = None;
    for l in text.lines() {
        let Some(f) = field_line(l) else { continue };
        let name = f.decl.rsplit([' ', '\t']).next().unwrap_or("");
        match name {
            "timestamp" => ts = Some((f.offset, f.size)),
            "commit" => commit = Some((f.offset, f.size)),
            "data" => data = Some((f.offset, f.size)),
            _ => {}
        }
    }
    let (ts_off, ts_size) = ts.ok_or_else(|| err("header_page has no timestamp field"))?;
    let (c_off, c_size) = commit.ok_or_else(|| err("header_page has no commit field"))?;
    let (d_off, d_size) = data.ok_or_else(|| err("header_page has no data field"))?;
    if ts_size != 8 {
        return Err(err(format!("header_page: a {ts_size}-byte timestamp")));
    }
    if c_size != 8 {
        return Err(err(format!(
            "header_page: a {c_size}-byte commit (a 32-bit kernel?): only 64-bit layouts are decoded"
        )));
    }
    if ts_off + 8 > d_off || c_off + 8 > d_off {
        return Err(err("header_page: the header fields overlap the data"));
    }
    if d_size == 0 || !d_size.is_multiple_of(4) || d_off + d_size > 1 << 27 {
        return Err(err(format!("header_page: a data area of {d_size} bytes")));
    }
    Ok(PageLayout {
        ts_offset: ts_off,
        commit_offset: c_off,
        commit_size: c_size,
        data_offset: d_off,
        data_size: d_size,
    })
}

/// Parse `events/header_event`. Only the layout every kernel since 2.6.31 uses is accepted:
/// a 5-bit type_len and a 27-bit time delta in one little u32, types 29–31 special.
pub fn parse_header_event(text: &str) -> Result<EventHeader, RawError> {
    let bits = |key: &str| -> Option<u32> {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            if k.trim() != key {
                return None;
            }
            v.trim().strip_suffix("bits")?.trim().parse().ok()
        })
    };
    let type_len_bits = bits("type_len").ok_or_else(|| err("header_event: no type_len"))?;
    let time_delta_bits = bits("time_delta").ok_or_else(|| err("header_event: no time_delta"))?;
    let array_bits = bits("array").ok_or_else(|| err("header_event: no array"))?;
    let ty = |key: &str| -> Option<u32> {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            if k.trim() != key {
                return None;
            }
            v.trim().strip_prefix("type ==")?.trim().parse().ok()
        })
    };
    let padding = ty("padding").ok_or_else(|| err("header_event: no padding type"))?;
    let time_extend = ty("time_extend").ok_or_else(|| err("header_event: no time_extend type"))?;
    let time_stamp = ty("time_stamp").ok_or_else(|| err("header_event: no time_stamp type"))?;
    let data_max = text
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("data max type_len")?
                .trim()
                .strip_prefix("==")?
                .trim()
                .parse()
                .ok()
        })
        .ok_or_else(|| err("header_event: no data max type_len"))?;
    let h = EventHeader {
        type_len_bits,
        time_delta_bits,
        padding,
        time_extend,
        time_stamp,
        data_max,
    };
    let known = EventHeader {
        type_len_bits: 5,
        time_delta_bits: 27,
        padding: 29,
        time_extend: 30,
        time_stamp: 31,
        data_max: 28,
    };
    if h != known || array_bits != 32 {
        return Err(err(format!(
            "header_event: an event header latlab does not know ({h:?}, array {array_bits} bits)"
        )));
    }
    Ok(h)
}
