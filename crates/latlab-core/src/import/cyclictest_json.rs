//! cyclictest `--json=FILE` (rt-tests ≥ 2.0).
//!
//! Quirks (see `/work/shared/formats/README.md`): the keys `"cmdline:"` and
//! `"rt_test_version:"` end with a colon; `resolution_in_ns` is the `-N` flag (values in ns),
//! not a resolution; there is no overflow count, so overflows are `cycles` minus the samples in
//! the histogram; the histogram limit is the `-h`/`-H` value of the command line.
//! A file written without `-h` has empty histograms: it has no distribution to import, and
//! that is an error rather than a histogram made up from min/avg/max.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::{
    build_hist, check_threads, cmdline_opt, mul, record, total, Ctx, ImportError, Imported,
    Printed, Thread,
};
use crate::hist::{Histogram, Layout};
use crate::record::{Machine, RunRecord, Source, ThreadInfo};

/// How large an imported JSON document may be, by nesting depth (1 = the top-level value): a
/// limit on the members of any one object (or elements of any one array) at that depth, with
/// the words that say what they are, and a limit on all values together. Checked while
/// parsing, so a file that breaks one stops there, before it has taken the memory its shape
/// asks for (`serde_json::Value` takes ~20 times the file's size: 800 000 CPU entries of a
/// 65 MB file took 1.3 GB before they were counted).
pub(crate) struct Shape {
    /// (depth, most members, what they are, as "at most N {what}").
    pub(crate) per_depth: &'static [(usize, usize, &'static str)],
    /// Most values in the whole document.
    pub(crate) total: usize,
}

/// The shape of rt-tests `--json` files (cyclictest, oslat, pmqtest…): `thread` entries as
/// latlab imports threads (1024), a thread's histogram at most 2²¹ distinct buckets (rt-tests
/// writes the non-empty ones: more than two million distinct latencies is no real run), 4 Mi
/// values in all.
pub(crate) const RT_TESTS_SHAPE: Shape = Shape {
    per_depth: &[
        (1, 256, "top-level keys"),
        (
            2,
            super::MAX_THREADS,
            "entries in one object (latlab imports at most 1024 threads)",
        ),
        (3, 256, "keys in one thread's object"),
        (4, 1 << 21, "histogram buckets in one thread"),
    ],
    total: 1 << 22,
};

/// A JSON document read with duplicate keys refused (serde_json keeps the last silently, which
/// would import one of two histograms a file gives for the same thread) and `shape` enforced.
pub(crate) fn strict(bytes: &[u8], ctx: &super::Ctx, shape: &Shape) -> Result<Value, ImportError> {
    let mut seen = 0usize;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let v = de::DeserializeSeed::deserialize(
        Strict {
            depth: 1,
            shape,
            seen: &mut seen,
        },
        &mut de,
    )
    .and_then(|v| de.end().map(|()| v))
    .map_err(|e| {
        // A shape refused is valid JSON, just not what the tool writes.
        let m = e.to_string();
        if e.is_data() && m.starts_with(TOO_LARGE) {
            ctx.err(e.line(), m)
        } else {
            ctx.err(e.line(), format!("not valid JSON: {m}"))
        }
    })?;
    Ok(v)
}

/// How a refused shape's message starts.
const TOO_LARGE: &str = "refused: ";

struct Strict<'a> {
    depth: usize,
    shape: &'a Shape,
    seen: &'a mut usize,
}

impl Strict<'_> {
    /// One more value; an error past the document's total.
    fn count<E: de::Error>(&mut self) -> Result<(), E> {
        *self.seen += 1;
        if *self.seen > self.shape.total {
            return Err(E::custom(format!(
                "{TOO_LARGE}more than {} values in the document (no file this tool writes is that large)",
                self.shape.total
            )));
        }
        Ok(())
    }

    /// An error when an object or array at this depth has more than its limit.
    fn members<E: de::Error>(&self, n: usize) -> Result<(), E> {
        match self.shape.per_depth.iter().find(|l| l.0 == self.depth) {
            Some(&(_, max, what)) if n > max => {
                Err(E::custom(format!("{TOO_LARGE}more than {max} {what}")))
            }
            _ => Ok(()),
        }
    }

    fn child(&mut self) -> Strict<'_> {
        Strict {
            depth: self.depth + 1,
            shape: self.shape,
            seen: self.seen,
        }
    }
}

impl<'de> de::DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(mut self, v: bool) -> Result<Value, E> {
        self.count()?;
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(mut self, v: i64) -> Result<Value, E> {
        self.count()?;
        Ok(Value::from(v))
    }
    fn visit_u64<E: de::Error>(mut self, v: u64) -> Result<Value, E> {
        self.count()?;
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(mut self, v: f64) -> Result<Value, E> {
        self.count()?;
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: de::Error>(mut self, v: &str) -> Result<Value, E> {
        self.count()?;
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E: de::Error>(mut self, v: String) -> Result<Value, E> {
        self.count()?;
        Ok(Value::String(v))
    }
    fn visit_unit<E: de::Error>(mut self) -> Result<Value, E> {
        self.count()?;
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(mut self) -> Result<Value, E> {
        self.count()?;
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Value, A::Error> {
        self.count()?;
        let mut v = Vec::new();
        while let Some(x) = seq.next_element_seed(self.child())? {
            v.push(x);
            self.members(v.len())?;
        }
        Ok(Value::Array(v))
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Value, A::Error> {
        self.count()?;
        let mut m = Map::new();
        while let Some(k) = map.next_key::<String>()? {
            if m.contains_key(&k) {
                return Err(de::Error::custom(format!(
                    "duplicate key \"{}\": each key may appear once in an object",
                    super::clip(&k)
                )));
            }
            let v = map.next_value_seed(self.child())?;
            m.insert(k, v);
            self.members(m.len())?;
        }
        Ok(Value::Object(m))
    }
}

type JsonObject = serde_json::Map<String, Value>;

/// The top of an rt-tests `--json` file (cyclictest's, oslat's): the object, its
/// `"thread"` object, and the command line (`"cmdline:"`, as rt-tests spells it, or
/// `"cmdline"`).
pub(super) fn top_level<'a>(
    v: &'a Value,
    ctx: &Ctx,
    tool: &str,
) -> Result<(&'a JsonObject, &'a JsonObject, Option<String>), ImportError> {
    let obj = v
        .as_object()
        .ok_or_else(|| ctx.err(1, format!("expected a JSON object ({tool} --json output)")))?;
    let threads = obj
        .get("thread")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            ctx.err(
                0,
                format!("expected a \"thread\" object: is this {tool} --json output?"),
            )
        })?;
    let cmd = obj
        .get("cmdline:")
        .or_else(|| obj.get("cmdline"))
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok((obj, threads, cmd))
}

/// A thread's `"histogram"` object (cyclictest's and oslat's `--json`): bucket number →
/// count, every key a bucket number and every value a non-negative integer, in file order.
pub(super) fn histogram_rows(
    ctx: &Ctx,
    ln: usize,
    tnum: u32,
    hist: &serde_json::Map<String, Value>,
) -> Result<Vec<(u64, u64)>, ImportError> {
    let mut rows = Vec::with_capacity(hist.len());
    for (k, c) in hist {
        let b: u64 = k.parse().map_err(|_| {
            ctx.err(
                ln,
                format!(
                    "thread {tnum}: histogram key '{}': expected a bucket number",
                    super::clip(k)
                ),
            )
        })?;
        let c = c.as_u64().ok_or_else(|| {
            ctx.err(
                ln,
                format!("thread {tnum}: histogram bucket {b}: expected a count"),
            )
        })?;
        rows.push((b, c));
    }
    Ok(rows)
}

/// One thread of the JSON, read: its number and CPU, what cyclictest says of it, its
/// histogram rows sorted without the empty ones, the largest bucket key and the number of keys
/// (empty ones included). Errors carry line 0 (the caller sets the thread's).
struct JsonThread<'a> {
    name: &'a str,
    tnum: u32,
    cpu: u32,
    cycles: u64,
    min: u64,
    max: u64,
    avg: f64,
    buckets: Vec<(u64, u64)>,
    max_key: Option<u64>,
    keys: usize,
}

fn json_thread<'a>(ctx: &Ctx, name: &'a str, t: &Value) -> Result<JsonThread<'a>, ImportError> {
    let ln = 0;
    let tnum: u32 = name.parse().map_err(|_| {
        ctx.err(
            ln,
            format!("thread key '{}': expected a number", super::clip(name)),
        )
    })?;
    let field = |k: &str| -> Result<&Value, ImportError> {
        t.get(k)
            .ok_or_else(|| ctx.err(ln, format!("thread {tnum}: missing \"{k}\"")))
    };
    let num = |k: &str| -> Result<u64, ImportError> {
        field(k)?.as_u64().ok_or_else(|| {
            ctx.err(
                ln,
                format!("thread {tnum}: \"{k}\": expected a non-negative integer"),
            )
        })
    };
    let cycles = num("cycles")?;
    let min = num("min")?;
    let max = num("max")?;
    let avg = field("avg")?
        .as_f64()
        .ok_or_else(|| ctx.err(ln, format!("thread {tnum}: \"avg\": expected a number")))?;
    let cpu = t
        .get("cpu")
        .and_then(Value::as_i64)
        .filter(|&c| c >= 0 && c <= u32::MAX as i64)
        .map(|c| c as u32)
        .unwrap_or(tnum);
    let hist = field("histogram")?.as_object().ok_or_else(|| {
        ctx.err(
            ln,
            format!("thread {tnum}: \"histogram\": expected an object"),
        )
    })?;
    let keys = hist.len();
    let mut buckets = histogram_rows(ctx, ln, tnum, hist)?;
    let max_key = buckets.iter().max().map(|&(b, _)| b);
    buckets.retain(|&(_, c)| c > 0);
    if cycles > 0 && buckets.is_empty() {
        return Err(ctx.err(
        ln,
        format!("thread {tnum} has {cycles} cycles but an empty histogram: cyclictest ran without -h/-H, so there is no distribution to import (rerun with -h 1000 or more)"),
    ));
    }
    buckets.sort_unstable();
    Ok(JsonThread {
        name,
        tnum,
        cpu,
        cycles,
        min,
        max,
        avg,
        buckets,
        max_key,
        keys,
    })
}

/// A thread's histogram in ns, and how many of its cycles lie above the histogram. Errors
/// carry line 0 (the caller sets the thread's).
fn thread_hist(
    ctx: &Ctx,
    layout: Layout,
    unit: u64,
    p: &JsonThread<'_>,
) -> Result<(u64, Histogram), ImportError> {
    let JsonThread {
        tnum,
        cycles,
        min,
        max,
        avg,
        ref buckets,
        ..
    } = *p;
    let ln = 0;
    let in_hist = total(ctx, ln, buckets.iter().map(|b| &b.1))?;
    let over = cycles.checked_sub(in_hist).ok_or_else(|| {
        ctx.err(
            ln,
            format!("thread {tnum}: {cycles} cycles but the histogram holds {in_hist} samples"),
        )
    })?;
    let b_ns = buckets
        .iter()
        .map(|&(b, c)| Ok((mul(ctx, ln, b, unit, "histogram bucket")?, c)))
        .collect::<Result<Vec<(u64, u64)>, ImportError>>()?;
    let hist = build_hist(
        ctx,
        ln,
        layout,
        Printed {
            buckets: &b_ns,
            unknown_above: over,
            min_ns: mul(ctx, ln, min, unit, "min")?,
            max_ns: mul(ctx, ln, max, unit, "max")?,
            avg_ns: Some(avg * unit as f64),
        },
    )
    .map_err(|mut e| {
        e.msg = format!("thread {tnum}: {}", e.msg);
        e
    })?;
    Ok((over, hist))
}

pub(crate) fn parse(bytes: &[u8], ctx: &Ctx) -> Result<RunRecord, ImportError> {
    let v = strict(bytes, ctx, &RT_TESTS_SHAPE)?;
    let text = String::from_utf8_lossy(bytes);
    let line_of = |key: &str| -> usize {
        // Best effort: the line where a key first appears, for messages about its value.
        let pat = format!("\"{key}\"");
        text.lines()
            .position(|l| l.contains(&pat))
            .map(|p| p + 1)
            .unwrap_or(0)
    };
    let (obj, threads, cmd) = top_level(&v, ctx, "cyclictest")?;
    let unit: u64 = match obj.get("resolution_in_ns").and_then(Value::as_u64) {
        Some(1) => 1,
        _ => 1_000,
    };
    let unit_name = if unit == 1 { "ns" } else { "µs" };
    let limit_from_cmd = cmd.as_deref().and_then(|c| {
        cmdline_opt(c, "-h", "--histogram")
            .or_else(|| cmdline_opt(c, "-H", "--histofall"))
            .and_then(|s| s.parse::<u64>().ok())
    });
    let interval = match cmd
        .as_deref()
        .and_then(|c| cmdline_opt(c, "-i", "--interval"))
        .and_then(|s| s.parse::<u64>().ok())
    {
        Some(i) => Some(mul(ctx, line_of("cmdline:"), i, 1_000, "-i interval (µs)")?),
        None => None,
    };
    let prio = cmd
        .as_deref()
        .and_then(|c| cmdline_opt(c, "-p", "--priority"))
        .and_then(|s| s.parse::<u32>().ok());

    check_threads(ctx, line_of("thread"), threads.len())?;
    let mut parsed = Vec::new();
    let mut max_key = 0u64;
    let mut most_keys = 0usize;
    for (name, t) in threads {
        // The line of a thread is looked up only for an error (a scan of the text per thread
        // would be quadratic): errors inside carry line 0, set below.
        let fix = |mut e: ImportError| {
            if e.line == 0 {
                e.line = line_of(name);
            }
            e
        };
        let p = json_thread(ctx, name, t).map_err(fix)?;
        most_keys = most_keys.max(p.keys);
        if let Some(b) = p.max_key {
            max_key = max_key.max(b);
        }
        parsed.push(p);
    }
    parsed.sort_by_key(|p| p.tnum);
    let past_key = u128::from(max_key) + 1;
    let limit = limit_from_cmd.map_or(past_key, u128::from).max(past_key);
    let (layout, cut) = super::layout(ctx, 0, unit, limit * u128::from(unit), most_keys)?;
    let mut notes = vec![format!(
        "imported from cyclictest --json: 1 {unit_name} buckets to {limit} {unit_name}; mean is cyclictest's avg and the standard deviation is estimated from bucket midpoints"
    )];
    notes.extend(cut);
    if limit_from_cmd.is_none() {
        notes.push(format!(
            "the command line does not give the histogram size: the limit is taken as {limit} {unit_name}, one past the last bucket"
        ));
    }
    let mut out = Vec::new();
    let mut overs = 0u128;
    for p in parsed {
        let fix = |mut e: ImportError| {
            if e.line == 0 {
                e.line = line_of(p.name);
            }
            e
        };
        let (over, hist) = thread_hist(ctx, layout, unit, &p).map_err(fix)?;
        overs += u128::from(over);
        out.push(Thread {
            cpu: p.cpu,
            hist,
            info: ThreadInfo {
                tid: None,
                policy: None,
                priority: prio,
                interval_ns: interval,
            },
        });
    }
    if overs > 0 {
        notes.push(format!(
            "{overs} samples were above the {limit} {unit_name} histogram (cycles minus the histogram's samples): counted, value unknown above the limit, reported as \"> limit\""
        ));
    }
    let mut r = record(Imported {
        source: Source::Cyclictest,
        label: ctx.name,
        threads: out,
        command_line: cmd,
        machine: machine_of(obj),
        interval_ns: interval,
        notes,
    });
    r.tool_version = obj
        .get("rt_test_version:")
        .and_then(Value::as_str)
        .map(|v| format!("rt-tests {v}"));
    r.started_at = obj
        .get("start_time")
        .and_then(Value::as_str)
        .map(str::to_string);
    r.ended_at = obj
        .get("end_time")
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok(r)
}

/// The machine as cyclictest's `sysinfo` names it.
fn machine_of(obj: &JsonObject) -> Machine {
    let sys = obj.get("sysinfo");
    let s = |k: &str| {
        sys.and_then(|x| x.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    Machine {
        hostname: s("nodename"),
        kernel_release: s("release"),
        kernel_version: s("version"),
        arch: s("machine"),
        ..Machine::default()
    }
}

#[cfg(test)]
mod tests {
    use crate::import::{import, From};

    #[test]
    fn h30_overflows_from_cycles() {
        let r = import(
            include_bytes!("../../tests/fixtures/import/cyclictest-json-h30.json"),
            From::Auto,
            "h30.json",
        )
        .unwrap();
        assert_eq!(r.cpus.len(), 2);
        assert_eq!(r.cpus[0].stats.samples, 2000);
        assert_eq!(r.cpus[0].histogram.limit_ns, 30_000);
        assert_eq!(r.cpus[0].stats.max_ns, Some(368_000));
        assert!(r.cpus[0].stats.unknown_above > 0);
        assert_eq!(r.machine.kernel_release.as_deref(), Some("6.18.44-fc-v595"));
        assert!(r.command_line.as_deref().unwrap().contains("-h 30"));
        assert_eq!(r.config.interval_ns, Some(1_000_000));
    }

    #[test]
    fn no_histogram_is_refused_with_the_fix() {
        let e = import(
            include_bytes!("../../tests/fixtures/import/cyclictest-json-nohist.json"),
            From::CyclictestJson,
            "nohist.json",
        )
        .unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("nohist.json:"), "{s}");
        assert!(s.contains("without -h"), "{s}");
    }

    /// serde_json keeps the last of duplicate keys; this reader refuses them, naming the key.
    #[test]
    fn duplicate_keys_are_refused() {
        let thread = |c: u64| {
            format!("{{\"histogram\": {{\"5\": {c}}}, \"cycles\": {c}, \"min\": 5, \"max\": 5, \"avg\": 5}}")
        };
        let f = format!(
            "{{\"thread\": {{\n\"0\": {},\n\"0\": {}}}}}",
            thread(1),
            thread(2)
        );
        let e = import(f.as_bytes(), From::CyclictestJson, "d.json").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("d.json:3: not valid JSON: duplicate key \"0\""),
            "{e}"
        );
        let f = format!("{{\"thread\": {{\"0\": {}}}, \"thread\": {{}}}}", thread(1));
        let e = import(f.as_bytes(), From::CyclictestJson, "d.json").unwrap_err();
        assert!(e.to_string().contains("duplicate key \"thread\""), "{e}");
        let f = "{\"thread\": {\"0\": {\"histogram\": {\"5\": 1, \"5\": 1}, \"cycles\": 1, \"min\": 5, \"max\": 5, \"avg\": 5}}}";
        let e = import(f.as_bytes(), From::CyclictestJson, "d.json").unwrap_err();
        assert!(e.to_string().contains("duplicate key \"5\""), "{e}");
        // Without duplicates the same file imports.
        let f = format!("{{\"thread\": {{\"0\": {}}}}}", thread(3));
        assert_eq!(
            import(f.as_bytes(), From::CyclictestJson, "d.json")
                .unwrap()
                .total
                .samples,
            3
        );
    }

    /// `-i 18446744073709552` (µs) is more than 2^64 ns: an error, not 384 ns.
    #[test]
    fn huge_interval_is_refused() {
        let f = "{\"cmdline:\": \"cyclictest -h 100 -i 18446744073709552\", \"thread\": {\"0\": {\"histogram\": {\"5\": 1}, \"cycles\": 1, \"min\": 5, \"max\": 5, \"avg\": 5}}}";
        let e = import(f.as_bytes(), From::CyclictestJson, "i.json").unwrap_err();
        assert!(
            e.to_string()
                .contains("-i interval (µs) 18446744073709552 is too large"),
            "{e}"
        );
        let ok = f.replace("18446744073709552", "1000");
        assert_eq!(
            import(ok.as_bytes(), From::CyclictestJson, "i.json")
                .unwrap()
                .config
                .interval_ns,
            Some(1_000_000)
        );
    }

    #[test]
    fn bad_json_names_the_line() {
        let e = import(b"{\n\"thread\": {\n}\n,,", From::CyclictestJson, "b.json").unwrap_err();
        assert!(e.to_string().starts_with("b.json:4: not valid JSON"), "{e}");
        let e = import(b"{\"thread\": {\"0\": {\"histogram\": {\"1\": 2}, \"cycles\": 1, \"min\": 1, \"max\": 1, \"avg\": 1}}}", From::CyclictestJson, "c.json").unwrap_err();
        assert!(
            e.to_string().contains("1 cycles but the histogram holds 2"),
            "{e}"
        );
    }
}
