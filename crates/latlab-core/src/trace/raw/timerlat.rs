//! The timerlat tracer's samples read straight from the ring's binary pages: the `timerlat`
//! ftrace entry (`events/ftrace/timerlat/format`: `seqnum`, `context`, `timer_latency`),
//! its fields read where the format says they lie, no [`super::Event`] built and nothing
//! formatted. What `latlab run --backend timerlat` reads while it measures.
//!
//! Each activation of a CPU's timer gives up to three samples with one `seqnum` (the kernel's
//! per-CPU activation count): the IRQ context (timer expiry → its handler), the thread context
//! (→ the measuring thread runs in the kernel) and, with user-space threads
//! (`osnoise/per_cpu/cpuN/timerlat_fd`), the return to user space, recorded when the thread
//! calls `read()` again.

use super::format::{parse_format, FieldKind};
use super::pages::Item;
use super::read::rd_uint;
use super::{err, CpuStats, RawDecoder, RawError};

/// Which latency a sample is (the entry's `context`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimerlatContext {
    /// Timer expiry → the timer's IRQ handler.
    Irq,
    /// Timer expiry → the measuring thread runs (in the kernel).
    Thread,
    /// Timer expiry → the user-space thread is back in user space (`timerlat_fd` only).
    User,
}

impl TimerlatContext {
    /// The kernel's `context` value (0 IRQ, 1 thread, 2 return to user).
    pub fn from_raw(v: i64) -> Option<TimerlatContext> {
        match v {
            0 => Some(TimerlatContext::Irq),
            1 => Some(TimerlatContext::Thread),
            2 => Some(TimerlatContext::User),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TimerlatContext::Irq => "irq",
            TimerlatContext::Thread => "thread",
            TimerlatContext::User => "user",
        }
    }
}

/// One sample: when it was written (the trace clock's ns), its activation, its context, its
/// latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerlatSample {
    pub ts: u64,
    pub seqnum: u32,
    pub context: TimerlatContext,
    pub latency_ns: u64,
}

impl TimerlatSample {
    /// The timer's expiry (the activation's intended time): the sample's time less its
    /// latency (the kernel writes the sample right after measuring it).
    pub fn intended_ns(&self) -> u64 {
        self.ts.saturating_sub(self.latency_ns)
    }
}

/// A field's offset and size.
#[derive(Debug, Clone, Copy)]
struct At {
    off: usize,
    size: usize,
}

/// The decoder of one instance's timerlat samples.
#[derive(Debug, Clone)]
pub struct TimerlatDecoder {
    raw: RawDecoder,
    id: u64,
    ty: At,
    seqnum: At,
    context: At,
    latency: At,
}

impl TimerlatDecoder {
    /// From the instance's `events/header_page`, `events/header_event` and
    /// `events/ftrace/timerlat/format`. Err for a layout latlab does not read (the entry
    /// without one of its fields, a field of another size).
    pub fn new(header_page: &str, header_event: &str, format: &str) -> Result<Self, RawError> {
        let fmt = parse_format(format)?;
        if fmt.name != "timerlat" {
            return Err(err(format!("a format of {:?}, not of timerlat", fmt.name)));
        }
        let at = |n: &str, sizes: &[usize]| -> Result<At, RawError> {
            let f = fmt
                .field(n)
                .ok_or_else(|| err(format!("format of timerlat: no field {n}")))?;
            if f.kind != FieldKind::Int || !sizes.contains(&f.size) {
                return Err(err(format!(
                    "format of timerlat: field {n} of {} bytes",
                    f.size
                )));
            }
            Ok(At {
                off: f.offset,
                size: f.size,
            })
        };
        let ty = at("common_type", &[2, 4])?;
        let seqnum = at("seqnum", &[4])?;
        let context = at("context", &[4])?;
        let latency = at("timer_latency", &[8])?;
        let raw = RawDecoder::new(header_page, header_event, &[format])?;
        Ok(TimerlatDecoder {
            raw,
            id: fmt.id as u64,
            ty,
            seqnum,
            context,
            latency,
        })
    }

    pub fn page_size(&self) -> usize {
        self.raw.page_size()
    }

    /// Every timerlat sample of one CPU's `pages` (whole pages), in order, to `f`; other
    /// events are skipped by their type alone. Err only when `pages` is not a whole number
    /// of pages. The stats count the pages, the samples, lost events and damaged pages.
    pub fn samples(
        &self,
        pages: &[u8],
        mut f: impl FnMut(TimerlatSample),
    ) -> Result<CpuStats, RawError> {
        let mut stats = CpuStats::default();
        self.raw.walk(pages, &mut stats, |item, stats| {
            let Item::Event { ts, data, .. } = item else {
                return;
            };
            if rd_uint(data, self.ty.off, self.ty.size) != Some(self.id) {
                stats.unknown_events += 1;
                return;
            }
            let (Some(seq), Some(ctx), Some(lat)) = (
                rd_uint(data, self.seqnum.off, self.seqnum.size),
                rd_uint(data, self.context.off, self.context.size),
                rd_uint(data, self.latency.off, self.latency.size),
            ) else {
                stats.bad_pages += 1;
                return;
            };
            let Some(context) = TimerlatContext::from_raw(ctx as u32 as i32 as i64) else {
                stats.unknown_events += 1;
                return;
            };
            stats.events += 1;
            f(TimerlatSample {
                ts,
                seqnum: seq as u32,
                context,
                latency_ns: lat,
            });
        })?;
        Ok(stats)
    }
}

/// Activations one context's series missed, sample by sample: the periods between a sample's
/// expiry and the previous one's beyond the first (the kernel re-arms its timer on the next
/// period still ahead, so a late thread skips periods without a sample), or the activations
/// its `seqnum` skipped (samples lost from the ring), whichever is more.
#[derive(Debug, Clone, Copy, Default)]
pub struct MissedActivations {
    last: Option<(u32, u64)>,
}

impl MissedActivations {
    /// The activations missed before `s` (whose timer's period is `period_ns`).
    pub fn before(&mut self, s: &TimerlatSample, period_ns: u64) -> u64 {
        let now = (s.seqnum, s.intended_ns());
        let missed = match self.last {
            None => 0,
            Some((seq, t)) => {
                let by_seq = s.seqnum.wrapping_sub(seq).saturating_sub(1) as u64;
                let by_time = match period_ns {
                    0 => 0,
                    p => (now.1.saturating_sub(t) + p / 2) / p,
                }
                .saturating_sub(1);
                by_seq.max(by_time)
            }
        };
        self.last = Some(now);
        missed
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{Page, HEADER_EVENT, HEADER_PAGE};
    use super::*;

    const FORMAT: &str = include_str!("../../../tests/fixtures/trace/timerlat/timerlat.format");

    fn rec(seq: u32, ctx: i32, lat: u64) -> Vec<u8> {
        let mut r = vec![0u8; 24];
        r[..2].copy_from_slice(&13u16.to_ne_bytes());
        r[4..8].copy_from_slice(&77i32.to_ne_bytes());
        r[8..12].copy_from_slice(&seq.to_ne_bytes());
        r[12..16].copy_from_slice(&ctx.to_ne_bytes());
        r[16..24].copy_from_slice(&lat.to_ne_bytes());
        r
    }

    #[test]
    fn samples_are_read_where_the_format_puts_them() {
        let d = TimerlatDecoder::new(HEADER_PAGE, HEADER_EVENT, FORMAT).unwrap();
        let mut p = Page::new(1_000_000);
        p.event(10, &rec(1, 0, 2_500), false);
        p.event(40, &rec(1, 1, 9_000), false);
        // Another event (a print, ID 5) between them: skipped by its type.
        p.event(5, &super::super::tests::print(3, "hello"), false);
        p.event(7, &rec(1, 2, 11_000), true);
        p.event(1_000, &rec(2, 0, 1_000), false);
        let mut got = Vec::new();
        let st = d.samples(&p.bytes(), |s| got.push(s)).unwrap();
        assert_eq!(st.events, 4);
        assert_eq!(st.unknown_events, 1);
        let ctx: Vec<_> = got
            .iter()
            .map(|s| (s.seqnum, s.context, s.latency_ns))
            .collect();
        use TimerlatContext::*;
        assert_eq!(
            ctx,
            vec![
                (1, Irq, 2_500),
                (1, Thread, 9_000),
                (1, User, 11_000),
                (2, Irq, 1_000)
            ]
        );
        assert_eq!(got[0].ts, 1_000_010);
        assert_eq!(got[1].ts, 1_000_050);
        assert_eq!(got[0].intended_ns(), 1_000_010 - 2_500);
        // Not whole pages: an error, not a panic.
        assert!(d.samples(&p.bytes()[..100], |_| {}).is_err());
    }

    #[test]
    fn a_format_without_its_fields_is_refused() {
        let no_ctx = FORMAT.replace("field:int context;", "field:int contexte;");
        assert!(TimerlatDecoder::new(HEADER_PAGE, HEADER_EVENT, &no_ctx).is_err());
        let small = FORMAT.replace(
            "field:u64 timer_latency;\toffset:16;\tsize:8;",
            "field:u32 timer_latency;\toffset:16;\tsize:4;",
        );
        assert!(TimerlatDecoder::new(HEADER_PAGE, HEADER_EVENT, &small).is_err());
        let other = FORMAT.replace("name: timerlat", "name: osnoise");
        assert!(TimerlatDecoder::new(HEADER_PAGE, HEADER_EVENT, &other).is_err());
    }

    #[test]
    fn missed_activations_from_seqnum_gaps_and_skipped_periods() {
        let s = |seq: u32, intended: u64| TimerlatSample {
            ts: intended + 100,
            seqnum: seq,
            context: TimerlatContext::Thread,
            latency_ns: 100,
        };
        let mut m = MissedActivations::default();
        let p = 1_000_000;
        assert_eq!(m.before(&s(1, 5_000_000), p), 0);
        assert_eq!(m.before(&s(2, 6_000_000), p), 0);
        // Two samples lost from the ring: seqnum 3 and 4.
        assert_eq!(m.before(&s(5, 9_000_000), p), 2);
        // A late thread: the kernel re-armed on the next period ahead, two periods skipped
        // (seqnum counts activations, so it did not move by more than one).
        assert_eq!(m.before(&s(6, 12_000_000), p), 2);
        // The expiry is read from the sample's time less its latency: a few µs off the grid
        // still rounds to whole periods.
        assert_eq!(m.before(&s(7, 13_004_000), p), 0);
    }
}
