//! A seeded source of wake-up latencies, so the whole pipeline runs without root and every
//! test that does not need a real machine is deterministic (`latlab run --backend sim`).
//!
//! The shape imitates what a FIFO sleeper sees on a busy non-RT kernel: a body of a few tens
//! of µs, a long tail, occasional ~100–400 µs softirq-like bursts and rare millisecond spikes.
//! The generator is SplitMix64, defined here so its output never changes under us.

use crate::units::Nanos;

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and stable across versions.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Parameters of the simulated machine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimParams {
    /// Smallest latency the simulated machine gives (hardware + entry path).
    pub floor_ns: Nanos,
    /// Mean of the exponential body above the floor.
    pub body_mean_ns: f64,
    /// Probability per sample of a softirq-like burst (100–400 µs).
    pub burst_p: f64,
    /// Probability per sample of a millisecond spike (0.5–5 ms).
    pub spike_p: f64,
}

impl Default for SimParams {
    fn default() -> Self {
        SimParams {
            floor_ns: 3_000,
            body_mean_ns: 9_000.0,
            burst_p: 2e-3,
            spike_p: 2e-4,
        }
    }
}

/// One simulated CPU.
#[derive(Debug, Clone)]
pub struct SimSource {
    rng: SplitMix64,
    p: SimParams,
}

impl SimSource {
    /// The source of CPU `cpu` for run seed `seed`: CPUs differ, runs with one seed repeat.
    pub fn new(seed: u64, cpu: u32, p: SimParams) -> Self {
        let mut mix = SplitMix64::new(seed ^ (cpu as u64).wrapping_mul(0xA24B_AED4_963E_E407));
        let s = mix.next_u64();
        SimSource {
            rng: SplitMix64::new(s),
            p,
        }
    }

    /// The latency of the next wake-up, in ns.
    pub fn next_latency(&mut self) -> Nanos {
        let u = self.rng.next_f64();
        let body = -(1.0 - self.rng.next_f64()).ln() * self.p.body_mean_ns;
        let mut v = self.p.floor_ns as f64 + body;
        if u < self.p.spike_p {
            v += 500_000.0 + self.rng.next_f64() * 4_500_000.0;
        } else if u < self.p.spike_p + self.p.burst_p {
            v += 100_000.0 + self.rng.next_f64() * 300_000.0;
        }
        v as Nanos
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_distinct_per_cpu() {
        let a: Vec<_> = {
            let mut s = SimSource::new(7, 0, SimParams::default());
            (0..100).map(|_| s.next_latency()).collect()
        };
        let b: Vec<_> = {
            let mut s = SimSource::new(7, 0, SimParams::default());
            (0..100).map(|_| s.next_latency()).collect()
        };
        let c: Vec<_> = {
            let mut s = SimSource::new(7, 1, SimParams::default());
            (0..100).map(|_| s.next_latency()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().all(|&v| v >= 3_000));
    }

    #[test]
    fn has_a_tail() {
        let mut s = SimSource::new(1, 0, SimParams::default());
        let v: Vec<_> = (0..100_000).map(|_| s.next_latency()).collect();
        let spikes = v.iter().filter(|&&x| x >= 500_000).count();
        let bursts = v
            .iter()
            .filter(|&&x| (100_000..500_000).contains(&x))
            .count();
        assert!((5..60).contains(&spikes), "{spikes}");
        assert!((100..400).contains(&bursts), "{bursts}");
    }
}
