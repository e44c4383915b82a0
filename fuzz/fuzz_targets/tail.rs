//! Fuzz the tail estimate on hostile histograms (structured input): one bucket, everything in
//! the log tail above the limit, counts up to u64::MAX, samples known only to be above the
//! limit, per-second maxima that contradict the histogram. It never panics, never hangs, and
//! keeps its promises: no number without `fit_ok`, a reason without it, every interval holds
//! its estimate, and estimates grow as the exceedance probability falls.
#![no_main]
use latlab_core::hist::{HistParts, Histogram, Layout};
use latlab_core::tail::{estimate, TailContext};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input {
    /// (bucket index, count): counts biased to the extremes.
    buckets: Vec<(u16, Count)>,
    unknown_above: Count,
    per_second: Vec<Option<u32>>,
    rate: Option<u16>,
    small_layout: bool,
}

#[derive(Debug, Arbitrary)]
enum Count {
    Small(u8),
    Many(u16),
    Huge(u32),
    NearMax(u8),
}

impl Count {
    fn get(&self) -> u64 {
        match *self {
            Count::Small(v) => v as u64,
            Count::Many(v) => v as u64 * 1000,
            Count::Huge(v) => v as u64 * 1_000_000,
            Count::NearMax(v) => u64::MAX / 4 - v as u64,
        }
    }
}

fn build(i: &Input) -> Option<Histogram> {
    let layout = if i.small_layout {
        Layout::new(1_000, 64_000).ok()?
    } else {
        Layout::default()
    };
    let mut counts = vec![0u64; layout.len()];
    for (b, c) in &i.buckets {
        let b = *b as usize % counts.len();
        counts[b] = counts[b].checked_add(c.get())?;
    }
    let first = counts.iter().position(|&c| c > 0);
    let last = counts.iter().rposition(|&c| c > 0);
    let unknown = i.unknown_above.get();
    let (min, max) = match (first, last) {
        (Some(f), Some(l)) => (layout.lower(f), layout.lower(l).max(layout.limit_ns() * u64::from(unknown > 0))),
        _ => (layout.limit_ns(), layout.limit_ns()),
    };
    Histogram::from_parts(HistParts {
        layout,
        counts,
        min,
        max,
        sum: 0,
        sumsq: 0,
        unknown_above: unknown,
        exact_moments: false,
    })
    .ok()
}

fuzz_target!(|i: Input| {
    let Some(h) = build(&i) else {
        return;
    };
    let ps: Vec<Option<u64>> = i.per_second.iter().map(|v| v.map(u64::from)).collect();
    let ctx = TailContext {
        per_second: vec![&ps],
        intervals: None,
        wakeups_per_s: i.rate.map(f64::from),
    };
    let e = estimate(&h, &ctx);
    assert_eq!(e.fit_ok, e.reason.is_none(), "{e:?}");
    for q in &e.quantiles {
        assert!(q.exceedance > 0.0 && q.exceedance < 1.0);
        if !e.fit_ok {
            assert!(q.ns.is_none() && q.lo_ns.is_none() && q.hi_ns.is_none(), "{e:?}");
            continue;
        }
        if let Some(v) = q.ns {
            if let Some(lo) = q.lo_ns {
                assert!(lo <= v.saturating_add(1), "{q:?}");
            }
            if let Some(hi) = q.hi_ns {
                assert!(v <= hi.saturating_add(1), "{q:?}");
            }
        }
    }
    // Quantiles grow as the probability falls: the list is in falling probability for the
    // first two (1e-6, 1e-9).
    if let (Some(a), Some(b)) = (
        e.quantiles.first().and_then(|q| q.ns),
        e.quantiles.get(1).and_then(|q| q.ns),
    ) {
        assert!(a <= b.saturating_add(1), "{e:?}");
    }
    let _ = serde_json::to_string(&e).expect("serializes");
});
