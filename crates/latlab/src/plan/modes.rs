//! `latlab run --mode wakeup|jitter|audio|noise`: validation of the mode flags (before anything
//! starts) and what each mode adds to the run record.

use anyhow::bail;
use latlab_core::modes::{ModeParams, AUDIO_PERIOD_NS};
use latlab_core::units::Human;
use latlab_sys::modes::{Ipc, Mode};

use crate::cli::RunArgs;
use crate::cli::{IpcKind, RunMode};
use latlab_engine::run::plan::{ModePlan, Plan};

/// Validate the mode flags against the mode and the plan; adjusts `p.interval_ns` for audio
/// (whose period is `--period`).
pub fn plan_mode(a: &RunArgs, p: &mut Plan, online: &[u32]) -> anyhow::Result<ModePlan> {
    let m = &a.mode;
    let only = |flag: &str, given: bool, modes: &str| -> anyhow::Result<()> {
        if given {
            bail!("{flag}: only with --mode {modes}; remove it or add --mode {modes}");
        }
        Ok(())
    };
    let is = |x: RunMode| m.mode == x;
    only("--ipc", m.ipc.is_some() && !is(RunMode::Wakeup), "wakeup")?;
    only("--cross-cpu", m.cross_cpu && !is(RunMode::Wakeup), "wakeup")?;
    only(
        "--work",
        m.work.is_some() && !(is(RunMode::Jitter) || is(RunMode::Audio)),
        "jitter or audio",
    )?;
    only(
        "--period",
        m.period.is_some() && !is(RunMode::Audio),
        "audio",
    )?;
    only(
        "--buffers",
        m.buffers.is_some() && !is(RunMode::Audio),
        "audio",
    )?;
    only(
        "--noise-threshold",
        m.noise_threshold.is_some() && !is(RunMode::Noise),
        "noise",
    )?;
    let work = |default: u64, period: u64| -> anyhow::Result<u64> {
        let w = m.work.map_or(default, |w| w.0);
        if w == 0 {
            bail!("--work: must be more than 0 (e.g. 200us)");
        }
        if w >= period {
            bail!(
                "--work {}: must be less than the period ({}), or no time is left to sleep; use a smaller --work or a longer period",
                Human(w),
                Human(period)
            );
        }
        Ok(w)
    };
    Ok(match m.mode {
        RunMode::Timer => ModePlan {
            mode: Mode::Timer,
            name: "timer",
            params: None,
            pairs: vec![],
        },
        RunMode::Wakeup => {
            let ipc = match m.ipc.unwrap_or(IpcKind::Futex) {
                IpcKind::Futex => Ipc::Futex,
                IpcKind::Pipe => Ipc::Pipe,
                IpcKind::Eventfd => Ipc::Eventfd,
                IpcKind::Condvar => Ipc::Condvar,
                IpcKind::Mqueue => Ipc::Mqueue,
            };
            if m.cross_cpu && online.len() < 2 {
                bail!(
                    "--cross-cpu: this machine has one online CPU; the sender needs another one (drop --cross-cpu)"
                );
            }
            // The sender one priority below the receiver, as ptsematest: the receiver
            // preempts it as soon as it is woken.
            let sprio = if p.policy.is_rt() {
                p.priority.saturating_sub(1).max(1)
            } else {
                0
            };
            let sender_cpus: Vec<u32> = p
                .cpus
                .iter()
                .map(|&c| {
                    if m.cross_cpu {
                        let i = online.iter().position(|&o| o == c).unwrap_or(0);
                        online[(i + 1) % online.len()]
                    } else {
                        c
                    }
                })
                .collect();
            let pol = p.policy.as_str();
            let pairs = p
                .cpus
                .iter()
                .zip(&sender_cpus)
                .map(|(c, s)| {
                    format!(
                        "{}: sender CPU {s} ({pol} {sprio}) → receiver CPU {c} ({pol} {})",
                        ipc.as_str(),
                        p.priority
                    )
                })
                .collect();
            ModePlan {
                mode: Mode::Wakeup {
                    ipc,
                    sender_cpus,
                    sender_priority: sprio,
                },
                name: "wakeup",
                params: Some(ModeParams {
                    ipc: Some(ipc.as_str().into()),
                    cross_cpu: m.cross_cpu,
                    sender_priority: Some(sprio),
                    ..ModeParams::default()
                }),
                pairs,
            }
        }
        RunMode::Jitter => {
            let work_ns = work(200_000.min(p.interval_ns / 2), p.interval_ns)?;
            ModePlan {
                mode: Mode::Jitter { work_ns },
                name: "jitter",
                params: Some(ModeParams {
                    work_ns: Some(work_ns),
                    ..ModeParams::default()
                }),
                pairs: vec![],
            }
        }
        RunMode::Audio => {
            if p.interval_given {
                bail!("--interval: --mode audio wakes once per --period; use --period instead");
            }
            let period = m.period.map_or(AUDIO_PERIOD_NS, |p| p.0);
            if period < 10_000 {
                bail!("--period {}: below the 10us minimum", Human(period));
            }
            let buffers = m.buffers.unwrap_or(2);
            if buffers == 0 {
                bail!("--buffers 0: an audio ring needs at least 1 fragment (2 is usual)");
            }
            let work_ns = work(period / 4, period)?;
            p.interval_ns = period;
            ModePlan {
                mode: Mode::Audio { work_ns, buffers },
                name: "audio",
                params: Some(ModeParams {
                    work_ns: Some(work_ns),
                    period_ns: Some(period),
                    buffers: Some(buffers),
                    ..ModeParams::default()
                }),
                pairs: vec![],
            }
        }
        RunMode::Noise => noise_plan(a, p)?,
    })
}

/// `--mode noise`: a spinning thread on the real back end or the kernel's osnoise tracer,
/// without periods (either traced with `--trace-threshold`).
fn noise_plan(a: &RunArgs, p: &Plan) -> anyhow::Result<ModePlan> {
    let m = &a.mode;
    if !["real", "osnoise", "hwnoise"].contains(&a.backend.as_str()) {
        bail!(
            "--mode noise: measured by a thread spinning on this machine's clock (--backend real, latlab's; --backend osnoise, the kernel's; --backend hwnoise, the kernel's with interrupts disabled); the {} back end has no noise to measure",
            a.backend
        );
    }
    if p.interval_given {
        bail!("--interval: --mode noise spins without periods; remove --interval (--noise-threshold sets what counts as noise)");
    }
    let threshold_ns = m.noise_threshold.map_or(1_000, |t| t.0);
    if threshold_ns == 0 {
        bail!("--noise-threshold: must be more than 0 (e.g. 1us)");
    }
    // A thread that never sleeps, above every ordinary task: only RT throttling
    // leaves the CPU to the rest of the machine.
    if p.policy.is_rt() && latlab_sys::rt::rt_throttling_us().is_none() {
        bail!(
            "--mode noise --policy {}: RT throttling is off (kernel.sched_rt_runtime_us = -1), so a spinning real-time thread would starve everything else on its CPUs; use --policy other, or turn throttling on (sysctl kernel.sched_rt_runtime_us=950000)",
            p.policy.as_str()
        );
    }
    // On PREEMPT_RT the CPU's timers and softirqs run in FIFO 1 threads (ktimers/N,
    // ksoftirqd/N) that a spinning real-time thread starves (the kernel lab's 6.12-rt hung
    // with the osnoise tracer's threads at FIFO 50, as with `rtla osnoise -P f:50`).
    if p.policy.is_rt() && latlab_sys::rt::kernel_is_realtime() {
        bail!(
            "--mode noise --policy {}: on this PREEMPT_RT kernel a spinning real-time thread starves its CPU's timer and softirq threads (ktimers, ksoftirqd: FIFO 1) and can hang the machine; leave --policy out (other, as rtla osnoise and oslat run)",
            p.policy.as_str()
        );
    }
    Ok(ModePlan {
        mode: Mode::Noise { threshold_ns },
        name: "noise",
        params: Some(ModeParams {
            noise_threshold_ns: Some(threshold_ns),
            ..ModeParams::default()
        }),
        pairs: vec![],
    })
}
