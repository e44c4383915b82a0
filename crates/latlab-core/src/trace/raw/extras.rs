//! What a trace.dat window holds beyond the typed events: `sched_migrate_task` with its fields
//! (read from its own format file: the decoder does not type it) and where the kernel lost
//! events on each CPU, between which events. For `latlab export --format perfetto`.

use std::borrow::Cow;

use super::{bytes, decoder_for, int, parse_format, RawError, RawItem, F};
use crate::trace::tracedat::TraceDat;
use crate::trace::EventKind;

/// One `sched_migrate_task`: `pid` moved from `orig_cpu` to `dest_cpu`, recorded at `ts` in
/// the buffer of `cpu`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migration {
    pub cpu: u32,
    pub ts: u64,
    pub comm: String,
    pub pid: i64,
    pub prio: i64,
    pub orig_cpu: i64,
    pub dest_cpu: i64,
}

/// Events the kernel lost on `cpu` (`events`: None when the page does not say how many),
/// between the event at `after_ns` (None: before the first) and the one at `before_ns` (None:
/// after the last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostGap {
    pub cpu: u32,
    pub after_ns: Option<u64>,
    pub before_ns: Option<u64>,
    pub events: Option<u64>,
}

/// The migrations and the lost-event gaps of `dat`, CPU by CPU in the file's order. A file
/// whose `sched_migrate_task` format lacks the fields gives no migrations (not an error).
pub fn migrations_and_gaps(dat: &TraceDat) -> Result<(Vec<Migration>, Vec<LostGap>), RawError> {
    let (dec, comms) = decoder_for(dat)?;
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let fields = dat
        .event_formats
        .iter()
        .flat_map(|(_, f)| f.iter())
        .filter_map(|f| parse_format(&text(f)).ok())
        .find(|f| f.name == "sched_migrate_task")
        .and_then(|f| {
            let g = |n: &str| f.field(n).map(F::from);
            Some((
                g("comm")?,
                g("pid")?,
                g("prio")?,
                g("orig_cpu")?,
                g("dest_cpu")?,
            ))
        });
    let (mut migrations, mut gaps) = (Vec::new(), Vec::new());
    for c in &dat.cpus {
        let mut last: Option<u64> = None;
        let mut pending: Option<Option<u64>> = None;
        dec.for_each(c.cpu, &c.pages, &comms, |item| match item {
            RawItem::Lost(n) => {
                // Several marks before one event: one gap, the counts summed (unknown wins).
                pending = Some(match pending {
                    None => n,
                    Some(p) => p.zip(n).map(|(a, b)| a.saturating_add(b)),
                });
            }
            RawItem::Event(e, data) => {
                if let Some(n) = pending.take() {
                    gaps.push(LostGap {
                        cpu: c.cpu,
                        after_ns: last,
                        before_ns: Some(e.ts),
                        events: n,
                    });
                }
                last = Some(e.ts);
                let is_migrate =
                    matches!(&e.kind, EventKind::Other { name } if name == "sched_migrate_task");
                if let (true, Some((comm, pid, prio, orig, dest))) = (is_migrate, &fields) {
                    let m = (|| {
                        Some(Migration {
                            cpu: c.cpu,
                            ts: e.ts,
                            comm: bytes(data, comm)
                                .map(String::from_utf8_lossy)
                                .map(Cow::into_owned)?,
                            pid: int(data, pid)?,
                            prio: int(data, prio)?,
                            orig_cpu: int(data, orig)?,
                            dest_cpu: int(data, dest)?,
                        })
                    })();
                    migrations.extend(m);
                }
            }
        })?;
        if let Some(n) = pending {
            gaps.push(LostGap {
                cpu: c.cpu,
                after_ns: last,
                before_ns: None,
                events: n,
            });
        }
    }
    Ok((migrations, gaps))
}
