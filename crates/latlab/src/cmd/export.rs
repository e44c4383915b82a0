//! `latlab export RUN --format perfetto -o FILE`: a run's traces as Perfetto's protobuf trace
//! (`latlab_report::perfetto`): every traced spike's window (`spikes/NNN/trace.dat`, else its
//! `trace.txt`) with the spike as a slice, and a profile's raw window (`profile/trace.dat`);
//! `sched_migrate_task` events included, and where the kernel lost events as slices "events
//! lost" on a track per CPU (a window's marks between the events around them; the profile's
//! per-CPU totals from run.json over the profile's span), the counts as args.

use std::path::{Component, Path};
use std::process::ExitCode;

use anyhow::Context;
use std::collections::BTreeMap;

use latlab_core::trace::raw::{decode_all, decoder_for, migrations_and_gaps, LostGap};
use latlab_core::trace::{tracedat, Event, Record};
use latlab_core::units::Human;
use latlab_report::perfetto::{Arg, Builder, Mark, SpikeMark};

use crate::cli::{ExportArgs, ExportFormat};

pub fn export(a: ExportArgs) -> anyhow::Result<ExitCode> {
    let ExportFormat::Perfetto = a.format;
    let rec = latlab_engine::rundir::load_record(&a.run)?;
    let dir = if a.run.is_dir() {
        a.run.clone()
    } else {
        a.run.parent().map(Path::to_path_buf).unwrap_or_default()
    };
    let mut b = Builder::default();
    let mut windows = 0usize;
    let mut problems = Vec::new();
    for (i, s) in rec.spikes.iter().enumerate() {
        let Some(rel) = s.trace_file.as_deref() else {
            continue;
        };
        let rel = Path::new(rel);
        // run.json is input: only a path inside the run directory is read.
        if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            problems.push(format!(
                "spike {}: trace path outside the run directory",
                i + 1
            ));
            continue;
        }
        let p = dir.join(rel);
        let dat = p.with_file_name("trace.dat");
        let r = if dat.is_file() {
            window_dat(&dat, MAX_SPIKE_TRACE, &mut b)
        } else {
            window_text(&p, &mut b)
        };
        match r {
            Ok(()) => {
                windows += 1;
                b.spike(SpikeMark {
                    name: format!(
                        "spike {}: CPU {} latency {}",
                        i + 1,
                        s.cpu,
                        Human(s.latency_ns)
                    ),
                    cpu: s.cpu,
                    intended_ns: s.at_ns,
                    actual_ns: s.at_ns.saturating_add(s.latency_ns),
                });
            }
            Err(e) => problems.push(format!("spike {}: {e:#}", i + 1)),
        }
    }
    let prof = dir.join("profile/trace.dat");
    if prof.is_file() {
        match window_dat(
            &prof,
            latlab_engine::profile::MAX_WINDOW + (1 << 20),
            &mut b,
        ) {
            Ok(()) => windows += 1,
            Err(e) => problems.push(format!("profile: {e:#}")),
        }
    }
    if let Some(p) = &rec.profile {
        // The profile's losses over its whole span (where in it: not recorded).
        let end = p.start_ns.saturating_add(p.duration_ns);
        for c in p.cpus.iter().filter(|c| c.lost_events > 0 || c.gap_ns > 0) {
            b.mark(Mark {
                track: format!("CPU {}: events lost (profile totals)", c.cpu),
                begin_ns: p.start_ns,
                end_ns: end,
                name: format!(
                    "profile: {} events lost, {} in gaps",
                    c.lost_events,
                    Human(c.gap_ns)
                ),
                args: vec![
                    ("cpu".into(), Arg::Uint(c.cpu as u64)),
                    ("lost_events".into(), Arg::Uint(c.lost_events)),
                    ("gap_ns".into(), Arg::Uint(c.gap_ns)),
                    ("known_ns".into(), Arg::Uint(c.known_ns)),
                ],
            });
        }
    }
    if windows == 0 {
        let why = problems
            .first()
            .map_or(String::new(), |p| format!(" ({p})"));
        anyhow::bail!(
            "{}: no traces to export{why}: record spikes with `latlab run --trace-threshold T` or a profile with `latlab profile`",
            latlab_core::escape::escape(&a.run.display().to_string())
        );
    }
    let (written, skipped) = (b.written, b.skipped);
    let bytes = b.finish();
    latlab_sys::safefile::write_atomic(&a.output, &bytes)
        .with_context(|| format!("cannot write {}", a.output.display()))?;
    for p in &problems {
        warnln!("{p}");
    }
    outln!(
        "{}: {windows} window(s), {written} events ({skipped} of other kinds left out), {} bytes",
        a.output.display(),
        bytes.len()
    )?;
    Ok(ExitCode::SUCCESS)
}

/// The largest spike trace file exported: 256 MiB. latlab keeps at most 128 MiB of spike files
/// in a run; a larger one is not a spike's (a 1 GB trace.dat was read whole). A profile's
/// window may be as large as `--profile-window` allows.
const MAX_SPIKE_TRACE: u64 = 256 << 20;

/// A trace file of the run, at most `max` bytes.
fn read_trace_file(p: &Path, max: u64) -> anyhow::Result<Vec<u8>> {
    latlab_sys::safefile::read_regular(p, max).map_err(|e| {
        if e.kind() == std::io::ErrorKind::FileTooLarge {
            anyhow::anyhow!("{}: {e}: not a trace latlab writes for a spike or a profile (export the spikes of a run latlab wrote; `latlab analyze` reads large traces)", p.display())
        } else {
            anyhow::anyhow!("{}: {e}", p.display())
        }
    })
}

fn window_dat(p: &Path, max: u64, b: &mut Builder) -> anyhow::Result<()> {
    let bytes = read_trace_file(p, max)?;
    let dat = tracedat::read(&bytes).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
    let (dec, mut comms) =
        decoder_for(&dat).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
    let (events, _lost, _) =
        decode_all(&dec, &dat, &mut comms).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
    let (migrations, gaps) =
        migrations_and_gaps(&dat).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
    b.window_with(&events, &migrations);
    for g in gaps {
        lost_mark(b, g);
    }
    Ok(())
}

/// A loss as a slice "events lost" on its CPU's track: from the last event before the loss to
/// the first after it (an instant where only one of them is in the window; nothing where
/// neither is), the count as an arg.
fn lost_mark(b: &mut Builder, g: LostGap) {
    let (Some(begin), Some(end)) = (g.after_ns.or(g.before_ns), g.before_ns.or(g.after_ns)) else {
        return;
    };
    b.mark(Mark {
        track: format!("CPU {}: events lost", g.cpu),
        begin_ns: begin,
        end_ns: end,
        name: match g.events {
            Some(n) => format!("events lost: {n}"),
            None => "events lost (how many: not recorded)".into(),
        },
        args: vec![
            ("cpu".into(), Arg::Uint(g.cpu as u64)),
            (
                "lost_events".into(),
                match g.events {
                    Some(n) => Arg::Uint(n),
                    None => Arg::Str("unknown".into()),
                },
            ),
        ],
    });
}

fn window_text(p: &Path, b: &mut Builder) -> anyhow::Result<()> {
    let text = read_trace_file(p, MAX_SPIKE_TRACE)?;
    let text = String::from_utf8_lossy(&text);
    let recs =
        latlab_core::trace::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e:?}", p.display()))?;
    // `CPU:N [LOST M EVENTS]` lines: gaps between that CPU's events around them.
    let mut events: Vec<Event> = Vec::new();
    let mut last: BTreeMap<u32, u64> = BTreeMap::new();
    let mut pending: BTreeMap<u32, u64> = BTreeMap::new();
    let mut gaps = Vec::new();
    for r in recs {
        match r {
            Record::Event(e) => {
                if let Some(n) = pending.remove(&e.cpu) {
                    gaps.push(LostGap {
                        cpu: e.cpu,
                        after_ns: last.get(&e.cpu).copied(),
                        before_ns: Some(e.ts),
                        events: Some(n),
                    });
                }
                last.insert(e.cpu, e.ts);
                events.push(e);
            }
            Record::Lost { cpu, events: n, .. } => {
                let p = pending.entry(cpu).or_default();
                *p = p.saturating_add(n);
            }
            _ => {}
        }
    }
    for (cpu, n) in pending {
        gaps.push(LostGap {
            cpu,
            after_ns: last.get(&cpu).copied(),
            before_ns: None,
            events: Some(n),
        });
    }
    b.window(&events);
    for g in gaps {
        lost_mark(b, g);
    }
    Ok(())
}
