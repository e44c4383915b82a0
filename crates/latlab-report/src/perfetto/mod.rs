//! Perfetto's protobuf trace (`latlab export --format perfetto`): the messages latlab writes,
//! by hand with prost's derive, with the field numbers of Perfetto's `.proto` definitions
//! (v51.1; the tests decode the output with those, `tests/fixtures/perfetto` of the `latlab`
//! crate, through `protoc --decode`). A `Trace` of `TracePacket`s: a `ProcessTree` naming the threads, one
//! `FtraceEventBundle` per CPU and window (sched_switch, sched_waking, sched_wakeup,
//! irq_handler_entry/exit, softirq_entry/exit, sched_migrate_task, markers as `print`), per
//! spike a slice (intended wake-up → clock read) on a "latlab spikes" track (`TrackEvent`), and
//! marks on tracks of their own ([`Mark`]: where the kernel lost events, per CPU, with the
//! counts as args).
//!
//! Times are the trace clock's (`mono` in latlab's instances: CLOCK_MONOTONIC ns), written
//! as they are; Perfetto shows them on its default clock, so offsets are exact and spikes and
//! events line up (same clock).

use std::collections::BTreeMap;

use latlab_core::trace::raw::Migration;
use latlab_core::trace::{Event, EventKind};
use prost::Message;

mod windows;
pub use windows::{profile_losses, spike, window_dat, window_text};

#[derive(Clone, PartialEq, Message)]
pub struct Trace {
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<TracePacket>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TracePacket {
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    #[prost(message, optional, tag = "1")]
    pub ftrace_events: Option<FtraceEventBundle>,
    #[prost(message, optional, tag = "2")]
    pub process_tree: Option<ProcessTree>,
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ProcessTree {
    #[prost(message, repeated, tag = "2")]
    pub threads: Vec<ProcessTreeThread>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ProcessTreeThread {
    #[prost(int32, optional, tag = "1")]
    pub tid: Option<i32>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct FtraceEventBundle {
    #[prost(uint32, optional, tag = "1")]
    pub cpu: Option<u32>,
    #[prost(message, repeated, tag = "2")]
    pub event: Vec<FtraceEvent>,
}

#[derive(Clone, PartialEq, Message)]
pub struct FtraceEvent {
    #[prost(uint64, optional, tag = "1")]
    pub timestamp: Option<u64>,
    #[prost(uint32, optional, tag = "2")]
    pub pid: Option<u32>,
    #[prost(message, optional, tag = "3")]
    pub print: Option<PrintFtraceEvent>,
    #[prost(message, optional, tag = "4")]
    pub sched_switch: Option<SchedSwitchFtraceEvent>,
    #[prost(message, optional, tag = "17")]
    pub sched_wakeup: Option<SchedWakeFtraceEvent>,
    #[prost(message, optional, tag = "20")]
    pub sched_waking: Option<SchedWakeFtraceEvent>,
    #[prost(message, optional, tag = "24")]
    pub softirq_entry: Option<SoftirqFtraceEvent>,
    #[prost(message, optional, tag = "25")]
    pub softirq_exit: Option<SoftirqFtraceEvent>,
    #[prost(message, optional, tag = "36")]
    pub irq_handler_entry: Option<IrqHandlerEntryFtraceEvent>,
    #[prost(message, optional, tag = "37")]
    pub irq_handler_exit: Option<IrqHandlerExitFtraceEvent>,
    #[prost(message, optional, tag = "491")]
    pub sched_migrate_task: Option<SchedMigrateTaskFtraceEvent>,
}

#[derive(Clone, PartialEq, Message)]
pub struct SchedMigrateTaskFtraceEvent {
    #[prost(string, optional, tag = "1")]
    pub comm: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub pid: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    pub prio: Option<i32>,
    #[prost(int32, optional, tag = "4")]
    pub orig_cpu: Option<i32>,
    #[prost(int32, optional, tag = "5")]
    pub dest_cpu: Option<i32>,
}

#[derive(Clone, PartialEq, Message)]
pub struct PrintFtraceEvent {
    #[prost(uint64, optional, tag = "1")]
    pub ip: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub buf: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct SchedSwitchFtraceEvent {
    #[prost(string, optional, tag = "1")]
    pub prev_comm: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub prev_pid: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    pub prev_prio: Option<i32>,
    #[prost(int64, optional, tag = "4")]
    pub prev_state: Option<i64>,
    #[prost(string, optional, tag = "5")]
    pub next_comm: Option<String>,
    #[prost(int32, optional, tag = "6")]
    pub next_pid: Option<i32>,
    #[prost(int32, optional, tag = "7")]
    pub next_prio: Option<i32>,
}

/// `SchedWakingFtraceEvent` and `SchedWakeupFtraceEvent` (the same fields).
#[derive(Clone, PartialEq, Message)]
pub struct SchedWakeFtraceEvent {
    #[prost(string, optional, tag = "1")]
    pub comm: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub pid: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    pub prio: Option<i32>,
    #[prost(int32, optional, tag = "4")]
    pub success: Option<i32>,
    #[prost(int32, optional, tag = "5")]
    pub target_cpu: Option<i32>,
}

#[derive(Clone, PartialEq, Message)]
pub struct SoftirqFtraceEvent {
    #[prost(uint32, optional, tag = "1")]
    pub vec: Option<u32>,
}

#[derive(Clone, PartialEq, Message)]
pub struct IrqHandlerEntryFtraceEvent {
    #[prost(int32, optional, tag = "1")]
    pub irq: Option<i32>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct IrqHandlerExitFtraceEvent {
    #[prost(int32, optional, tag = "1")]
    pub irq: Option<i32>,
    #[prost(int32, optional, tag = "2")]
    pub ret: Option<i32>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TrackDescriptor {
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TrackEvent {
    /// 1 = SLICE_BEGIN, 2 = SLICE_END, 3 = INSTANT.
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    #[prost(string, repeated, tag = "22")]
    pub categories: Vec<String>,
    #[prost(string, optional, tag = "23")]
    pub name: Option<String>,
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
}

/// A slice's arg (`DebugAnnotation`: a name and an unsigned or a string value).
#[derive(Clone, PartialEq, Message)]
pub struct DebugAnnotation {
    #[prost(string, optional, tag = "10")]
    pub name: Option<String>,
    #[prost(uint64, optional, tag = "3")]
    pub uint_value: Option<u64>,
    #[prost(string, optional, tag = "6")]
    pub string_value: Option<String>,
}

/// A value of a [`Mark`]'s arg.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    Uint(u64),
    Str(String),
}

/// A slice (or an instant, when it has no length) on a track of its own, by the track's name:
/// e.g. "CPU 1: events lost" from the last event before a loss to the first after it.
#[derive(Debug, Clone)]
pub struct Mark {
    pub track: String,
    pub begin_ns: u64,
    pub end_ns: u64,
    pub name: String,
    pub args: Vec<(String, Arg)>,
}

/// The first uuid of [`Mark`] tracks (one per track name, in order of first use).
pub const MARK_TRACKS: u64 = 0x1a71ac00;

/// The spikes' track.
pub const SPIKE_TRACK: u64 = 0x1a71ab;
const SEQ: u32 = 1;

/// A spike: the slice from its intended wake-up to its clock read.
#[derive(Debug, Clone)]
pub struct SpikeMark {
    pub name: String,
    pub cpu: u32,
    pub intended_ns: u64,
    pub actual_ns: u64,
}

/// The kernel's state bits of a `prev_state` text (`R`, `R+`, `S`, `D|K`, …), as the
/// sched_switch event stores it (6.x: `+` is TASK_REPORT_MAX, 0x100).
pub fn state_bits(s: &str) -> i64 {
    let mut v = 0i64;
    for part in s.split('|') {
        let (p, plus) = match part.strip_suffix('+') {
            Some(p) => (p, true),
            None => (part, false),
        };
        v |= match p {
            "S" => 0x1,
            "D" => 0x2,
            "T" => 0x4,
            "t" => 0x8,
            "X" => 0x10,
            "Z" => 0x20,
            "P" => 0x40,
            "I" => 0x80,
            _ => 0,
        };
        if plus {
            v |= 0x100;
        }
    }
    v
}

fn i32_of(v: i64) -> i32 {
    v.clamp(i32::MIN as i64, i32::MAX as i64) as i32
}

/// A `sched_migrate_task` (read by [`latlab_core::trace::raw::migrations_and_gaps`]) as
/// Perfetto's.
pub fn migrate_event(m: &Migration) -> FtraceEvent {
    FtraceEvent {
        timestamp: Some(m.ts),
        pid: Some(0),
        sched_migrate_task: Some(SchedMigrateTaskFtraceEvent {
            comm: Some(m.comm.clone()),
            pid: Some(i32_of(m.pid)),
            prio: Some(i32_of(m.prio)),
            orig_cpu: Some(i32_of(m.orig_cpu)),
            dest_cpu: Some(i32_of(m.dest_cpu)),
        }),
        ..Default::default()
    }
}

/// One ftrace event as Perfetto's, or None for a kind Perfetto's bundle does not get here.
pub fn ftrace_event(e: &Event) -> Option<FtraceEvent> {
    let mut f = FtraceEvent {
        timestamp: Some(e.ts),
        pid: Some(u32::try_from(e.pid).unwrap_or(0)),
        ..Default::default()
    };
    let wake = |t: &latlab_core::trace::TaskRef, cpu: &Option<u32>| SchedWakeFtraceEvent {
        comm: Some(t.comm.to_string()),
        pid: Some(i32_of(t.pid)),
        prio: Some(i32_of(t.prio)),
        success: Some(1),
        target_cpu: cpu.map(|c| c as i32),
    };
    match &e.kind {
        EventKind::SchedSwitch {
            prev,
            prev_state,
            next,
        } => {
            f.sched_switch = Some(SchedSwitchFtraceEvent {
                prev_comm: Some(prev.comm.to_string()),
                prev_pid: Some(i32_of(prev.pid)),
                prev_prio: Some(i32_of(prev.prio)),
                prev_state: Some(state_bits(prev_state)),
                next_comm: Some(next.comm.to_string()),
                next_pid: Some(i32_of(next.pid)),
                next_prio: Some(i32_of(next.prio)),
            })
        }
        EventKind::SchedWaking { task, target_cpu } => {
            f.sched_waking = Some(wake(task, target_cpu))
        }
        EventKind::SchedWakeup { task, target_cpu } => {
            f.sched_wakeup = Some(wake(task, target_cpu))
        }
        EventKind::IrqEntry { irq, name } => {
            f.irq_handler_entry = Some(IrqHandlerEntryFtraceEvent {
                irq: Some(i32_of(*irq)),
                name: Some(name.to_string()),
            })
        }
        EventKind::IrqExit { irq } => {
            f.irq_handler_exit = Some(IrqHandlerExitFtraceEvent {
                irq: Some(i32_of(*irq)),
                ret: Some(1),
            })
        }
        EventKind::SoftirqEntry { vec, .. } => {
            f.softirq_entry = Some(SoftirqFtraceEvent {
                vec: u32::try_from(*vec).ok(),
            })
        }
        EventKind::SoftirqExit { vec, .. } => {
            f.softirq_exit = Some(SoftirqFtraceEvent {
                vec: u32::try_from(*vec).ok(),
            })
        }
        EventKind::Marker { text } => {
            f.print = Some(PrintFtraceEvent {
                ip: Some(0),
                buf: Some(format!("{text}\n")),
            })
        }
        _ => return None,
    }
    Some(f)
}

/// Builds one trace from several windows (spike traces, a profile's window).
#[derive(Default)]
pub struct Builder {
    names: BTreeMap<i64, String>,
    bundles: Vec<TracePacket>,
    spikes: Vec<SpikeMark>,
    marks: Vec<Mark>,
    /// Events written, and left out (kinds Perfetto's bundle does not get from latlab).
    pub written: u64,
    pub skipped: u64,
}

impl Builder {
    /// A window's events (any CPU order): one bundle per CPU, in time order.
    pub fn window(&mut self, events: &[Event]) {
        self.window_with(events, &[])
    }

    /// [`Builder::window`] with the window's migrations, in the bundle of the CPU whose
    /// buffer recorded them, in time order with its other events.
    pub fn window_with(&mut self, events: &[Event], migrations: &[Migration]) {
        let mut by_cpu: BTreeMap<u32, Vec<FtraceEvent>> = BTreeMap::new();
        for m in migrations {
            self.name(m.pid, &m.comm);
            self.written += 1;
            by_cpu.entry(m.cpu).or_default().push(migrate_event(m));
        }
        let mut sorted: Vec<&Event> = events.iter().collect();
        // In time order: a thread's name is the last it had (a comm changes at exec).
        sorted.sort_by_key(|e| e.ts);
        for e in sorted {
            match &e.kind {
                EventKind::SchedSwitch { prev, next, .. } => {
                    self.name(prev.pid, &prev.comm);
                    self.name(next.pid, &next.comm);
                }
                EventKind::SchedWaking { task, .. } | EventKind::SchedWakeup { task, .. } => {
                    self.name(task.pid, &task.comm)
                }
                _ => {}
            }
            match ftrace_event(e) {
                Some(f) => {
                    self.written += 1;
                    by_cpu.entry(e.cpu).or_default().push(f);
                }
                None => self.skipped += 1,
            }
        }
        for (cpu, mut event) in by_cpu {
            // Stable: a CPU's own order is kept among events of one time.
            event.sort_by_key(|e| e.timestamp);
            self.bundles.push(TracePacket {
                trusted_packet_sequence_id: Some(SEQ + 1),
                ftrace_events: Some(FtraceEventBundle {
                    cpu: Some(cpu),
                    event,
                }),
                ..Default::default()
            });
        }
    }

    fn name(&mut self, pid: i64, comm: &str) {
        if pid > 0 && self.names.get(&pid).is_none_or(|n| n != comm) {
            self.names.insert(pid, comm.to_string());
        }
    }

    pub fn spike(&mut self, s: SpikeMark) {
        self.spikes.push(s);
    }

    pub fn mark(&mut self, m: Mark) {
        self.marks.push(m);
    }

    /// The trace's bytes.
    pub fn finish(self) -> Vec<u8> {
        let mut packet = Vec::new();
        packet.push(TracePacket {
            trusted_packet_sequence_id: Some(SEQ),
            sequence_flags: Some(1), // SEQ_INCREMENTAL_STATE_CLEARED
            track_descriptor: Some(TrackDescriptor {
                uuid: Some(SPIKE_TRACK),
                name: Some("latlab spikes".into()),
            }),
            ..Default::default()
        });
        packet.push(TracePacket {
            trusted_packet_sequence_id: Some(SEQ),
            process_tree: Some(ProcessTree {
                threads: self
                    .names
                    .iter()
                    .map(|(&pid, n)| ProcessTreeThread {
                        tid: Some(i32_of(pid)),
                        name: Some(n.clone()),
                    })
                    .collect(),
            }),
            ..Default::default()
        });
        packet.extend(self.bundles);
        let mut tracks: Vec<String> = Vec::new();
        for m in &self.marks {
            if !tracks.contains(&m.track) {
                tracks.push(m.track.clone());
            }
        }
        for (i, t) in tracks.iter().enumerate() {
            packet.push(TracePacket {
                trusted_packet_sequence_id: Some(SEQ),
                track_descriptor: Some(TrackDescriptor {
                    uuid: Some(MARK_TRACKS + i as u64),
                    name: Some(t.clone()),
                }),
                ..Default::default()
            });
        }
        let mut marks = self.marks;
        marks.sort_by_key(|m| (m.begin_ns, m.end_ns));
        for m in marks {
            let track = MARK_TRACKS + tracks.iter().position(|t| *t == m.track).unwrap_or(0) as u64;
            let args = m
                .args
                .iter()
                .map(|(k, v)| DebugAnnotation {
                    name: Some(k.clone()),
                    uint_value: match v {
                        Arg::Uint(u) => Some(*u),
                        Arg::Str(_) => None,
                    },
                    string_value: match v {
                        Arg::Str(s) => Some(s.clone()),
                        Arg::Uint(_) => None,
                    },
                })
                .collect();
            let ev = |ty: i32, name: Option<String>, debug_annotations| TrackEvent {
                r#type: Some(ty),
                track_uuid: Some(track),
                categories: vec!["latlab".into()],
                name,
                debug_annotations,
            };
            let mut push = |ts: u64, e: TrackEvent| {
                packet.push(TracePacket {
                    timestamp: Some(ts),
                    trusted_packet_sequence_id: Some(SEQ),
                    track_event: Some(e),
                    ..Default::default()
                })
            };
            if m.end_ns > m.begin_ns {
                push(m.begin_ns, ev(1, Some(m.name), args));
                push(m.end_ns, ev(2, None, vec![]));
            } else {
                push(m.begin_ns, ev(3, Some(m.name), args));
            }
        }
        let mut spikes = self.spikes;
        spikes.sort_by_key(|s| s.intended_ns);
        for s in spikes {
            for (ts, ty) in [(s.intended_ns, 1), (s.actual_ns.max(s.intended_ns), 2)] {
                packet.push(TracePacket {
                    timestamp: Some(ts),
                    trusted_packet_sequence_id: Some(SEQ),
                    track_event: Some(TrackEvent {
                        r#type: Some(ty),
                        track_uuid: Some(SPIKE_TRACK),
                        categories: vec!["latlab".into()],
                        name: (ty == 1).then(|| s.name.clone()),
                        debug_annotations: vec![],
                    }),
                    ..Default::default()
                });
            }
        }
        Trace { packet }.encode_to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_letters_to_bits() {
        assert_eq!(state_bits("R"), 0);
        assert_eq!(state_bits("R+"), 0x100);
        assert_eq!(state_bits("S"), 1);
        assert_eq!(state_bits("D|K"), 2);
        assert_eq!(state_bits("X"), 0x10);
    }
}
