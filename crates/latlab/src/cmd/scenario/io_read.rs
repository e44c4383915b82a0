//! `latlab scenario io-read` (Love, OLS 2003, §4.3): a big file and a tree of small files read
//! alone and under each load, cache dropped before each pass.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;

use anyhow::{anyhow, bail, Context};
use latlab_core::hist::{Histogram, Layout, Quantile};
use latlab_core::record::{RunConfig, ThreadInfo};
use latlab_core::scenario as stats;
use latlab_core::scenario_record::{
    DeviceRecord, IoReadRecord, IoSchedRecord, PassSummary, PhaseRecord, RatioRecord,
    ScenarioRecord,
};
use latlab_core::units::Nanos;
use latlab_sys::ledger::Entry;
use latlab_sys::scenario::io_read;

use crate::cli_scenario::IoReadArgs;
use latlab_engine::loads::LoadSession;
use latlab_engine::rundir;
use latlab_engine::session::{Begin, Session};

/// Longest run of real-time CPU hogs allowed.
use super::{load_options, record, scenario_need};

pub(super) fn run(a: IoReadArgs) -> anyhow::Result<ExitCode> {
    let size = a.file_size.0;
    if size == 0 {
        bail!("--file-size: must be more than 0 (e.g. 200M)");
    }
    if a.repeat == 0 || a.repeat > 1000 {
        bail!("--repeat {}: give 1 to 1000", a.repeat);
    }
    if a.small_files > 1_000_000 {
        bail!("--small-files {}: give at most 1000000", a.small_files);
    }
    let parent = match &a.dir {
        Some(d) => d.clone(),
        None if Path::new("/var/tmp").is_dir() => PathBuf::from("/var/tmp"),
        None => std::env::temp_dir(),
    };
    if !parent.is_dir() {
        bail!(
            "--dir {}: not a directory; create it or choose another",
            parent.display()
        );
    }
    let (free, writable) = latlab_sys::loads::dir_space(&parent)
        .with_context(|| format!("--dir {}", parent.display()))?;
    if !writable {
        bail!(
            "--dir {}: not writable; choose a writable directory",
            parent.display()
        );
    }
    // The small files take at most 8 KiB each, plus a block of metadata; keep 64 MiB spare.
    let need = size
        .saturating_add(a.small_files as u64 * 12 * 1024)
        .saturating_add(64 << 20);
    if need > free {
        bail!(
            "--file-size {}: the files need {} MiB but {} has {} MiB free; use a smaller --file-size or a --dir on a larger filesystem",
            a.file_size,
            need >> 20,
            parent.display(),
            free >> 20
        );
    }
    let device = io_read::block_device(&parent);
    if let Some(name) = &a.iosched {
        let Some(path) = &device.scheduler_path else {
            bail!(
                "--iosched {name}: the I/O scheduler of {} cannot be changed ({}); leave --iosched out",
                parent.display(),
                device.note.as_deref().unwrap_or("no scheduler file")
            );
        };
        if !device.available.iter().any(|s| s == name) {
            bail!(
                "--iosched {name}: {} offers {}; choose one of them",
                device.disk.as_deref().unwrap_or("the disk"),
                device.available.join(", ")
            );
        }
        // SAFETY: plain syscall.
        if unsafe { libc::geteuid() } != 0 {
            bail!(
                "--iosched {name}: changing {} needs root; run as root or leave --iosched out",
                path.display()
            );
        }
    }
    let profiles: Vec<String> = if a.loads.is_empty() {
        vec!["io-write".into()]
    } else if a.loads.iter().any(|l| l == "none") {
        vec![]
    } else {
        a.loads.clone()
    };
    let warmup_ns = a.common.warmup.0;
    let lopts = load_options(&a.common, Some(parent.clone()))?;
    // Every load is resolved (tools, space) before anything starts.
    let mut sessions = Vec::new();
    for p in &profiles {
        sessions.push(Some(LoadSession::prepare(std::slice::from_ref(p), &lopts)?));
    }
    let label = a.common.label.clone().unwrap_or_else(|| "io-read".into());
    let mut s = Session::begin(Begin {
        results: Some((&a.common.results, &label, scenario_need()?)),
        inventory: true,
        // Scenario warnings go to the record only (pushed, not `warn`ed); the summary's
        // `results:` line is printed as `run` prints it.
        quiet: false,
    })?;

    // The I/O scheduler, through the ledger (restored by `s.restore`, or `latlab cleanup`).
    let before = device.scheduler.clone();
    let mut during = before.clone();
    if let (Some(name), Some(path)) = (&a.iosched, &device.scheduler_path) {
        s.ledger
            .lock()
            .map_err(|_| anyhow!("ledger lock poisoned"))?
            .set_knob(path, name)
            .with_context(|| format!("--iosched {name}: cannot write {}", path.display()))?;
        let now = std::fs::read_to_string(path).unwrap_or_default();
        during = io_read::parse_scheduler(&now).0;
        if during.as_deref() != Some(name.as_str()) {
            bail!(
                "--iosched {name}: {} reads {:?} after writing it; the device refuses the change",
                path.display(),
                now.trim()
            );
        }
    }

    // The scratch directory: in the ledger before it exists.
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() % 1_000_000_000)
        .unwrap_or(0);
    let scratch = parent.join(format!("latlab-ioread-{}-{stamp}", std::process::id()));
    let scratch_id = s
        .ledger
        .lock()
        .map_err(|_| anyhow!("ledger lock poisoned"))?
        .add(Entry::ScratchDir {
            path: scratch.clone(),
        })
        .context("cannot write the ledger")?;
    std::fs::create_dir(&scratch)
        .with_context(|| format!("cannot create the scratch directory {}", scratch.display()))?;
    let files = match io_read::create_files(&scratch, size, a.small_files, &s.stop) {
        Ok(f) => Some(f),
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => None,
        Err(e) => {
            return Err(e)
                .with_context(|| format!("cannot create the test files in {}", scratch.display()))
        }
    };

    let layout = Layout::new(1_000, 10_000_000).expect("a valid layout");
    let mut buf = vec![0u8; io_read::READ_SIZE];
    let mut phases: Vec<Phase> = Vec::new();
    let mut load_recs = Vec::new();
    let mut activity = None;
    let names: Vec<Option<String>> = std::iter::once(None)
        .chain(profiles.iter().cloned().map(Some))
        .collect();
    if let Some(files) = &files {
        for (k, name) in names.iter().enumerate() {
            if s.stop.load(Ordering::Relaxed) {
                break;
            }
            let loaded = k > 0;
            if let Some(l) = if loaded { sessions[k - 1].take() } else { None } {
                let log = s.dir().join("loads").join(format!(
                    "{k}-{}",
                    rundir::sanitize_label(name.as_deref().unwrap_or(""))
                ));
                if !s.start_loads(l, &log, warmup_ns)? {
                    load_recs.extend(s.stop_loads().0);
                    break;
                }
            }
            let mut ph = Phase::new(name.clone(), layout);
            for _ in 0..a.repeat {
                if s.stop.load(Ordering::Relaxed) {
                    break;
                }
                io_read::drop_cache(files)
                    .context("cannot drop the page cache of the test files")?;
                let p = io_read::read_big(&files.big, &mut buf, &mut ph.big_hist, &s.stop)
                    .context("reading the big file")?;
                if p.interrupted {
                    break;
                }
                ph.big.push(p);
                if files.small.is_empty() {
                    continue;
                }
                io_read::drop_cache(files)
                    .context("cannot drop the page cache of the test files")?;
                let p = io_read::read_small(&files.small, &mut buf, &mut ph.small_hist, &s.stop)
                    .context("reading the small files")?;
                if p.interrupted {
                    break;
                }
                ph.small.push(p);
                if let Err(e) = s.poll_loads() {
                    s.warnings.push(format!("load: {e:#}"));
                }
            }
            if loaded {
                let (r, act) = s.stop_loads();
                load_recs.extend(r);
                activity = act.or(activity);
            }
            phases.push(ph);
        }
    }
    // The scratch directory goes now (the ledger would remove it too, on any exit path).
    match std::fs::remove_dir_all(&scratch) {
        Ok(()) => {
            if let Ok(mut l) = s.ledger.lock() {
                let _ = l.forget(scratch_id);
            }
        }
        Err(e) => s
            .warnings
            .push(format!("could not remove {}: {e}", scratch.display())),
    }
    let interrupted = s.stopped();
    if interrupted {
        s.warnings
            .push("the run was interrupted by a signal: some phases or repeats are missing".into());
    }

    // Series: 2 per phase (big file, small files), numbered in the record's `cpus[].cpu`.
    let mut series = Vec::new();
    let mut series_names = Vec::new();
    let mut phase_v = Vec::new();
    let alone = phases.first().map(|p| p.summary());
    let mut ratios = Vec::new();
    for ph in &phases {
        let pname = ph.name.clone().unwrap_or_else(|| "alone".into());
        let mut rec = PhaseRecord {
            name: pname.clone(),
            load: ph.name.clone(),
            big: None,
            small: None,
        };
        for (slot, hist, passes, what) in [
            (&mut rec.big, &ph.big_hist, &ph.big, "big-file read(2)"),
            (
                &mut rec.small,
                &ph.small_hist,
                &ph.small,
                "small file open+read+close",
            ),
        ] {
            if passes.is_empty() {
                continue;
            }
            let idx = series.len() as u32;
            series.push((idx, hist, ThreadInfo::default(), 0));
            series_names.push(format!("{pname}: {what}"));
            let totals: Vec<Nanos> = passes.iter().map(|p| p.total_ns).collect();
            *slot = Some(PassSummary {
                count: hist.count(),
                p50_ns: hist.quantile(Quantile::P50),
                p99_ns: hist.quantile(Quantile::P99),
                max_ns: hist.max(),
                series: idx,
                median_total_ns: stats::median(&totals),
                totals_ns: totals,
                ops_per_pass: passes[0].ops,
                bytes_per_pass: passes[0].bytes,
            });
        }
        if ph.name.is_some() {
            if let Some(al) = &alone {
                let me = ph.summary();
                let r = |a: Option<Nanos>, b: Option<Nanos>| {
                    a.zip(b).and_then(|(l, al)| stats::slowdown(l, al))
                };
                ratios.push(RatioRecord {
                    phase: pname,
                    big_total: r(me.big_total, al.big_total),
                    big_p99: r(me.big_p99, al.big_p99),
                    small_total: r(me.small_total, al.small_total),
                    small_p99: r(me.small_p99, al.small_p99),
                });
            }
        }
        phase_v.push(rec);
    }
    let path = |p: &Path| p.to_string_lossy().into_owned();
    let scenario = ScenarioRecord::IoRead(IoReadRecord {
        file_size: size,
        small_files: a.small_files,
        small_bytes: files.as_ref().map(|f| f.small_bytes),
        read_size: io_read::READ_SIZE,
        repeat: a.repeat,
        dir: path(&parent),
        scratch: path(&scratch),
        cache_drop: io_read::DROP_METHOD.into(),
        walk_order:
            "readdir order, depth first (as find lists them), listed before the timed region".into(),
        device: DeviceRecord {
            dev: device.dev.clone(),
            name: device.name.clone(),
            disk: device.disk.clone(),
            slaves: device.slaves.clone(),
            scheduler_path: device.scheduler_path.as_deref().map(path),
            available: device.available.clone(),
            note: device.note.clone(),
        },
        iosched: IoSchedRecord {
            requested: a.iosched.clone(),
            before,
            during,
        },
        interrupted,
        series: series_names,
        phases: phase_v,
        ratios,
    });
    let config = RunConfig {
        mode: "io-read".into(),
        backend: "real".into(),
        hist_limit_ns: Some(layout.limit_ns()),
        bucket_ns: Some(layout.bucket_ns),
        loads: profiles.clone(),
        warmup_ns: if profiles.is_empty() { 0 } else { warmup_ns },
        ..RunConfig::default()
    };
    let mut rec = record(&s, &label, config, series, scenario)?;
    rec.loads = load_recs;
    rec.activity = activity;
    s.record_db = Some(a.common.record_db.target());
    let dir = s.dir().to_path_buf();
    let quiet = false;
    let model = s.finish(rec)?;
    crate::cmd::run::print_summary(&model, &dir, a.common.format, quiet)?;
    Ok(ExitCode::SUCCESS)
}

struct Phase {
    name: Option<String>,
    big_hist: Histogram,
    small_hist: Histogram,
    big: Vec<io_read::Pass>,
    small: Vec<io_read::Pass>,
}

struct PhaseSummary {
    big_total: Option<Nanos>,
    big_p99: Option<Nanos>,
    small_total: Option<Nanos>,
    small_p99: Option<Nanos>,
}

impl Phase {
    fn new(name: Option<String>, layout: Layout) -> Phase {
        Phase {
            name,
            big_hist: Histogram::new(layout),
            small_hist: Histogram::new(layout),
            big: Vec::new(),
            small: Vec::new(),
        }
    }
    fn summary(&self) -> PhaseSummary {
        let med =
            |v: &[io_read::Pass]| stats::median(&v.iter().map(|p| p.total_ns).collect::<Vec<_>>());
        PhaseSummary {
            big_total: med(&self.big),
            big_p99: self.big_hist.quantile(Quantile::P99),
            small_total: med(&self.small),
            small_p99: self.small_hist.quantile(Quantile::P99),
        }
    }
}
