//! The default flight recorder: one tracefs instance that never stops.
//!
//! A spike's measuring thread writes its marker (`LATLAB_STOP cpu= intended= actual=
//! latency=`) into the running ring and counts it in `marks[cpu]`; nothing stops, so there
//! is no re-arm and no moment at which a spike on another CPU, or the next period's, finds the
//! recorder off. A copier thread reads the binary pages of every CPU whose count moved into
//! that CPU's *tape* ([`tape`]). The collector hands each spike the pages of its CPU from the
//! previous spike's marker (exclusive) to its own (inclusive): its *session*, analyzed by
//! [`latlab_core::trace::capture`]. The rest (the page holding its marker and later ones) goes
//! back to the tape for the next spike of that CPU. The spikes' files wait in memory, as
//! pages, until the measurement ends ([`Recorder::finish`]).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use latlab_core::record::SpikeRecord;
use latlab_core::trace::capture::{self, Analyzed, Pages, Place, Render, Spike};
use latlab_core::trace_summary::TraceSummary;
use latlab_sys::live::{SpikeEvent, ThreadShared};

use super::api::{spike_of, Failure, Hook, Recorder};
use super::common::{capture_of, Common, Figures, SpikeDir, Trace};
use super::decoder::proc_comm;
use super::files::RawFiles;

mod tape;
#[cfg(test)]
mod tests;

use tape::{Taken, Tapes};

/// How long the collector waits for a spike's pages before it gives the spike up.
const COPY_WAIT: Duration = Duration::from_secs(2);

pub(super) struct Running {
    common: Common,
    tapes: Arc<Tapes>,
    copier: Option<std::thread::JoinHandle<()>>,
    traced: u32,
    /// Per measured CPU (index in `cpus`): markers handed to the collector so far.
    handed: Vec<u64>,
    /// Spike (its clock read) → its pages read by the copier: (sum, max, n).
    copy_delay_ns: (u64, u64, u64),
    /// Pages a tape dropped because the collector fell a ring behind.
    dropped_pages: u64,
}

impl Running {
    /// Start recording on the session's one instance, read as binary pages: its stop trigger
    /// taken off (markers are plain events), its CPUs' pages opened, the ring cleared, tracing
    /// on, the hook armed for good. `copier`: with the copier thread (tests have the collector
    /// read).
    pub(super) fn start(mut common: Common, copier: bool) -> Result<Running, Failure> {
        let layout = match &common.binary {
            Ok(dec) => dec.page_layout(),
            Err(e) => return Err(Failure::CannotTrace(e.clone())),
        };
        let cpus = common.cpus.clone();
        let rec = common.instances.get_mut(0).expect("the session's instance");
        if let Err(e) = rec.drop_trigger() {
            let why = format!("cannot take the stop trigger off: {e}");
            return Err(Failure::CannotTrace(why));
        }
        let tapes = Tapes::open(rec.dir(), &cpus, layout, rec.buffer_kb)
            .map_err(|e| Failure::CannotTrace(format!("trace_pipe_raw: {e}")))?;
        let tapes = Arc::new(tapes);
        let rec = &common.instances.all()[0];
        rec.clear().map_err(Failure::Io)?;
        if rec.start().is_err() {
            let why = "cannot start the recorder (tracing_on)".to_string();
            return Err(Failure::CannotTrace(why));
        }
        common
            .hook
            .armed_fd
            .store(rec.marker_fd(), Ordering::Release);
        common.hook.marks = Some(tapes.marks());
        Ok(Running {
            copier: copier.then(|| tape::spawn_copier(tapes.clone())).flatten(),
            tapes,
            traced: 0,
            handed: vec![0; cpus.len()],
            copy_delay_ns: (0, 0, 0),
            dropped_pages: 0,
            common,
        })
    }

    /// A spike not traced: no marker (written after --trace-max-spikes: the threads write
    /// none then), or over the cap.
    fn untraced(&mut self) -> Option<SpikeRecord> {
        self.common.not_traced += 1;
        if self.traced >= self.common.max_spikes {
            self.common.over_max_spikes += 1;
        }
        None
    }

    /// The spike's session: its CPU's pages from the previous marker to its own, cut from
    /// what it took from the tape (the rest given back for the next spike), and analyzed.
    fn session(&self, k: usize, taken: Taken, s: Spike) -> Option<(Vec<u8>, Analyzed)> {
        let dec = self.common.binary.as_ref().ok()?;
        let found = capture::marker_time(dec, s.cpu, &taken.pages, taken.from_ns, s.intended_ns);
        // A marker written on another CPU (timerlat's reader): the session ends at the
        // thread's wake-up, read on the spike's CPU after it.
        let place = found.is_none() && self.common.markers_off_cpu;
        let at = found.or_else(|| place.then_some(s.actual_ns.max(taken.from_ns)));
        let pages = match at {
            Some(at) => {
                let (end, rest) = self.tapes.split_at(&taken.pages, at);
                self.tapes
                    .give_back(k, taken.pages[rest..].to_vec(), at + 1);
                dec.trim_pages(&taken.pages[..end], taken.from_ns..at + 1)
            }
            None => {
                // Not in the copy (the copier never got to it, or the ring lost it): the
                // pages stay for the next spike of this CPU.
                self.tapes.give_back(k, taken.pages, taken.from_ns);
                Vec::new()
            }
        };
        let a = capture::analyze_pages(&Pages {
            decoder: dec,
            pages: &pages,
            spike: s,
            place_marker: if place {
                self.common.placed()
            } else {
                Place::No
            },
            render: Render::Later,
            comm_of: &proc_comm,
        });
        Some((pages, a))
    }

    /// The other measured CPUs' pages of spike `s`'s window (`capture::others_window`), each
    /// once its tape holds the window; a CPU whose copy does not come within [`COPY_WAIT`]
    /// is left out. Read for the spike's `trace.dat` and the evidence of its silent stretches.
    fn others_of(&self, k: usize, s: Spike) -> Vec<(u32, Vec<u8>)> {
        let Ok(dec) = self.common.binary.as_ref() else {
            return Vec::new();
        };
        let span = capture::others_window(s);
        let copier = self.copier.is_some();
        (0..self.common.cpus.len())
            .filter(|&j| j != k)
            .filter(|&j| self.tapes.wait_past(j, s.actual_ns, copier, COPY_WAIT))
            .map(|j| {
                let pages = self.tapes.peek(j, span.clone());
                (self.common.cpus[j], dec.trim_pages(&pages, span.clone()))
            })
            .collect()
    }

    /// Stop, remove the instance (and unmount if the session mounted), forget the ledger
    /// entries, write the spikes' files; return the summary stored as run.json's `"trace"`.
    pub(super) fn finish(mut self) -> TraceSummary {
        self.stop_copier();
        // What the ring overwrote over the run (nobody reads a CPU without spikes).
        for c in self.common.cpus.clone() {
            if let Some(o) = self.common.instances.all()[0].overruns(c) {
                self.common.overruns.insert(c, o);
            }
        }
        let f = Figures {
            stop: "never: each spike's trace ends at its marker",
            traced: self.traced,
            copy_delay_ns: self.copy_delay_ns,
            dropped_pages: self.dropped_pages,
            ..Figures::default()
        };
        self.common.finish(f)
    }

    /// Stop and join the copier, and close its files (or the instance could not be removed).
    fn stop_copier(&mut self) {
        self.tapes.quit.store(true, Ordering::Release);
        if let Some(t) = self.copier.take() {
            let _ = t.join();
        }
        self.tapes.close();
    }
}

impl Drop for Running {
    /// The copier first; then the instance goes with [`Common`] (panic path).
    fn drop(&mut self) {
        self.stop_copier();
    }
}

impl Recorder for Running {
    fn hook(&self) -> &Hook {
        &self.common.hook
    }

    fn stops(&self) -> bool {
        false
    }

    /// When every CPU is measured (no housekeeping CPU for latlab's own threads), the copier
    /// pins itself to the last measured CPU and reads in the quiet part of that CPU's periods
    /// ([`latlab_sys::quiet`]); with a CPU to spare, it runs there and needs none.
    fn attach(&self, threads: &[Arc<ThreadShared>], housekeeping: &[u32]) {
        if !housekeeping.is_empty() {
            return;
        }
        if let Some(q) = threads.last().and_then(latlab_sys::quiet::Quiet::of) {
            let _ = self.tapes.quiet.set(q);
        }
    }

    /// The spike's trace is its CPU's session, the pages from the previous spike's marker
    /// (exclusive) to its own (inclusive).
    fn on_spike(&mut self, e: &SpikeEvent, run_dir: &Path) -> Option<SpikeRecord> {
        let s = spike_of(e);
        let k = self.common.cpus.iter().position(|&c| c == s.cpu)?;
        if e.marker_written {
            self.handed[k] += 1;
        }
        if !e.marker_written || self.traced >= self.common.max_spikes {
            return self.untraced();
        }
        let copied = self
            .tapes
            .wait_for(k, self.handed[k], self.copier.is_some(), COPY_WAIT);
        self.traced += 1;
        let n = self.traced;
        if n >= self.common.max_spikes {
            // The last one: the threads write no more markers.
            self.common.hook.armed_fd.store(-1, Ordering::Release);
        }
        let taken = self.tapes.take(k, self.handed[k]);
        if let Some(d) = taken.read_done_ns.map(|t| t.saturating_sub(s.actual_ns)) {
            let c = &mut self.copy_delay_ns;
            *c = (c.0 + d, c.1.max(d), c.2 + 1);
        }
        let dropped = taken.dropped;
        self.dropped_pages += dropped;
        self.common.count_overruns(&[(s.cpu, taken.overrun)]);
        let d = SpikeDir::new(run_dir, n);
        let mut cap = capture_of(&d, s.cpu);
        (cap.read_ns, cap.overrun) = (taken.read_ns, taken.overrun);
        let t_dec = Instant::now();
        let (pages, mut a) = self.session(k, taken, s)?;
        a.counts.apply(&mut cap);
        cap.decode_ns = t_dec.elapsed().as_nanos() as u64;
        if !copied {
            a.why = format!(
                "the spike's pages were not read within {} s (the copier starved)",
                COPY_WAIT.as_secs()
            );
        }
        if dropped > 0 {
            a.warnings.push(format!(
                "{dropped} page(s) of this CPU's history were dropped before this spike's session (the collector fell a ring behind)"
            ));
        }
        self.common.captures.push(cap);
        let trace = match pages.is_empty() {
            true => Trace::Missing,
            false => {
                let others = self.others_of(k, s);
                let mut comms = std::mem::take(&mut a.comms);
                if let Ok(dec) = &self.common.binary {
                    for (_, p) in &others {
                        let _ = dec.learn_comms(p, &mut comms);
                    }
                }
                Trace::Pages(RawFiles {
                    cpu: s.cpu,
                    pages,
                    others,
                    comms,
                })
            }
        };
        Some(self.common.record(&d, s, &a, trace))
    }

    fn not_traced(&self) -> u64 {
        self.common.not_traced
    }

    fn finish(self: Box<Self>) -> TraceSummary {
        (*self).finish()
    }
}
