//! `latlab scenario io-read` (Love, OLS 2003, §4.3): a big file and a tree of small files read
//! alone and under each load, cache dropped before each pass.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use anyhow::{anyhow, Context};
use latlab_core::hist::{Histogram, Layout, Quantile};
use latlab_core::record::{RunConfig, ThreadInfo};
use latlab_core::scenario as stats;
use latlab_core::scenario_record::{
    DeviceRecord, IoReadRecord, IoSchedRecord, PassSummary, PhaseRecord, RatioRecord,
    ScenarioRecord,
};
use latlab_core::units::{format_size, Nanos};
use latlab_sys::ledger::{Entry, EntryId};
use latlab_sys::scenario::io_read::{self, BlockDevice, Files};

use super::{Finished, ScenarioPlan, Series};
use crate::loads::LoadSession;
use crate::rundir;
use crate::session::Session;

/// `latlab scenario io-read`, checked: what it reads, where, and under which loads.
pub struct IoReadPlan {
    /// Size of the file read sequentially, bytes (more than 0).
    pub file_size: u64,
    /// Small files read one after another.
    pub small_files: usize,
    /// Parent of the per-run scratch directory.
    pub dir: PathBuf,
    /// The I/O scheduler of the disk behind `dir` for the run (`--iosched`).
    pub iosched: Option<String>,
    /// One loaded phase per profile, after the phase alone (none: alone only).
    pub loads: Vec<String>,
    /// Measurements of each phase.
    pub repeat: u32,
    pub common: ScenarioPlan,
}

/// Run the scenario: the run directory written, the machine restored, the run recorded.
pub fn run(p: IoReadPlan) -> crate::Result<Finished> {
    run_with(p).map_err(crate::Error::from)
}

fn run_with(p: IoReadPlan) -> anyhow::Result<Finished> {
    let device = check(&p)?;
    // Every load is resolved (tools, space) before anything starts.
    let mut sessions = Vec::new();
    for l in &p.loads {
        sessions.push(Some(LoadSession::prepare(
            std::slice::from_ref(l),
            &p.common.load_options,
        )?));
    }
    let mut s = super::begin(&p.common)?;
    let during = set_iosched(&s, &p, &device)?;
    let (scratch, scratch_id) = scratch_dir(&s, &p.dir)?;
    let files = match io_read::create_files(&scratch, p.file_size, p.small_files, &s.stop) {
        Ok(f) => Some(f),
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => None,
        Err(e) => {
            return Err(e)
                .with_context(|| format!("cannot create the test files in {}", scratch.display()))
        }
    };
    let layout = Layout::new(1_000, 10_000_000).expect("a valid layout");
    let mut m = Measured::default();
    if let Some(files) = &files {
        measure(&mut s, &p, files, sessions, layout, &mut m)?;
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
    let mut series = Vec::new();
    let (series_names, phases, ratios) = summarize(&m.phases, &mut series);
    let path = |p: &Path| p.to_string_lossy().into_owned();
    let scenario = ScenarioRecord::IoRead(IoReadRecord {
        file_size: p.file_size,
        small_files: p.small_files,
        small_bytes: files.as_ref().map(|f| f.small_bytes),
        read_size: io_read::READ_SIZE,
        repeat: p.repeat,
        dir: path(&p.dir),
        scratch: path(&scratch),
        cache_drop: io_read::DROP_METHOD.into(),
        walk_order:
            "readdir order, depth first (as find lists them), listed before the timed region".into(),
        device: device_record(&device),
        iosched: IoSchedRecord {
            requested: p.iosched.clone(),
            before: device.scheduler.clone(),
            during,
        },
        interrupted,
        series: series_names,
        phases,
        ratios,
    });
    let config = RunConfig {
        mode: "io-read".into(),
        backend: "real".into(),
        hist_limit_ns: Some(layout.limit_ns()),
        bucket_ns: Some(layout.bucket_ns),
        loads: p.loads.clone(),
        warmup_ns: if p.loads.is_empty() {
            0
        } else {
            p.common.warmup_ns
        },
        ..RunConfig::default()
    };
    let loads = (std::mem::take(&mut m.loads), m.activity.take());
    super::finish(s, &p.common, config, series, scenario, loads)
}

/// What the scenario needs of `--dir` and `--iosched`, checked before anything starts; the
/// disk behind `--dir`.
fn check(p: &IoReadPlan) -> anyhow::Result<BlockDevice> {
    let parent = &p.dir;
    if !parent.is_dir() {
        bail!(
            "--dir {}: not a directory; create it or choose another",
            parent.display()
        );
    }
    let (free, writable) = latlab_sys::loads::dir_space(parent)
        .with_context(|| format!("--dir {}", parent.display()))?;
    if !writable {
        bail!(
            "--dir {}: not writable; choose a writable directory",
            parent.display()
        );
    }
    // The small files take at most 8 KiB each, plus a block of metadata; keep 64 MiB spare.
    let need = p
        .file_size
        .saturating_add(p.small_files as u64 * 12 * 1024)
        .saturating_add(64 << 20);
    if need > free {
        bail!(
            "--file-size {}: the files need {} MiB but {} has {} MiB free; use a smaller --file-size or a --dir on a larger filesystem",
            format_size(p.file_size),
            need >> 20,
            parent.display(),
            free >> 20
        );
    }
    let device = io_read::block_device(parent);
    if let Some(name) = &p.iosched {
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
    Ok(device)
}

/// `--iosched`, through the ledger (restored when the session ends, or by `latlab cleanup`);
/// the scheduler during the run.
fn set_iosched(
    s: &Session,
    p: &IoReadPlan,
    device: &BlockDevice,
) -> anyhow::Result<Option<String>> {
    let (Some(name), Some(path)) = (&p.iosched, &device.scheduler_path) else {
        return Ok(device.scheduler.clone());
    };
    s.ledger
        .lock()
        .map_err(|_| anyhow!("ledger lock poisoned"))?
        .set_knob(path, name)
        .with_context(|| format!("--iosched {name}: cannot write {}", path.display()))?;
    let now = std::fs::read_to_string(path).unwrap_or_default();
    let during = io_read::parse_scheduler(&now).0;
    if during.as_deref() != Some(name.as_str()) {
        bail!(
            "--iosched {name}: {} reads {:?} after writing it; the device refuses the change",
            path.display(),
            now.trim()
        );
    }
    Ok(during)
}

/// The per-run scratch directory under `parent`: in the ledger before it exists.
fn scratch_dir(s: &Session, parent: &Path) -> anyhow::Result<(PathBuf, EntryId)> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() % 1_000_000_000)
        .unwrap_or(0);
    let scratch = parent.join(format!("latlab-ioread-{}-{stamp}", std::process::id()));
    let id = s
        .ledger
        .lock()
        .map_err(|_| anyhow!("ledger lock poisoned"))?
        .add(Entry::ScratchDir {
            path: scratch.clone(),
        })
        .context("cannot write the ledger")?;
    std::fs::create_dir(&scratch)
        .with_context(|| format!("cannot create the scratch directory {}", scratch.display()))?;
    Ok((scratch, id))
}

/// What the phases measured, and the loads' records.
#[derive(Default)]
struct Measured {
    phases: Vec<Phase>,
    loads: Vec<latlab_core::record::LoadRecord>,
    activity: Option<latlab_core::activity::ActivityRecord>,
}

/// The phases: alone, then one under each load (`sessions`, in order), each `--repeat`
/// passes over the big file and the small files, the page cache dropped before each.
fn measure(
    s: &mut Session,
    p: &IoReadPlan,
    files: &Files,
    mut sessions: Vec<Option<LoadSession>>,
    layout: Layout,
    m: &mut Measured,
) -> anyhow::Result<()> {
    let mut buf = vec![0u8; io_read::READ_SIZE];
    let names: Vec<Option<String>> = std::iter::once(None)
        .chain(p.loads.iter().cloned().map(Some))
        .collect();
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
            if !s.start_loads(l, &log, p.common.warmup_ns)? {
                m.loads.extend(s.stop_loads().0);
                break;
            }
        }
        let mut ph = Phase::new(name.clone(), layout);
        for _ in 0..p.repeat {
            if s.stop.load(Ordering::Relaxed) || !pass(s, files, &mut buf, &mut ph)? {
                break;
            }
        }
        if loaded {
            let (r, act) = s.stop_loads();
            m.loads.extend(r);
            m.activity = act.or(m.activity.take());
        }
        m.phases.push(ph);
    }
    Ok(())
}

/// One pass of a phase: the big file, then the small files, the page cache dropped before
/// each. False when a signal interrupted it.
fn pass(s: &mut Session, files: &Files, buf: &mut [u8], ph: &mut Phase) -> anyhow::Result<bool> {
    io_read::drop_cache(files).context("cannot drop the page cache of the test files")?;
    let r = io_read::read_big(&files.big, buf, &mut ph.big_hist, &s.stop)
        .context("reading the big file")?;
    if r.interrupted {
        return Ok(false);
    }
    ph.big.push(r);
    if files.small.is_empty() {
        return Ok(true);
    }
    io_read::drop_cache(files).context("cannot drop the page cache of the test files")?;
    let r = io_read::read_small(&files.small, buf, &mut ph.small_hist, &s.stop)
        .context("reading the small files")?;
    if r.interrupted {
        return Ok(false);
    }
    ph.small.push(r);
    if let Err(e) = s.poll_loads() {
        s.warnings.push(format!("load: {e:#}"));
    }
    Ok(true)
}

/// The phases as the record has them: the series (2 per phase, big file and small files,
/// numbered in the record's `cpus[].cpu`) pushed to `series`, their names, each phase's
/// summary and each loaded phase's slowdown against the phase alone.
fn summarize<'a>(
    phases: &'a [Phase],
    series: &mut Vec<Series<'a>>,
) -> (Vec<String>, Vec<PhaseRecord>, Vec<RatioRecord>) {
    let mut names = Vec::new();
    let mut records = Vec::new();
    let alone = phases.first().map(|p| p.summary());
    let mut ratios = Vec::new();
    for ph in phases {
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
            names.push(format!("{pname}: {what}"));
            *slot = Some(pass_summary(idx, hist, passes));
        }
        if let (Some(_), Some(al)) = (&ph.name, &alone) {
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
        records.push(rec);
    }
    (names, records, ratios)
}

/// A phase's passes over one kind of file, as series `idx`.
fn pass_summary(idx: u32, hist: &Histogram, passes: &[io_read::Pass]) -> PassSummary {
    let totals: Vec<Nanos> = passes.iter().map(|p| p.total_ns).collect();
    PassSummary {
        count: hist.count(),
        p50_ns: hist.quantile(Quantile::P50),
        p99_ns: hist.quantile(Quantile::P99),
        max_ns: hist.max(),
        series: idx,
        median_total_ns: stats::median(&totals),
        totals_ns: totals,
        ops_per_pass: passes[0].ops,
        bytes_per_pass: passes[0].bytes,
    }
}

fn device_record(d: &BlockDevice) -> DeviceRecord {
    DeviceRecord {
        dev: d.dev.clone(),
        name: d.name.clone(),
        disk: d.disk.clone(),
        slaves: d.slaves.clone(),
        scheduler_path: d
            .scheduler_path
            .as_deref()
            .map(|p| p.to_string_lossy().into_owned()),
        available: d.available.clone(),
        note: d.note.clone(),
    }
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
