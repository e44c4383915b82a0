//! The scheduler events' bodies (`sched_switch`, `sched_waking`/`sched_wakeup`): the fast
//! paths that read the kernel's fixed layout backwards, each before its general twin.

use std::borrow::Cow;

use crate::trace::bytes::{digits_back, eq_short, rfind_sub, strip};

use super::fields::{comm_between, compact_task, find_arrow, Fields};
use super::{EventKind, TaskRef};

/// The kernel's sched_switch body read backwards from its fixed layout, `prev_comm=A
/// prev_pid=N prev_prio=P prev_state=S ==> next_comm=B next_pid=N next_prio=P` with plain
/// digits and a state without spaces, in one pass and no search but the arrow's. None for
/// anything else; where it answers, [`parse_switch`] answers the same (the field after each
/// key found here holds no later copy of the key, so it is the last one the general parser
/// takes; `fast_paths_agree_with_the_general_parser` checks it on arbitrary bodies).
#[inline]
pub(super) fn fast_switch(body: &str) -> Option<EventKind<'_>> {
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

pub(super) fn parse_switch(body: &str) -> Result<EventKind<'_>, String> {
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
pub(super) fn fast_wake(body: &str) -> Option<(TaskRef<'_>, Option<u32>)> {
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

pub(super) fn parse_wake(body: &str) -> Result<(TaskRef<'_>, Option<u32>), String> {
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
