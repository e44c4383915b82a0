//! File I/O in short system calls, for the threads that share CPUs with the measurement.
//!
//! On a kernel without full preemption (`preempt=none` or `voluntary`, like our VMs), a task
//! inside a system call keeps its CPU until the call returns or reaches a preemption point. One
//! `read()` of a tracefs `trace` file formats every event it returns (about 3 µs each) without
//! such a point: the collector's single large read of a spike's buffer kept a measured CPU from
//! its SCHED_FIFO thread for 2.5 ms, and the attribution named latlab itself as the cause
//! (`preempt_off latlab`). Returning to user space between short calls lets the scheduler switch
//! to the woken RT thread at once; the cost is a few more system calls.

use std::io::{self, Read, Write};

/// Bytes per `read()` of a tracefs text file: about 8 events. The kernel formats only what a
/// read asks for (the rest waits in its seq_file buffer); measured under hackbench, 4 KiB reads
/// took 97 µs at the median and 509 µs at p99.
pub const READ_CHUNK: usize = 1024;

/// Bytes per `write()` of a large file (a spike's trace copy, a long run's `run.json`): four
/// pages. Writes of 256 KiB into the page cache took up to 1.7 ms each under hackbench.
pub const WRITE_CHUNK: usize = 16 << 10;

/// Read `r` to its end, at most `chunk` bytes per call.
pub fn read_chunked<R: Read>(r: R, chunk: usize) -> io::Result<Vec<u8>> {
    read_chunked_ticking(r, chunk, usize::MAX, || {})
}

/// [`read_chunked`], calling `tick` after every `every` bytes read: a long copy (a spike's
/// trace under load takes hundreds of ms) lets its caller do other work between calls.
pub fn read_chunked_ticking<R: Read>(
    mut r: R,
    chunk: usize,
    every: usize,
    mut tick: impl FnMut(),
) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; chunk.max(1)];
    let mut since = 0usize;
    loop {
        match r.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                since += n;
                if since >= every {
                    since = 0;
                    tick();
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Write all of `bytes` to `w`, at most `chunk` bytes per call.
pub fn write_chunked<W: Write>(w: &mut W, bytes: &[u8], chunk: usize) -> io::Result<()> {
    for part in bytes.chunks(chunk.max(1)) {
        w.write_all(part)?;
    }
    Ok(())
}

/// A file's contents, read [`READ_CHUNK`] bytes per call.
pub fn read_file(path: &std::path::Path) -> io::Result<Vec<u8>> {
    read_chunked(std::fs::File::open(path)?, READ_CHUNK)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serves `data`, recording the size of every buffer it is asked to fill.
    struct Src<'a> {
        data: &'a [u8],
        asked: Vec<usize>,
    }

    impl Read for Src<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.asked.push(buf.len());
            let n = buf.len().min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[derive(Default)]
    struct Sink {
        got: Vec<u8>,
        calls: Vec<usize>,
    }

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.calls.push(buf.len());
            self.got.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn reads_everything_in_calls_of_at_most_a_chunk() {
        let data: Vec<u8> = (0..3 * READ_CHUNK + 17).map(|i| i as u8).collect();
        let mut src = Src {
            data: &data,
            asked: vec![],
        };
        let got = read_chunked(&mut src, READ_CHUNK).unwrap();
        assert_eq!(got, data);
        assert!(
            src.asked.iter().all(|&n| n == READ_CHUNK),
            "{:?}",
            src.asked
        );
        // 4 calls with data, one that finds the end.
        assert_eq!(src.asked.len(), 5);
    }

    /// The tick comes after every `every` bytes, between reads, and the bytes are all there.
    #[test]
    fn ticks_between_reads_every_so_many_bytes() {
        let data: Vec<u8> = (0..10 * 100 + 30).map(|i| i as u8).collect();
        let mut src = Src {
            data: &data,
            asked: vec![],
        };
        let mut ticks = 0;
        let got = read_chunked_ticking(&mut src, 100, 300, || ticks += 1).unwrap();
        assert_eq!(got, data);
        // 1030 bytes in reads of 100 (and one of 30): a tick after 300, 600 and 900.
        assert_eq!(ticks, 3);
    }

    #[test]
    fn writes_everything_in_calls_of_at_most_a_chunk() {
        let data: Vec<u8> = (0..WRITE_CHUNK * 2 + 5).map(|i| (i * 7) as u8).collect();
        let mut sink = Sink::default();
        write_chunked(&mut sink, &data, WRITE_CHUNK).unwrap();
        assert_eq!(sink.got, data);
        assert_eq!(sink.calls, vec![WRITE_CHUNK, WRITE_CHUNK, 5]);
    }

    #[test]
    fn read_file_reads_a_real_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        let data = vec![b'x'; READ_CHUNK * 2 + 1];
        std::fs::write(&p, &data).unwrap();
        assert_eq!(read_file(&p).unwrap(), data);
    }
}
