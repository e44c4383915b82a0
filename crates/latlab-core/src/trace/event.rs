//! Event bodies: the typed [`Event`] and [`EventKind`], and the parser of each event's body by
//! its keys (comms between known keys, never by token position).
//!
//! The three scheduler events (nearly every line of a busy trace) have fast paths that read
//! the kernel's fixed layout backwards: each sits right before its general twin
//! (`fast_switch` / `parse_switch`, `fast_wake` / `parse_wake`, `sched_name` /
//! `name_and_body`), and property tests below check that where a fast path answers, the
//! general parser answers the same.

use std::borrow::Cow;
use std::fmt;

use super::bytes::{digits_back, eq_short, find_byte, parse_i64, parse_u64, rfind_sub, strip};
use super::line::{anchor, fixed_task, split_task, Anchor, Flags};

/// One scheduler entity as an event names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRef<'a> {
    pub comm: Cow<'a, str>,
    pub pid: i64,
    /// Kernel priority: FIFO N shows as `99-N`; CFS 100..139.
    pub prio: i64,
}

impl TaskRef<'_> {
    /// The same task with its name owned (for events built from a joined, temporary text).
    pub fn into_owned(self) -> TaskRef<'static> {
        TaskRef {
            comm: Cow::Owned(self.comm.into_owned()),
            pid: self.pid,
            prio: self.prio,
        }
    }
}

impl fmt::Display for TaskRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{} [{}]", self.comm, self.pid, self.prio)
    }
}

/// What happened, typed. Events latlab does not analyze are kept as [`EventKind::Other`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind<'a> {
    SchedSwitch {
        prev: TaskRef<'a>,
        /// `R+` = preempted, `R` = switched through schedule() itself, `S`, `D` …
        prev_state: Cow<'a, str>,
        next: TaskRef<'a>,
    },
    SchedWaking {
        task: TaskRef<'a>,
        target_cpu: Option<u32>,
    },
    SchedWakeup {
        task: TaskRef<'a>,
        target_cpu: Option<u32>,
    },
    IrqEntry {
        irq: i64,
        name: Cow<'a, str>,
    },
    IrqExit {
        irq: i64,
    },
    SoftirqEntry {
        vec: i64,
        name: Cow<'a, str>,
    },
    SoftirqExit {
        vec: i64,
        name: Cow<'a, str>,
    },
    /// `irq_vectors` entry events: `local_timer`, `reschedule`, `call_function_single` …
    VectorEntry {
        name: Cow<'a, str>,
        vector: i64,
    },
    VectorExit {
        name: Cow<'a, str>,
        vector: i64,
    },
    HrtimerStart {
        hrtimer: Cow<'a, str>,
        function: Cow<'a, str>,
        expires: u64,
    },
    HrtimerExpireEntry {
        hrtimer: Cow<'a, str>,
        function: Cow<'a, str>,
        now: u64,
    },
    HrtimerExpireExit {
        hrtimer: Cow<'a, str>,
    },
    /// `sched_pi_setprio`: priority inheritance changed `task`'s priority from `task.prio` to
    /// `newprio` (a boost when lower: a task of that priority waits for a lock `task` holds;
    /// recorded in the waiter's context when it blocks, in the owner's when it unlocks).
    SchedPiSetprio {
        task: TaskRef<'a>,
        newprio: i64,
    },
    /// `nmi:nmi_handler`: recorded at the end of the handler, with its duration.
    Nmi {
        handler: Cow<'a, str>,
        delta_ns: u64,
    },
    /// A `trace_marker` write (`tracing_mark_write: TEXT` or `print: tracing_mark_write: TEXT`).
    Marker {
        text: Cow<'a, str>,
    },
    Other {
        name: Cow<'a, str>,
    },
}

impl EventKind<'_> {
    /// The same event kind with every string owned.
    pub fn into_owned(self) -> EventKind<'static> {
        use EventKind as K;
        match self {
            K::SchedSwitch {
                prev,
                prev_state,
                next,
            } => K::SchedSwitch {
                prev: prev.into_owned(),
                prev_state: own(prev_state),
                next: next.into_owned(),
            },
            K::SchedWaking { task, target_cpu } => K::SchedWaking {
                task: task.into_owned(),
                target_cpu,
            },
            K::SchedWakeup { task, target_cpu } => K::SchedWakeup {
                task: task.into_owned(),
                target_cpu,
            },
            K::IrqEntry { irq, name } => K::IrqEntry {
                irq,
                name: own(name),
            },
            K::IrqExit { irq } => K::IrqExit { irq },
            K::SoftirqEntry { vec, name } => K::SoftirqEntry {
                vec,
                name: own(name),
            },
            K::SoftirqExit { vec, name } => K::SoftirqExit {
                vec,
                name: own(name),
            },
            K::VectorEntry { name, vector } => K::VectorEntry {
                name: own(name),
                vector,
            },
            K::VectorExit { name, vector } => K::VectorExit {
                name: own(name),
                vector,
            },
            K::HrtimerStart {
                hrtimer,
                function,
                expires,
            } => K::HrtimerStart {
                hrtimer: own(hrtimer),
                function: own(function),
                expires,
            },
            K::HrtimerExpireEntry {
                hrtimer,
                function,
                now,
            } => K::HrtimerExpireEntry {
                hrtimer: own(hrtimer),
                function: own(function),
                now,
            },
            K::HrtimerExpireExit { hrtimer } => K::HrtimerExpireExit {
                hrtimer: own(hrtimer),
            },
            K::SchedPiSetprio { task, newprio } => K::SchedPiSetprio {
                task: task.into_owned(),
                newprio,
            },
            K::Nmi { handler, delta_ns } => K::Nmi {
                handler: own(handler),
                delta_ns,
            },
            K::Marker { text } => K::Marker { text: own(text) },
            K::Other { name } => K::Other { name: own(name) },
        }
    }
}

/// One trace event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event<'a> {
    /// 1-based line where the event starts.
    pub line: usize,
    pub cpu: u32,
    /// Timestamp in ns on the trace clock (`mono` = CLOCK_MONOTONIC in latlab's instances).
    pub ts: u64,
    /// TASK column (looked up at read time: may be stale or `<...>`).
    pub task_comm: Cow<'a, str>,
    /// PID column (exact).
    pub pid: i64,
    pub flags: Flags,
    pub kind: EventKind<'a>,
}

impl Event<'_> {
    /// The same event with every string owned.
    pub fn into_owned(self) -> Event<'static> {
        Event {
            line: self.line,
            cpu: self.cpu,
            ts: self.ts,
            task_comm: own(self.task_comm),
            pid: self.pid,
            flags: self.flags,
            kind: self.kind.into_owned(),
        }
    }
}

fn own(c: Cow<'_, str>) -> Cow<'static, str> {
    Cow::Owned(c.into_owned())
}

/// `key=value` lookup in a body where values have no spaces (tokens split on spaces; a
/// leading `[` as in `[action=SCHED]` is allowed).
fn kv<'a>(body: &'a str, key: &str) -> Option<&'a str> {
    // Same answer as splitting on ' ' and taking the first token `key=…` (or `[key=…`), found
    // from the '=' signs instead: no per-token work.
    let (b, k) = (body.as_bytes(), key.as_bytes());
    // Bodies are short: a plain loop beats memchr's set-up here.
    for eq in (0..b.len()).filter(|&i| b[i] == b'=') {
        let Some(at) = eq.checked_sub(k.len()) else {
            continue;
        };
        if !eq_short(&b[at..eq], k) {
            continue;
        }
        let boundary =
            at == 0 || b[at - 1] == b' ' || (b[at - 1] == b'[' && (at == 1 || b[at - 2] == b' '));
        if !boundary {
            continue;
        }
        let end = b[eq + 1..]
            .iter()
            .position(|&c| c == b' ')
            .map_or(b.len(), |p| eq + 1 + p);
        let v = &body[eq + 1..end];
        return Some(v.strip_suffix(']').unwrap_or(v));
    }
    None
}

/// Reads a body's `key=value` fields in the order the kernel prints them (the fast path), and
/// answers exactly as [`kv`] on the whole body whenever the next token is not the key asked
/// for. Values have no spaces, so a key found as the next token is also its first occurrence.
struct Fields<'a> {
    whole: &'a str,
    rest: &'a str,
}

impl<'a> Fields<'a> {
    fn new(body: &'a str) -> Fields<'a> {
        Fields {
            whole: body,
            rest: body,
        }
    }

    fn get(&mut self, key: &str) -> Option<&'a str> {
        let r = self.rest.strip_prefix('[').unwrap_or(self.rest);
        if let Some(v) = strip(r, key).and_then(|v| v.strip_prefix('=')) {
            let end = find_byte(v.as_bytes(), b' ').unwrap_or(v.len());
            self.rest = &v[end..];
            self.rest = self.rest.strip_prefix(' ').unwrap_or(self.rest);
            let v = &v[..end];
            return Some(v.strip_suffix(']').unwrap_or(v));
        }
        kv(self.whole, key)
    }

    fn str(&mut self, key: &str) -> Result<&'a str, String> {
        self.get(key).ok_or_else(|| format!("no {key}= field"))
    }

    fn i(&mut self, key: &str) -> Result<i64, String> {
        let v = self.str(key)?;
        parse_i64(v).ok_or_else(|| format!("{key}={v:?} is not an integer"))
    }

    fn u(&mut self, key: &str) -> Result<u64, String> {
        let v = self.str(key)?;
        parse_u64(v).ok_or_else(|| format!("{key}={v:?} is not an integer"))
    }
}

/// `prev_comm=A B prev_pid=…`: the comm is what lies between `X=` and the LAST ` next_key=`.
fn comm_between<'a>(
    s: &'a str,
    start_key: &str,
    end_key: &str,
) -> Result<(&'a str, &'a str), String> {
    let v = strip(s, start_key).ok_or_else(|| format!("expected {start_key}"))?;
    let p = rfind_sub(v, end_key).ok_or_else(|| format!("no{end_key}field"))?;
    Ok((&v[..p], &v[p + 1..]))
}

/// trace-cmd's compact task: `comm:pid [prio]` (comm may hold ':').
fn compact_task(s: &str) -> Result<TaskRef<'_>, String> {
    let s = s.trim();
    let open = rfind_sub(s, " [").ok_or("expected 'comm:pid [prio]'")?;
    let prio = s[open + 2..]
        .trim_end()
        .strip_suffix(']')
        .and_then(parse_i64)
        .ok_or("bad [prio]")?;
    let cp = &s[..open];
    let colon = cp.rfind(':').ok_or("expected comm:pid")?;
    let pid = parse_i64(&cp[colon + 1..]).ok_or("bad pid")?;
    Ok(TaskRef {
        comm: Cow::Borrowed(&cp[..colon]),
        pid,
        prio,
    })
}

fn strip_fn(f: &str) -> &str {
    f.split('/').next().unwrap_or(f)
}

/// `find_sub(body, " ==> ")`, searching for the rare '>' instead of the many spaces.
fn find_arrow(body: &str) -> Option<usize> {
    let b = body.as_bytes();
    let mut i = 0;
    while let Some(p) = memchr::memchr(b'>', &b[i..]) {
        let gt = i + p;
        if gt >= 3 && b.get(gt - 3..gt + 2) == Some(b" ==> ") {
            return Some(gt - 3);
        }
        i = gt + 1;
    }
    None
}

/// The kernel's sched_switch body read backwards from its fixed layout, `prev_comm=A
/// prev_pid=N prev_prio=P prev_state=S ==> next_comm=B next_pid=N next_prio=P` with plain
/// digits and a state without spaces, in one pass and no search but the arrow's. None for
/// anything else; where it answers, [`parse_switch`] answers the same (the field after each
/// key found here holds no later copy of the key, so it is the last one the general parser
/// takes; `fast_paths_agree_with_the_general_parser` checks it on arbitrary bodies).
#[inline]
fn fast_switch(body: &str) -> Option<EventKind<'_>> {
    let b = body.as_bytes();
    let p = find_arrow(body)?;
    let (l, r) = (&b[..p], &b[p + 5..]);
    const NC: &[u8] = b"next_comm=";
    const PC: &[u8] = b"prev_comm=";
    if r.len() < NC.len() || !eq_short(&r[..NC.len()], NC) {
        return None;
    }
    if l.len() < PC.len() || !eq_short(&l[..PC.len()], PC) {
        return None;
    }
    let (k4, next_prio) = digits_back(r, r.len(), b" next_prio=")?;
    let (k3, next_pid) = digits_back(r, k4, b" next_pid=")?;
    if k3 < NC.len() {
        return None;
    }
    let sp = l.iter().rposition(|&c| c == b' ')?;
    const PS: &[u8] = b" prev_state=";
    if l.len() - sp < PS.len() || !eq_short(&l[sp..sp + PS.len()], PS) {
        return None;
    }
    let state = &body[sp + PS.len()..p];
    let (k2, prev_prio) = digits_back(l, sp, b" prev_prio=")?;
    let (k1, prev_pid) = digits_back(l, k2, b" prev_pid=")?;
    if k1 < PC.len() {
        return None;
    }
    Some(EventKind::SchedSwitch {
        prev: TaskRef {
            comm: Cow::Borrowed(&body[PC.len()..k1]),
            pid: prev_pid,
            prio: prev_prio,
        },
        prev_state: Cow::Borrowed(state.strip_suffix(']').unwrap_or(state)),
        next: TaskRef {
            comm: Cow::Borrowed(&body[p + 5 + NC.len()..p + 5 + k3]),
            pid: next_pid,
            prio: next_prio,
        },
    })
}

fn parse_switch(body: &str) -> Result<EventKind<'_>, String> {
    let p = find_arrow(body).ok_or("sched_switch without ' ==> '")?;
    let (l, r) = (&body[..p], &body[p + 5..]);
    if strip(l, "prev_comm=").is_some() {
        let (pc, lrest) = comm_between(l, "prev_comm=", " prev_pid=")?;
        let (nc, rrest) = comm_between(r, "next_comm=", " next_pid=")?;
        let mut lf = Fields::new(lrest);
        let mut rf = Fields::new(rrest);
        Ok(EventKind::SchedSwitch {
            prev: TaskRef {
                comm: Cow::Borrowed(pc),
                pid: lf.i("prev_pid")?,
                prio: lf.i("prev_prio")?,
            },
            prev_state: Cow::Borrowed(lf.get("prev_state").ok_or("no prev_state")?),
            next: TaskRef {
                comm: Cow::Borrowed(nc),
                pid: rf.i("next_pid")?,
                prio: rf.i("next_prio")?,
            },
        })
    } else {
        // trace-cmd: `rust-lld:15780 [120] R ==> python3:15520 [19]`
        let l = l.trim_end();
        let sp = l.rfind(' ').ok_or("bad sched_switch")?;
        Ok(EventKind::SchedSwitch {
            prev: compact_task(&l[..sp])?,
            prev_state: Cow::Borrowed(&l[sp + 1..]),
            next: compact_task(r)?,
        })
    }
}

/// The kernel's sched_waking/sched_wakeup body, `comm=C pid=N prio=P target_cpu=T`, read
/// backwards as [`fast_switch`]; where it answers, [`parse_wake`] answers the same.
#[inline]
fn fast_wake(body: &str) -> Option<(TaskRef<'_>, Option<u32>)> {
    let b = body.as_bytes();
    const C: &[u8] = b"comm=";
    if b.len() < C.len() || !eq_short(&b[..C.len()], C) {
        return None;
    }
    let (k3, cpu) = digits_back(b, b.len(), b" target_cpu=")?;
    let (k2, prio) = digits_back(b, k3, b" prio=")?;
    let (k1, pid) = digits_back(b, k2, b" pid=")?;
    if k1 < C.len() {
        return None;
    }
    Some((
        TaskRef {
            comm: Cow::Borrowed(&body[C.len()..k1]),
            pid,
            prio,
        },
        u32::try_from(cpu).ok(),
    ))
}

fn parse_wake(body: &str) -> Result<(TaskRef<'_>, Option<u32>), String> {
    if strip(body, "comm=").is_some() {
        let (c, rest) = comm_between(body, "comm=", " pid=")?;
        let mut f = Fields::new(rest);
        Ok((
            TaskRef {
                comm: Cow::Borrowed(c),
                pid: f.i("pid")?,
                prio: f.i("prio")?,
            },
            f.get("target_cpu").and_then(|v| v.parse().ok()),
        ))
    } else {
        // trace-cmd: `python3:15520 [19] CPU:001`
        let (t, cpu) = match rfind_sub(body, " CPU:") {
            Some(p) => (&body[..p], body[p + 5..].trim().parse().ok()),
            None => (body, None),
        };
        Ok((compact_task(t)?, cpu))
    }
}

/// The event names the parser reads a body of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Name {
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
fn sched_name(rest: &str) -> Option<(Name, &str, &str)> {
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
fn name_and_body(rest: &str) -> Result<(Name, &str, &str), String> {
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
pub(super) fn event_from(line: usize, text: &str) -> Result<Event<'_>, String> {
    let a = anchor(text).ok_or("no ' [CPU] FLAGS TIMESTAMP: ' anchor")?;
    event_at(line, text, a)
}

pub(super) fn event_at(line: usize, text: &str, a: Anchor) -> Result<Event<'_>, String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::bytes::find_sub;

    #[test]
    fn substring_search() {
        for (h, n) in [
            ("a ==> b ==> c", " ==> "),
            ("xyz", "q"),
            ("prev_pid=1 prev_pid=2", " prev_pid="),
            ("", "a"),
            ("aaa", "aa"),
        ] {
            assert_eq!(find_sub(h, n), h.find(n), "{h} {n}");
            assert_eq!(find_arrow(h), h.find(" ==> "), "{h}");
            assert_eq!(rfind_sub(h, n), h.rfind(n), "{h} {n}");
        }
    }

    /// The fast paths take the kernel's own lines (else they would only cost a check).
    /// The kernel's `sched_pi_setprio` line (6.1 and 6.12 print the same), a comm with a
    /// blank too.
    #[test]
    fn sched_pi_setprio_is_read() {
        for (comm, line) in [
            ("pi-low", "          pi-high-812     [001] d..2.    96.101706: sched_pi_setprio: comm=pi-low pid=811 oldprio=120 newprio=2"),
            ("a b", "          pi-high-812     [001] d..2.    96.101706: sched_pi_setprio: comm=a b pid=811 oldprio=120 newprio=2"),
        ] {
            let e = event_from(1, line).unwrap();
            assert_eq!(e.pid, 812);
            assert_eq!(
                e.kind,
                EventKind::SchedPiSetprio {
                    task: TaskRef {
                        comm: comm.into(),
                        pid: 811,
                        prio: 120
                    },
                    newprio: 2
                }
            );
        }
    }

    #[test]
    fn fast_paths_take_kernel_lines() {
        let sw = "prev_comm=kworker/0:1 H prev_pid=14951 prev_prio=120 prev_state=R+ ==> next_comm=latlab-m0 next_pid=7 next_prio=19";
        let k = fast_switch(sw).expect("kernel sched_switch body");
        assert_eq!(Ok(k.clone()), parse_switch(sw));
        assert!(
            matches!(k, EventKind::SchedSwitch { ref prev, ref next, .. } if prev.comm == "kworker/0:1 H" && next.pid == 7)
        );
        let col = "       hackbench-14951  ";
        assert_eq!(fixed_task(col), Some(("hackbench", 14951)));
        assert_eq!(fixed_task(col), Some(split_task(col)));
        let wk = "comm=hackbench pid=14963 prio=120 target_cpu=001";
        let w = fast_wake(wk).expect("kernel sched_waking body");
        assert_eq!(w.1, Some(1));
        assert_eq!(Ok(w), parse_wake(wk));
    }

    proptest::proptest! {
        #[test]
        fn fast_paths_agree_with_the_general_parser(
            parts in proptest::collection::vec(
                proptest::sample::select(vec![
                    "prev_comm=", "next_comm=", "comm=", " prev_pid=", " prev_prio=",
                    " prev_state=", " next_pid=", " next_prio=", " pid=", " prio=",
                    " target_cpu=", " ==> ", " ", "=", "]", "[", "-", "0", "7", "120",
                    "99999999999999999999", "R+", "S", "a b", "==>", ">",
                ]),
                0..16,
            )
        ) {
            let body: String = parts.concat();
            if let Some(k) = fast_switch(&body) {
                proptest::prop_assert_eq!(Ok(k), parse_switch(&body), "{:?}", body);
            }
            if let Some(w) = fast_wake(&body) {
                proptest::prop_assert_eq!(Ok(w), parse_wake(&body), "{:?}", body);
            }
        }

        #[test]
        fn fast_paths_agree_on_kernel_shaped_bodies(
            f in proptest::collection::vec(
                proptest::sample::select(vec![
                    "hackbench", "", "a b", "x ==> y", " prev_pid=1", "]", "S]", "p prev_state=S",
                    " next_pid=2", " pid=3 prio=4", "0", "120", "-1", "007",
                    "9999999999999999999", "R+", " target_cpu=1", "==>", " ==> next_comm=z",
                ]),
                7,
            )
        ) {
            let sw = format!(
                "prev_comm={} prev_pid={} prev_prio={} prev_state={} ==> next_comm={} next_pid={} next_prio={}",
                f[0], f[1], f[2], f[3], f[4], f[5], f[6]
            );
            if let Some(k) = fast_switch(&sw) {
                proptest::prop_assert_eq!(Ok(k), parse_switch(&sw), "{:?}", sw);
            }
            let wk = format!("comm={} pid={} prio={} target_cpu={}", f[0], f[1], f[2], f[3]);
            if let Some(w) = fast_wake(&wk) {
                proptest::prop_assert_eq!(Ok(w), parse_wake(&wk), "{:?}", wk);
            }
        }

        #[test]
        fn sched_name_fast_path_is_the_general_split(
            name in proptest::sample::select(vec!["sched_switch", "sched_waking", "sched_wakeup", "sched_wakeup_new", "sched_wakeupx", "sched_foobar", "sched_switc"]),
            sep in proptest::sample::select(vec![": ", ":  ", ":", ": \t", " : "]),
            body in proptest::sample::select(vec!["comm=x pid=3 prio=120 target_cpu=001", "a: b", ""]),
            tail in proptest::sample::select(vec!["", "\r", "\n", "\r\n", " "]),
        ) {
            let rest = format!("{name}{sep}{body}{tail}");
            if let Some(fast) = sched_name(&rest) {
                proptest::prop_assert_eq!(Ok(fast), name_and_body(&rest), "{:?}", rest);
            }
        }
    }
}
