//! A mutex with priority inheritance (`PTHREAD_PRIO_INHERIT`): a real-time thread that waits
//! for it lends its priority to the holder. The recorder's re-arm thread (SCHED_FIFO 1) and
//! its collector (a normal task) share one state; under hackbench the collector, preempted
//! while holding a plain mutex, kept the re-arm thread waiting for a CPU among hundreds of
//! tasks: a re-arm of 345 ms. With inheritance the holder runs at once, at the waiter's
//! priority, until it unlocks. No poisoning: a panic while locked unlocks as the guard drops.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};

pub struct PiMutex<T> {
    /// Boxed: a pthread mutex must not move once initialised.
    m: Box<UnsafeCell<libc::pthread_mutex_t>>,
    v: UnsafeCell<T>,
}

// SAFETY: access to `v` is serialised by the mutex, as std's Mutex.
unsafe impl<T: Send> Send for PiMutex<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for PiMutex<T> {}

impl<T> PiMutex<T> {
    pub fn new(v: T) -> PiMutex<T> {
        // SAFETY: attr is initialised before use and destroyed after; the mutex is
        // initialised in place in its box (it never moves), with that attr.
        let m = unsafe {
            let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
            libc::pthread_mutexattr_init(&mut attr);
            libc::pthread_mutexattr_setprotocol(&mut attr, libc::PTHREAD_PRIO_INHERIT);
            let m = Box::new(UnsafeCell::new(std::mem::zeroed::<libc::pthread_mutex_t>()));
            libc::pthread_mutex_init(m.get(), &attr);
            libc::pthread_mutexattr_destroy(&mut attr);
            m
        };
        PiMutex {
            m,
            v: UnsafeCell::new(v),
        }
    }

    pub fn lock(&self) -> PiGuard<'_, T> {
        // SAFETY: an initialised mutex; a normal (not error-checking) mutex never fails here.
        unsafe { libc::pthread_mutex_lock(self.m.get()) };
        PiGuard { m: self }
    }
}

impl<T> Drop for PiMutex<T> {
    fn drop(&mut self) {
        // SAFETY: not locked (no guard can outlive the mutex).
        unsafe { libc::pthread_mutex_destroy(self.m.get()) };
    }
}

pub struct PiGuard<'a, T> {
    m: &'a PiMutex<T>,
}

impl<T> Deref for PiGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.m.v.get() }
    }
}

impl<T> DerefMut for PiGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard holds the lock, and is borrowed mutably.
        unsafe { &mut *self.m.v.get() }
    }
}

impl<T> Drop for PiGuard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: locked by this guard, on this thread.
        unsafe { libc::pthread_mutex_unlock(self.m.m.get()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// The effective priority the scheduler gives thread `tid` (`prio` in its `sched` file:
    /// 120 for a nice-0 normal task, 98 for SCHED_FIFO 1).
    fn prio(tid: i32) -> i64 {
        let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/sched")).unwrap();
        s.lines()
            .find_map(|l| {
                l.strip_prefix("prio")
                    .map(|v| v.trim_start_matches([' ', ':']))
            })
            .and_then(|v| v.trim().parse().ok())
            .expect("a prio line")
    }

    #[test]
    fn it_excludes() {
        let m = Arc::new(PiMutex::new(0u64));
        let t: Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        *m.lock() += 1;
                    }
                })
            })
            .collect();
        t.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(*m.lock(), 40_000);
    }

    /// A normal holder runs at the priority of the SCHED_FIFO thread waiting for it (with a
    /// std Mutex it stays at 120), and back at its own once it unlocks.
    #[test]
    fn a_waiting_fifo_thread_boosts_the_normal_holder() {
        let Some(_g) = crate::privileged::guard("a_waiting_fifo_thread_boosts_the_normal_holder")
        else {
            return;
        };
        // SAFETY: plain syscall.
        let me = unsafe { libc::gettid() };
        let base = prio(me);
        assert!(base >= 100, "the test thread runs as a normal task: {base}");
        let m = Arc::new(PiMutex::new(()));
        let held = m.lock();
        let w = {
            let m = m.clone();
            std::thread::spawn(move || {
                let p = libc::sched_param { sched_priority: 1 };
                // SAFETY: plain syscall on this thread.
                assert_eq!(
                    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) },
                    0
                );
                drop(m.lock());
            })
        };
        let t0 = Instant::now();
        while prio(me) >= 100 && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(
            prio(me),
            98,
            "boosted to SCHED_FIFO 1 while the waiter waits"
        );
        drop(held);
        w.join().unwrap();
        assert_eq!(prio(me), base, "back to its own priority");
    }
}
