//! `analyze` throughput: how fast latlab parses and attributes a large text trace, against
//! `wc -l` on the same file (the I/O + line-splitting floor). The file is read once before
//! timing so both run from the page cache.

#![allow(dead_code)] // the lead wires it to `latlab bench`

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::Context;

/// Print MB/s of `latlab analyze` (parse + attribution, no output) vs `wc -l` on `path`.
pub fn analyze_throughput(path: &Path) -> anyhow::Result<()> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read trace {}", path.display()))?;
    let mb = bytes.len() as f64 / 1e6;
    drop(bytes);

    let t = Instant::now();
    let out = Command::new("wc")
        .arg("-l")
        .arg(path)
        .output()
        .context("cannot run wc -l (coreutils)")?;
    let wc_s = t.elapsed().as_secs_f64();
    anyhow::ensure!(out.status.success(), "wc -l failed on {}", path.display());
    let lines: u64 = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);

    let t = Instant::now();
    let bytes = std::fs::read(path)?;
    let text = String::from_utf8_lossy(&bytes);
    let a = super::analyze::analyze_trace(&text, None, false)
        .map_err(|e| anyhow::anyhow!("{}:{}: {}", path.display(), e.line, e.msg))?;
    let an_s = t.elapsed().as_secs_f64();

    println!("trace {} ({mb:.1} MB, {lines} lines)", path.display());
    println!("  wc -l            {:8.3} s  {:8.1} MB/s", wc_s, mb / wc_s);
    println!(
        "  latlab analyze   {:8.3} s  {:8.1} MB/s  ({} events, {} samples, {} spikes)",
        an_s,
        mb / an_s,
        a.events,
        a.samples,
        a.spikes.len()
    );
    println!("  analyze / wc -l  {:8.1} %", 100.0 * wc_s / an_s);
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn throughput_runs_on_a_fixture() {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../latlab-core/tests/fixtures/trace/trace-worst-window-cpu1.txt");
        super::analyze_throughput(&p).unwrap();
        assert!(super::analyze_throughput(std::path::Path::new("/nonexistent")).is_err());
    }
}
