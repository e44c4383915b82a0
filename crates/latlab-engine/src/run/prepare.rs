//! A run's first phase: what it needs is checked and taken before anything is written —
//! latlab's own threads kept off the measured CPUs, the CPUs claimed against other latlab
//! runs, the loads resolved, the metrics port bound, the machine probed (root, memory locked,
//! `/dev/cpu_dma_latency` held). Every refusal here leaves nothing behind.

use latlab_sys::rt;

use super::plan::{ModePlan, Plan, SessionPlan};

/// What the first phase took, held until the run ends.
pub(super) struct Prepared {
    pub _claim: Option<crate::claim::Claim>,
    pub loads: Option<crate::loads::LoadSession>,
    pub metrics: Option<std::net::TcpListener>,
    /// `/dev/cpu_dma_latency`, held while the run measures.
    pub dma: Option<rt::DmaLatency>,
    /// For the record, once the session has begun.
    pub warnings: Vec<String>,
}

/// The CPUs the run's threads use: the measured ones and a wake-up mode's senders'.
fn busy_cpus(p: &Plan, mp: &ModePlan) -> Vec<u32> {
    let mut busy = p.cpus.clone();
    if let latlab_sys::modes::Mode::Wakeup { sender_cpus, .. } = &mp.mode {
        busy.extend(sender_cpus);
    }
    busy
}

/// The first phase (see the module documentation); `p.housekeeping` gets the CPUs latlab's
/// own threads were confined to.
pub(super) fn prepare(
    rp: &SessionPlan,
    p: &mut Plan,
    mp: &ModePlan,
    no_measure: bool,
) -> anyhow::Result<Prepared> {
    let on_machine = rp.backend.on_the_machine();
    // What the back end runs beside, for the record (`warnings`).
    let mut warnings = if no_measure {
        Vec::new()
    } else {
        rp.backend.preflight(p, mp)?
    };
    // latlab's own threads, all created from here on, stay off the CPUs it measures (and the
    // senders' CPUs) when there is one to spare; the measuring threads pin themselves.
    if on_machine {
        p.housekeeping = rt::confine_calling_thread(&busy_cpus(p, mp)).map_err(|e| {
            anyhow::anyhow!("cannot keep latlab's own threads off the measured CPUs: {e}")
        })?;
    }
    // Another latlab measuring any of these CPUs now: refused (or, with --force, a warning),
    // before anything is changed or written. Held until the run has ended.
    let claim = if on_machine && !no_measure {
        let overlap = if rp.force {
            crate::claim::Overlap::Warn
        } else {
            crate::claim::Overlap::Refuse
        };
        let (c, w) = crate::claim::claim(&rp.command, &busy_cpus(p, mp), overlap)?;
        warnings.extend(w);
        Some(c)
    } else {
        None
    };
    let loads = if rp.loads.is_empty() {
        None
    } else {
        Some(crate::loads::LoadSession::prepare(
            &rp.loads,
            &rp.load_options,
        )?)
    };
    // Before anything is changed or measured: a port in use is an error now.
    let metrics = match &rp.metrics {
        Some((addr, any)) => Some(crate::metrics::bind(addr, *any)?),
        None => None,
    };
    // Nothing to protect without measuring threads: no mlockall, no /dev/cpu_dma_latency
    // hold (the profile sees the machine's own C-states).
    let dma = if no_measure || !on_machine {
        None
    } else {
        probe(p, rp.dma_latency_us, &mut warnings)?
    };
    Ok(Prepared {
        _claim: claim,
        loads,
        metrics,
        dma,
        warnings,
    })
}

/// Probe what this machine allows before anything is changed, and hold what the measurement
/// needs (memory locked, `/dev/cpu_dma_latency` at `--dma-latency`, 0 by default); warnings for what it cannot have.
fn probe(
    p: &Plan,
    dma_us: Option<i32>,
    warnings: &mut Vec<String>,
) -> anyhow::Result<Option<rt::DmaLatency>> {
    if p.policy.is_rt() && !rt::can_use_rt() {
        bail!(
            "--backend real with --policy {} needs root (or CAP_SYS_NICE): run as root, or use --backend sim",
            p.policy.as_str()
        );
    }
    if let (Some(rt_runtime), true) = (rt::rt_throttling_us(), p.policy.is_rt()) {
        warnings.push(format!(
            "RT throttling is on (sched_rt_runtime_us={rt_runtime}): real-time tasks that use more than that share of a second are stopped for the rest of it; \
             latlab's sleepers do not, but RT loads may (disable: echo -1 > /proc/sys/kernel/sched_rt_runtime_us)"
        ));
    }
    // The recorder keeps each spike's pages until the run ends (and reads whole rings): a
    // heap that starts that large and is kept allocates nothing from the kernel meanwhile.
    // Growing it during the run populated fresh memory inside `brk` on a measured CPU: 6
    // calls in 15 s under hackbench, up to 46 ms each, and this VM stalls a vCPU for up to
    // milliseconds on the first touch of guest memory (docs/performance.md).
    if let Some(t) = &p.trace {
        let ring = (t.buffer_kb as usize * 1024).saturating_mul(p.cpus.len());
        let want = ring
            .saturating_mul(4)
            .saturating_add(64 << 20)
            .saturating_add(crate::recorder::defer_budget());
        let cap = rt::mem_available().map_or(want, |m| (m / 8) as usize);
        rt::keep_heap(want.min(cap));
    }
    if let Err(e) = rt::lock_memory() {
        if p.policy.is_rt() {
            bail!("mlockall failed ({e}): run as root, or use --backend sim");
        }
        warnings.push(format!(
            "mlockall failed ({e}): page faults may add latency"
        ));
    }
    // `--dma-latency off`: the CPUs' idle states as they are.
    let Some(dma_us) = dma_us else {
        return Ok(None);
    };
    Ok(match rt::DmaLatency::hold(dma_us) {
        Ok(d) => Some(d),
        Err(e) => {
            warnings.push(format!(
                "cannot hold /dev/cpu_dma_latency at {dma_us} ({e}): deep C-states may add exit latency"
            ));
            None
        }
    })
}
