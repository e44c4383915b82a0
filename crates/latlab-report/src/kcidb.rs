//! `latlab export RUN --format kcidb`: a run as KCIDB I/O JSON (schema 5.3, the `kcidb-io`
//! package's `LATEST`), the format KernelCI's common database takes from CI systems.
//!
//! One checkout (the kernel that ran: its release and version from run.json's `machine`, a
//! tree and commit when given), one build of it, and tests with dotted paths under `latlab`:
//! the run itself (`latlab`, with run.json and report.html as `output_files`), per CPU and for
//! all CPUs (`latlab.MODE.cpuN`, `latlab.MODE.all`, each with children `min`, `avg`, `p99`,
//! `p99_9`, `max`, `missed_periods`), the gates the record keeps (`latlab.gate.max_latency`,
//! `latlab.gate.until`: PASS or FAIL) and the traced spikes (`latlab.trace.spikes`,
//! `latlab.trace.spikes.NNN`). Measurements are `DONE` with a `number` (latencies in seconds,
//! unit `s`, prefix `metric`, the exact ns in `misc`); a figure the record cannot give (no
//! sample, a percentile among imported samples above the histogram limit) is `SKIP` with a
//! comment. Every id is `ORIGIN:RUN_ID…`, so exporting a run twice gives the same ids.
//! Pure: the caller gives the run id, the origin and the files' URLs ([`Inputs`]).

use latlab_core::model::RunModel;
use latlab_core::record::{RunRecord, SpikeRecord};
use latlab_core::stats::Stats;
use serde_json::{json, Map, Value};

/// The schema version written: KCIDB I/O 5.3.
pub const VERSION: (u32, u32) = (5, 3);

/// The origin when `--kcidb-origin` is not given.
pub const DEFAULT_ORIGIN: &str = "latlab";

/// What the record does not hold.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// The submitting CI system (checked by [`check_origin`]).
    pub origin: String,
    /// run.json's `run_id` (or the id derived from its bytes).
    pub run_id: String,
    /// The run's files as `(name, url)`: run.json, report.html …
    pub files: Vec<(String, String)>,
    /// Per spike (by index), its files as `(name, url)`.
    pub spike_files: Vec<Vec<(String, String)>>,
}

/// A KCIDB origin: `^[a-z0-9_]+$`, or why not (one line naming the flag).
pub fn check_origin(origin: &str) -> Result<(), String> {
    if !origin.is_empty()
        && origin
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return Ok(());
    }
    Err(format!(
        "--kcidb-origin {:?}: a KCIDB origin is lowercase letters, digits and '_' only (e.g. {DEFAULT_ORIGIN}, my_lab)",
        crate::escape::escape(origin)
    ))
}

/// A `file://` URL of an absolute path, every byte outside RFC 3986's unreserved set and `/`
/// percent-encoded.
pub fn file_url(path: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut s = String::from("file://");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

/// Text for a KCIDB string (`^[^\0]*$`): NUL becomes U+FFFD.
fn text(s: &str) -> String {
    s.replace('\0', "\u{fffd}")
}

/// A path segment (`[a-zA-Z0-9_-]+`).
fn segment(s: &str) -> String {
    let s: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "_".into()
    } else {
        s
    }
}

fn seconds(ns: u64) -> Value {
    json!({"value": ns as f64 / 1e9, "unit": "s", "prefix": "metric"})
}

fn files(f: &[(String, String)]) -> Value {
    f.iter()
        .map(|(name, url)| json!({"name": segment_name(name), "url": url}))
        .collect()
}

/// A resource name (`^[^/\0]+$`).
fn segment_name(s: &str) -> String {
    let n = text(s).replace('/', "_");
    if n.is_empty() {
        "_".into()
    } else {
        n
    }
}

/// What every test shares.
struct Ctx {
    origin: String,
    run_id: String,
    build_id: String,
    environment: Value,
    start_time: Option<String>,
    duration: Option<f64>,
}

impl Ctx {
    fn test(&self, path: &str, status: &str) -> Map<String, Value> {
        let mut t = Map::new();
        t.insert(
            "id".into(),
            format!("{}:{}:{path}", self.origin, self.run_id).into(),
        );
        t.insert("build_id".into(), self.build_id.clone().into());
        t.insert("origin".into(), self.origin.clone().into());
        t.insert("path".into(), path.into());
        t.insert("status".into(), status.into());
        t.insert("environment".into(), self.environment.clone());
        if let Some(s) = &self.start_time {
            t.insert("start_time".into(), s.clone().into());
        }
        if let Some(d) = self.duration {
            t.insert("duration".into(), d.into());
        }
        t
    }
}

/// The environment: the machine, its DMI vendor and device-tree `compatible` where the
/// inventory has them.
fn environment(r: &RunRecord) -> Value {
    let m = &r.machine;
    let inv = r.inventory.as_ref();
    let at = |p: &str| inv.and_then(|i| i.pointer(p)).cloned();
    let mut misc = json!({
        "hostname": m.hostname, "arch": m.arch, "cpu_model": m.cpu_model,
        "cpus_online": m.cpus_online, "preemption": m.preemption, "cmdline": m.cmdline,
        "virtualized": m.virtualized, "kernel_release": m.kernel_release,
        "kernel_version": m.kernel_version,
    });
    for (k, p) in [("dmi", "/dmi_id"), ("vendor", "/virt/vendor")] {
        if let Some(v) = at(p).filter(|v| !v.is_null()) {
            misc[k] = v;
        }
    }
    let mut env = Map::new();
    let parts: Vec<String> = [&m.hostname, &m.cpu_model, &m.arch]
        .into_iter()
        .flatten()
        .map(|s| text(s))
        .collect();
    if !parts.is_empty() {
        env.insert("comment".into(), parts.join(", ").into());
    }
    let compatible: Vec<Value> = at("/device_tree/compatible")
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
        .into_iter()
        .filter(|v| {
            v.as_str().is_some_and(|s| {
                !s.is_empty() && !s.contains([' ', '\0']) && s.split(',').all(|p| !p.is_empty())
            })
        })
        .collect();
    if !compatible.is_empty() {
        env.insert("compatible".into(), compatible.into());
    }
    env.insert("misc".into(), misc);
    Value::Object(env)
}

/// The abbreviated commit in a kernel release made by `CONFIG_LOCALVERSION_AUTO`
/// (`6.12.0-rc1-00123-gabcdef12`, maybe `-dirty` or `+` after it).
fn release_commit(release: &str) -> Option<&str> {
    release.split('-').find_map(|p| {
        let h = p.strip_prefix('g')?.trim_end_matches('+');
        (h.len() >= 7 && h.len() <= 40 && h.bytes().all(|b| b.is_ascii_hexdigit())).then_some(h)
    })
}

fn checkout(r: &RunRecord, id: &str, origin: &str) -> Value {
    let m = &r.machine;
    let mut c = json!({"id": id, "origin": origin, "valid": true, "misc": {
        "kernel_release": m.kernel_release, "kernel_version": m.kernel_version,
    }});
    c["comment"] = match (&m.kernel_release, &m.kernel_version) {
        (Some(rel), Some(v)) => format!("Linux {} ({})", text(rel), text(v)),
        (Some(rel), None) => format!("Linux {}", text(rel)),
        _ => "the kernel is not known (run.json has no machine.kernel_release)".into(),
    }
    .into();
    if let Some(rel) = &m.kernel_release {
        if let Some(h) = release_commit(rel) {
            c["git_commit_name"] = text(rel).into();
            c["misc"]["commit_abbrev"] = h.into();
        }
    }
    c
}

fn build(r: &RunRecord, id: &str, checkout_id: &str, origin: &str) -> Value {
    let m = &r.machine;
    let mut b = json!({"id": id, "origin": origin, "checkout_id": checkout_id, "status": "PASS",
        "comment": "the kernel that ran the measurement (it booted: its build passed)",
        "misc": {"kernel_release": m.kernel_release, "preemption": m.preemption}});
    if let Some(a) = &m.arch {
        let a: String = a
            .to_ascii_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        b["architecture"] = a.into();
    }
    if let Some(p) = &m.preemption {
        b["config_name"] = format!("preempt_{}", segment(p)).into();
    }
    b
}

/// A latency figure: DONE with its value, or SKIP saying why there is none.
fn figure(ctx: &Ctx, path: &str, ns: Option<u64>) -> Value {
    let t = match ns {
        Some(ns) => {
            let mut t = ctx.test(path, "DONE");
            t.insert("number".into(), seconds(ns));
            t.insert("misc".into(), json!({ "ns": ns }));
            t
        }
        None => {
            let mut t = ctx.test(path, "SKIP");
            t.insert("comment".into(), "no value: no sample, or a percentile among imported samples above the histogram limit".into());
            t
        }
    };
    Value::Object(t)
}

fn cpu_tests(out: &mut Vec<Value>, ctx: &Ctx, base: &str, s: &Stats) {
    let mut t = ctx.test(base, if s.max_ns.is_some() { "DONE" } else { "SKIP" });
    if let Some(max) = s.max_ns {
        t.insert("number".into(), seconds(max));
        t.insert(
            "comment".into(),
            format!("max latency of {} samples", s.samples).into(),
        );
    }
    t.insert(
        "misc".into(),
        json!({"samples": s.samples, "min_ns": s.min_ns, "mean_ns": s.mean_ns,
            "median_ns": s.median_ns, "p99_ns": s.p99_ns, "p999_ns": s.p999_ns,
            "p9999_ns": s.p9999_ns, "max_ns": s.max_ns, "missed_periods": s.missed_periods,
            "unknown_above": s.unknown_above}),
    );
    out.push(Value::Object(t));
    for (stat, v) in [
        ("min", s.min_ns),
        ("avg", s.mean_ns),
        ("p99", s.p99_ns),
        ("p99_9", s.p999_ns),
        ("max", s.max_ns),
    ] {
        out.push(figure(ctx, &format!("{base}.{stat}"), v));
    }
    let mut t = ctx.test(&format!("{base}.missed_periods"), "DONE");
    t.insert(
        "number".into(),
        json!({"value": s.missed_periods, "unit": "periods"}),
    );
    out.push(Value::Object(t));
}

/// The gates the record keeps; the second value: whether any failed, None without a gate.
fn gate_tests(out: &mut Vec<Value>, ctx: &Ctx, r: &RunRecord) -> Option<bool> {
    let mut failed = None;
    if let Some(v) = latlab_core::gates::limit::max_latency(r) {
        let mut t = ctx.test(
            "latlab.gate.max_latency",
            if v.passed { "PASS" } else { "FAIL" },
        );
        if let Some(ns) = v.observed_ns {
            t.insert("number".into(), seconds(ns));
        }
        t.insert(
            "comment".into(),
            format!("--max-latency {} ns on the {} series", v.limit_ns, v.series).into(),
        );
        t.insert(
            "misc".into(),
            json!({"limit_ns": v.limit_ns, "observed_ns": v.observed_ns, "series": v.series}),
        );
        out.push(Value::Object(t));
        failed = Some(!v.passed);
    }
    if let Some(u) = &r.until {
        let mut t = ctx.test(
            "latlab.gate.until",
            if u.converged { "PASS" } else { "FAIL" },
        );
        if let Some(h) = u.half_width.filter(|h| h.is_finite()) {
            t.insert("number".into(), json!({ "value": h }));
        }
        t.insert(
            "comment".into(),
            format!(
                "--until {}:{}%: the widest relative half-width (number) against the precision",
                text(&u.statistic),
                u.precision * 100.0
            )
            .into(),
        );
        t.insert(
            "misc".into(),
            json!({"statistic": text(&u.statistic), "precision": u.precision,
                "after_ns": u.after_ns, "half_width": u.half_width}),
        );
        out.push(Value::Object(t));
        failed = Some(failed.unwrap_or(false) || !u.converged);
    }
    failed
}

fn spike_test(
    ctx: &Ctx,
    i: usize,
    s: &SpikeRecord,
    files_of: Option<&Vec<(String, String)>>,
) -> Value {
    let mut t = ctx.test(&format!("latlab.trace.spikes.{:03}", i + 1), "DONE");
    t.insert("number".into(), seconds(s.latency_ns));
    let why = s.causes.first().map_or(String::new(), |c| {
        format!(
            ": largest cause {} {} ({} ns)",
            c.kind.as_str(),
            text(&c.name),
            c.ns
        )
    });
    t.insert(
        "comment".into(),
        format!("CPU {}, {} ns{why}", s.cpu, s.latency_ns).into(),
    );
    let causes: Vec<Value> = s
        .causes
        .iter()
        .take(8)
        .map(|c| json!({"kind": c.kind.as_str(), "name": text(&c.name), "ns": c.ns}))
        .collect();
    t.insert(
        "misc".into(),
        json!({"cpu": s.cpu, "at_ns": s.at_ns, "latency_ns": s.latency_ns, "causes": causes}),
    );
    if let Some(f) = files_of.filter(|f| !f.is_empty()) {
        t.insert("output_files".into(), files(f));
    }
    Value::Object(t)
}

/// The run as KCIDB I/O JSON (`inputs.origin` checked by [`check_origin`] before).
pub fn render(m: &RunModel, inputs: &Inputs) -> Vec<u8> {
    let r = &m.record;
    let origin = inputs.origin.as_str();
    let checkout_id = format!("{origin}:{}", inputs.run_id);
    let build_id = checkout_id.clone();
    let valid_time =
        |t: &Option<String>| t.clone().filter(|s| s.parse::<jiff::Timestamp>().is_ok());
    let ctx = Ctx {
        origin: origin.into(),
        run_id: inputs.run_id.clone(),
        build_id: build_id.clone(),
        environment: environment(r),
        start_time: valid_time(&r.started_at),
        duration: r
            .config
            .measured_ns
            .or(r.config.duration_ns)
            .map(|ns| ns as f64 / 1e9),
    };
    let mode = segment(&r.config.mode);
    let mut tests = Vec::new();
    for c in &m.cpus {
        cpu_tests(
            &mut tests,
            &ctx,
            &format!("latlab.{mode}.cpu{}", c.cpu),
            &c.stats,
        );
    }
    if !m.cpus.is_empty() {
        cpu_tests(&mut tests, &ctx, &format!("latlab.{mode}.all"), &m.total);
    }
    let failed = gate_tests(&mut tests, &ctx, r);
    if r.trace.is_some() || !r.spikes.is_empty() {
        let mut t = ctx.test("latlab.trace.spikes", "DONE");
        let (traced, not_traced) = r.trace.as_ref().map_or((r.spikes.len() as u64, 0), |t| {
            (u64::from(t.traced), t.not_traced)
        });
        t.insert(
            "number".into(),
            json!({"value": r.spikes.len(), "unit": "spikes"}),
        );
        t.insert(
            "misc".into(),
            json!({"traced": traced, "not_traced": not_traced}),
        );
        tests.push(Value::Object(t));
        for (i, s) in r.spikes.iter().enumerate() {
            tests.push(spike_test(&ctx, i, s, inputs.spike_files.get(i)));
        }
    }
    let status = match (r.complete, failed) {
        (false, _) => "ERROR",
        (true, Some(true)) => "FAIL",
        (true, Some(false)) => "PASS",
        (true, None) => "DONE",
    };
    let mut root = ctx.test("latlab", status);
    root.insert(
        "comment".into(),
        if r.complete {
            text(&r.label)
        } else {
            format!(
                "{} (incomplete: the run ended before its final record)",
                text(&r.label)
            )
        }
        .into(),
    );
    if !inputs.files.is_empty() {
        root.insert("output_files".into(), files(&inputs.files));
    }
    root.insert(
        "misc".into(),
        json!({"label": text(&r.label), "run_id": inputs.run_id, "source": r.source,
            "backend": r.config.backend, "mode": r.config.mode, "interval_ns": r.config.interval_ns,
            "tool_version": r.tool_version, "command_line": r.command_line,
            "complete": r.complete, "warnings": r.warnings}),
    );
    tests.insert(0, Value::Object(root));
    let doc = json!({
        "version": {"major": VERSION.0, "minor": VERSION.1},
        "checkouts": [checkout(r, &checkout_id, origin)],
        "builds": [build(r, &build_id, &checkout_id, origin)],
        "tests": tests,
    });
    let mut out = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use latlab_core::hist::{Histogram, Layout};
    use latlab_core::record::*;

    use super::*;

    fn model(limit: Option<u64>) -> RunModel {
        let mut h = Histogram::new(Layout::default());
        for v in [1_500, 2_000, 250_000] {
            h.record(v);
        }
        let config = RunConfig {
            max_latency_ns: limit,
            mode: "wakeup".into(),
            measured_ns: Some(2_000_000_000),
            ..RunConfig::default()
        };
        let mut r = RunRecord::new(
            "lab\0run",
            Source::Latlab,
            config,
            vec![CpuRecord::new(3, h.to_record())],
        );
        r.machine.kernel_release = Some("6.12.0-rc1-00123-gabcdef12-dirty".into());
        r.machine.arch = Some("x86_64".into());
        r.complete = true;
        r.started_at = Some("2026-11-28T06:00:00Z".into());
        r.inventory = Some(
            json!({"device_tree": {"compatible": ["acme,board", "bad one", "acme,soc"]},
            "virt": {"vendor": "QEMU"}, "dmi_id": {"product_name": "Board 1"}}),
        );
        r.refresh().unwrap();
        RunModel::new(r).unwrap()
    }

    fn inputs() -> Inputs {
        Inputs {
            origin: "lab_1".into(),
            run_id: "0f0e".into(),
            files: vec![("run.json".into(), "file:///r/run.json".into())],
            spike_files: vec![],
        }
    }

    fn doc(limit: Option<u64>) -> Value {
        serde_json::from_slice(&render(&model(limit), &inputs())).unwrap()
    }

    fn test<'a>(d: &'a Value, path: &str) -> &'a Value {
        d["tests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["path"] == path)
            .unwrap_or_else(|| panic!("no test {path}"))
    }

    #[test]
    fn checkout_build_and_tests_with_deterministic_ids() {
        let d = doc(Some(100_000));
        assert_eq!(d["version"], json!({"major": 5, "minor": 3}));
        assert_eq!(d["checkouts"][0]["id"], "lab_1:0f0e");
        assert_eq!(
            d["checkouts"][0]["git_commit_name"],
            "6.12.0-rc1-00123-gabcdef12-dirty"
        );
        assert_eq!(d["builds"][0]["checkout_id"], "lab_1:0f0e");
        assert_eq!(d["builds"][0]["architecture"], "x86_64");
        let max = test(&d, "latlab.wakeup.cpu3.max");
        assert_eq!(max["id"], "lab_1:0f0e:latlab.wakeup.cpu3.max");
        assert_eq!(max["status"], "DONE");
        assert_eq!(
            max["number"],
            json!({"value": 250e-6, "unit": "s", "prefix": "metric"})
        );
        assert_eq!(max["misc"]["ns"], 250_000);
        assert_eq!(max["duration"], 2.0);
        assert_eq!(max["start_time"], "2026-11-28T06:00:00Z");
        assert_eq!(
            max["environment"]["compatible"],
            json!(["acme,board", "acme,soc"])
        );
        assert_eq!(max["environment"]["misc"]["vendor"], "QEMU");
        assert_eq!(max["environment"]["misc"]["dmi"]["product_name"], "Board 1");
        assert_eq!(
            test(&d, "latlab.wakeup.all.missed_periods")["number"]["unit"],
            "periods"
        );
        let gate = test(&d, "latlab.gate.max_latency");
        assert_eq!(gate["status"], "FAIL");
        assert_eq!(test(&d, "latlab")["status"], "FAIL");
        assert_eq!(test(&d, "latlab")["output_files"][0]["name"], "run.json");
        assert_eq!(
            render(&model(Some(100_000)), &inputs()),
            render(&model(Some(100_000)), &inputs())
        );
        let ids: std::collections::BTreeSet<&str> = d["tests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap())
            .collect();
        assert_eq!(
            ids.len(),
            d["tests"].as_array().unwrap().len(),
            "ids unique"
        );
    }

    #[test]
    fn a_passed_gate_and_no_gate() {
        let d = doc(Some(1_000_000));
        assert_eq!(test(&d, "latlab.gate.max_latency")["status"], "PASS");
        assert_eq!(test(&d, "latlab")["status"], "PASS");
        let d = doc(None);
        assert_eq!(test(&d, "latlab")["status"], "DONE");
        assert!(!d.to_string().contains("latlab.gate"));
    }

    #[test]
    fn spikes_with_their_causes_and_files() {
        let mut m = model(None);
        m.record.spikes = vec![serde_json::from_value(json!({
            "cpu": 3, "at_ns": 5, "latency_ns": 250_000,
            "causes": [{"kind": "irq", "name": "IRQ 4 (ttyS0)", "pid": 0, "prio": 0, "ns": 200_000}],
            "trace_file": "spikes/001/trace.txt"}))
        .unwrap()];
        let mut i = inputs();
        i.spike_files = vec![vec![(
            "trace.txt".into(),
            "file:///r/spikes/001/trace.txt".into(),
        )]];
        let d: Value = serde_json::from_slice(&render(&m, &i)).unwrap();
        assert_eq!(test(&d, "latlab.trace.spikes")["number"]["value"], 1);
        let s = test(&d, "latlab.trace.spikes.001");
        assert_eq!(s["misc"]["causes"][0]["name"], "IRQ 4 (ttyS0)");
        assert_eq!(s["output_files"][0]["name"], "trace.txt");
        assert!(s["comment"].as_str().unwrap().contains("irq IRQ 4 (ttyS0)"));
    }

    #[test]
    fn origins_urls_and_releases() {
        assert!(check_origin("latlab").is_ok());
        assert!(check_origin("my_lab2").is_ok());
        for bad in ["", "Lab", "my-lab", "a:b", "lab\n"] {
            let e = check_origin(bad).unwrap_err();
            assert!(e.starts_with("--kcidb-origin ") && !e.contains('\n'), "{e}");
        }
        assert_eq!(
            file_url(std::path::Path::new("/tmp/a b/r%ü.json")),
            "file:///tmp/a%20b/r%25%C3%BC.json"
        );
        assert_eq!(
            release_commit("6.12.0-rc1-00123-gabcdef12+"),
            Some("abcdef12")
        );
        assert_eq!(release_commit("6.1.0-18-amd64"), None);
        assert_eq!(release_commit("6.12.0-rt-generic"), None);
        assert_eq!(segment("p99.9"), "p99_9");
    }
}
