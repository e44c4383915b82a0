//! Wakeup pairs: the channel a sender signals its receiver through (one of the IPCs), the
//! receiver's clock (the signal), and the sender's loop.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::sync::{Arc, Condvar, Mutex};

use super::Ipc;
use crate::hotloop::Clock;
use crate::live::ThreadShared;
use crate::rt;

/// Stamps kept, one per signal number: a receiver more than `STAMPS − 2` signals behind
/// the sender takes the newest signal instead (the others coalesced).
const STAMPS: usize = 64;

/// What a sender and its receiver share. `seq` counts signals (the futex word); signal `n`'s
/// stamp (the sender's CLOCK_MONOTONIC time just before it) is in `stamps[n % STAMPS]`,
/// written before `n` is published. One stamp for all would let a receiver that wakes for
/// signal `n` read the stamp of `n + 1` (written while it was between the wake-up and the
/// read): a later stamp, an understated latency (0 ns seen on a stalled machine).
pub struct Channel {
    ipc: Ipc,
    seq: AtomicU32,
    stamps: [AtomicU64; STAMPS],
    stop: AtomicBool,
    fds: [i32; 2],
    cv: (Mutex<u32>, Condvar),
}

impl Channel {
    pub fn new(ipc: Ipc) -> std::io::Result<Channel> {
        let mut fds = [-1i32; 2];
        match ipc {
            Ipc::Pipe => {
                // SAFETY: fds is a valid 2-int array.
                if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ipc::Eventfd => {
                // SAFETY: plain syscall.
                let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                fds = [fd, fd];
            }
            Ipc::Mqueue => fds = open_mqueue()?,
            Ipc::Futex | Ipc::Condvar => {}
        }
        Ok(Channel {
            ipc,
            seq: AtomicU32::new(0),
            stamps: std::array::from_fn(|_| AtomicU64::new(0)),
            stop: AtomicBool::new(false),
            fds,
            cv: (Mutex::new(0), Condvar::new()),
        })
    }

    /// Sender: publish `stamp` and wake the receiver through the IPC.
    #[inline(always)]
    fn signal(&self, stamp: u64) {
        // The sender alone writes `seq`: the number this signal will publish.
        let n = self.seq.load(Relaxed).wrapping_add(1);
        // Release: a receiver that reads this stamp also sees every number published before.
        self.stamps[n as usize % STAMPS].store(stamp, Release);
        match self.ipc {
            Ipc::Futex => {
                self.seq.fetch_add(1, Release);
                // SAFETY: the word lives as long as the channel; FUTEX_WAKE of 1 waiter.
                unsafe {
                    libc::syscall(
                        libc::SYS_futex,
                        self.seq.as_ptr(),
                        libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                        1,
                        std::ptr::null::<libc::timespec>(),
                    )
                };
            }
            Ipc::Pipe => {
                self.seq.fetch_add(1, Release);
                let b = 1u8;
                // SAFETY: valid fd and 1-byte buffer.
                unsafe { libc::write(self.fds[1], (&b as *const u8).cast(), 1) };
            }
            Ipc::Eventfd => {
                self.seq.fetch_add(1, Release);
                let v = 1u64;
                // SAFETY: valid fd and 8-byte buffer.
                unsafe { libc::write(self.fds[1], (&v as *const u64).cast(), 8) };
            }
            Ipc::Mqueue => {
                self.seq.fetch_add(1, Release);
                // SAFETY: the sender's descriptor and an 8-byte message. It is non-blocking:
                // a queue the receiver is 8 signals behind on drops this one (the receiver
                // learns of it from `seq`) instead of stalling the sender's schedule.
                unsafe { libc::mq_send(self.fds[1], (&stamp as *const u64).cast(), 8, 0) };
            }
            Ipc::Condvar => {
                let mut g = self.cv.0.lock().unwrap_or_else(|e| e.into_inner());
                *g = g.wrapping_add(1);
                self.seq.store(*g, Release);
                drop(g);
                self.cv.1.notify_one();
            }
        }
    }

    /// Receiver: signal `w`'s stamp (`w` published), or None if the sender may have written
    /// a later signal's stamp over it.
    #[inline(always)]
    fn stamp_of(&self, w: u32) -> Option<u64> {
        let s = self.stamps[w as usize % STAMPS].load(Acquire);
        // The slot of `w` is written again for `w + STAMPS`, after `w + STAMPS − 1` is out.
        let behind = self.seq.load(Acquire).wrapping_sub(w);
        (behind as usize <= STAMPS - 2).then_some(s)
    }

    /// Receiver: the newest signal and its stamp.
    #[inline(always)]
    fn newest(&self) -> (u32, u64) {
        loop {
            let w = self.seq.load(Acquire);
            if let Some(s) = self.stamp_of(w) {
                return (w, s);
            }
        }
    }

    /// Receiver: block on the IPC until a signal newer than `last` has arrived; returns
    /// its sequence number.
    #[inline(always)]
    fn wait(&self, last: u32) -> u32 {
        match self.ipc {
            Ipc::Futex => loop {
                let w = self.seq.load(Acquire);
                if w != last {
                    return w;
                }
                // SAFETY: as in signal; returns at once if the word is no longer `w`.
                unsafe {
                    libc::syscall(
                        libc::SYS_futex,
                        self.seq.as_ptr(),
                        libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                        w,
                        std::ptr::null::<libc::timespec>(),
                    )
                };
            },
            Ipc::Pipe | Ipc::Eventfd => loop {
                // Each signal leaves a byte (pipe) or adds to the counter (eventfd): read
                // until the signal we have not seen is consumed.
                let mut buf = 0u64;
                let n = if self.ipc == Ipc::Pipe { 1 } else { 8 };
                // SAFETY: valid fd; buf holds 8 bytes.
                unsafe { libc::read(self.fds[0], (&mut buf as *mut u64).cast(), n) };
                let w = self.seq.load(Acquire);
                if w != last {
                    return w;
                }
            },
            Ipc::Mqueue => loop {
                let mut buf = 0u64;
                // SAFETY: the receiver's descriptor; buf holds the queue's 8-byte messages.
                unsafe {
                    libc::mq_receive(
                        self.fds[0],
                        (&mut buf as *mut u64).cast(),
                        8,
                        std::ptr::null_mut(),
                    )
                };
                let w = self.seq.load(Acquire);
                if w != last {
                    return w;
                }
            },
            Ipc::Condvar => {
                let mut g = self.cv.0.lock().unwrap_or_else(|e| e.into_inner());
                while *g == last {
                    g = self.cv.1.wait(g).unwrap_or_else(|e| e.into_inner());
                }
                *g
            }
        }
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        let fds: &[i32] = match self.ipc {
            Ipc::Pipe | Ipc::Mqueue => &self.fds[..],
            Ipc::Eventfd => &self.fds[..1],
            _ => &[],
        };
        for &fd in fds {
            // SAFETY: our own fds, closed once.
            unsafe { libc::close(fd) };
        }
    }
}

/// A message queue of 8-byte messages: `[receiver fd, sender fd (non-blocking)]`. Its name is
/// unlinked at once, so the queue lives exactly as long as the two descriptors and a killed
/// run leaves nothing in `/dev/mqueue`.
fn open_mqueue() -> std::io::Result<[i32; 2]> {
    use std::sync::atomic::AtomicU32;
    static N: AtomicU32 = AtomicU32::new(0);
    let name = std::ffi::CString::new(format!(
        "/latlab-{}-{}",
        std::process::id(),
        N.fetch_add(1, Relaxed)
    ))
    .expect("no NUL in the name");
    let unavailable = |e: std::io::Error| {
        match e.raw_os_error() {
        Some(libc::ENOSYS) => std::io::Error::other(
            "POSIX message queues are not available (a kernel without CONFIG_POSIX_MQUEUE); use --ipc futex, pipe, eventfd or condvar",
        ),
        _ => e,
    }
    };
    // SAFETY: mq_attr is plain data; zeroed then filled.
    let mut attr: libc::mq_attr = unsafe { std::mem::zeroed() };
    attr.mq_maxmsg = 8; // within fs.mqueue.msg_max (10 by default)
    attr.mq_msgsize = 8;
    // SAFETY: a NUL-terminated name, a mode and a valid attr pointer, as mq_open(3) takes them.
    let rx = unsafe {
        libc::mq_open(
            name.as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_RDONLY | libc::O_CLOEXEC,
            0o600 as libc::c_uint,
            &attr as *const libc::mq_attr,
        )
    };
    if rx < 0 {
        return Err(unavailable(std::io::Error::last_os_error()));
    }
    // SAFETY: the same name, opened again for writing.
    let tx = unsafe {
        libc::mq_open(
            name.as_ptr(),
            libc::O_WRONLY | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    let err = std::io::Error::last_os_error();
    // SAFETY: the name we created.
    unsafe { libc::mq_unlink(name.as_ptr()) };
    if tx < 0 {
        // SAFETY: our own descriptor.
        unsafe { libc::mq_close(rx) };
        return Err(unavailable(err));
    }
    Ok([rx, tx])
}

/// The receiver's "clock": the wake-up it waits for is the sender's signal.
pub(crate) struct WakeupClock {
    pub ch: Arc<Channel>,
    pub last: u32,
    /// Where coalesced signals are counted (None in unit tests).
    pub shared: Option<Arc<ThreadShared>>,
}

impl WakeupClock {
    /// Block until the next signal; `(sender's stamp, now)`, or None once the sender stopped.
    #[inline(always)]
    pub(crate) fn next(&mut self) -> Option<(u64, u64)> {
        let mut w = self.ch.wait(self.last);
        let mut now = rt::now_ns();
        let stamp = match self.ch.stamp_of(w) {
            Some(s) => s,
            None => {
                // The sender lapped the stamps while this thread was off the CPU: the newest
                // signal (its stamp before a fresh `now`), the others coalesced.
                let (w2, s) = self.ch.newest();
                (w, now) = (w2, rt::now_ns());
                s
            }
        };
        let skipped = w.wrapping_sub(self.last).wrapping_sub(1) as u64;
        self.last = w;
        // The signals this thread never saw were periods of the run, also when the one it
        // sees is the sender's last (the stop, itself no period): a receiver kept off its CPU
        // through the run's last 13 ms lost 13 periods from the count (fresh clone f23740c).
        if skipped > 0 {
            if let Some(sh) = &self.shared {
                let c = &sh.mode.coalesced;
                c.store(c.load(Relaxed) + skipped, Relaxed);
            }
        }
        if self.ch.stop.load(Acquire) {
            return None;
        }
        Some((stamp, now))
    }
}

impl Clock for WakeupClock {
    const SCHEDULED: bool = false;
    #[inline(always)]
    fn wait_until(&mut self, _t: u64) -> Option<(u64, u64)> {
        self.next()
    }
}

/// The sender's loop: on the absolute schedule `first, first + interval, …` until `end`
/// or `stop`, stamp and signal; missed periods are counted into the receiver's `missed`.
/// Always ends with a last signal carrying the stop flag, so the receiver never blocks for
/// ever.
pub(crate) fn sender_loop(
    ch: &Channel,
    sh: &ThreadShared,
    stop: &AtomicBool,
    first: u64,
    end: u64,
    interval: u64,
) {
    let mut next = first;
    while next < end && !stop.load(Relaxed) {
        rt::sleep_until(next);
        let now = rt::now_ns();
        ch.signal(now);
        next += interval;
        if now >= next {
            let (skip, missed) = crate::hotloop::periods_missed(next, now, interval, end);
            sh.missed.store(sh.missed.load(Relaxed) + missed, Relaxed);
            next += skip * interval;
        }
    }
    stop_receiver(ch);
}

/// Wake the receiver a last time with the stop flag set.
pub(crate) fn stop_receiver(ch: &Channel) {
    ch.stop.store(true, Release);
    ch.signal(rt::now_ns());
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVERY_IPC: [Ipc; 5] = [
        Ipc::Futex,
        Ipc::Pipe,
        Ipc::Eventfd,
        Ipc::Condvar,
        Ipc::Mqueue,
    ];

    /// A signal sent after the receiver woke for the previous one (it was off the CPU
    /// between the wake-up and reading the stamp) leaves the previous one's stamp in place;
    /// a receiver lapped by the sender is told so, and takes the newest.
    #[test]
    fn a_wake_up_reads_its_own_signals_stamp() {
        for ipc in EVERY_IPC {
            let ch = Channel::new(ipc).unwrap();
            ch.signal(10);
            let w = ch.wait(0);
            ch.signal(20);
            assert_eq!(ch.stamp_of(w), Some(10), "{ipc:?}");
            assert_eq!(ch.stamp_of(w + 1), Some(20), "{ipc:?}");
        }
        let ch = Channel::new(Ipc::Futex).unwrap();
        for i in 1..=STAMPS as u64 {
            ch.signal(i * 10);
        }
        assert_eq!(
            ch.stamp_of(1),
            None,
            "signal {} may be writing slot 1",
            STAMPS + 1
        );
        assert_eq!(ch.stamp_of(2), Some(20));
        assert_eq!(ch.newest(), (STAMPS as u32, STAMPS as u64 * 10));
    }

    #[test]
    fn channel_delivers_every_ipc_in_order_and_stops() {
        for ipc in EVERY_IPC {
            let ch = Arc::new(Channel::new(ipc).unwrap());
            let ack = Arc::new(AtomicU64::new(0));
            let rx = {
                let (ch, ack) = (ch.clone(), ack.clone());
                std::thread::spawn(move || {
                    let mut c = WakeupClock {
                        ch,
                        last: 0,
                        shared: None,
                    };
                    let mut got = Vec::new();
                    while let Some((stamp, now)) = c.next() {
                        assert!(now >= stamp, "{ipc:?}: woke before the stamp");
                        got.push(stamp);
                        ack.store(stamp, Release);
                    }
                    got
                })
            };
            for i in 1..=20u64 {
                ch.signal(i);
                // Handshake: the next signal only after the receiver has taken this one.
                while ack.load(Acquire) != i {
                    std::thread::yield_now();
                }
            }
            stop_receiver(&ch);
            let got = rx.join().unwrap();
            assert_eq!(got, (1..=20).collect::<Vec<u64>>(), "{ipc:?}");
        }
    }

    /// Signals the receiver never saw before the sender's last one (the stop) are counted as
    /// coalesced: they were periods of the run.
    #[test]
    fn signals_unseen_before_the_stop_are_counted() {
        use crate::live::ModeShared;
        use latlab_core::hist::Layout;
        for ipc in EVERY_IPC {
            let ch = Arc::new(Channel::new(ipc).unwrap());
            let layout = Layout::default();
            let sh = Arc::new(ThreadShared::new(
                1,
                layout,
                ModeShared::new(layout, false, None),
                1_000_000,
                true,
            ));
            for i in 1..=3u64 {
                ch.signal(i);
            }
            stop_receiver(&ch);
            let mut c = WakeupClock {
                ch,
                last: 0,
                shared: Some(sh.clone()),
            };
            assert_eq!(c.next(), None, "{ipc:?}");
            assert_eq!(sh.mode.coalesced.load(Relaxed), 3, "{ipc:?}");
        }
    }
}
