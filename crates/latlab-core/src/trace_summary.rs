//! What the tracefs flight recorder of a run did (the record's `trace`): its instances and
//! events, the spikes it traced and missed, how fast it re-armed, what the kernel lost.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::units::Nanos;

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct TraceSummary {
    /// The first instance (`/sys/kernel/tracing/instances/latlab-<pid>`).
    pub instance: String,
    /// Every instance that took turns.
    #[serde(default)]
    pub instances: Vec<String>,
    /// The instance's trace_clock.
    pub clock: String,
    /// Events enabled, and those this kernel does not have.
    #[serde(default)]
    pub events: Vec<String>,
    #[serde(default)]
    pub missing_events: Vec<String>,
    /// How a spike stops the recorder.
    pub stop: String,
    pub buffer_kb: u64,
    pub max_spikes: u32,
    pub traced: u32,
    /// Spikes while no instance was armed (or beyond `max_spikes`).
    pub not_traced: u64,
    /// Of `not_traced`, the spikes after `max_spikes` were traced (the recorder stays off).
    #[serde(default)]
    pub over_max_spikes: u64,
    /// Of `traced`, the spikes whose marker found the recorder stopped by another CPU's spike
    /// just before, read from that spike's capture up to the stop.
    #[serde(default)]
    pub covered: u32,
    /// Re-arms of a copied instance as it was (the binary copy consumed every event) and
    /// after a clear (events left, or the text path): a clear waits for an RCU grace period.
    #[serde(default)]
    pub rearm_reused: u32,
    #[serde(default)]
    pub rearm_cleared: u32,
    /// Stopped instances recycled because their spike never reached the collector.
    #[serde(default)]
    pub orphaned: u32,
    /// Traced spikes whose marker the analysis did not find.
    #[serde(default)]
    pub unmatched: u32,
    /// From a spike's clock read to the recorder running again (null when it never stopped).
    pub rearm_mean_ns: Option<Nanos>,
    #[serde(default)]
    pub rearm_max_ns: Nanos,
    /// The recorder that never stops: from a spike's clock read to its pages read into
    /// latlab's memory by the copier (the ring holds seconds; this is how close it came).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_delay_mean_ns: Option<Nanos>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_delay_max_ns: Option<Nanos>,
    /// Spikes whose files were written while the threads measured (more waited in memory
    /// than latlab keeps, or a `trace` action wanted them at once); the others' were written
    /// when the measurement ended.
    #[serde(default)]
    pub files_written_while_measuring: u32,
    /// Pages of history dropped because the collector fell a whole ring behind the copier.
    #[serde(default)]
    pub dropped_pages: u64,
    /// Events the kernel overwrote or dropped, per CPU.
    #[serde(default)]
    pub overruns: Vec<CpuOverruns>,
    #[serde(default)]
    pub virtualized: bool,
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Why an instance could not be removed (then `latlab cleanup` retries).
    pub removal_error: Option<String>,
    /// How spikes' buffers are read: `binary` (`trace_pipe_raw` pages, decoded by latlab) or
    /// `text` (the kernel's `trace` text); absent in records from before the binary reader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_as: Option<String>,
    /// Why the binary reader is not used (a layout latlab does not understand …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary_fallback: Option<String>,
    /// Per traced spike, what its copy held and cost.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub captures: Vec<SpikeCapture>,
}

/// One traced spike's copy of its CPU's buffer.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct SpikeCapture {
    /// The spike's number (`spikes/NNN/`).
    pub spike: u32,
    pub cpu: u32,
    /// `binary` or `text`.
    pub read_as: String,
    /// Bytes copied from the kernel (pages, or text).
    pub bytes: u64,
    /// Sub-buffer pages read (binary) and events decoded or parsed.
    #[serde(default)]
    pub pages: u64,
    pub events: u64,
    /// Events the kernel reported lost inside the copy (pages flagged "missed events": the
    /// stored counts), and flagged pages whose count is unknown.
    #[serde(default)]
    pub lost_events: u64,
    #[serde(default)]
    pub lost_unknown: u64,
    /// Events the ring overwrote on this CPU before the stop (`per_cpu/cpuN/stats` overrun):
    /// the copy starts that much later than the recording did.
    #[serde(default)]
    pub overrun: u64,
    /// Reading the buffer, and decoding + rendering + analyzing it.
    pub read_ns: Nanos,
    pub decode_ns: Nanos,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct CpuOverruns {
    pub cpu: u32,
    pub events: u64,
}
