//! Instances taking turns (`--trace-instances` > 1, or spikes read as text): `latlab-<pid>`,
//! `latlab-<pid>-b`, `latlab-<pid>-c` …, configured alike. One is *armed* (running; its
//! `trace_marker` fd in the hook's `marker_fd`, an atomic the measuring threads load after
//! taking `armed`). A thread that takes `armed` on a spike writes one `LATLAB_STOP …` marker,
//! which stops that instance in the kernel (a `traceoff` trigger). The re-arm thread (and the
//! collector, every slice: [`Recorder::poll`]) sees `armed` cleared, moves the stopped instance
//! to the *pending* queue, starts a *standby* and sets `armed` again — the recorder is back
//! within a slice. [`Recorder::on_spike`] (once per spike, in order) takes the pending
//! instance's pages (copied by the re-arm thread, or now: `per_cpu/cpuN/trace_pipe_raw`, which
//! formats nothing and empties the rings, so the instance is a standby again without a clear),
//! analyzes them ([`latlab_core::trace::capture`]) and writes the spike's files. When the
//! kernel's layout is not one latlab decodes, the text is copied instead, in short reads
//! polling between them (a third instance takes over when the second stops during a long
//! copy). A stopped instance whose spike never reaches the collector (the spike ring was full)
//! is recycled by [`Recorder::reap`], so the recorder never stays disarmed.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use latlab_core::record::SpikeRecord;
use latlab_core::trace::capture::{self, Analyzed, Pages, Place, Render, Rendering, Spike};
use latlab_core::trace_summary::{SpikeCapture, TraceSummary};
use latlab_sys::live::SpikeEvent;
use latlab_sys::pimutex::PiMutex;
use latlab_sys::rt::now_ns as mono_ns;

use super::api::{spike_of, Failure, Hook, Recorder};
use super::common::{capture_of, Common, Figures, SpikeDir, Trace};
use super::decoder::proc_comm;
use super::files::write_trace;

mod arm;
#[cfg(test)]
mod tests;

use arm::{drain, spawn_rearm, Arm, Arming, Copied, Pending, STOP_WAIT};

/// Bytes of a spike's text copy between two polls of the armed instance (about 2 ms of
/// reading under load).
const POLL_EVERY: usize = 32 << 10;

/// A stopped instance whose spike has not been handed over by a drain of the spike rings that
/// began this long after the stop is an orphan (its spike record was dropped: ring full). The
/// measuring thread pushes the record microseconds after its marker; the margin covers a
/// preempted measuring thread on a busy VM.
const ORPHAN_AFTER: Duration = Duration::from_millis(100);

/// A spike that found the recorder stopped this long after another CPU's marker stopped it
/// may be read from that capture (a VM stalled on every CPU at once).
const COVER_WITHIN: Duration = Duration::from_millis(1);

/// The last capture's pages of the CPUs other than its spike's.
struct LastCapture {
    /// The spike's clock read (its marker stopped the instance microseconds later).
    stop_ns: u64,
    spike: u32,
    slot: usize,
    pages: Vec<(u32, Vec<u8>)>,
}

pub(super) struct Turns {
    common: Common,
    arm: Arc<Arm>,
    rearm: Option<std::thread::JoinHandle<()>>,
    /// Instances recycled because their spike never reached the collector.
    orphaned: u32,
    /// Spikes read from another spike's capture ([`Turns::cover`]).
    covered: u32,
    last: Option<LastCapture>,
    /// Spike (its clock read) → recorder running again, over every traced spike: (sum, max, n).
    rearm_ns: (u64, u64, u64),
}

impl Turns {
    /// Clear every instance and arm the first; `thread`: with the re-arm thread (tests poll
    /// themselves, step by step).
    pub(super) fn start(common: Common, thread: bool) -> Result<Turns, Failure> {
        let all = common.instances.all();
        let n = all.len();
        let arm = Arc::new(Arm {
            st: PiMutex::new(Arming {
                active: None,
                pending: Default::default(),
                standby: (0..n).rev().collect(),
                traced: 0,
                overrun_base: vec![vec![0; common.cpus.len()]; n],
                reused: 0,
                cleared: 0,
            }),
            fds: all
                .iter()
                .map(|r| (r.tracing_on_fd(), r.marker_fd()))
                .collect(),
            dirs: all.iter().map(|r| r.dir().to_path_buf()).collect(),
            cpus: common.cpus.clone(),
            raw_page: common.binary.as_ref().ok().map(|d| d.page_size()),
            armed_fd: common.hook.armed_fd.clone(),
            trigger: all.iter().all(|r| r.trigger),
            max_spikes: common.max_spikes,
            quit: AtomicBool::new(false),
        });
        for r in all {
            r.clear().map_err(Failure::Io)?;
        }
        let mut t = Turns {
            common,
            arm,
            rearm: None,
            orphaned: 0,
            covered: 0,
            last: None,
            rearm_ns: (0, 0, 0),
        };
        t.poll();
        if thread {
            t.rearm = spawn_rearm(t.arm.clone());
        }
        Ok(t)
    }

    /// Events instance `slot`'s ring overwrote on `cpu` since its last copy or clear.
    fn overruns_since(&self, slot: usize, cpu: u32) -> Option<u64> {
        let o = self.common.instances.all()[slot].overruns(cpu)?;
        let k = self.common.cpus.iter().position(|&c| c == cpu)?;
        Some(o.saturating_sub(self.arm.lock().overrun_base[slot][k]))
    }

    /// Read every CPU's pages of stopped instance `slot` (consuming them, [`drain`]),
    /// polling the armed instance between pages, and make it a standby: as it is when the
    /// rings are empty, cleared when not. None when the session reads text.
    fn drain_polling(&mut self, slot: usize) -> Option<Copied> {
        let page = self.common.binary.as_ref().ok()?.page_size();
        let dir = self.common.instances.all()[slot].dir().to_path_buf();
        let cpus = self.common.cpus.clone();
        let mut base = self.arm.lock().overrun_base[slot].clone();
        let (copied, left) = drain(&dir, &cpus, page, &mut base, || self.poll());
        if left {
            let _ = self.common.instances.all()[slot].clear();
        }
        let mut a = self.arm.lock();
        if left {
            a.overrun_base[slot].iter_mut().for_each(|b| *b = 0);
            a.cleared += 1;
        } else {
            a.overrun_base[slot] = base;
            a.reused += 1;
        }
        a.standby.push(slot);
        Some(copied)
    }

    /// Make an abandoned instance (its spike never reached the collector) a standby: with the
    /// binary reader, its rings are read and dropped (no clear, which waits for an RCU grace
    /// period and resets every page with interrupts off); else counted and cleared.
    fn recycle(&mut self, slot: usize) {
        let _ = self.common.instances.all()[slot].stop();
        if let Some(c) = self.drain_polling(slot) {
            self.common.count_overruns(&c.overruns);
            return;
        }
        self.recycle_cleared(slot);
    }

    /// Count the overruns of a copied (or abandoned) instance, clear it, make it the standby.
    fn recycle_cleared(&mut self, slot: usize) {
        let _ = self.common.instances.all()[slot].stop();
        for c in self.common.cpus.clone() {
            if let Some(o) = self.overruns_since(slot, c) {
                self.common.count_overruns(&[(c, o)]);
            }
        }
        let _ = self.common.instances.all()[slot].clear();
        let mut a = self.arm.lock();
        a.overrun_base[slot].iter_mut().for_each(|b| *b = 0);
        a.cleared += 1;
        a.standby.push(slot);
    }

    /// Copy a stopped instance's buffer of `cpu` as text in short reads
    /// (latlab_sys::shortio), and poll every [`POLL_EVERY`] bytes: a copy takes up to hundreds
    /// of ms under load, and when the armed instance stops meanwhile, a standby takes over now
    /// rather than after the copy.
    fn copy_polling(&mut self, slot: usize, cpu: u32) -> Vec<u8> {
        let Ok(f) = self.common.instances.all()[slot].open_cpu_trace(cpu) else {
            return Vec::new();
        };
        latlab_sys::shortio::read_chunked_ticking(
            f,
            latlab_sys::shortio::READ_CHUNK,
            POLL_EVERY,
            || self.poll(),
        )
        .unwrap_or_default()
    }

    /// The oldest stopped instance, for a spike whose marker was written (None: no marker,
    /// over `--trace-max-spikes`, or its instance was recycled as an orphan).
    fn claim(&mut self, marker_written: bool) -> Option<Pending> {
        let mut a = self.arm.lock();
        if !marker_written || a.traced >= self.common.max_spikes {
            return None;
        }
        a.pending.pop_front().inspect(|_| a.traced += 1)
    }

    /// A spike with no stopped instance of its own: read from the last capture
    /// ([`Turns::cover`]), else counted as not traced (over the cap also when the stops
    /// waiting for collection take its last slots: the recorder is not re-armed after them).
    fn untraced(&mut self, e: &SpikeEvent, run_dir: &Path) -> Option<SpikeRecord> {
        if let Some(sp) = self.cover(e, run_dir) {
            return Some(sp);
        }
        self.common.not_traced += 1;
        let a = self.arm.lock();
        if a.traced as usize + a.pending.len() >= self.common.max_spikes as usize {
            self.common.over_max_spikes += 1;
        }
        None
    }

    /// The spike's capture from its instance's copied pages: decoded, analyzed and rendered
    /// (its `trace.dat`, and `trace.txt` when asked), with the other measured CPUs' pages of
    /// its window (returned, for the evidence of its silent stretches); the other CPUs'
    /// pages kept for [`Turns::cover`].
    fn read_binary(
        &mut self,
        p: &Pending,
        c: Copied,
        s: Spike,
        cap: &mut SpikeCapture,
    ) -> (Analyzed, Vec<(u32, Vec<u8>)>) {
        self.common.count_overruns(&c.overruns);
        cap.overrun = c.overruns.iter().find(|o| o.0 == s.cpu).map_or(0, |o| o.1);
        cap.read_ns = c.read_ns;
        let (mine, others): (Vec<_>, Vec<_>) = c.pages.into_iter().partition(|x| x.0 == s.cpu);
        let dec = self
            .common
            .binary
            .as_ref()
            .expect("the binary path has a decoder");
        let span = capture::others_window(s);
        let window: Vec<(u32, Vec<u8>)> = others
            .iter()
            .filter(|o| self.common.cpus.contains(&o.0))
            .map(|(c, p)| (*c, dec.trim_pages(p, span.clone())))
            .collect();
        // The other CPUs' pages, for a spike that found the recorder stopped by this one.
        self.last = Some(LastCapture {
            stop_ns: s.actual_ns,
            spike: cap.spike,
            slot: p.slot,
            pages: others,
        });
        let pages = mine.into_iter().next().map(|x| x.1).unwrap_or_default();
        // Not re-armed yet (no standby was free): the instance just copied takes over.
        self.poll();
        let t_dec = Instant::now();
        let dec = self
            .common
            .binary
            .as_ref()
            .expect("the binary path has a decoder");
        let mut a = capture::analyze_pages(&Pages {
            decoder: dec,
            pages: &pages,
            spike: s,
            place_marker: Place::No,
            render: Render::Later,
            comm_of: &proc_comm,
        });
        for (_, p) in &window {
            let _ = dec.learn_comms(p, &mut a.comms);
        }
        (a.text, a.dat) = capture::render(&Rendering {
            decoder: dec,
            cpu: s.cpu,
            pages: &pages,
            comms: &a.comms,
            dat: self.common.dat_layout(p.slot),
            text: self.common.text_files,
            others: &window,
        });
        a.counts.apply(cap);
        cap.decode_ns = t_dec.elapsed().as_nanos() as u64;
        (a, window)
    }

    /// The spike's capture as the kernel's text (a layout latlab does not decode): copied in
    /// short reads, written, the instance cleared and made a standby, then analyzed.
    fn read_text(
        &mut self,
        slot: usize,
        s: Spike,
        d: &SpikeDir,
        cap: &mut SpikeCapture,
    ) -> Analyzed {
        let t_read = Instant::now();
        let text = self.copy_polling(slot, s.cpu);
        cap.read_ns = t_read.elapsed().as_nanos() as u64;
        cap.overrun = self.overruns_since(slot, s.cpu).unwrap_or(0);
        let text = String::from_utf8_lossy(&text).into_owned();
        write_trace(&d.dir, Some(&text), None);
        self.recycle_cleared(slot);
        // Not re-armed yet (no standby was free): the instance just cleared takes over.
        self.poll();
        let t_dec = Instant::now();
        let a = capture::analyze_kernel_text(&text, s);
        a.counts.apply(cap);
        cap.decode_ns = t_dec.elapsed().as_nanos() as u64;
        a
    }

    /// Spike → recorder running again. The spikes that took the last slots of
    /// `--trace-max-spikes` are never followed by a re-arm: not counted (it would count the
    /// time until their collection). Others not re-armed yet count until now, a lower bound.
    fn count_rearm(&mut self, p: &Pending, n: u32, actual_ns: u64) {
        if !p.capped && (p.rearmed_ns.is_some() || n < self.common.max_spikes) {
            let rearmed = p.rearmed_ns.unwrap_or_else(mono_ns);
            let d = rearmed.saturating_sub(actual_ns);
            let r = &mut self.rearm_ns;
            *r = (r.0 + d, r.1.max(d), r.2 + 1);
        }
    }

    /// A spike whose marker found the recorder stopped by another CPU's spike microseconds
    /// before (a stall of the whole VM makes every CPU late at once): the capture of that
    /// spike holds this CPU's events too, up to the stop. When this spike's window began
    /// before the stop, it is analyzed from there: a marker is placed after the last event
    /// of its CPU, so what came after the stop is unexplained time, and the analysis says so.
    fn cover(&mut self, e: &SpikeEvent, run_dir: &Path) -> Option<SpikeRecord> {
        let s = spike_of(e);
        let last = self.last.as_ref()?;
        if e.marker_written || s.intended_ns >= last.stop_ns || s.actual_ns < last.stop_ns {
            return None;
        }
        if s.actual_ns - last.stop_ns > COVER_WITHIN.as_nanos() as u64 {
            return None;
        }
        let (_, pages) = last.pages.iter().find(|x| x.0 == s.cpu)?;
        let dec = self.common.binary.as_ref().ok()?;
        let (of_spike, stop_ns) = (last.spike, last.stop_ns);
        let n = {
            let mut a = self.arm.lock();
            if a.traced >= self.common.max_spikes {
                return None;
            }
            a.traced += 1;
            a.traced
        };
        let d = SpikeDir::new(run_dir, n);
        let mut cap = capture_of(&d, s.cpu);
        let t_dec = Instant::now();
        let mut a = capture::analyze_pages(&Pages {
            decoder: dec,
            pages,
            spike: s,
            place_marker: self.common.placed(),
            render: self.common.render_now(last.slot),
            comm_of: &proc_comm,
        });
        a.counts.apply(&mut cap);
        cap.decode_ns = t_dec.elapsed().as_nanos() as u64;
        if a.sample.is_none() {
            // Its window is not in that capture: not traced after all.
            self.arm.lock().traced -= 1;
            return None;
        }
        a.warnings.push(format!(
            "read from the capture of spike {of_spike} (its marker stopped the recorder {:.1} us \
             before this spike's clock read): what came after is unexplained",
            (s.actual_ns - stop_ns) as f64 / 1000.0
        ));
        self.covered += 1;
        let _ = std::fs::create_dir_all(&d.dir);
        write_trace(&d.dir, a.text.as_deref(), a.dat.as_deref());
        self.common.captures.push(cap);
        let dat = a.dat.is_some();
        Some(self.common.record(&d, s, &a, Trace::Written { dat }))
    }

    /// Stop, remove the instances (and unmount if the session mounted), forget the ledger
    /// entries; return the summary stored as run.json's `"trace"`.
    pub(super) fn finish(mut self) -> TraceSummary {
        // The thread first: it would take a disarmed recorder for a marker and arm another.
        self.stop_rearm();
        self.common.hook.armed_fd.store(-1, Ordering::SeqCst);
        let (in_use, copied): (Vec<usize>, Vec<(u32, u64)>) = {
            let a = self.arm.lock();
            let not_copied = a.pending.iter().filter(|p| p.copy.is_none());
            (
                a.active
                    .iter()
                    .copied()
                    .chain(not_copied.map(|p| p.slot))
                    .collect(),
                a.pending
                    .iter()
                    .filter_map(|p| p.copy.as_ref())
                    .flat_map(|c| c.overruns.iter().copied())
                    .collect(),
            )
        };
        self.common.count_overruns(&copied);
        for &i in &in_use {
            let _ = self.common.instances.all()[i].stop();
            for c in self.common.cpus.clone() {
                if let Some(o) = self.overruns_since(i, c) {
                    self.common.count_overruns(&[(c, o)]);
                }
            }
        }
        // Standbys were counted when they were copied or cleared.
        let (traced, rearm_reused, rearm_cleared) = {
            let a = self.arm.lock();
            (a.traced, a.reused, a.cleared)
        };
        let f = Figures {
            stop: self.common.turns_stop(),
            traced,
            covered: self.covered,
            rearm_reused,
            rearm_cleared,
            orphaned: self.orphaned,
            rearm_ns: self.rearm_ns,
            ..Figures::default()
        };
        self.common.finish(f)
    }

    /// Stop and join the re-arm thread (before the instances and their fds go).
    fn stop_rearm(&mut self) {
        self.arm.quit.store(true, Ordering::Release);
        if let Some(t) = self.rearm.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Turns {
    /// The thread first; then the instances go with [`Common`] (panic path).
    fn drop(&mut self) {
        self.stop_rearm();
    }
}

impl Recorder for Turns {
    fn hook(&self) -> &Hook {
        &self.common.hook
    }

    fn stops(&self) -> bool {
        true
    }

    fn wants_collector(&self) -> bool {
        !self.arm.lock().pending.is_empty()
    }

    /// When a marker has disarmed the recorder, move the stopped instance to the pending
    /// queue and arm a standby at once. Cheap when nothing happened (one atomic load).
    fn poll(&mut self) {
        if self.common.hook.armed_fd.load(Ordering::Acquire) >= 0 {
            return;
        }
        let mut a = self.arm.lock();
        self.arm.step(&mut a);
    }

    /// Instances stopped before `drained_at - ORPHAN_AFTER` that no spike claimed lost their
    /// spike record (spike ring full): clear them and make them standbys, so the recorder
    /// re-arms.
    fn reap(&mut self, drained_at: Instant) {
        loop {
            let p = {
                let mut a = self.arm.lock();
                let old = a
                    .pending
                    .front()
                    .is_some_and(|p| p.stopped + ORPHAN_AFTER <= drained_at);
                if old {
                    a.pending.pop_front()
                } else {
                    None
                }
            };
            let Some(p) = p else { break };
            match p.copy {
                Some(c) => self.common.count_overruns(&c.overruns),
                None => self.recycle(p.slot),
            }
            self.orphaned += 1;
        }
        self.poll();
    }

    fn on_spike(&mut self, e: &SpikeEvent, run_dir: &Path) -> Option<SpikeRecord> {
        self.poll();
        let Some(mut p) = self.claim(e.marker_written) else {
            return self.untraced(e, run_dir);
        };
        let s = spike_of(e);
        let rec = &self.common.instances.all()[p.slot];
        // Wait (bounded) for the in-kernel stop (unless the re-arm thread copied it already).
        let t0 = Instant::now();
        while p.copy.is_none() && rec.is_on() && t0.elapsed() < STOP_WAIT {
            std::thread::sleep(Duration::from_millis(1));
        }
        if p.copy.is_none() && rec.is_on() {
            // The marker did not stop it (trigger refused?): stop now; history is still there.
            let _ = rec.stop();
        }
        let n = self.arm.lock().traced;
        let d = SpikeDir::new(run_dir, n);
        let _ = std::fs::create_dir_all(&d.dir);
        let mut cap = capture_of(&d, s.cpu);
        // Copied by the re-arm thread (the instance is a standby already), else now: every
        // CPU's pages (a copy of ms, nothing formatted in the kernel), the instance recycled
        // right after the copy, before the decoding. None: the session reads text.
        let copy = match p.copy.take() {
            Some(c) => Some(c),
            None => self.drain_polling(p.slot),
        };
        let (a, window) = match copy {
            Some(c) => {
                let (a, window) = self.read_binary(&p, c, s, &mut cap);
                write_trace(&d.dir, a.text.as_deref(), a.dat.as_deref());
                (a, window)
            }
            None => (self.read_text(p.slot, s, &d, &mut cap), Vec::new()),
        };
        self.common.captures.push(cap);
        self.count_rearm(&p, n, s.actual_ns);
        let dat = a.dat.is_some();
        let mut spike = self.common.record(&d, s, &a, Trace::Written { dat });
        // What the other CPUs did while this one was silent (their pages of its window).
        if let Ok(dec) = &self.common.binary {
            spike.others = capture::others_evidence(dec, &spike, &window, &a.comms);
        }
        Some(spike)
    }

    fn not_traced(&self) -> u64 {
        self.common.not_traced
    }

    fn finish(self: Box<Self>) -> TraceSummary {
        (*self).finish()
    }
}
