//! An event line typed: its name looked up, its body read by the name's fields.

use std::borrow::Cow;

use crate::trace::bytes::{eq_short, find_byte};
use crate::trace::line::{anchor, fixed_task, split_task, Anchor};

use super::fields::{comm_between, strip_fn, Fields};
use super::sched::{fast_switch, fast_wake, parse_switch, parse_wake};
use super::{Event, EventKind, TaskRef};

/// The event names the parser reads a body of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Name {
    Switch,
    Waking,
    Wakeup,
    IrqEntry,
    IrqExit,
    SoftirqEntry,
    SoftirqExit,
    HrtimerStart,
    HrtimerExpireEntry,
    HrtimerExpireExit,
    Nmi,
    PiSetprio,
    Mark,
    Print,
    Other,
}

/// Most frequent first (a hackbench trace is mostly sched_*): a length mismatch rejects an
/// entry at once, and [`eq_short`] compares the rest without a call.
const NAMES: [(&str, Name); 15] = [
    ("sched_switch", Name::Switch),
    ("sched_waking", Name::Waking),
    ("sched_wakeup", Name::Wakeup),
    ("sched_wakeup_new", Name::Wakeup),
    ("irq_handler_entry", Name::IrqEntry),
    ("irq_handler_exit", Name::IrqExit),
    ("softirq_entry", Name::SoftirqEntry),
    ("softirq_exit", Name::SoftirqExit),
    ("hrtimer_start", Name::HrtimerStart),
    ("hrtimer_expire_entry", Name::HrtimerExpireEntry),
    ("hrtimer_expire_exit", Name::HrtimerExpireExit),
    ("nmi_handler", Name::Nmi),
    ("sched_pi_setprio", Name::PiSetprio),
    ("tracing_mark_write", Name::Mark),
    ("print", Name::Print),
];

#[inline]
fn name_of(name: &str) -> Name {
    NAMES
        .iter()
        .find(|(n, _)| eq_short(name.as_bytes(), n.as_bytes()))
        .map_or(Name::Other, |&(_, k)| k)
}

/// The three scheduler events (nearly every line of a busy trace), `sched_XXXXXX: body`, read
/// at their fixed place: what [`name_and_body`] finds for them, without its search.
#[inline]
pub(super) fn sched_name(rest: &str) -> Option<(Name, &str, &str)> {
    let rb = rest.as_bytes();
    if rb.len() < 14 || !eq_short(&rb[..6], b"sched_") || rb[12] != b':' || rb[13] != b' ' {
        return None;
    }
    let n = match &rb[6..12] {
        b"switch" => Name::Switch,
        b"waking" => Name::Waking,
        b"wakeup" => Name::Wakeup,
        _ => return None,
    };
    let body = rest[14..].trim_ascii_start();
    Some((n, &rest[..12], body.trim_end_matches(['\r', '\n'])))
}

/// `event: body` after the anchor: the event's name (looked up), the name, and the body
/// without surrounding blanks (a trailing CR or LF too).
pub(super) fn name_and_body(rest: &str) -> Result<(Name, &str, &str), String> {
    let (name, body) = match find_byte(rest.as_bytes(), b':') {
        Some(p) => (rest[..p].trim_ascii(), rest[p + 1..].trim_ascii_start()),
        None => (rest.trim_ascii(), ""),
    };
    if name.is_empty() || find_byte(name.as_bytes(), b' ').is_some() {
        return Err(format!("bad event name {name:?}"));
    }
    let bb = body.as_bytes();
    let mut end = bb.len();
    while end > 0 && matches!(bb[end - 1], b'\r' | b'\n') {
        end -= 1;
    }
    Ok((name_of(name), name, &body[..end]))
}

/// An event's body, typed by its (looked-up) name.
#[inline]
fn parse_named<'a>(n: Name, name: &'a str, body: &'a str) -> Result<EventKind<'a>, String> {
    let mut f = Fields::new(body);
    use Name as N;
    Ok(match n {
        N::Switch => match fast_switch(body) {
            Some(k) => k,
            None => parse_switch(body)?,
        },
        N::Waking | N::Wakeup => {
            let (task, target_cpu) = match fast_wake(body) {
                Some(w) => w,
                None => parse_wake(body)?,
            };
            if matches!(n, N::Waking) {
                EventKind::SchedWaking { task, target_cpu }
            } else {
                EventKind::SchedWakeup { task, target_cpu }
            }
        }
        N::IrqEntry => EventKind::IrqEntry {
            irq: f.i("irq")?,
            name: Cow::Borrowed(f.get("name").unwrap_or("?")),
        },
        N::IrqExit => EventKind::IrqExit { irq: f.i("irq")? },
        N::SoftirqEntry | N::SoftirqExit => {
            let vec = f.i("vec")?;
            let action = Cow::Borrowed(f.str("action")?);
            if matches!(n, N::SoftirqEntry) {
                EventKind::SoftirqEntry { vec, name: action }
            } else {
                EventKind::SoftirqExit { vec, name: action }
            }
        }
        N::HrtimerStart => EventKind::HrtimerStart {
            hrtimer: Cow::Borrowed(f.str("hrtimer")?),
            function: Cow::Borrowed(strip_fn(f.get("function").unwrap_or("?"))),
            expires: f.u("expires")?,
        },
        N::HrtimerExpireEntry => EventKind::HrtimerExpireEntry {
            hrtimer: Cow::Borrowed(f.str("hrtimer")?),
            function: Cow::Borrowed(strip_fn(f.get("function").unwrap_or("?"))),
            now: f.u("now")?,
        },
        N::HrtimerExpireExit => EventKind::HrtimerExpireExit {
            hrtimer: Cow::Borrowed(f.str("hrtimer")?),
        },
        N::Nmi => EventKind::Nmi {
            handler: Cow::Borrowed(f.get("handler").unwrap_or("nmi")),
            delta_ns: f.u("delta_ns")?,
        },
        N::PiSetprio => {
            // `comm=%s pid=%d oldprio=%d newprio=%d` (the comm may hold blanks).
            let (c, rest) = comm_between(body, "comm=", " pid=")?;
            let mut f = Fields::new(rest);
            EventKind::SchedPiSetprio {
                task: TaskRef {
                    comm: Cow::Borrowed(c),
                    pid: f.i("pid")?,
                    prio: f.i("oldprio")?,
                },
                newprio: f.i("newprio")?,
            }
        }
        N::Mark => EventKind::Marker {
            text: Cow::Borrowed(body),
        },
        N::Print => match body.trim_start().strip_prefix("tracing_mark_write:") {
            Some(t) => EventKind::Marker {
                text: Cow::Borrowed(t.trim_start()),
            },
            None => EventKind::Other {
                name: Cow::Borrowed(name),
            },
        },
        N::Other if body.starts_with("vector=") && name.ends_with("_entry") => {
            EventKind::VectorEntry {
                name: Cow::Borrowed(name.trim_end_matches("_entry")),
                vector: f.i("vector")?,
            }
        }
        N::Other if body.starts_with("vector=") && name.ends_with("_exit") => {
            EventKind::VectorExit {
                name: Cow::Borrowed(name.trim_end_matches("_exit")),
                vector: f.i("vector")?,
            }
        }
        N::Other => EventKind::Other {
            name: Cow::Borrowed(name),
        },
    })
}

/// Build an event from one (possibly joined) anchored text.
pub(in crate::trace) fn event_from(line: usize, text: &str) -> Result<Event<'_>, String> {
    let a = anchor(text).ok_or("no ' [CPU] FLAGS TIMESTAMP: ' anchor")?;
    event_at(line, text, a)
}

pub(in crate::trace) fn event_at(line: usize, text: &str, a: Anchor) -> Result<Event<'_>, String> {
    let col = &text[..a.task_end];
    let (task_comm, pid) = fixed_task(col).unwrap_or_else(|| split_task(col));
    let rest = &text[a.rest..];
    let (n, name, body) = sched_name(rest).map_or_else(|| name_and_body(rest), Ok)?;
    let kind = parse_named(n, name, body).map_err(|e| format!("{name}: {e}"))?;
    Ok(Event {
        line,
        cpu: a.cpu,
        ts: a.ts,
        task_comm: Cow::Borrowed(task_comm),
        pid,
        flags: a.flags,
        kind,
    })
}
