//! Typed values of the command line. Each unit is parsed once, by latlab-core's one parser for
//! it, when clap parses the flag: nothing after parsing sees a raw string, and a bad value is a
//! usage error naming the flag before anything touches the machine or the disk. The value
//! enums every command shares (policy, backend, summary format) are here too.

use std::fmt;
use std::str::FromStr;

use clap::ValueEnum;

use latlab_core::cpulist::{format_cpu_list, parse_cpu_list};
use latlab_core::units::{
    format_duration, format_size, parse_duration, parse_latency, parse_size, Nanos,
};

/// Scheduling policy of measuring threads or tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Policy {
    Fifo,
    Rr,
    Other,
}

/// Which of timerlat's latencies `--max-latency` judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LatencyOf {
    /// Timer expiry → its IRQ handler.
    Irq,
    /// Timer expiry → the measuring thread runs (in the kernel).
    Thread,
    /// Timer expiry → the thread is back in user space (latlab's threads on timerlat_fd).
    User,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RunFormat {
    Text,
    Json,
}

impl From<Policy> for latlab_sys::rt::Policy {
    fn from(p: Policy) -> Self {
        match p {
            Policy::Fifo => latlab_sys::rt::Policy::Fifo,
            Policy::Rr => latlab_sys::rt::Policy::Rr,
            Policy::Other => latlab_sys::rt::Policy::Other,
        }
    }
}

/// A duration: `10s`, `5m`, `2h`, `1d` (a bare number is seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Duration(pub Nanos);

/// A latency, interval or period: `500us`, `1ms`, `250000ns` (a bare number is µs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Latency(pub Nanos);

/// A size in bytes: `4MiB`, `200M`, `1G`, `4096` (binary multiples).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub u64);

/// A non-empty CPU list: `0-3,6`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<u32>);

/// `all` or a [`CpuList`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuSel {
    All,
    List(CpuList),
}

impl FromStr for Duration {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_duration(s).map(Duration).map_err(|e| e.to_string())
    }
}

impl FromStr for Latency {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_latency(s).map(Latency).map_err(|e| e.to_string())
    }
}

impl FromStr for Size {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_size(s).map(Size).map_err(|e| e.to_string())
    }
}

impl FromStr for CpuList {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let v = parse_cpu_list(s).map_err(|e| e.to_string())?;
        if v.is_empty() {
            return Err("the list is empty; give CPUs such as 0-1".into());
        }
        Ok(CpuList(v))
    }
}

impl FromStr for CpuSel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim() == "all" {
            Ok(CpuSel::All)
        } else {
            Ok(CpuSel::List(s.parse()?))
        }
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_duration(self.0))
    }
}

impl fmt::Display for Latency {
    /// Exact: in the largest unit that divides it (`1ms`, `488us`, `18446744073709546615ns`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        if ns != 0 && ns.is_multiple_of(1_000_000_000) {
            write!(f, "{}s", ns / 1_000_000_000)
        } else if ns != 0 && ns.is_multiple_of(1_000_000) {
            write!(f, "{}ms", ns / 1_000_000)
        } else if ns.is_multiple_of(1_000) {
            write!(f, "{}us", ns / 1_000)
        } else {
            write!(f, "{ns}ns")
        }
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_size(self.0))
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_cpu_list(&self.0))
    }
}

impl fmt::Display for CpuSel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuSel::All => f.write_str("all"),
            CpuSel::List(l) => l.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn dma_latency_is_whole_microseconds_or_off() {
        use super::DmaLatency;
        assert_eq!("off".parse::<DmaLatency>(), Ok(DmaLatency(None)));
        assert_eq!("0".parse::<DmaLatency>(), Ok(DmaLatency(Some(0))));
        assert_eq!("20us".parse::<DmaLatency>(), Ok(DmaLatency(Some(20))));
        assert_eq!("1ms".parse::<DmaLatency>(), Ok(DmaLatency(Some(1000))));
        assert!("1500ns"
            .parse::<DmaLatency>()
            .unwrap_err()
            .contains("whole"));
        assert!("-1".parse::<DmaLatency>().is_err());
        assert!("often"
            .parse::<DmaLatency>()
            .unwrap_err()
            .contains("or off"));
        assert!("3000s"
            .parse::<DmaLatency>()
            .unwrap_err()
            .contains("too large"));
        assert_eq!(DmaLatency(None).to_string(), "off");
    }
    use super::*;

    #[test]
    fn values_parse_once_with_core_parsers() {
        assert_eq!("1ms".parse::<Latency>(), Ok(Latency(1_000_000)));
        assert_eq!("2m".parse::<Duration>(), Ok(Duration(120_000_000_000)));
        assert_eq!("4MiB".parse::<Size>(), Ok(Size(4 << 20)));
        assert_eq!("all".parse::<CpuSel>(), Ok(CpuSel::All));
        assert_eq!(
            "0-2,5".parse::<CpuSel>(),
            Ok(CpuSel::List(CpuList(vec![0, 1, 2, 5])))
        );
        assert_eq!(Size(200 << 20).to_string(), "200M");
        assert_eq!(
            Latency(18_446_744_073_709_546_615).to_string(),
            "18446744073709546615ns"
        );
        assert_eq!(Latency(488_000).to_string(), "488us");
        assert_eq!(Latency(2_000_000_000).to_string(), "2s");
        assert_eq!(Size(4097).to_string(), "4097");
        assert!("".parse::<CpuList>().unwrap_err().contains("empty"));
        assert!("4XB".parse::<Size>().unwrap_err().contains("not a size"));
        assert!("soon"
            .parse::<Latency>()
            .unwrap_err()
            .contains("not a latency"));
    }
}

/// `--load PROFILE`: any text (a profile or `cmd:COMMAND`, resolved by the load session), with
/// the built-in profiles' names as its possible values, so shell completion offers them.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadProfile;

impl clap::builder::TypedValueParser for LoadProfile {
    type Value = String;
    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }
    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            latlab_sys::loads::profiles::PROFILES
                .iter()
                .map(|p| clap::builder::PossibleValue::new(p.name)),
        ))
    }
}

/// `--dma-latency US|off`: the value `/dev/cpu_dma_latency` is held at while measuring, in
/// whole µs (a latency: `0`, `20us`; a bare number is µs), or `off` to leave the CPUs' idle
/// states as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmaLatency(pub Option<i32>);

impl FromStr for DmaLatency {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "off" {
            return Ok(DmaLatency(None));
        }
        let ns = parse_latency(s).map_err(|e| format!("{e} (or off)"))?;
        if ns % 1_000 != 0 {
            return Err(format!(
                "'{s}' is not a whole number of µs (the device takes µs)"
            ));
        }
        let us = i32::try_from(ns / 1_000)
            .map_err(|_| format!("'{s}' is too large for /dev/cpu_dma_latency"))?;
        Ok(DmaLatency(Some(us)))
    }
}

impl fmt::Display for DmaLatency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => f.write_str("off"),
            Some(us) => write!(f, "{us}us"),
        }
    }
}
