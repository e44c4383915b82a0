//! latlab's osnoise instance: the global settings saved in the ledger, then set; the
//! instance with the tracer's events; the records' decoder.

use std::fs;
use std::path::Path;

use latlab_core::trace::raw::OsnoiseDecoder;

use super::{Config, PERIOD_US};
use crate::ledger::{knob_value, Entry, EntryId, Ledger};
use crate::timerlat::setup::{
    conflicts, knob, option, read_value, restore, save_and_write, workload,
};
use crate::timerlat::Threads;
use crate::tracefs::{InstanceSpec, RawLayout, Recorder, RecorderConfig};

/// The tracer's events latlab reads (the NMI's is absent from some kernels).
const EVENTS: &[(&str, bool)] = &[
    ("osnoise/sample_threshold", true),
    ("osnoise/irq_noise", true),
    ("osnoise/softirq_noise", true),
    ("osnoise/thread_noise", true),
    ("osnoise/nmi_noise", false),
];

const SPEC: InstanceSpec = InstanceSpec {
    events: EVENTS,
    vectors: false,
    timer_irq: false,
    overwrite: false,
    stop_trigger: false,
};

/// latlab's osnoise instance, running.
pub(super) struct Instance {
    pub(super) rec: Recorder,
    knobs: Vec<(EntryId, Entry)>,
    pub(super) decoder: OsnoiseDecoder,
}

impl Instance {
    pub(super) fn start(
        root: &Path,
        cfg: &Config,
        ledger: &mut Ledger,
    ) -> Result<Instance, String> {
        let name = format!("latlab-{}-osnoise", std::process::id());
        if let Some(c) = conflicts(root, &name, crate::timerlat::OSNOISE_CONFLICTS) {
            return Err(c);
        }
        let mut knobs = Vec::new();
        match Self::setup(root, &name, cfg, ledger, &mut knobs) {
            Ok((rec, decoder)) => Ok(Instance {
                rec,
                knobs,
                decoder,
            }),
            Err(e) => {
                restore(ledger, &mut knobs);
                Err(e)
            }
        }
    }

    fn setup(
        root: &Path,
        name: &str,
        cfg: &Config,
        ledger: &mut Ledger,
        knobs: &mut Vec<(EntryId, Entry)>,
    ) -> Result<(Recorder, OsnoiseDecoder), String> {
        let o = root.join("osnoise");
        let cpus = cfg
            .cpus
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(",");
        // As timerlat's: `osnoise/cpus` wants its NUL.
        let p = o.join("cpus");
        let original = format!("{}\0", knob_value(&read_value(&p)?));
        save_and_write(ledger, knobs, &p, original, &format!("{cpus}\0"))?;
        // The period before the runtime: the kernel refuses a runtime above the period.
        knob(ledger, knobs, &o.join("period_us"), &PERIOD_US.to_string())?;
        knob(ledger, knobs, &o.join("runtime_us"), &PERIOD_US.to_string())?;
        for f in ["stop_tracing_us", "stop_tracing_total_us", "print_stack"] {
            if o.join(f).is_file() {
                knob(ledger, knobs, &o.join(f), "0")?;
            }
        }
        knob(
            ledger,
            knobs,
            &root.join("tracing_thresh"),
            &(cfg.threshold_ns / 1_000).to_string(),
        )?;
        workload(ledger, knobs, &o.join("options"), Threads::Kernel)?;
        // hwnoise: the threads spin with interrupts disabled (osnoise: enabled, where the
        // kernel has the option; Engine::start refuses hwnoise without it).
        let options = o.join("options");
        if !option(ledger, knobs, &options, "OSNOISE_IRQ_DISABLE", cfg.irqs_off)? && cfg.irqs_off {
            return Err(format!(
                "{} has no OSNOISE_IRQ_DISABLE option",
                options.display()
            ));
        }
        let rec = Recorder::create_with(
            root,
            &RecorderConfig {
                name: name.to_string(),
                buffer_kb: cfg.buffer_kb,
            },
            &SPEC,
            ledger,
        )
        .map_err(|e| format!("cannot create the osnoise instance: {e}"))?;
        let fail = |rec: Recorder, ledger: &mut Ledger, e: String| {
            let _ = rec.remove(ledger);
            Err(e)
        };
        let mut events = vec!["ftrace/osnoise".to_string()];
        events.extend(
            EVENTS
                .iter()
                .filter(|(e, _)| rec.dir().join("events").join(e).join("format").is_file())
                .map(|(e, _)| e.to_string()),
        );
        let layout = match RawLayout::read(rec.dir(), &events) {
            Ok(l) => l,
            Err(e) => return fail(rec, ledger, format!("cannot read the osnoise formats: {e}")),
        };
        let formats: Vec<&str> = layout.formats.iter().map(String::as_str).collect();
        let decoder = match OsnoiseDecoder::new(&layout.header_page, &layout.header_event, &formats)
        {
            Ok(d) => d,
            Err(e) => return fail(rec, ledger, format!("the osnoise records' layout: {e}")),
        };
        if let Err(e) = fs::write(rec.dir().join("current_tracer"), "osnoise") {
            let why = match e.raw_os_error() {
                Some(libc::EBUSY) => {
                    "another osnoise or timerlat user holds the tracer (rtla?)".to_string()
                }
                _ => e.to_string(),
            };
            return fail(
                rec,
                ledger,
                format!("cannot start the osnoise tracer in latlab's instance: {why}"),
            );
        }
        if let Err(e) = rec.start() {
            return fail(
                rec,
                ledger,
                format!("cannot switch the osnoise instance on: {e}"),
            );
        }
        Ok((rec, decoder))
    }

    pub(super) fn finish(mut self, ledger: &mut Ledger) -> Vec<String> {
        let mut out = Vec::new();
        let _ = self.rec.stop();
        let _ = fs::write(self.rec.dir().join("current_tracer"), "nop");
        if let Err(e) = self.rec.remove(ledger) {
            out.push(format!("could not remove the osnoise instance: {e}"));
        }
        out.extend(restore(ledger, &mut self.knobs));
        out
    }
}

/// The events CPU `cpu`'s ring of the instance in `dir` dropped because it was full
/// (`per_cpu/cpuN/stats`' `dropped events`: a ring that keeps what it has drops new events
/// without flagging its pages); None when unreadable.
pub(super) fn dropped(dir: &Path, cpu: u32) -> Option<u64> {
    let text = fs::read_to_string(dir.join(format!("per_cpu/cpu{cpu}/stats"))).ok()?;
    dropped_of(&text)
}

fn dropped_of(stats: &str) -> Option<u64> {
    stats
        .lines()
        .find_map(|l| l.strip_prefix("dropped events:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_dropped_count_is_read_from_the_stats() {
        let text = "entries: 0\noverrun: 0\ncommit overrun: 0\nbytes: 0\noldest event ts:     0.000000\nnow ts: 80139.040113\ndropped events: 417\nread events: 9\n";
        assert_eq!(super::dropped_of(text), Some(417));
        assert_eq!(super::dropped_of("entries: 0\n"), None);
    }
}
