//! latlab's markers: a `LATLAB_STOP` written by the measurement thread right after its clock
//! read ends a sample with its exact E and R.

use super::window::{MarkerEnd, Window};
use super::Analyzer;
use crate::trace::event::Event;
use crate::units::Nanos;

/// Parse a latlab marker: `(intended, actual, latency)`.
pub fn parse_marker(text: &str) -> Option<(Nanos, Nanos, Option<Nanos>)> {
    let field = |k: &str| -> Option<Nanos> {
        text.split_whitespace()
            .find_map(|t| t.strip_prefix(k)?.strip_prefix('=')?.parse().ok())
    };
    if text.contains("LATLAB_STOP") {
        Some((field("intended")?, field("actual")?, field("latency")))
    } else if text.starts_with("latlab seq=") {
        Some((field("target")?, field("now")?, field("lat_ns")))
    } else {
        None
    }
}

/// A spinning thread's gap (`--mode noise`): on `cpu`, from its last clock read before the
/// gap (`start_ns`) to its first after (`end_ns`), as its marker gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoiseGap {
    pub cpu: u32,
    pub start_ns: Nanos,
    pub end_ns: Nanos,
}

/// The gap a noise marker (`LATLAB_STOP cpu=C intended=E actual=R latency=L noise`) gives;
/// None for any other text (a marker cut before ` noise` is a timer's).
pub fn noise_gap(text: &str) -> Option<NoiseGap> {
    if text.split_whitespace().last() != Some("noise") {
        return None;
    }
    let (start_ns, end_ns, _) = parse_marker(text)?;
    let cpu = text
        .split_whitespace()
        .find_map(|t| t.strip_prefix("cpu=")?.parse().ok())?;
    (start_ns <= end_ns).then_some(NoiseGap {
        cpu,
        start_ns,
        end_ns,
    })
}

/// The noise gaps whose markers lie in `bytes`, a trace's text or its ring-buffer pages (a
/// `print` event keeps the marker's text as written, up to its newline or NUL).
pub fn gaps_in(bytes: &[u8], out: &mut Vec<NoiseGap>) {
    for at in memchr::memmem::find_iter(bytes, b"LATLAB_STOP") {
        let rest = &bytes[at..bytes.len().min(at + 160)];
        let end = memchr::memchr2(b'\n', 0, rest).unwrap_or(rest.len());
        if let Some(g) = std::str::from_utf8(&rest[..end]).ok().and_then(noise_gap) {
            out.push(g);
        }
    }
}

/// A trace_marker text that is latlab's (whether or not its fields can be read).
pub(in crate::trace) fn is_latlab_marker(text: &str) -> bool {
    text.contains("LATLAB_STOP") || text.starts_with("latlab seq=")
}

impl<'a> Analyzer<'a> {
    /// `tracing_mark_write` (a `trace_marker` write) in marker mode: latlab's measurement
    /// thread wrote `LATLAB_STOP cpu=C intended=E actual=R latency=L` right after its clock
    /// read R, so the window of this thread (or a new one, when its arming is not in the
    /// trace) ends here as a sample with the exact E and R.
    pub(super) fn trace_marker(
        &mut self,
        ev: &Event<'a>,
        t: Nanos,
        text: &str,
        finished: &mut Vec<(Window<'a>, Option<MarkerEnd>)>,
    ) {
        if noise_gap(text).is_some() {
            // A noise gap's window ends at the gap's end ([`super::cpu::CpuState::close_gaps`]),
            // wherever its marker was written.
            return;
        }
        // On a cut last line the last field may have lost digits (`latency=13351`
        // for 13351484): it is not read (the latency is then actual − intended).
        let cut = self.cut_line == Some(ev.line) && is_latlab_marker(text);
        let m = if cut {
            text.trim_end()
                .rsplit_once(' ')
                .and_then(|(h, _)| parse_marker(h))
        } else {
            parse_marker(text)
        };
        if cut {
            let what = if m.is_some() {
                "the last latlab marker is cut short: its last field is not read"
            } else {
                "the last latlab marker is cut short: its sample is lost"
            };
            let line = ev.line + self.line_offset;
            self.cut = Some(format!(
                "line {line}: {what} (no newline at the end: a truncated file?)"
            ));
        }
        if let Some((e, r, l)) = m {
            let st = self.cpus.entry(ev.cpu);
            let w = match st.windows.iter().position(|w| w.pid == ev.pid) {
                Some(i) => st.windows.remove(i),
                None => {
                    // Neither its arming nor its wake-up is in the trace: the switches the CPU
                    // remembers say what ran at E.
                    let prio = st.current.as_ref().filter(|c| c.prio_known).map(|c| c.prio);
                    let mut w = Window::new(ev.pid, ev.task_comm.clone(), prio, e, None);
                    w.idle_at_e = st.idle_at(e);
                    w
                }
            };
            finished.push((w, Some((e, r, l, t))));
        }
    }
}
