//! The reader: each CPU's binary pages copied, decoded and published as a measuring thread
//! would (each noise a sample), the sources tallied.

use std::collections::BTreeMap;
use std::fs::File;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::Arc;

use latlab_core::modes::NoiseSource;
use latlab_core::record::SampleSpike;
use latlab_core::trace::raw::{NoiseKind, OsnoiseItem};

use super::instance::Instance;
use super::READ_EVERY_NS;
use crate::hotloop::{format_marker, TraceHook, TOP_N};
use crate::live::{Seconds, ThreadShared};
use crate::measure::ThreadResult;
use crate::rt;

/// One CPU as the reader publishes it.
pub(super) struct Sink {
    pub(super) sh: Arc<ThreadShared>,
    raw: File,
    tid: Option<i64>,
    seconds: Seconds,
    top: [SampleSpike; TOP_N],
    top_min: u64,
    runtime_ns: u64,
    noise_ns: u64,
    /// The end of the latest noise counted: one begun before the run's end may end after it
    /// (the thread measured until then), so the runtime reaches it.
    last_end: u64,
    hw: u64,
    sources: BTreeMap<(NoiseKind, String), (u64, u64)>,
    /// Records the ring dropped (full), and pages that dropped some without saying how many.
    pub(super) lost: u64,
    lost_pages: u64,
}

impl Sink {
    pub(super) fn new(sh: Arc<ThreadShared>, raw: File, tid: Option<i64>) -> Sink {
        Sink {
            sh,
            raw,
            tid,
            seconds: Seconds::new(),
            top: [SampleSpike {
                at_ns: 0,
                latency_ns: 0,
            }; TOP_N],
            top_min: 0,
            runtime_ns: 0,
            noise_ns: 0,
            last_end: 0,
            hw: 0,
            sources: BTreeMap::new(),
            lost: 0,
            lost_pages: 0,
        }
    }
}

pub(super) struct Reader {
    pub(super) sinks: Vec<Sink>,
    pub(super) t0: u64,
    pub(super) end: u64,
    pub(super) spike_threshold: u64,
    pub(super) page: usize,
    /// Bytes per CPU per copy.
    pub(super) max_copy: u64,
    pub(super) buf: Vec<u8>,
    /// [`super::Config::trace`], and its marker's bytes.
    pub(super) trace: Option<TraceHook>,
    pub(super) marker: [u8; 128],
}

impl Reader {
    pub(super) fn run(&mut self, inst: &Instance, stop: &AtomicBool) {
        let mut next = self.t0 + READ_EVERY_NS;
        while !stop.load(Acquire) {
            rt::sleep_until(next.min(self.end));
            self.drain(inst);
            let now = rt::now_ns();
            self.ran_until(now);
            if now >= self.end {
                break;
            }
            next = (next + READ_EVERY_NS).max(now + READ_EVERY_NS / 2);
        }
    }

    /// The tracer's threads spin all of each period (runtime = period): they ran from the
    /// start to `now`, within the run, or to the end of a noise that began in it, whichever is
    /// later (a noise is counted whole: the runtime holds it, so the noise never exceeds it).
    pub(super) fn ran_until(&mut self, now: u64) {
        for sink in &mut self.sinks {
            let ran = now.min(self.end).max(sink.last_end).saturating_sub(self.t0);
            sink.runtime_ns = ran;
            if let Some(n) = &sink.sh.mode.noise {
                n.runtime_ns.store(ran, Relaxed);
            }
        }
    }

    pub(super) fn drain(&mut self, inst: &Instance) {
        for i in 0..self.sinks.len() {
            self.buf.clear();
            // At most the ring's size per copy: a tracer that writes faster than the copy
            // reads (each µs of noise under emulation) must not grow the copy without end
            // (the kernel lab's guest ran out of memory); what the ring cannot hold, it
            // counts as lost.
            use std::io::Read;
            let _ = crate::tracefs::read_pages_into(
                (&self.sinks[i].raw).take(self.max_copy),
                self.page,
                &mut self.buf,
                usize::MAX,
                || {},
            );
            let buf = std::mem::take(&mut self.buf);
            if let Ok(st) = inst.decoder.items(&buf, |x| self.publish(i, &x)) {
                let s = &mut self.sinks[i];
                s.lost += st.lost_events;
                s.lost_pages += st.lost_unknown;
            }
            self.buf = buf;
        }
    }

    /// One record of CPU `i`'s ring: those written inside the run count.
    fn publish(&mut self, i: usize, x: &OsnoiseItem) {
        let (t0, end) = (self.t0, self.end);
        let sink = &mut self.sinks[i];
        match x {
            OsnoiseItem::Period { ts, hw, .. } if *ts > t0 => {
                // A period that ended after the start: the noises no interference explains.
                sink.hw += hw;
            }
            OsnoiseItem::Source {
                ts,
                kind,
                name,
                duration_ns,
                ..
            } if *ts > t0 && *ts <= end => {
                let e = sink
                    .sources
                    .entry((*kind, name.to_string()))
                    .or_insert((0, 0));
                e.0 += 1;
                e.1 += duration_ns;
            }
            OsnoiseItem::Noise {
                ts, duration_ns, ..
            } => {
                let at = ts.saturating_sub(*duration_ns);
                if at < t0 || at >= end {
                    return;
                }
                let wrote = self.mark(i, at, *ts, *duration_ns);
                let sink = &mut self.sinks[i];
                Self::sample(
                    sink,
                    t0,
                    self.spike_threshold,
                    (at, *ts, *duration_ns),
                    wrote,
                );
            }
            _ => {}
        }
        let sink = &self.sinks[i];
        if let Some(n) = &sink.sh.mode.noise {
            n.runtime_ns.store(sink.runtime_ns, Relaxed);
            n.noise_ns.store(sink.noise_ns, Relaxed);
        }
    }

    /// A noise of CPU `i` from `at` to `ts` (`d` ns) at or above the recorder's threshold: its
    /// gap's marker written into the armed instance, as timerlat's reader writes a sample's.
    /// True when written.
    fn mark(&mut self, i: usize, at: u64, ts: u64, d: u64) -> bool {
        let Some(t) = self.trace.as_ref().filter(|t| d >= t.threshold_ns) else {
            return false;
        };
        let fd = match &t.marks {
            Some(_) => t.armed_fd.load(Acquire),
            None => t.armed_fd.swap(-1, AcqRel),
        };
        if fd < 0 {
            return false;
        }
        let cpu = self.sinks[i].sh.cpu;
        let n = format_marker(&mut self.marker, cpu, at, ts, d, true);
        // SAFETY: the marker fd stays open until the measurement is joined.
        unsafe { libc::write(fd, self.marker.as_ptr().cast(), n) };
        if let Some(m) = t.marks.as_ref().and_then(|m| m.get(cpu as usize)) {
            m.fetch_add(1, Release);
        }
        true
    }

    /// One noise, published as a measuring thread's sample (`wrote`: its marker written).
    fn sample(
        sink: &mut Sink,
        t0: u64,
        spike_threshold: u64,
        (at, ts, d): (u64, u64, u64),
        wrote: bool,
    ) {
        let sh = &sink.sh;
        sink.noise_ns += d;
        sink.last_end = sink.last_end.max(ts);
        sh.hist.record(d);
        sh.last_ns.store(d, Relaxed);
        sh.woke_ns.store(at, Relaxed);
        sink.seconds.add(sh, (at - t0) / 1_000_000_000, d);
        if d > sink.top_min {
            if let Some(m) = sink.top.iter_mut().min_by_key(|t| t.latency_ns) {
                *m = SampleSpike {
                    at_ns: at,
                    latency_ns: d,
                };
            }
            sink.top_min = sink.top.iter().map(|t| t.latency_ns).min().unwrap_or(0);
        }
        if d >= spike_threshold {
            sh.spikes.push(at, ts, d, wrote);
        }
    }

    /// One line per CPU whose ring dropped records: its noises and sources are short of them.
    pub(super) fn lost_lines(&self) -> Vec<String> {
        self.sinks
            .iter()
            .filter(|s| s.lost > 0 || s.lost_pages > 0)
            .map(|s| {
                format!(
                    "the osnoise tracer's ring of CPU {} dropped {} records{} (it wrote faster than latlab read): its noises and sources are short of them; a higher --noise-threshold writes fewer",
                    s.sh.cpu,
                    s.lost,
                    if s.lost_pages > 0 {
                        format!(" and more on {} pages", s.lost_pages)
                    } else {
                        String::new()
                    }
                )
            })
            .collect()
    }

    /// The last seconds and the sources published, each CPU marked done; the results.
    pub(super) fn finish(&mut self) -> Vec<ThreadResult> {
        self.sinks
            .iter_mut()
            .map(|s| {
                let sh = &s.sh;
                s.seconds.finish(sh);
                if let Some(n) = &sh.mode.noise {
                    let mut v: Vec<NoiseSource> = s
                        .sources
                        .iter()
                        .map(|((kind, name), (count, ns))| NoiseSource {
                            kind: kind.as_str().into(),
                            name: name.clone(),
                            count: *count,
                            ns: Some(*ns),
                        })
                        .collect();
                    if s.hw > 0 {
                        v.push(NoiseSource {
                            kind: "hardware".into(),
                            name: "noise no interference explains (hardware, the hypervisor)"
                                .into(),
                            count: s.hw,
                            ns: None,
                        });
                    }
                    v.sort_by(|a, b| {
                        b.ns.unwrap_or(0)
                            .cmp(&a.ns.unwrap_or(0))
                            .then(b.count.cmp(&a.count))
                    });
                    if let Ok(mut g) = n.sources.lock() {
                        *g = v;
                    }
                }
                sh.done.store(true, Release);
                let mut top: Vec<SampleSpike> =
                    s.top.iter().copied().filter(|t| t.latency_ns > 0).collect();
                top.sort_by(|a, b| b.latency_ns.cmp(&a.latency_ns).then(a.at_ns.cmp(&b.at_ns)));
                ThreadResult {
                    cpu: sh.cpu,
                    tid: s.tid.unwrap_or(0),
                    interval_ns: sh.interval_ns,
                    top,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latlab_core::hist::Layout;
    use std::borrow::Cow;

    use crate::live::ModeShared;

    fn reader() -> Reader {
        let layout = Layout::default();
        let sh = Arc::new(ThreadShared::new(
            1,
            layout,
            ModeShared::noise(layout, 1_000, "osnoise"),
            1_000_000_000,
            false,
        ));
        Reader {
            sinks: vec![Sink::new(sh, File::open("/dev/null").unwrap(), Some(7))],
            t0: 10_000_000_000,
            end: 13_000_000_000,
            spike_threshold: 5_000_000,
            page: 4096,
            max_copy: 4096,
            buf: Vec::new(),
            trace: None,
            marker: [0; 128],
        }
    }

    fn source(ts: u64, kind: NoiseKind, name: &'static str, d: u64) -> OsnoiseItem<'static> {
        OsnoiseItem::Source {
            ts,
            kind,
            name: Cow::Borrowed(name),
            id: 0,
            duration_ns: d,
        }
    }

    /// Noises that began inside the run are samples (their sum the noise), sources inside
    /// it are tallied with their times, periods that ended after the start add their
    /// unexplained noises; the runtime is the time the threads ran within the run.
    #[test]
    fn records_inside_the_run_are_published() {
        let mut r = reader();
        let noise = |ts: u64, d: u64| OsnoiseItem::Noise {
            ts,
            duration_ns: d,
            interference: 1,
        };
        for x in [
            noise(9_999_999_000, 5_000),
            noise(11_000_000_000, 20_000),
            noise(11_500_000_000, 10_000_000),
            noise(13_002_000_000, 1_000_000),
            source(9_000_000_000, NoiseKind::Thread, "lab-hog", 9_000_000),
            source(11_500_000_000, NoiseKind::Thread, "lab-hog", 9_900_000),
            source(11_600_000_000, NoiseKind::Irq, "local_timer", 3_000),
            source(11_700_000_000, NoiseKind::Irq, "local_timer", 4_000),
            OsnoiseItem::Period {
                ts: 11_000_000_000,
                runtime_us: 1_000_000,
                noise_us: 20,
                max_sample_us: 20,
                hw: 3,
                nmi: 0,
                irq: 2,
                softirq: 0,
                thread: 1,
            },
        ] {
            r.publish(0, &x);
        }
        r.ran_until(12_000_000_000);
        let sh = r.sinks[0].sh.clone();
        let h = sh.hist.snapshot();
        assert_eq!((h.count(), h.max()), (2, Some(10_000_000)));
        let n = sh.mode.noise.as_ref().unwrap();
        assert_eq!(n.noise_ns.load(Relaxed), 10_020_000);
        assert_eq!(n.runtime_ns.load(Relaxed), 2_000_000_000);
        let mut spikes = Vec::new();
        sh.drain_spikes(&mut spikes);
        assert_eq!(spikes.len(), 1);
        assert_eq!(spikes[0].intended_ns, 11_490_000_000);
        let res = r.finish();
        assert_eq!(res[0].tid, 7);
        assert_eq!(res[0].top[0].latency_ns, 10_000_000);
        let got: Vec<(String, String, u64, Option<u64>)> = n
            .sources
            .lock()
            .unwrap()
            .iter()
            .map(|s| (s.kind.clone(), s.name.clone(), s.count, s.ns))
            .collect();
        assert_eq!(
            got,
            [
                ("task".into(), "lab-hog".into(), 1, Some(9_900_000)),
                ("irq".into(), "local_timer".into(), 2, Some(7_000)),
                (
                    "hardware".into(),
                    "noise no interference explains (hardware, the hypervisor)".into(),
                    3,
                    None
                ),
            ]
        );
        assert!(r.lost_lines().is_empty());
        // A noise begun 100 ms before the end that lasted 300 ms (TCG's stalls of 8 emulated
        // CPUs): counted whole, and the runtime reaches its end, so noise ≤ runtime.
        r.publish(0, &noise(13_200_000_000, 300_000_000));
        r.ran_until(14_000_000_000);
        assert_eq!(n.noise_ns.load(Relaxed), 310_020_000);
        assert_eq!(n.runtime_ns.load(Relaxed), 3_200_000_000);
        r.sinks[0].lost = 12;
        assert!(r.lost_lines()[0].contains("CPU 1 dropped 12 records"));
    }
}
