//! Fuzz histogram merging with extreme counts (structured input): histograms of a small
//! layout built from parts, with counts anywhere up to u64::MAX, merged one into the other.
//! A merge either succeeds with exact totals (count, every bucket, unknown_above) or returns
//! an error — when the layouts differ or a total would not fit in u64 — and never panics or
//! wraps.
#![no_main]
use latlab_core::hist::{HistParts, Histogram, Layout};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Part {
    /// (bucket index, count): counts are biased to the extremes.
    buckets: Vec<(u8, Count)>,
    unknown_above: Count,
    second_layout: bool,
}

#[derive(Debug, Arbitrary)]
enum Count {
    Small(u8),
    NearMax(u8),
    Any(u64),
}

impl Count {
    fn get(&self) -> u64 {
        match *self {
            Count::Small(v) => v as u64,
            Count::NearMax(v) => u64::MAX - v as u64,
            Count::Any(v) => v,
        }
    }
}

fn build(p: &Part) -> Option<Histogram> {
    let layout = if p.second_layout {
        Layout::new(1_000, 64_000).ok()?
    } else {
        Layout::new(1_000, 100_000).ok()?
    };
    let mut counts = vec![0u64; layout.len()];
    for (i, c) in &p.buckets {
        let i = *i as usize % counts.len();
        counts[i] = counts[i].checked_add(c.get())?;
    }
    let first = counts.iter().position(|&c| c > 0);
    let last = counts.iter().rposition(|&c| c > 0);
    let (min, max) = match (first, last) {
        (Some(f), Some(l)) => (layout.lower(f), layout.lower(l)),
        _ => (0, 0),
    };
    // Moments are not checked against the buckets: any exact-looking values do.
    Histogram::from_parts(HistParts {
        layout,
        counts,
        min,
        max,
        sum: 0,
        sumsq: 0,
        unknown_above: p.unknown_above.get(),
        exact_moments: false,
    })
    .ok()
}

fuzz_target!(|parts: Vec<Part>| {
    let hs: Vec<Histogram> = parts.iter().filter_map(build).collect();
    let Some((first, rest)) = hs.split_first() else {
        return;
    };
    let mut acc = first.clone();
    for h in rest {
        let before = acc.clone();
        let same_layout = acc.layout() == h.layout();
        let fits = acc.count().checked_add(h.count()).is_some();
        match acc.merge(h) {
            Ok(()) => {
                assert!(same_layout, "merged two layouts");
                assert!(fits, "merged counts that do not fit in u64 (wrapped)");
                assert_eq!(acc.count(), before.count() + h.count());
                assert_eq!(
                    acc.unknown_above(),
                    before.unknown_above() + h.unknown_above()
                );
                for ((a, b), c) in before.counts().iter().zip(h.counts()).zip(acc.counts()) {
                    assert_eq!(*c, a + b);
                }
                assert_eq!(
                    acc.count(),
                    acc.counts().iter().sum::<u64>() + acc.unknown_above()
                );
            }
            Err(_) => {
                assert!(!same_layout || !fits, "refused a merge that fits");
                assert_eq!(acc, before, "a refused merge changed the histogram");
            }
        }
    }
});
