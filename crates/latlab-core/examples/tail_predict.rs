//! Does a tail estimate predict what comes next? (issue 29, "Prediction on real data")
//!
//! `cargo run --release -p latlab-core --example tail_predict -- RUN.json [MINUTES]`
//!
//! The run's per-minute histograms (run.json `intervals`, all CPUs merged) are cut into
//! consecutive blocks of 2 × MINUTES (default 2): the first half's tail estimate (with its 95 %
//! interval) at exceedance probabilities 1e-3 and 1e-4 is compared with the second half's own
//! empirical quantile at the same probability, where the second half holds at least 10
//! samples above it. A hit: the second half's quantile lies within the first half's interval.
//! Printed: each prediction, the hit rate, and the same for the naive predictor (the first
//! half's own empirical quantile with its order-statistic interval), for comparison.

use latlab_core::hist::{Histogram, Layout, Quantile};
use latlab_core::ranks::{bucket_at_rank, rank_interval};
use latlab_core::record::RunRecord;
use latlab_core::tail::{estimate, TailContext};

fn merged(minutes: &[Vec<[u64; 2]>], layout: Layout) -> Histogram {
    let mut h = Histogram::new(layout);
    for m in minutes {
        for &[i, n] in m {
            if (i as usize) < layout.len() {
                let v = layout.lower(i as usize);
                for _ in 0..n {
                    h.record(v);
                }
            }
        }
    }
    h
}

/// p as a quantile 1 − p, in parts per 10⁶.
fn quantile(p: f64) -> Quantile {
    let den = 1_000_000u64;
    Quantile {
        num: den - (p * den as f64).round() as u64,
        den,
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: tail_predict RUN.json [MINUTES]");
    let half: usize = args.next().map_or(2, |m| m.parse().expect("MINUTES"));
    let rec: RunRecord = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let iv = rec
        .intervals
        .as_ref()
        .expect("run.json has per-minute histograms");
    let layout = Histogram::from_record(&rec.cpus[0].histogram)
        .unwrap()
        .layout();
    let (mut hits, mut tries, mut naive_hits) = (0, 0, 0);
    for block in iv.intervals.chunks_exact(2 * half) {
        let (a, b) = (
            merged(&block[..half], layout),
            merged(&block[half..], layout),
        );
        let ctx = TailContext {
            per_second: vec![],
            intervals: None,
            wakeups_per_s: None,
        };
        let est = estimate(&a, &ctx);
        for p in [1e-3, 1e-4] {
            if (b.count() as f64) * p < 10.0 {
                continue;
            }
            let q = quantile(p);
            let seen = b.quantile(q).unwrap();
            let (lo_r, hi_r) = rank_interval(a.count(), q);
            let naive = (
                bucket_at_rank(&a, lo_r).map(|x| x.0),
                bucket_at_rank(&a, hi_r).map(|x| x.1),
            );
            let naive_hit = matches!(naive, (Some(lo), Some(hi)) if lo <= seen && seen <= hi);
            match est.at(p, 0.95) {
                Ok((ns, Some(lo), Some(hi))) => {
                    let hit = lo <= seen && seen <= hi;
                    tries += 1;
                    hits += hit as u32;
                    naive_hits += naive_hit as u32;
                    println!(
                        "p {p:e}: predicted {ns} ns [{lo}, {hi}], seen {seen} ns: {}; naive [{:?}, {:?}]: {}",
                        if hit { "hit" } else { "miss" },
                        naive.0,
                        naive.1,
                        if naive_hit { "hit" } else { "miss" }
                    );
                }
                Ok(_) => println!("p {p:e}: no two-sided interval"),
                Err(why) => println!("p {p:e}: no estimate: {why}"),
            }
        }
    }
    println!(
        "{hits} of {tries} predictions hit ({:.0} %); the naive predictor {naive_hits} of {tries}",
        100.0 * hits as f64 / tries.max(1) as f64
    );
}
