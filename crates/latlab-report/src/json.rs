//! The JSON report: the interface contract's keys (design.md), all times integer ns.

use latlab_core::model::RunModel;
use serde_json::{json, Value};

/// The report as a JSON value (also what `latlab run --format json` prints).
pub fn value(m: &RunModel) -> Value {
    let r = &m.record;
    let cpus: Vec<Value> = r
        .cpus
        .iter()
        .map(|c| {
            let mut v = serde_json::to_value(&c.stats).expect("stats serialize");
            let o = v.as_object_mut().expect("stats is an object");
            o.insert("cpu".into(), json!(c.cpu));
            o.insert("per_second_max_ns".into(), json!(c.per_second_max_ns));
            o.insert("top_spikes".into(), json!(c.top_spikes));
            v
        })
        .collect();
    let mut v = json!({
        "schema_version": r.schema_version,
        "label": r.label,
        "source": r.source,
        "complete": r.complete,
        "started_at": r.started_at,
        "ended_at": r.ended_at,
        "command_line": r.command_line,
        "config": r.config,
        "machine": r.machine,
        "total": r.total,
        "cpus": cpus,
        "spikes": r.spikes,
        "trace": r.trace,
        "loads": r.loads,
        "activity": r.activity,
        "inventory": r.inventory,
        "warnings": r.warnings,
        "notes": r.notes,
    });
    crate::modes::add_json(&mut v, m);
    insert_delays(&mut v, &r.spikes);
    v
}

/// `"delays"`: "what delays this machine" over the traced spikes — per cause (kind, name) the
/// spikes it appeared in, `total_ns`, `worst_ns` and `share` of the summed spike latency;
/// present only when a spike has causes.
fn insert_delays(v: &mut Value, spikes: &[latlab_core::record::SpikeRecord]) {
    let rows = latlab_core::trace::summarize(spikes);
    if !rows.is_empty() {
        v["delays"] = json!(rows);
    }
}

pub fn render(m: &RunModel) -> Vec<u8> {
    let mut val = value(m);
    if let Some(sc) = &m.record.scenario {
        val["scenario"] = serde_json::to_value(sc).expect("a scenario record serializes");
    }
    let mut v = serde_json::to_vec_pretty(&val).expect("json serializes");
    v.push(b'\n');
    v
}
