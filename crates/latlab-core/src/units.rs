//! Units: nanoseconds everywhere, and the parsers for the CLI's durations and latencies.
//!
//! The contract (docs/cli.md, "Conventions"): durations `10s`, `5m`, `2h`, `1d`; latencies and intervals
//! `500us`, `1ms`, `250000ns`; a bare number means microseconds, as in cyclictest.

use std::fmt;

/// A time in nanoseconds.
pub type Nanos = u64;

pub const NS_PER_US: u64 = 1_000;
pub const NS_PER_MS: u64 = 1_000_000;
pub const NS_PER_S: u64 = 1_000_000_000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{input}' is not a {what}: expected {expected}")]
pub struct UnitError {
    pub input: String,
    pub what: &'static str,
    pub expected: &'static str,
}

/// A decimal number (`12`, `1.5`, `.25`) and the unit after it.
fn split_number(s: &str) -> Option<(&str, &str)> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    if end == 0 {
        return None;
    }
    Some((&s[..end], s[end..].trim()))
}

/// `num` (decimal digits with at most one '.') × `mult`, rounded half up to whole ns, exactly:
/// `None` when it is not a number or does not fit in u64 (never wraps, never goes through f64).
fn scale(num: &str, mult: u64) -> Option<Nanos> {
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() && frac.is_empty() || frac.contains('.') {
        return None;
    }
    let mut v: u128 = 0;
    for b in int.bytes() {
        v = v.checked_mul(10)?.checked_add(u128::from(b - b'0'))?;
        if v > u128::from(u64::MAX) {
            return None;
        }
    }
    let mut out = v.checked_mul(u128::from(mult))?;
    // The fraction: 20 digits resolve far below 1 ns for every unit (≤ 1 day); more only
    // rounds. 10^20 · 86 400 · 10^9 fits in u128.
    let mut f: u128 = 0;
    let mut den: u128 = 1;
    for b in frac.bytes().take(20) {
        f = f * 10 + u128::from(b - b'0');
        den *= 10;
    }
    let scaled = f * u128::from(mult);
    out = out.checked_add((scaled + den / 2) / den)?;
    u64::try_from(out).ok()
}

fn too_large(s: &str, what: &'static str) -> UnitError {
    UnitError {
        input: s.to_string(),
        what,
        expected: "a value below 2^64 ns (about 584 years)",
    }
}

/// The interval of the `i`-th thread: `interval + i · distance` (cyclictest `-i`/`-d`),
/// `None` when it does not fit in u64 ns.
pub fn thread_interval(interval_ns: Nanos, distance_ns: Nanos, i: usize) -> Option<Nanos> {
    u64::try_from(i)
        .ok()?
        .checked_mul(distance_ns)?
        .checked_add(interval_ns)
}

/// Parse a latency or interval: `500us`, `1ms`, `250000ns`, `1.5ms`, `2s`; bare number = µs.
pub fn parse_latency(s: &str) -> Result<Nanos, UnitError> {
    let what = "latency";
    let err = || UnitError {
        input: s.to_string(),
        what,
        expected: "a number with a unit such as 500us, 1ms or 250000ns (a bare number means µs)",
    };
    let (num, unit) = split_number(s).ok_or_else(err)?;
    let mult = match unit {
        "" | "us" | "µs" | "usec" => NS_PER_US,
        "ns" | "nsec" => 1,
        "ms" | "msec" => NS_PER_MS,
        "s" | "sec" => NS_PER_S,
        _ => return Err(err()),
    };
    scale(num, mult).ok_or_else(|| too_large(s, what))
}

/// Parse a duration: `10s`, `5m`, `2h`, `1d`, `500ms`; a bare number means seconds.
pub fn parse_duration(s: &str) -> Result<Nanos, UnitError> {
    let what = "duration";
    let err = || UnitError {
        input: s.to_string(),
        what,
        expected: "a number with a unit such as 10s, 5m, 2h or 1d",
    };
    let (num, unit) = split_number(s).ok_or_else(err)?;
    let mult = match unit {
        "" | "s" | "sec" => NS_PER_S,
        "m" | "min" => 60 * NS_PER_S,
        "h" => 3600 * NS_PER_S,
        "d" => 86_400 * NS_PER_S,
        "ms" => NS_PER_MS,
        "us" | "µs" => NS_PER_US,
        "ns" => 1,
        _ => return Err(err()),
    };
    scale(num, mult).ok_or_else(|| too_large(s, what))
}

/// A latency shown to people: `57 µs`, `1.25 ms`, `812 ns`, `3.4 s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Human(pub Nanos);

impl fmt::Display for Human {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        if ns < NS_PER_US {
            write!(f, "{ns} ns")
        } else if ns < 10 * NS_PER_MS {
            // µs up to 10 ms: the unit the field reads latencies in.
            let us = ns as f64 / 1e3;
            if ns.is_multiple_of(NS_PER_US) || us >= 100.0 {
                write!(f, "{} µs", (us).round() as u64)
            } else {
                write!(f, "{us:.1} µs")
            }
        } else if ns < 10 * NS_PER_S {
            write!(f, "{:.2} ms", ns as f64 / 1e6)
        } else {
            write!(f, "{:.2} s", ns as f64 / 1e9)
        }
    }
}

/// A duration shown to people: `10s`, `41m`, `1h30m`, `250ms`.
pub fn format_duration(ns: Nanos) -> String {
    if !ns.is_multiple_of(NS_PER_S) || ns == 0 {
        if ns.is_multiple_of(NS_PER_MS) {
            return format!("{}ms", ns / NS_PER_MS);
        }
        return format!("{}us", ns / NS_PER_US);
    }
    let mut s = ns / NS_PER_S;
    let mut out = String::new();
    for (unit, len) in [("d", 86_400), ("h", 3_600), ("m", 60)] {
        if s >= len {
            out.push_str(&format!("{}{unit}", s / len));
            s %= len;
        }
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

/// A measured duration shown to people (a report's header): rounded to whole seconds from 1 s
/// up (`20s`, not the exact `20000216us`), else [`format_duration`] to the millisecond or µs.
pub fn format_measured(ns: Nanos) -> String {
    // Rounded to the nearest unit without overflowing near u64::MAX (a record may say so).
    let round = |unit: Nanos| {
        let q = ns / unit + u64::from(ns % unit >= unit / 2);
        q.checked_mul(unit).unwrap_or(ns / unit * unit)
    };
    if ns >= NS_PER_S {
        format_duration(round(NS_PER_S))
    } else if ns >= NS_PER_MS {
        format_duration(round(NS_PER_MS))
    } else {
        format_duration(ns / NS_PER_US * NS_PER_US)
    }
}

/// Parse a size in bytes: `200M`, `8MiB`, `1G`, `64K`, `4096` (bytes). Binary multiples
/// everywhere (`M` = `MiB` = 2^20), the one size parser of the command line.
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    let err = || UnitError {
        input: s.to_string(),
        what: "size",
        expected: "a size such as 200M, 8MiB, 1G or 4096 (bytes; binary multiples)",
    };
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "k" | "KiB" | "KB" => 1 << 10,
        "M" | "MiB" | "MB" => 1 << 20,
        "G" | "GiB" | "GB" => 1 << 30,
        "T" | "TiB" | "TB" => 1 << 40,
        _ => return Err(err()),
    };
    let n: u64 = num.parse().map_err(|_| err())?;
    n.checked_mul(mult).ok_or_else(err)
}

/// A size as the command line takes it, exact, in the largest binary multiple that divides
/// it: `200M`, `4K`, `4097`.
pub fn format_size(b: u64) -> String {
    for (unit, shift) in [("T", 40), ("G", 30), ("M", 20), ("K", 10)] {
        if b != 0 && b.is_multiple_of(1u64 << shift) {
            return format!("{}{unit}", b >> shift);
        }
    }
    b.to_string()
}

#[cfg(test)]
mod size_tests {
    use super::*;

    #[test]
    fn sizes_are_binary_multiples() {
        assert_eq!(parse_size("200M"), Ok(200 << 20));
        assert_eq!(parse_size("8MiB"), Ok(8 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("4XB").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("-1M").is_err());
        assert!(parse_size("99999999999T").is_err());
        assert_eq!(format_size(200 << 20), "200M");
        assert_eq!(format_size(100 << 40), "100T");
        assert_eq!(format_size(4097), "4097");
        assert_eq!(format_size(0), "0");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_durations_are_rounded_for_people() {
        assert_eq!(format_measured(20_000_216_000), "20s");
        assert_eq!(format_measured(60 * NS_PER_S), "1m");
        assert_eq!(format_measured(2_460_600_000_000), "41m1s");
        assert_eq!(format_measured(1_499_999_999), "1s");
        assert_eq!(format_measured(1_500_000_000), "2s");
        assert_eq!(format_measured(250_400_000), "250ms");
        assert_eq!(format_measured(1_234), "1us");
        // Near u64::MAX rounding up would overflow: truncated instead.
        assert_eq!(
            format_measured(u64::MAX),
            format_duration(u64::MAX / NS_PER_S * NS_PER_S)
        );
    }

    #[test]
    fn latencies() {
        assert_eq!(parse_latency("500us"), Ok(500_000));
        assert_eq!(parse_latency("1ms"), Ok(1_000_000));
        assert_eq!(parse_latency("250000ns"), Ok(250_000));
        assert_eq!(parse_latency("150"), Ok(150_000));
        assert_eq!(parse_latency("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_latency("488us"), Ok(488_000));
        assert!(parse_latency("fast").is_err());
        assert!(parse_latency("10parsecs").is_err());
        assert!(parse_latency("").is_err());
        assert!(parse_latency("-5us").is_err());
    }

    /// Numbers are exact and never wrap: 18446744073709546615ns used to go through f64
    /// (18446744073709547520, or a wrapped interval later).
    #[test]
    fn huge_numbers_are_exact_or_refused() {
        assert_eq!(
            parse_latency("18446744073709546615ns"),
            Ok(18_446_744_073_709_546_615)
        );
        assert_eq!(parse_latency("18446744073709551615ns"), Ok(u64::MAX));
        assert!(parse_latency("18446744073709551616ns").is_err());
        assert_eq!(
            parse_latency("18446744073709552us").unwrap_err().to_string(),
            "'18446744073709552us' is not a latency: expected a value below 2^64 ns (about 584 years)"
        );
        assert!(parse_latency("99999999999999999999999999999999999999999s").is_err());
        assert!(parse_duration("213503982d").is_err());
        assert_eq!(parse_latency("0.0005us"), Ok(1)); // half up
        assert_eq!(parse_latency("0.0004us"), Ok(0));
        assert_eq!(parse_latency(".5ms"), Ok(500_000));
        assert_eq!(
            parse_latency("1.000000000000000000000000000000000001s"),
            Ok(NS_PER_S)
        );
        assert!(parse_latency("1.2.3ms").is_err());
        assert!(parse_latency(".").is_err());
        assert_eq!(thread_interval(10_000, 5, 3), Some(10_015));
        assert_eq!(thread_interval(10_000, 18_446_744_073_709_546_615, 1), None);
        assert_eq!(thread_interval(10_000, u64::MAX / 2, 2), None);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(10 * NS_PER_S));
        assert_eq!(parse_duration("5m"), Ok(300 * NS_PER_S));
        assert_eq!(parse_duration("2h"), Ok(7200 * NS_PER_S));
        assert_eq!(parse_duration("1d"), Ok(86_400 * NS_PER_S));
        assert_eq!(parse_duration("3"), Ok(3 * NS_PER_S));
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn human() {
        assert_eq!(Human(812).to_string(), "812 ns");
        assert_eq!(Human(57_000).to_string(), "57 µs");
        assert_eq!(Human(57_400).to_string(), "57.4 µs");
        assert_eq!(Human(1_250_000).to_string(), "1250 µs");
        assert_eq!(Human(12_500_000).to_string(), "12.50 ms");
        assert_eq!(format_duration(41 * 60 * NS_PER_S), "41m");
        assert_eq!(format_duration(5400 * NS_PER_S), "1h30m");
        assert_eq!(format_duration(250 * NS_PER_MS), "250ms");
    }
}
