//! The live display of a run on a terminal: a status line (elapsed, time left) and a line per
//! CPU, redrawn every second on stderr.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use latlab_core::units::Human;
use latlab_sys::measure;

/// The live display: a status line (elapsed, time left) and a line per CPU, redrawn every
/// second on stderr when stderr is a terminal, so stdout carries only the report (`--format
/// json` stays parseable) and a redirected stderr gets no escape sequences.
pub(super) struct Live {
    pub enabled: bool,
    pub lines: usize,
    pub total_ns: u64,
    /// Below the CPUs: the spikes traced and the loads' state (empty: no line).
    pub extra: String,
}

/// The line under the CPUs: spikes seen and not traced (with a recorder), each load with its
/// restarts and failures. Empty when there is neither.
pub(super) fn extra_line(spikes: Option<(u64, u64)>, loads: &[crate::loads::LiveLoad]) -> String {
    let mut parts = Vec::new();
    if let Some((seen, not_traced)) = spikes {
        parts.push(match not_traced {
            0 => format!("spikes {seen}"),
            n => format!("spikes {seen} ({n} not traced)"),
        });
    }
    if !loads.is_empty() {
        let l: Vec<String> = loads
            .iter()
            .map(|l| {
                let name = if l.profile.starts_with(&l.part) {
                    l.profile.clone()
                } else {
                    format!("{} {}", l.profile, l.part)
                };
                let mut s = latlab_core::escape::escape(&name);
                if l.restarts > 0 {
                    s.push_str(&format!(", {} restarts", l.restarts));
                }
                if l.failures > 0 {
                    s.push_str(&format!(", {} failed", l.failures));
                }
                s
            })
            .collect();
        parts.push(format!("loads: {}", l.join("; ")));
    }
    parts.join("   ")
}

/// `m:ss`, or `h:mm:ss` from an hour on (whole seconds).
fn clock(s: u64) -> String {
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

const NS: u64 = 1_000_000_000;

/// The status line: while measuring, elapsed and left; at the end, what was measured.
fn status_line(elapsed_ns: u64, total_ns: u64, done: bool) -> String {
    let elapsed_ns = elapsed_ns.min(total_ns);
    if done {
        format!(
            "measured {} of {}, done",
            clock(elapsed_ns / NS),
            clock(total_ns.div_ceil(NS))
        )
    } else {
        // Elapsed rounds down and the time left up, so "0:00 left" only when it is over.
        format!(
            "elapsed {} of {}, {} left",
            clock(elapsed_ns / NS),
            clock(total_ns.div_ceil(NS)),
            clock((total_ns - elapsed_ns).div_ceil(NS))
        )
    }
}

impl Live {
    /// What latlab does between the measurement and the record (writing spike captures, the
    /// profile), on the terminal the live display is on; nothing elsewhere.
    pub fn say(&self, what: &str) {
        if self.enabled {
            eprintln!("latlab: {what}");
        }
    }

    pub fn show(&mut self, threads: &[Arc<measure::ThreadShared>], elapsed_ns: u64, done: bool) {
        if !self.enabled {
            return;
        }
        use std::fmt::Write;
        let mut s = String::new();
        if self.lines > 0 {
            let _ = write!(s, "\x1b[{}A", self.lines);
        }
        let _ = writeln!(s, "\x1b[2K{}", status_line(elapsed_ns, self.total_ns, done));
        for t in threads {
            let tot = t.hist.totals();
            let avg = if tot.count > 0 {
                (tot.sum / tot.count as u128) as u64
            } else {
                0
            };
            let _ = writeln!(
                s,
                "\x1b[2KCPU{:<3} cur {:>9}  min {:>9}  avg {:>9}  max {:>9}  samples {:>10}  missed {}",
                t.cpu,
                Human(t.last_ns.load(Ordering::Relaxed)).to_string(),
                Human(if tot.count > 0 { tot.min } else { 0 }).to_string(),
                Human(avg).to_string(),
                Human(tot.max).to_string(),
                tot.count,
                t.missed.load(Ordering::Relaxed)
            );
        }
        self.lines = threads.len() + 1;
        if !self.extra.is_empty() {
            let _ = writeln!(s, "\x1b[2K{}", self.extra);
            self.lines += 1;
        }
        // Cosmetic: a terminal that went away does not end the run (the record is what counts).
        use std::io::Write as _;
        let mut o = std::io::stderr().lock();
        let _ = o.write_all(s.as_bytes()).and_then(|()| o.flush());
    }
}

#[cfg(test)]
mod tests {
    use super::{extra_line, status_line};
    use crate::loads::LiveLoad;

    #[test]
    fn the_extra_line_names_spikes_and_loads_escaped() {
        assert_eq!(extra_line(None, &[]), "");
        assert_eq!(extra_line(Some((3, 0)), &[]), "spikes 3");
        let compile = LiveLoad {
            profile: "stress-kernel".into(),
            part: "compile".into(),
            restarts: 0,
            failures: 0,
            throughput: None,
        };
        assert_eq!(extra_line(None, &[compile]), "loads: stress-kernel compile");
        let l = |part: &str, restarts, failures| LiveLoad {
            profile: part.into(),
            part: part.into(),
            restarts,
            failures,
            throughput: None,
        };
        assert_eq!(
            extra_line(Some((7, 2)), &[l("hackbench", 0, 0), l("dd\x1b[31m", 2, 1)]),
            "spikes 7 (2 not traced)   loads: hackbench; dd\\u{1b}[31m, 2 restarts, 1 failed"
        );
    }

    #[test]
    fn status_line_shows_elapsed_and_time_left() {
        let s = 1_000_000_000;
        assert_eq!(
            status_line(12 * s, 60 * s, false),
            "elapsed 0:12 of 1:00, 0:48 left"
        );
        // Left rounds up: 0.01 s left is not "0:00 left".
        assert_eq!(
            status_line(3 * s - 10_000_000, 3 * s, false),
            "elapsed 0:02 of 0:03, 0:01 left"
        );
        assert_eq!(
            status_line(3_725 * s, 6 * 3600 * s, false),
            "elapsed 1:02:05 of 6:00:00, 4:57:55 left"
        );
        assert_eq!(
            status_line(70 * s, 60 * s, true),
            "measured 1:00 of 1:00, done"
        );
    }
}
