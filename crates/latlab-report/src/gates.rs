//! `latlab compare --fail-if`'s checks: a text table, the comparison's JSON with them, and the
//! line that names the failed ones.

use std::fmt::Write as _;

use latlab_core::compare::Comparison;
use latlab_core::escape::escape;
use latlab_core::gates::Check;

/// The comparison as JSON with its checks (`checks`), pretty, with a final newline.
pub fn json(c: &Comparison, checks: &[Check]) -> Vec<u8> {
    let mut v = serde_json::to_value(c).expect("a comparison serializes");
    v["checks"] = serde_json::to_value(checks).expect("checks serialize");
    let mut b = serde_json::to_vec_pretty(&v).expect("a value serializes");
    b.push(b'\n');
    b
}

/// `N of M checks failed: …` naming each failed check, or None when all passed.
pub fn failed(checks: &[Check]) -> Option<String> {
    let failed: Vec<&Check> = checks.iter().filter(|c| !c.passed).collect();
    if failed.is_empty() {
        return None;
    }
    Some(format!(
        "{} of {} checks failed: {}",
        failed.len(),
        checks.len(),
        failed
            .iter()
            .map(|c| format!(
                "{} {} {} (observed {})",
                escape(&c.run),
                c.stat,
                c.rule,
                c.show_observed()
            ))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// The checks as a text table: stat, run, A, B, rule, observed, verdict.
pub fn table(checks: &[Check]) -> String {
    let mut t = comfy_table::Table::new();
    t.load_style(comfy_table::presets::NOTHING);
    t.set_header(["stat", "run", "A", "B", "rule", "observed", "verdict"]);
    for c in checks {
        let mut why = Vec::new();
        if c.too_few_samples {
            why.push("too few samples");
        }
        if c.within_noise && !c.passed {
            why.push("within noise");
        }
        let verdict = format!(
            "{}{}",
            if c.passed { "pass" } else { "FAIL" },
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({})", why.join(", "))
            }
        );
        t.add_row([
            c.stat.to_string(),
            escape(&c.run),
            c.show(c.a),
            c.show(c.b),
            c.rule.clone(),
            c.show_observed(),
            verdict,
        ]);
    }
    let mut o = String::new();
    let _ = writeln!(
        o,
        "\nChecks (--fail-if; A: {}, each later run B against it)\n{t}",
        escape(checks.first().map_or("", |c| c.baseline.as_str()))
    );
    for c in checks.iter().filter_map(|c| c.note.as_deref()) {
        let _ = writeln!(o, "  note: {}", escape(c));
    }
    o
}
