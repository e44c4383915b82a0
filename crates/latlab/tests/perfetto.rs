//! `latlab export --format perfetto`: the file decoded with Perfetto's own definitions (the
//! `perfetto_protos` crate, Perfetto v51.1 .proto files) must hold the events latlab's own
//! decoder reads from the same trace, with their names and times.

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use perfetto_protos::ftrace_event::ftrace_event::Event as Fe;
use perfetto_protos::trace::Trace;
use perfetto_protos::trace_packet::trace_packet::Data;
use protobuf::Message;

/// (cpu, ts, kind, pid named by the event).
type Row = (u32, u64, &'static str, i64);

/// A migration: (cpu whose buffer recorded it, ts, pid, orig_cpu, dest_cpu).
type Mig = (u32, u64, i64, i64, i64);

/// A mark on a track of its own: (track name, begin, end, name, args as text).
type MarkRow = (String, u64, u64, String, BTreeMap<String, String>);

/// What a Perfetto file holds, as Perfetto's own definitions decode it.
struct Decoded {
    /// (cpu, ts, kind, pid named by the event) of every ftrace event, sorted.
    evs: Vec<Row>,
    /// The threads' names.
    names: BTreeMap<i64, String>,
    /// The spikes' slices (begin, end, name).
    slices: Vec<(u64, u64, String)>,
    /// sched_migrate_task events, sorted.
    migrations: Vec<Mig>,
    /// Slices and instants on the other tracks, sorted.
    marks: Vec<MarkRow>,
}

fn decode(bytes: &[u8]) -> Decoded {
    let t = Trace::parse_from_bytes(bytes).expect("a Perfetto Trace");
    let (mut evs, mut names, mut slices) = (Vec::new(), BTreeMap::new(), Vec::new());
    let (mut migs, mut marks) = (Vec::new(), Vec::new());
    let mut tracks: BTreeMap<u64, String> = BTreeMap::new();
    let mut open_marks: BTreeMap<u64, (u64, String, BTreeMap<String, String>)> = BTreeMap::new();
    let spike_track = latlab_report::perfetto::SPIKE_TRACK;
    let mut open: Option<(u64, String)> = None;
    for p in &t.packet {
        match &p.data {
            Some(Data::FtraceEvents(b)) => {
                for e in &b.event {
                    let (k, pid) = match &e.event {
                        Some(Fe::SchedSwitch(s)) => ("switch", s.next_pid() as i64),
                        Some(Fe::SchedWaking(s)) => ("waking", s.pid() as i64),
                        Some(Fe::SchedWakeup(s)) => ("wakeup", s.pid() as i64),
                        Some(Fe::IrqHandlerEntry(s)) => ("irq_entry", s.irq() as i64),
                        Some(Fe::IrqHandlerExit(s)) => ("irq_exit", s.irq() as i64),
                        Some(Fe::SoftirqEntry(s)) => ("softirq_entry", s.vec() as i64),
                        Some(Fe::SoftirqExit(s)) => ("softirq_exit", s.vec() as i64),
                        Some(Fe::Print(_)) => ("print", 0),
                        Some(Fe::SchedMigrateTask(s)) => {
                            migs.push((
                                b.cpu(),
                                e.timestamp(),
                                s.pid() as i64,
                                s.orig_cpu() as i64,
                                s.dest_cpu() as i64,
                            ));
                            ("migrate", s.pid() as i64)
                        }
                        other => panic!("unexpected event {other:?}"),
                    };
                    evs.push((b.cpu(), e.timestamp(), k, pid));
                }
            }
            Some(Data::ProcessTree(pt)) => {
                for th in &pt.threads {
                    names.insert(th.tid() as i64, th.name().to_string());
                }
            }
            Some(Data::TrackDescriptor(td)) => {
                tracks.insert(td.uuid(), td.name().to_string());
            }
            Some(Data::TrackEvent(te)) if te.track_uuid() != spike_track => {
                use perfetto_protos::track_event::track_event::Type;
                let args: BTreeMap<String, String> = te
                    .debug_annotations
                    .iter()
                    .map(|a| {
                        let v = if a.has_uint_value() {
                            a.uint_value().to_string()
                        } else {
                            a.string_value().to_string()
                        };
                        (a.name().to_string(), v)
                    })
                    .collect();
                let track = tracks
                    .get(&te.track_uuid())
                    .cloned()
                    .expect("a mark on a described track");
                match te.type_() {
                    Type::TYPE_SLICE_BEGIN => {
                        open_marks.insert(
                            te.track_uuid(),
                            (p.timestamp(), te.name().to_string(), args),
                        );
                    }
                    Type::TYPE_SLICE_END => {
                        let (b, n, a) = open_marks
                            .remove(&te.track_uuid())
                            .expect("an end after a begin");
                        marks.push((track, b, p.timestamp(), n, a));
                    }
                    Type::TYPE_INSTANT => marks.push((
                        track,
                        p.timestamp(),
                        p.timestamp(),
                        te.name().to_string(),
                        args,
                    )),
                    t => panic!("unexpected track event type {t:?}"),
                }
            }
            Some(Data::TrackEvent(te)) => {
                use perfetto_protos::track_event::track_event::Type;
                match te.type_() {
                    Type::TYPE_SLICE_BEGIN => open = Some((p.timestamp(), te.name().to_string())),
                    Type::TYPE_SLICE_END => {
                        let (b, n) = open.take().expect("an end after a begin");
                        slices.push((b, p.timestamp(), n));
                    }
                    t => panic!("unexpected track event type {t:?}"),
                }
            }
            _ => {}
        }
    }
    evs.sort();
    migs.sort();
    marks.sort();
    Decoded {
        evs,
        names,
        slices,
        migrations: migs,
        marks,
    }
}

/// latlab's own migrations of a trace.dat, as the profile decodes them (its own reader of
/// `sched_migrate_task`, `latlab_core::profile::decode`), and the events after a loss.
fn own_migrations(dat: &Path) -> Vec<Mig> {
    use latlab_core::profile::decode::StreamDecoder;
    use latlab_core::profile::Ev;
    let bytes = std::fs::read(dat).unwrap();
    let d = latlab_core::trace::tracedat::read(&bytes).unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let formats: Vec<String> = d
        .ftrace_formats
        .iter()
        .chain(d.event_formats.iter().flat_map(|(_, f)| f.iter()))
        .map(|f| text(f))
        .collect();
    let refs: Vec<&str> = formats.iter().map(String::as_str).collect();
    let mut dec = StreamDecoder::new(&text(&d.header_page), &text(&d.header_event), &refs).unwrap();
    let mut out = Vec::new();
    for c in &d.cpus {
        let mut lost = false;
        dec.decode(c.cpu, &c.pages, &mut lost, &mut out).unwrap();
    }
    let mut v: Vec<Mig> = out
        .iter()
        .filter_map(|e| match e.ev {
            Ev::Migrate { pid, orig, dest } => Some((e.cpu, e.ts, pid, orig as i64, dest as i64)),
            _ => None,
        })
        .collect();
    v.sort();
    v
}

/// The same tuples from latlab's own decoding of a trace.dat (every CPU merged in time
/// order), and the names each thread had in its scheduler events.
fn own(dat: &Path) -> (Vec<Row>, BTreeMap<i64, Vec<String>>) {
    use latlab_core::trace::raw::{decode_all, decoder_for};
    use latlab_core::trace::EventKind as K;
    let bytes = std::fs::read(dat).unwrap();
    let d = latlab_core::trace::tracedat::read(&bytes).unwrap();
    let (dec, mut comms) = decoder_for(&d).unwrap();
    let (events, _, _) = decode_all(&dec, &d, &mut comms).unwrap();
    let (mut v, mut names) = (Vec::new(), BTreeMap::<i64, Vec<String>>::new());
    let mut name = |pid: i64, comm: &str| names.entry(pid).or_default().push(comm.to_string());
    for e in &events {
        let (k, pid) = match &e.kind {
            K::SchedSwitch { prev, next, .. } => {
                name(prev.pid, &prev.comm);
                name(next.pid, &next.comm);
                ("switch", next.pid)
            }
            K::SchedWaking { task, .. } => {
                name(task.pid, &task.comm);
                ("waking", task.pid)
            }
            K::SchedWakeup { task, .. } => {
                name(task.pid, &task.comm);
                ("wakeup", task.pid)
            }
            K::IrqEntry { irq, .. } => ("irq_entry", *irq),
            K::IrqExit { irq } => ("irq_exit", *irq),
            K::SoftirqEntry { vec, .. } => ("softirq_entry", *vec),
            K::SoftirqExit { vec, .. } => ("softirq_exit", *vec),
            K::Marker { .. } => ("print", 0),
            _ => continue,
        };
        v.push((e.cpu, e.ts, k, pid));
    }
    for (cpu, ts, pid, _, _) in own_migrations(dat) {
        v.push((cpu, ts, "migrate", pid));
    }
    v.sort();
    names.remove(&0);
    (v, names)
}

#[test]
fn export_of_a_run_without_traces_is_one_line_error() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("r");
    support::latlab()
        .args([
            "run",
            "--backend",
            "sim",
            "--duration",
            "2s",
            "-q",
            "--results",
        ])
        .arg(&results)
        .assert()
        .success();
    let run = support::only_run_dir(&results);
    let out = tmp.path().join("x.pftrace");
    let o = support::latlab()
        .args(["export", "--format", "perfetto", "-o"])
        .arg(&out)
        .arg(&run)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("latlab: error: ") && err.contains("no traces to export"),
        "{err}"
    );
    assert!(!out.exists());
}

/// A real profile's window: Perfetto's decoding of the export equals latlab's decoding of
/// profile/trace.dat, event for event (CPU, time, kind, pid) and thread names.
#[test]
fn profile_window_exports_the_same_events() {
    let Some(_g) = support::privileged::guard("perfetto_profile_export") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("r");
    // A thread moving itself between CPUs 0 and 1 while the profile runs: migrations.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mover = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // SAFETY: a cpu_set_t on the stack, set for this thread only.
                unsafe {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET((n % 2) as usize, &mut set);
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                }
                n += 1;
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            n
        })
    };
    support::latlab()
        .args([
            "profile",
            "--duration",
            "2s",
            "--cpus",
            "0",
            "-q",
            "--profile-window",
            "4MiB",
            "--results",
        ])
        .arg(&results)
        .assert()
        .success();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let moves = mover.join().unwrap();
    let run = support::only_run_dir(&results);
    let dat = run.join("profile/trace.dat");
    assert!(dat.is_file());
    let out = tmp.path().join("p.pftrace");
    support::latlab()
        .args(["export", "--format", "perfetto", "-o"])
        .arg(&out)
        .arg(&run)
        .assert()
        .success();
    let Decoded {
        evs: got,
        names,
        slices,
        ..
    } = decode(&std::fs::read(&out).unwrap());
    let (want, own_names) = own(&dat);
    assert!(
        want.iter().filter(|e| e.2 == "switch").count() > 10,
        "a thin window"
    );
    assert_eq!(got.len(), want.len());
    assert_eq!(got, want);
    // Every thread named, with a name it had (a comm changes at exec and prctl).
    for (pid, ns) in &own_names {
        let n = names
            .get(pid)
            .unwrap_or_else(|| panic!("pid {pid} unnamed"));
        assert!(ns.contains(n), "pid {pid}: {n} not in {ns:?}");
    }
    assert!(
        slices.is_empty(),
        "a profile without --trace-threshold has no spikes"
    );

    // sched_migrate_task: exported with its fields, equal to the profile's own decoding.
    let d = decode(&std::fs::read(&out).unwrap());
    let own_migs = own_migrations(&dat);
    assert!(
        own_migs.len() >= 10,
        "{} migrations ({moves} moves)",
        own_migs.len()
    );
    eprintln!("{} migrations exported ({moves} moves)", own_migs.len());
    assert_eq!(d.migrations, own_migs);
    assert!(d.marks.is_empty(), "no loss, no mark: {:?}", d.marks);

    lost_events_show_as_gaps(&run, tmp.path());
}

/// The profile of `run` with losses: a page of its window marked "1234 events lost" and
/// run.json's per-CPU totals (77 events, 5 ms in gaps) → slices "events lost" on a track of
/// the CPU, from the event before the loss to the one after it (as latlab's decoder places
/// the mark) with the count as an arg, and the totals over the profile's span.
fn lost_events_show_as_gaps(run: &Path, tmp: &Path) {
    use latlab_core::trace::raw::{decoder_for, parse_header_page};
    use latlab_core::trace::tracedat;
    let copy = tmp.join("lossy");
    std::fs::create_dir_all(copy.join("profile")).unwrap();
    let bytes = std::fs::read(run.join("profile/trace.dat")).unwrap();
    let mut dat = tracedat::read(&bytes).unwrap().into_owned();
    let layout = parse_header_page(&String::from_utf8_lossy(&dat.header_page)).unwrap();
    let ps = layout.page_size();
    // The second page of the CPU with the most pages.
    let ci = (0..dat.cpus.len())
        .max_by_key(|&i| dat.cpus[i].pages.len())
        .unwrap();
    let cpu = dat.cpus[ci].cpu;
    assert!(dat.cpus[ci].pages.len() >= 2 * ps, "a thin window");
    {
        let page = &mut dat.cpus[ci].pages.to_mut()[ps..2 * ps];
        let at = layout.commit_offset;
        let mut commit = u64::from_ne_bytes(page[at..at + 8].try_into().unwrap());
        let size = (commit & ((1 << 27) - 1)) as usize;
        let end = layout.data_offset + size;
        assert!(end + 8 <= ps, "a full page: no room for the count");
        commit |= (1 << 31) | (1 << 30);
        page[at..at + 8].copy_from_slice(&commit.to_ne_bytes());
        page[end..end + 8].copy_from_slice(&1234u64.to_ne_bytes());
    }
    let mut f = Vec::new();
    tracedat::write(&dat, &mut f).unwrap();
    std::fs::write(copy.join("profile/trace.dat"), &f).unwrap();
    // Where latlab's decoder places the loss: between which events of that CPU.
    let (dec, comms) = decoder_for(&dat).unwrap();
    let mut evs = Vec::new();
    let st = dec
        .decode_cpu(cpu, &dat.cpus[ci].pages, &comms, &mut evs)
        .unwrap();
    assert_eq!(st.lost.len(), 1, "{:?}", st.lost);
    let k = st.lost[0].before;
    assert!(k >= 1 && k < evs.len());
    let (after, before) = (evs[k - 1].ts, evs[k].ts);

    let mut rec = support::read_json(&run.join("run.json"));
    let prof = &mut rec["profile"];
    prof["cpus"][0]["lost_events"] = 77.into();
    prof["cpus"][0]["gap_ns"] = 5_000_000.into();
    let (pcpu, start, dur) = (
        prof["cpus"][0]["cpu"].as_u64().unwrap(),
        prof["start_ns"].as_u64().unwrap(),
        prof["duration_ns"].as_u64().unwrap(),
    );
    std::fs::write(copy.join("run.json"), serde_json::to_vec(&rec).unwrap()).unwrap();
    let out = tmp.join("lossy.pftrace");
    support::latlab()
        .args(["export", "--format", "perfetto", "-o"])
        .arg(&out)
        .arg(&copy)
        .assert()
        .success();
    let d = decode(&std::fs::read(&out).unwrap());
    let args = |v: &[(&str, u64)]| -> BTreeMap<String, String> {
        v.iter()
            .map(|(k, n)| (k.to_string(), n.to_string()))
            .collect()
    };
    let mut want = vec![
        (
            format!("CPU {cpu}: events lost"),
            after,
            before,
            "events lost: 1234".to_string(),
            args(&[("cpu", cpu as u64), ("lost_events", 1234)]),
        ),
        (
            format!("CPU {pcpu}: events lost (profile totals)"),
            start,
            start + dur,
            "profile: 77 events lost, 5000 µs in gaps".to_string(),
            args(&[
                ("cpu", pcpu),
                ("lost_events", 77),
                ("gap_ns", 5_000_000),
                (
                    "known_ns",
                    rec["profile"]["cpus"][0]["known_ns"].as_u64().unwrap(),
                ),
            ]),
        ),
    ];
    want.sort();
    assert_eq!(d.marks, want);
}

/// A traced spike (`latlab run --trace-threshold`): its window's events and the spike as a
/// slice from the intended wake-up to the clock read, named with its CPU.
#[test]
fn spike_windows_export_with_their_slices() {
    let Some(_g) = support::privileged::guard("perfetto_spike_export") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("r");
    // A threshold every wake-up exceeds: spikes are traced at once.
    support::latlab()
        .args([
            "run",
            "--duration",
            "2s",
            "--cpus",
            "0",
            "-q",
            "--trace-threshold",
            // The smallest threshold latlab takes: every wake-up is above it.
            "1us",
            "--trace-max-spikes",
            "2",
            "--results",
        ])
        .arg(&results)
        .assert()
        .success();
    let run = support::only_run_dir(&results);
    let rec = support::read_json(&run.join("run.json"));
    let spikes = rec["spikes"].as_array().unwrap();
    let traced: Vec<_> = spikes
        .iter()
        .filter(|s| s["trace_file"].is_string())
        .collect();
    assert!(!traced.is_empty(), "no traced spike");
    let out = tmp.path().join("s.pftrace");
    support::latlab()
        .args(["export", "--format", "perfetto", "-o"])
        .arg(&out)
        .arg(&run)
        .assert()
        .success();
    let Decoded {
        evs: got, slices, ..
    } = decode(&std::fs::read(&out).unwrap());
    let mut want = Vec::new();
    for s in &traced {
        let f = run.join(s["trace_file"].as_str().unwrap());
        want.extend(own(&f.with_file_name("trace.dat")).0);
    }
    want.sort();
    assert_eq!(got, want);
    assert_eq!(slices.len(), traced.len());
    for (s, (b, e, name)) in traced.iter().zip(&slices) {
        assert_eq!(*b, s["at_ns"].as_u64().unwrap());
        assert_eq!(*e, b + s["latency_ns"].as_u64().unwrap());
        assert!(name.contains("CPU 0"), "{name}");
    }
}

/// A spike window saved as text only (`trace.txt`, the recorder's fallback) with a
/// `CPU:0 [LOST 42 EVENTS]` line between two events of CPU 0: the export shows the gap as a
/// slice "events lost: 42" between them, on CPU 0's track, the count as an arg. No root.
#[test]
fn a_text_window_with_lost_events_shows_the_gap() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("r");
    support::latlab()
        .args([
            "run",
            "--backend",
            "sim",
            "--duration",
            "1s",
            "-q",
            "--results",
        ])
        .arg(&results)
        .assert()
        .success();
    let run = support::only_run_dir(&results);
    std::fs::create_dir_all(run.join("spikes/001")).unwrap();
    let l = |pid: i64, ts: &str, body: &str| {
        format!("{:>16}-{pid:<7} [000] d..2. {ts:>12}: {body}\n", "t")
    };
    let text = [
        l(0, "100.000000", "sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=a next_pid=5 next_prio=120"),
        "CPU:0 [LOST 42 EVENTS]\n".to_string(),
        l(5, "100.000500", "sched_switch: prev_comm=a prev_pid=5 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120"),
    ]
    .concat();
    std::fs::write(run.join("spikes/001/trace.txt"), text).unwrap();
    let mut rec = support::read_json(&run.join("run.json"));
    rec["spikes"] = serde_json::json!([{
        "cpu": 0, "at_ns": 100_000_100_000u64, "latency_ns": 300_000,
        "trace_file": "spikes/001/trace.txt"
    }]);
    std::fs::write(run.join("run.json"), serde_json::to_vec(&rec).unwrap()).unwrap();
    let out = tmp.path().join("t.pftrace");
    support::latlab()
        .args(["export", "--format", "perfetto", "-o"])
        .arg(&out)
        .arg(&run)
        .assert()
        .success();
    let d = decode(&std::fs::read(&out).unwrap());
    assert_eq!(d.evs.len(), 2);
    let args: BTreeMap<String, String> = [("cpu", "0"), ("lost_events", "42")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(
        d.marks,
        [(
            "CPU 0: events lost".to_string(),
            100_000_000_000,
            100_000_500_000,
            "events lost: 42".to_string(),
            args
        )]
    );
    assert_eq!(d.slices.len(), 1);
}
