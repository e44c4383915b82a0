//! Wait times of one kind, in a fixed-size log-linear histogram.

/// Wait times of one kind: log-linear buckets (8 per power of two: a quantile is the upper
/// edge of its bucket, at most 12.5 % above the true value, never above the max).
#[derive(Debug, Clone)]
pub(super) struct WaitHist {
    pub(super) n: u64,
    pub(super) max: u64,
    pub(super) buckets: Box<[u32; HIST_BUCKETS]>,
}

pub(super) const SUB: u32 = 8;
pub(super) const HIST_BUCKETS: usize = 64 * SUB as usize;

pub(super) fn bucket_of(v: u64) -> usize {
    if v < SUB as u64 {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // v >= 8: e >= 3
    let sub = ((v >> (e - 3)) & (SUB as u64 - 1)) as u32;
    ((e - 2) * SUB + sub) as usize
}

/// The largest value of bucket `b`.
pub(super) fn bucket_top(b: usize) -> u64 {
    if b < SUB as usize {
        return b as u64;
    }
    let e = b as u32 / SUB + 2;
    let sub = b as u64 % SUB as u64;
    let lo = (1u64 << e) + (sub << (e - 3));
    lo.saturating_add((1u64 << (e - 3)) - 1)
}

impl WaitHist {
    pub(super) fn new() -> WaitHist {
        WaitHist {
            n: 0,
            max: 0,
            buckets: Box::new([0; HIST_BUCKETS]),
        }
    }

    pub(super) fn add(&mut self, v: u64) {
        self.n += 1;
        self.max = self.max.max(v);
        let b = &mut self.buckets[bucket_of(v)];
        *b = b.saturating_add(1);
    }

    pub(super) fn clear(&mut self) {
        if self.n > 0 {
            self.n = 0;
            self.max = 0;
            self.buckets.fill(0);
        }
    }

    /// The non-empty buckets: `[lowest, highest, count]` (the highest capped at the max).
    pub(super) fn nonempty(&self) -> Vec<[u64; 3]> {
        self.buckets
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(b, &c)| {
                let lo = if b == 0 { 0 } else { bucket_top(b - 1) + 1 };
                [lo, bucket_top(b).min(self.max), c as u64]
            })
            .collect()
    }

    pub(super) fn quantile(&self, q: f64) -> Option<u64> {
        if self.n == 0 {
            return None;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0u64;
        for (b, &c) in self.buckets.iter().enumerate() {
            seen += c as u64;
            if seen >= rank {
                return Some(bucket_top(b).min(self.max));
            }
        }
        Some(self.max)
    }
}
