use super::*;
use crate::record::{Cause, CauseKind, Lane, MAX_LANE_SEGMENTS};
use crate::trace::fixtures::*;
use crate::trace::parallel::{analyze_text, analyze_text_parallel, Parallel};
use crate::trace::{Flags, ParseError, TaskRef};

/// A synthetic trace on CPU 1, one event at a time, times in ns from an origin.
struct B {
    ev: Vec<Event<'static>>,
}

const TAU: i64 = 100; // the measured RT thread, FIFO 80 → prio 19
const E: u64 = 1_000_000;

fn task(comm: &str, pid: i64, prio: i64) -> TaskRef<'static> {
    TaskRef {
        comm: comm.to_string().into(),
        pid,
        prio,
    }
}

impl B {
    fn new() -> B {
        B { ev: vec![] }
    }
    fn push(&mut self, ts: u64, pid: i64, flags: &str, kind: EventKind<'static>) -> &mut Self {
        self.ev.push(Event {
            line: self.ev.len() + 1,
            cpu: 1,
            ts,
            task_comm: "?".into(),
            pid,
            flags: Flags::parse(flags).unwrap(),
            kind,
        });
        self
    }
    fn switch(&mut self, ts: u64, from: TaskRef<'static>, to: TaskRef<'static>) -> &mut Self {
        let pid = from.pid;
        self.push(
            ts,
            pid,
            "d..2.",
            EventKind::SchedSwitch {
                prev: from,
                prev_state: "S".into(),
                next: to,
            },
        )
    }
    /// τ arms its sleep's timer at `ts` for `expires`.
    fn arm(&mut self, ts: u64, expires: u64) -> &mut Self {
        self.push(
            ts,
            TAU,
            "d..1.",
            EventKind::HrtimerStart {
                hrtimer: "h".into(),
                function: "hrtimer_wakeup".into(),
                expires,
            },
        )
    }
    /// τ arms its timer for E at t=0 and sleeps; `other` takes the CPU.
    fn sleep(&mut self, other: TaskRef<'static>) -> &mut Self {
        self.arm(0, E);
        self.switch(10, task("tau", TAU, 19), other)
    }
    /// Timer IRQ [a, b) that wakes τ in the middle.
    fn timer_irq(&mut self, a: u64, b: u64, pid: i64) -> &mut Self {
        self.push(
            a,
            pid,
            "d.h..",
            EventKind::VectorEntry {
                name: "local_timer".into(),
                vector: 236,
            },
        );
        self.push(
            a + 1,
            pid,
            "d.h..",
            EventKind::HrtimerExpireEntry {
                hrtimer: "h".into(),
                function: "hrtimer_wakeup".into(),
                now: a,
            },
        );
        self.push(
            a + 2,
            pid,
            "d.h2.",
            EventKind::SchedWaking {
                task: task("tau", TAU, 19),
                target_cpu: Some(1),
            },
        );
        self.push(
            b,
            pid,
            "dNh..",
            EventKind::VectorExit {
                name: "local_timer".into(),
                vector: 236,
            },
        )
    }
    fn marker(&mut self, ts: u64, actual: u64) -> &mut Self {
        let text = format!(
            "LATLAB_STOP cpu=1 intended={E} actual={actual} latency={}",
            actual - E
        );
        self.push(ts, TAU, "....1", EventKind::Marker { text: text.into() })
    }
    fn run(&self, mode: SampleMode) -> Analysis {
        let mut a = Analyzer::new(
            AnalyzeOptions {
                threshold_ns: 0,
                mode: Some(mode),
                gaps: Vec::new(),
            },
            mode,
        );
        for e in &self.ev {
            a.feed(e);
        }
        a.finish()
    }
}

fn find(s: &Sample, kind: CauseKind, name: &str) -> Nanos {
    s.causes
        .iter()
        .filter(|c| c.kind == kind && c.name == name)
        .map(|c| c.ns)
        .sum()
}

/// τ switched in, read its clock, then a FIFO 97 thread took the CPU (τ preempted, `R`)
/// before τ wrote its marker: the sample keeps its causes up to the clock read (this
/// trace, seen under PREEMPT_RT in the lab, gave a 21 ms spike with no cause at all: the
/// switch-out ended τ's window and the marker found none).
#[test]
fn a_thread_preempted_between_its_clock_read_and_its_marker_keeps_its_causes() {
    let x = task("x", 200, 120);
    let hi = task("hi", 300, 2);
    let mut b = B::new();
    b.sleep(x.clone())
        .timer_irq(E + 5_000, E + 8_000, 200)
        .switch(E + 508_000, x.clone(), task("tau", TAU, 19));
    b.push(
        E + 510_000,
        TAU,
        "d..2.",
        EventKind::SchedSwitch {
            prev: task("tau", TAU, 19),
            prev_state: "R".into(),
            next: hi.clone(),
        },
    );
    b.switch(E + 900_000, hi, task("tau", TAU, 19))
        .marker(E + 901_000, E + 509_000);
    let a = b.run(SampleMode::Markers);
    assert_eq!(a.spikes.len(), 1, "{:?}", a.spikes);
    let s = &a.spikes[0];
    assert_eq!(s.latency_ns, 509_000);
    assert_eq!(s.switch_in_ns, Some(E + 508_000));
    assert_eq!(find(s, CauseKind::PreemptOff, "x"), 500_000);
    assert_eq!(find(s, CauseKind::Irq, "local_timer"), 3_000);
    // Switch-in → clock read; what ran after the read is not the latency's.
    assert_eq!(find(s, CauseKind::Task, "switch-to-user (tau)"), 1_000);
    assert_eq!(find(s, CauseKind::Task, "hi"), 0);
    assert_eq!(s.unexplained_ns, 0, "{:?}", s.causes);
}

/// The culprit's context from the flags of the events in it: two ticks interrupt `x` after τ
/// was woken, the first in a preempt-off section (`dNh1.`), the second also with migration
/// disabled (`dNh12`); the IRQs' own stretches, the scheduler's events and the measuring
/// thread's own return count for nothing.
#[test]
fn a_preempt_off_cause_carries_the_flags_of_its_section() {
    let x = task("x", 200, 120);
    let mut b = B::new();
    b.sleep(x.clone()).timer_irq(E + 5_000, E + 8_000, 200);
    for (at, flags) in [(E + 100_000, "dNh1."), (E + 200_000, "dNh12")] {
        b.push(
            at,
            200,
            flags,
            EventKind::VectorEntry {
                name: "local_timer".into(),
                vector: 236,
            },
        );
        b.push(
            at + 1_000,
            200,
            flags,
            EventKind::VectorExit {
                name: "local_timer".into(),
                vector: 236,
            },
        );
    }
    b.switch(E + 508_000, x.clone(), task("tau", TAU, 19));
    // A tick in τ's own way back to user space, in the scheduler's preempt-off tail.
    for (at, kind) in [
        (
            E + 508_300,
            EventKind::VectorEntry {
                name: "local_timer".into(),
                vector: 236,
            },
        ),
        (
            E + 508_400,
            EventKind::VectorExit {
                name: "local_timer".into(),
                vector: 236,
            },
        ),
    ] {
        b.push(at, TAU, "d.h1.", kind);
    }
    b.marker(E + 510_000, E + 509_000);
    let a = b.run(SampleMode::Markers);
    let s = &a.spikes[0];
    let own = s
        .causes
        .iter()
        .find(|c| c.name == "switch-to-user (tau)")
        .unwrap();
    assert_eq!(
        own.context, None,
        "the measuring thread is no culprit: {own:?}"
    );
    let c = s
        .causes
        .iter()
        .find(|c| c.kind == CauseKind::PreemptOff && c.name == "x")
        .unwrap();
    let ctx = c.context.expect("x's context");
    assert_eq!(
        (
            ctx.events,
            ctx.preempt_off,
            ctx.migrate_disabled,
            ctx.irqs_off
        ),
        (2, 2, 1, 0),
        "{ctx:?}"
    );
    assert_eq!(
        ctx.describe(),
        "preempt off in 2 of 2 events, migrate disabled in 1 of 2"
    );
    for c in s.causes.iter().filter(|c| c.kind == CauseKind::Irq) {
        assert_eq!(
            c.context, None,
            "an IRQ's own flags are not a context: {c:?}"
        );
    }
}

#[test]
fn preempt_off_irq_delivery_and_return() {
    let x = task("x", 200, 120);
    let mut b = B::new();
    b.sleep(x.clone())
        .timer_irq(E + 5_000, E + 8_000, 200)
        .switch(E + 508_000, x.clone(), task("tau", TAU, 19))
        .marker(E + 510_000, E + 509_000);
    let a = b.run(SampleMode::Markers);
    assert_eq!(a.spikes.len(), 1);
    let s = &a.spikes[0];
    assert_eq!(s.latency_ns, 509_000);
    assert_eq!(find(s, CauseKind::Unknown, "silent gap"), 5_000);
    assert_eq!(find(s, CauseKind::Irq, "local_timer"), 3_000);
    assert_eq!(find(s, CauseKind::PreemptOff, "x"), 500_000);
    // Switch-in → clock read, with the marker's own 1 µs removed.
    assert_eq!(find(s, CauseKind::Task, "switch-to-user (tau)"), 1_000);
    assert_eq!(
        find(s, CauseKind::Task, "tau"),
        0,
        "τ's own time is not a task cause"
    );
    let own = s
        .causes
        .iter()
        .find(|c| c.name == "switch-to-user (tau)")
        .unwrap();
    assert_eq!((own.pid, own.prio), (TAU, 19));
    assert_eq!(s.unexplained_ns, 0);
    assert_eq!(s.causes[0].kind, CauseKind::PreemptOff);
    assert_eq!((s.causes[0].pid, s.causes[0].prio), (200, 120));
    assert_eq!(s.timer_irq_ns, Some(E + 5_000));
    assert_eq!(s.wakeup_ns, Some(E + 5_002));
    assert_eq!(s.switch_in_ns, Some(E + 508_000));
}

#[test]
fn higher_priority_task_is_a_task_cause() {
    let x = task("x", 200, 120);
    let y = task("rt-hog", 300, 9);
    let mut b = B::new();
    b.sleep(y.clone())
        .timer_irq(E, E + 2_000, 300)
        .switch(E + 302_000, y, task("tau", TAU, 19))
        .switch(E + 310_000, task("tau", TAU, 19), x);
    let a = b.run(SampleMode::Wakeups);
    let s = &a.spikes[0];
    assert_eq!(s.latency_ns, 302_000);
    assert_eq!(find(s, CauseKind::Task, "rt-hog"), 300_000);
    assert_eq!(find(s, CauseKind::Irq, "local_timer"), 2_000);
    assert_eq!(s.explained_ns(), 302_000);
    assert!(!s.from_marker);
}

/// x runs; τ's timer at E; a NET_RX softirq from E + 1 µs to E + 41 µs with the virtio1
/// IRQ nested in it from E + 11 µs to E + 15 µs (both on x's CPU, pid 200).
fn net_rx_with_a_nested_irq() -> (TaskRef<'static>, B) {
    let x = task("x", 200, 120);
    let mut b = B::new();
    b.sleep(x.clone()).timer_irq(E, E + 1_000, 200);
    b.push(
        E + 1_000,
        200,
        "..s..",
        EventKind::SoftirqEntry {
            vec: 3,
            name: "NET_RX".into(),
        },
    )
    .push(
        E + 11_000,
        200,
        "d.H..",
        EventKind::IrqEntry {
            irq: 36,
            name: "virtio1".into(),
        },
    )
    .push(E + 15_000, 200, "d.H..", EventKind::IrqExit { irq: 36 })
    .push(
        E + 41_000,
        200,
        "..s..",
        EventKind::SoftirqExit {
            vec: 3,
            name: "NET_RX".into(),
        },
    );
    (x, b)
}

/// Issue 27 (part 1's finding): the measuring thread's first events carry the process's
/// name (the TASK column of a thread not yet renamed) and no known prio, its switch-in the
/// thread's own: one spike showed `switch-to-user (latlab)` at prio 120 and
/// `switch-to-user (latlab-cpu1)` at prio 4. Its own time is one cause, under the name and
/// prio the scheduler's events give it last.
#[test]
fn the_measuring_thread_is_one_cause_under_its_last_name_and_prio() {
    let x = task("x", 200, 120);
    let mut b = B::new();
    // τ is running when the trace begins (no switch names it yet) and arms its timer for
    // E; it is still on the CPU 5 µs past E (its own way to sleep), then sleeps.
    b.arm(0, E).push(
        E + 5_000,
        TAU,
        ".....",
        EventKind::Other {
            name: "sys_enter".into(),
        },
    );
    for e in b.ev.iter_mut() {
        e.task_comm = "latlab".into();
    }
    b.switch(E + 6_000, task("latlab-cpu1", TAU, 19), x.clone())
        .timer_irq(E + 10_000, E + 11_000, 200)
        .switch(E + 20_000, x, task("latlab-cpu1", TAU, 19))
        .marker(E + 25_000, E + 25_000);
    let a = b.run(SampleMode::Markers);
    let s = &a.spikes[0];
    let own: Vec<&Cause> = s.causes.iter().filter(|c| c.pid == TAU).collect();
    assert_eq!(own.len(), 1, "{:#?}", s.causes);
    assert_eq!(
        (own[0].kind, own[0].name.as_str(), own[0].prio),
        (CauseKind::Task, "switch-to-user (latlab-cpu1)", 19)
    );
    assert_eq!(own[0].ns, 5_000 + 1_000 + 5_000);
    assert_eq!((s.comm.as_str(), s.prio), ("latlab-cpu1", 19));
    assert_lanes_match_causes(s);
}

/// A threaded IRQ (PREEMPT_RT): the hard part wakes `irq/4-ttyS0`, which, raised to FIFO
/// 96 above the measuring thread (FIFO 80 here), runs before it. Both parts are named after
/// the IRQ, the thread with its priority against the measuring thread's (they showed as
/// `irq ttyS0` and `task irq/4-ttyS0`); below the measuring thread the same thread keeping
/// the CPU is `preempt_off`, named as below.
#[test]
fn a_threaded_irq_is_named_by_its_hard_part_and_its_thread() {
    for (prio, kind, place) in [
        (
            3,
            CauseKind::Task,
            "FIFO 96, above the measuring thread (FIFO 80)",
        ),
        (
            49,
            CauseKind::PreemptOff,
            "FIFO 50, below the measuring thread (FIFO 80)",
        ),
    ] {
        let it = task("irq/4-ttyS0", 152, prio);
        let x = task("x", 200, 120);
        let mut b = B::new();
        b.sleep(x.clone())
            .push(
                E + 500,
                200,
                "d.h..",
                EventKind::IrqEntry {
                    irq: 4,
                    name: "ttyS0".into(),
                },
            )
            .push(
                E + 600,
                200,
                "d.h2.",
                EventKind::SchedWaking {
                    task: it.clone(),
                    target_cpu: Some(1),
                },
            )
            .push(E + 2_500, 200, "d.h..", EventKind::IrqExit { irq: 4 })
            .switch(E + 3_000, x, it.clone())
            .timer_irq(E + 4_000, E + 5_000, 152)
            .switch(E + 50_000, it, task("tau", TAU, 19))
            .marker(E + 52_000, E + 52_000);
        let s = &b.run(SampleMode::Markers).spikes[0];
        assert_eq!(find(s, CauseKind::Irq, "IRQ 4 (ttyS0) hard part"), 2_000);
        let name = format!("IRQ 4 (ttyS0) thread irq/4-ttyS0, {place}");
        // From τ's wake-up (before it, the late timer is delivery) to its switch-in.
        assert_eq!(find(s, kind, &name), 45_000, "{:#?}", s.causes);
        let c = s.causes.iter().find(|c| c.name == name).unwrap();
        assert_eq!((c.pid, c.prio), (152, prio));
        assert_lanes_match_causes(s);
    }
}

/// An IRQ whose handler is not threaded keeps its action name.
#[test]
fn an_irq_without_a_thread_keeps_its_name() {
    let x = task("x", 200, 120);
    let mut b = B::new();
    b.sleep(x.clone())
        .push(
            E + 500,
            200,
            "d.h..",
            EventKind::IrqEntry {
                irq: 4,
                name: "ttyS0".into(),
            },
        )
        .push(E + 2_500, 200, "d.h..", EventKind::IrqExit { irq: 4 })
        .timer_irq(E + 4_000, E + 5_000, 200)
        .switch(E + 6_000, x, task("tau", TAU, 19));
    let s = &b.run(SampleMode::Wakeups).spikes[0];
    assert_eq!(find(s, CauseKind::Irq, "ttyS0"), 2_000);
}

/// Priority inheritance: `low` (normal prio 120) holds a PI lock that `high` (FIFO 97, prio
/// 2) blocks on; the kernel boosts `low` to prio 2 (`sched_pi_setprio`, written in
/// `high`'s context) and `low` runs above the measuring thread. It is named as the lock
/// owner boosted by priority inheritance, from what to what and by which waiter; after the
/// boost ends, its own time is plain again.
#[test]
fn a_lock_owner_boosted_by_priority_inheritance_is_named_so() {
    let high = task("pi-high", 300, 2);
    let low = task("pi-low", 301, 120);
    let mut b = B::new();
    b.sleep(high.clone())
        .push(
            100,
            300,
            "d..2.",
            EventKind::SchedPiSetprio {
                task: low.clone(),
                newprio: 2,
            },
        )
        .switch(200, high, task("pi-low", 301, 2))
        .timer_irq(E + 1_000, E + 2_000, 301)
        .push(
            E + 30_000,
            301,
            "d..2.",
            EventKind::SchedPiSetprio {
                task: task("pi-low", 301, 2),
                newprio: 120,
            },
        )
        .switch(E + 31_000, task("pi-low", 301, 2), task("tau", TAU, 19))
        .marker(E + 33_000, E + 33_000);
    let s = &b.run(SampleMode::Markers).spikes[0];
    let name = "pi-low (lock owner boosted by priority inheritance from normal prio 120 to FIFO 97, waiter pi-high 300)";
    assert_eq!(find(s, CauseKind::Task, name), 28_000, "{:#?}", s.causes);
    let c = s.causes.iter().find(|c| c.name == name).unwrap();
    assert_eq!((c.pid, c.prio), (301, 2));
    // Deboosted, it keeps the CPU a moment from the higher measuring thread.
    assert_eq!(find(s, CauseKind::PreemptOff, "pi-low"), 1_000);
    assert_lanes_match_causes(s);
}

#[test]
fn softirq_with_nested_hardirq_is_net_of_children() {
    let (x, mut b) = net_rx_with_a_nested_irq();
    b.switch(E + 41_000, x, task("tau", TAU, 19));
    let a = b.run(SampleMode::Wakeups);
    let s = &a.spikes[0];
    // The softirq ran in x's context: named with it, its pid and prio the cause's.
    assert_eq!(find(s, CauseKind::Softirq, "NET_RX (in x)"), 36_000);
    let net = s
        .causes
        .iter()
        .find(|c| c.kind == CauseKind::Softirq)
        .unwrap();
    assert_eq!((net.pid, net.prio), (200, 120));
    assert_eq!(find(s, CauseKind::Irq, "virtio1"), 4_000);
    assert_eq!(find(s, CauseKind::Irq, "local_timer"), 1_000);
    assert_eq!(s.latency_ns, 41_000);
    assert_eq!(s.unexplained_ns, 0);
}

#[test]
fn nmi_time_is_taken_from_what_it_interrupted() {
    let x = task("x", 200, 120);
    let mut b = B::new();
    b.sleep(x.clone()).timer_irq(E, E + 1_000, 200);
    b.push(
        E + 50_000,
        200,
        "d.Z..",
        EventKind::Nmi {
            handler: "perf_event_nmi_handler".into(),
            delta_ns: 20_000,
        },
    )
    .switch(E + 60_000, x, task("tau", TAU, 19));
    let s = &b.run(SampleMode::Wakeups).spikes[0];
    assert_eq!(find(s, CauseKind::Nmi, "perf_event_nmi_handler"), 20_000);
    assert_eq!(find(s, CauseKind::PreemptOff, "x"), 39_000);
    assert_eq!(s.explained_ns(), 60_000);
}

#[test]
fn irq_off_task_delays_delivery() {
    let x = task("x", 200, 120);
    let mut b = B::new();
    b.sleep(x.clone());
    // x shows IRQs off in task context after E: the timer could not fire.
    b.push(
        E + 40_000,
        200,
        "d..1.",
        EventKind::Other {
            name: "rcu_utilization".into(),
        },
    )
    .timer_irq(E + 40_000, E + 41_000, 200)
    .switch(E + 41_000, x, task("tau", TAU, 19));
    let s = &b.run(SampleMode::Wakeups).spikes[0];
    assert_eq!(find(s, CauseKind::IrqOff, "x"), 40_000);
    assert_eq!(s.causes[0].pid, 200);
}

/// The trace alone never says `hypervisor`: a gap with no event is a silent gap, `unknown`
/// (only the steal time around the spike, outside the trace, can make it the host's).
#[test]
fn a_silent_gap_is_unknown_from_the_trace_alone() {
    let idle = task("swapper/1", 0, 120);
    let mut b = B::new();
    b.sleep(idle.clone())
        .timer_irq(E + 2_000_000, E + 2_001_000, 0)
        .switch(E + 2_002_000, idle, task("tau", TAU, 19));
    let s = &b.run(SampleMode::Wakeups).spikes[0];
    assert_eq!(find(s, CauseKind::Unknown, "silent gap (idle)"), 2_000_000);
    assert_eq!(s.causes[0].kind, CauseKind::Unknown);
    assert!(s.causes.iter().all(|c| c.kind != CauseKind::Hypervisor));
    assert_eq!(find(s, CauseKind::Unknown, "idle while runnable"), 1_000);
}

/// The noise mode: a spinning thread's gap from its last clock read E to its next R. Nothing
/// in the trace opens its window (it arms no timer): the marker's ` noise` does, found before
/// the events are fed. Each stretch goes to the innermost interrupt, to any other task (here
/// of its own priority: osnoise's thread noise, not a non-preemptible section), and the
/// stretches the thread held the CPU with no event to a silent gap; without ` noise` the same
/// trace explains nothing.
#[test]
fn a_noise_gap_is_charged_from_its_last_clock_read() {
    let spin = task("spin", TAU, 120);
    let kw = task("kworker/1:1", 300, 120);
    const R: u64 = E + 150_000;
    // The marker: ` noise` or not; written by the thread right after R on its CPU, or by
    // another thread on CPU 0 long after, as the osnoise tracer's reader writes it.
    let gap = |noise: bool, foreign: bool| {
        let mut b = B::new();
        let vector = |exit: bool| {
            let (name, vector) = ("local_timer".into(), 236);
            match exit {
                false => EventKind::VectorEntry { name, vector },
                true => EventKind::VectorExit { name, vector },
            }
        };
        b.switch(10, task("swapper/1", 0, 120), spin.clone())
            .push(E + 10_000, TAU, "d.h..", vector(false))
            .push(E + 20_000, TAU, "d.h..", vector(true))
            .push(
                E + 21_000,
                TAU,
                "..s..",
                EventKind::SoftirqEntry {
                    vec: 1,
                    name: "TIMER".into(),
                },
            )
            .push(
                E + 30_000,
                TAU,
                "..s..",
                EventKind::SoftirqExit {
                    vec: 1,
                    name: "TIMER".into(),
                },
            )
            .push(
                E + 40_000,
                TAU,
                "d..2.",
                EventKind::SchedSwitch {
                    prev: spin.clone(),
                    prev_state: "R".into(),
                    next: kw.clone(),
                },
            )
            .push(
                E + 100_000,
                300,
                "d..2.",
                EventKind::SchedSwitch {
                    prev: kw.clone(),
                    prev_state: "S".into(),
                    next: spin.clone(),
                },
            );
        let text = format!(
            "LATLAB_STOP cpu=1 intended={E} actual={R} latency=150000{}",
            if noise { " noise" } else { "" }
        );
        if foreign {
            // After the gap: an IRQ on its CPU that is not the gap's, then the marker.
            b.push(R + 100_000, TAU, "d.h..", vector(false))
                .push(R + 120_000, TAU, "d.h..", vector(true))
                .push(
                    R + 500_000,
                    999,
                    "....1",
                    EventKind::Marker { text: text.into() },
                );
            b.ev.last_mut().unwrap().cpu = 0;
        } else {
            b.push(
                R + 2_000,
                TAU,
                "....1",
                EventKind::Marker { text: text.into() },
            );
        }
        let opts = AnalyzeOptions::default();
        crate::trace::parallel::analyze_events(&b.ev, &[], &opts).unwrap()
    };
    let a = gap(true, false);
    assert_eq!(a.spikes.len(), 1, "{:?}", a.spikes);
    // Its marker from another CPU, long after (the osnoise tracer's reader): the same sample,
    // charged up to the gap's end (not the later IRQ), nothing on the writer's CPU.
    let b = gap(true, true);
    assert_eq!(b.spikes.len(), 1, "{:?}", b.spikes);
    assert_eq!(b.samples, 1);
    assert_eq!(
        format!("{:?}", b.spikes[0]),
        format!("{:?}", a.spikes[0]),
        "a marker from elsewhere"
    );
    let s = &a.spikes[0];
    assert!(s.noise);
    assert_eq!(s.latency_ns, 150_000);
    assert_eq!(s.unexplained_ns, 0, "{:?}", s.causes);
    assert_eq!(find(s, CauseKind::Task, "kworker/1:1"), 60_000);
    assert_eq!(find(s, CauseKind::PreemptOff, "kworker/1:1"), 0);
    assert_eq!(
        find(s, CauseKind::Softirq, "TIMER (in spin)"),
        9_000,
        "{:?}",
        s.causes
    );
    // The timer vector's 10 µs, then the thread's silences: before the IRQ, between it and
    // the softirq, before the switch, after it.
    assert_eq!(find(s, CauseKind::Irq, "local_timer"), 10_000);
    assert_eq!(
        find(s, CauseKind::Unknown, crate::record::SILENT_GAP),
        71_000
    );
    assert!(s
        .causes
        .iter()
        .all(|c| !c.name.starts_with("switch-to-user")));
    let t = s.timeline_events();
    assert_eq!(t[0].what, crate::record::Moment::GapStart);
    assert!(t
        .iter()
        .all(|m| m.what != crate::record::Moment::SwitchedIn));
    let lanes = &s.lanes.segments;
    assert_eq!(
        lanes.first().map(|g| (g.lane, g.start_ns)),
        Some((Lane::Stall, 0))
    );
    assert!(lanes.iter().any(|g| g.lane == Lane::Task && g.pid == 300));

    // The same trace, the marker without ` noise`: a timer's marker with no window.
    let a = gap(false, false);
    let s = &a.spikes[0];
    assert!(!s.noise);
    assert_eq!(s.unexplained_ns, s.latency_ns, "{:?}", s.causes);
}

/// rtla timerlat --aa's "exit from idle": the CPU was in its idle task at E, and the timeline's
/// `timer_due` says so; a task running at E, or a trace that begins after E, is no exit from
/// idle.
#[test]
fn exit_from_idle_is_the_idle_task_at_e() {
    let idle = task("swapper/1", 0, 120);
    let mut b = B::new();
    b.sleep(idle.clone())
        .timer_irq(E + 30_000, E + 31_000, 0)
        .switch(E + 32_000, idle, task("tau", TAU, 19));
    let s = &b.run(SampleMode::Wakeups).spikes[0];
    assert!(s.from_idle);
    let due = &s.timeline_events()[0];
    assert_eq!(due.what, crate::record::Moment::TimerDue);
    assert!(due.from_idle);
    assert!(s.to_spike().timeline_events[0].from_idle);

    let x = task("x", 200, 120);
    let mut b = B::new();
    b.sleep(x.clone())
        .timer_irq(E + 30_000, E + 31_000, 200)
        .switch(E + 32_000, x, task("tau", TAU, 19));
    let s = &b.run(SampleMode::Wakeups).spikes[0];
    assert!(!s.from_idle);
    assert!(!s.timeline_events()[0].from_idle);

    // The arming is not in the trace: the window opens at the wake-up, and the switches the
    // CPU remembers say it was idle at E (its timer's `now`).
    let idle = task("swapper/1", 0, 120);
    let mut b = B::new();
    b.switch(10, task("x", 200, 120), idle.clone())
        .timer_irq(E + 30_000, E + 31_000, 0)
        .switch(E + 32_000, idle, task("tau", TAU, 19));
    let s = &b.run(SampleMode::Wakeups).spikes[0];
    assert!(s.from_idle, "{s:?}");

    // The thread ran late beyond its next period and armed a timer already past: its window
    // opens after E, and the switches say the CPU was idle at E (a fresh clone's spike said
    // not idle where trace-cmd's last switch before E was to idle). With a task at E, not.
    for (before, idle_at_e) in [
        (task("swapper/1", 0, 120), true),
        (task("x", 200, 120), false),
    ] {
        let mut b = B::new();
        b.switch(10, task("tau", TAU, 19), before.clone())
            .switch(E + 50_000, before, task("tau", TAU, 19))
            .arm(E + 60_000, E)
            .push(
                E + 61_000,
                TAU,
                "....1",
                EventKind::Marker {
                    text: format!(
                        "LATLAB_STOP cpu=1 intended={E} actual={} latency=61000",
                        E + 61_000
                    )
                    .into(),
                },
            );
        let s = &b.run(SampleMode::Markers).spikes[0];
        assert_eq!((s.intended_ns, s.from_idle), (E, idle_at_e), "{s:?}");
        // Neither the arming nor the wake-up in the trace: the marker's window, the same.
        b.ev.retain(|e| !matches!(e.kind, EventKind::HrtimerStart { .. }));
        let s = &b.run(SampleMode::Markers).spikes[0];
        assert_eq!((s.intended_ns, s.from_idle), (E, idle_at_e), "{s:?}");
    }
}

/// A switch missing from the trace (fc3: CPU 1 switched to idle, then its events until E
/// showed qemu's pid in their TASK-PID column, with no switch back): the column wins, so the
/// CPU was not idle at E, whichever way the window opened: armed in time, armed late, or by
/// its marker alone. The late and marked ones said idle before (the switches alone).
#[test]
fn exit_from_idle_follows_the_pid_column_past_a_missing_switch() {
    let idle = task("swapper/1", 0, 120);
    let ran = |b: &mut B, ts: u64| {
        b.push(
            ts,
            200,
            "d.s..",
            EventKind::SoftirqEntry {
                vec: 9,
                name: "RCU".into(),
            },
        )
        .push(
            ts + 1_000,
            200,
            "d.s..",
            EventKind::SoftirqExit {
                vec: 9,
                name: "RCU".into(),
            },
        );
    };
    // Armed in time: the stretch from E is x's.
    let mut b = B::new();
    b.sleep(idle.clone());
    ran(&mut b, E - 5_000);
    b.timer_irq(E + 30_000, E + 31_000, 200).switch(
        E + 32_000,
        task("x", 200, 120),
        task("tau", TAU, 19),
    );
    let s = &b.run(SampleMode::Wakeups).spikes[0];
    assert!(!s.from_idle, "{s:?}");
    // Armed late (τ ran late beyond its next period), and by its marker alone.
    let late = |b: &mut B| {
        ran(b, E - 5_000);
        b.switch(E + 50_000, task("x", 200, 120), task("tau", TAU, 19))
            .arm(E + 60_000, E)
            .marker(E + 61_000, E + 61_000);
        let s = &b.run(SampleMode::Markers).spikes[0];
        assert_eq!((s.intended_ns, s.from_idle), (E, false), "{s:?}");
    };
    let mut b = B::new();
    b.switch(10, task("tau", TAU, 19), idle.clone());
    late(&mut b);
    b.ev.retain(|e| !matches!(e.kind, EventKind::HrtimerStart { .. }));
    let s = &b.run(SampleMode::Markers).spikes[0];
    assert_eq!((s.intended_ns, s.from_idle), (E, false), "{s:?}");
    // The same trace with the switch back to x in it: the same answer (and with the switch
    // to idle last before E, idle: the previous test).
    let mut b = B::new();
    b.switch(10, task("tau", TAU, 19), idle.clone())
        .switch(E - 6_000, idle, task("x", 200, 120));
    late(&mut b);
}

#[test]
fn untraced_history_stays_unexplained() {
    // The trace starts after E: the marker says 1 ms, the trace covers 100 µs.
    let x = task("x", 200, 120);
    let mut b = B::new();
    b.push(
        E + 900_000,
        200,
        "d.h..",
        EventKind::VectorEntry {
            name: "local_timer".into(),
            vector: 236,
        },
    )
    .push(
        E + 900_002,
        200,
        "d.h..",
        EventKind::SchedWaking {
            task: task("tau", TAU, 19),
            target_cpu: Some(1),
        },
    )
    .push(
        E + 901_000,
        200,
        "dNh..",
        EventKind::VectorExit {
            name: "local_timer".into(),
            vector: 236,
        },
    )
    .switch(E + 999_000, x, task("tau", TAU, 19))
    .marker(E + 1_000_500, E + 1_000_000);
    let s = &b.run(SampleMode::Markers).spikes[0];
    assert_eq!(s.latency_ns, 1_000_000);
    assert!(s.unexplained_ns >= 900_000, "{s:?}");
    assert!(s.explained_ns() <= 100_000);
}

#[test]
fn cascade_after_a_long_stall() {
    let x = task("x", 200, 120);
    let tau = task("tau", TAU, 19);
    let mut b = B::new();
    b.sleep(x.clone())
        .timer_irq(E, E + 1_000, 200)
        .switch(E + 5_000_000, x.clone(), tau.clone());
    // τ re-arms for E + 1 ms, already in the past: it fires at once.
    b.push(
        E + 5_000_100,
        TAU,
        "d..1.",
        EventKind::HrtimerStart {
            hrtimer: "h".into(),
            function: "hrtimer_wakeup".into(),
            expires: E + 1_000_000,
        },
    )
    .switch(E + 5_000_200, tau.clone(), x.clone())
    .timer_irq(E + 5_000_300, E + 5_000_400, 200)
    .switch(E + 5_000_500, x, tau);
    let a = b.run(SampleMode::Wakeups);
    assert_eq!(a.spikes.len(), 2);
    assert!(!a.spikes[0].cascade);
    assert!(a.spikes[1].cascade);
}

fn worst() -> String {
    WORST.to_string()
}

#[test]
fn real_13ms_spike_is_rust_lld() {
    let opts = AnalyzeOptions {
        threshold_ns: 1_000_000,
        mode: None,
        gaps: Vec::new(),
    };
    let a = analyze_text(&worst(), &opts).unwrap();
    assert_eq!(a.mode, Some(SampleMode::Markers));
    assert_eq!(a.samples, 2);
    assert_eq!(a.spikes.len(), 1);
    let s = &a.spikes[0];
    assert_eq!(s.latency_ns, 13_351_484);
    assert_eq!(s.intended_ns, 1_549_930_731_883);
    let top = &s.causes[0];
    assert_eq!(
        (top.kind, top.name.as_str(), top.pid, top.prio),
        (CauseKind::PreemptOff, "rust-lld", 15780, 120)
    );
    let share = top.ns as f64 / s.latency_ns as f64;
    assert!((0.98..0.995).contains(&share), "share {share}");
    // The notes' hand analysis: delivery ≈ 30 µs, timer IRQ ≈ 12 µs, SCHED softirq 16 µs.
    let delivery = find(s, CauseKind::Unknown, "silent gap");
    assert!((29_000..32_000).contains(&delivery), "{delivery}");
    assert_eq!(find(s, CauseKind::Softirq, "SCHED (in rust-lld)"), 16_130);
    assert!(s.explained_ns() <= s.latency_ns);
    assert!(s.unexplained_ns < 1_000, "{}", s.unexplained_ns);

    // Without markers: the RT wake-up gives the same answer, ending at the switch-in.
    let opts = AnalyzeOptions {
        mode: Some(SampleMode::Wakeups),
        ..opts
    };
    let a = analyze_text(&worst(), &opts).unwrap();
    assert_eq!(a.spikes.len(), 1);
    let s = &a.spikes[0];
    assert_eq!(s.latency_ns, 1_549_944_045_246 - 1_549_930_731_883);
    assert_eq!(s.causes[0].name, "rust-lld");
    assert!(s.causes[0].ns as f64 / s.latency_ns as f64 > 0.98);
}

/// Regression: a real capture in which the switch idle → burst task is missing; the
/// PID column of the following events says who runs, and wins.
#[test]
fn missing_switch_is_recovered_from_the_pid_column() {
    let x = task("burst", 300, 9);
    let mut b = B::new();
    b.sleep(task("swapper/1", 0, 120));
    b.push(
        E - 500_000,
        0,
        "d.h3.",
        EventKind::SchedWaking {
            task: x.clone(),
            target_cpu: Some(1),
        },
    );
    // No sched_switch to `burst`: its events simply appear.
    b.timer_irq(E, E + 1_000, 300)
        .switch(E + 2_000_000, x, task("tau", TAU, 19));
    let s = &b.run(SampleMode::Wakeups).spikes[0];
    assert_eq!(find(s, CauseKind::Task, "burst"), 1_999_000);
    assert_eq!(s.causes[0].prio, 9);
}

/// A trace in the kernel's own layout (that of trace-events.txt, `%16s-%-7d [CPU] FLAGS
/// TS: event: body`) on CPU 0: τ (`tau`, pid 7, FIFO 80) arms its timer for 1.000100 and
/// sleeps, `odd` (pid 9, its name given) runs and switches to `hog` (pid 8, CFS), which
/// keeps the CPU past the timer; τ's marker ends an 840 µs sample. 10 lines, the marker
/// last.
pub(crate) fn kernel_trace(odd: &str) -> String {
    let l = |task: &str, pid: i64, flags: &str, ts: &str, body: &str| {
        format!("{task:>16}-{pid:<7} [000] {flags} {ts:>12}: {body}\n")
    };
    [
            l("tau", 7, "d..1.", "1.000000", "hrtimer_start: hrtimer=h function=hrtimer_wakeup expires=1000100000 softexpires=1000100000 mode=ABS"),
            l("tau", 7, "d..2.", "1.000001", &format!("sched_switch: prev_comm=tau prev_pid=7 prev_prio=19 prev_state=S ==> next_comm={odd} next_pid=9 next_prio=120")),
            l(odd, 9, "d.h..", "1.000010", "local_timer_entry: vector=236"),
            l(odd, 9, "d.h..", "1.000012", "local_timer_exit: vector=236"),
            l(odd, 9, "d..2.", "1.000020", &format!("sched_switch: prev_comm={odd} prev_pid=9 prev_prio=120 prev_state=S ==> next_comm=hog next_pid=8 next_prio=120")),
            l("hog", 8, "d.h..", "1.000100", "local_timer_entry: vector=236"),
            l("hog", 8, "d.h2.", "1.000101", "sched_waking: comm=tau pid=7 prio=19 target_cpu=000"),
            l("hog", 8, "dNh..", "1.000102", "local_timer_exit: vector=236"),
            l("hog", 8, "d..2.", "1.000900", "sched_switch: prev_comm=hog prev_pid=8 prev_prio=120 prev_state=R ==> next_comm=tau next_pid=7 next_prio=19"),
            l("tau", 7, "....1", "1.000950", "tracing_mark_write: LATLAB_STOP cpu=0 intended=1000100000 actual=1000940000 latency=840000"),
        ]
        .concat()
}

fn markers_opts() -> AnalyzeOptions {
    AnalyzeOptions {
        threshold_ns: 0,
        mode: None,
        gaps: Vec::new(),
    }
}

/// The one spike of [`kernel_trace`], whatever odd task ran before it: 840 µs, the hog
/// named as the non-preemptible section for most of it.
fn assert_the_hog_spike(a: &Analysis) {
    assert_the_hog_spike_with(a, 798_000)
}

fn assert_the_hog_spike_with(a: &Analysis, hog_ns: Nanos) {
    assert_eq!(a.mode, Some(SampleMode::Markers));
    assert_eq!(a.spikes.len(), 1, "{a:#?}");
    let s = &a.spikes[0];
    assert_eq!(
        (s.pid, s.intended_ns, s.latency_ns),
        (7, 1_000_100_000, 840_000)
    );
    assert_eq!(find(s, CauseKind::PreemptOff, "hog"), hog_ns, "{s:#?}");
}

/// Regression (issue 14): a task named with newlines (any user can: prctl(PR_SET_NAME))
/// switched in and out on the measured CPU made its lines unparseable, and `analyze` rejected
/// the whole trace. Names with up to two newlines now parse; three (`a\nb\nc\nd`, 7 bytes)
/// still cost lines, which are skipped, counted and named, and the spike is analyzed; the
/// block parser gives the same (the skips and warnings too).
#[test]
fn regression_a_task_named_with_newlines_costs_lines_not_the_trace() {
    for (odd, skipped) in [("nl\nx", 0), ("a\nb\nc", 0), ("a\nb\nc\nd", 1)] {
        let t = kernel_trace(odd);
        let a = analyze_text(&t, &markers_opts()).unwrap();
        assert_the_hog_spike(&a);
        if skipped == 0 {
            assert_eq!((a.skipped_lines, a.events), (0, 10), "{odd:?}: {a:#?}");
            assert!(a.warnings.is_empty(), "{:?}", a.warnings);
        } else {
            assert!(a.skipped_lines >= 1, "{a:#?}");
            assert!(a.events < 10 && a.events >= 6, "{a:#?}");
            let (line, why) = &a.skipped[0];
            // The switch to it, its `next_comm` cut over four lines, is the first.
            assert_eq!(
                (*line, why.as_str()),
                (2, "sched_switch: no next_pid=field")
            );
            assert!(
                a.warnings[0].starts_with(&format!(
                    "{} line{} skipped: not trace events (first: line {line}: ",
                    a.skipped_lines,
                    if a.skipped_lines == 1 { "" } else { "s" }
                )),
                "{:?}",
                a.warnings
            );
        }
        for block in [1, 40, 200] {
            for threads in [2, 3] {
                assert_eq!(
                    format!(
                        "{:?}",
                        analyze_text_parallel(&t, &markers_opts(), Parallel { threads, block })
                    ),
                    format!("{:?}", Ok::<_, ParseError>(&a)),
                    "{odd:?} block {block}"
                );
            }
        }
    }
}

/// A trace cut inside its last marker (`latency=8400` for 840000): the sample is read
/// without that last field (latency = actual − intended), and a warning names the line.
/// Cut before `actual=` is whole, the sample cannot be read: said so too.
#[test]
fn a_cut_last_marker_is_read_without_its_last_field_and_warned_about() {
    let full = kernel_trace("odd");
    let t = &full[..full.len() - 3];
    assert!(t.ends_with("latency=8400"));
    let a = analyze_text(t, &markers_opts()).unwrap();
    assert_the_hog_spike(&a);
    assert_eq!(
            a.warnings,
            ["line 10: the last latlab marker is cut short: its last field is not read (no newline at the end: a truncated file?)"]
        );
    let t = &full[..full.find("actual=").unwrap() + 10];
    let a = analyze_text(t, &markers_opts()).unwrap();
    assert!(a.spikes.is_empty(), "{a:#?}");
    assert_eq!(
            a.warnings,
            ["line 10: the last latlab marker is cut short: its sample is lost (no newline at the end: a truncated file?)"]
        );
    // Any other last line without its newline.
    let t = full[..full.find("LATLAB_STOP").unwrap()].trim_end();
    let t = &t[..t.rfind('\n').unwrap()];
    let a = analyze_text(t, &markers_opts()).unwrap();
    assert_eq!(
        a.warnings,
        ["line 9: the last line is cut short (no newline at the end: a truncated file?)"]
    );
    for block in [1, 40, 200] {
        for t in [&full[..full.len() - 3], t] {
            assert_eq!(
                format!(
                    "{:?}",
                    analyze_text_parallel(t, &markers_opts(), Parallel { threads: 2, block })
                ),
                format!("{:?}", analyze_text(t, &markers_opts())),
            );
        }
    }
}

/// Time going backwards on a CPU (an event stamped before the one before it): warned
/// about with its line, CPU and step, no time counted across it, and the spike kept, in
/// both modes.
#[test]
fn time_going_backwards_is_warned_about_and_the_spike_kept() {
    // The timer IRQ's exit stamped 60 µs before its entry.
    let t = kernel_trace("odd").replace("1.000102: local_timer_exit", "1.000040: local_timer_exit");
    let a = analyze_text(&t, &markers_opts()).unwrap();
    // The IRQ's last µs is now the hog's: its exit came "before" the waking.
    assert_the_hog_spike_with(&a, 799_000);
    assert_eq!(
            a.warnings,
            ["time goes backwards 1 time (first: line 8, CPU 0, 61.0 us before the event before it on that CPU): no time is counted across such a step"]
        );
    for block in [1, 40, 200] {
        assert_eq!(
            format!(
                "{:?}",
                analyze_text_parallel(&t, &markers_opts(), Parallel { threads: 2, block })
            ),
            format!("{:?}", Ok::<_, ParseError>(&a)),
        );
    }
    // Without the marker: the RT wake-up is the sample, up to τ's switch-in.
    let t = t.split_inclusive('\n').take(9).collect::<String>();
    let a = analyze_text(&t, &markers_opts()).unwrap();
    assert_eq!(a.mode, Some(SampleMode::Wakeups));
    assert_eq!(a.spikes.len(), 1, "{a:#?}");
    assert_eq!(a.spikes[0].latency_ns, 800_000);
    assert_eq!(a.warnings.len(), 1, "{:?}", a.warnings);
}

/// The lanes of a sample as (lane, cause, name, pid, start, end) from E.
fn lanes(s: &Sample) -> Vec<(Lane, CauseKind, &str, i64, i64, i64)> {
    s.lanes
        .segments
        .iter()
        .map(|g| {
            (
                g.lane,
                g.cause,
                g.name.as_str(),
                g.pid,
                g.start_ns,
                g.end_ns,
            )
        })
        .collect()
}

/// Per cause, the segments add up to its `ns`; they are ordered, disjoint, within
/// [0, latency] and on the spike's CPU.
fn assert_lanes_match_causes(s: &Sample) {
    let g = &s.lanes.segments;
    assert!(!g.is_empty(), "{s:#?}");
    assert!(g.iter().all(|x| x.cpu == s.cpu && x.start_ns < x.end_ns));
    assert!(g.windows(2).all(|w| w[0].end_ns <= w[1].start_ns), "{g:#?}");
    assert!(g[0].start_ns >= 0 && g.last().unwrap().end_ns <= s.latency_ns as i64);
    for c in &s.causes {
        let sum: i64 = g
            .iter()
            .filter(|x| x.cause == c.kind && x.name == c.name && x.pid == c.pid)
            .map(|x| x.end_ns - x.start_ns)
            .sum();
        assert_eq!(sum, c.ns as i64, "{c:?} in {g:#?}");
    }
}

/// Part 4: the stretches charged are the lanes: a silent gap (a stall), the timer IRQ
/// from its entry to its exit, the task that kept the CPU, and the measuring thread from
/// its switch-in to its clock read (the marker's own µs left out).
#[test]
fn lanes_are_the_charged_stretches() {
    let x = task("x", 200, 120);
    let mut b = B::new();
    b.sleep(x.clone())
        .timer_irq(E + 5_000, E + 8_000, 200)
        .switch(E + 508_000, x, task("tau", TAU, 19))
        .marker(E + 510_000, E + 509_000);
    let s = &b.run(SampleMode::Markers).spikes[0];
    assert_eq!(
        lanes(s),
        [
            (Lane::Stall, CauseKind::Unknown, "silent gap", 0, 0, 5_000),
            (Lane::Irq, CauseKind::Irq, "local_timer", 0, 5_000, 8_000),
            (Lane::Task, CauseKind::PreemptOff, "x", 200, 8_000, 508_000),
            (
                Lane::Measuring,
                CauseKind::Task,
                "switch-to-user (tau)",
                TAU,
                508_000,
                509_000
            ),
        ]
    );
    assert_eq!(s.lanes.dropped, 0);
    assert_lanes_match_causes(s);
    let rec = s.to_spike();
    assert_eq!(rec.lanes.as_ref(), Some(&s.lanes));
}

/// Nested contexts: the softirq's lane is cut by the hardirq inside it, whose segment is
/// exactly its entry → exit; an NMI's time is cut from the end of what it interrupted.
#[test]
fn lanes_of_nested_contexts_and_an_nmi() {
    let (x, mut b) = net_rx_with_a_nested_irq();
    b.push(
        E + 70_000,
        200,
        "d.Z..",
        EventKind::Nmi {
            handler: "perf_nmi".into(),
            delta_ns: 20_000,
        },
    )
    .switch(E + 80_000, x, task("tau", TAU, 19));
    let s = &b.run(SampleMode::Wakeups).spikes[0];
    assert_eq!(
        lanes(s),
        [
            (Lane::Irq, CauseKind::Irq, "local_timer", 0, 0, 1_000),
            (
                Lane::Softirq,
                CauseKind::Softirq,
                "NET_RX (in x)",
                200,
                1_000,
                11_000
            ),
            (Lane::Irq, CauseKind::Irq, "virtio1", 0, 11_000, 15_000),
            (
                Lane::Softirq,
                CauseKind::Softirq,
                "NET_RX (in x)",
                200,
                15_000,
                41_000
            ),
            (Lane::Task, CauseKind::PreemptOff, "x", 200, 41_000, 50_000),
            (Lane::Nmi, CauseKind::Nmi, "perf_nmi", 0, 50_000, 70_000),
            (Lane::Task, CauseKind::PreemptOff, "x", 200, 70_000, 80_000),
        ]
    );
    assert_lanes_match_causes(s);
}

/// The kernel-layout fixture, parsed from text (serially and in blocks): the timer IRQ's
/// segment is its local_timer_entry → exit, the hog's runs to τ's switch-in at 800 µs, and
/// the measuring thread's starts there and ends at the clock read (840 µs).
#[test]
fn lanes_of_the_kernel_fixture() {
    let t = kernel_trace("odd");
    let a = analyze_text(&t, &markers_opts()).unwrap();
    let s = &a.spikes[0];
    assert_eq!(
        lanes(s),
        [
            (Lane::Irq, CauseKind::Irq, "local_timer", 0, 0, 2_000),
            (Lane::Task, CauseKind::PreemptOff, "hog", 8, 2_000, 800_000),
            (
                Lane::Measuring,
                CauseKind::Task,
                "switch-to-user (tau)",
                7,
                800_000,
                840_000
            ),
        ]
    );
    assert_eq!(s.switch_in_ns, Some(s.intended_ns + 800_000));
    assert_lanes_match_causes(s);
    for block in [1, 40, 200] {
        let p = analyze_text_parallel(&t, &markers_opts(), Parallel { threads: 2, block });
        assert_eq!(p.unwrap().spikes[0].lanes, s.lanes, "block {block}");
    }
}

/// The real 13 ms spike: every cause is its lanes' sum, in both modes.
#[test]
fn lanes_of_the_real_13ms_spike_sum_to_its_causes() {
    for mode in [SampleMode::Markers, SampleMode::Wakeups] {
        let opts = AnalyzeOptions {
            threshold_ns: 1_000_000,
            mode: Some(mode),
            gaps: Vec::new(),
        };
        let a = analyze_text(&worst(), &opts).unwrap();
        let s = &a.spikes[0];
        assert_lanes_match_causes(s);
        let hog = s
            .lanes
            .segments
            .iter()
            .find(|g| g.name == "rust-lld")
            .unwrap();
        assert_eq!((hog.lane, hog.pid), (Lane::Task, 15780));
        let measuring = s.lanes.segments.iter().any(|g| g.lane == Lane::Measuring);
        // Without markers the sample ends at the switch-in: no measuring segment.
        assert_eq!(measuring, mode == SampleMode::Markers, "{mode:?}");
    }
}

/// A storm of short IRQs: the lanes keep the longest MAX_LANE_SEGMENTS in time order and
/// count the others; the hog's long stretches and the measuring thread survive.
#[test]
fn lanes_are_capped_and_say_how_many_were_dropped() {
    let x = task("x", 200, 120);
    let mut b = B::new();
    b.sleep(x.clone()).timer_irq(E, E + 1_000, 200);
    for i in 0..400u64 {
        let at = E + 10_000 + i * 10_000;
        b.push(
            at,
            200,
            "d.h..",
            EventKind::IrqEntry {
                irq: 5,
                name: "eth".into(),
            },
        )
        .push(
            at + 1_000 + i % 3,
            200,
            "d.h..",
            EventKind::IrqExit { irq: 5 },
        );
    }
    b.switch(E + 5_000_000, x, task("tau", TAU, 19))
        .marker(E + 5_100_000, E + 5_050_000);
    let s = &b.run(SampleMode::Markers).spikes[0];
    let g = &s.lanes.segments;
    // 1 timer IRQ + 400 eth + 401 stretches of x + the measuring thread.
    assert_eq!(g.len(), MAX_LANE_SEGMENTS);
    assert_eq!(s.lanes.dropped, 803 - MAX_LANE_SEGMENTS as u64);
    assert!(g.windows(2).all(|w| w[0].end_ns <= w[1].start_ns));
    assert_eq!(g.last().unwrap().lane, Lane::Measuring);
    assert!(g.iter().filter(|x| x.name == "x").count() >= 250);
    // The longest dropped is no longer than the shortest kept.
    let kept_min = g.iter().map(|x| x.end_ns - x.start_ns).min().unwrap();
    assert!(kept_min >= 1_000, "{kept_min}");
}

#[test]
fn markers() {
    assert_eq!(
        parse_marker("LATLAB_STOP cpu=1 intended=5 actual=9 latency=4"),
        Some((5, 9, Some(4)))
    );
    assert_eq!(
        parse_marker("latlab seq=3 target=5 now=9 lat_ns=4"),
        Some((5, 9, Some(4)))
    );
    assert_eq!(parse_marker("latlab: start"), None);
    assert_eq!(crate::escape::escape("a\x1b[1mb\n"), "a\\u{1b}[1mb\\u{a}");
}

proptest::proptest! {
    /// Whatever the event soup, causes never exceed the latency.
    #[test]
    fn causes_never_exceed_latency(seq in proptest::collection::vec((0u8..12, 0u64..400_000, 0i64..4), 1..120), markers: bool) {
        let pids = [0i64, TAU, 200, 300];
        let prios = [120i64, 19, 120, 9];
        let mut b = B::new();
        let mut ts = 0u64;
        for (k, dt, who) in seq {
            ts += dt;
            let w = who as usize;
            let t = task("t", pids[w], prios[w]);
            let kind = match k {
                0 => EventKind::SchedSwitch { prev: task("p", pids[(w + 1) % 4], prios[(w + 1) % 4]), prev_state: "S".into(), next: t },
                1 => EventKind::SchedWaking { task: t, target_cpu: Some(1) },
                2 => EventKind::VectorEntry { name: "local_timer".into(), vector: 236 },
                3 => EventKind::VectorExit { name: "local_timer".into(), vector: 236 },
                4 => EventKind::SoftirqEntry { vec: 7, name: "SCHED".into() },
                5 => EventKind::SoftirqExit { vec: 7, name: "SCHED".into() },
                6 => EventKind::HrtimerStart { hrtimer: "h".into(), function: "hrtimer_wakeup".into(), expires: ts + dt / 2 },
                7 => EventKind::IrqEntry { irq: 5, name: "eth".into() },
                8 => EventKind::IrqExit { irq: 5 },
                9 => EventKind::Nmi { handler: "n".into(), delta_ns: dt },
                10 => EventKind::Marker { text: format!("LATLAB_STOP cpu=1 intended={} actual={} latency={}", ts.saturating_sub(dt), ts, dt).into() },
                _ => EventKind::HrtimerExpireEntry { hrtimer: "h".into(), function: "hrtimer_wakeup".into(), now: ts },
            };
            b.push(ts, pids[w], if k % 3 == 0 { "d..1." } else { "....." }, kind);
        }
        let a = b.run(if markers { SampleMode::Markers } else { SampleMode::Wakeups });
        for s in &a.spikes {
            proptest::prop_assert!(s.explained_ns() <= s.latency_ns, "{:?}", s);
            proptest::prop_assert_eq!(s.explained_ns() + s.unexplained_ns, s.latency_ns);
            proptest::prop_assert!(s.causes.windows(2).all(|w| w[0].ns >= w[1].ns));
            let g = &s.lanes.segments;
            proptest::prop_assert!(g.windows(2).all(|w| w[0].end_ns <= w[1].start_ns), "{:?}", g);
            proptest::prop_assert!(g.iter().all(|x| 0 <= x.start_ns && x.start_ns < x.end_ns && x.end_ns <= s.latency_ns as i64), "{:?}", g);
            proptest::prop_assert!(g.len() <= MAX_LANE_SEGMENTS);
        }
    }
}

#[test]
fn the_timer_irq_is_the_interrupt_not_the_softirq_it_interrupted() {
    // An RCU softirq began 810 µs before E in x's context; the timer interrupt that wakes τ
    // came inside it at E + 5 µs. The timeline's timer IRQ is that interrupt, not the
    // softirq's start (it was shown at -809.9 µs, before the timer was due).
    let x = task("x", 200, 120);
    let mut b = B::new();
    b.sleep(x.clone()).push(
        E - 810_000,
        200,
        "..s1.",
        EventKind::SoftirqEntry {
            vec: 9,
            name: "RCU".into(),
        },
    );
    b.timer_irq(E + 5_000, E + 8_000, 200).push(
        E + 20_000,
        200,
        "..s1.",
        EventKind::SoftirqExit {
            vec: 9,
            name: "RCU".into(),
        },
    );
    b.switch(E + 30_000, x, task("tau", TAU, 19))
        .marker(E + 31_000, E + 30_500);
    let a = b.run(SampleMode::Markers);
    assert_eq!(a.spikes.len(), 1, "{:?}", a.spikes);
    let s = &a.spikes[0];
    assert_eq!(s.timer_irq_ns, Some(E + 5_000));
    assert_eq!(s.wakeup_ns, Some(E + 5_002));
}

#[test]
fn without_the_interrupt_events_the_timer_irq_is_the_expiry_time() {
    // A kernel without irq_vectors: the hrtimer's expiry (`now`, the interrupt's clock) stands
    // for the interrupt, not the softirq open around it.
    let x = task("x", 200, 120);
    let mut b = B::new();
    b.sleep(x.clone())
        .push(
            E - 810_000,
            200,
            "..s1.",
            EventKind::SoftirqEntry {
                vec: 9,
                name: "RCU".into(),
            },
        )
        .push(
            E + 6_000,
            200,
            "d.h1.",
            EventKind::HrtimerExpireEntry {
                hrtimer: "h".into(),
                function: "hrtimer_wakeup".into(),
                now: E + 4_000,
            },
        )
        .push(
            E + 6_002,
            200,
            "d.h2.",
            EventKind::SchedWaking {
                task: task("tau", TAU, 19),
                target_cpu: Some(1),
            },
        )
        .push(
            E + 20_000,
            200,
            "..s1.",
            EventKind::SoftirqExit {
                vec: 9,
                name: "RCU".into(),
            },
        );
    b.switch(E + 30_000, x, task("tau", TAU, 19))
        .marker(E + 31_000, E + 30_500);
    let a = b.run(SampleMode::Markers);
    assert_eq!(a.spikes.len(), 1, "{:?}", a.spikes);
    assert_eq!(a.spikes[0].timer_irq_ns, Some(E + 4_000));
}

/// `events` fed one by one to an analyzer in full ([`Analyzer::feed_event`]) and to another by
/// the quiet path where it applies ([`Analyzer::try_quiet`], as [`Analyzer::feed`] does): the two analyses (in full, as their debug
/// text) and how many events took the quiet path.
fn fed_both_ways(
    events: &[Event<'_>],
    opts: &AnalyzeOptions,
    mode: SampleMode,
) -> (String, String, usize) {
    let (mut full, mut quiet) = (
        Analyzer::new(opts.clone(), mode),
        Analyzer::new(opts.clone(), mode),
    );
    let mut quietly = 0;
    for (i, e) in events.iter().enumerate() {
        full.feed_event(e);
        if quiet.try_quiet(e) {
            quietly += 1;
        } else {
            quiet.feed_event(e);
        }
        // The state itself, not only what the analysis shows of it: an update skipped may
        // show only later (or, as the IRQs-off evidence a sched event clears, never).
        assert_eq!(
            state(&mut full),
            state(&mut quiet),
            "after event {i}: {e:?}"
        );
        if i % 97 == 0 {
            full.lost(e.cpu, 3);
            quiet.lost(e.cpu, 3);
        }
    }
    (
        format!("{:?}", full.finish()),
        format!("{:?}", quiet.finish()),
        quietly,
    )
}

/// Everything an analyzer holds, as text: its CPUs' states, the names, priorities, IRQ
/// threads and boosts it knows, and its counts.
fn state(a: &mut Analyzer<'_>) -> String {
    let cpus = a.cpus.cpus();
    let mut s = format!("{cpus:?} {:?} {:?}\n", a.out, a.backwards_first);
    for c in cpus {
        s += &format!("{:?}\n", a.cpus.entry(c));
    }
    let mut known: Vec<_> = a.known.iter().collect();
    known.sort_by_key(|k| k.0);
    let mut threads: Vec<_> = a.irq_threads.iter().collect();
    threads.sort();
    let mut names: Vec<_> = a.irq_names.iter().collect();
    names.sort();
    let mut boosts: Vec<_> = a
        .boosts
        .iter()
        .map(|(p, b)| (p, format!("{b:?}")))
        .collect();
    boosts.sort();
    s + &format!("{known:?}\n{threads:?}\n{names:?}\n{boosts:?}")
}

/// The quiet path ([`Analyzer::quiet_switch`], [`Analyzer::quiet_waking`]) leaves the same
/// analysis as [`Analyzer::feed`] on the fixtures: real traces with windows opening, switched
/// in and closing, threaded IRQs and markers.
#[test]
fn the_quiet_path_analyzes_the_fixtures_as_feed_does() {
    let mut took = Vec::new();
    for (name, text) in [
        ("events", EVENTS.to_string()),
        ("odd", un_cat_a(ODD)),
        ("worst", WORST.to_string()),
        ("lost", LOST.to_string()),
        ("kernel", kernel_trace("odd one")),
    ] {
        let events: Vec<Event<'_>> = crate::trace::Parser::new(&text)
            .filter_map(|r| match r {
                Record::Event(e) => Some(e),
                _ => None,
            })
            .collect();
        for mode in [SampleMode::Wakeups, SampleMode::Markers] {
            let opts = AnalyzeOptions {
                threshold_ns: 0,
                mode: Some(mode),
                gaps: Vec::new(),
            };
            let (full, quiet, quietly) = fed_both_ways(&events, &opts, mode);
            assert_eq!(full, quiet, "{name} {mode:?}");
            took.push((name, mode, quietly, events.len()));
        }
    }
    // The fixture of one long window keeps its CPU busy; the others are mostly quiet.
    let quiet: usize = took.iter().map(|t| t.2).sum();
    assert!(quiet >= 10, "{took:?}");
}

/// Whatever the event soup on two CPUs (windows opened by timers and by RT wake-ups, switched
/// in and out, interrupts left open across switches, IRQs off before a switch, threaded IRQs,
/// priority inheritance, noise gaps, time going backwards, losses), the quiet path leaves the
/// same analysis as [`Analyzer::feed`]. Soups from a fixed seed, so a failure repeats; most
/// of their scheduler events take the quiet path, and many end samples. It fails when the
/// quiet path skips an update that the events after it read.
#[test]
fn the_quiet_path_is_feed_on_a_quiet_cpu() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let (mut quiet, mut samples) = (0, 0);
    for round in 0..600 {
        let len = 1 + next(160) as usize;
        let ev: Vec<Event<'static>> = (0..len)
            .map(|_| [next(14), next(300_000), next(6), next(8)])
            .scan(0u64, soup_event)
            .collect();
        let mode = if round % 2 == 0 {
            SampleMode::Markers
        } else {
            SampleMode::Wakeups
        };
        let gaps = if round % 3 == 0 {
            (0..4)
                .map(|i| NoiseGap {
                    cpu: i % 2,
                    start_ns: 150_000 * u64::from(i + 1),
                    end_ns: 150_000 * u64::from(i + 1) + 90_000,
                })
                .collect()
        } else {
            Vec::new()
        };
        let opts = AnalyzeOptions {
            threshold_ns: 0,
            mode: Some(mode),
            gaps,
        };
        let (full, quietly, n) = fed_both_ways(&ev, &opts, mode);
        assert_eq!(full, quietly, "round {round}: {ev:?}");
        quiet += n;
        let mut a = Analyzer::new(opts.clone(), mode);
        ev.iter().for_each(|e| a.feed_event(e));
        samples += a.finish().samples;
    }
    assert!(
        quiet > 1_000 && samples > 500,
        "{quiet} quiet, {samples} samples"
    );
}

/// One event of [`the_quiet_path_is_feed_on_a_quiet_cpu`]'s soups from four random numbers
/// (kind, time step, task, variant), at the time `ts` the soup has reached.
fn soup_event(ts: &mut u64, [k, dt, who, x]: [u64; 4]) -> Option<Event<'static>> {
    let pids = [0i64, TAU, 200, 300, 400, 500];
    let prios = [120i64, 19, 120, 9, 130, 50];
    let comms = ["swapper/1", "tau", "irq/5-eth", "rt", "bg", "mid"];
    let t = |w: usize, p: i64| task(comms[w % 6], pids[w % 6], p);
    let (w, xs) = (who as usize, x as usize);
    // Now and then a step back in time.
    *ts = if x == 7 {
        ts.saturating_sub(dt / 8)
    } else {
        *ts + dt
    };
    let ts = *ts;
    let prio = if x == 5 { prios[w] - 1 } else { prios[w] };
    let state = if x % 2 == 0 { "R+" } else { "S" };
    let kind = match k {
        0 | 1 => EventKind::SchedSwitch {
            prev: t(w + 1, prios[(w + 1) % 6]),
            prev_state: state.into(),
            next: t(w, prio),
        },
        2 | 3 => EventKind::SchedWaking {
            task: t(w, prio),
            target_cpu: Some(1),
        },
        4 => EventKind::VectorEntry {
            name: "local_timer".into(),
            vector: 236,
        },
        5 => EventKind::VectorExit {
            name: "local_timer".into(),
            vector: 236,
        },
        6 => EventKind::SoftirqEntry {
            vec: 7,
            name: "SCHED".into(),
        },
        7 => EventKind::HrtimerStart {
            hrtimer: "h".into(),
            function: "hrtimer_wakeup".into(),
            expires: ts + dt / 2,
        },
        8 => EventKind::IrqEntry {
            irq: 5,
            name: "eth".into(),
        },
        9 => EventKind::IrqExit { irq: 5 },
        10 => EventKind::SchedPiSetprio {
            task: t(w, prios[w]),
            newprio: prios[w] - 3,
        },
        11 => EventKind::Marker {
            text: format!(
                "LATLAB_STOP cpu={} intended={} actual={ts} latency={dt}",
                x % 2,
                ts.saturating_sub(dt)
            )
            .into(),
        },
        12 => EventKind::HrtimerExpireEntry {
            hrtimer: "h".into(),
            function: "hrtimer_wakeup".into(),
            now: ts.saturating_sub(dt / 3),
        },
        _ => EventKind::HrtimerExpireExit {
            hrtimer: "h".into(),
        },
    };
    Some(Event {
        line: 0,
        cpu: u32::from(x % 3 == 0),
        ts,
        task_comm: comms[(w + xs) % 6].into(),
        pid: pids[(w + xs / 4) % 6],
        flags: Flags::parse(if x % 2 == 0 { "d..1." } else { "....." }).unwrap(),
        kind,
    })
}
