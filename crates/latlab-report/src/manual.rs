//! What latlab's man pages add to the sections `clap_mangen` renders from the command line:
//! EXAMPLES and EXIT STATUS for each command, and the command's notes (its `after_help`) as
//! NOTES, their indented lines kept as written instead of reflowed. Each returns roff text.

/// A command's examples: (what it does, the command line). The tests parse every line with
/// latlab's own command line, so none goes stale.
pub fn examples(command: &str) -> &'static [(&'static str, &'static str)] {
    match command {
        "" => &[
            (
                "Check the machine, then measure every CPU for a minute",
                "latlab check",
            ),
            ("", "latlab run --duration 60s"),
            ("Read the latest run as a report", "latlab report"),
        ],
        "run" => &[
            (
                "Measure every CPU for a minute at 1 ms (cyclictest -S -p95 -i1000 -D60)",
                "latlab run --duration 60s",
            ),
            (
                "Under hackbench, tracing what delayed every wake-up later than 200 µs",
                "latlab run --duration 5m --load hackbench --trace-threshold 200us",
            ),
            (
                "A gate for CI: exit 2 if a sample on CPUs 1-3 exceeds 100 µs",
                "latlab run --cpus 1-3 --duration 10m --max-latency 100us",
            ),
            (
                "Measure until p99.99 is known within 10 %, for at most an hour",
                "latlab run --until p99.99:10% --duration 1h",
            ),
            (
                "Try latlab without root",
                "latlab run --backend sim --duration 10s",
            ),
        ],
        "report" => &[
            ("The latest run, in the terminal", "latlab report"),
            (
                "A self-contained HTML page with the plots",
                "latlab report latlab-results/RUN --format html -o report.html",
            ),
        ],
        "compare" => &[
            (
                "Two kernels side by side",
                "latlab compare runs/6.12 runs/6.12-rt --format html -o compare.html",
            ),
            (
                "Fail (exit 2) when p99.9 rose by more than 20 %, beyond the noise",
                "latlab compare base/ new/ --fail-if 'p99.9>1.2x@95%'",
            ),
        ],
        "cyclictest" => &[
            (
                "cyclictest's own command line, measured by latlab",
                "latlab cyclictest -S -p95 -i1000 -D60 -q",
            ),
            (
                "With a histogram and its JSON file",
                "latlab cyclictest -t2 -a1-2 -p90 -h400 -D10m --json=out.json",
            ),
        ],
        "import" => &[
            (
                "cyclictest's histogram output as a latlab run",
                "latlab import cyclictest.log --from cyclictest",
            ),
            (
                "rtla timerlat hist's output",
                "latlab import timerlat.txt --from rtla",
            ),
        ],
        "analyze" => &[(
            "Explain the spikes above 100 µs in a saved trace",
            "latlab analyze trace.dat --threshold 100us",
        )],
        "check" => &[
            (
                "What on this machine affects latency, with the fixes",
                "latlab check",
            ),
            ("The same as JSON", "latlab check --format json"),
        ],
        "profile" => &[(
            "Run queues and waits of every task while measuring under hackbench",
            "latlab profile --duration 30s --load hackbench",
        )],
        "export" => &[(
            "A run's spikes for ui.perfetto.dev",
            "latlab export latlab-results/RUN --format perfetto -o spikes.pftrace",
        )],
        "history" => &[(
            "The last month of one kernel's runs as an HTML page",
            "latlab history --since 30d --kernel 6.12.0-rt --format html -o history.html",
        )],
        "plan" => &[(
            "How long a run at 1 ms must be to show p99.999 <= 50 µs",
            "latlab plan --target 'p99.999<=50us' --interval 1ms",
        )],
        "loads run" => &[(
            "hackbench alone for ten minutes, beside another tool",
            "latlab loads run hackbench --duration 10m",
        )],
        "loads list" => &[("The loads and the tools each needs", "latlab loads list")],
        "db push" => &[(
            "Keep runs in a lab's PostgreSQL",
            "latlab db push latlab-results/* --db postgres://lab@db/latlab",
        )],
        "cleanup" => &[("Undo what a killed run left behind", "latlab cleanup")],
        _ => &[],
    }
}

/// A command's exit statuses (docs/cli.md, "Exit codes").
pub fn exit_status(command: &str) -> &'static [(&'static str, &'static str)] {
    const ERR: (&str, &str) = (
        "1",
        "an error, usage errors included: one line on stderr, latlab: error: ..., naming what is wrong and what to do.",
    );
    match command {
        "run" | "profile" | "scenario" | "scenario io-read" | "scenario fairness" => &[
            ("0", "the run was written and no sample exceeded --max-latency."),
            ERR,
            (
                "2",
                "the run was written, but a sample exceeded --max-latency (or a stop action ended it).",
            ),
        ],
        "cyclictest" => &[
            ("0", "the run was written and no sample exceeded -b."),
            ERR,
            ("2", "a sample exceeded -b (the run is written)."),
        ],
        "compare" => &[
            ("0", "the comparison was printed and every --fail-if check passed."),
            ERR,
            ("2", "a --fail-if check failed."),
        ],
        "cleanup" => &[
            ("0", "nothing was left, or everything left was undone."),
            (
                "1",
                "something could not be undone: it stays in the ledger for the next cleanup.",
            ),
        ],
        _ => &[("0", "the command did what was asked."), ERR],
    }
}

/// Text escaped for roff: backslashes, hyphens (else man may hyphenate or turn them into
/// dashes), and a leading `.` or `'` (else a control line).
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 8);
    if s.starts_with('.') || s.starts_with('\'') {
        o.push_str("\\&");
    }
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\e"),
            '-' => o.push_str("\\-"),
            c => o.push(c),
        }
    }
    o
}

/// EXAMPLES of `command` ("" for latlab itself, "loads run" for a subcommand), if it has any.
pub fn examples_section(command: &str) -> String {
    let ex = examples(command);
    if ex.is_empty() {
        return String::new();
    }
    let mut o = String::from(".SH EXAMPLES\n");
    for (what, line) in ex {
        if !what.is_empty() {
            o.push_str(".PP\n");
            o.push_str(&escape(what));
            o.push_str(":\n");
        }
        o.push_str(".RS 4\n.nf\n");
        o.push_str(&escape(line));
        o.push_str("\n.fi\n.RE\n");
    }
    o
}

/// EXIT STATUS of `command`.
pub fn exit_status_section(command: &str) -> String {
    let mut o = String::from(".SH \"EXIT STATUS\"\n");
    for (code, what) in exit_status(command) {
        o.push_str(".TP\n");
        o.push_str(&escape(code));
        o.push('\n');
        o.push_str(&escape(what));
        o.push('\n');
    }
    o
}

/// NOTES from a command's `after_help`: paragraphs reflowed as man does, lines that start
/// with a space (tables of flags, examples) kept as written.
pub fn notes_section(after_help: &str) -> String {
    let mut o = String::from(".SH NOTES\n");
    let mut verbatim = false;
    for l in after_help.lines() {
        let indented = l.starts_with(' ') || l.starts_with('\t');
        if l.trim().is_empty() {
            if verbatim {
                o.push_str(".fi\n");
                verbatim = false;
            }
            o.push_str(".PP\n");
            continue;
        }
        if indented && !verbatim {
            o.push_str(".nf\n");
            verbatim = true;
        } else if !indented && verbatim {
            o.push_str(".fi\n");
            verbatim = false;
        }
        o.push_str(&escape(l));
        o.push('\n');
    }
    if verbatim {
        o.push_str(".fi\n");
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_roff_would_read() {
        assert_eq!(escape(".hidden"), "\\&.hidden");
        assert_eq!(escape("'x"), "\\&'x");
        assert_eq!(escape("a\\b -c"), "a\\eb \\-c");
    }

    #[test]
    fn notes_keep_indented_lines_as_written() {
        let s = notes_section("Supported flags:\n  -a  -t\n  -p\nThe rest.\n");
        assert_eq!(
            s,
            ".SH NOTES\nSupported flags:\n.nf\n  \\-a  \\-t\n  \\-p\n.fi\nThe rest.\n"
        );
    }

    #[test]
    fn every_command_has_exit_statuses_and_run_has_its_verdict() {
        assert!(exit_status_section("run").contains(".TP\n2\n"));
        assert!(!exit_status_section("report").contains(".TP\n2\n"));
        assert!(examples_section("run").starts_with(".SH EXAMPLES\n"));
        assert_eq!(examples_section("no such command"), "");
    }
}
