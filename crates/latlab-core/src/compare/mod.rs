//! Comparison of N runs (the first is the baseline), honest about uncertainty.
//!
//! What the field reads when it compares kernels: Williams' statistics blocks side by side,
//! Morton's table of counts per log2-millisecond bucket (0-1, 1-2, 2-4 … 128-256 ms) and a
//! finer 1-2-5 µs variant for modern kernels, and the percentile ladder with each run's ratio
//! to the baseline. Plus what differs between the runs' configuration, machine and inventory.
//!
//! **Uncertainty.** A high percentile of n samples rests on the few samples above it: p99.999
//! of 10⁵ samples is the maximum, one sample. Each ladder cell says how many samples lie at or
//! above its rank, and carries a 95 % distribution-free confidence interval from order
//! statistics: the number of samples above the true p-quantile is Binomial(n, 1−p), so the
//! interval is [X₍ₗ₎, X₍ᵤ₎] with l, u the 2.5 % and 97.5 % points of that binomial (computed
//! exactly through its Poisson limit when n(1−p) < 500, through the normal approximation
//! otherwise — both standard for n ≥ 100). The values X₍ᵣ₎ come from the histogram, so the
//! interval's ends are bucket bounds (lower bound of the bucket of rank l, upper bound of the
//! bucket of rank u): the interval only widens. A difference between two runs whose intervals
//! overlap is flagged "within noise". A run is "too short" for a percentile when fewer than
//! [`MIN_TAIL`] samples lie above it (p99.999 needs 10⁶ samples).
//!
//! **Ratios.** Each ratio to the baseline gets a 95 % interval and a verdict (`better`,
//! `worse`, `within noise`: whether the interval lies wholly below 1, above 1, or holds it).
//! The interval comes from a block bootstrap over the runs' per-minute histograms
//! ([`crate::bootstrap`]: consecutive samples are not independent, minutes nearly are); a run
//! with fewer than [`crate::bootstrap::MIN_BLOCKS`] of them falls back to the order-statistic
//! intervals above, combined as [lo_B/hi_A, hi_B/lo_A] (samples taken as independent, said
//! in the flags). Each run's tail estimate ([`crate::tail`]) comes along for the gates.

mod causes;
mod changes;

pub use causes::{CauseChange, CauseIn};

use serde::Serialize;

use crate::bootstrap::{self, percentile_interval};
use crate::hist::{Histogram, Quantile};
use crate::model::RunModel;
pub use crate::ranks::{bucket_at_rank, rank_interval, rank_interval_at};
use crate::stats::{Stats, LADDER};
use crate::tail::TailEstimate;
use crate::units::Nanos;

/// Fewer samples than this above a percentile's rank make the run too short for it.
pub const MIN_TAIL: u64 = 10;

/// Morton's buckets, in ms: 0-1, 1-2, 2-4 … 128-256, then ≥ 256.
pub const MS_EDGES: [Nanos; 10] = [
    0,
    1_000_000,
    2_000_000,
    4_000_000,
    8_000_000,
    16_000_000,
    32_000_000,
    64_000_000,
    128_000_000,
    256_000_000,
];

/// The finer variant (1-2-5 µs steps) for kernels whose worst case is below a millisecond.
pub const US_EDGES: [Nanos; 11] = [
    0, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000, 2_000_000, 5_000_000,
    10_000_000,
];

/// One table of counts per latency range, one row per run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BucketTable {
    /// Range edges in ns; the last range is open (≥ the last edge).
    pub edges_ns: Vec<Nanos>,
    /// Counts per run and range (`edges.len()` ranges).
    pub counts: Vec<Vec<u64>>,
    /// Samples known only to be above the histogram limit, per run (not in `counts`).
    pub unknown_above: Vec<u64>,
}

/// A percentile of one run, with what it rests on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    /// Upper bound of the percentile (`None`: among samples above the limit, value unknown).
    pub value_ns: Option<Nanos>,
    /// Ratio to the baseline's value (`None` when either is unknown or the baseline is 0).
    pub ratio: Option<f64>,
    /// Samples at or above the percentile's rank: how many the value rests on.
    pub tail_samples: u64,
    /// 95 % confidence interval (bucket bounds; `None` ends fall above the limit or the data).
    pub ci_low_ns: Option<Nanos>,
    pub ci_high_ns: Option<Nanos>,
    /// Fewer than [`MIN_TAIL`] samples above: the run is too short for this percentile.
    pub too_short: bool,
    /// The difference to the baseline is within noise: the ratio's 95 % interval holds 1
    /// (or, without one, this run's interval overlaps the baseline's).
    pub within_noise: bool,
    /// 95 % interval of `ratio` (`None` for the baseline, for `max`, or when unknown).
    pub ratio_lo: Option<f64>,
    pub ratio_hi: Option<f64>,
    /// `better`, `worse` or `within noise` against the baseline, from the ratio's interval
    /// (`None` for the baseline, for `max`, or without an interval).
    pub verdict: Option<&'static str>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LadderRow {
    pub label: String,
    pub cells: Vec<Cell>,
}

/// A configuration, machine or inventory key whose values differ between runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub key: String,
    /// One value per run, rendered compactly (`None`: absent).
    pub values: Vec<Option<String>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSummary {
    /// The run's label; a label two runs share gets the run's start time (or its place).
    pub label: String,
    pub source: String,
    pub interval_ns: Option<Nanos>,
    pub loads: Vec<String>,
    pub stats: Stats,
    /// How this run's ratio intervals were made: a block bootstrap over its per-minute
    /// histograms, or order statistics (samples taken as independent).
    pub noise: String,
}

/// What a run brings to the intervals of ratios and gates (not serialized): the bootstrap
/// replicates of each ladder percentile (`None`: too few per-minute histograms) and the total
/// histogram for order-statistic intervals.
#[derive(Debug, Clone, PartialEq)]
pub struct RunNoise {
    pub replicates: Option<Vec<Vec<f64>>>,
    pub hist: Option<Histogram>,
}

/// The comparison of N runs. Serializes as the `compare --format json` output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub runs: Vec<RunSummary>,
    pub ladder: Vec<LadderRow>,
    pub buckets_ms: BucketTable,
    pub buckets_us: BucketTable,
    pub changes: Vec<Change>,
    /// What delayed each run's traced spikes, cause by cause (empty when no run was traced).
    pub causes: Vec<CauseChange>,
    /// Spikes each run traced (what `causes` rests on).
    pub traced: Vec<usize>,
    /// Warnings a reader must see before trusting a difference.
    pub flags: Vec<String>,
    /// How the confidence intervals are computed.
    pub method: String,
    /// Each run's tail estimate, all CPUs merged (`None`: the run has no CPU).
    pub tails: Vec<Option<TailEstimate>>,
    #[serde(skip)]
    pub noise: Vec<RunNoise>,
}

/// The percentile ladder (and the max): each run's value with its interval, and its ratio to
/// the baseline's with the ratio's 95 % interval and verdict.
fn ladder_rows(hists: &[Option<&Histogram>], noise: &[RunNoise]) -> Vec<LadderRow> {
    let mut ladder = Vec::new();
    let mut qs: Vec<(&str, Quantile)> = LADDER.to_vec();
    qs.push(("max", Quantile::MAX));
    for (row, (label, q)) in qs.into_iter().enumerate() {
        let mut cells: Vec<Cell> = hists.iter().map(|h| cell(*h, q)).collect();
        let base = cells[0].clone();
        for (i, c) in cells.iter_mut().enumerate() {
            c.ratio = match (base.value_ns, c.value_ns) {
                (Some(b), Some(v)) if b > 0 => Some(v as f64 / b as f64),
                _ => None,
            };
            c.within_noise = overlaps(&base, c);
            if i > 0 && label != "max" && c.ratio.is_some() {
                if let Some((lo, hi)) = ratio_interval(noise, i, row, 0.95) {
                    c.ratio_lo = Some(lo);
                    c.ratio_hi = Some(hi);
                    c.within_noise = lo <= 1.0 && 1.0 <= hi;
                    c.verdict = Some(if lo > 1.0 {
                        "worse"
                    } else if hi < 1.0 {
                        "better"
                    } else {
                        "within noise"
                    });
                }
            }
        }
        ladder.push(LadderRow {
            label: label.to_string(),
            cells,
        });
    }
    ladder
}

/// Compare runs; the first is the baseline.
pub fn compare(runs: &[RunModel]) -> Comparison {
    let hists: Vec<Option<&Histogram>> = runs.iter().map(|r| r.total_hist.as_ref()).collect();
    let ladder_qs: Vec<Quantile> = LADDER.iter().map(|x| x.1).collect();
    let noise: Vec<RunNoise> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| RunNoise {
            replicates: match (&r.record.intervals, &r.total_hist) {
                (Some(iv), Some(h)) => bootstrap::replicates(
                    iv,
                    h.layout(),
                    &ladder_qs,
                    bootstrap::REPLICATES,
                    0x5eed_0000 + i as u64,
                ),
                _ => None,
            },
            hist: r.total_hist.clone(),
        })
        .collect();
    let ladder = ladder_rows(&hists, &noise);
    let buckets_ms = table(&hists, &MS_EDGES);
    let buckets_us = table(&hists, &US_EDGES);
    let changes = changes::changes(runs);
    let labels = changes::distinct_labels(runs);
    let causes = causes::causes(runs);
    let mut flags = Vec::new();
    for (r, l) in runs.iter().zip(&labels) {
        if r.total.samples == 0 {
            flags.push(format!("run '{l}' has no samples"));
        }
    }
    for row in &ladder {
        let short: Vec<&str> = row
            .cells
            .iter()
            .zip(runs.iter().zip(&labels))
            .filter(|(c, (r, _))| c.too_short && r.total.samples > 0)
            .map(|(_, (_, l))| l.as_str())
            .collect();
        if !short.is_empty() && row.label != "max" {
            flags.push(too_short_flag(&row.label, &short.join(", ")));
        }
    }
    for row in &ladder {
        let noisy: Vec<&str> = row
            .cells
            .iter()
            .zip(&labels)
            .skip(1)
            .filter(|(c, _)| c.within_noise && c.ratio.is_some_and(|r| r != 1.0))
            .map(|(_, l)| l.as_str())
            .collect();
        if !noisy.is_empty() && row.label != "max" {
            flags.push(format!(
                "{}: the difference to the baseline is within noise for {} (the ratio's 95 % interval holds 1)",
                row.label,
                noisy.join(", ")
            ));
        }
    }
    let iid: Vec<&str> = runs
        .iter()
        .zip(noise.iter().zip(&labels))
        .filter(|(r, (n, _))| n.replicates.is_none() && r.total.samples > 0)
        .map(|(_, (_, l))| l.as_str())
        .collect();
    if !iid.is_empty() && runs.len() > 1 {
        flags.push(format!(
            "no per-minute histograms to bootstrap (fewer than {}) for {}: their ratio intervals take the samples as independent, which understates the noise of a machine whose late wake-ups come in bursts",
            bootstrap::MIN_BLOCKS,
            iid.join(", ")
        ));
    }
    let intervals: Vec<Option<Nanos>> = runs.iter().map(|r| r.record.config.interval_ns).collect();
    if intervals.iter().any(|i| *i != intervals[0]) {
        flags.push(format!(
            "the runs have different intervals ({}): sample counts and tails are not like for like",
            intervals
                .iter()
                .map(|i| i.map_or("unknown".into(), |v| crate::units::Human(v).to_string()))
                .collect::<Vec<_>>()
                .join(" / ")
        ));
    }
    flags.extend(samples_flag(runs, &labels));
    let loads: Vec<&Vec<String>> = runs.iter().map(|r| &r.record.config.loads).collect();
    if loads.iter().any(|l| *l != loads[0]) {
        flags.push(format!(
            "the runs had different loads ({}): compare kernels under the same load",
            loads
                .iter()
                .map(|l| if l.is_empty() {
                    "none".into()
                } else {
                    l.join("+")
                })
                .collect::<Vec<_>>()
                .join(" / ")
        ));
    }
    if runs.iter().any(|r| r.total.unknown_above > 0) {
        flags.push("some runs have samples above their histogram limit whose values are unknown: percentiles among them show as \"> limit\"".into());
    }
    Comparison {
        runs: runs
            .iter()
            .zip(noise.iter().zip(labels))
            .map(|(r, (n, label))| RunSummary {
                label,
                source: r.record.source.as_str().into(),
                interval_ns: r.record.config.interval_ns,
                loads: r.record.config.loads.clone(),
                stats: r.total.clone(),
                noise: match &n.replicates {
                    Some(_) => format!(
                        "block bootstrap over its {} per-{} histograms ({} replicates)",
                        r.record.intervals.as_ref().map_or(0, |iv| iv
                            .intervals
                            .iter()
                            .filter(|x| !x.is_empty())
                            .count()),
                        r.record
                            .intervals
                            .as_ref()
                            .map_or("minute".into(), |iv| crate::units::format_duration(
                                iv.interval_ns
                            )),
                        bootstrap::REPLICATES
                    ),
                    None => "order statistics (no per-minute histograms to bootstrap: samples taken as independent)".into(),
                },
            })
            .collect(),
        ladder,
        buckets_ms,
        buckets_us,
        changes,
        causes,
        traced: runs.iter().map(|r| r.record.spikes.len()).collect(),
        flags,
        method: "each run's 95% interval: distribution-free order statistics, ranks from Binomial(n, 1-p) (Poisson limit when n(1-p) < 500, normal approximation otherwise), ends at histogram bucket bounds; each ratio's 95% interval: percentile interval of a block bootstrap over the per-minute histograms of both runs (400 replicates), or, for a run without them, the two runs' order-statistic intervals combined as [lo_B/hi_A, hi_B/lo_A]; verdict: worse or better when the ratio's interval lies wholly above or below 1".into(),
        tails: runs.iter().map(|r| crate::tail::of_run(r).0).collect(),
        noise,
    }
}

/// The `level` interval of run `i`'s value in ladder row `row` (ns): the bootstrap percentile
/// interval, or the order-statistic one.
pub fn value_interval(noise: &[RunNoise], i: usize, row: usize, level: f64) -> Option<(f64, f64)> {
    let n = noise.get(i)?;
    if let Some(r) = &n.replicates {
        let mut v = r.get(row)?.clone();
        return percentile_interval(&mut v, level);
    }
    let h = n.hist.as_ref().filter(|h| h.count() > 0)?;
    let q = LADDER.get(row)?.1;
    let (lo, hi) = rank_interval_at(h.count(), q, level);
    Some((
        bucket_at_rank(h, lo)?.0 as f64,
        bucket_at_rank(h, hi)?.1 as f64,
    ))
}

/// The `level` interval of the ratio of run `i` to run 0 in ladder row `row`: the percentile
/// interval of the ratios of independent bootstrap replicates when both runs have them, else
/// the two runs' intervals combined (conservative).
pub fn ratio_interval(noise: &[RunNoise], i: usize, row: usize, level: f64) -> Option<(f64, f64)> {
    if let (Some(a), Some(b)) = (
        noise.first().and_then(|n| n.replicates.as_ref()),
        noise.get(i).and_then(|n| n.replicates.as_ref()),
    ) {
        let mut r: Vec<f64> = a
            .get(row)?
            .iter()
            .zip(b.get(row)?)
            .filter(|(x, _)| **x > 0.0)
            .map(|(x, y)| y / x)
            .collect();
        return percentile_interval(&mut r, level);
    }
    let (alo, ahi) = value_interval(noise, 0, row, level)?;
    let (blo, bhi) = value_interval(noise, i, row, level)?;
    if alo <= 0.0 {
        return None;
    }
    Some((blo / ahi, bhi / alo))
}

/// Samples at or above the rank of quantile `q` among `n`: how many its value rests on.
pub fn tail_samples(n: u64, q: Quantile) -> u64 {
    if n == 0 {
        return 0;
    }
    n - q.rank(n) + 1
}

/// The rule `compare` flags by (and single-run reports reuse): a percentile resting on
/// [`MIN_TAIL`] samples or fewer is "too short". An empty histogram is too short for all.
pub fn too_short(n: u64, q: Quantile) -> bool {
    tail_samples(n, q) <= MIN_TAIL
}

/// The flag sentence for a percentile `label` that is too short for `who`.
pub fn too_short_flag(label: &str, who: &str) -> String {
    format!(
        "too short for {label}: {who} (fewer than {MIN_TAIL} samples above it; needs ≥ {} samples)",
        needed_samples(label)
    )
}

/// Samples a percentile needs to have [`MIN_TAIL`] above it.
pub fn needed_samples(label: &str) -> u64 {
    LADDER
        .iter()
        .find(|(l, _)| *l == label)
        .map(|(_, q)| MIN_TAIL * q.den / (q.den - q.num).max(1))
        .unwrap_or(0)
}

fn cell(h: Option<&Histogram>, q: Quantile) -> Cell {
    let Some(h) = h.filter(|h| h.count() > 0) else {
        return Cell {
            value_ns: None,
            ratio: None,
            tail_samples: 0,
            ci_low_ns: None,
            ci_high_ns: None,
            too_short: true,
            within_noise: false,
            ratio_lo: None,
            ratio_hi: None,
            verdict: None,
        };
    };
    let n = h.count();
    let tail = tail_samples(n, q);
    let (lo_rank, hi_rank) = rank_interval(n, q);
    Cell {
        value_ns: h.quantile(q),
        ratio: None,
        tail_samples: tail,
        ci_low_ns: bucket_at_rank(h, lo_rank).map(|b| b.0),
        ci_high_ns: bucket_at_rank(h, hi_rank).map(|b| b.1),
        too_short: too_short(n, q),
        within_noise: false,
        ratio_lo: None,
        ratio_hi: None,
        verdict: None,
    }
}

/// Two cells' intervals overlap (unknown ends are open: above the limit, they may overlap).
fn overlaps(a: &Cell, b: &Cell) -> bool {
    let lo = |c: &Cell| c.ci_low_ns.unwrap_or(u64::MAX);
    let hi = |c: &Cell| c.ci_high_ns.unwrap_or(u64::MAX);
    if a.tail_samples == 0 || b.tail_samples == 0 {
        return false;
    }
    lo(a) <= hi(b) && lo(b) <= hi(a)
}

fn table(hists: &[Option<&Histogram>], edges: &[Nanos]) -> BucketTable {
    let mut counts = Vec::new();
    let mut unknown = Vec::new();
    for h in hists {
        let mut row = vec![0u64; edges.len()];
        if let Some(h) = h {
            // A bucket goes to the range of its lower bound (exact for 1 µs buckets and
            // edges that are whole µs below the limit).
            for (lo, _, c) in h.buckets() {
                let i = edges.partition_point(|&e| e <= lo).saturating_sub(1);
                row[i] += c;
            }
            unknown.push(h.unknown_above());
        } else {
            unknown.push(0);
        }
        counts.push(row);
    }
    BucketTable {
        edges_ns: edges.to_vec(),
        counts,
        unknown_above: unknown,
    }
}

/// The caution when the runs' samples are different things (a wake-up, an interference, a
/// loop of oslat's): percentiles are then not like for like.
fn samples_flag(runs: &[RunModel], labels: &[String]) -> Option<String> {
    let samples: Vec<String> = runs.iter().map(|r| sample_kind(&r.record)).collect();
    samples.iter().any(|k| *k != samples[0]).then(|| {
        format!(
            "the runs' samples are not the same thing ({}): their percentiles are not like for like; compare the max (and for noise the time lost, in each run's report)",
            labels
                .iter()
                .zip(&samples)
                .map(|(l, k)| format!("{l}: {k}"))
                .collect::<Vec<_>>()
                .join(" / ")
        )
    })
}
/// What one sample of a run is, for the comparison's caution: a wake-up (every mode that
/// wakes a thread), an interference of latlab's noise mode, or a loop of oslat's.
fn sample_kind(r: &crate::record::RunRecord) -> String {
    if r.config.mode != "noise" {
        return "wake-ups".into();
    }
    match r
        .cpus
        .iter()
        .find_map(|c| c.mode.as_ref().and_then(|m| m.noise.as_ref()))
    {
        Some(n) => format!(
            "interferences of at least {}",
            crate::units::Human(n.threshold_ns)
        ),
        None => "every loop of a spinning thread (oslat)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hist::Layout;
    use crate::record::*;

    fn run(label: &str, vals: impl Iterator<Item = u64>, interval: u64) -> RunModel {
        let mut h = Histogram::new(Layout::default());
        for v in vals {
            h.record(v);
        }
        let r = RunRecord {
            schema_version: SCHEMA_VERSION,
            run_id: None,
            label: label.into(),
            source: Source::Latlab,
            complete: true,
            tool_version: None,
            command_line: None,
            started_at: None,
            ended_at: None,
            config: RunConfig {
                backend: "sim".into(),
                interval_ns: Some(interval),
                ..RunConfig::default()
            },
            machine: Machine {
                kernel_release: Some(format!("6.1-{label}")),
                ..Machine::default()
            },
            inventory: None,
            total: Stats::default(),
            cpus: vec![CpuRecord {
                cpu: 0,
                stats: Stats::default(),
                histogram: h.to_record(),
                per_second_max_ns: vec![],
                top_spikes: vec![],
                thread: ThreadInfo::default(),
                mode: None,
            }],
            spikes: vec![],
            trace: None,
            loads: vec![],
            activity: None,
            scenario: None,
            profile: None,
            intervals: None,
            until: None,
            warnings: vec![],
            notes: vec![],
        };
        RunModel::new(r).unwrap()
    }

    #[test]
    fn morton_table_counts() {
        let a = run(
            "a",
            [500_000u64, 1_500_000, 3_000_000, 3_500_000, 300_000_000].into_iter(),
            1_000_000,
        );
        let c = compare(&[a.clone(), a]);
        assert_eq!(c.buckets_ms.counts[0], vec![1, 1, 2, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(c.buckets_us.counts[0][5], 0);
        assert_eq!(c.buckets_us.counts[0].iter().sum::<u64>(), 5);
        assert!(c.changes.is_empty());
    }

    /// Two runs on one machine a minute apart: interrupt counts, free memory and steal time
    /// moved, the set-up did not. Only the governor change is "what changed".
    #[test]
    fn what_changed_ignores_readings_of_the_moment() {
        let inv = |irq_count: u64, avail: u64, steal: f64, governor: &str| {
            serde_json::json!({
                "memory": {"total_kb": 1000, "available_kb": avail, "swap_free_kb": avail},
                "virt": {"hypervisor": true, "steal_since_boot": steal, "steal_sampled": steal},
                "irqs": {"busiest": [{"irq": 36, "name": "virtio1", "count": irq_count,
                                      "affinity": "0-1"}]},
                "cpufreq": {"0": {"governor": governor}},
            })
        };
        let mut a = run("a", [1000u64].into_iter(), 1_000_000);
        let mut b = a.clone();
        a.record.inventory = Some(inv(56_622, 24_121_320, 0.0016, "performance"));
        b.record.inventory = Some(inv(56_858, 24_058_248, 0.0017, "powersave"));
        let c = compare(&[a.clone(), b]);
        let keys: Vec<&str> = c.changes.iter().map(|ch| ch.key.as_str()).collect();
        assert_eq!(keys, ["inventory.cpufreq.0.governor"]);
        // An affinity is set-up: moving an IRQ is a change.
        let mut d = a.clone();
        let mut i = inv(56_622, 24_121_320, 0.0016, "performance");
        i["irqs"]["busiest"][0]["affinity"] = "1".into();
        d.record.inventory = Some(i);
        let c = compare(&[a, d]);
        let moved: Vec<_> = c
            .changes
            .iter()
            .map(|ch| (ch.key.as_str(), &ch.values))
            .collect();
        assert_eq!(
            moved,
            [(
                "inventory.irqs.busiest[irq=36].affinity",
                &vec![Some("0-1".to_string()), Some("1".to_string())]
            )]
        );
    }

    /// Two runs with the default label (the kernel's release) on one machine: told apart by
    /// their start times everywhere the label shows; without start times, by their places.
    #[test]
    fn runs_sharing_a_label_are_told_apart() {
        let mut a = run("6.18.0", [1000u64].into_iter(), 1_000_000);
        let mut b = a.clone();
        a.record.started_at = Some("2026-11-27T22:29:08Z".into());
        b.record.started_at = Some("2026-11-27T22:31:40Z".into());
        let c = compare(&[
            a.clone(),
            b.clone(),
            run("other", [1000u64].into_iter(), 1_000_000),
        ]);
        let labels: Vec<&str> = c.runs.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "6.18.0 (2026-11-27T22:29:08Z)",
                "6.18.0 (2026-11-27T22:31:40Z)",
                "other"
            ]
        );
        a.record.started_at = None;
        b.record.started_at = None;
        let c = compare(&[a, b]);
        let labels: Vec<&str> = c.runs.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["6.18.0 #1", "6.18.0 #2"]);
    }

    /// The causes of two traced runs side by side: the RCU softirq that dominated the first
    /// run's spikes and shrank in the second, a cause only one run had, shares of each run's
    /// own summed spike latency.
    #[test]
    fn causes_of_traced_runs_side_by_side() {
        let spike = |lat: u64, causes: &[(CauseKind, &str, u64)]| SpikeRecord {
            cpu: 0,
            at_ns: 0,
            latency_ns: lat,
            causes: causes
                .iter()
                .map(|(kind, name, ns)| Cause {
                    kind: *kind,
                    name: (*name).into(),
                    pid: 0,
                    prio: 0,
                    ns: *ns,
                    context: None,
                })
                .collect(),
            trace_file: None,
            timeline: vec![],
            timeline_events: vec![],
            lanes: None,
            steal: None,
            others: None,
            timerlat: None,
        };
        let mut a = run("before", [1000u64].into_iter(), 1_000_000);
        let mut b = run("after", [1000u64].into_iter(), 1_000_000);
        let untraced = a.clone();
        a.record.spikes = vec![
            spike(4_000_000, &[(CauseKind::Softirq, "RCU", 3_000_000)]),
            spike(1_000_000, &[(CauseKind::Irq, "ttyS0", 500_000)]),
        ];
        b.record.spikes = vec![spike(1_000_000, &[(CauseKind::Softirq, "RCU", 400_000)])];
        let c = compare(&[a, b, untraced]);
        assert_eq!(c.traced, [2, 1, 0]);
        assert_eq!(c.causes.len(), 2);
        let rcu = &c.causes[0];
        assert_eq!((rcu.kind, rcu.name.as_str()), ("softirq", "RCU"));
        let (x, y) = (rcu.runs[0].as_ref().unwrap(), rcu.runs[1].as_ref().unwrap());
        assert_eq!(
            (x.total_ns, x.spikes, y.total_ns, y.spikes),
            (3_000_000, 1, 400_000, 1)
        );
        assert!((x.share - 0.6).abs() < 1e-9 && (y.share - 0.4).abs() < 1e-9);
        assert!(rcu.runs[2].is_none());
        assert_eq!(c.causes[1].name, "ttyS0");
        assert!(c.causes[1].runs[1].is_none());
        // No run traced: no causes.
        let plain = run("p", [1000u64].into_iter(), 1_000_000);
        assert!(compare(&[plain.clone(), plain]).causes.is_empty());
    }

    #[test]
    fn ratio_noise_and_short_runs() {
        // 1000 samples, 1..=1000 µs vs 2..=2000 µs step 2: p50 doubles, far outside noise.
        let a = run("a", (1..=1000u64).map(|v| v * 1000), 1_000_000);
        let b = run("b", (1..=1000u64).map(|v| v * 2000), 500_000);
        let c = compare(&[a, b]);
        let p50 = &c.ladder[0];
        assert_eq!(p50.label, "p50");
        assert_eq!(p50.cells[0].value_ns, Some(500_000 + 1000));
        let r = p50.cells[1].ratio.unwrap();
        assert!((r - 2.0).abs() < 0.01, "{r}");
        assert!(!p50.cells[1].within_noise);
        assert_eq!(p50.cells[0].tail_samples, 501);
        // p99.9 of 1000 samples rests on 2 samples: too short, and flagged.
        let p999 = &c.ladder[3];
        assert!(p999.cells[0].too_short);
        assert!(c
            .flags
            .iter()
            .any(|f| f.starts_with("too short for p99.9:")));
        assert!(c.flags.iter().any(|f| f.contains("different intervals")));
        assert!(c
            .changes
            .iter()
            .any(|ch| ch.key == "machine.kernel_release"));
        assert!(c.changes.iter().any(|ch| ch.key == "config.interval_ns"));
    }

    #[test]
    fn same_distribution_is_within_noise() {
        let a = run(
            "a",
            (0..20_000u64).map(|i| 10_000 + (i * 7919) % 50_000),
            1_000_000,
        );
        let b = run(
            "b",
            (0..20_000u64).map(|i| 10_000 + (i * 104_729) % 50_000),
            1_000_000,
        );
        let c = compare(&[a, b]);
        for row in &c.ladder[..3] {
            assert!(row.cells[1].within_noise, "{}", row.label);
        }
    }
}
