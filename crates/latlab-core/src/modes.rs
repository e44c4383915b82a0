//! What the measurement modes beyond the timer record, and their pure statistics.
//!
//! * `wakeup`: thread → thread wake-up latency through an IPC (futex, pipe, eventfd,
//!   condvar), as rt-tests' ptsematest/pmqtest measure it. Its samples go into the ordinary
//!   histogram; only the pair description is extra ([`CpuMode::pair`]).
//! * `jitter`: execution time of a fixed compute kernel each period (the ELC 2017 talk's
//!   "determinism of code execution time"): a second histogram per thread ([`CpuMode::exec`]),
//!   summarised by [`ExecSummary`].
//! * `audio`: Senoner's latencytest model of an audio pipeline, counted by [`AudioTally`].
//!
//! ## The audio model (Senoner's latencytest)
//!
//! A sound card plays a ring of `B` fragments of one period `P` each (64 frames at 44.1 kHz
//! ≈ 1.45 ms). Each time the card has played a fragment, that slot is free and the
//! application is woken (nominal start `t_k = t_0 + k·P`) to compute the next fragment into
//! it. The card reaches that slot again after playing the other `B − 1` fragments, so the
//! fragment's deadline is `t_k + (B − 1)·P`. The *response time* of fragment k is the time
//! its computation finished minus `t_k` (wake-up latency + compute time + any preemption);
//! a response above `(B − 1)·P` is a buffer underrun (an **xrun**: the card played
//! stale data). With one buffer (`B = 1`) the deadline is the start itself, so every
//! fragment is late: it is in the verdict table only as the degenerate case.
//!
//! Because each fragment's response time is known, the same data answers the question for
//! every other buffer count: [`AudioTally`] counts, for B = 1..=4, the fragments that would
//! have missed their deadline — the verdict "2 × 64 frames would have dropped out 3 times;
//! 3 × 64 never".
//!
//! A wake-up more than one period late makes the engine skip the periods it slept through
//! (counted as `missed_periods`); the skipped fragments are not in the tally. Every skipped
//! period follows a fragment whose response exceeded one period, which is itself counted as
//! an xrun for B ≤ 2.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::hist::{Histogram, HistogramRecord, Quantile};
use crate::units::Nanos;

/// Buffer counts the audio verdict covers (B = 1..=VERDICT_BUFFERS).
pub const VERDICT_BUFFERS: usize = 4;

/// Default audio period: 64 frames at 44.1 kHz.
pub const AUDIO_PERIOD_NS: Nanos = 1_451_247;

/// Sample rate the verdict's frame counts refer to.
pub const AUDIO_RATE_HZ: u64 = 44_100;

/// The mode's parameters, stored in `RunConfig::mode_params` (absent for `timer`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default, JsonSchema)]
pub struct ModeParams {
    /// `futex`, `pipe`, `eventfd` or `condvar` (wakeup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipc: Option<String>,
    /// Sender on another CPU than the receiver (wakeup).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cross_cpu: bool,
    /// Priority of the sender threads (wakeup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_priority: Option<u32>,
    /// Target compute time per period (jitter, audio).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_ns: Option<Nanos>,
    /// Audio period (equal to `interval_ns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_ns: Option<Nanos>,
    /// Audio fragments in the ring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffers: Option<u32>,
    /// Noise: the smallest gap between two clock reads that counts as noise (rtla osnoise's
    /// `--threshold`, the kernel's `tracing_thresh`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_threshold_ns: Option<Nanos>,
}

/// Per-thread extras of a mode, stored in `CpuRecord::mode` (absent for `timer`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, JsonSchema)]
pub struct CpuMode {
    /// Wakeup: who wakes whom, e.g. `futex: sender CPU 1 (fifo 94) → receiver CPU 0 (fifo 95)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair: Option<String>,
    /// Jitter and audio: the compute kernel's execution time each period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecRecord>,
    /// Audio: the deadline tally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio: Option<AudioRecord>,
    /// Imported `rtla timerlat hist`: this CPU's IRQ latency (timer expiry to its handler),
    /// a series of its own beside the thread latency that is the CPU's histogram.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq: Option<HistogramRecord>,
    /// Imported `rtla timerlat hist -u` (user-space threads): this CPU's thread latency (the
    /// `Thr-` columns, timer expiry to the thread's wake-up in the kernel), beside the
    /// return-to-user latency (`Usr-`) that is the CPU's histogram.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<HistogramRecord>,
    /// `--backend timerlat`: whose threads waited for the timer: `user` (latlab's, on
    /// `timerlat_fd`: the CPU's histogram is the return to user, `thread` the thread
    /// latency) or `kernel` (the kernel's `timerlat/N`, where there is no `timerlat_fd`: the
    /// CPU's histogram is the thread latency).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timerlat_threads: Option<String>,
    /// Noise: what kept the CPU from the spinning thread (the CPU's histogram holds each
    /// interference's length).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<NoiseRecord>,
}

/// `--mode noise`: the operating-system noise one CPU's spinning thread saw (rtla osnoise's
/// figures; oslat's method).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NoiseRecord {
    /// How it was measured: `user-loop`, a thread reading CLOCK_MONOTONIC in a tight loop
    /// (oslat's method): every gap of at least `threshold_ns` between two reads is one
    /// interference.
    pub method: String,
    pub threshold_ns: Nanos,
    /// The loop's first clock read, CLOCK_MONOTONIC ns (0: it never ran).
    pub started_ns: Nanos,
    /// From the loop's first clock read to its last.
    pub runtime_ns: Nanos,
    /// The sum of the interferences' lengths: time the CPU did not run the thread.
    pub noise_ns: Nanos,
    /// Clock reads of the loop (each gap below the threshold is the loop's own time).
    pub loops: u64,
    /// Records of the osnoise tracer its ring dropped (full: it wrote faster than latlab read):
    /// the noises and sources are short of them. 0 for the user loop.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: u64,
    /// What ran on the CPU meanwhile, by source, from the kernel's counters over the run
    /// (`/proc/interrupts`, `/proc/softirqs`): counts, `ns` null where no trace timed them.
    pub sources: Vec<NoiseSource>,
    /// The noise in each second of the measurement (index = second from its start; the last
    /// one partial): the sum of that second's noises, so they add up to `noise_ns` (rtla
    /// osnoise's noise per 1 s period). Empty in records written before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_second_ns: Vec<Nanos>,
}

/// One source of noise on a CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NoiseSource {
    /// `irq`, `softirq`, `nmi`, `task` or `hardware`.
    pub kind: String,
    /// The IRQ's name (its `/proc/interrupts` line and description), the softirq vector, the
    /// task's comm.
    pub name: String,
    pub count: u64,
    /// Time it took, where a trace measured it.
    pub ns: Option<Nanos>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl NoiseRecord {
    /// The share of the runtime the thread had, in percent (rtla's `%CPU_AVAIL`); None
    /// before the loop ran.
    pub fn available_pct(&self) -> Option<f64> {
        (self.runtime_ns > 0).then(|| {
            100.0 * self.runtime_ns.saturating_sub(self.noise_ns) as f64 / self.runtime_ns as f64
        })
    }
}

/// The compute kernel and its execution-time histogram.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExecRecord {
    /// Kernel iterations per period, calibrated at start so the fastest run takes ≈ `work_ns`.
    pub iterations: u64,
    /// Fastest time of the calibrated kernel measured during calibration.
    pub calibrated_ns: Nanos,
    pub histogram: HistogramRecord,
}

/// Summary of an execution-time distribution: how deterministic the code's run time is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ExecSummary {
    pub samples: u64,
    pub min_ns: Nanos,
    /// Upper bound of the bucket holding the median.
    pub p50_ns: Nanos,
    pub p99_ns: Nanos,
    pub max_ns: Nanos,
    /// `max − min`: the worst deviation from the fastest run.
    pub max_dev_ns: Nanos,
}

impl ExecSummary {
    /// None for an empty histogram.
    pub fn of(h: &Histogram) -> Option<ExecSummary> {
        let (min, max) = (h.min()?, h.max()?);
        Some(ExecSummary {
            samples: h.count(),
            min_ns: min,
            p50_ns: h.quantile(Quantile::P50)?,
            p99_ns: h.quantile(Quantile::P99)?,
            max_ns: max,
            max_dev_ns: max - min,
        })
    }
}

/// The deadline tally of one audio thread (see the module doc for the model).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AudioRecord {
    pub period_ns: Nanos,
    pub buffers: u32,
    /// Fragments computed.
    pub fragments: u64,
    /// Fragments that missed their deadline with `buffers` fragments.
    pub xruns: u64,
    /// Largest response time (finish − nominal start).
    pub worst_response_ns: Nanos,
    /// `late_by_buffers[B−1]`: fragments that would have missed with B fragments, B = 1..=4.
    pub late_by_buffers: Vec<u64>,
}

/// Counts deadline misses from response times. Fixed size, no allocation: the measuring
/// thread updates one in its loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AudioTally {
    pub period_ns: Nanos,
    pub buffers: u32,
    pub fragments: u64,
    pub xruns: u64,
    pub worst_response_ns: Nanos,
    pub late_by_buffers: [u64; VERDICT_BUFFERS],
}

impl AudioTally {
    pub fn new(period_ns: Nanos, buffers: u32) -> AudioTally {
        AudioTally {
            period_ns,
            buffers,
            fragments: 0,
            xruns: 0,
            worst_response_ns: 0,
            late_by_buffers: [0; VERDICT_BUFFERS],
        }
    }

    /// Deadline of a fragment relative to its nominal start, with `b` fragments in the ring.
    #[inline(always)]
    pub fn deadline(period_ns: Nanos, b: u32) -> Nanos {
        (b.saturating_sub(1) as u64).saturating_mul(period_ns)
    }

    /// One fragment finished `response_ns` after its nominal start.
    #[inline(always)]
    pub fn record(&mut self, response_ns: Nanos) {
        self.fragments += 1;
        if response_ns > self.worst_response_ns {
            self.worst_response_ns = response_ns;
        }
        if response_ns > Self::deadline(self.period_ns, self.buffers) {
            self.xruns += 1;
        }
        let mut b = 0;
        while b < VERDICT_BUFFERS {
            if response_ns > Self::deadline(self.period_ns, b as u32 + 1) {
                self.late_by_buffers[b] += 1;
            }
            b += 1;
        }
    }

    pub fn to_record(&self) -> AudioRecord {
        AudioRecord {
            period_ns: self.period_ns,
            buffers: self.buffers,
            fragments: self.fragments,
            xruns: self.xruns,
            worst_response_ns: self.worst_response_ns,
            late_by_buffers: self.late_by_buffers.to_vec(),
        }
    }
}

impl AudioRecord {
    /// How late the worst fragment finished after its deadline with `buffers` fragments
    /// (None: never late).
    pub fn worst_lateness_ns(&self) -> Option<Nanos> {
        let d = AudioTally::deadline(self.period_ns, self.buffers);
        (self.worst_response_ns > d).then(|| self.worst_response_ns - d)
    }

    /// Xruns per minute of measured time.
    pub fn xruns_per_minute(&self, measured_ns: Nanos) -> f64 {
        if measured_ns == 0 {
            return 0.0;
        }
        self.xruns as f64 * 60e9 / measured_ns as f64
    }

    /// Frames in one period at 44.1 kHz (rounded).
    pub fn frames(&self) -> u64 {
        (self.period_ns as u128 * AUDIO_RATE_HZ as u128 + 500_000_000) as u64 / 1_000_000_000
    }

    /// The verdict for every B = 1..=4: `(B, fragments that would have been late)`.
    pub fn verdict(&self) -> Vec<(u32, u64)> {
        self.late_by_buffers
            .iter()
            .enumerate()
            .map(|(i, &n)| (i as u32 + 1, n))
            .collect()
    }

    /// "2 × 64 frames would have dropped out 3 times; 3 × 64 never; …"
    pub fn verdict_sentence(&self) -> String {
        let f = self.frames();
        self.verdict()
            .iter()
            .map(|&(b, n)| match n {
                0 => format!("{b} × {f} frames never"),
                1 => format!("{b} × {f} frames would have dropped out once"),
                n => format!("{b} × {f} frames would have dropped out {n} times"),
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Merge the tallies of several threads (same period and buffers).
    pub fn merged<'a>(it: impl IntoIterator<Item = &'a AudioRecord>) -> Option<AudioRecord> {
        let mut out: Option<AudioRecord> = None;
        for a in it {
            match out.as_mut() {
                None => out = Some(a.clone()),
                Some(o) => {
                    o.fragments += a.fragments;
                    o.xruns += a.xruns;
                    o.worst_response_ns = o.worst_response_ns.max(a.worst_response_ns);
                    for (x, y) in o.late_by_buffers.iter_mut().zip(&a.late_by_buffers) {
                        *x += y;
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hist::Layout;

    const P: u64 = AUDIO_PERIOD_NS;

    #[test]
    fn tally_counts_each_buffer_count_on_a_known_sequence() {
        // Responses: well inside one period, just over one period, just over two, over three,
        // exactly one period (on time: the deadline is inclusive).
        let seq = [P / 4, P + 1, 2 * P + 1, 3 * P + 5, P];
        let mut t = AudioTally::new(P, 2);
        for r in seq {
            t.record(r);
        }
        assert_eq!(t.fragments, 5);
        // B=1: every fragment with any work is late; B=2: > P; B=3: > 2P; B=4: > 3P.
        assert_eq!(t.late_by_buffers, [5, 3, 2, 1]);
        assert_eq!(t.xruns, 3, "configured B=2 equals the B=2 column");
        assert_eq!(t.worst_response_ns, 3 * P + 5);
        let r = t.to_record();
        assert_eq!(r.worst_lateness_ns(), Some(2 * P + 5));
        assert_eq!(r.frames(), 64);
        assert_eq!(
            r.verdict_sentence(),
            "1 × 64 frames would have dropped out 5 times; 2 × 64 frames would have dropped out 3 times; \
             3 × 64 frames would have dropped out 2 times; 4 × 64 frames would have dropped out once"
        );
    }

    #[test]
    fn more_buffers_than_the_verdict_covers() {
        let mut t = AudioTally::new(1_000_000, 6);
        t.record(5_000_001);
        t.record(4_999_999);
        assert_eq!(t.xruns, 1);
        assert_eq!(t.late_by_buffers, [2, 2, 2, 2]);
        assert_eq!(t.to_record().worst_lateness_ns(), Some(1));
    }

    #[test]
    fn never_late_and_rates() {
        let mut t = AudioTally::new(P, 3);
        for _ in 0..1000 {
            t.record(P / 2);
        }
        let r = t.to_record();
        assert_eq!(r.xruns, 0);
        assert_eq!(r.worst_lateness_ns(), None);
        assert_eq!(r.late_by_buffers, vec![1000, 0, 0, 0]);
        assert!(r.verdict_sentence().contains("2 × 64 frames never"));
        let mut late = r.clone();
        late.xruns = 3;
        assert!((late.xruns_per_minute(30_000_000_000) - 6.0).abs() < 1e-9);
        let m = AudioRecord::merged([&r, &late]).unwrap();
        assert_eq!(m.fragments, 2000);
        assert_eq!(m.xruns, 3);
        assert_eq!(m.late_by_buffers, vec![2000, 0, 0, 0]);
    }

    #[test]
    fn exec_summary_finds_the_slow_run() {
        let mut h = Histogram::new(Layout::default());
        for _ in 0..999 {
            h.record(200_000);
        }
        h.record(400_000);
        let s = ExecSummary::of(&h).unwrap();
        assert_eq!(s.min_ns, 200_000);
        assert_eq!(s.max_ns, 400_000);
        assert_eq!(s.max_dev_ns, 200_000);
        assert!(s.p50_ns >= 200_000 && s.p50_ns <= 201_000);
        assert!(ExecSummary::of(&Histogram::new(Layout::default())).is_none());
    }

    #[test]
    fn old_records_without_mode_fields_load() {
        let m: CpuMode = serde_json::from_str("{}").unwrap();
        assert_eq!(m, CpuMode::default());
        let p: ModeParams = serde_json::from_str("{}").unwrap();
        assert_eq!(p, ModeParams::default());
        assert_eq!(serde_json::to_string(&p).unwrap(), "{}");
    }
}

impl NoiseSource {
    /// What the kernel counted on CPU `cpu` (its column in `/proc/interrupts` and
    /// `/proc/softirqs`: the CPU's number when every CPU is online) over the run: each
    /// interrupt line and softirq vector that fired there, most frequent first. `NMI` is
    /// kind `nmi`; counts only (`ns` null).
    pub fn counted(activity: &crate::activity::ActivityRecord, cpu: u32) -> Vec<NoiseSource> {
        let at = |d: &crate::activity::CounterDelta| d.per_cpu.get(cpu as usize).copied();
        let mut out: Vec<NoiseSource> = Vec::new();
        for (name, d) in &activity.interrupts {
            let Some(count) = at(d).filter(|&n| n > 0) else {
                continue;
            };
            let kind = if name == "NMI" { "nmi" } else { "irq" };
            let name = if d.desc.is_empty() {
                name.clone()
            } else {
                format!("{name} {}", d.desc)
            };
            out.push(NoiseSource {
                kind: kind.into(),
                name,
                count,
                ns: None,
            });
        }
        for (name, d) in &activity.softirqs {
            if let Some(count) = at(d).filter(|&n| n > 0) {
                out.push(NoiseSource {
                    kind: "softirq".into(),
                    name: name.clone(),
                    count,
                    ns: None,
                });
            }
        }
        out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.name.cmp(&b.name)));
        out
    }
}

#[cfg(test)]
mod noise_tests {
    use super::*;
    use crate::activity::{ActivityRecord, CounterDelta};

    fn delta(per_cpu: &[u64], desc: &str) -> CounterDelta {
        CounterDelta {
            total: per_cpu.iter().sum(),
            per_s: 0.0,
            per_cpu: per_cpu.to_vec(),
            desc: desc.into(),
        }
    }

    /// Each CPU gets its own column's counts, NMIs apart, the most frequent first, nothing
    /// that did not fire there.
    #[test]
    fn sources_are_the_cpus_own_counts() {
        let mut a = ActivityRecord {
            interval_s: 1.0,
            softirqs: Default::default(),
            interrupts: Default::default(),
            loadavg_start: None,
            loadavg_end: None,
            from: None,
            scratch_dir: None,
        };
        a.interrupts
            .insert("LOC".into(), delta(&[900, 1000], "Local timer interrupts"));
        a.interrupts.insert("NMI".into(), delta(&[0, 3], ""));
        a.interrupts
            .insert("24".into(), delta(&[7, 0], "PCI-MSIX virtio0-input.0"));
        a.softirqs.insert("TIMER".into(), delta(&[5, 40], ""));
        a.softirqs.insert("RCU".into(), delta(&[0, 0], ""));
        let s = NoiseSource::counted(&a, 1);
        let got: Vec<(&str, &str, u64)> = s
            .iter()
            .map(|s| (s.kind.as_str(), s.name.as_str(), s.count))
            .collect();
        assert_eq!(
            got,
            [
                ("irq", "LOC Local timer interrupts", 1000),
                ("softirq", "TIMER", 40),
                ("nmi", "NMI", 3)
            ]
        );
        assert!(s.iter().all(|s| s.ns.is_none()));
        assert_eq!(NoiseSource::counted(&a, 0).len(), 3);
        assert!(NoiseSource::counted(&a, 7).is_empty());
    }

    #[test]
    fn available_share() {
        let r = NoiseRecord {
            method: "user-loop".into(),
            threshold_ns: 1_000,
            started_ns: 5,
            runtime_ns: 1_000_000,
            noise_ns: 250_000,
            loops: 10,
            dropped: 0,
            sources: vec![],
            per_second_ns: vec![],
        };
        assert_eq!(r.available_pct(), Some(75.0));
        assert_eq!(NoiseRecord { runtime_ns: 0, ..r }.available_pct(), None);
    }
}
