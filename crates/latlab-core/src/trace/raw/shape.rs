//! What the decoder makes of each event format: its shape (the fields its kind needs,
//! located and checked) and the common fields.

use super::{err, EventFormat, Field, FieldKind, RawError};

/// A field, located: where and how to read it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct F {
    pub(super) off: usize,
    pub(super) size: usize,
    pub(super) signed: bool,
    pub(super) kind: FieldKind,
}

impl From<&Field> for F {
    fn from(f: &Field) -> F {
        F {
            off: f.offset,
            size: f.size,
            signed: f.signed,
            kind: f.kind,
        }
    }
}

/// What the decoder makes of an event, by its name and fields.
#[derive(Debug, Clone)]
pub(super) enum Shape {
    Switch {
        prev_comm: F,
        prev_pid: F,
        prev_prio: F,
        prev_state: F,
        next_comm: F,
        next_pid: F,
        next_prio: F,
        /// The state bits that have letters, and the "preempted" (`+`) bit.
        mask: u64,
        plus: u64,
    },
    Wake {
        wakeup: bool,
        comm: F,
        pid: F,
        prio: F,
        target_cpu: Option<F>,
    },
    IrqEntry {
        irq: F,
        name: F,
    },
    IrqExit {
        irq: F,
        ret: Option<F>,
    },
    Softirq {
        entry: bool,
        vec: F,
    },
    Vector {
        entry: bool,
        base: String,
        vector: F,
    },
    HrStart {
        hrtimer: F,
        function: F,
        expires: F,
        softexpires: Option<F>,
        mode: Option<F>,
        /// `was_armed` (6.1 stable and later): the timer was queued before this start.
        was_armed: Option<F>,
    },
    HrExpireEntry {
        hrtimer: F,
        function: F,
        now: F,
    },
    HrExpireExit {
        hrtimer: F,
    },
    Nmi {
        handler: F,
        delta_ns: F,
        handled: Option<F>,
    },
    PiSetprio {
        comm: F,
        pid: F,
        oldprio: F,
        newprio: F,
    },
    Print {
        buf: F,
    },
    Other,
}

/// One event's format with its shape and common fields.
#[derive(Debug, Clone)]
pub(crate) struct Known {
    pub(super) fmt: EventFormat,
    pub(super) shape: Shape,
    pub(super) flags: F,
    pub(super) preempt: F,
    pub(super) pid: F,
    /// `common_preempt_lazy_count` (PREEMPT_RT before 6.12): the flags column has seven
    /// columns ([`super::flag_chars_rt_lazy`]).
    pub(super) lazy: Option<F>,
    /// State strings of sched_switch, by `state & (mask | plus)` (at most 512).
    pub(super) states: Vec<String>,
    /// A scheduler event (switch or wake-up) whose fields all lie at fixed places (integers
    /// of 1, 2, 4 or 8 bytes, names of fixed size): the record length from which every one is
    /// inside the record ([`fixed_len`]).
    pub(super) fixed_len: Option<usize>,
}

/// The length a record of a switch or wake-up `shape` (common fields `common`) needs for all
/// its fields to lie inside it, when each lies at a fixed place: then a record decodes when it
/// is that long (and, a switch, its state has a text). None for other shapes, and for fields
/// of other sizes or kinds (their reads say).
fn fixed_len(shape: &Shape, common: &[Option<F>]) -> Option<usize> {
    let fields: Vec<Option<F>> = match shape {
        Shape::Switch {
            prev_comm,
            prev_pid,
            prev_prio,
            prev_state,
            next_comm,
            next_pid,
            next_prio,
            ..
        } => [
            prev_comm, prev_pid, prev_prio, prev_state, next_comm, next_pid, next_prio,
        ]
        .map(|f| Some(*f))
        .to_vec(),
        Shape::Wake {
            comm,
            pid,
            prio,
            target_cpu,
            ..
        } => vec![Some(*comm), Some(*pid), Some(*prio), *target_cpu],
        _ => return None,
    };
    let fixed = |f: &F| match f.kind {
        FieldKind::Int => matches!(f.size, 1 | 2 | 4 | 8),
        FieldKind::Chars => true,
        _ => false,
    };
    let all: Vec<F> = fields.iter().chain(common).flatten().copied().collect();
    if !all.iter().all(fixed) {
        return None;
    }
    all.iter()
        .try_fold(0, |n: usize, f| Some(n.max(f.off.checked_add(f.size)?)))
}

/// Event names the text parser reads a body of: a format of that name must have the fields
/// the decoder needs (else the binary and the text paths would not agree).
pub(super) const PARSER_NAMES: &[&str] = &[
    "sched_switch",
    "sched_waking",
    "sched_wakeup",
    "sched_wakeup_new",
    "irq_handler_entry",
    "irq_handler_exit",
    "softirq_entry",
    "softirq_exit",
    "hrtimer_start",
    "hrtimer_expire_entry",
    "hrtimer_expire_exit",
    "nmi_handler",
    "sched_pi_setprio",
    "tracing_mark_write",
    "print",
];

/// The shape of `fmt`: the fields its kind needs, checked.
pub(super) fn known(fmt: EventFormat) -> Result<Known, RawError> {
    let name = fmt.name.clone();
    if name.is_empty()
        || name.len() > 64
        || !name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
    {
        return Err(err(format!("event name {name:?}")));
    }
    let need = |n: &str, kind: FieldKind| -> Result<F, RawError> {
        let f = fmt
            .field(n)
            .ok_or_else(|| err(format!("format of {name}: no field {n}")))?;
        let ok = match kind {
            FieldKind::Chars => matches!(
                f.kind,
                FieldKind::Chars | FieldKind::DataLoc | FieldKind::Tail
            ),
            k => f.kind == k,
        };
        if !ok {
            return Err(err(format!("format of {name}: field {n} is {:?}", f.kind)));
        }
        Ok(F::from(f))
    };
    let opt = |n: &str| {
        fmt.field(n)
            .filter(|f| f.kind == FieldKind::Int)
            .map(F::from)
    };
    let (flags, preempt, pid) = (
        need("common_flags", FieldKind::Int)?,
        need("common_preempt_count", FieldKind::Int)?,
        need("common_pid", FieldKind::Int)?,
    );
    use FieldKind::{Chars, Int};
    let mut states = Vec::new();
    let own: Vec<&Field> = fmt
        .fields
        .iter()
        .filter(|f| !f.name.starts_with("common_"))
        .collect();
    let shape = match name.as_str() {
        "sched_switch" => {
            let (mask, plus, texts) = switch_states(&fmt)?;
            states = texts;
            Shape::Switch {
                prev_comm: need("prev_comm", Chars)?,
                prev_pid: need("prev_pid", Int)?,
                prev_prio: need("prev_prio", Int)?,
                prev_state: need("prev_state", Int)?,
                next_comm: need("next_comm", Chars)?,
                next_pid: need("next_pid", Int)?,
                next_prio: need("next_prio", Int)?,
                mask,
                plus,
            }
        }
        "sched_waking" | "sched_wakeup" | "sched_wakeup_new" => Shape::Wake {
            wakeup: name != "sched_waking",
            comm: need("comm", Chars)?,
            pid: need("pid", Int)?,
            prio: need("prio", Int)?,
            target_cpu: opt("target_cpu"),
        },
        "irq_handler_entry" => Shape::IrqEntry {
            irq: need("irq", Int)?,
            name: need("name", Chars)?,
        },
        "irq_handler_exit" => Shape::IrqExit {
            irq: need("irq", Int)?,
            ret: opt("ret"),
        },
        "softirq_entry" | "softirq_exit" => Shape::Softirq {
            entry: name == "softirq_entry",
            vec: need("vec", Int)?,
        },
        "hrtimer_start" => Shape::HrStart {
            hrtimer: need("hrtimer", Int)?,
            function: need("function", Int)?,
            expires: need("expires", Int)?,
            softexpires: opt("softexpires"),
            mode: opt("mode"),
            was_armed: opt("was_armed"),
        },
        "hrtimer_expire_entry" => Shape::HrExpireEntry {
            hrtimer: need("hrtimer", Int)?,
            function: need("function", Int)?,
            now: need("now", Int)?,
        },
        "hrtimer_expire_exit" => Shape::HrExpireExit {
            hrtimer: need("hrtimer", Int)?,
        },
        "sched_pi_setprio" => Shape::PiSetprio {
            comm: need("comm", Chars)?,
            pid: need("pid", Int)?,
            oldprio: need("oldprio", Int)?,
            newprio: need("newprio", Int)?,
        },
        "nmi_handler" => Shape::Nmi {
            handler: need("handler", Int)?,
            delta_ns: need("delta_ns", Int)?,
            handled: opt("handled"),
        },
        "print" => Shape::Print {
            buf: need("buf", Chars)?,
        },
        n if PARSER_NAMES.contains(&n) => {
            return Err(err(format!("event {n}: not decoded from binary")));
        }
        n if own.first().is_some_and(|f| f.name == "vector")
            && (n.ends_with("_entry") || n.ends_with("_exit")) =>
        {
            let entry = n.ends_with("_entry");
            let base = n
                .strip_suffix(if entry { "_entry" } else { "_exit" })
                .unwrap_or(n)
                .to_string();
            Shape::Vector {
                entry,
                base,
                vector: need("vector", Int)?,
            }
        }
        _ => Shape::Other,
    };
    let lazy = fmt
        .field("common_preempt_lazy_count")
        .filter(|f| f.kind == FieldKind::Int)
        .map(F::from);
    let fixed_len = fixed_len(&shape, &[Some(flags), Some(preempt), Some(pid), lazy]);
    Ok(Known {
        fmt,
        shape,
        flags,
        preempt,
        pid,
        lazy,
        states,
        fixed_len,
    })
}

/// sched_switch's `prev_state` texts by `state & (mask | plus)` (at most 4096), as the kernel
/// prints them: `(state & MASK) ? __print_flags(state & MASK, "|", {1,"S"} … {MAX,"I"}) :
/// "R"`, then `state & (MAX << 1) ? "+" : ""`: MASK = (MAX << 1) - 1. Returns the mask, the
/// `+` bit and the texts.
fn switch_states(fmt: &EventFormat) -> Result<(u64, u64, Vec<String>), RawError> {
    let mut states = Vec::new();
    let max = fmt.flags.iter().map(|&(v, _)| v).max().unwrap_or(0);
    if max == 0
        || max > 1 << 16
        || !fmt.print_fmt.contains(": \"R\"")
        || !fmt.print_fmt.contains("? \"+\" : \"\"")
    {
        return Err(err(
            "sched_switch: a prev_state print format latlab does not know",
        ));
    }
    let (mask, plus) = ((max << 1) - 1, max << 1);
    if mask | plus >= 1 << 12 {
        return Err(err("sched_switch: too many state bits"));
    }
    for v in 0..=(mask | plus) {
        let m = v & mask;
        let mut s = String::new();
        if m == 0 {
            s.push('R');
        } else {
            let mut left = m;
            for (flag, letter) in &fmt.flags {
                if *flag != 0 && left & flag == *flag {
                    if !s.is_empty() {
                        s.push('|');
                    }
                    s.push_str(letter);
                    left &= !flag;
                }
            }
            if left != 0 {
                if !s.is_empty() {
                    s.push('|');
                }
                s.push_str(&format!("0x{left:x}"));
            }
        }
        if v & plus != 0 {
            s.push('+');
        }
        states.push(s);
    }
    Ok((mask, plus, states))
}
