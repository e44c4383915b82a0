use super::fields::find_arrow;
use super::parse::{name_and_body, sched_name};
use super::sched::{fast_switch, fast_wake, parse_switch, parse_wake};
use super::*;
use crate::trace::bytes::{find_sub, rfind_sub};
use crate::trace::line::{fixed_task, split_task};

#[test]
fn substring_search() {
    for (h, n) in [
        ("a ==> b ==> c", " ==> "),
        ("xyz", "q"),
        ("prev_pid=1 prev_pid=2", " prev_pid="),
        ("", "a"),
        ("aaa", "aa"),
    ] {
        assert_eq!(find_sub(h, n), h.find(n), "{h} {n}");
        assert_eq!(find_arrow(h), h.find(" ==> "), "{h}");
        assert_eq!(rfind_sub(h, n), h.rfind(n), "{h} {n}");
    }
}

/// The fast paths take the kernel's own lines (else they would only cost a check).
/// The kernel's `sched_pi_setprio` line (6.1 and 6.12 print the same), a comm with a
/// blank too.
#[test]
fn sched_pi_setprio_is_read() {
    for (comm, line) in [
        ("pi-low", "          pi-high-812     [001] d..2.    96.101706: sched_pi_setprio: comm=pi-low pid=811 oldprio=120 newprio=2"),
        ("a b", "          pi-high-812     [001] d..2.    96.101706: sched_pi_setprio: comm=a b pid=811 oldprio=120 newprio=2"),
    ] {
        let e = event_from(1, line).unwrap();
        assert_eq!(e.pid, 812);
        assert_eq!(
            e.kind,
            EventKind::SchedPiSetprio {
                task: TaskRef {
                    comm: comm.into(),
                    pid: 811,
                    prio: 120
                },
                newprio: 2
            }
        );
    }
}

#[test]
fn fast_paths_take_kernel_lines() {
    let sw = "prev_comm=kworker/0:1 H prev_pid=14951 prev_prio=120 prev_state=R+ ==> next_comm=latlab-m0 next_pid=7 next_prio=19";
    let k = fast_switch(sw).expect("kernel sched_switch body");
    assert_eq!(Ok(k.clone()), parse_switch(sw));
    assert!(
        matches!(k, EventKind::SchedSwitch { ref prev, ref next, .. } if prev.comm == "kworker/0:1 H" && next.pid == 7)
    );
    let col = "       hackbench-14951  ";
    assert_eq!(fixed_task(col), Some(("hackbench", 14951)));
    assert_eq!(fixed_task(col), Some(split_task(col)));
    let wk = "comm=hackbench pid=14963 prio=120 target_cpu=001";
    let w = fast_wake(wk).expect("kernel sched_waking body");
    assert_eq!(w.1, Some(1));
    assert_eq!(Ok(w), parse_wake(wk));
}

proptest::proptest! {
    #[test]
    fn fast_paths_agree_with_the_general_parser(
        parts in proptest::collection::vec(
            proptest::sample::select(vec![
                "prev_comm=", "next_comm=", "comm=", " prev_pid=", " prev_prio=",
                " prev_state=", " next_pid=", " next_prio=", " pid=", " prio=",
                " target_cpu=", " ==> ", " ", "=", "]", "[", "-", "0", "7", "120",
                "99999999999999999999", "R+", "S", "a b", "==>", ">",
            ]),
            0..16,
        )
    ) {
        let body: String = parts.concat();
        if let Some(k) = fast_switch(&body) {
            proptest::prop_assert_eq!(Ok(k), parse_switch(&body), "{:?}", body);
        }
        if let Some(w) = fast_wake(&body) {
            proptest::prop_assert_eq!(Ok(w), parse_wake(&body), "{:?}", body);
        }
    }

    #[test]
    fn fast_paths_agree_on_kernel_shaped_bodies(
        f in proptest::collection::vec(
            proptest::sample::select(vec![
                "hackbench", "", "a b", "x ==> y", " prev_pid=1", "]", "S]", "p prev_state=S",
                " next_pid=2", " pid=3 prio=4", "0", "120", "-1", "007",
                "9999999999999999999", "R+", " target_cpu=1", "==>", " ==> next_comm=z",
            ]),
            7,
        )
    ) {
        let sw = format!(
            "prev_comm={} prev_pid={} prev_prio={} prev_state={} ==> next_comm={} next_pid={} next_prio={}",
            f[0], f[1], f[2], f[3], f[4], f[5], f[6]
        );
        if let Some(k) = fast_switch(&sw) {
            proptest::prop_assert_eq!(Ok(k), parse_switch(&sw), "{:?}", sw);
        }
        let wk = format!("comm={} pid={} prio={} target_cpu={}", f[0], f[1], f[2], f[3]);
        if let Some(w) = fast_wake(&wk) {
            proptest::prop_assert_eq!(Ok(w), parse_wake(&wk), "{:?}", wk);
        }
    }

    #[test]
    fn sched_name_fast_path_is_the_general_split(
        name in proptest::sample::select(vec!["sched_switch", "sched_waking", "sched_wakeup", "sched_wakeup_new", "sched_wakeupx", "sched_foobar", "sched_switc"]),
        sep in proptest::sample::select(vec![": ", ":  ", ":", ": \t", " : "]),
        body in proptest::sample::select(vec!["comm=x pid=3 prio=120 target_cpu=001", "a: b", ""]),
        tail in proptest::sample::select(vec!["", "\r", "\n", "\r\n", " "]),
    ) {
        let rest = format!("{name}{sep}{body}{tail}");
        if let Some(fast) = sched_name(&rest) {
            proptest::prop_assert_eq!(Ok(fast), name_and_body(&rest), "{:?}", rest);
        }
    }
}
