//! What a measuring thread measures: timer wake-ups (cyclictest), thread → thread wake-ups
//! through an IPC (`wakeup`), a calibrated compute kernel each period (`jitter`), and
//! Senoner's audio deadline model (`audio`).
//!
//! **The extension point.** A mode is a variant of [`Mode`] and one arm in each of
//! [`Mode::shared`] (what its threads share with the collector), [`Mode::sender`] (a helper
//! thread per measured CPU, if it needs one) and [`Mode::body`] (its loop: a clock that says
//! when the thread wakes and the work it does after each wake-up, plugged into the one
//! measurement loop of [`crate::hotloop`]). The engine (the `measure` module) only spawns
//! threads. Everything is monomorphised, so the timer mode pays nothing for the others.
//!
//! Hot-path rules hold here too: everything is allocated and touched before the run. In the
//! wakeup mode the IPC's syscalls (futex, pipe read/write, eventfd read/write, the condvar's
//! mutex) *are* the measured mechanism; nothing else is called.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::sync::{Arc, Condvar, Mutex};

use latlab_core::hist::Layout;
use latlab_core::modes::AudioTally;
use latlab_core::sim::{SimParams, SimSource, SplitMix64};

use crate::hotloop::{self, Backend, Body, Clock, NoWork, RealClock, SimClock, Work};
use crate::live::{ModeShared, ThreadShared};
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
    /// time.
    Jitter { work_ns: u64 },
    /// As `Jitter`, and tally the fragment deadlines with `buffers` fragments of one period.
    Audio { work_ns: u64, buffers: u32 },
}

/// A measuring thread, as its mode sees it when building its loop.
pub(crate) struct ThreadEnv<'a> {
    pub cpu: u32,
    pub backend: Backend,
    /// This thread's period (interval + its share of `--distance`).
    pub interval_ns: u64,
    /// Pinned with its policy set (false: set-up failed and the run will not start: build
    /// the loop without calibrating).
    pub ready: bool,
    pub sh: &'a Arc<ThreadShared>,
    /// The channel of the thread's [`Sender`], when the mode has one.
    pub channel: Option<Arc<Channel>>,
}

/// A helper thread a mode runs beside a measured CPU: the sender of a wakeup pair.
pub(crate) struct Sender {
    pub cpu: u32,
    pub priority: u32,
    pub channel: Arc<Channel>,
}

impl Mode {
    /// What each of its threads shares with the collector beyond the latency histogram.
    pub(crate) fn shared(&self, layout: Layout, period_ns: u64) -> ModeShared {
        match self {
            Mode::Timer | Mode::Wakeup { .. } => ModeShared::new(layout, false, None),
            Mode::Jitter { .. } => ModeShared::new(layout, true, None),
            Mode::Audio { buffers, .. } => {
                ModeShared::new(layout, true, Some((period_ns, *buffers)))
            }
        }
    }

    /// The helper thread of the `i`-th measured CPU (`cpu`), if the mode has one.
    pub(crate) fn sender(
        &self,
        backend: Backend,
        i: usize,
        cpu: u32,
    ) -> std::io::Result<Option<Sender>> {
        match (self, backend) {
            (
                Mode::Wakeup {
                    ipc,
                    sender_cpus,
                    sender_priority,
                },
                Backend::Real,
            ) => Ok(Some(Sender {
                cpu: sender_cpus.get(i).copied().unwrap_or(cpu),
                priority: *sender_priority,
                channel: Arc::new(Channel::new(*ipc)?),
            })),
            // The simulated backend draws wake-ups from its generator: no sender.
            _ => Ok(None),
        }
    }

    /// The thread's loop: its clock and its work.
    pub(crate) fn body(&self, env: ThreadEnv) -> Body {
        match self {
            Mode::Timer => with_clock(&env, NoWork),
            Mode::Wakeup { .. } => match &env.channel {
                Some(ch) => hotloop::body(
                    WakeupClock {
                        ch: ch.clone(),
                        last: 0,
                        shared: Some(env.sh.clone()),
                    },
                    NoWork,
                ),
                None => with_clock(&env, NoWork),
            },
            Mode::Jitter { work_ns } => period_work(&env, *work_ns, None),
            Mode::Audio { work_ns, buffers } => {
                let tally = AudioTally::new(env.interval_ns, *buffers);
                period_work(&env, *work_ns, Some(tally))
            }
        }
    }
}

/// `work` after each wake-up of the backend's clock (the timer, or the simulated source).
fn with_clock<W: Work + 'static>(env: &ThreadEnv, work: W) -> Body {
    match env.backend {
        Backend::Real => hotloop::body(RealClock, work),
        Backend::Sim { seed, realtime } => hotloop::body(
            SimClock {
                src: SimSource::new(seed, env.cpu, SimParams::default()),
                realtime,
            },
            work,
        ),
    }
}

/// Jitter and audio: the compute kernel (calibrated here, on the pinned thread with its
/// policy, so it calibrates as it will run) or its simulation, then the timer's clock.
fn period_work(env: &ThreadEnv, work_ns: u64, tally: Option<AudioTally>) -> Body {
    let inject_slow = crate::hooks::slow_iteration();
    match env.backend {
        Backend::Real => {
            let mut kernel = Kernel::new();
            let (iterations, min) = if env.ready {
                kernel.calibrate(work_ns)
            } else {
                (1, 0)
            };
            env.sh.mode.exec_iterations.store(iterations, Relaxed);
            env.sh.mode.exec_calibrated_ns.store(min, Relaxed);
            let exec = RealExec { kernel, iterations };
            with_clock(
                env,
                PeriodWork {
                    exec,
                    inject_slow,
                    tally,
                },
            )
        }
        Backend::Sim { seed, .. } => {
            env.sh.mode.exec_calibrated_ns.store(work_ns, Relaxed);
            let exec = SimExec {
                rng: SplitMix64::new(seed ^ 0x5157_4f52 ^ ((env.cpu as u64) << 32)),
                work_ns,
            };
            with_clock(
                env,
                PeriodWork {
                    exec,
                    inject_slow,
                    tally,
                },
            )
        }
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

/// The jitter/audio work: run the kernel, record its execution time, tally the deadline.
/// `inject_slow`: that period (0-based) does twice the work (a test hook, see [`crate::hooks`]).
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
        let w = self.ch.wait(self.last);
        let now = rt::now_ns();
        let skipped = w.wrapping_sub(self.last).wrapping_sub(1) as u64;
        self.last = w;
        if self.ch.stop.load(Acquire) {
            return None;
        }
        if skipped > 0 {
            if let Some(sh) = &self.shared {
                let c = &sh.mode.coalesced;
                c.store(c.load(Relaxed) + skipped, Relaxed);
            }
        }
        Some((self.ch.stamp.load(Relaxed), now))
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
