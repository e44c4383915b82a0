//! Machine inventory readers: fill a [`latlab_core::inventory::Inventory`] from `/proc` and
//! `/sys` below an injectable root, so tests and `latlab check --root DIR` read fixture trees.
//!
//! Reading never fails as a whole: a file that exists but cannot be read (permission, I/O
//! error), or a file every kernel has that is missing, goes into `Inventory::unreadable`;
//! optional files (no cpufreq in a VM, no `/sys/kernel/realtime` on a non-RT kernel) are
//! simply absent; a value that does not parse goes into `Inventory::invalid` with what was
//! expected. Nothing here writes: in particular `/dev/cpu_dma_latency` is never opened
//! (opening it adds a PM QoS request); its holders are found through `/proc/*/fd`.
//!
//! ```no_run
//! let inv = latlab_sys::inventory::collect(std::path::Path::new("/"));
//! let machine = latlab_sys::inventory::machine(&inv);
//! println!("{:?}", machine.preemption);
//! ```

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use latlab_core::inventory::Inventory;
use latlab_core::record::Machine;

mod cpus;
mod host;
mod irqs;
mod kernel;
mod memory;
mod reader;

use reader::Reader;

/// What [`collect_with`] does besides reading files.
#[derive(Debug, Clone)]
pub struct Options {
    /// Sample `/proc/stat` twice this far apart for the current steal time (None: only the
    /// since-boot share, e.g. for fixture trees).
    pub steal_sample: Option<Duration>,
}

impl Options {
    /// Live machines (root `/`) sample steal over a second; other roots do not sample.
    pub fn for_root(root: &Path) -> Options {
        Options {
            steal_sample: (root == Path::new("/")).then(|| Duration::from_secs(1)),
        }
    }
}

/// The inventory of the machine whose `/proc` and `/sys` are below `root` (`/` normally).
pub fn collect(root: &Path) -> Inventory {
    collect_with(root, &Options::for_root(root))
}

pub fn collect_with(root: &Path, opts: &Options) -> Inventory {
    let mut r = Reader {
        root: root.to_path_buf(),
        live: root == Path::new("/"),
        unreadable: BTreeSet::new(),
        invalid: Vec::new(),
    };
    let mut out = Inventory::default();
    r.kernel(&mut out);
    r.preemption(&mut out);
    r.cpus(&mut out);
    r.cpufreq(&mut out);
    r.cpuidle(&mut out);
    r.memory(&mut out);
    r.sched(&mut out);
    r.irqs(&mut out);
    r.processes(&mut out);
    r.virt(&mut out, opts);
    r.firmware(&mut out);
    r.cgroup(&mut out);
    r.tracing(&mut out);
    out.unreadable = r.unreadable.into_iter().collect();
    out.invalid = r.invalid;
    out
}

/// The basics every run records, from an inventory.
pub fn machine(inv: &Inventory) -> Machine {
    Machine {
        hostname: inv.kernel.hostname.clone(),
        kernel_release: inv.kernel.release.clone(),
        kernel_version: inv.kernel.version.clone(),
        arch: inv.kernel.arch.clone(),
        cpus_online: inv.cpus.online.clone(),
        cpu_model: inv.cpus.model.clone(),
        preemption: inv.preemption.model.clone(),
        cmdline: inv.cmdline.clone(),
        virtualized: inv.virt.hypervisor,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_root_reports_required_files_and_does_not_panic() {
        let d = tempfile::tempdir().unwrap();
        let inv = collect(d.path());
        assert!(
            inv.unreadable.contains(&"/proc/cmdline".to_string()),
            "{:?}",
            inv.unreadable
        );
        assert!(inv
            .unreadable
            .contains(&"/proc/sys/kernel/osrelease".to_string()));
        assert!(
            inv.kernel.arch.is_none(),
            "nothing from the live machine leaks into a fixture"
        );
        assert!(inv.virt.steal_sampled.is_none());
    }
}
