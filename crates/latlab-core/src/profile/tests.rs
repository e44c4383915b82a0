use proptest::prelude::*;

use super::*;

fn sw(ts: u64, cpu: u32, prev: i64, prev_runnable: bool, next: i64) -> PEvent {
    PEvent {
        ts,
        cpu,
        lost_before: false,
        ev: Ev::Switch {
            prev_pid: prev,
            prev_prio: 120,
            prev_runnable,
            prev_dead: false,
            next_pid: next,
            next_prio: 120,
        },
    }
}

fn wake(ts: u64, cpu: u32, pid: i64, target: u32) -> PEvent {
    PEvent {
        ts,
        cpu,
        lost_before: false,
        ev: Ev::Wakeup {
            pid,
            prio: 120,
            target_cpu: Some(target),
            new: false,
        },
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// A known sequence on one CPU: the run-queue lengths and the waits are exact.
#[test]
fn known_sequence_gives_exact_shares_and_waits() {
    let mut p = Profiler::new(&[0], 0, 200);
    for e in [
        wake(0, 1, 10, 0),        // A queued on 0: 1
        sw(10, 0, 0, false, 10),  // idle -> A (A waited 10)
        wake(20, 1, 11, 0),       // B queued: 2
        sw(30, 0, 10, true, 11),  // A preempted (R+) -> B (B waited 10)
        sw(50, 0, 11, false, 10), // B sleeps: 1; A back (preempted for 20)
        sw(100, 0, 10, false, 0), // A sleeps: 0
    ] {
        p.event(&e);
    }
    let (r, s) = p.finish(200, 10, |pid| format!("t{pid}"), 0, 0);
    let share = &r.cpus[0].rq_share;
    assert!(close(share[0], 0.5), "{share:?}");
    assert!(close(share[1], 0.35), "{share:?}");
    assert!(close(share[2], 0.15), "{share:?}");
    assert_eq!(r.cpus[0].switches, 4);
    let a = r.wait.iter().find(|w| w.pid == 10).unwrap();
    assert_eq!((a.wakeups, a.max_ns), (1, Some(10)));
    assert_eq!((a.preemptions, a.preempt_max_ns), (1, Some(20)));
    let b = r.wait.iter().find(|w| w.pid == 11).unwrap();
    assert_eq!((b.wakeups, b.p99_ns, b.preemptions), (1, Some(10), 0));
    assert_eq!(b.comm, "t11");
    // 10 µs pixels: everything in the first pixel, whose largest count is 2.
    assert_eq!(s.cpus[0].1, vec![2]);
    assert_eq!(s.switches.len(), 4);
}

#[test]
fn wait_from_waking_and_rows_by_p99() {
    let mut p = Profiler::new(&[0], 0, 1_000_000);
    let waking = PEvent {
        ts: 100,
        cpu: 1,
        lost_before: false,
        ev: Ev::Waking { pid: 7 },
    };
    p.event(&waking);
    p.event(&wake(150, 1, 7, 0));
    p.event(&sw(400, 0, 0, false, 7)); // 300 from waking
    p.event(&wake(410, 1, 8, 0));
    p.event(&sw(420, 0, 7, false, 8)); // 10
    let (r, _) = p.finish(1000, 1, |_| String::new(), 0, 0);
    assert_eq!(r.wait.len(), 1, "top 1");
    assert_eq!(r.wait_dropped, 1);
    assert_eq!((r.wait[0].pid, r.wait[0].max_ns), (7, Some(300)));
}

#[test]
fn migration_moves_a_queued_task() {
    let mut p = Profiler::new(&[0, 1], 0, 100);
    p.event(&wake(0, 0, 5, 0));
    p.event(&PEvent {
        ts: 40,
        cpu: 1,
        lost_before: false,
        ev: Ev::Migrate {
            pid: 5,
            orig: 0,
            dest: 1,
        },
    });
    let (r, _) = p.finish(100, 10, |_| String::new(), 0, 0);
    assert!(close(r.cpus[0].rq_share[1], 0.4), "{:?}", r.cpus[0]);
    assert!(close(r.cpus[1].rq_share[1], 0.6), "{:?}", r.cpus[1]);
    assert_eq!((r.cpus[0].migrations, r.cpus[1].migrations), (0, 1));
}

#[test]
fn seeded_tasks_count_from_the_start() {
    let mut p = Profiler::new(&[0], 0, 100);
    p.seed_runnable(3, 0, 120);
    p.seed_runnable(4, 0, 120);
    p.event(&sw(50, 0, 3, false, 4)); // 3 sleeps: 1 left
    let (r, _) = p.finish(100, 10, |_| String::new(), 0, 0);
    assert_eq!(r.seeded_tasks, 2);
    assert!(close(r.cpus[0].rq_share[2], 0.5));
    assert!(close(r.cpus[0].rq_share[1], 0.5));
    // A seed is no wake-up: no wait measured.
    assert!(r.wait.is_empty(), "{:?}", r.wait);
}

#[test]
fn lost_events_leave_a_gap_outside_the_shares() {
    let mut p = Profiler::new(&[0], 0, 100_000);
    p.event(&wake(0, 0, 5, 0));
    let mut e = sw(60_000, 0, 5, false, 0);
    e.lost_before = true;
    p.event(&e);
    let (r, s) = p.finish(100_000, 10, |_| String::new(), 7, 0);
    let c = &r.cpus[0];
    assert_eq!((c.gap_ns, c.known_ns, c.lost_events), (60_000, 40_000, 1));
    assert!(close(c.rq_share[0], 1.0), "{c:?}");
    assert_eq!(r.lost_events, 7);
    // The gap's pixels are unknown, the rest idle.
    assert_eq!(s.cpus[0].1[0], PIXEL_UNKNOWN);
    assert_eq!(s.cpus[0].1[9], 0);
}

#[test]
fn long_profiles_get_coarser_pixels_never_more_than_the_cap() {
    // Hint: 1 s (10 µs fits); the profile runs 60 s: the pixel doubles on the way.
    let mut p = Profiler::new(&[0], 0, 1_000_000_000);
    assert_eq!(p.pixel_ns(), BASE_PIXEL_NS);
    p.event(&wake(0, 0, 5, 0));
    p.event(&sw(30_000_000_000, 0, 0, false, 5));
    let (r, s) = p.finish(60_000_000_000, 10, |_| String::new(), 0, 0);
    assert!(s.cpus[0].1.len() <= MAX_PIXELS);
    assert!(
        r.pixel_ns >= 60_000_000_000 / MAX_PIXELS as u64,
        "{}",
        r.pixel_ns
    );
    assert_eq!(s.pixel_ns, r.pixel_ns);
    assert!(s.cpus[0].1.iter().all(|&v| v == 1));
    // A 10-minute hint picks a coarse pixel up front.
    assert!(
        Profiler::new(&[0], 0, 600_000_000_000).pixel_ns() >= 600_000_000_000 / MAX_PIXELS as u64
    );
}

#[test]
fn series_file_round_trips_and_refuses_garbage() {
    let s = Series {
        start_ns: 5,
        pixel_ns: 10_000,
        cpus: vec![(0, vec![0, 1, 2, 255]), (3, vec![])],
        switches: vec![(7, 0, 42), (9, 3, -1)],
        switches_dropped: 2,
    };
    let b = s.to_bytes();
    assert_eq!(Series::from_bytes(&b), Some(s));
    for cut in 0..b.len() {
        assert_eq!(Series::from_bytes(&b[..cut]), None);
    }
}

#[test]
fn quantile_buckets_bound_the_value() {
    for v in (0..100_000u64).chain([1 << 40, u64::MAX / 2, u64::MAX]) {
        let top = bucket_top(bucket_of(v));
        assert!(top >= v, "{v} {top}");
        assert!(top - v <= v / 8, "{v} {top}");
    }
}

fn arb_event() -> impl Strategy<Value = (u64, u32, u8, i64, i64, bool, u32)> {
    (
        0u64..5_000,
        0u32..3,
        0u8..4,
        0i64..6,
        0i64..6,
        any::<bool>(),
        0u32..3,
    )
}

proptest! {
    /// Any sequence: every CPU's shares sum to 1 (or nothing is known), and pixels stay capped.
    #[test]
    fn shares_sum_to_one(mut evs in proptest::collection::vec(arb_event(), 0..200), lost in 0usize..200) {
        evs.sort_by_key(|e| e.0);
        let mut p = Profiler::new(&[0, 1, 2], 0, 5_000);
        for (i, &(ts, cpu, k, a, b, r, t)) in evs.iter().enumerate() {
            let ev = match k {
                0 => Ev::Switch { prev_pid: a, prev_prio: 1, prev_runnable: r, prev_dead: t == 2, next_pid: b, next_prio: 1 },
                1 => Ev::Wakeup { pid: a, prio: 1, target_cpu: Some(t), new: r },
                2 => Ev::Waking { pid: a },
                _ => Ev::Migrate { pid: a, orig: cpu, dest: t },
            };
            p.event(&PEvent { ts, cpu, lost_before: i == lost, ev });
        }
        let (r, s) = p.finish(5_000, 3, |_| String::new(), 0, 0);
        for c in &r.cpus {
            let sum: f64 = c.rq_share.iter().sum();
            prop_assert!(close(sum, 1.0) || (sum == 0.0 && c.known_ns == 0), "{c:?}");
            prop_assert_eq!(c.known_ns + c.gap_ns, 5_000);
        }
        prop_assert!(r.wait.len() <= 3);
        prop_assert!(s.cpus.iter().all(|(_, p)| p.len() <= MAX_PIXELS));
    }
}

/// A pid reused by a new task: the old holder's state (queued, a wake-up's start) is dropped.
#[test]
fn a_reused_pid_starts_afresh() {
    let mut p = Profiler::new(&[0], 0, 10_000);
    p.event(&wake(0, 0, 9, 0)); // old holder queued, waiting since 0
    let mut dead = sw(10, 0, 0, false, 0);
    dead.ev = Ev::Switch {
        prev_pid: 9,
        prev_prio: 120,
        prev_runnable: false,
        prev_dead: true,
        next_pid: 0,
        next_prio: 120,
    };
    p.event(&sw(5, 0, 0, false, 9));
    p.event(&dead);
    p.event(&wake(100, 0, 9, 0)); // stale belief? no: a plain wake-up after the exit
    let mut new = wake(1_000, 0, 9, 0);
    new.ev = Ev::Wakeup {
        pid: 9,
        prio: 120,
        target_cpu: Some(0),
        new: true,
    };
    p.event(&new); // a new task with pid 9 while the model had it queued since 100
    p.event(&sw(1_010, 0, 0, false, 9));
    let (r, _) = p.finish(10_000, 10, |_| String::new(), 0, 0);
    // Waits: 5 (first holder), none for the new task (its first run follows wakeup_new).
    let rows: Vec<_> = r.wait.iter().filter(|w| w.pid == 9).collect();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!((rows[0].wakeups, rows[0].max_ns), (1, Some(5)));
}
