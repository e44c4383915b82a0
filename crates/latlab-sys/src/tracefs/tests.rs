use super::*;

/// A fake tracefs tree: the files the recorder writes, as plain files.
fn fake(root: &Path) {
    for e in EVENTS.iter().chain(TIMER_EVENTS).map(|(e, _)| e).chain(
        [
            "irq_vectors/local_timer_entry",
            "irq_vectors/local_timer_exit",
        ]
        .iter(),
    ) {
        fs::create_dir_all(root.join("events").join(e)).unwrap();
    }
    fs::create_dir_all(root.join("instances")).unwrap();
}

/// A fake instance as the kernel would populate it on mkdir (we pre-create it).
fn fake_instance(dir: &Path, with_trigger: bool, with_mono: bool) {
    for e in EVENTS.iter().chain(TIMER_EVENTS).map(|(e, _)| e).chain(
        [
            "irq_vectors/local_timer_entry",
            "irq_vectors/local_timer_exit",
        ]
        .iter(),
    ) {
        if *e == "nmi/nmi_handler" {
            continue; // pretend this kernel lacks it
        }
        fs::create_dir_all(dir.join("events").join(e)).unwrap();
        fs::write(dir.join("events").join(e).join("enable"), "0").unwrap();
    }
    if with_trigger {
        fs::create_dir_all(dir.join("events/ftrace/print")).unwrap();
        fs::write(dir.join("events/ftrace/print/trigger"), "").unwrap();
    }
    fs::write(dir.join("tracing_on"), "1").unwrap();
    fs::write(
        dir.join("trace_clock"),
        if with_mono {
            "[local] global counter uptime perf mono mono_raw boot\n"
        } else {
            "[local] global\n"
        },
    )
    .unwrap();
    fs::write(dir.join("buffer_size_kb"), "1408").unwrap();
    fs::write(dir.join("trace_marker"), "").unwrap();
    fs::create_dir_all(dir.join("options")).unwrap();
    fs::write(dir.join("options/overwrite"), "0").unwrap();
    fs::create_dir_all(dir.join("per_cpu/cpu1")).unwrap();
    fs::write(
        dir.join("per_cpu/cpu1/stats"),
        "entries: 3\noverrun: 42\ncommit overrun: 0\n",
    )
    .unwrap();
}

#[test]
fn configures_the_instance_and_records_it_in_the_ledger_first() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("tracing");
    fake(&root);
    let mut ledger = Ledger::open_in(&t.path().join("run")).unwrap();
    // mkdir on a plain fs creates an empty dir; populate it as the kernel would, via a
    // pre-existing directory is impossible (create_dir must succeed), so check the failure
    // path first: the instance dir exists already → error, nothing recorded.
    let dir = root.join("instances/latlab-test");
    fs::create_dir_all(&dir).unwrap();
    let cfg = RecorderConfig {
        name: "latlab-test".into(),
        buffer_kb: 4096,
    };
    let e = Recorder::create(&root, &cfg, &mut ledger).unwrap_err();
    assert!(matches!(e, TraceError::Io { .. }), "{e}");
    assert_eq!(ledger.entries().count(), 0);
    fs::remove_dir(&dir).unwrap();

    // Configure a populated fake instance directly.
    fake_instance(&dir, true, true);
    let mut r = Recorder::unconfigured(dir.clone(), None, 0);
    r.configure(&cfg, &InstanceSpec::RECORDER).unwrap();
    assert_eq!(fs::read_to_string(dir.join("tracing_on")).unwrap(), "0");
    assert_eq!(fs::read_to_string(dir.join("trace_clock")).unwrap(), "mono");
    assert_eq!(r.clock, "mono");
    assert_eq!(
        fs::read_to_string(dir.join("buffer_size_kb")).unwrap(),
        "4096"
    );
    assert_eq!(
        fs::read_to_string(dir.join("options/overwrite")).unwrap(),
        "1"
    );
    assert_eq!(
        fs::read_to_string(dir.join("events/sched/sched_switch/enable")).unwrap(),
        "1"
    );
    // Not the timer interrupt's own events (on every wake-up's path), but with `full`.
    let timer = [
        "irq_vectors/local_timer_entry",
        "timer/hrtimer_expire_entry",
    ];
    for e in timer {
        let on = dir.join("events").join(e).join("enable");
        assert_eq!(fs::read_to_string(&on).unwrap(), "0", "{e}");
        assert!(!r.events.iter().any(|x| x == e), "{e}");
    }
    r.events.clear();
    r.missing.clear();
    r.configure(&cfg, &InstanceSpec::RECORDER_FULL).unwrap();
    for e in timer {
        let on = dir.join("events").join(e).join("enable");
        assert_eq!(fs::read_to_string(&on).unwrap(), "1", "{e}");
        assert!(r.events.iter().any(|x| x == e), "{e}");
    }
    assert_eq!(r.missing, vec!["nmi/nmi_handler".to_string()]);
    assert!(r.trigger);
    assert_eq!(
        fs::read_to_string(dir.join("events/ftrace/print/trigger")).unwrap(),
        STOP_TRIGGER
    );
    assert!(r.marker_fd() >= 0);
    assert_eq!(r.overruns(1), Some(42));
    assert_eq!(r.overruns(0), None);
    r.start().unwrap();
    assert!(r.is_on());
    r.stop().unwrap();
    assert!(!r.is_on());
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    // No layout files in the fake: the binary path is off, and says why.
    let why = r.raw.as_ref().unwrap_err();
    assert!(why.contains("format") || why.contains("header_"), "{why}");
}

#[test]
fn falls_back_without_mono_or_trigger_and_refuses_missing_required_events() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("inst");
    fake_instance(&dir, false, false);
    let cfg = RecorderConfig {
        name: "x".into(),
        buffer_kb: 64,
    };
    let mut r = Recorder::unconfigured(dir.clone(), None, 0);
    r.configure(&cfg, &InstanceSpec::RECORDER).unwrap();
    assert_eq!(r.clock, "local");
    assert!(!r.trigger);
    assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
    drop(r);

    let root = t.path().join("tracing");
    fs::create_dir_all(root.join("instances")).unwrap();
    fs::create_dir_all(root.join("events/sched/sched_switch")).unwrap();
    let mut ledger = Ledger::open_in(&t.path().join("run")).unwrap();
    match Recorder::create(&root, &cfg, &mut ledger) {
        Err(TraceError::MissingEvents(v)) => {
            assert!(v.contains(&"sched/sched_waking".to_string()), "{v:?}");
            assert!(!v.contains(&"sched/sched_switch".to_string()));
        }
        other => panic!("{other:?}"),
    }
    assert!(fs::read_dir(root.join("instances"))
        .unwrap()
        .next()
        .is_none());
}

/// Whole pages until EAGAIN or the end; a short read ends the copy; `tick` runs per
/// `every` bytes.
#[test]
fn read_pages_reads_whole_pages_until_eagain() {
    struct Src(Vec<io::Result<usize>>);
    impl io::Read for Src {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            assert_eq!(buf.len(), 8, "one page per read");
            match self.0.remove(0) {
                Ok(n) => {
                    buf[..n].fill(n as u8);
                    Ok(n)
                }
                Err(e) => Err(e),
            }
        }
    }
    let again = || io::Error::from(io::ErrorKind::WouldBlock);
    let intr = || io::Error::from(io::ErrorKind::Interrupted);
    let mut ticks = 0;
    let v = read_pages(
        Src(vec![Ok(8), Err(intr()), Ok(8), Ok(8), Err(again())]),
        8,
        16,
        || ticks += 1,
    )
    .unwrap();
    assert_eq!((v.len(), ticks), (24, 1));
    let v = read_pages(Src(vec![Ok(8), Ok(3), Ok(8)]), 8, 8, || {}).unwrap();
    assert_eq!(v, vec![8u8; 8]);
    let v = read_pages(Src(vec![Ok(8), Ok(0)]), 8, 8, || {}).unwrap();
    assert_eq!(v.len(), 8);
    let e = read_pages(Src(vec![Ok(8), Err(io::Error::other("boom"))]), 8, 8, || {});
    assert!(e.is_err());
    // `every` a page: the tick comes before every read (the quiet windows' gate).
    let mut ticks = 0;
    let v = read_pages(Src(vec![Ok(8), Ok(8), Err(again())]), 8, 8, || ticks += 1).unwrap();
    assert_eq!((v.len(), ticks), (16, 3));
}

/// This machine's kernel, for real: a private instance records a few scheduler, timer and
/// IRQ events on CPU 0 and a marker (the in-kernel trigger stops it); the CPU's text
/// (`per_cpu/cpu0/trace`, read first: it does not consume) and its binary pages
/// (`trace_pipe_raw`, read after) hold the same events, decoded by latlab with the layout
/// this kernel publishes: same time (to the µs), pid, flags, task, kind and fields (but
/// hrtimer pointers, which the kernel hashes), and the rendering is the kernel's text
/// line for line but for the nanoseconds and those pointers.
#[test]
fn fresh_binary_pages_decode_to_the_kernels_text() {
    use latlab_core::trace::event::EventKind;
    use latlab_core::trace::parser::{Parser, Record};
    use latlab_core::trace::raw::{Comms, RawDecoder, Symbols};
    let Some(_g) = crate::privileged::guard("fresh_binary_pages_decode_to_the_kernels_text") else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let mut ledger = Ledger::open_in(&t.path().join("run")).unwrap();
    let tfs = ensure_mounted(Path::new(DEFAULT_ROOT), &mut ledger).unwrap();
    let cfg = RecorderConfig {
        name: format!("latlab-{}-rawtest", std::process::id()),
        buffer_kb: 512,
    };
    let rec = Recorder::create(&tfs.root, &cfg, &mut ledger).unwrap();
    let layout = rec.raw.clone().expect("this kernel's layout is read");
    rec.clear().unwrap();
    let marker = rec.marker_fd();
    std::thread::scope(|sc| {
        sc.spawn(|| {
            // On CPU 0: its buffer is the one read below.
            // SAFETY: plain syscall on this thread with a valid set.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(0, &mut set);
                assert_eq!(
                    libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set),
                    0
                );
            }
            rec.start().unwrap();
            for _ in 0..5 {
                let _ = std::process::Command::new("true").status();
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            let m = b"LATLAB_STOP cpu=0 intended=1 actual=2 latency=1 (raw test)\n";
            // SAFETY: a valid fd and buffer.
            let n = unsafe { libc::write(marker, m.as_ptr().cast(), m.len()) };
            assert_eq!(n as usize, m.len());
        });
    });
    if rec.is_on() {
        rec.stop().unwrap(); // no trigger on this kernel
    }
    let text = String::from_utf8(rec.read_cpu(0).unwrap()).unwrap();
    let cmdlines = rec.saved_cmdlines().unwrap();
    let pages = read_pages(rec.open_cpu_raw(0).unwrap(), 4096, usize::MAX, || {}).unwrap();
    let again = read_pages(rec.open_cpu_raw(0).unwrap(), 4096, usize::MAX, || {}).unwrap();
    assert!(
        again.is_empty(),
        "reading trace_pipe_raw consumes the pages"
    );
    let formats: Vec<&str> = layout.formats.iter().map(String::as_str).collect();
    let ksyms = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let dec = RawDecoder::new(&layout.header_page, &layout.header_event, &formats)
        .unwrap()
        .with_symbols(Symbols::parse_kallsyms(&ksyms));
    assert_eq!(pages.len() % dec.page_size(), 0);
    let mut comms = Comms::from_saved_cmdlines(&cmdlines);
    dec.learn_comms(&pages, &mut comms).unwrap();
    let mut got = Vec::new();
    let st = dec.decode_cpu(0, &pages, &comms, &mut got).unwrap();
    let want: Vec<_> = Parser::new(&text)
        .filter_map(|r| match r {
            Record::Event(e) => Some(e),
            _ => None,
        })
        .collect();
    assert!(want.len() >= 10, "{text}");
    assert_eq!(got.len(), want.len(), "{text}");
    assert_eq!((st.bad_pages, st.unknown_events), (0, 0));
    let no_ptr = |k: &EventKind| {
        let mut k = k.clone().into_owned();
        match &mut k {
            EventKind::HrtimerStart { hrtimer, .. }
            | EventKind::HrtimerExpireEntry { hrtimer, .. }
            | EventKind::HrtimerExpireExit { hrtimer } => *hrtimer = "p".into(),
            _ => {}
        }
        k
    };
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!((g.ts + 500) / 1000, w.ts / 1000, "event {i}");
        assert_eq!(
            (g.cpu, g.pid, g.flags, no_ptr(&g.kind), &g.task_comm),
            (w.cpu, w.pid, w.flags, no_ptr(&w.kind), &w.task_comm),
            "event {i}"
        );
    }
    let marked = got.iter().any(|e| {
        matches!(&e.kind, EventKind::Marker { text } if text.starts_with("LATLAB_STOP") && text.ends_with("(raw test)"))
    });
    assert!(marked, "the marker is the last thing recorded");
    assert!(got
        .iter()
        .any(|e| matches!(e.kind, EventKind::SchedSwitch { .. })));
    let mut out = String::new();
    dec.render_text(0, &pages, &comms, &mut out).unwrap();
    let mine: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
    let kernel: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(mine.len(), kernel.len());
    for (m, k) in mine.iter().zip(&kernel) {
        let head = |l: &str| l[..l.find("] ").unwrap() + 8].to_string();
        assert_eq!(head(m), head(k));
        let body = |l: &str| l[l.find(": ").unwrap()..].to_string();
        if !k.contains("hrtimer") && !k.contains("nmi_handler") {
            assert_eq!(body(m), body(k));
        }
    }
    rec.remove(&mut ledger).unwrap();
    if let Some(id) = tfs.mounted {
        crate::ledger::undo(&Entry::TracefsMount {
            path: tfs.root.clone(),
        });
        ledger.forget(id).unwrap();
    }
}

#[test]
fn no_tracefs_is_a_clear_error() {
    let t = tempfile::tempdir().unwrap();
    let mut ledger = Ledger::open_in(&t.path().join("run")).unwrap();
    let e = ensure_mounted(&t.path().join("nope"), &mut ledger).unwrap_err();
    assert!(e.to_string().contains("not available"), "{e}");
    assert_eq!(ledger.entries().count(), 0);
}

#[test]
fn leftovers_are_instances_of_dead_pids() {
    let t = tempfile::tempdir().unwrap();
    let i = t.path().join("instances");
    fs::create_dir_all(i.join(format!("latlab-{}", std::process::id()))).unwrap();
    fs::create_dir_all(i.join("latlab-4000000")).unwrap();
    fs::create_dir_all(i.join("other")).unwrap();
    assert_eq!(leftover_instances(t.path()), vec![i.join("latlab-4000000")]);
}
