//! The decoded events as the kernel's `trace` text (`COMM-PID [CPU] FLAGS SECS.NSECS: event:
//! body`), bodies as the kernel prints them for the events latlab uses, other events as
//! `name: field=value …`. Timestamps keep their nanoseconds (the kernel's text rounds to µs);
//! the text parser reads both. What is rendered is built from the same [`Event`] that
//! [`RawDecoder::decode_cpu`] gives, so parsing the text back gives those events.

use std::fmt::Write;

use super::{
    bytes, flag_chars, flag_chars_rt_lazy, int, Comms, CpuStats, FieldKind, Item, Known, LostMark,
    RawDecoder, RawError, Shape, Slot, F,
};
use crate::trace::event::{Event, EventKind};

impl RawDecoder {
    /// Render one CPU's pages as text into `out` (a comment header, then one line per event
    /// and per lost-events mark). Returns the same stats as [`RawDecoder::decode_cpu`].
    pub fn render_text(
        &self,
        cpu: u32,
        pages: &[u8],
        comms: &Comms,
        out: &mut String,
    ) -> Result<CpuStats, RawError> {
        let _ = writeln!(
            out,
            "# tracer: nop (latlab: CPU {cpu} decoded from per_cpu/cpu{cpu}/trace_pipe_raw; timestamps in ns)\n#"
        );
        let mut stats = CpuStats::default();
        let mut n = 0usize;
        self.walk(pages, &mut stats, |item, stats| match item {
            Item::Lost(l) => {
                stats.lost.push(LostMark {
                    before: n,
                    events: l,
                });
                match l {
                    Some(l) => {
                        let _ = writeln!(out, "CPU:{cpu} [LOST {l} EVENTS]");
                    }
                    None => {
                        let _ = writeln!(out, "# CPU:{cpu} [LOST EVENTS] (how many: unknown)");
                    }
                }
            }
            Item::Event { ts, data, .. } => {
                let Some(k) = self.known_of(data) else {
                    stats.unknown_events += 1;
                    return;
                };
                let Some(e) = self.event(
                    k,
                    data,
                    comms,
                    Slot {
                        cpu,
                        ts,
                        line: n + 1,
                    },
                ) else {
                    stats.unknown_events += 1;
                    return;
                };
                stats.events += 1;
                n += 1;
                line(out, k, &e, data);
            }
        })?;
        Ok(stats)
    }
}

fn line(out: &mut String, k: &Known, e: &Event<'_>, d: &[u8]) {
    let (flags, preempt) = (
        int(d, &k.flags).unwrap_or(0) as u8,
        int(d, &k.preempt).unwrap_or(0) as u8,
    );
    let five;
    let seven;
    let fl = match &k.lazy {
        Some(l) => {
            seven = flag_chars_rt_lazy(flags, preempt, int(d, l).unwrap_or(0) as u8);
            seven.as_str()
        }
        None => {
            five = flag_chars(flags, preempt);
            std::str::from_utf8(&five).unwrap_or(".....")
        }
    };
    let _ = write!(
        out,
        "{:>16}-{:<7} [{:03}] {} {:>5}.{:09}: ",
        e.task_comm,
        e.pid,
        e.cpu,
        fl,
        e.ts / 1_000_000_000,
        e.ts % 1_000_000_000
    );
    let opt = |f: &Option<F>| f.as_ref().and_then(|f| int(d, f));
    match (&e.kind, &k.shape) {
        (
            EventKind::SchedSwitch {
                prev,
                prev_state,
                next,
            },
            _,
        ) => {
            let _ = write!(
                out,
                "sched_switch: prev_comm={} prev_pid={} prev_prio={} prev_state={} ==> next_comm={} next_pid={} next_prio={}",
                prev.comm, prev.pid, prev.prio, prev_state, next.comm, next.pid, next.prio
            );
        }
        (
            EventKind::SchedWaking { task, target_cpu }
            | EventKind::SchedWakeup { task, target_cpu },
            _,
        ) => {
            let _ = write!(
                out,
                "{}: comm={} pid={} prio={}",
                k.fmt.name, task.comm, task.pid, task.prio
            );
            if let Some(c) = target_cpu {
                let _ = write!(out, " target_cpu={c:03}");
            }
        }
        (EventKind::SchedPiSetprio { task, newprio }, _) => {
            let _ = write!(
                out,
                "sched_pi_setprio: comm={} pid={} oldprio={} newprio={newprio}",
                task.comm, task.pid, task.prio
            );
        }
        (EventKind::IrqEntry { irq, name }, _) => {
            let _ = write!(out, "irq_handler_entry: irq={irq} name={name}");
        }
        (EventKind::IrqExit { irq }, Shape::IrqExit { ret, .. }) => {
            let _ = write!(out, "irq_handler_exit: irq={irq}");
            if let Some(r) = opt(ret) {
                let _ = write!(out, " ret={}", if r != 0 { "handled" } else { "unhandled" });
            }
        }
        (EventKind::SoftirqEntry { vec, name } | EventKind::SoftirqExit { vec, name }, _) => {
            let _ = write!(out, "{}: vec={vec} [action={name}]", k.fmt.name);
        }
        (EventKind::VectorEntry { vector, .. } | EventKind::VectorExit { vector, .. }, _) => {
            let _ = write!(out, "{}: vector={vector}", k.fmt.name);
        }
        (
            EventKind::HrtimerStart {
                hrtimer,
                function,
                expires,
            },
            Shape::HrStart {
                softexpires,
                mode,
                was_armed,
                ..
            },
        ) => {
            let _ = write!(
                out,
                "hrtimer_start: hrtimer={hrtimer} function={function} expires={expires}"
            );
            if let Some(s) = opt(softexpires) {
                let _ = write!(out, " softexpires={}", s as u64);
            }
            if let Some(m) = opt(mode) {
                let _ = write!(out, " mode={m}");
            }
            if let Some(a) = opt(was_armed) {
                let _ = write!(out, " was_armed={a}");
            }
        }
        (
            EventKind::HrtimerExpireEntry {
                hrtimer,
                function,
                now,
            },
            _,
        ) => {
            let _ = write!(
                out,
                "hrtimer_expire_entry: hrtimer={hrtimer} function={function} now={now}"
            );
        }
        (EventKind::HrtimerExpireExit { hrtimer }, _) => {
            let _ = write!(out, "hrtimer_expire_exit: hrtimer={hrtimer}");
        }
        (EventKind::Nmi { handler, delta_ns }, Shape::Nmi { handled, .. }) => {
            // The kernel prints `%ps() delta_ns: %lld`; keys the text parser reads instead.
            let _ = write!(out, "nmi_handler: handler={handler} delta_ns={delta_ns}");
            if let Some(h) = opt(handled) {
                let _ = write!(out, " handled={h}");
            }
        }
        (EventKind::Marker { text }, _) => {
            let _ = write!(out, "tracing_mark_write: {text}");
        }
        _ => generic_body(out, k, d),
    }
    out.push('\n');
}

/// An event the decoder does not type, as `name: field=value …` (every field but the common
/// ones: integers as the format's sign says, strings on one line, other fields in hex).
fn generic_body(out: &mut String, k: &Known, d: &[u8]) {
    let _ = write!(out, "{}:", k.fmt.name);
    for f in k
        .fmt
        .fields
        .iter()
        .filter(|f| !f.name.starts_with("common_"))
    {
        let _ = write!(out, " {}=", f.name);
        let loc = F::from(f);
        match f.kind {
            FieldKind::Int => {
                if let Some(v) = int(d, &loc) {
                    if f.signed {
                        let _ = write!(out, "{v}");
                    } else {
                        let _ = write!(out, "{}", v as u64);
                    }
                }
            }
            FieldKind::Chars | FieldKind::DataLoc | FieldKind::Tail => {
                if let Some(b) = bytes(d, &loc) {
                    // One line per event: a newline in a value would start another.
                    let t = String::from_utf8_lossy(b);
                    out.extend(
                        t.chars()
                            .map(|c| if c == '\n' || c == '\r' { ' ' } else { c }),
                    );
                }
            }
            FieldKind::Other => {
                if let Some(b) = d.get(f.offset..f.offset + f.size) {
                    out.push_str("0x");
                    for c in b {
                        let _ = write!(out, "{c:02x}");
                    }
                }
            }
        }
    }
}
