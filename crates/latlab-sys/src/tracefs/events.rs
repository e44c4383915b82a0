//! What an instance records: the events of the flight recorder and of the profiler, and the
//! stop trigger.

/// The trigger that turns a latlab marker into an in-kernel stop.
pub const STOP_TRIGGER: &str = "traceoff if buf ~ \"*LATLAB_STOP*\"";

/// Events the attribution reads: `(system/event, required)`. `irq_vectors` are added from
/// what the kernel has (they differ between architectures), but the timer's own
/// (`local_timer_*`). `sched_wakeup` is not among them: the analyzer reads the wake-up at
/// `sched_waking` and ignores `sched_wakeup`. Every event fired on a measured CPU between
/// its timer interrupt and its thread's clock read adds to every latency (the first about
/// 1 µs on this VM, docs/performance.md): [`TIMER_EVENTS`] and the timer vector only with
/// `--trace-events full`.
pub const EVENTS: &[(&str, bool)] = &[
    ("sched/sched_switch", true),
    ("sched/sched_waking", true),
    ("irq/irq_handler_entry", false),
    ("irq/irq_handler_exit", false),
    ("irq/softirq_entry", false),
    ("irq/softirq_exit", false),
    ("timer/hrtimer_start", true),
    ("nmi/nmi_handler", false),
    // Priority inheritance (a lock owner boosted above the measuring thread); rare.
    ("sched/sched_pi_setprio", false),
];

/// The timer interrupt's own events (`--trace-events full`): its hrtimer callbacks (the
/// analyzer's E when a thread's arming is not in the trace; the recorder's marker carries it)
/// and, with [`EVENTS`]' vectors, `irq_vectors/local_timer_*` (the timer interrupt's time as
/// an `irq` cause). Four events on every wake-up of a measuring thread.
pub const TIMER_EVENTS: &[(&str, bool)] = &[
    ("timer/hrtimer_expire_entry", true),
    ("timer/hrtimer_expire_exit", true),
];

/// and the `irq_vectors`, overwrite, the stop trigger) or `latlab profile`'s
/// ([`InstanceSpec::PROFILE`]: [`PROFILE_EVENTS`], producer/consumer mode: a full buffer
/// drops new events and says so in its pages, read as the profile streams it).
#[derive(Debug, Clone, Copy)]
pub struct InstanceSpec {
    pub events: &'static [(&'static str, bool)],
    pub vectors: bool,
    /// [`TIMER_EVENTS`] and the timer's vector too.
    pub timer_irq: bool,
    pub overwrite: bool,
    pub stop_trigger: bool,
}

impl InstanceSpec {
    pub const RECORDER: InstanceSpec = InstanceSpec {
        events: EVENTS,
        vectors: true,
        timer_irq: false,
        overwrite: true,
        stop_trigger: true,
    };
    /// The recorder with the timer interrupt's events (`--trace-events full`).
    pub const RECORDER_FULL: InstanceSpec = InstanceSpec {
        timer_irq: true,
        ..InstanceSpec::RECORDER
    };
    pub const PROFILE: InstanceSpec = InstanceSpec {
        events: PROFILE_EVENTS,
        vectors: false,
        timer_irq: false,
        overwrite: false,
        stop_trigger: false,
    };
}

/// `latlab profile`'s events: the run queue's (switches, wake-ups, migrations) and the IRQ and
/// softirq entries and exits for the timelines.
pub const PROFILE_EVENTS: &[(&str, bool)] = &[
    ("sched/sched_switch", true),
    ("sched/sched_waking", true),
    ("sched/sched_wakeup", true),
    ("sched/sched_wakeup_new", true),
    ("sched/sched_migrate_task", true),
    ("irq/irq_handler_entry", false),
    ("irq/irq_handler_exit", false),
    ("irq/softirq_entry", false),
    ("irq/softirq_exit", false),
];
