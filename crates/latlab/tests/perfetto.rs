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

/// (cpu, ts, kind, pid named by the event) of every event a Perfetto file holds; the threads'
/// names; the spikes' slices (begin, end, name).
#[allow(clippy::type_complexity)]
fn decode(
    bytes: &[u8],
) -> (
    Vec<(u32, u64, &'static str, i64)>,
    BTreeMap<i64, String>,
    Vec<(u64, u64, String)>,
) {
    let t = Trace::parse_from_bytes(bytes).expect("a Perfetto Trace");
    let (mut evs, mut names, mut slices) = (Vec::new(), BTreeMap::new(), Vec::new());
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
    (evs, names, slices)
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
    let (got, names, slices) = decode(&std::fs::read(&out).unwrap());
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
            "1ns",
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
    let (got, _, slices) = decode(&std::fs::read(&out).unwrap());
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
