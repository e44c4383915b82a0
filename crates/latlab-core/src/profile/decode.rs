//! Binary pages → [`PEvent`]s for the reconstruction, with the raw decoder of the recorder
//! ([`crate::trace::raw`]) and `sched_migrate_task`'s fields read from its own format file.

use std::collections::HashMap;

use super::{Ev, PEvent};
use crate::trace::raw::{
    parse_format, Comms, CpuStats, Field, FieldKind, RawDecoder, RawError, RawItem,
};
use crate::trace::EventKind;

/// Task names kept at most (the names of later pids are not kept).
pub const MAX_NAMES: usize = 1 << 16;

#[derive(Debug, Clone)]
struct Loc {
    off: usize,
    size: usize,
    signed: bool,
}

impl Loc {
    fn of(f: &Field) -> Option<Loc> {
        (f.kind == FieldKind::Int && matches!(f.size, 1 | 2 | 4 | 8)).then_some(Loc {
            off: f.offset,
            size: f.size,
            signed: f.signed,
        })
    }

    fn read(&self, d: &[u8]) -> Option<i64> {
        let s = d.get(self.off..self.off.checked_add(self.size)?)?;
        let mut b = [0u8; 8];
        let v = if cfg!(target_endian = "little") {
            b[..self.size].copy_from_slice(s);
            u64::from_le_bytes(b)
        } else {
            b[8 - self.size..].copy_from_slice(s);
            u64::from_be_bytes(b)
        };
        Some(if self.signed {
            let shift = 64 - 8 * self.size as u32;
            ((v << shift) as i64) >> shift
        } else {
            v as i64
        })
    }
}

/// Decodes a profile instance's pages.
pub struct StreamDecoder {
    dec: RawDecoder,
    /// `sched_migrate_task`: pid, orig_cpu, dest_cpu.
    migrate: Option<(Loc, Loc, Loc)>,
    /// `common_type` and the ID of `sched_wakeup_new` (told apart from `sched_wakeup`).
    wakeup_new: Option<(Loc, i64)>,
    comms: Comms,
    names: HashMap<i64, String>,
}

impl StreamDecoder {
    /// From the instance's `header_page`, `header_event` and its events' `format` texts.
    pub fn new(
        header_page: &str,
        header_event: &str,
        formats: &[&str],
    ) -> Result<StreamDecoder, RawError> {
        let dec = RawDecoder::new(header_page, header_event, formats)?;
        let mut migrate = None;
        let mut wakeup_new = None;
        for f in formats {
            let fmt = parse_format(f)?;
            if fmt.name == "sched_wakeup_new" {
                wakeup_new = fmt
                    .field("common_type")
                    .and_then(Loc::of)
                    .map(|l| (l, fmt.id as i64));
            }
            if fmt.name == "sched_migrate_task" {
                let loc = |n: &str| fmt.field(n).and_then(Loc::of);
                migrate = match (loc("pid"), loc("orig_cpu"), loc("dest_cpu")) {
                    (Some(a), Some(b), Some(c)) => Some((a, b, c)),
                    _ => {
                        return Err(RawError::new(
                            "sched_migrate_task: a format without pid, orig_cpu, dest_cpu",
                        ))
                    }
                };
            }
        }
        Ok(StreamDecoder {
            dec,
            migrate,
            wakeup_new,
            comms: Comms::default(),
            names: HashMap::new(),
        })
    }

    pub fn page_size(&self) -> usize {
        self.dec.page_size()
    }

    /// The name a pid had in its latest scheduler event (`<idle>` for 0, `<...>` unknown).
    pub fn name(&self, pid: i64) -> String {
        match pid {
            0 => "<idle>".into(),
            _ => self
                .names
                .get(&pid)
                .cloned()
                .unwrap_or_else(|| "<...>".into()),
        }
    }

    /// The names seen, for a trace.dat's `saved_cmdlines`.
    pub fn names(&self) -> Comms {
        let mut c = Comms::default();
        for (pid, n) in &self.names {
            c.learn(*pid, n);
        }
        c
    }

    /// Append the scheduler events of `cpu`'s `pages` to `out` (a loss marks the next event).
    /// `lost_pending` carries a loss at the end of one read to the next event of that CPU.
    pub fn decode(
        &mut self,
        cpu: u32,
        pages: &[u8],
        lost_pending: &mut bool,
        out: &mut Vec<PEvent>,
    ) -> Result<CpuStats, RawError> {
        let StreamDecoder {
            dec,
            migrate,
            wakeup_new,
            comms,
            names,
        } = self;
        let mut learn = |pid: i64, comm: &str| {
            if pid > 0 && (names.len() < MAX_NAMES || names.contains_key(&pid)) {
                match names.get_mut(&pid) {
                    Some(n) if n == comm => {}
                    Some(n) => *n = comm.to_string(),
                    None => {
                        names.insert(pid, comm.to_string());
                    }
                }
            }
        };
        dec.for_each(cpu, pages, comms, |item| {
            let (e, data) = match item {
                RawItem::Lost(_) => {
                    *lost_pending = true;
                    return;
                }
                RawItem::Event(e, d) => (e, d),
            };
            let ev = match &e.kind {
                EventKind::SchedSwitch {
                    prev,
                    prev_state,
                    next,
                } => {
                    learn(prev.pid, &prev.comm);
                    learn(next.pid, &next.comm);
                    Ev::Switch {
                        prev_pid: prev.pid,
                        prev_prio: prev.prio,
                        prev_runnable: matches!(prev_state.as_ref(), "R" | "R+"),
                        prev_dead: matches!(prev_state.as_ref(), "X" | "Z"),
                        next_pid: next.pid,
                        next_prio: next.prio,
                    }
                }
                EventKind::SchedWaking { task, .. } => {
                    learn(task.pid, &task.comm);
                    Ev::Waking { pid: task.pid }
                }
                EventKind::SchedWakeup { task, target_cpu } => {
                    learn(task.pid, &task.comm);
                    Ev::Wakeup {
                        pid: task.pid,
                        prio: task.prio,
                        target_cpu: *target_cpu,
                        new: wakeup_new
                            .as_ref()
                            .is_some_and(|(l, id)| l.read(data) == Some(*id)),
                    }
                }
                EventKind::Other { name } if name == "sched_migrate_task" => {
                    let Some((p, o, d)) = migrate.as_ref() else {
                        return;
                    };
                    match (p.read(data), o.read(data), d.read(data)) {
                        (Some(pid), Some(orig), Some(dest)) if orig >= 0 && dest >= 0 => {
                            Ev::Migrate {
                                pid,
                                orig: orig as u32,
                                dest: dest as u32,
                            }
                        }
                        _ => return,
                    }
                }
                _ => return,
            };
            out.push(PEvent {
                ts: e.ts,
                cpu,
                lost_before: std::mem::take(lost_pending),
                lost_after: false,
                ev,
            });
        })
    }
}
