//! `bench loads`' runs: one `latlab run --load P` per profile — this binary as a child, the
//! full run lifecycle — and what it says: samples, p99, p99.9, max, missed periods, the load's
//! own throughput (from the summary's `loads[]`) and restarts. A run that fails is a row
//! saying why, not the end of the bench.

use std::path::PathBuf;

use serde_json::Value;

use crate::bench::child::{total, LatlabRun};

/// What every run of `bench loads` shares.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Each run's length and CPUs, as `--duration` and `--cpus` take them.
    pub duration: String,
    pub cpus: String,
    /// Where the run directories go.
    pub results: PathBuf,
    /// `--load-dir` of the runs.
    pub load_dir: Option<PathBuf>,
}

/// One profile's row (latlab-core's, so that latlab-report renders it).
pub use latlab_core::bench::LoadRow as Row;

/// One `latlab run --load profile`: its row.
pub fn run(profile: &str, p: &Plan) -> crate::Result<Row> {
    let label =
        format!("bench-{profile}").replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_");
    let mut l = LatlabRun::new("run", Some(&p.results))?
        .args(["--load", profile, "--duration", &p.duration])
        .args(["--cpus", &p.cpus, "--label", &label])
        .capture_stderr();
    if let Some(d) = &p.load_dir {
        l = l.args([std::ffi::OsStr::new("--load-dir"), d.as_os_str()]);
    }
    let r = l.run_any()?;
    let mut row = Row {
        profile: profile.to_string(),
        ..Row::default()
    };
    if crate::bench::child::ran(&r.f, "latlab run").is_err() {
        row.error = Some(r.error_line());
        return Ok(row);
    }
    let v = r.summary()?;
    let t = &v["total"];
    row.samples = total(&v, "samples");
    row.p99_ns = t["p99_ns"].as_u64();
    row.p999_ns = t["p999_ns"].as_u64();
    row.max_ns = t["max_ns"].as_u64();
    row.missed = total(&v, "missed_periods");
    for l in v["loads"].as_array().into_iter().flatten() {
        row.restarts += l["restarts"].as_u64().unwrap_or(0);
        row.throughput.extend(throughput(l));
    }
    row.run_dir = r.dir().ok().map(|d| d.display().to_string());
    Ok(row)
}

/// A load record's throughput items: its `ops`, the files a compile part got through, and the
/// kernel-accounted MB/s it wrote and read (except the direction `ops` already is).
fn throughput(l: &Value) -> Vec<(String, f64, String)> {
    let part = l["part"].as_str().unwrap_or("").to_string();
    let mut v = Vec::new();
    if let Some(ops) = l["ops"].as_f64() {
        v.push((
            part.clone(),
            ops,
            l["ops_unit"].as_str().unwrap_or("").to_string(),
        ));
    }
    if let Some(x) = l["compiled_files_per_s"].as_f64() {
        v.push((part.clone(), x, "files compiled/s".to_string()));
    }
    // The direction `ops` already is, once; the other one too (io-read writes its file first).
    let source = l["ops_source"].as_str().unwrap_or("");
    for (key, unit, same) in [
        ("io_write_mb_per_s", "MB/s written", "kernel-io-write"),
        ("io_read_mb_per_s", "MB/s read", "kernel-io-read"),
    ] {
        if source == same {
            continue;
        }
        if let Some(x) = l[key].as_f64().filter(|x| *x > 0.0) {
            v.push((part.clone(), x, unit.to_string()));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The throughput column shows every source a load record carries: its own figure and the
    /// kernel-accounted I/O of parts whose figure is something else (not twice for dd).
    #[test]
    fn throughput_items_from_load_records() {
        let dd = json!({"part": "dd", "ops": 512.5, "ops_unit": "MB/s",
            "ops_source": "kernel-io-write", "io_write_mb_per_s": 512.5, "io_read_mb_per_s": 0.0});
        assert_eq!(
            throughput(&dd),
            vec![("dd".to_string(), 512.5, "MB/s".to_string())]
        );
        // io-read's first iteration writes the file it then reads.
        let rd = json!({"part": "dd", "ops": 0.01, "ops_unit": "MB/s",
            "ops_source": "kernel-io-read", "io_write_mb_per_s": 700.0, "io_read_mb_per_s": 0.01});
        assert_eq!(
            throughput(&rd),
            vec![
                ("dd".to_string(), 0.01, "MB/s".to_string()),
                ("dd".to_string(), 700.0, "MB/s written".to_string())
            ]
        );
        let script = json!({"part": "script", "ops": 0.0, "ops_unit": "iterations/s",
            "ops_source": "iterations", "io_write_mb_per_s": 80.0, "io_read_mb_per_s": 1.5});
        let v = throughput(&script);
        assert_eq!(v.len(), 3, "{v:?}");
        assert_eq!(
            v[1],
            ("script".to_string(), 80.0, "MB/s written".to_string())
        );
        assert_eq!(v[2].1, 1.5);
        let none = json!({"part": "cmd", "ops": null});
        assert!(throughput(&none).is_empty());
    }
}
