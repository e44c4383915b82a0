//! A record typed: the [`Event`] the text parser would give for its line.

use std::borrow::Cow;

use super::flags::flags_of;
use super::read::{has_str, int, string};
use super::{Comms, Known, RawDecoder, Shape, F};
use crate::trace::event::{Event, EventKind, TaskRef};

/// Where a record sits: its CPU, its time, and its ordinal among the events decoded (the
/// event's `line`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Slot {
    pub(super) cpu: u32,
    pub(super) ts: u64,
    pub(super) line: usize,
}

impl RawDecoder {
    /// One event: record `d` of format `k` at `at`. None when a field lies outside the record.
    pub(super) fn event<'a>(
        &'a self,
        k: &'a Known,
        d: &'a [u8],
        comms: &'a Comms,
        at: Slot,
    ) -> Option<Event<'a>> {
        self.event_named(k, d, |pid| comms.get(pid), at)
    }

    /// [`RawDecoder::event`] with the TASK column's name of a pid from `name`.
    #[inline]
    pub(super) fn event_named<'a>(
        &'a self,
        k: &'a Known,
        d: &'a [u8],
        name: impl FnOnce(i64) -> &'a str,
        at: Slot,
    ) -> Option<Event<'a>> {
        let Slot { cpu, ts, line } = at;
        let pid = int(d, &k.pid)?;
        let flags = int(d, &k.flags)? as u8;
        let preempt = int(d, &k.preempt)? as u8;
        let mut flags = flags_of(flags, preempt);
        if let Some(l) = &k.lazy {
            flags.lazy_depth = int(d, l)? as u8;
        }
        let kind = self.kind(k, d)?;
        Some(Event {
            line,
            cpu,
            ts,
            task_comm: Cow::Borrowed(name(pid)),
            pid,
            flags,
            kind,
        })
    }

    /// Whether [`RawDecoder::event_named`] decodes record `d` of format `k` (Some), told
    /// without building the event for the scheduler's events (nearly all of a busy trace): the
    /// same reads, no strings made.
    #[inline]
    pub(super) fn decodes(&self, k: &Known, d: &[u8], at: Slot) -> bool {
        if let Some(n) = k.fixed_len {
            // Every field at a fixed place: the record's length says, and a switch's state.
            return d.len() >= n
                && match &k.shape {
                    Shape::Switch {
                        prev_state,
                        mask,
                        plus,
                        ..
                    } => int(d, prev_state)
                        .is_some_and(|st| k.states.len() > (st as u64 & (mask | plus)) as usize),
                    _ => true,
                };
        }
        let ints = |fs: &[&F]| fs.iter().all(|f| int(d, f).is_some());
        let common = ints(&[&k.pid, &k.flags, &k.preempt])
            && k.lazy.as_ref().is_none_or(|l| int(d, l).is_some());
        match &k.shape {
            Shape::Switch {
                prev_comm,
                prev_pid,
                prev_prio,
                prev_state,
                next_comm,
                next_pid,
                next_prio,
                mask,
                plus,
            } => {
                common
                    && int(d, prev_state)
                        .is_some_and(|st| k.states.len() > (st as u64 & (mask | plus)) as usize)
                    && has_str(d, prev_comm)
                    && has_str(d, next_comm)
                    && ints(&[prev_pid, prev_prio, next_pid, next_prio])
            }
            Shape::Wake {
                comm,
                pid,
                prio,
                target_cpu,
                ..
            } => {
                common
                    && has_str(d, comm)
                    && ints(&[pid, prio])
                    && target_cpu.as_ref().is_none_or(|f| int(d, f).is_some())
            }
            _ => self.event_named(k, d, |_| "", at).is_some(),
        }
    }

    #[inline]
    fn kind<'a>(&'a self, k: &'a Known, d: &'a [u8]) -> Option<EventKind<'a>> {
        let task = |comm: &F, pid: &F, prio: &F| -> Option<TaskRef<'a>> {
            Some(TaskRef {
                comm: string(d, comm)?,
                pid: int(d, pid)?,
                prio: int(d, prio)?,
            })
        };
        Some(match &k.shape {
            Shape::Switch {
                prev_comm,
                prev_pid,
                prev_prio,
                prev_state,
                next_comm,
                next_pid,
                next_prio,
                mask,
                plus,
            } => {
                let st = int(d, prev_state)? as u64 & (mask | plus);
                EventKind::SchedSwitch {
                    prev: task(prev_comm, prev_pid, prev_prio)?,
                    prev_state: Cow::Borrowed(k.states.get(st as usize)?.as_str()),
                    next: task(next_comm, next_pid, next_prio)?,
                }
            }
            Shape::Wake {
                wakeup,
                comm,
                pid,
                prio,
                target_cpu,
            } => {
                let task = task(comm, pid, prio)?;
                let target_cpu = match target_cpu {
                    Some(f) => u32::try_from(int(d, f)?).ok(),
                    None => None,
                };
                if *wakeup {
                    EventKind::SchedWakeup { task, target_cpu }
                } else {
                    EventKind::SchedWaking { task, target_cpu }
                }
            }
            Shape::PiSetprio {
                comm,
                pid,
                oldprio,
                newprio,
            } => EventKind::SchedPiSetprio {
                task: task(comm, pid, oldprio)?,
                newprio: int(d, newprio)?,
            },
            Shape::IrqEntry { irq, name } => EventKind::IrqEntry {
                irq: int(d, irq)?,
                name: string(d, name)?,
            },
            Shape::IrqExit { irq, .. } => EventKind::IrqExit { irq: int(d, irq)? },
            Shape::Softirq { entry, vec } => {
                let vec = int(d, vec)?;
                let name = match k.fmt.symbols.iter().find(|(v, _)| *v == vec) {
                    Some((_, s)) => Cow::Borrowed(s.as_str()),
                    None => Cow::Owned(format!("0x{vec:x}")),
                };
                if *entry {
                    EventKind::SoftirqEntry { vec, name }
                } else {
                    EventKind::SoftirqExit { vec, name }
                }
            }
            Shape::Vector {
                entry,
                base,
                vector,
            } => {
                let (name, vector) = (Cow::Borrowed(base.as_str()), int(d, vector)?);
                if *entry {
                    EventKind::VectorEntry { name, vector }
                } else {
                    EventKind::VectorExit { name, vector }
                }
            }
            Shape::HrStart {
                hrtimer,
                function,
                expires,
                ..
            } => EventKind::HrtimerStart {
                hrtimer: Cow::Owned(self.pointer(int(d, hrtimer)? as u64)),
                function: self.symbol(int(d, function)? as u64),
                expires: int(d, expires)? as u64,
            },
            Shape::HrExpireEntry {
                hrtimer,
                function,
                now,
            } => EventKind::HrtimerExpireEntry {
                hrtimer: Cow::Owned(self.pointer(int(d, hrtimer)? as u64)),
                function: self.symbol(int(d, function)? as u64),
                now: int(d, now)? as u64,
            },
            Shape::HrExpireExit { hrtimer } => EventKind::HrtimerExpireExit {
                hrtimer: Cow::Owned(self.pointer(int(d, hrtimer)? as u64)),
            },
            Shape::Nmi {
                handler, delta_ns, ..
            } => EventKind::Nmi {
                handler: self.symbol(int(d, handler)? as u64),
                delta_ns: int(d, delta_ns)? as u64,
            },
            Shape::Print { buf } => EventKind::Marker {
                text: marker_text(string(d, buf)?),
            },
            Shape::Other => EventKind::Other {
                name: Cow::Borrowed(k.fmt.name.as_str()),
            },
        })
    }

    /// `%ps`: the symbol, else the address in hex.
    fn symbol(&self, addr: u64) -> Cow<'_, str> {
        match self.symbols.get(addr) {
            Some(s) => Cow::Borrowed(s),
            None => Cow::Owned(format!("0x{addr:x}")),
        }
    }

    /// `%p`: 16 hex digits, mixed with the key as the kernel hashes its pointers.
    fn pointer(&self, p: u64) -> String {
        format!("{:016x}", mix(p ^ self.pointer_key))
    }
}

/// splitmix64's finalizer: a bijection, so equal pointers stay equal.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
    z ^ (z >> 31)
}

/// A marker's text as the text parser reads it: leading blanks and the newline off.
fn marker_text(s: Cow<'_, str>) -> Cow<'_, str> {
    match s {
        Cow::Borrowed(b) => Cow::Borrowed(b.trim_ascii_start().trim_end_matches(['\r', '\n'])),
        Cow::Owned(o) => Cow::Owned(
            o.trim_ascii_start()
                .trim_end_matches(['\r', '\n'])
                .to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::super::pages::Item;
    use super::super::tests::{decoder, PAGES};
    use super::*;

    /// [`RawDecoder::decodes`] answers what decoding does, for the fixture's records cut
    /// short at every length and with their bytes scrambled (states beyond the table, string
    /// locations outside the record).
    #[test]
    fn decodes_is_whether_the_event_decodes() {
        let dec = decoder();
        let mut recs: Vec<&[u8]> = Vec::new();
        let mut stats = super::super::CpuStats::default();
        dec.walk(PAGES, &mut stats, |item, _| {
            if let Item::Event { data, .. } = item {
                recs.push(data);
            }
        })
        .expect("whole pages");
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let at = Slot {
            cpu: 0,
            ts: 0,
            line: 1,
        };
        // The scheduler's events answer by their length (their fields lie at fixed places).
        assert!(dec.known.iter().any(|k| k.fixed_len.is_some()));
        let (mut yes, mut no) = (0, 0);
        for (i, r) in recs.iter().enumerate().step_by(7) {
            let Some(k) = dec.known_of(r) else { continue };
            let mut variants: Vec<Vec<u8>> = (0..=r.len()).map(|n| r[..n].to_vec()).collect();
            for _ in 0..8 {
                let mut v = r.to_vec();
                // Keep the type (so the format), scramble the rest.
                for b in v.iter_mut().skip(2) {
                    if next() % 3 == 0 {
                        *b = next() as u8;
                    }
                }
                variants.push(v);
            }
            for v in &variants {
                let ok = dec.event(k, v, &Comms::default(), at).is_some();
                assert_eq!(dec.decodes(k, v, at), ok, "record {i}: {v:?}");
                if ok {
                    yes += 1;
                } else {
                    no += 1;
                }
            }
        }
        assert!(yes > 100 && no > 100, "{yes} {no}");
    }
}
