//! Event bodies: the typed [`Event`] and [`EventKind`], and the parser of each event's body by
//! its keys (comms between known keys, never by token position).
//!
//! The three scheduler events (nearly every line of a busy trace) have fast paths that read
//! the kernel's fixed layout backwards: each sits right before its general twin
//! (`fast_switch` / `parse_switch`, `fast_wake` / `parse_wake`, `sched_name` /
//! `name_and_body`), and property tests (tests.rs) check that where a fast path answers, the
//! general parser answers the same.

use std::borrow::Cow;
use std::fmt;

use super::line::Flags;

mod fields;
mod parse;
mod sched;

pub(super) use parse::{event_at, event_from};

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
#[cfg(test)]
mod tests;
