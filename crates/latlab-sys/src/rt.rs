//! Real-time thread setup: affinity, scheduling policy, memory locking, signal masks, and the
//! clock calls of the hot path. A small unsafe layer over libc (neither rustix nor nix wraps
//! sched_setscheduler).

use std::io;

/// Scheduling policy of a measurement thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Fifo,
    Rr,
    Other,
}

impl Policy {
    pub fn as_str(&self) -> &'static str {
        match self {
            Policy::Fifo => "fifo",
            Policy::Rr => "rr",
            Policy::Other => "other",
        }
    }
    pub(crate) fn raw(&self) -> libc::c_int {
        match self {
            Policy::Fifo => libc::SCHED_FIFO,
            Policy::Rr => libc::SCHED_RR,
            Policy::Other => libc::SCHED_OTHER,
        }
    }
    pub fn is_rt(&self) -> bool {
        !matches!(self, Policy::Other)
    }
}

/// CLOCK_MONOTONIC now, in ns (vDSO: no syscall on most machines).
#[inline(always)]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleep until CLOCK_MONOTONIC reaches `t` ns (absolute: no drift). Retries on EINTR.
#[inline(always)]
pub fn sleep_until(t: u64) {
    let ts = libc::timespec {
        tv_sec: (t / 1_000_000_000) as libc::time_t,
        tv_nsec: (t % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: ts is valid; no remaining-time pointer with TIMER_ABSTIME.
        let r = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if r != libc::EINTR {
            return;
        }
    }
}

/// Pin the calling thread to one CPU.
pub fn pin_to_cpu(cpu: u32) -> io::Result<()> {
    set_affinity(&[cpu])
}

/// The CPUs the process could run on before latlab confined its own threads
/// ([`set_affinity`]): taken at the first call, which [`confine_calling_thread`] makes before
/// it narrows anything. Loads started later get this set back.
pub fn initial_cpus() -> Vec<u32> {
    static INITIAL: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();
    INITIAL
        .get_or_init(|| allowed_cpus().unwrap_or_default())
        .clone()
}

/// uname(2): the system's name, node name, release, version and machine (empty strings if
/// it fails).
pub fn uname() -> [String; 5] {
    // SAFETY: utsname is plain data, filled by the kernel.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return Default::default();
    }
    let f = |a: &[libc::c_char]| {
        let b: Vec<u8> = a
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&b).into_owned()
    };
    [
        f(&u.sysname),
        f(&u.nodename),
        f(&u.release),
        f(&u.version),
        f(&u.machine),
    ]
}

/// Set the calling thread's CPUs (threads it creates later inherit them).
pub fn set_affinity(cpus: &[u32]) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET indexes within it (checked).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            if cpu as usize >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            libc::CPU_SET(cpu as usize, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Confine the calling thread (and every thread it creates afterwards) to the CPUs it may
/// use that are not in `busy`: latlab's own threads (collector, recorder re-arm, load
/// supervisor, metrics, profile reader) then stay off the measured CPUs, as rtla's
/// housekeeping CPUs and cyclictest's `--mainaffinity` do. Returns the CPUs, or an empty list
/// when every CPU is busy or none is (nothing changed).
pub fn confine_calling_thread(busy: &[u32]) -> io::Result<Vec<u32>> {
    if busy.is_empty() {
        return Ok(Vec::new());
    }
    let free: Vec<u32> = initial_cpus()
        .into_iter()
        .filter(|c| !busy.contains(c))
        .collect();
    if !free.is_empty() {
        set_affinity(&free)?;
    }
    Ok(free)
}

/// The online CPUs this process may run on (all online ones when its affinity cannot be
/// read), in increasing order.
pub fn usable_cpus() -> io::Result<Vec<u32>> {
    let online = online_cpus()?;
    let allowed = allowed_cpus().unwrap_or_else(|_| online.clone());
    Ok(online.into_iter().filter(|c| allowed.contains(c)).collect())
}

/// CPUs this process may run on.
pub fn allowed_cpus() -> io::Result<Vec<u32>> {
    // SAFETY: as above.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((0..8 * std::mem::size_of::<libc::cpu_set_t>())
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .map(|c| c as u32)
            .collect())
    }
}

/// The online CPUs, from `/sys/devices/system/cpu/online` (`0-3,6`).
pub fn online_cpus() -> io::Result<Vec<u32>> {
    const PATH: &str = "/sys/devices/system/cpu/online";
    let s = std::fs::read_to_string(PATH)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot read {PATH}: {e}")))?;
    latlab_core::cpulist::parse_cpu_list(&s)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{PATH}: {e}")))
}

/// Set the calling thread's policy and priority, then read them back to verify (mctest's
/// bug: a policy set on attributes without PTHREAD_EXPLICIT_SCHED is silently ignored).
pub fn set_policy(policy: Policy, priority: u32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: if policy.is_rt() { priority as i32 } else { 0 },
    };
    // SAFETY: pid 0 = the calling thread; param is valid.
    if unsafe { libc::sched_setscheduler(0, policy.raw(), &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    let got = unsafe { libc::sched_getscheduler(0) };
    if got != policy.raw() {
        return Err(io::Error::other(format!(
            "scheduler policy is {got} after setting {}",
            policy.as_str()
        )));
    }
    Ok(())
}

/// Keep the heap (glibc): one arena, no block mapped on its own, nothing trimmed, growth in
/// steps of 4 MiB; then allocate, touch and free `reserve` bytes, so it starts that
/// large. Under `mlockall(MCL_FUTURE)` every new mapping is populated and locked inside the
/// call that makes it (`brk`, `mmap`, a thread arena's `mprotect`), on whatever CPU the
/// allocating thread runs: the recorder's collector keeps megabytes of pages per spike until
/// the run ends, and grew the heap 6 times in 15 s under hackbench (`brk` of 7.7 ms median,
/// docs/performance.md). With the heap kept, memory freed is reused, not returned: the advice
/// of the Linux RT wiki for programs that lock their memory. Call before [`lock_memory`] and
/// before threads start.
pub fn keep_heap(reserve: usize) {
    // SAFETY: mallopt takes plain integers; the reserve is an ordinary allocation.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_MAX, 0);
        libc::mallopt(libc::M_TRIM_THRESHOLD, -1);
        libc::mallopt(libc::M_TOP_PAD, 4 << 20);
    }
    if reserve > 0 {
        let v = vec![1u8; reserve];
        std::hint::black_box(&v);
    }
}

/// RT throttling (`/proc/sys/kernel/sched_rt_runtime_us`): the runtime in µs per second that
/// real-time tasks may use when it is on, None when it is off (`-1`) or cannot be read.
pub fn rt_throttling_us() -> Option<String> {
    let s = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").ok()?;
    let s = s.trim();
    (s != "-1").then(|| s.to_string())
}

/// The kernel's release (`/proc/sys/kernel/osrelease`), None when unreadable.
pub fn kernel_release() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_string())
}

/// `MemAvailable` of /proc/meminfo in bytes (None when unreadable).
pub fn mem_available() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    latlab_core::inventory::meminfo_kb(&s, "MemAvailable").map(|kb| kb * 1024)
}

/// Lock all current and future memory: no page fault on the hot path.
pub fn lock_memory() -> io::Result<()> {
    // SAFETY: plain syscall.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Block every signal in the calling thread, so they go to the main thread and never
/// interrupt a measurement.
pub fn block_signals() {
    // SAFETY: set is initialised by sigfillset before use.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Touch `bytes` of stack so the pages exist before the loop (locked by mlockall).
#[inline(never)]
pub fn prefault_stack(bytes: usize) {
    const CHUNK: usize = 4096;
    fn touch(n: usize) {
        let mut buf = [0u8; CHUNK];
        // SAFETY: volatile write into our own stack buffer.
        unsafe { std::ptr::write_volatile(buf.as_mut_ptr(), 1) };
        std::hint::black_box(&buf);
        if n > 1 {
            touch(n - 1);
        }
    }
    touch(bytes / CHUNK);
}

/// Kernel thread id of the caller.
pub fn gettid() -> i64 {
    // SAFETY: plain syscall.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

/// Effective root, or CAP_SYS_NICE in the effective set.
pub fn can_use_rt() -> bool {
    // SAFETY: plain syscall.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    has_capability(23) // CAP_SYS_NICE
}

fn has_capability(bit: u32) -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << bit) != 0)
}

/// Holds /dev/cpu_dma_latency at a value while alive (the PM QoS request ends on close).
pub struct DmaLatency(#[allow(dead_code)] std::fs::File);

impl DmaLatency {
    pub fn hold(us: i32) -> io::Result<DmaLatency> {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/cpu_dma_latency")?;
        f.write_all(&us.to_ne_bytes())?;
        Ok(DmaLatency(f))
    }
}

/// The NUMA node of a CPU (`/sys/devices/system/cpu/cpuN/nodeK`), 0 when not known
/// (cyclictest's JSON names it per thread).
pub fn numa_node(cpu: u32) -> u32 {
    std::fs::read_dir(format!("/sys/devices/system/cpu/cpu{cpu}"))
        .into_iter()
        .flatten()
        .flatten()
        .find_map(|e| e.file_name().to_str()?.strip_prefix("node")?.parse().ok())
        .unwrap_or(0)
}

/// `/proc/loadavg` as the kernel writes it (empty if unreadable): cyclictest's live header
/// shows it.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default()
}

/// The kernel says it is PREEMPT_RT (`/sys/kernel/realtime` exists), as cyclictest reads it.
pub fn kernel_is_realtime() -> bool {
    std::path::Path::new("/sys/kernel/realtime").exists()
}
