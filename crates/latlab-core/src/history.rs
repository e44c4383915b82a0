//! The results database's runs as `latlab history` lists them: one row per run, the numbers
//! a long-term plot needs (stored by latlab-store, rendered by latlab-report).

/// One row of `history`: a run and the numbers a long-term plot needs.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunRow {
    pub run_id: String,
    pub label: String,
    pub machine_id: String,
    pub hostname: Option<String>,
    pub kernel_release: Option<String>,
    pub kernel_version: Option<String>,
    pub preemption: Option<String>,
    pub source: String,
    pub started_at: Option<String>,
    /// Seconds since the epoch of `started_at` (else of when it was stored).
    pub time_unix: i64,
    pub duration_ns: Option<i64>,
    /// The run's loads (run.json `config.loads`), none when it ran alone.
    pub loads: Vec<String>,
    /// The measuring period (run.json `config.interval_ns`; null for imports that lack it).
    pub interval_ns: Option<i64>,
    pub complete: bool,
    pub cpus: i64,
    pub samples: i64,
    pub p99_ns: Option<i64>,
    pub p999_ns: Option<i64>,
    pub max_ns: Option<i64>,
    pub missed: i64,
}

/// A change point in one machine's runs (`latlab history`, [`crate::changepoint`]): the run
/// from which its p99.9 moved beyond the run-to-run noise.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HistoryChange {
    /// The machine (host name, else its id) and its `machine_id`.
    pub machine: String,
    pub machine_id: String,
    /// The statistic the series is of (`p99.9`).
    pub statistic: String,
    /// Runs of the machine in the series, before and from the change.
    pub runs_before: usize,
    pub runs_after: usize,
    /// The first run after the change: its id, start and kernel; the kernel of the last run
    /// before it.
    pub run_id: String,
    pub started_at: Option<String>,
    pub time_unix: i64,
    pub kernel_before: Option<String>,
    pub kernel_after: Option<String>,
    /// Medians of the runs before and after (ns).
    pub before_ns: u64,
    pub after_ns: u64,
    /// Permutation p-value (at most [`crate::changepoint::ALPHA`]).
    pub p_value: f64,
}

/// The change points of `rows` (oldest first): per machine, over its runs with a p99.9, the
/// one significant change, if any.
pub fn change_points(rows: &[RunRow]) -> Vec<HistoryChange> {
    let mut machines: Vec<&str> = Vec::new();
    for r in rows {
        if !machines.contains(&r.machine_id.as_str()) {
            machines.push(&r.machine_id);
        }
    }
    let mut out = Vec::new();
    for m in machines {
        let series: Vec<&RunRow> = rows
            .iter()
            .filter(|r| r.machine_id == m && r.p999_ns.is_some_and(|v| v > 0))
            .collect();
        let values: Vec<f64> = series.iter().map(|r| r.p999_ns.unwrap() as f64).collect();
        let Some(cp) = crate::changepoint::detect(&values) else {
            continue;
        };
        let (last, first) = (series[cp.index - 1], series[cp.index]);
        out.push(HistoryChange {
            machine: first.hostname.clone().unwrap_or_else(|| m.to_string()),
            machine_id: m.to_string(),
            statistic: "p99.9".into(),
            runs_before: cp.index,
            runs_after: series.len() - cp.index,
            run_id: first.run_id.clone(),
            started_at: first.started_at.clone(),
            time_unix: first.time_unix,
            kernel_before: last.kernel_release.clone(),
            kernel_after: first.kernel_release.clone(),
            before_ns: cp.before.round() as u64,
            after_ns: cp.after.round() as u64,
            p_value: cp.p_value,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(i: usize, machine: &str, kernel: &str, p999: i64) -> RunRow {
        RunRow {
            run_id: format!("run-{machine}-{i:02}"),
            label: "l".into(),
            machine_id: machine.into(),
            hostname: Some(format!("host-{machine}")),
            kernel_release: Some(kernel.into()),
            kernel_version: None,
            preemption: None,
            source: "latlab".into(),
            started_at: None,
            time_unix: 1_700_000_000 + i as i64 * 86_400,
            duration_ns: None,
            loads: vec![],
            interval_ns: Some(1_000_000),
            complete: true,
            cpus: 2,
            samples: 1000,
            p99_ns: None,
            p999_ns: Some(p999),
            max_ns: None,
            missed: 0,
        }
    }

    #[test]
    fn a_kernel_that_got_worse_on_one_machine_is_found_there_only() {
        let mut rows = Vec::new();
        let wobble = [0.97, 1.03, 1.0, 0.95, 1.05, 1.01, 0.99, 1.02];
        for i in 0..16 {
            let w = wobble[i % wobble.len()];
            // Machine a: 6.1.2 at ~45 µs, then 6.1.5 at ~80 µs from its 11th run.
            let (k, v) = if i < 10 {
                ("6.1.2", 45_000.0)
            } else {
                ("6.1.5", 80_000.0)
            };
            rows.push(row(i, "a", k, (v * w) as i64));
            // Machine b, interleaved: the same kernels, no change.
            rows.push(row(i, "b", k, (30_000.0 * w) as i64));
        }
        let cps = change_points(&rows);
        assert_eq!(cps.len(), 1, "{cps:#?}");
        let c = &cps[0];
        assert_eq!(c.machine, "host-a");
        assert_eq!((c.runs_before, c.runs_after), (10, 6));
        assert_eq!(c.run_id, "run-a-10");
        assert_eq!(c.kernel_before.as_deref(), Some("6.1.2"));
        assert_eq!(c.kernel_after.as_deref(), Some("6.1.5"));
        assert!((43_000..47_000).contains(&c.before_ns), "{c:?}");
        assert!((77_000..83_000).contains(&c.after_ns), "{c:?}");
        assert!(c.p_value <= 0.01);
    }
}
