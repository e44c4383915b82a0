//! A window's end: its causes renamed for reports, summed, scaled to the latency, and the
//! sample it becomes.

use std::borrow::Cow;

use super::sample::Sample;
use super::window::{MarkerEnd, Window};
use super::{Analyzer, SampleMode};
use crate::record::{Cause, CauseContext, CauseKind, SpikeLanes, SILENT_GAP};
use crate::trace::classify::{sort_causes, switch_to_user, Key, Lore, Measuring};
use crate::units::Nanos;

impl<'a> Analyzer<'a> {
    /// The window's causes under the names reports show ([`Lore::name`]), keys that become
    /// equal merged (the measuring thread seen under two names or prios), its stretches
    /// following.
    fn rename(&self, w: &mut Window<'a>) {
        let lore = Lore {
            known: &self.known,
            irq_names: &self.irq_names,
            irq_threads: &self.irq_threads,
            boosts: &self.boosts,
        };
        let m = Measuring {
            pid: w.pid,
            comm: &w.comm,
            prio: w.prio.unwrap_or(0),
        };
        let rekey = |list: &mut Vec<(Key<'a>, Nanos)>| -> Option<Vec<usize>> {
            let renamed: Vec<Option<Key<'a>>> =
                list.iter().map(|(k, _)| lore.name(k, &m)).collect();
            if renamed.iter().all(Option::is_none) {
                return None;
            }
            let mut out: Vec<(Key<'a>, Nanos)> = Vec::with_capacity(list.len());
            let mut map = Vec::with_capacity(list.len());
            for ((k, ns), r) in list.drain(..).zip(renamed) {
                let k = r.unwrap_or(k);
                match out.iter().position(|(x, _)| *x == k) {
                    Some(i) => {
                        out[i].1 += ns;
                        map.push(i);
                    }
                    None => {
                        out.push((k, ns));
                        map.push(out.len() - 1);
                    }
                }
            }
            *list = out;
            Some(map)
        };
        let mut acc = std::mem::take(&mut w.acc);
        let mut at_switch = std::mem::take(&mut w.at_switch);
        if let Some(map) = rekey(&mut acc) {
            for s in w.segs.iter_mut() {
                s.0 = map[s.0];
            }
            w.last_key = w.last_key.map(|i| map[i]);
            let mut ctx = vec![CauseContext::default(); acc.len()];
            for (old, c) in w.ctx.iter().enumerate() {
                ctx[map[old]].add(c);
            }
            w.ctx = ctx;
        }
        rekey(&mut at_switch);
        for (_, snap) in w.preempted.iter_mut() {
            rekey(snap);
        }
        w.acc = acc;
        w.at_switch = at_switch;
    }

    pub(super) fn finish_window(&mut self, cpu: u32, mut w: Window<'a>, marker: Option<MarkerEnd>) {
        // The thread as the scheduler's events name it last (its first events may carry the
        // process's name from before the thread named itself, and no known prio).
        if let Some((c, p)) = self.known.get(&w.pid) {
            if w.comm != *c {
                w.comm = c.clone();
            }
            w.prio.get_or_insert(*p);
        }
        if marker.is_none()
            && (self.mode == SampleMode::Markers
                || w.switched.is_none()
                || w.prio.is_none_or(|p| p >= 100))
        {
            return; // not a sample
        }
        self.rename(&mut w);
        let st = self.cpus.entry(cpu);
        // Marker mode: what was charged up to the first preemption after the clock read
        // (the thread ran from its last switch-in to then); else up to the marker.
        let at_read = marker.and_then(|(_, r, _, _)| {
            w.preempted
                .iter()
                .find(|(out, _)| *out >= r)
                .map(|(out, acc)| (*out, acc.clone()))
        });
        let (e, r, latency, mut acc) = match marker {
            Some((e, r, l, _)) => {
                let acc = match &at_read {
                    Some((_, acc)) => acc.clone(),
                    None => w.acc.clone(),
                };
                (e, Some(r), l.unwrap_or(r.saturating_sub(e)), acc)
            }
            None => {
                if self.mode == SampleMode::Markers {
                    return;
                }
                let Some(s) = w.switched else { return };
                if w.prio.is_none_or(|p| p >= 100) {
                    return;
                }
                (w.e, None, s.saturating_sub(w.e), w.at_switch.clone())
            }
        };
        let own = (
            CauseKind::Task,
            Cow::Owned(switch_to_user(&w.comm)),
            w.pid,
            w.prio.unwrap_or(0),
        );
        // The marker is written after the clock read: that time is τ's own, not the sample's.
        if let Some((_, r, _, m)) = marker {
            let end = at_read.as_ref().map_or(m, |(out, _)| *out);
            let extra = end.saturating_sub(r);
            if let Some(x) = acc.iter_mut().find(|(k, _)| *k == own) {
                x.1 -= extra.min(x.1);
            }
        }
        if w.noise {
            // A spinning thread's own time inside its gap is no way back to user space: it was
            // on the CPU with no event and did not read its clock — a silent gap.
            let silent = (CauseKind::Unknown, Cow::Borrowed(SILENT_GAP), 0, 0);
            for (k, _) in acc.iter_mut().chain(w.acc.iter_mut()) {
                if *k == own {
                    *k = silent.clone();
                }
            }
        }
        acc.retain(|(_, ns)| *ns > 0);
        let mut sum: Nanos = acc.iter().map(|(_, n)| n).sum();
        if sum > latency {
            // Clocks disagree (trace_clock not mono?): never claim more than the latency.
            let scale = latency as f64 / sum as f64;
            for (_, n) in acc.iter_mut() {
                *n = (*n as f64 * scale).floor() as Nanos;
            }
            sum = acc.iter().map(|(_, n)| n).sum();
        }
        let context_of = |k: &Key<'a>| {
            let i = w.acc.iter().position(|(x, _)| x == k)?;
            w.ctx.get(i).copied().filter(|c| c.events > 0)
        };
        let mut causes: Vec<Cause> = acc
            .into_iter()
            .filter(|(_, ns)| *ns > 0)
            .map(|(key, ns)| {
                let context = context_of(&key);
                let (kind, name, pid, prio) = key;
                Cause {
                    kind,
                    name: name.into_owned(),
                    pid,
                    prio,
                    ns,
                    context,
                }
            })
            .collect();
        sort_causes(&mut causes);
        let cascade = w.prev_switch.is_some_and(|s| e < s);
        let lanes = if latency >= self.opts.threshold_ns {
            w.lanes(cpu, e, e.saturating_add(latency))
        } else {
            SpikeLanes::default()
        };
        if let Some(sw) = w.switched {
            st.last_switch.insert(w.pid, sw);
        }
        let sample = Sample {
            cpu,
            pid: w.pid,
            comm: w.comm.into_owned(),
            prio: w.prio.unwrap_or(0),
            intended_ns: e,
            timer_irq_ns: w.timer_irq,
            from_idle: w.idle_at_e,
            noise: w.noise,
            wakeup_ns: w.woken.filter(|_| !w.noise),
            switch_in_ns: w.switched.filter(|_| !w.noise),
            actual_ns: r,
            latency_ns: latency,
            unexplained_ns: latency - sum,
            causes,
            cascade,
            from_marker: marker.is_some(),
            lanes,
        };
        self.out.samples += 1;
        if sample.latency_ns >= self.opts.threshold_ns {
            self.out.spikes.push(sample);
        }
    }
}
