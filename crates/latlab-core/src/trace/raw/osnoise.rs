//! The osnoise tracer's records read straight from the ring's binary pages: its per-period
//! summary (the `osnoise` ftrace entry: `noise`, `runtime`, `max_sample` in µs and the
//! interference counts by source), each noise at or above the threshold
//! (`osnoise:sample_threshold`: its `duration` in ns and how many interferences it held) and
//! each interference by source (`osnoise:irq_noise`, `softirq_noise`, `thread_noise`,
//! `nmi_noise`: what ran and for how long). What `latlab run --mode noise --backend osnoise`
//! reads while it measures; fields are read where their format says they lie.

use std::borrow::Cow;

use super::format::{parse_format, EventFormat, FieldKind};
use super::pages::Item;
use super::read::{int, string};
use super::shape::F;
use super::{err, CpuStats, RawDecoder, RawError};

/// Where an interference came from (`osnoise:*_noise`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NoiseKind {
    Irq,
    Softirq,
    /// Another thread ran.
    Thread,
    Nmi,
}

impl NoiseKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NoiseKind::Irq => "irq",
            NoiseKind::Softirq => "softirq",
            NoiseKind::Thread => "task",
            NoiseKind::Nmi => "nmi",
        }
    }
}

/// One record of the osnoise tracer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OsnoiseItem<'a> {
    /// The end of one period of the tracer's thread (`osnoise`): how long it ran, the noise
    /// it saw (µs, as the kernel keeps them) and the interferences it counted, by source
    /// (`hw`: noise with no interference the kernel saw: hardware or the hypervisor).
    Period {
        ts: u64,
        runtime_us: u64,
        noise_us: u64,
        max_sample_us: u64,
        hw: u64,
        nmi: u64,
        irq: u64,
        softirq: u64,
        thread: u64,
    },
    /// One noise at or above the threshold (`sample_threshold`), written when it ended.
    Noise {
        ts: u64,
        duration_ns: u64,
        interference: u64,
    },
    /// One interference by source, written when it ended.
    Source {
        ts: u64,
        kind: NoiseKind,
        /// The IRQ's description, the softirq's vector name, the thread's comm, `NMI`.
        name: Cow<'a, str>,
        /// The thread's pid, the IRQ's or softirq's vector; 0 for an NMI.
        id: i64,
        duration_ns: u64,
    },
}

/// The softirq vectors' names, by number (include/linux/interrupt.h, stable since 4.x):
/// `softirq_noise`'s format names them by their enum constants, which a format cannot map.
const SOFTIRQS: [&str; 10] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

#[derive(Debug, Clone)]
enum Shape {
    Period {
        noise: F,
        runtime: F,
        max_sample: F,
        counts: [F; 5],
    },
    Noise {
        duration: F,
        interference: F,
    },
    Irq {
        duration: F,
        desc: F,
        vector: F,
    },
    Softirq {
        duration: F,
        vector: F,
    },
    Thread {
        duration: F,
        comm: F,
        pid: F,
    },
    Nmi {
        duration: F,
    },
}

/// The decoder of one instance's osnoise records.
#[derive(Debug, Clone)]
pub struct OsnoiseDecoder {
    raw: RawDecoder,
    ty: F,
    shapes: Vec<(u64, Shape)>,
}

fn field(fmt: &EventFormat, n: &str, kinds: &[FieldKind], sizes: &[usize]) -> Result<F, RawError> {
    let f = fmt
        .field(n)
        .ok_or_else(|| err(format!("format of {}: no field {n}", fmt.name)))?;
    if !kinds.contains(&f.kind) || !(sizes.is_empty() || sizes.contains(&f.size)) {
        return Err(err(format!(
            "format of {}: field {n} of {} bytes",
            fmt.name, f.size
        )));
    }
    Ok(F::from(f))
}

fn shape_of(fmt: &EventFormat) -> Result<Option<Shape>, RawError> {
    use FieldKind::{Chars, DataLoc, Int};
    let int8 = |n: &str| field(fmt, n, &[Int], &[8]);
    let int4 = |n: &str| field(fmt, n, &[Int], &[4]);
    Ok(Some(match fmt.name.as_str() {
        "osnoise" => Shape::Period {
            noise: int8("noise")?,
            runtime: int8("runtime")?,
            max_sample: int8("max_sample")?,
            counts: [
                int4("hw_count")?,
                int4("nmi_count")?,
                int4("irq_count")?,
                int4("softirq_count")?,
                int4("thread_count")?,
            ],
        },
        "sample_threshold" => Shape::Noise {
            duration: int8("duration")?,
            interference: int8("interference")?,
        },
        "irq_noise" => Shape::Irq {
            duration: int8("duration")?,
            desc: field(fmt, "desc", &[DataLoc, Chars], &[])?,
            vector: int4("vector")?,
        },
        "softirq_noise" => Shape::Softirq {
            duration: int8("duration")?,
            vector: int4("vector")?,
        },
        "thread_noise" => Shape::Thread {
            duration: int8("duration")?,
            comm: field(fmt, "comm", &[Chars, DataLoc], &[])?,
            pid: int4("pid")?,
        },
        "nmi_noise" => Shape::Nmi {
            duration: int8("duration")?,
        },
        _ => return Ok(None),
    }))
}

impl OsnoiseDecoder {
    /// From the instance's `events/header_page`, `events/header_event` and the `format` of
    /// `ftrace/osnoise` (required) and of the `osnoise:*` events enabled (any other format's
    /// events are skipped as unknown). Err for a layout latlab does not read.
    pub fn new(header_page: &str, header_event: &str, formats: &[&str]) -> Result<Self, RawError> {
        let mut shapes = Vec::new();
        let mut ty = None;
        for text in formats {
            let fmt = parse_format(text)?;
            let t = field(&fmt, "common_type", &[FieldKind::Int], &[2, 4])?;
            ty.get_or_insert(t);
            // Others (the instance's `ftrace/print`) are decoded as unknown events.
            if let Some(s) = shape_of(&fmt)? {
                shapes.push((fmt.id as u64, s));
            }
        }
        if !shapes
            .iter()
            .any(|(_, s)| matches!(s, Shape::Period { .. }))
        {
            return Err(err("no format of the osnoise entry (ftrace/osnoise)"));
        }
        let raw = RawDecoder::new(header_page, header_event, formats)?;
        Ok(OsnoiseDecoder {
            raw,
            ty: ty.ok_or_else(|| err("no formats"))?,
            shapes,
        })
    }

    pub fn page_size(&self) -> usize {
        self.raw.page_size()
    }

    /// Every osnoise record of one CPU's `pages` (whole pages), in order, to `f`. Err only
    /// when `pages` is not a whole number of pages; the stats count pages, records, lost
    /// events and damaged pages.
    pub fn items<'p>(
        &self,
        pages: &'p [u8],
        mut f: impl FnMut(OsnoiseItem<'p>),
    ) -> Result<CpuStats, RawError> {
        let mut stats = CpuStats::default();
        self.raw.walk(pages, &mut stats, |item, stats| {
            let Item::Event { ts, data, .. } = item else {
                return;
            };
            let Some(id) = int(data, &self.ty) else {
                stats.bad_pages += 1;
                return;
            };
            let Some((_, shape)) = self.shapes.iter().find(|(i, _)| *i == id as u64) else {
                stats.unknown_events += 1;
                return;
            };
            match decode(shape, ts, data) {
                Some(x) => {
                    stats.events += 1;
                    f(x);
                }
                None => stats.bad_pages += 1,
            }
        })?;
        Ok(stats)
    }
}

fn decode<'p>(shape: &Shape, ts: u64, d: &'p [u8]) -> Option<OsnoiseItem<'p>> {
    let u = |f: &F| int(d, f).map(|v| v as u64);
    let source = |kind, name: Cow<'p, str>, id: i64, duration: &F| {
        Some(OsnoiseItem::Source {
            ts,
            kind,
            name,
            id,
            duration_ns: u(duration)?,
        })
    };
    match shape {
        Shape::Period {
            noise,
            runtime,
            max_sample,
            counts,
        } => Some(OsnoiseItem::Period {
            ts,
            runtime_us: u(runtime)?,
            noise_us: u(noise)?,
            max_sample_us: u(max_sample)?,
            hw: u(&counts[0])?,
            nmi: u(&counts[1])?,
            irq: u(&counts[2])?,
            softirq: u(&counts[3])?,
            thread: u(&counts[4])?,
        }),
        Shape::Noise {
            duration,
            interference,
        } => Some(OsnoiseItem::Noise {
            ts,
            duration_ns: u(duration)?,
            interference: u(interference)?,
        }),
        Shape::Irq {
            duration,
            desc,
            vector,
        } => source(NoiseKind::Irq, string(d, desc)?, int(d, vector)?, duration),
        Shape::Softirq { duration, vector } => {
            let v = int(d, vector)?;
            let name = usize::try_from(v)
                .ok()
                .and_then(|i| SOFTIRQS.get(i))
                .map_or_else(|| Cow::Owned(v.to_string()), |n| Cow::Borrowed(*n));
            source(NoiseKind::Softirq, name, v, duration)
        }
        Shape::Thread {
            duration,
            comm,
            pid,
        } => source(NoiseKind::Thread, string(d, comm)?, int(d, pid)?, duration),
        Shape::Nmi { duration } => source(NoiseKind::Nmi, Cow::Borrowed("NMI"), 0, duration),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::raw::tests::Page;

    const HEADER_PAGE: &str = include_str!("../../../tests/fixtures/osnoise/header_page");
    const HEADER_EVENT: &str = include_str!("../../../tests/fixtures/osnoise/header_event");
    const FORMATS: [&str; 6] = [
        include_str!("../../../tests/fixtures/osnoise/ftrace_osnoise.format"),
        include_str!("../../../tests/fixtures/osnoise/osnoise_sample_threshold.format"),
        include_str!("../../../tests/fixtures/osnoise/osnoise_irq_noise.format"),
        include_str!("../../../tests/fixtures/osnoise/osnoise_softirq_noise.format"),
        include_str!("../../../tests/fixtures/osnoise/osnoise_thread_noise.format"),
        include_str!("../../../tests/fixtures/osnoise/osnoise_nmi_noise.format"),
    ];

    fn head(id: u16, len: usize) -> Vec<u8> {
        let mut r = vec![0u8; len];
        r[..2].copy_from_slice(&id.to_ne_bytes());
        r[4..8].copy_from_slice(&77i32.to_ne_bytes());
        r
    }
    fn put(r: &mut [u8], at: usize, v: &[u8]) {
        r[at..at + v.len()].copy_from_slice(v);
    }

    /// Records laid out as 6.12-rt's formats say (IDs 16, 512–516), each read back with its
    /// fields; an unknown event is counted and skipped.
    #[test]
    fn each_record_of_6_12_is_read_where_its_format_says() {
        let d = OsnoiseDecoder::new(HEADER_PAGE, HEADER_EVENT, &FORMATS).unwrap();
        let mut period = head(16, 52);
        for (at, v) in [(8, 120u64), (16, 1_000_000), (24, 80)] {
            put(&mut period, at, &v.to_ne_bytes());
        }
        for (i, v) in [1u32, 0, 900, 40, 3].iter().enumerate() {
            put(&mut period, 32 + 4 * i, &v.to_ne_bytes());
        }
        let mut noise = head(512, 32);
        put(&mut noise, 16, &80_500u64.to_ne_bytes());
        put(&mut noise, 24, &2u64.to_ne_bytes());
        // irq_noise: desc as a __data_loc (offset 32, length 10 with its NUL).
        let mut irq = head(514, 44);
        put(&mut irq, 16, &3_100u64.to_ne_bytes());
        put(&mut irq, 24, &(32u32 | (10 << 16)).to_ne_bytes());
        put(&mut irq, 28, &236i32.to_ne_bytes());
        put(&mut irq, 32, b"local_tim\0");
        let mut soft = head(515, 28);
        put(&mut soft, 16, &4_200u64.to_ne_bytes());
        put(&mut soft, 24, &9i32.to_ne_bytes());
        let mut thread = head(516, 44);
        put(&mut thread, 8, b"lab-hog\0");
        put(&mut thread, 32, &70_000u64.to_ne_bytes());
        put(&mut thread, 40, &321i32.to_ne_bytes());
        let mut nmi = head(513, 24);
        put(&mut nmi, 16, &900u64.to_ne_bytes());
        let other = head(99, 12);
        let mut p = Page::new(5_000);
        for r in [&irq, &soft, &thread, &nmi, &noise, &period, &other] {
            p.event(10, r, false);
        }
        let mut got = Vec::new();
        let stats = d.items(&p.bytes(), |x| got.push(format!("{x:?}"))).unwrap();
        assert_eq!(stats.events, 6);
        assert_eq!(stats.unknown_events, 1);
        assert_eq!(
            got,
            [
                "Source { ts: 5010, kind: Irq, name: \"local_tim\", id: 236, duration_ns: 3100 }",
                "Source { ts: 5020, kind: Softirq, name: \"RCU\", id: 9, duration_ns: 4200 }",
                "Source { ts: 5030, kind: Thread, name: \"lab-hog\", id: 321, duration_ns: 70000 }",
                "Source { ts: 5040, kind: Nmi, name: \"NMI\", id: 0, duration_ns: 900 }",
                "Noise { ts: 5050, duration_ns: 80500, interference: 2 }",
                "Period { ts: 5060, runtime_us: 1000000, noise_us: 120, max_sample_us: 80, hw: 1, nmi: 0, irq: 900, softirq: 40, thread: 3 }",
            ]
        );
    }

    /// Without the period entry's format, or with a field of another size, no decoder.
    #[test]
    fn formats_it_cannot_read_are_refused() {
        let e = OsnoiseDecoder::new(HEADER_PAGE, HEADER_EVENT, &FORMATS[1..]).unwrap_err();
        assert!(e.to_string().contains("ftrace/osnoise"), "{e}");
        let sched = FORMATS[0].replace("name: osnoise", "name: sched_switch");
        let e = OsnoiseDecoder::new(HEADER_PAGE, HEADER_EVENT, &[&sched]).unwrap_err();
        assert!(e.to_string().contains("ftrace/osnoise"), "{e}");
        // Beside the osnoise entry, another event's format is only skipped.
        let other = FORMATS[0]
            .replace("name: osnoise", "name: other_entry")
            .replace("ID: 16", "ID: 317");
        assert!(OsnoiseDecoder::new(HEADER_PAGE, HEADER_EVENT, &[FORMATS[0], &other]).is_ok());
        let short = FORMATS[0].replace(
            "u64 noise;\toffset:8;\tsize:8;",
            "u64 noise;\toffset:8;\tsize:2;",
        );
        assert!(OsnoiseDecoder::new(HEADER_PAGE, HEADER_EVENT, &[&short]).is_err());
    }
}
