//! The one tracefs set-up: the flight recorder's instances, the profiler's and `bench
//! analyze`'s capture all come from here. tracefs is found or mounted (the mount in the ledger
//! first), each instance is created and configured by [`latlab_sys::tracefs`] (its ledger
//! entry first; events, buffer size, clock, overwrite, the stop trigger, as its
//! [`InstanceSpec`] says; tracing off), and everything is removed on every path:
//! [`Instances::remove`], Drop (an error or a panic), or the ledger's undo after a SIGKILL
//! (`latlab cleanup`). Nothing else in latlab mounts tracefs or makes an instance.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use latlab_sys::ledger::{self, EntryId, Ledger};
use latlab_sys::tracefs::{self, InstanceSpec, RecorderConfig, TraceError};

/// One tracefs instance (`instances/latlab-<pid>…`), configured, as latlab-sys makes it.
pub type Instance = tracefs::Recorder;

/// This process's tracefs instances and the mount they live on.
pub struct Instances {
    root: PathBuf,
    /// The ledger entry of the mount, when this set-up mounted tracefs.
    mounted: Option<EntryId>,
    ledger: Arc<Mutex<Ledger>>,
    list: Vec<Instance>,
}

impl Instances {
    /// Where tracefs is: `LATLAB_TRACEFS` if set, else `/sys/kernel/tracing`.
    pub fn default_root() -> PathBuf {
        std::env::var_os("LATLAB_TRACEFS")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(tracefs::DEFAULT_ROOT))
    }

    /// tracefs at `root`, mounted there when it is not (its ledger entry first). No instance
    /// yet.
    pub fn open(root: &Path, ledger: Arc<Mutex<Ledger>>) -> Result<Instances, TraceError> {
        let t = tracefs::ensure_mounted(root, &mut lock(&ledger))?;
        Ok(Instances {
            root: t.root,
            mounted: t.mounted,
            ledger,
            list: Vec::new(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// True when this set-up mounted tracefs (and unmounts it when it is removed).
    pub fn mounted(&self) -> bool {
        self.mounted.is_some()
    }

    /// Create and configure one more instance, named `latlab-<pid>` (`suffix` empty) or
    /// `latlab-<pid>-<suffix>`, recording what `spec` says in `buffer_kb` per CPU, tracing
    /// off. On error nothing of it is left (instance or ledger entry).
    pub fn create(
        &mut self,
        suffix: &str,
        buffer_kb: u64,
        spec: &InstanceSpec,
    ) -> Result<&mut Instance, TraceError> {
        let name = match suffix {
            "" => format!("latlab-{}", std::process::id()),
            s => format!("latlab-{}-{s}", std::process::id()),
        };
        let cfg = RecorderConfig { name, buffer_kb };
        let i = Instance::create_with(&self.root, &cfg, spec, &mut lock(&self.ledger))?;
        self.list.push(i);
        Ok(self.list.last_mut().expect("just pushed"))
    }

    /// The instances, in the order they were created.
    pub fn all(&self) -> &[Instance] {
        &self.list
    }

    pub fn get_mut(&mut self, i: usize) -> Option<&mut Instance> {
        self.list.get_mut(i)
    }

    /// Stop and remove every instance and forget their ledger entries, then unmount tracefs
    /// if this set-up mounted it. Every instance is tried; the first error is returned. Done
    /// once: later calls (and Drop) find nothing to remove.
    pub fn remove(&mut self) -> Result<(), TraceError> {
        let mut first = Ok(());
        for i in std::mem::take(&mut self.list) {
            let _ = i.stop();
            let r = i.remove(&mut lock(&self.ledger));
            if first.is_ok() {
                first = r;
            }
        }
        if let Some(id) = self.mounted.take() {
            let _ = ledger::undo(&ledger::Entry::TracefsMount {
                path: self.root.clone(),
            });
            let _ = lock(&self.ledger).forget(id);
        }
        first
    }
}

impl Drop for Instances {
    /// The error and panic paths: nothing left behind.
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

/// The ledger, even after a panic of another holder (its entries are what undoes the machine).
fn lock(l: &Mutex<Ledger>) -> MutexGuard<'_, Ledger> {
    l.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instances_left() -> Vec<String> {
        let me = format!("latlab-{}", std::process::id());
        std::fs::read_dir(Path::new(tracefs::DEFAULT_ROOT).join("instances"))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n == &me || n.starts_with(&format!("{me}-")))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// No tracefs there: the error says so, and nothing is in the ledger.
    #[test]
    fn no_tracefs_is_an_error_that_says_so() {
        let t = tempfile::tempdir().unwrap();
        let l = Arc::new(Mutex::new(Ledger::open_in(&t.path().join("run")).unwrap()));
        let e = Instances::open(&t.path().join("none"), l.clone())
            .err()
            .expect("no tracefs");
        assert!(e.to_string().starts_with("tracefs is not available"), "{e}");
        assert_eq!(l.lock().unwrap().entries().count(), 0);
    }

    /// Real tracefs: instances are named after the process, in the ledger while they exist,
    /// and gone with their entries after remove, after Drop, and after a panic.
    #[test]
    fn instances_are_ledgered_and_removed_on_every_path() {
        let Some(_g) =
            latlab_sys::privileged::guard("instances_are_ledgered_and_removed_on_every_path")
        else {
            return;
        };
        let t = tempfile::tempdir().unwrap();
        let l = Arc::new(Mutex::new(Ledger::open_in(&t.path().join("run")).unwrap()));
        let root = Path::new(tracefs::DEFAULT_ROOT);
        let mut s = Instances::open(root, l.clone()).unwrap();
        let mount = usize::from(s.mounted());
        s.create("", 64, &InstanceSpec::RECORDER).unwrap();
        let p = s.create("prof", 64, &InstanceSpec::PROFILE).unwrap();
        assert!(!p.trigger, "the profile's spec has no stop trigger");
        let me = format!("latlab-{}", std::process::id());
        let mut left = instances_left();
        left.sort();
        assert_eq!(left, [me.clone(), format!("{me}-prof")]);
        assert_eq!(l.lock().unwrap().entries().count(), 2 + mount);
        s.remove().unwrap();
        assert!(instances_left().is_empty());
        assert_eq!(l.lock().unwrap().entries().count(), 0);
        s.remove().unwrap();
        // Drop, and a panic, remove them too.
        let mut s = Instances::open(root, l.clone()).unwrap();
        s.create("b", 64, &InstanceSpec::RECORDER).unwrap();
        drop(s);
        assert!(instances_left().is_empty());
        let l2 = l.clone();
        let r = std::panic::catch_unwind(move || {
            let mut s = Instances::open(root, l2).unwrap();
            s.create("", 64, &InstanceSpec::RECORDER).unwrap();
            panic!("a panic with an instance");
        });
        assert!(r.is_err());
        assert!(instances_left().is_empty());
        assert_eq!(l.lock().unwrap().entries().count(), 0);
    }
}
