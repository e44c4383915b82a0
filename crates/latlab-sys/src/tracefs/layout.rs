//! The texts the binary decoder needs from an instance (page and event headers, event
//! formats).

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use super::{io_err, TraceError};

/// The texts the binary decoder needs, read once when the instance is configured: the page
/// and event-header layouts and the `format` of every enabled event (and of `ftrace/print`,
/// the markers).
#[derive(Debug, Clone, Default)]
pub struct RawLayout {
    pub header_page: String,
    pub header_event: String,
    pub formats: Vec<String>,
    /// The event of each format (`system/event`, same order; the last is `ftrace/print`).
    pub events: Vec<String>,
}

impl RawLayout {
    /// Read the layout of the instance at `dir` for `events` (`system/event`).
    pub fn read(dir: &Path, events: &[String]) -> Result<RawLayout, TraceError> {
        let ev = dir.join("events");
        // In one read: `header_page` and `header_event` answer a short first read with its
        // part only, and the next read with nothing (measured on 6.18: 32-byte reads give the
        // first line and end), so a reader that starts small (as `fs::read_to_string` does
        // on a file of size 0) gets a cut text.
        let read = |p: PathBuf| -> Result<String, TraceError> {
            use std::io::Read;
            let mut f = File::open(&p).map_err(io_err(&p))?;
            let mut buf = vec![0u8; 64 << 10];
            let mut len = 0;
            loop {
                let n = f.read(&mut buf[len..]).map_err(io_err(&p))?;
                len += n;
                if n == 0 || len == buf.len() {
                    break;
                }
            }
            buf.truncate(len);
            String::from_utf8(buf).map_err(|_| TraceError::Io {
                path: p.clone(),
                source: io::Error::other("not UTF-8"),
            })
        };
        let mut formats = Vec::with_capacity(events.len() + 1);
        let mut names = Vec::with_capacity(events.len() + 1);
        for e in events.iter().map(String::as_str).chain(["ftrace/print"]) {
            formats.push(read(ev.join(e).join("format"))?);
            names.push(e.to_string());
        }
        Ok(RawLayout {
            header_page: read(ev.join("header_page"))?,
            header_event: read(ev.join("header_event"))?,
            formats,
            events: names,
        })
    }
}
