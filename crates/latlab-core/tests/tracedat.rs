//! trace.dat (`latlab_core::trace::tracedat`): what latlab writes is what trace-cmd reads, and
//! the reader takes what the writer writes and refuses what is broken.
//!
//! trace-cmd is the oracle and is only ever run to READ files (`report`, `dump`, `convert`
//! between two files); it never records (that would reset the top-level buffer). Where it is
//! missing, the tests that need it skip with a message (`bash scripts/deps.sh` installs it), and
//! fail under `LATLAB_REQUIRE_PRIVILEGED=1`.
//!
//! The fixture (tests/fixtures/trace/binary/, see its README) is a matched pair from this
//! machine's kernel: the instance's text (`cpu0.trace.txt`) and the same 1370 events as raw
//! ring-buffer pages (`cpu0.trace_pipe_raw`), with the header and format files.

use latlab_core::trace::tracedat::{self, CpuData, TraceDat, TraceDatError};
use proptest::prelude::*;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/trace/binary/");

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{FIX}{name}")).unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

fn kernel_text() -> String {
    String::from_utf8(fixture("cpu0.trace.txt")).expect("the fixture text is UTF-8")
}

// ---------------------------------------------------------------------------------------------
// Support: a private temporary directory, trace-cmd, the event lines of both texts.

/// A directory of our own (created with mkdir, which fails if the name exists; mode 0700),
/// removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        use std::os::unix::fs::DirBuilderExt;
        use std::time::{SystemTime, UNIX_EPOCH};
        for n in 0..100u32 {
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let p = std::env::temp_dir().join(format!(
                "latlab-tracedat-{}-{nanos:x}-{n}",
                std::process::id()
            ));
            if std::fs::DirBuilder::new().mode(0o700).create(&p).is_ok() {
                return TempDir(p);
            }
        }
        panic!("could not create a temporary directory");
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn require_privileged() -> bool {
    std::env::var("LATLAB_REQUIRE_PRIVILEGED").is_ok_and(|v| v == "1")
}

/// trace-cmd's path, or None (with a message) when it is not installed; a failure instead under
/// `LATLAB_REQUIRE_PRIVILEGED=1`, where a skip would hide a test that did not run.
fn trace_cmd(test: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("trace-cmd"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        let why = "trace-cmd is not installed (bash scripts/deps.sh installs it)";
        if require_privileged() {
            panic!("{test}: LATLAB_REQUIRE_PRIVILEGED=1 but {why}");
        }
        eprintln!("skipping {test}: {why}");
    }
    found
}

/// `trace-cmd ARGS...`: its stdout; panics with its stderr when it fails.
fn run(tc: &Path, args: &[&str]) -> String {
    let out = Command::new(tc).args(args).output().expect("run trace-cmd");
    assert!(
        out.status.success(),
        "trace-cmd {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn write_file(dat: &TraceDat, path: &Path) {
    let mut v = Vec::new();
    tracedat::write(dat, &mut v).expect("write trace.dat");
    std::fs::write(path, v).expect("save trace.dat");
}

/// One event line, cut into its fields: the kernel's `TASK-PID [CPU] FLAGS SECS.USEC: NAME: BODY`
/// and `trace-cmd report -l`'s `TASK-PID CPUFLAGS SECS.USEC: NAME: BODY` alike.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ev {
    comm: String,
    pid: i64,
    cpu: u32,
    flags: String,
    /// As printed (seconds with 6 decimals): compared as text, so to the microsecond.
    ts: String,
    name: String,
    body: String,
}

fn is_ts(t: &str) -> bool {
    t.split_once('.').is_some_and(|(s, f)| {
        !s.is_empty()
            && !f.is_empty()
            && s.bytes().all(|b| b.is_ascii_digit())
            && f.bytes().all(|b| b.is_ascii_digit())
    })
}

fn parse_line(line: &str) -> Option<Ev> {
    // The timestamp: the first `DIGITS.DIGITS` token followed by ": ".
    let mut from = 0;
    let (head, rest, ts) = loop {
        let i = line[from..].find(": ")? + from;
        let start = line[..i].rfind(' ').map_or(0, |s| s + 1);
        if is_ts(&line[start..i]) {
            break (line[..start].trim_end(), &line[i + 2..], &line[start..i]);
        }
        from = i + 2;
    };
    let (task, last) = head.rsplit_once(' ')?;
    let task = task.trim_end();
    let (task, cpu, flags) = match task.strip_suffix(']') {
        // trace-cmd without -l: `TASK-PID [CPU]`, no flags
        _ if last.starts_with('[') && last.ends_with(']') => {
            (task, last[1..last.len() - 1].parse().ok()?, String::new())
        }
        // kernel: `TASK-PID [CPU] FLAGS`
        Some(t) => {
            let (task, cpu) = t.rsplit_once('[')?;
            (task, cpu.parse().ok()?, last.to_string())
        }
        // trace-cmd -l: `TASK-PID CPUFLAGS`
        None => {
            let digits = last.bytes().take_while(u8::is_ascii_digit).count();
            (
                task,
                last[..digits].parse().ok()?,
                last[digits..].to_string(),
            )
        }
    };
    let (comm, pid) = task.trim().rsplit_once('-')?;
    let (name, body) = rest.split_once(':')?;
    Some(Ev {
        comm: comm.to_string(),
        pid: pid.parse().ok()?,
        cpu,
        flags,
        ts: ts.to_string(),
        name: name.to_string(),
        // trace-cmd pads the name column with spaces.
        body: body.trim_start().to_string(),
    })
}

/// The events of a text; lines that are not events must be comments or trace-cmd's `cpus=N`.
fn events(text: &str) -> Vec<Ev> {
    let mut v = vec![];
    for line in text.lines() {
        match parse_line(line) {
            Some(e) => v.push(e),
            None => assert!(
                line.is_empty() || line.starts_with('#') || line.starts_with("cpus="),
                "a line that is not an event: {line:?}"
            ),
        }
    }
    v
}

/// `saved_cmdlines` text (`PID COMM` lines) from the TASK-PID column of the kernel's text: the
/// kernel printed that column from its saved cmdlines, which the fixture does not include.
fn cmdlines_of(text: &str) -> Vec<u8> {
    let mut comms: BTreeMap<i64, String> = BTreeMap::new();
    for e in events(text) {
        if e.pid == 0 {
            continue; // trace-cmd names pid 0 `<idle>` itself
        }
        let c = comms.entry(e.pid).or_insert_with(|| e.comm.clone());
        assert_eq!(
            *c, e.comm,
            "pid {} has two names in the kernel's text",
            e.pid
        );
    }
    comms
        .iter()
        .map(|(p, c)| format!("{p} {c}\n"))
        .collect::<String>()
        .into_bytes()
}

/// The fixture as a trace.dat's contents.
fn fixture_dat() -> TraceDat<'static> {
    let fmt = |n: &str| Cow::Owned(fixture(&format!("{n}.format")));
    let mut stats = b"CPU: 0\n".to_vec();
    stats.extend(fixture("cpu0.stats"));
    TraceDat {
        big_endian: false,
        long_size: 8,
        page_size: 4096,
        clock: "mono".into(),
        header_page: fixture("header_page").into(),
        header_event: fixture("header_event").into(),
        ftrace_formats: vec![fmt("ftrace_print")],
        event_formats: vec![
            (
                "sched".into(),
                vec![
                    fmt("sched_sched_switch"),
                    fmt("sched_sched_waking"),
                    fmt("sched_sched_wakeup"),
                    fmt("sched_sched_migrate_task"),
                ],
            ),
            (
                "irq".into(),
                vec![
                    fmt("irq_irq_handler_entry"),
                    fmt("irq_irq_handler_exit"),
                    fmt("irq_softirq_entry"),
                    fmt("irq_softirq_exit"),
                ],
            ),
            (
                "irq_vectors".into(),
                vec![
                    fmt("irq_vectors_local_timer_entry"),
                    fmt("irq_vectors_local_timer_exit"),
                ],
            ),
        ],
        kallsyms: None,
        printk: None,
        cmdlines: cmdlines_of(&kernel_text()).into(),
        cpus: vec![CpuData {
            cpu: 0,
            pages: fixture("cpu0.trace_pipe_raw").into(),
        }],
        cpu_stats: vec![stats.into()],
    }
}

/// What trace-cmd prints of the file: the events. `-N`: no plugins, so bodies follow the events'
/// own print formats as the kernel's do. Two runs, as neither layout has every field: the
/// default one has the whole task name and no flags column; `-l` has the flags but cuts the
/// task name to 8 characters (checked to be the start of the whole one).
fn report_events(tc: &Path, file: &Path) -> Vec<Ev> {
    let f = file.to_str().unwrap();
    let mut plain = events(&run(tc, &["report", "-N", "-i", f]));
    let lat = events(&run(tc, &["report", "-N", "-l", "-i", f]));
    assert_eq!(
        plain.len(),
        lat.len(),
        "trace-cmd report with and without -l"
    );
    for (i, (p, l)) in plain.iter_mut().zip(lat).enumerate() {
        let cut: String = p.comm.chars().take(8).collect();
        assert_eq!(
            Ev {
                comm: cut,
                flags: l.flags.clone(),
                ..p.clone()
            },
            l,
            "event {i} with and without -l"
        );
        p.flags = l.flags;
    }
    plain
}

/// A marker's address and text, from trace-cmd's `print` body `0xADDR: TEXT`.
fn split_marker(body: &str) -> (&str, &str) {
    let (addr, text) = body
        .split_once(": ")
        .unwrap_or_else(|| panic!("marker body {body:?}"));
    assert!(
        addr.strip_prefix("0x")
            .is_some_and(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit())),
        "marker body {body:?} does not start with its caller's address"
    );
    (addr, text)
}

// ---------------------------------------------------------------------------------------------
// trace-cmd as the oracle.

#[test]
fn trace_cmd_reports_the_kernels_own_events_from_the_written_file() {
    let Some(tc) = trace_cmd("trace_cmd_reports_the_kernels_own_events_from_the_written_file")
    else {
        return;
    };
    let dir = TempDir::new();
    let file = dir.path("trace.dat");
    write_file(&fixture_dat(), &file);

    let kernel = events(&kernel_text());
    let ours = report_events(&tc, &file);
    assert_eq!(kernel.len(), 1370, "the fixture's text");
    assert_eq!(ours.len(), kernel.len(), "events trace-cmd reports");

    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, (k, t)) in kernel.iter().zip(&ours).enumerate() {
        let mut k = k.clone();
        let mut t = t.clone();
        // Normalised: a marker. The kernel prints it as `CALLER: TEXT` with no event name and
        // the caller resolved by its own symbol table; trace-cmd prints `print: 0xADDR: TEXT`
        // (the file has no kallsyms to resolve ADDR; see the kallsyms test). Compared: the
        // text, and the rest of the fields as they are.
        if k.name == "tracing_mark_write" {
            k.name = "print".into();
            t.body = split_marker(&t.body).1.to_string();
        }
        assert_eq!(t, k, "event {i}");
        *names
            .entry(if k.name == "print" { "print" } else { "other" })
            .or_default() += 1;
    }
    assert_eq!(names.get("print"), Some(&1), "the fixture's one marker");
}

#[test]
fn trace_cmd_names_the_markers_caller_from_the_files_kallsyms() {
    let Some(tc) = trace_cmd("trace_cmd_names_the_markers_caller_from_the_files_kallsyms") else {
        return;
    };
    let dir = TempDir::new();
    let file = dir.path("trace.dat");
    let mut dat = fixture_dat();
    write_file(&dat, &file);
    let marker = |evs: Vec<Ev>| {
        let mut m = evs.into_iter().filter(|e| e.name == "print");
        let e = m.next().expect("a marker");
        assert!(m.next().is_none(), "one marker");
        e.body
    };
    let raw = marker(report_events(&tc, &file));
    let (addr, text) = split_marker(&raw);
    assert_eq!(text, "fixture marker");

    dat.kallsyms = Some(
        format!("{} t latlab_test_caller\n", &addr[2..])
            .into_bytes()
            .into(),
    );
    write_file(&dat, &file);
    assert_eq!(
        marker(report_events(&tc, &file)),
        "latlab_test_caller: fixture marker"
    );
}

#[test]
fn trace_cmd_shows_the_clock_stats_and_layout_it_expects() {
    let Some(tc) = trace_cmd("trace_cmd_shows_the_clock_stats_and_layout_it_expects") else {
        return;
    };
    let dir = TempDir::new();
    let file = dir.path("trace.dat");
    write_file(&fixture_dat(), &file);
    let f = file.to_str().unwrap();

    let summary = run(&tc, &["dump", "--summary", "-i", f]);
    for want in [
        "6\t[Version]",
        "4096\t[Page size, bytes]",
        "[Events format, 3 systems]",
        "[Flyrecord tracing data]",
        "[mono]",
    ] {
        assert!(summary.contains(want), "no {want:?} in:\n{summary}");
    }
    let stat = run(&tc, &["report", "--stat", "-i", f]);
    for want in ["CPU: 0", "entries: 1370", "overrun: 0", "bytes: 67264"] {
        assert!(stat.contains(want), "no {want:?} in:\n{stat}");
    }
}

#[test]
fn trace_cmds_own_writer_writes_the_same_file_and_latlab_reads_its_files() {
    let Some(tc) =
        trace_cmd("trace_cmds_own_writer_writes_the_same_file_and_latlab_reads_its_files")
    else {
        return;
    };
    let dir = TempDir::new();
    let (ours, v6, v7, v76) = (
        dir.path("ours.dat"),
        dir.path("v6.dat"),
        dir.path("v7.dat"),
        dir.path("v7-to-v6.dat"),
    );
    let dat = fixture_dat();
    write_file(&dat, &ours);
    let p = |p: &PathBuf| p.to_str().unwrap().to_string();
    let convert = |from: &PathBuf, version: &str, to: &PathBuf| {
        run(
            &tc,
            &[
                "convert",
                "--file-version",
                version,
                "--compression",
                "none",
                "-i",
                &p(from),
                "-o",
                &p(to),
            ],
        )
    };
    // trace-cmd reads our file and writes it again as version 6: byte for byte ours.
    convert(&ours, "6", &v6);
    let ours_b = std::fs::read(&ours).unwrap();
    let v6_b = std::fs::read(&v6).unwrap();
    assert!(
        ours_b == v6_b,
        "trace-cmd's version 6 of our file differs from ours"
    );

    // Version 7 is refused with the way out.
    convert(&ours, "7", &v7);
    let e = tracedat::read(&std::fs::read(&v7).unwrap()).unwrap_err();
    assert!(
        e.to_string().contains("version \"7\" is not supported")
            && e.to_string().contains("--file-version 6"),
        "{e}"
    );

    // trace-cmd's own version 6 written from version 7 (options in its own order, a CPUCOUNT
    // option): read, with the same contents.
    convert(&v7, "6", &v76);
    let v76_b = std::fs::read(&v76).unwrap();
    assert_ne!(v76_b, ours_b, "a file trace-cmd laid out itself");
    assert_eq!(tracedat::read(&v76_b).expect("read trace-cmd's file"), dat);
}

// ---------------------------------------------------------------------------------------------
// read(write(x)) == x, and the reader's refusals.

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max)
}

/// Texts the format holds (no NUL where a C string is written).
fn text(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(1..=255u8, 0..max)
}

fn arb_dat() -> impl Strategy<Value = TraceDat<'static>> {
    let page = (4u32..=8).prop_map(|s| 1 << s);
    let cpus = prop::collection::btree_map(0u32..12, 0usize..4, 0..4);
    (
        (any::<bool>(), prop_oneof![Just(4u8), Just(8u8)], page, cpus),
        (
            "[a-z0-9_-]{1,12}",
            bytes(64),
            bytes(64),
            prop::collection::vec(bytes(64), 0..3),
            prop::collection::vec(
                ("[a-z_]{0,10}", prop::collection::vec(bytes(64), 0..3)),
                0..3,
            ),
        ),
        (
            prop::option::of(text(64).prop_filter("non-empty", |t| !t.is_empty())),
            prop::option::of(text(64).prop_filter("non-empty", |t| !t.is_empty())),
            bytes(64),
            prop::collection::vec(text(64), 0..3),
            any::<u64>(),
        ),
    )
        .prop_map(
            |(
                (big, long, page, cpus),
                (clock, hp, he, ftrace, systems),
                (kallsyms, printk, cmdlines, stats, seed),
            )| {
                // Pages: `n` whole pages per CPU, filled from `seed`; CPUs not in the map are
                // there, empty, as a read returns them (a CPU's number is its place).
                let last = cpus.keys().last().copied();
                let cpus = (0..last.map_or(0, |l| l + 1))
                    .map(|cpu| {
                        let n = cpus.get(&cpu).copied().unwrap_or(0);
                        let pages = (0..n * page as usize)
                            .map(|i| (seed.rotate_left(i as u32 % 64) as u8) ^ cpu as u8)
                            .collect::<Vec<u8>>();
                        CpuData {
                            cpu,
                            pages: pages.into(),
                        }
                    })
                    .collect();
                TraceDat {
                    big_endian: big,
                    long_size: long,
                    page_size: page,
                    clock: clock.into(),
                    header_page: hp.into(),
                    header_event: he.into(),
                    ftrace_formats: ftrace.into_iter().map(Cow::Owned).collect(),
                    event_formats: systems
                        .into_iter()
                        .map(|(s, f)| (s, f.into_iter().map(Cow::Owned).collect()))
                        .collect(),
                    kallsyms: kallsyms.map(Cow::Owned),
                    printk: printk.map(Cow::Owned),
                    cmdlines: cmdlines.into(),
                    cpus,
                    cpu_stats: stats.into_iter().map(Cow::Owned).collect(),
                }
            },
        )
}

proptest! {
    #[test]
    fn read_returns_what_write_wrote(dat in arb_dat()) {
        let mut v = Vec::new();
        tracedat::write(&dat, &mut v).unwrap();
        let back = tracedat::read(&v).unwrap();
        prop_assert_eq!(&back, &dat);
        // Page-aligned CPU data, as the format requires.
        for c in &back.cpus {
            if !c.pages.is_empty() {
                let off = c.pages.as_ptr() as usize - v.as_ptr() as usize;
                prop_assert_eq!(off % dat.page_size as usize, 0, "CPU {} at {}", c.cpu, off);
            }
        }
    }

    #[test]
    fn garbled_files_are_refused_or_read_never_a_panic(
        dat in arb_dat(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut v = Vec::new();
        tracedat::write(&dat, &mut v).unwrap();
        for (i, b) in flips {
            let i = i.index(v.len());
            v[i] ^= b | 1;
        }
        if let Ok(d) = tracedat::read(&v) {
            // What was read can be written and reads back the same.
            let mut w = Vec::new();
            tracedat::write(&d, &mut w).unwrap();
            prop_assert_eq!(tracedat::read(&w).unwrap(), d);
        }
    }

    #[test]
    fn any_bytes_are_refused_or_read_never_a_panic(b in bytes(512)) {
        let mut v = tracedat::MAGIC.to_vec();
        v.extend_from_slice(b"6\0");
        v.extend_from_slice(&b);
        let _ = tracedat::read(&b);
        let _ = tracedat::read(&v);
    }
}

fn small() -> TraceDat<'static> {
    TraceDat {
        big_endian: false,
        long_size: 8,
        page_size: 64,
        clock: "mono".into(),
        header_page: b"hp".to_vec().into(),
        header_event: b"he".to_vec().into(),
        ftrace_formats: vec![b"name: print\n".to_vec().into()],
        event_formats: vec![(
            "sched".into(),
            vec![b"name: sched_switch\n".to_vec().into()],
        )],
        kallsyms: Some(b"ffffffff81000000 T _text\n".to_vec().into()),
        printk: None,
        cmdlines: b"1 init\n".to_vec().into(),
        cpus: vec![
            CpuData {
                cpu: 0,
                pages: vec![0xab; 128].into(),
            },
            CpuData {
                cpu: 1,
                pages: Vec::new().into(),
            },
            CpuData {
                cpu: 2,
                pages: vec![0xcd; 64].into(),
            },
        ],
        cpu_stats: vec![b"CPU: 0\nentries: 3\n".to_vec().into()],
    }
}

fn written(d: &TraceDat) -> Vec<u8> {
    let mut v = Vec::new();
    tracedat::write(d, &mut v).unwrap();
    v
}

#[test]
fn every_truncation_is_refused_with_its_offset() {
    let v = written(&small());
    assert_eq!(tracedat::read(&v).unwrap(), small());
    for n in 0..v.len() {
        let e = tracedat::read(&v[..n]).expect_err("a truncated file");
        let msg = e.to_string();
        assert!(
            msg.starts_with("trace.dat: ") && msg.ends_with(&format!(" at offset {}", e.offset)),
            "{msg}"
        );
        assert!(
            e.offset <= n as u64,
            "offset {} past the {n} bytes: {msg}",
            e.offset
        );
    }
}

/// The offset of `needle` in `v` (once).
fn find(v: &[u8], needle: &[u8]) -> usize {
    let mut at = v
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle);
    let (i, _) = at.next().expect("in the file");
    assert!(at.next().is_none(), "once in the file");
    i
}

fn refused(v: &[u8]) -> TraceDatError {
    tracedat::read(v).expect_err("refused")
}

#[test]
fn broken_files_are_refused_with_what_is_wrong() {
    let good = written(&small());
    let fly = find(&good, b"flyrecord\0") + 10;
    let cases: Vec<(&str, Vec<u8>, &str, usize)> = vec![
        (
            "not trace.dat",
            b"hello, world".to_vec(),
            "not a trace-cmd trace.dat",
            0,
        ),
        (
            "version 7",
            [&tracedat::MAGIC[..], b"7\0\0\x08"].concat(),
            "--file-version 6",
            10,
        ),
        (
            "version 5",
            [&tracedat::MAGIC[..], b"5\0\0\x08"].concat(),
            "only 6",
            10,
        ),
        (
            "endianness",
            {
                let mut v = good.clone();
                v[12] = 2;
                v
            },
            "endianness flag 2",
            12,
        ),
        (
            "long size",
            {
                let mut v = good.clone();
                v[13] = 5;
                v
            },
            "long size 5",
            13,
        ),
        (
            "page size",
            {
                let mut v = good.clone();
                v[14] = 65;
                v
            },
            "page size 65",
            14,
        ),
        (
            "header tag",
            {
                let mut v = good.clone();
                v[18] = b'X';
                v
            },
            "expected \"header_page\"",
            18,
        ),
        (
            "latency",
            {
                let mut v = good.clone();
                v[fly - 10..fly].copy_from_slice(b"latency  \0");
                v
            },
            "latency (text) trace is not supported",
            fly - 10,
        ),
        (
            "data past the end",
            {
                let mut v = good.clone();
                v[fly + 8] = 0xff;
                v[fly + 9] = 0xff;
                v
            },
            "ends past the end of the file",
            fly,
        ),
        (
            "unaligned data",
            {
                let mut v = good.clone();
                v[fly] += 1;
                v
            },
            "not whole pages of 64 at a page-aligned offset",
            fly,
        ),
        (
            "huge size",
            {
                let mut v = good.clone();
                let h = find(&v, b"header_page\0") + 12;
                v[h + 7] = 0x80;
                v
            },
            "header_page: needs 9223372036854775810 bytes",
            find(&good, b"header_page\0") + 20,
        ),
    ];
    for (what, v, want, offset) in cases {
        let e = refused(&v);
        assert!(e.to_string().contains(want), "{what}: {e}");
        assert_eq!(e.offset, offset as u64, "{what}: {e}");
    }
}

#[test]
fn write_refuses_what_the_format_cannot_hold_and_writes_nothing() {
    let cases: Vec<(&str, TraceDat<'static>)> = vec![
        (
            "page size",
            TraceDat {
                page_size: 100,
                ..small()
            },
        ),
        (
            "long size",
            TraceDat {
                long_size: 2,
                ..small()
            },
        ),
        (
            "clock",
            TraceDat {
                clock: "mo no".into(),
                ..small()
            },
        ),
        (
            "clock",
            TraceDat {
                clock: "".into(),
                ..small()
            },
        ),
        (
            "clock",
            TraceDat {
                clock: "[mono]".into(),
                ..small()
            },
        ),
        (
            "system name",
            TraceDat {
                event_formats: vec![("a\0b".into(), vec![])],
                ..small()
            },
        ),
        (
            "stats",
            TraceDat {
                cpu_stats: vec![b"a\0b".to_vec().into()],
                ..small()
            },
        ),
        ("whole pages", {
            let mut d = small();
            d.cpus[0].pages = vec![0; 65].into();
            d
        }),
        ("order", {
            let mut d = small();
            d.cpus.swap(0, 2);
            d
        }),
        ("order", {
            let mut d = small();
            d.cpus[1].cpu = 0;
            d
        }),
        ("CPU number", {
            let mut d = small();
            d.cpus[2].cpu = tracedat::MAX_CPUS;
            d
        }),
    ];
    for (what, d) in cases {
        let mut v = Vec::new();
        let e = tracedat::write(&d, &mut v).expect_err(what);
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{what}: {e}");
        assert!(e.to_string().starts_with("trace.dat: "), "{what}: {e}");
        assert!(v.is_empty(), "{what}: wrote {} bytes", v.len());
    }
}

#[test]
fn cpus_without_data_come_back_empty_in_their_place() {
    let mut d = small();
    d.cpus.remove(1); // CPUs 0 and 2: CPU 1 is in the file, empty
    let back = tracedat::read(&written(&d)).unwrap().into_owned();
    assert_eq!(back, small());
    let none = TraceDat {
        cpus: vec![],
        ..small()
    };
    assert_eq!(tracedat::read(&written(&none)).unwrap(), none);
}

// ---------------------------------------------------------------------------------------------
// A fresh capture from this machine (privileged).

/// Root, and the machine-wide lock the privileged tests share (see latlab-sys's
/// `privileged.rs`: same file, same `flock`; latlab-core cannot depend on latlab-sys).
fn privileged(test: &str) -> Option<std::fs::File> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1).map(str::to_string));
    if euid.as_deref() != Some("0") {
        let why = "not running as root";
        if require_privileged() {
            panic!("{test}: LATLAB_REQUIRE_PRIVILEGED=1 but {why}");
        }
        eprintln!("skipping {test}: {why} (privileged test; run as root to include it)");
        return None;
    }
    let f = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(std::env::temp_dir().join("latlab-privileged-tests.lock"))
        .expect("open the privileged-test lock file");
    f.lock().expect("lock the privileged-test lock file");
    Some(f)
}

const TRACEFS: &str = "/sys/kernel/tracing";

/// A private tracefs instance (and tracefs mounted when it was not), gone on drop, also when
/// the test panics.
struct Instance {
    dir: PathBuf,
    mounted: bool,
}

impl Instance {
    fn new() -> Instance {
        let root = Path::new(TRACEFS);
        let mut mounted = false;
        if !root.join("instances").is_dir() {
            let st = Command::new("mount")
                .args(["-t", "tracefs", "nodev", TRACEFS])
                .status()
                .expect("run mount");
            assert!(
                st.success() && root.join("instances").is_dir(),
                "mount tracefs at {TRACEFS}"
            );
            mounted = true;
        }
        let dir = root.join(format!("instances/latlab-test-{}", std::process::id()));
        let inst = Instance { dir, mounted };
        std::fs::create_dir(&inst.dir).expect("create the tracefs instance");
        inst
    }
    fn set(&self, file: &str, v: &str) {
        std::fs::write(self.dir.join(file), v).unwrap_or_else(|e| panic!("{file} <- {v}: {e}"));
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = std::fs::write(self.dir.join("tracing_on"), "0");
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            eprintln!("could not remove {}: {e}", self.dir.display());
        }
        if self.mounted {
            let _ = Command::new("umount").arg(TRACEFS).status();
        }
    }
}

/// A tracefs text file, read with a buffer large enough for it in one read: `header_page` and
/// `header_event` answer only a read at offset 0 (a second read returns 0), so `fs::read`,
/// which starts with a 32-byte probe, would get only their first 32 bytes.
fn read_tracefs(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut f = std::fs::File::open(path)?;
    let mut all = Vec::new();
    let mut buf = vec![0; 1 << 20];
    loop {
        match f.read(&mut buf)? {
            0 => return Ok(all),
            n => all.extend_from_slice(&buf[..n]),
        }
    }
}

/// The page (sub-buffer) size `header_page` describes: the end of its `data` field.
fn page_size_of(header_page: &[u8]) -> u32 {
    let t = String::from_utf8_lossy(header_page);
    let line = t
        .lines()
        .find(|l| l.contains(" data;"))
        .unwrap_or_else(|| panic!("no data field in header_page: {t:?}"));
    let num = |key: &str| -> u32 {
        let v = line.split(key).nth(1).expect(key);
        v[..v.find(';').expect(";")].trim().parse().expect(key)
    };
    num("offset:") + num("size:")
}

/// `per_cpu/cpuN/trace_pipe_raw` to its end, without blocking: whole pages.
fn read_raw(path: &Path, page: usize) -> Vec<u8> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_NONBLOCK on Linux x86, arm and riscv: an empty buffer returns EAGAIN instead of waiting.
    const O_NONBLOCK: i32 = 0o4000;
    let mut f = std::fs::File::options()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut all = Vec::new();
    let mut buf = vec![0; page];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                assert_eq!(n, page, "{}: a read of part of a page", path.display());
                all.extend_from_slice(&buf);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }
    all
}

#[test]
fn a_fresh_capture_opens_in_trace_cmd_with_every_event_and_the_marker() {
    let test = "a_fresh_capture_opens_in_trace_cmd_with_every_event_and_the_marker";
    let Some(_lock) = privileged(test) else {
        return;
    };
    let Some(tc) = trace_cmd(test) else {
        return;
    };
    let inst = Instance::new();
    let root = Path::new(TRACEFS);
    let events: &[(&str, &[&str])] = &[
        ("sched", &["sched_switch", "sched_waking"]),
        (
            "irq",
            &[
                "irq_handler_entry",
                "irq_handler_exit",
                "softirq_entry",
                "softirq_exit",
            ],
        ),
    ];
    inst.set("trace_clock", "mono");
    for (sys, evs) in events {
        for e in *evs {
            inst.set(&format!("events/{sys}/{e}/enable"), "1");
        }
    }
    inst.set("tracing_on", "1");
    for _ in 0..20 {
        // Work that schedules: processes started and waited for.
        let _ = Command::new("true").status();
    }
    let marker = format!("latlab tracedat test {}", std::process::id());
    inst.set("trace_marker", &marker);
    inst.set("tracing_on", "0");

    let read = |p: PathBuf| read_tracefs(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let header_page = read(root.join("events/header_page"));
    let page = page_size_of(&header_page);
    let mut cpus_dirs: Vec<u32> = std::fs::read_dir(inst.dir.join("per_cpu"))
        .expect("per_cpu")
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_prefix("cpu")?
                .parse()
                .ok()
        })
        .collect();
    cpus_dirs.sort();
    let (mut cpus, mut cpu_stats, mut entries) = (vec![], vec![], 0u64);
    for cpu in cpus_dirs {
        let d = inst.dir.join(format!("per_cpu/cpu{cpu}"));
        // The stats first: reading trace_pipe_raw consumes the entries.
        let stats = String::from_utf8(read(d.join("stats"))).expect("stats text");
        entries += stats
            .lines()
            .find_map(|l| l.strip_prefix("entries:"))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .expect("entries in the stats");
        cpu_stats.push(Cow::Owned(format!("CPU: {cpu}\n{stats}").into_bytes()));
        cpus.push(CpuData {
            cpu,
            pages: read_raw(&d.join("trace_pipe_raw"), page as usize).into(),
        });
    }
    let dat = TraceDat {
        big_endian: cfg!(target_endian = "big"),
        long_size: std::mem::size_of::<std::ffi::c_long>() as u8,
        page_size: page,
        clock: "mono".into(),
        header_page: header_page.into(),
        header_event: read(root.join("events/header_event")).into(),
        ftrace_formats: vec![read(root.join("events/ftrace/print/format")).into()],
        event_formats: events
            .iter()
            .map(|(sys, evs)| {
                let f = evs
                    .iter()
                    .map(|e| read(root.join(format!("events/{sys}/{e}/format"))).into())
                    .collect();
                (sys.to_string(), f)
            })
            .collect(),
        kallsyms: None,
        printk: None,
        cmdlines: read(root.join("saved_cmdlines")).into(),
        cpus,
        cpu_stats,
    };
    drop(inst);

    let dir = TempDir::new();
    let file = dir.path("trace.dat");
    write_file(&dat, &file);
    assert_eq!(tracedat::read(&std::fs::read(&file).unwrap()).unwrap(), dat);
    let reported = report_events(&tc, &file);
    assert!(entries > 20, "the capture holds {entries} events");
    assert_eq!(
        reported.len() as u64,
        entries,
        "events trace-cmd reports vs the stats' entries"
    );
    let markers: Vec<_> = reported.iter().filter(|e| e.name == "print").collect();
    assert_eq!(markers.len(), 1, "{markers:?}");
    assert_eq!(split_marker(&markers[0].body).1, marker);
    eprintln!(
        "{test}: {entries} events on {} CPUs, {} bytes of pages",
        dat.cpus.len(),
        dat.cpus.iter().map(|c| c.pages.len()).sum::<usize>()
    );
}
