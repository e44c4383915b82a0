//! `latlab export --format perfetto`: the file decoded with Perfetto's own definitions
//! (Perfetto v51.1's .proto files in `tests/fixtures/perfetto`, read by Google's `protoc
//! --decode`) must hold the events latlab's own decoder reads from the same trace, with their
//! names and times.

mod support;

use std::collections::BTreeMap;
use std::path::Path;

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

/// A message in protobuf's text format, as `protoc --decode` prints it: its fields in order,
/// each a scalar (as printed: a number, an enum's name, a string unescaped) or a message.
#[derive(Debug, Default)]
struct Msg(Vec<(String, Field)>);

#[derive(Debug)]
enum Field {
    Scalar(String),
    Msg(Msg),
}

impl Msg {
    fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Msg> + 'a {
        self.0.iter().filter_map(move |(k, v)| match v {
            Field::Msg(m) if k == name => Some(m),
            _ => None,
        })
    }
    fn msg<'a>(&'a self, name: &'a str) -> Option<&'a Msg> {
        self.all(name).next()
    }
    fn scalar(&self, name: &str) -> Option<&str> {
        self.0.iter().find_map(|(k, v)| match v {
            Field::Scalar(s) if k == name => Some(s.as_str()),
            _ => None,
        })
    }
    /// A number field, 0 when absent (proto2's default).
    fn num(&self, name: &str) -> i64 {
        self.scalar(name)
            .map_or(0, |v| v.parse().unwrap_or_else(|_| panic!("{name}: {v}")))
    }
    fn u64(&self, name: &str) -> u64 {
        self.scalar(name)
            .map_or(0, |v| v.parse().unwrap_or_else(|_| panic!("{name}: {v}")))
    }
    fn str(&self, name: &str) -> String {
        self.scalar(name).unwrap_or_default().to_string()
    }
    /// The first field that is a message: a oneof's member.
    fn member(&self) -> Option<(&str, &Msg)> {
        self.0.iter().find_map(|(k, v)| match v {
            Field::Msg(m) => Some((k.as_str(), m)),
            Field::Scalar(_) => None,
        })
    }
    /// A field Perfetto's definitions do not know, printed by its number: a field latlab
    /// wrote under a wrong number or type.
    fn unknown_field(&self) -> Option<String> {
        self.0.iter().find_map(|(k, v)| {
            if k.bytes().all(|b| b.is_ascii_digit()) {
                return Some(format!("{k}: {v:?}"));
            }
            match v {
                Field::Msg(m) => m.unknown_field().map(|u| format!("{k} {{ {u} }}")),
                Field::Scalar(_) => None,
            }
        })
    }
}

/// protoc is installed, or the test `test` cannot run (a failure under
/// LATLAB_REQUIRE_PRIVILEGED=1).
fn have_protoc(test: &str) -> bool {
    let found = std::process::Command::new("protoc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        support::cannot_run(
            test,
            "protoc is not installed (Debian's protobuf-compiler; bash scripts/deps.sh installs it)",
        );
    }
    found
}

/// `bytes` decoded as a `perfetto.protos.Trace` by protoc with Perfetto's own definitions.
fn protoc_decode(bytes: &[u8]) -> Msg {
    use std::io::Write;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/perfetto");
    let mut child = std::process::Command::new("protoc")
        .arg("--decode=perfetto.protos.Trace")
        .arg("-I")
        .arg(&dir)
        .arg("protos/perfetto/trace/trace.proto")
        .current_dir(&dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("protoc (Debian's protobuf-compiler; bash scripts/deps.sh installs it)");
    let mut stdin = child.stdin.take().unwrap();
    let input = bytes.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "protoc cannot decode the file as a Perfetto Trace: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("protoc prints ASCII");
    let mut toks = Tokens(text.as_bytes(), 0);
    let m = parse_msg(&mut toks, false);
    if let Some(u) = m.unknown_field() {
        panic!("a field Perfetto does not define: {u}");
    }
    m
}

/// The text being parsed and the place in it.
struct Tokens<'a>(&'a [u8], usize);

impl Tokens<'_> {
    fn skip_space(&mut self) {
        while self.1 < self.0.len() && self.0[self.1].is_ascii_whitespace() {
            self.1 += 1;
        }
    }
    fn word(&mut self) -> String {
        self.skip_space();
        let s = self.1;
        while self.1 < self.0.len() && !b" \n\t:{}".contains(&self.0[self.1]) {
            self.1 += 1;
        }
        String::from_utf8_lossy(&self.0[s..self.1]).into_owned()
    }
    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.0.get(self.1).copied()
    }
}

/// A message's fields up to its `}` (or the end, at the top).
fn parse_msg(t: &mut Tokens, nested: bool) -> Msg {
    let mut m = Msg::default();
    loop {
        match t.peek() {
            None if !nested => return m,
            None => panic!("protoc's text ended inside a message"),
            Some(b'}') => {
                assert!(nested, "an unmatched }}");
                t.1 += 1;
                return m;
            }
            Some(_) => {}
        }
        let name = t.word();
        match t.peek() {
            Some(b'{') => {
                t.1 += 1;
                m.0.push((name, Field::Msg(parse_msg(t, true))));
            }
            Some(b':') => {
                t.1 += 1;
                let v = if t.peek() == Some(b'"') {
                    unquote(t)
                } else {
                    t.word()
                };
                m.0.push((name, Field::Scalar(v)));
            }
            other => panic!("after {name}: {:?}", other.map(char::from)),
        }
    }
}

/// A C-escaped string of the text format (octal for bytes outside ASCII), as UTF-8.
fn unquote(t: &mut Tokens) -> String {
    t.1 += 1;
    let mut out = Vec::new();
    loop {
        let c = t.0[t.1];
        t.1 += 1;
        match c {
            b'"' => break,
            b'\\' => {
                let e = t.0[t.1];
                t.1 += 1;
                match e {
                    b'n' => out.push(b'\n'),
                    b'r' => out.push(b'\r'),
                    b't' => out.push(b'\t'),
                    b'0'..=b'7' => {
                        let mut v = u32::from(e - b'0');
                        for _ in 0..2 {
                            match t.0[t.1] {
                                d @ b'0'..=b'7' => {
                                    v = v * 8 + u32::from(d - b'0');
                                    t.1 += 1;
                                }
                                _ => break,
                            }
                        }
                        out.push(v as u8);
                    }
                    b'x' => {
                        let h = std::str::from_utf8(&t.0[t.1..t.1 + 2]).unwrap();
                        out.push(u8::from_str_radix(h, 16).unwrap());
                        t.1 += 2;
                    }
                    other => out.push(other),
                }
            }
            _ => out.push(c),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn decode(bytes: &[u8]) -> Decoded {
    let t = protoc_decode(bytes);
    let (mut evs, mut names, mut slices) = (Vec::new(), BTreeMap::new(), Vec::new());
    let (mut migs, mut marks) = (Vec::new(), Vec::new());
    let mut tracks: BTreeMap<u64, String> = BTreeMap::new();
    let mut open_marks: BTreeMap<u64, (u64, String, BTreeMap<String, String>)> = BTreeMap::new();
    let spike_track = latlab_report::perfetto::SPIKE_TRACK;
    let mut open: Option<(u64, String)> = None;
    for p in t.all("packet") {
        if let Some(b) = p.msg("ftrace_events") {
            let cpu = b.u64("cpu") as u32;
            for e in b.all("event") {
                let (k, s) = e.member().expect("an ftrace event with its fields");
                let (k, pid) = match k {
                    "sched_switch" => ("switch", s.num("next_pid")),
                    "sched_waking" => ("waking", s.num("pid")),
                    "sched_wakeup" => ("wakeup", s.num("pid")),
                    "irq_handler_entry" => ("irq_entry", s.num("irq")),
                    "irq_handler_exit" => ("irq_exit", s.num("irq")),
                    "softirq_entry" => ("softirq_entry", s.num("vec")),
                    "softirq_exit" => ("softirq_exit", s.num("vec")),
                    "print" => ("print", 0),
                    "sched_migrate_task" => {
                        migs.push((
                            cpu,
                            e.u64("timestamp"),
                            s.num("pid"),
                            s.num("orig_cpu"),
                            s.num("dest_cpu"),
                        ));
                        ("migrate", s.num("pid"))
                    }
                    other => panic!("unexpected event {other}: {s:?}"),
                };
                evs.push((cpu, e.u64("timestamp"), k, pid));
            }
        }
        if let Some(pt) = p.msg("process_tree") {
            for th in pt.all("threads") {
                names.insert(th.num("tid"), th.str("name"));
            }
        }
        if let Some(td) = p.msg("track_descriptor") {
            tracks.insert(td.u64("uuid"), td.str("name"));
        }
        let Some(te) = p.msg("track_event") else {
            continue;
        };
        let ts = p.u64("timestamp");
        let kind = te.str("type");
        let uuid = te.u64("track_uuid");
        if uuid != spike_track {
            let args: BTreeMap<String, String> = te
                .all("debug_annotations")
                .map(|a| {
                    let v = a
                        .scalar("uint_value")
                        .map_or_else(|| a.str("string_value"), str::to_string);
                    (a.str("name"), v)
                })
                .collect();
            let track = tracks
                .get(&uuid)
                .cloned()
                .expect("a mark on a described track");
            match kind.as_str() {
                "TYPE_SLICE_BEGIN" => {
                    open_marks.insert(uuid, (ts, te.str("name"), args));
                }
                "TYPE_SLICE_END" => {
                    let (b, n, a) = open_marks.remove(&uuid).expect("an end after a begin");
                    marks.push((track, b, ts, n, a));
                }
                "TYPE_INSTANT" => marks.push((track, ts, ts, te.str("name"), args)),
                t => panic!("unexpected track event type {t:?}"),
            }
        } else {
            match kind.as_str() {
                "TYPE_SLICE_BEGIN" => open = Some((ts, te.str("name"))),
                "TYPE_SLICE_END" => {
                    let (b, n) = open.take().expect("an end after a begin");
                    slices.push((b, ts, n));
                }
                t => panic!("unexpected track event type {t:?}"),
            }
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
    if !have_protoc("perfetto_profile_export") {
        return;
    }
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
    if !have_protoc("perfetto_spike_export") {
        return;
    }
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
    if !have_protoc("perfetto_text_window_lost") {
        return;
    }
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
