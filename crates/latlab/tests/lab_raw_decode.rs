//! The recorder's binary decoder against each lab kernel's own text (issue 27, item 2): one
//! boot per kernel (rt-6.12, stock-6.1, rt-6.1; 2 CPUs) records the events latlab's recorder
//! and profiler enable, in the test's own tracefs instance, during a little activity (markers,
//! sleeps, busy loops on both CPUs, serial-port and virtio interrupts); the guest copies the kernel's
//! `trace` first, then each CPU's `trace_pipe_raw` (which consumes), the instance's
//! `header_page`, `header_event` and the events' `format` files. On the host latlab_core's
//! `RawDecoder` decodes the pages with that layout and every event is compared with the
//! kernel's line for it, per CPU: the count (also against the CPU's `stats`), the time (to the
//! µs: the kernel rounds), CPU, pid, flags, kind with its fields, TASK comm, and the rendered
//! line (`render_text`) column by column and body by body.
//!
//! What the kernel prints and latlab legitimately does not (checked, not skipped):
//! - `%p` pointers (`hrtimer=`): the kernel prints them hashed with its boot-time secret,
//!   latlab mixed with its own key. Compared as a bijection: one kernel value for one latlab
//!   value over the whole trace.
//! - hrtimer_start's `mode=`: the kernel prints `__print_symbolic(mode, { HRTIMER_MODE_ABS,
//!   "ABS" } …)`, whose values are enum names the format file does not resolve; latlab prints
//!   the number. Compared as a function: one kernel name for one latlab number.

use std::collections::HashMap;
use std::path::Path;

use latlab_core::trace::raw::{Comms, RawDecoder, Symbols};
use latlab_core::trace::{Event, EventKind, Parser, Record};

mod support;
use support::lab;

/// The guest's part: a private instance with the recorder's and the profiler's events
/// (`latlab_sys::tracefs::events`: EVENTS, TIMER_EVENTS, PROFILE_EVENTS, every irq_vectors
/// entry and exit) and markers; activity; then the kernel's text, the pages, the layout, and
/// the text symbols the text names (`%ps`). `timeout` ends each `trace_pipe_raw` read: it
/// blocks once the buffer is empty.
const JOB: &str = r#"
up() { cut -d' ' -f1 /proc/uptime; }
echo "start $(up)" >times
uname -r >uname-r
I=/sys/kernel/tracing/instances/latlab-lab-decode
mkdir $I || exit 1
echo 1024 >$I/buffer_size_kb
grep -qw mono $I/trace_clock && echo mono >$I/trace_clock
echo 0 >$I/tracing_on
: >events
for e in sched/sched_switch sched/sched_waking sched/sched_wakeup sched/sched_wakeup_new \
    sched/sched_migrate_task sched/sched_pi_setprio irq/irq_handler_entry irq/irq_handler_exit \
    irq/softirq_entry irq/softirq_exit timer/hrtimer_start timer/hrtimer_expire_entry \
    timer/hrtimer_expire_exit nmi/nmi_handler \
    $(cd $I/events && ls -d irq_vectors/*_entry irq_vectors/*_exit); do
    [ -e $I/events/$e/enable ] && echo 1 >$I/events/$e/enable && echo $e >>events
done
echo ftrace/print >>events
echo 1 >$I/tracing_on
busy() { i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done; }
busy & busy &
for n in 1 2 3 4 5; do echo "lab-decode marker $n" >$I/trace_marker; echo $n >/lab/during; sleep 0.02; done
echo lab-decode >/dev/ttyS0
wait
echo 0 >$I/tracing_on
echo "traced $(up)" >>times
for d in $I/per_cpu/cpu*; do cat $d/stats >${d##*/}.stats; done
cat $I/trace >trace.txt
for d in $I/per_cpu/cpu*; do timeout 2 cat $d/trace_pipe_raw >${d##*/}.raw & done
wait
cat $I/events/header_page >header_page
cat $I/events/header_event >header_event
mkdir formats
while read e; do cat $I/events/$e/format >formats/${e%/*}_${e#*/}.format; done <events
echo "copied $(up)" >>times
sed -n 's/.* function=\([^ ]*\).*/\1/p' trace.txt | sort -u >functions
awk 'NR == FNR { f[$1] = 1; next } ($3 in f)' functions /proc/kallsyms >kallsyms
rmdir $I
ls -A /sys/kernel/tracing/instances | grep -v '^kernel-lab-' >instances-after
echo "end $(up)" >>times
true
"#;

/// What one CPU's comparison counted.
#[derive(Debug, Default)]
struct Compared {
    events: usize,
    by_event: HashMap<String, usize>,
}

/// The kernel's text events with their lines, by CPU (in the text's order, which keeps each
/// CPU's buffer order).
fn kernel_events(text: &str) -> HashMap<u32, Vec<(Event<'_>, &str)>> {
    let lines: Vec<&str> = text.lines().collect();
    let mut by_cpu: HashMap<u32, Vec<(Event, &str)>> = HashMap::new();
    for r in Parser::new(text) {
        match r {
            Record::Event(e) => {
                let l = lines[e.line - 1];
                by_cpu.entry(e.cpu).or_default().push((e, l));
            }
            other => panic!("the kernel's text has a record latlab's parser does not read as an event: {other:?}"),
        }
    }
    by_cpu
}

/// The pid → comm of the kernel's TASK column (its saved_cmdlines when it printed), as a
/// `saved_cmdlines` text (the recorder's own comms come from /proc and the sched events).
fn comms_of(text: &str) -> Comms {
    let mut s = String::new();
    for r in Parser::new(text) {
        if let Record::Event(e) = r {
            if e.pid > 0 {
                s.push_str(&format!("{} {}\n", e.pid, e.task_comm));
            }
        }
    }
    Comms::from_saved_cmdlines(&s)
}

/// A line cut into its TASK-PID and CPU columns, its flags, its timestamp and its body.
fn columns(l: &str) -> (&str, &str, &str, &str) {
    let p = l.find("] ").unwrap_or_else(|| panic!("no CPU column: {l}"));
    let (head, rest) = l.split_at(p + 1);
    let (flags, rest) = rest.trim_start().split_once(' ').unwrap();
    let (ts, body) = rest.trim_start().split_once(": ").unwrap();
    (head, flags, ts, body)
}

/// A one-to-one correspondence between the kernel's and latlab's values of a field.
#[derive(Default)]
struct Bijection {
    fwd: HashMap<String, String>,
    back: HashMap<String, String>,
}

impl Bijection {
    fn check(&mut self, what: &str, kernel: &str, latlab: &str, one_to_one: bool) {
        let f = self
            .fwd
            .entry(kernel.into())
            .or_insert_with(|| latlab.into());
        assert_eq!(
            f, latlab,
            "{what}: kernel {kernel} was latlab {f}, now {latlab}"
        );
        let b = self
            .back
            .entry(latlab.into())
            .or_insert_with(|| kernel.into());
        if one_to_one {
            assert_eq!(
                b, kernel,
                "{what}: latlab {latlab} was kernel {b}, now {kernel}"
            );
        }
    }
}

/// `key=value` of a body.
fn field<'a>(body: &'a str, key: &str) -> Option<&'a str> {
    body.split(' ')
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

/// The body with `key`'s value replaced by `…`.
fn blank(body: &str, key: &str) -> String {
    body.split(' ')
        .map(
            |w| match w.strip_prefix(key).and_then(|r| r.strip_prefix('=')) {
                Some(_) => format!("{key}=…"),
                None => w.to_string(),
            },
        )
        .collect::<Vec<_>>()
        .join(" ")
}

/// The kind with its pointers (`hrtimer`) blanked, after checking them through `ptrs`.
fn unpointed<'a>(k: &EventKind<'a>, w: &EventKind<'_>, ptrs: &mut Bijection) -> EventKind<'a> {
    use EventKind::*;
    let mut k = k.clone();
    let (HrtimerStart { hrtimer: g, .. }
    | HrtimerExpireEntry { hrtimer: g, .. }
    | HrtimerExpireExit { hrtimer: g }) = &mut k
    else {
        return k;
    };
    let (HrtimerStart { hrtimer: wh, .. }
    | HrtimerExpireEntry { hrtimer: wh, .. }
    | HrtimerExpireExit { hrtimer: wh }) = w
    else {
        panic!("kinds differ: {k:?} / {w:?}");
    };
    ptrs.check("hrtimer pointer", wh, g, true);
    *g = wh.clone().into_owned().into();
    k
}

/// Decode every CPU's pages of the share `dir` and compare them with the kernel's text.
fn compare(dir: &Path) -> Vec<(u32, Compared)> {
    let read = |f: &str| {
        std::fs::read_to_string(dir.join(f))
            .unwrap_or_else(|e| panic!("{}: {e}", dir.join(f).display()))
    };
    let names = read("events");
    let formats: Vec<String> = names
        .lines()
        .map(|e| read(&format!("formats/{}.format", e.replace('/', "_"))))
        .collect();
    let formats: Vec<&str> = formats.iter().map(String::as_str).collect();
    let symbols = Symbols::parse_kallsyms(&read("kallsyms"));
    let dec = RawDecoder::new(&read("header_page"), &read("header_event"), &formats)
        .unwrap_or_else(|e| panic!("this kernel's layout: {e}"))
        .with_symbols(symbols);
    let text = read("trace.txt");
    let comms = comms_of(&text);
    let mut kernel = kernel_events(&text);
    let (mut ptrs, mut modes) = (Bijection::default(), Bijection::default());
    let mut out = vec![];
    for cpu in 0.. {
        let Ok(pages) = std::fs::read(dir.join(format!("cpu{cpu}.raw"))) else {
            break;
        };
        let want = kernel.remove(&cpu).unwrap_or_default();
        // The CPU's stats: every event of its buffer is in the text, none was overwritten.
        let stats = read(&format!("cpu{cpu}.stats"));
        let stat = |k: &str| {
            stats
                .lines()
                .find_map(|l| l.strip_prefix(k)?.trim().parse::<usize>().ok())
                .unwrap_or_else(|| panic!("no {k} in cpu{cpu}.stats: {stats}"))
        };
        assert_eq!(
            (stat("entries:"), stat("overrun:")),
            (want.len(), 0),
            "CPU {cpu}"
        );

        let mut got = Vec::new();
        let st = dec.decode_cpu(cpu, &pages, &comms, &mut got).unwrap();
        assert_eq!(
            (st.bad_pages, st.unknown_events),
            (0, 0),
            "CPU {cpu}: {st:?}"
        );
        assert!(st.lost.is_empty(), "CPU {cpu}: {st:?}");
        assert_eq!(
            got.len(),
            want.len(),
            "CPU {cpu}: events decoded / in the kernel's text"
        );
        let mut rendered = String::new();
        dec.render_text(cpu, &pages, &comms, &mut rendered).unwrap();
        let mine: Vec<&str> = rendered.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(mine.len(), want.len(), "CPU {cpu}: lines rendered");

        let mut c = Compared::default();
        for (i, ((g, (w, wl)), ml)) in got.iter().zip(&want).zip(&mine).enumerate() {
            let at = format!("CPU {cpu} event {i}:\n  kernel: {wl}\n  latlab: {ml}");
            assert_eq!((g.ts + 500) / 1000, w.ts / 1000, "{at}: time");
            assert_eq!(
                (g.cpu, g.pid, g.flags, &g.task_comm),
                (w.cpu, w.pid, w.flags, &w.task_comm),
                "{at}"
            );
            assert_eq!(unpointed(&g.kind, &w.kind, &mut ptrs), w.kind, "{at}: kind");

            let (mh, mf, mts, mb) = columns(ml);
            let (kh, kf, kts, kb) = columns(wl);
            assert_eq!((mh, mf), (kh, kf), "{at}: TASK-PID, CPU and flags columns");
            let ns: u64 = mts.replace('.', "").parse().unwrap();
            let us: u64 = kts.replace('.', "").parse().unwrap();
            assert_eq!((ns + 500) / 1000, us, "{at}: timestamp column");
            let (mut mb, mut kb) = (mb.to_string(), kb.to_string());
            if let (Some(mp), Some(kp)) = (field(&mb, "hrtimer"), field(&kb, "hrtimer")) {
                ptrs.check("hrtimer pointer", kp, mp, true);
                (mb, kb) = (blank(&mb, "hrtimer"), blank(&kb, "hrtimer"));
            }
            if mb.starts_with("hrtimer_start:") {
                if let (Some(mm), Some(km)) = (field(&mb, "mode"), field(&kb, "mode")) {
                    modes.check("hrtimer_start mode", km, mm, false);
                    (mb, kb) = (blank(&mb, "mode"), blank(&kb, "mode"));
                }
            }
            assert_eq!(mb, kb, "{at}: body");
            let name = mb.split(':').next().unwrap_or("").to_string();
            *c.by_event.entry(name).or_default() += 1;
            c.events += 1;
        }
        out.push((cpu, c));
    }
    assert!(
        kernel.is_empty(),
        "the kernel's text has CPUs without pages: {:?}",
        kernel.keys()
    );
    out
}

/// Boot `kernel`, compare, and check that the comparison covered what it should: both CPUs,
/// the markers, the scheduler, timer, softirq and vector events.
fn decodes_as_its_text(test: &str, kernel: &str) {
    let Some(g) = lab::Lab::new(kernel, 2, 180).run(test, JOB) else {
        return;
    };
    assert_eq!(g.exit, 0, "{}", g.job_log);
    eprintln!("{test}: steps (guest uptime, s):\n{}", g.read("times"));
    assert_eq!(
        Some(g.read("uname-r").trim().to_string()),
        lab::release(kernel)
    );
    assert_eq!(g.read("instances-after"), "", "the test's instance is left");
    let cpus = compare(&g.dir);
    assert_eq!(cpus.len(), 2, "{cpus:?}");
    let mut all: HashMap<String, usize> = HashMap::new();
    for (cpu, c) in &cpus {
        assert!(c.events > 0, "CPU {cpu}: no events");
        for (k, n) in &c.by_event {
            *all.entry(k.clone()).or_default() += n;
        }
    }
    for k in [
        "sched_switch",
        "sched_waking",
        "sched_wakeup",
        "sched_wakeup_new",
        "sched_migrate_task",
        "irq_handler_entry",
        "irq_handler_exit",
        "softirq_entry",
        "softirq_exit",
        "hrtimer_start",
        "hrtimer_expire_entry",
        "hrtimer_expire_exit",
        "local_timer_entry",
        "local_timer_exit",
    ] {
        assert!(all.contains_key(k), "no {k} compared: {all:?}");
    }
    assert_eq!(all.get("tracing_mark_write"), Some(&5), "{all:?}");
    let total: usize = cpus.iter().map(|(_, c)| c.events).sum();
    let mut kinds: Vec<_> = all.into_iter().collect();
    kinds.sort();
    eprintln!(
        "{test}: {total} events compared ({}): {kinds:?}",
        cpus.iter()
            .map(|(cpu, c)| format!("CPU {cpu}: {}", c.events))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

#[test]
fn rt_6_12_pages_decode_as_the_kernels_text() {
    decodes_as_its_text("rt_6_12_pages_decode_as_the_kernels_text", "rt-6.12");
}

#[test]
fn stock_6_1_pages_decode_as_the_kernels_text() {
    decodes_as_its_text("stock_6_1_pages_decode_as_the_kernels_text", "stock-6.1");
}

#[test]
fn rt_6_1_pages_decode_as_the_kernels_text() {
    decodes_as_its_text("rt_6_1_pages_decode_as_the_kernels_text", "rt-6.1");
}
