//! A run.json turned into the rows latlab stores, checked whole before anything is written
//! ([`prepare`]): the record loads (latlab_core's checks, secrets masked), its run id is a UUID
//! (or is derived, for records without one), and no text bound for a column holds a NUL
//! character, which PostgreSQL refuses and SQLite would take: both engines refuse the same
//! records, before the first row. Pure: no database is touched (and so it is fuzzed).

use latlab_core::findings::findings;
use latlab_core::inventory::Inventory;
use latlab_core::model::RunModel;
use latlab_core::record::RunRecord;

use crate::{escape, msg, ou, u, MachineKey, Result, Val};

/// The columns of each table of a run's rows (after the run's integer key, `run`).
pub const CPU_STATS: &[&str] = &[
    "cpu",
    "samples",
    "min_ns",
    "mean_ns",
    "median_ns",
    "p99_ns",
    "p999_ns",
    "p9999_ns",
    "max_ns",
    "missed",
];
pub const HISTOGRAMS: &[&str] = &["cpu", "lower_ns", "count"];
pub const SPIKES: &[&str] = &["idx", "cpu", "at_ns", "latency_ns", "trace_file"];
pub const SPIKE_CAUSES: &[&str] = &["spike_idx", "idx", "kind", "name", "pid", "ns"];
pub const LOADS: &[&str] = &["idx", "profile", "command", "exit_code", "ops"];
pub const FINDINGS: &[&str] = &["idx", "finding_id", "severity", "title"];

/// The columns of the `machines` row and of the `runs` row (without its key, `id`).
pub const MACHINE: &[&str] = &["machine_id", "hostname", "cpu_model", "dmi", "arch"];
pub const RUN: &[&str] = &[
    "run_id",
    "machine_id",
    "label",
    "kernel_release",
    "kernel_version",
    "preemption",
    "source",
    "mode",
    "config_json",
    "started_at",
    "started_unix",
    "duration_ns",
    "complete",
    "cpus",
    "samples",
    "min_ns",
    "mean_ns",
    "median_ns",
    "p99_ns",
    "p999_ns",
    "p9999_ns",
    "max_ns",
    "missed",
    "tool_version",
    "run_json",
];

/// A child table's rows: its name, its columns (after `run`) and the rows.
pub type Table = (&'static str, &'static [&'static str], Vec<Vec<Val>>);

/// A run checked and turned into rows: nothing is written yet.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// The id the run is stored under.
    pub run_id: String,
    /// The `machines` row ([`MACHINE`]).
    pub machine: Vec<Val>,
    /// The `runs` row ([`RUN`]).
    pub run: Vec<Val>,
    /// Each child table with its columns and rows (the run's key is put first when stored).
    pub children: Vec<Table>,
}

/// How a run id is written: a UUID, 8-4-4-4-12 lowercase hex digits.
pub fn is_run_id(id: &str) -> bool {
    uuid::Uuid::try_parse(id).is_ok_and(|u| u.hyphenated().to_string() == id)
}

/// The id a record is stored under: its own `run_id`, which must be a UUID as latlab writes
/// them, else (records of older latlabs, which had none) [`crate::derived_run_id`] of its bytes.
pub fn run_id_of(record: &RunRecord, bytes: &[u8]) -> Result<String> {
    match &record.run_id {
        None => Ok(crate::derived_run_id(bytes)),
        Some(id) if is_run_id(id) => Ok(id.clone()),
        Some(id) => {
            let head: String = id.chars().take(40).collect();
            let mut shown = escape(&head);
            if head.len() < id.len() {
                shown.push('…');
            }
            Err(msg(format!(
                "not a run latlab can store: its run_id `{shown}` ({} bytes) is not a UUID (latlab writes 8-4-4-4-12 lowercase hex digits, e.g. {})",
                id.len(),
                crate::derived_run_id(b"example")
            )))
        }
    }
}

/// Text for a column: refused when it holds a NUL (`field` names it).
fn text(field: &dyn Fn() -> String, s: &str) -> Result<Val> {
    if s.contains('\0') {
        return Err(msg(format!(
            "not a run latlab can store: {} holds a NUL character (\\u0000), which the results database cannot store",
            field()
        )));
    }
    Ok(Val::T(Some(s.to_string())))
}

fn opt_text(field: &dyn Fn() -> String, s: Option<&str>) -> Result<Val> {
    match s {
        Some(s) => text(field, s),
        None => Ok(Val::T(None)),
    }
}

/// Check `bytes` (a run.json) whole and build its rows (the times they are stored,
/// `first_seen_unix` and `stored_unix`, are added when they are written).
pub fn prepare(bytes: &[u8]) -> Result<Prepared> {
    let record =
        RunRecord::from_json(bytes).map_err(|e| msg(format!("not a run latlab can store: {e}")))?;
    let masked = latlab_core::secrets::mask_json(bytes);
    let json = std::str::from_utf8(&masked)
        .map_err(|_| msg("not a run latlab can store: run.json is not UTF-8"))?;
    let run_id = run_id_of(&record, bytes)?;
    let m = RunModel::new(record).map_err(|e| msg(format!("not a run latlab can store: {e}")))?;
    let r = &m.record;
    let key = MachineKey::of(r);
    let machine_id = key.id();
    let f = |name: &'static str| move || name.to_string();
    let machine = vec![
        Val::T(Some(machine_id.clone())),
        opt_text(&f("machine.hostname"), key.hostname.as_deref())?,
        opt_text(&f("machine.cpu_model"), key.cpu_model.as_deref())?,
        opt_text(&f("inventory's DMI product name"), key.dmi.as_deref())?,
        opt_text(&f("machine.arch"), key.arch.as_deref())?,
    ];
    // serde_json writes a NUL as \u0000: the JSON texts hold none.
    let config = serde_json::to_string(&r.config).expect("a run config always serializes");
    let tot = &m.total;
    let run = vec![
        Val::T(Some(run_id.clone())),
        Val::T(Some(machine_id)),
        text(&f("label"), &r.label)?,
        opt_text(
            &f("machine.kernel_release"),
            r.machine.kernel_release.as_deref(),
        )?,
        opt_text(
            &f("machine.kernel_version"),
            r.machine.kernel_version.as_deref(),
        )?,
        opt_text(&f("machine.preemption"), r.machine.preemption.as_deref())?,
        Val::T(Some(r.source.as_str().to_string())),
        text(&f("config.mode"), r.config.mode.as_str())?,
        Val::T(Some(config)),
        opt_text(&f("started_at"), r.started_at.as_deref())?,
        Val::I(r.started_at.as_deref().and_then(crate::parse_time)),
        ou(r.config.measured_ns.or(r.config.duration_ns)),
        Val::I(Some(r.complete as i64)),
        u(r.cpus.len() as u64),
        u(tot.samples),
        ou(tot.min_ns),
        ou(tot.mean_ns),
        ou(tot.median_ns),
        ou(tot.p99_ns),
        ou(tot.p999_ns),
        ou(tot.p9999_ns),
        ou(tot.max_ns),
        u(tot.missed_periods),
        opt_text(&f("tool_version"), r.tool_version.as_deref())?,
        Val::T(Some(json.to_string())),
    ];

    let cpu_stats = r
        .cpus
        .iter()
        .map(|c| {
            let st = &c.stats;
            vec![
                u(c.cpu as u64),
                u(st.samples),
                ou(st.min_ns),
                ou(st.mean_ns),
                ou(st.median_ns),
                ou(st.p99_ns),
                ou(st.p999_ns),
                ou(st.p9999_ns),
                ou(st.max_ns),
                u(st.missed_periods),
            ]
        })
        .collect();
    let mut hist = vec![];
    for c in &r.cpus {
        for [lower, count] in &c.histogram.buckets {
            hist.push(vec![u(c.cpu as u64), u(*lower), u(*count)]);
        }
    }
    let mut spikes = vec![];
    let mut causes = vec![];
    for (i, sp) in r.spikes.iter().enumerate() {
        spikes.push(vec![
            u(i as u64),
            u(sp.cpu as u64),
            u(sp.at_ns),
            u(sp.latency_ns),
            opt_text(
                &|| format!("spikes[{i}].trace_file"),
                sp.trace_file.as_deref(),
            )?,
        ]);
        for (j, c) in sp.causes.iter().enumerate() {
            causes.push(vec![
                u(i as u64),
                u(j as u64),
                text(&|| format!("spikes[{i}].causes[{j}].kind"), c.kind.as_str())?,
                text(&|| format!("spikes[{i}].causes[{j}].name"), &c.name)?,
                Val::I(Some(c.pid)),
                u(c.ns),
            ]);
        }
    }
    let mut loads = vec![];
    for (i, l) in r.loads.iter().enumerate() {
        loads.push(vec![
            u(i as u64),
            text(&|| format!("loads[{i}].profile"), &l.profile)?,
            text(&|| format!("loads[{i}].command"), &l.command)?,
            Val::I(l.exit.map(i64::from)),
            Val::F(l.ops.filter(|o| o.is_finite())),
        ]);
    }
    // `latlab check`'s findings on the machine as the run recorded it.
    let found = r
        .inventory
        .as_ref()
        .and_then(|i| serde_json::from_value::<Inventory>(i.clone()).ok())
        .map(|inv| findings(&inv))
        .unwrap_or_default();
    let mut finding_rows = vec![];
    for (i, fd) in found.iter().enumerate() {
        let field = || format!("the inventory (finding {})", escape(&fd.id));
        finding_rows.push(vec![
            u(i as u64),
            text(&field, fd.id.as_str())?,
            text(&field, fd.severity.as_str())?,
            text(&field, fd.title.as_str())?,
        ]);
    }
    Ok(Prepared {
        run_id,
        machine,
        run,
        children: vec![
            ("cpu_stats", CPU_STATS, cpu_stats),
            ("histograms", HISTOGRAMS, hist),
            ("spikes", SPIKES, spikes),
            ("spike_causes", SPIKE_CAUSES, causes),
            ("loads", LOADS, loads),
            ("findings", FINDINGS, finding_rows),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ESCAPES: &[u8] = include_bytes!("../../../fuzz/corpus/run_json/escapes.json");

    #[test]
    fn run_ids_are_uuids_as_latlab_writes_them() {
        let id = crate::new_run_id();
        assert!(is_run_id(&id));
        assert!(is_run_id(&crate::derived_run_id(b"x")));
        for bad in [
            String::new(),
            "abcd".into(),
            id.to_uppercase(),
            id.replace('-', ""),
            format!("{{{id}}}"),
            format!("urn:uuid:{id}"),
            format!("{id} "),
        ] {
            assert!(!is_run_id(&bad), "{bad}");
        }
    }

    /// A record's rows, and what refuses it: its strings with a NUL named by field, a run id
    /// that is not a UUID; a record without an id gets the one derived from its bytes.
    #[test]
    fn a_record_is_checked_whole_and_turned_into_rows() {
        let p = prepare(ESCAPES).unwrap();
        assert_eq!(p.run_id, crate::derived_run_id(ESCAPES));
        assert_eq!(p.run.len(), RUN.len());
        assert_eq!(p.machine.len(), MACHINE.len());
        for (table, cols, rows) in &p.children {
            assert!(rows.iter().all(|r| r.len() == cols.len()), "{table}");
        }
        let rows = |t: &str| p.children.iter().find(|c| c.0 == t).unwrap().2.len();
        assert!(rows("histograms") > 0 && rows("spike_causes") > 0 && rows("loads") > 0);

        let mut v: serde_json::Value = serde_json::from_slice(ESCAPES).unwrap();
        v["spikes"][0]["causes"][0]["name"] = "a\u{0}".into();
        let e = prepare(&serde_json::to_vec(&v).unwrap()).unwrap_err();
        assert!(
            e.to_string()
                .contains("spikes[0].causes[0].name holds a NUL character"),
            "{e}"
        );
        let mut v: serde_json::Value = serde_json::from_slice(ESCAPES).unwrap();
        v["run_id"] = "\u{1b}[2J".repeat(1000).into();
        let e = prepare(&serde_json::to_vec(&v).unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("is not a UUID") && !e.contains('\u{1b}') && e.len() < 300,
            "{e}"
        );
        // A NUL inside the JSON text's other strings is stored escaped (\u0000): fine.
        let mut v: serde_json::Value = serde_json::from_slice(ESCAPES).unwrap();
        v["warnings"] = serde_json::json!(["a\u{0}b"]);
        assert!(prepare(&serde_json::to_vec(&v).unwrap()).is_ok());
    }
}
