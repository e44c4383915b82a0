//! A measurement's claim on its CPUs. Two latlab measurements on one CPU (two FIFO 95
//! sleepers, or a fairness scenario's hogs under a run's sleeper) distort each other, and
//! neither record would say so. So a measuring command writes down its CPUs in a ledger of its
//! own (`<pid>-measuring.json` in the runtime directory, an [`Entry::Measuring`]) before
//! anything is changed, then reads the other live latlab processes' ledgers: another run
//! on any of the same CPUs refuses this one (one line naming it), or with `--force` (and in
//! `latlab cyclictest`, whose command line has no such flag) is a warning in the record.
//! Written before it looks, so of two runs started together at least one sees the other.
//! The claim ends with the command (its ledger is closed on drop); a SIGKILLed run's is
//! ignored (its pid is dead) and removed by `latlab cleanup`.

use anyhow::Context;
use latlab_core::cpulist::format_cpu_list;
use latlab_core::escape::escape;
use latlab_sys::ledger::{measuring_now, runtime_dir, Entry, Ledger, OtherRun};

/// What another live run on the same CPUs does to this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlap {
    /// An error (without `--force`).
    Refuse,
    /// A warning for the record (`--force`, `latlab cyclictest`).
    Warn,
}

/// Held while the command measures; its ledger goes on drop.
pub struct Claim {
    ledger: Option<Ledger>,
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(l) = self.ledger.take() {
            let _ = l.close();
        }
    }
}

/// Claim `cpus` for `command` (`latlab run`, ...), then look for other live runs on any of
/// them: Err naming them (`Overlap::Refuse`), or the warning to record (`Overlap::Warn`).
pub fn claim(
    command: &str,
    cpus: &[u32],
    overlap: Overlap,
) -> anyhow::Result<(Claim, Option<String>)> {
    let mut cpus = cpus.to_vec();
    cpus.sort_unstable();
    cpus.dedup();
    let mut ledger = Ledger::open_part("measuring").context("cannot write latlab's ledger")?;
    ledger
        .add(Entry::Measuring {
            command: command.to_string(),
            cpus: cpus.clone(),
        })
        .context("cannot write latlab's ledger")?;
    let claim = Claim {
        ledger: Some(ledger),
    };
    let others: Vec<OtherRun> = measuring_now(&runtime_dir())
        .into_iter()
        .filter(|o| o.cpus.iter().any(|c| cpus.contains(c)))
        .collect();
    if others.is_empty() {
        return Ok((claim, None));
    }
    let shared: Vec<u32> = cpus
        .iter()
        .copied()
        .filter(|c| others.iter().any(|o| o.cpus.contains(c)))
        .collect();
    let which = format!(
        "{} {}",
        if shared.len() == 1 { "CPU" } else { "CPUs" },
        format_cpu_list(&shared)
    );
    let who = others
        .iter()
        .map(|o| {
            format!(
                "pid {} ({} on CPUs {})",
                o.pid,
                escape(&o.command),
                format_cpu_list(&o.cpus)
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    match overlap {
        Overlap::Refuse => {
            drop(claim);
            anyhow::bail!(
                "{which} already measured by another latlab: {who}; two measurements on one CPU distort each other: wait for it to end, choose other CPUs, or add --force to measure anyway"
            )
        }
        Overlap::Warn => Ok((
            claim,
            Some(format!(
                "{which} also measured by another latlab when this one started: {who}; the two measurements distort each other"
            )),
        )),
    }
}
