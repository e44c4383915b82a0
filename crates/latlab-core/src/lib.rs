//! latlab-core: the pure part of latlab.
//!
//! Units, histograms and statistics, the run record (what `run.json` holds) and the derived
//! model reports are rendered from, the simulated latency source, parsers of outside formats
//! (tracefs text, cyclictest, rtla, realfeel) and the attribution of traced spikes. Nothing
//! here touches the OS: no files, no clock, no printing — so all of it is tested with plain
//! data.
//!
//! ```
//! use latlab_core::{hist::{Histogram, Layout}, stats::Stats};
//! let mut h = Histogram::new(Layout::default());
//! h.record(42_000);
//! let s = Stats::of(&h, 0);
//! assert_eq!(s.max_ns, Some(42_000));
//! ```

pub mod activity;
pub mod bench;
pub mod bootstrap;
pub mod changepoint;
pub mod compare;
pub mod cpulist;
pub mod escape;
pub mod findings;
pub mod gates;
pub mod hist;
pub mod history;
pub mod import;
pub mod intervals;
pub mod inventory;
pub mod model;
pub mod modes;
pub mod plan;
pub mod profile;
pub mod ranks;
pub mod record;
pub mod scenario;
pub mod scenario_record;
pub mod secrets;
pub mod sim;
pub mod stats;
pub mod suggest;
pub mod tail;
pub mod timeline;
pub mod trace;
pub mod trace_summary;
pub mod units;
pub mod until;
