//! A scrape: each measured CPU's histogram on the fixed ladder, its samples, misses and
//! maximum, and the collector's facts (spikes, loads), encoded as the metrics of the
//! contract (docs/contract.md).

use std::sync::atomic::Ordering;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::exemplar::Exemplar;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use super::{Facts, Source, LADDER_NS};

/// One CPU's figures, read once per scrape.
#[derive(Debug)]
struct CpuFigures {
    cpu: String,
    /// Per ladder range (not cumulative: the encoder accumulates), +Inf last.
    buckets: Vec<(f64, u64)>,
    count: u64,
    sum_s: f64,
    max_s: f64,
    missed: u64,
}

#[derive(Debug)]
pub(super) struct Scrape {
    cpus: Vec<CpuFigures>,
    facts: Facts,
    elapsed_s: f64,
}

pub(super) fn scrape(src: &Source) -> Scrape {
    let cpus = src
        .threads
        .iter()
        .map(|t| {
            // One snapshot: its buckets, count and sum agree with each other.
            let h = t.hist.snapshot();
            let mut per = vec![0u64; LADDER_NS.len() + 1];
            for (_, upper, c) in h.buckets() {
                // A bucket counts under the first bound its upper edge does not exceed: a
                // sample is counted under `le` only when its whole bucket lies below (never
                // early; the 1 µs buckets end on the ladder's bounds).
                let i = LADDER_NS.partition_point(|&le| le < upper);
                per[i] += c;
            }
            let mut buckets: Vec<(f64, u64)> = LADDER_NS
                .iter()
                .zip(&per)
                .map(|(&le, &c)| (le as f64 / 1e9, c))
                .collect();
            buckets.push((f64::INFINITY, per[LADDER_NS.len()]));
            CpuFigures {
                cpu: t.cpu.to_string(),
                buckets,
                count: h.count(),
                sum_s: h.sum() as f64 / 1e9,
                max_s: h.max().unwrap_or(0) as f64 / 1e9,
                missed: t.missed.load(Ordering::Relaxed) + t.mode.coalesced.load(Ordering::Relaxed),
            }
        })
        .collect();
    Scrape {
        cpus,
        facts: src.facts.lock().map(|f| f.clone()).unwrap_or_default(),
        elapsed_s: src.started.elapsed().as_secs_f64(),
    }
}

type NoExemplar = Exemplar<NoLabelSet, f64>;

impl Collector for Scrape {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let label = |c: &CpuFigures| [("cpu", c.cpu.clone())];
        {
            let mut m = e.encode_descriptor(
                "latlab_latency",
                "Wake-up latency per measured CPU since the measurement started",
                Some(&Unit::Seconds),
                MetricType::Histogram,
            )?;
            for c in &self.cpus {
                let l = label(c);
                m.encode_family(&l)?
                    .encode_histogram::<NoLabelSet>(c.sum_s, c.count, &c.buckets, None)?;
            }
        }
        type PerCpu = fn(&CpuFigures) -> u64;
        let counters: [(&str, &str, PerCpu); 2] = [
            ("latlab_samples", "Samples measured per CPU", |c| c.count),
            (
                "latlab_missed_periods",
                "Wake-up periods missed per CPU (a wake-up later than the next period)",
                |c| c.missed,
            ),
        ];
        for (name, help, f) in counters {
            let mut m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
            for c in &self.cpus {
                let l = label(c);
                m.encode_family(&l)?
                    .encode_counter::<NoLabelSet, _, f64>(&f(c), None::<&NoExemplar>)?;
            }
        }
        {
            let mut m = e.encode_descriptor(
                "latlab_max_latency",
                "Largest wake-up latency per CPU since the measurement started",
                Some(&Unit::Seconds),
                MetricType::Gauge,
            )?;
            for c in &self.cpus {
                let l = label(c);
                m.encode_family(&l)?.encode_gauge(&c.max_s)?;
            }
        }
        for (name, help, v) in [
            (
                "latlab_spikes_traced",
                "Spikes whose trace the flight recorder saved",
                self.facts.spikes_traced,
            ),
            (
                "latlab_spikes_not_traced",
                "Spikes above --trace-threshold whose trace was not saved (recorder busy or --trace-max-spikes reached)",
                self.facts.spikes_not_traced,
            ),
        ] {
            let mut m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
            m.encode_counter::<NoLabelSet, _, f64>(&v, None::<&NoExemplar>)?;
        }
        {
            let mut m = e.encode_descriptor(
                "latlab_load_throughput",
                "A load's throughput so far, as its own log reports it per finished iteration (unit label: ops/s, s/iteration, MB/s)",
                None,
                MetricType::Gauge,
            )?;
            for l in &self.facts.loads {
                if let Some((v, unit)) = l.throughput {
                    let lab = [
                        ("load", l.profile.clone()),
                        ("part", l.part.clone()),
                        ("unit", unit.to_string()),
                    ];
                    m.encode_family(&lab)?.encode_gauge(&v)?;
                }
            }
        }
        for (name, help, restarts) in [
            (
                "latlab_load_restarts",
                "Times the supervisor restarted a load's part (it ended before the run)",
                true,
            ),
            (
                "latlab_load_failures",
                "Times a load's part ended in failure (non-zero exit or signal)",
                false,
            ),
        ] {
            let mut m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
            for l in &self.facts.loads {
                let lab = [("load", l.profile.clone()), ("part", l.part.clone())];
                let v = if restarts { l.restarts } else { l.failures } as u64;
                m.encode_family(&lab)?
                    .encode_counter::<NoLabelSet, _, f64>(&v, None::<&NoExemplar>)?;
            }
        }
        let mut m = e.encode_descriptor(
            "latlab_measured",
            "Time since the measurement started",
            Some(&Unit::Seconds),
            MetricType::Gauge,
        )?;
        m.encode_gauge(&self.elapsed_s)?;
        Ok(())
    }
}
