//! The measurement modes beyond the timer: thread → thread wake-ups through an IPC
//! (`wakeup`), a calibrated compute kernel each period (`jitter`), and Senoner's audio
//! deadline model (`audio`). They plug into the one measurement loop of [`crate::measure`]
//! (same histogram, spike ring, per-second maxima, top-N and trace marker), monomorphised,
//! so the timer mode pays nothing for them.
//!
//! Hot-path rules hold here too: everything is allocated and touched before the run. In the
//! wakeup mode the IPC's syscalls (futex, pipe read/write, eventfd read/write, the condvar's
//! mutex) *are* the measured mechanism; nothing else is called.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::sync::{Condvar, Mutex};

use latlab_core::hist::Layout;
use latlab_core::modes::{AudioTally, VERDICT_BUFFERS};
use latlab_core::sim::SplitMix64;

use crate::measure::{LiveHistogram, ThreadShared};
use crate::rt;

/// The IPC a wakeup pair uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ipc {
    /// FUTEX_WAIT / FUTEX_WAKE on a 32-bit word (what a pthread semaphore does inside).
    Futex,
    /// A 1-byte write / read on a pipe.
    Pipe,
    /// An eventfd write / read.
    Eventfd,
    /// std Mutex + Condvar (pthread mutex/condvar).
    Condvar,
    /// A POSIX message queue, `mq_send` / `mq_receive` of the 8-byte stamp (rt-tests' pmqtest).
    Mqueue,
}

impl Ipc {
    pub fn as_str(&self) -> &'static str {
        match self {
            Ipc::Futex => "futex",
            Ipc::Pipe => "pipe",
            Ipc::Eventfd => "eventfd",
            Ipc::Condvar => "condvar",
            Ipc::Mqueue => "mqueue",
        }
    }
}

/// What the engine runs on each thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Timer wake-ups (cyclictest).
    Timer,
    /// A sender thread per measured CPU wakes the receiver through `ipc`; `sender_cpus[i]`
    /// is the CPU of the sender of the i-th measured CPU.
    Wakeup {
        ipc: Ipc,
        sender_cpus: Vec<u32>,
        sender_priority: u32,
    },
    /// Each period, run the compute kernel calibrated to `work_ns` and record its execution
    /// time. `inject_slow`: that iteration (0-based) does twice the work (tests only).
    Jitter {
        work_ns: u64,
        inject_slow: Option<u64>,
    },
    /// As `Jitter`, and tally the fragment deadlines with `buffers` fragments of one period.
    Audio {
        work_ns: u64,
        buffers: u32,
        inject_slow: Option<u64>,
    },
}

/// Per-thread state of a mode, shared with the collector (atomics only).
pub struct ModeShared {
    /// Execution time of the compute kernel (jitter, audio).
    pub exec: Option<LiveHistogram>,
    pub exec_iterations: AtomicU64,
    pub exec_calibrated_ns: AtomicU64,
    pub audio: Option<AudioShared>,
    /// Wakeup: signals the receiver never saw on their own (two or more arrived while it
    /// was not running; it measured the newest). Counted as missed periods.
    pub coalesced: AtomicU64,
}

impl ModeShared {
    pub(crate) fn new(mode: &Mode, layout: Layout, period_ns: u64) -> ModeShared {
        let (exec, audio) = match mode {
            Mode::Timer | Mode::Wakeup { .. } => (false, None),
            Mode::Jitter { .. } => (true, None),
            Mode::Audio { buffers, .. } => (true, Some(AudioShared::new(period_ns, *buffers))),
        };
        ModeShared {
            exec: exec.then(|| LiveHistogram::new(layout)),
            exec_iterations: AtomicU64::new(0),
            exec_calibrated_ns: AtomicU64::new(0),
            audio,
            coalesced: AtomicU64::new(0),
        }
    }
}

/// An [`AudioTally`] published through atomics (single writer: the measuring thread).
pub struct AudioShared {
    period_ns: u64,
    buffers: u32,
    fragments: AtomicU64,
    xruns: AtomicU64,
    worst: AtomicU64,
    late: [AtomicU64; VERDICT_BUFFERS],
}

impl AudioShared {
    fn new(period_ns: u64, buffers: u32) -> AudioShared {
        AudioShared {
            period_ns,
            buffers,
            fragments: AtomicU64::new(0),
            xruns: AtomicU64::new(0),
            worst: AtomicU64::new(0),
            late: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    #[inline(always)]
    fn publish(&self, t: &AudioTally) {
        for (a, v) in self.late.iter().zip(t.late_by_buffers) {
            a.store(v, Relaxed);
        }
        self.worst.store(t.worst_response_ns, Relaxed);
        self.xruns.store(t.xruns, Relaxed);
        self.fragments.store(t.fragments, Release);
    }

    /// The tally as last published.
    pub fn tally(&self) -> AudioTally {
        let mut t = AudioTally::new(self.period_ns, self.buffers);
        t.fragments = self.fragments.load(Acquire);
        t.xruns = self.xruns.load(Relaxed);
        t.worst_response_ns = self.worst.load(Relaxed);
        for (v, a) in t.late_by_buffers.iter_mut().zip(&self.late) {
            *v = a.load(Relaxed);
        }
        t
    }
}

// ---------------------------------------------------------------------------------------
// The compute kernel

const FIR_TAPS: usize = 32;
const FIR_BLOCK: usize = 64;

/// A small FIR filter over buffers allocated before the run: one iteration filters a block
/// of 64 samples with 32 taps (2048 multiply-adds). The work is the same every time, so any
/// variation of its execution time comes from the machine (caches, interrupts, preemption,
/// the hypervisor), not from the data.
pub struct Kernel {
    input: Box<[f32]>,
    taps: [f32; FIR_TAPS],
    out: Box<[f32]>,
}

impl Default for Kernel {
    fn default() -> Self {
        Self::new()
    }
}

impl Kernel {
    pub fn new() -> Kernel {
        let input: Box<[f32]> = (0..FIR_BLOCK + FIR_TAPS)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
            .collect();
        let mut taps = [0f32; FIR_TAPS];
        for (i, t) in taps.iter_mut().enumerate() {
            *t = 1.0 / (1.0 + i as f32);
        }
        Kernel {
            input,
            taps,
            out: vec![0f32; FIR_BLOCK].into_boxed_slice(),
        }
    }

    /// Run `n` iterations.
    #[inline(never)]
    pub fn run(&mut self, n: u64) {
        for _ in 0..n {
            let input = std::hint::black_box(&self.input[..]);
            for i in 0..FIR_BLOCK {
                let mut acc = 0f32;
                for j in 0..FIR_TAPS {
                    acc += input[i + j] * self.taps[j];
                }
                self.out[i] = acc;
            }
            std::hint::black_box(&mut self.out[..]);
        }
    }

    fn time(&mut self, n: u64) -> u64 {
        let t = rt::now_ns();
        self.run(n);
        rt::now_ns() - t
    }

    fn min_time(&mut self, n: u64, tries: u32) -> u64 {
        (0..tries).map(|_| self.time(n)).min().unwrap_or(0)
    }

    /// Iterations such that the fastest of a few runs takes about `work_ns` on this CPU
    /// (call after pinning and setting the policy, before the run). Returns the iteration
    /// count and that fastest time.
    pub fn calibrate(&mut self, work_ns: u64) -> (u64, u64) {
        let mut n = 1u64;
        while n < 1 << 30 && self.time(n) < 50_000.min(work_ns.max(1)) {
            n *= 2;
        }
        let per = self.min_time(n, 5).max(1) as f64 / n as f64;
        let mut iters = ((work_ns as f64 / per).round() as u64).max(1);
        // One proportional correction against the real cost at that size.
        let m = self.min_time(iters, 5).max(1);
        iters = ((iters as f64 * work_ns as f64 / m as f64).round() as u64).max(1);
        let m = self.min_time(iters, 5);
        (iters, m)
    }
}

/// Where the work's start and end times come from.
pub(crate) trait Exec {
    /// Run one period's work (`slow`: twice as much); return (start, end) ns.
    fn exec(&mut self, woke: u64, slow: bool) -> (u64, u64);
}

/// The real kernel, timed with CLOCK_MONOTONIC before and after.
pub(crate) struct RealExec {
    pub kernel: Kernel,
    pub iterations: u64,
}

impl Exec for RealExec {
    #[inline(always)]
    fn exec(&mut self, _woke: u64, slow: bool) -> (u64, u64) {
        let n = if slow {
            self.iterations * 2
        } else {
            self.iterations
        };
        let s = rt::now_ns();
        self.kernel.run(n);
        (s, rt::now_ns())
    }
}

/// A simulated kernel: `work_ns` plus a small seeded jitter and rare interruptions.
pub(crate) struct SimExec {
    pub rng: SplitMix64,
    pub work_ns: u64,
}

impl Exec for SimExec {
    #[inline(always)]
    fn exec(&mut self, woke: u64, slow: bool) -> (u64, u64) {
        let base = if slow { 2 * self.work_ns } else { self.work_ns };
        let u = self.rng.next_f64();
        let noise = -(1.0 - self.rng.next_f64()).ln() * self.work_ns as f64 * 0.01;
        let extra = if u < 1e-3 {
            self.work_ns as f64 * 0.3
        } else {
            0.0
        };
        (woke, woke + base + (noise + extra) as u64)
    }
}

/// What the loop does after each wake-up.
pub(crate) trait Work {
    const ACTIVE: bool;
    fn run(&mut self, k: u64, intended: u64, woke: u64, sh: &ThreadShared);
}

/// Nothing (timer, wakeup).
pub(crate) struct NoWork;
impl Work for NoWork {
    const ACTIVE: bool = false;
    #[inline(always)]
    fn run(&mut self, _: u64, _: u64, _: u64, _: &ThreadShared) {}
}

/// The jitter/audio work: run the kernel, record its execution time, tally the deadline.
pub(crate) struct PeriodWork<E: Exec> {
    pub exec: E,
    pub inject_slow: Option<u64>,
    pub tally: Option<AudioTally>,
}

impl<E: Exec> Work for PeriodWork<E> {
    const ACTIVE: bool = true;
    #[inline(always)]
    fn run(&mut self, k: u64, intended: u64, woke: u64, sh: &ThreadShared) {
        let (s, e) = self.exec.exec(woke, self.inject_slow == Some(k));
        if let Some(h) = &sh.mode.exec {
            h.record(e.saturating_sub(s));
        }
        if let (Some(t), Some(a)) = (self.tally.as_mut(), &sh.mode.audio) {
            // Response time of this fragment: finished − nominal start.
            t.record(e.saturating_sub(intended));
            a.publish(t);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Wakeup pairs

/// What a sender and its receiver share. `seq` counts signals (the futex word); `stamp` is
/// the sender's CLOCK_MONOTONIC time just before the signal whose number is in `seq`.
pub struct Channel {
    ipc: Ipc,
    seq: AtomicU32,
    stamp: AtomicU64,
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
            stamp: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            fds,
            cv: (Mutex::new(0), Condvar::new()),
        })
    }

    /// Sender: publish `stamp` and wake the receiver through the IPC.
    #[inline(always)]
    fn signal(&self, stamp: u64) {
        self.stamp.store(stamp, Relaxed);
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
pub(crate) struct WakeupClock<'a> {
    pub ch: &'a Channel,
    pub last: u32,
    /// Where coalesced signals are counted (None in unit tests).
    pub coalesced: Option<&'a AtomicU64>,
}

impl WakeupClock<'_> {
    /// Block until the next signal; `(sender's stamp, now)`, or None once the sender stopped.
    #[inline(always)]
    pub(crate) fn next(&mut self) -> Option<(u64, u64)> {
        let w = self.ch.wait(self.last);
        let now = rt::now_ns();
        let skipped = w.wrapping_sub(self.last).wrapping_sub(1) as u64;
        self.last = w;
        if self.ch.stop.load(Acquire) {
            return None;
        }
        if skipped > 0 {
            if let Some(c) = self.coalesced {
                c.store(c.load(Relaxed) + skipped, Relaxed);
            }
        }
        Some((self.ch.stamp.load(Relaxed), now))
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
            let k = (now - next) / interval + 1;
            sh.missed.store(sh.missed.load(Relaxed) + k, Relaxed);
            next += k * interval;
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
    use std::sync::Arc;

    #[test]
    fn channel_delivers_every_ipc_in_order_and_stops() {
        for ipc in [
            Ipc::Futex,
            Ipc::Pipe,
            Ipc::Eventfd,
            Ipc::Condvar,
            Ipc::Mqueue,
        ] {
            let ch = Arc::new(Channel::new(ipc).unwrap());
            let ack = Arc::new(AtomicU64::new(0));
            let rx = {
                let (ch, ack) = (ch.clone(), ack.clone());
                std::thread::spawn(move || {
                    let mut c = WakeupClock {
                        ch: &ch,
                        last: 0,
                        coalesced: None,
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

    #[test]
    fn kernel_calibrates_near_the_target() {
        let mut k = Kernel::new();
        let (iters, min) = k.calibrate(200_000);
        assert!(iters >= 1);
        // On a busy machine the minimum is still close; allow a wide band, as the test
        // asserts sanity, not speed.
        assert!(
            (100_000..=400_000).contains(&min),
            "{iters} iterations took {min} ns"
        );
    }
}
