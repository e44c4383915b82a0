//! `latlab run --metrics-listen ADDR`: `/metrics` for Prometheus while the run measures.
//!
//! **Threading.** One thread of its own, started after the measuring threads and stopped
//! before the record is written, serves the scrapes. It reads what the measuring threads
//! publish for the collector and the live display ([`latlab_sys::live`]: a seqlocked histogram
//! and atomics) and what the collector hands it (spikes traced and not traced) under a mutex the
//! measuring threads never touch. A scrape therefore costs the measuring threads nothing but
//! the cache lines it reads.
//!
//! **HTTP, by hand and bounded.** One thread, non-blocking sockets and `poll(2)`: each
//! connection is a small state machine with its own deadlines, so a client that sends its
//! request slowly (slowloris) or never reads its answer holds up no other client and not the
//! end of the run. A request is read up to [`MAX_REQUEST`] bytes (more: 431) within
//! [`REQUEST_DEADLINE`] (then 408); the answer has as long to be written. At most
//! [`MAX_CONNECTIONS`] are open; one more takes the slot of one that is done, a slow sender or
//! a non-reader (oldest first), so a scrape always gets in. Only `GET /metrics` (a query string
//! is ignored) is served, other paths are 404, other methods 405. Every response closes the
//! connection. [`Server::stop`] returns within [`SHUTDOWN_BOUND`].
//!
//! **Encoding** is the `prometheus-client` crate's: the Prometheus text format 0.0.4 by
//! default, OpenMetrics 1.0 when the `Accept` header asks for `application/openmetrics-text`.
//! The metric names and labels are a contract (docs/contract.md).

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use latlab_sys::measure::ThreadShared;

mod http;
mod scrape;

use http::serve;

/// A request larger than this (request line and headers) is refused with 431.
pub const MAX_REQUEST: usize = 8 * 1024;
/// A client has this long to send its request (then 408), and its response this long to be
/// written (then the connection is closed).
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// Connections served at once. One more takes the slot of the one that is done, or the
/// oldest still sending its request, or the oldest not reading its answer (in that order):
/// a new scrape always gets in.
pub const MAX_CONNECTIONS: usize = 32;
/// After the response: what the client still sends is read and dropped, up to this long and
/// [`LINGER_BYTES`], so that closing does not reset the connection before it read the answer.
const LINGER: Duration = Duration::from_millis(200);
const LINGER_BYTES: usize = 64 * 1024;
/// How often the server thread looks at the stop flag (at most; sooner when a client is ready).
const POLL: Duration = Duration::from_millis(20);
/// [`Server::stop`] returns within this, whatever the clients do: the server thread does
/// nothing that blocks and looks at the stop flag every [`POLL`]; one that has still not ended
/// by then is left behind (it only reads) and the run goes on to write its record.
pub const SHUTDOWN_BOUND: Duration = Duration::from_millis(500);

/// The fixed bucket ladder of `latlab_latency_seconds`, in ns (+Inf follows).
pub const LADDER_NS: [u64; 13] = [
    1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000, 2_000_000,
    5_000_000, 10_000_000,
];

/// Resolve and bind `spec` (`127.0.0.1:9464`, `[::1]:9464`, `localhost:9464`) before anything
/// is measured. A non-loopback address needs `any` (`--metrics-listen-any`).
pub fn bind(spec: &str, any: bool) -> anyhow::Result<TcpListener> {
    let shown = latlab_core::escape::escape(spec);
    let addrs: Vec<SocketAddr> = spec
        .to_socket_addrs()
        .map_err(|e| {
            anyhow::anyhow!(
                "--metrics-listen {shown}: not an address ({e}): give HOST:PORT, e.g. 127.0.0.1:9464"
            )
        })?
        .collect();
    let Some(addr) = addrs.first().copied() else {
        anyhow::bail!("--metrics-listen {shown}: the name resolves to no address");
    };
    if !any {
        if let Some(a) = addrs.iter().find(|a| !a.ip().is_loopback()) {
            anyhow::bail!(
                "--metrics-listen {shown}: {} is not a loopback address, so the metrics would be readable from the network: add --metrics-listen-any to allow it",
                a.ip()
            );
        }
    }
    let l = TcpListener::bind(addr).map_err(|e| {
        anyhow::anyhow!(
            "--metrics-listen {shown}: cannot listen on {addr} ({e}): choose another port or stop what uses it"
        )
    })?;
    l.set_nonblocking(true)
        .context("--metrics-listen: cannot make the socket non-blocking")?;
    Ok(l)
}

/// What the collector knows and the measuring threads do not.
#[derive(Debug, Default, Clone)]
pub struct Facts {
    pub spikes_traced: u64,
    pub spikes_not_traced: u64,
    pub loads: Vec<crate::loads::LiveLoad>,
}

/// The serving thread; stopped (and joined) by [`Server::stop`] or on drop.
pub struct Server {
    /// Where it listens (the port chosen by the system for `:0`).
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    facts: Arc<Mutex<Facts>>,
    handle: Option<JoinHandle<()>>,
}

impl Server {
    pub fn start(listener: TcpListener, threads: Vec<Arc<ThreadShared>>) -> anyhow::Result<Server> {
        let addr = listener
            .local_addr()
            .context("--metrics-listen: the socket has no address")?;
        let stop = Arc::new(AtomicBool::new(false));
        let facts = Arc::new(Mutex::new(Facts::default()));
        let src = Source {
            threads,
            facts: facts.clone(),
            started: Instant::now(),
        };
        let st = stop.clone();
        let handle = std::thread::Builder::new()
            .name("latlab-metrics".into())
            .spawn(move || serve(listener, src, &st))
            .context("cannot start the metrics thread")?;
        Ok(Server {
            addr,
            stop,
            facts,
            handle: Some(handle),
        })
    }

    /// The collector's latest counts of spikes traced and not traced.
    pub fn set_spikes(&self, traced: u64, not_traced: u64) {
        if let Ok(mut f) = self.facts.lock() {
            f.spikes_traced = traced;
            f.spikes_not_traced = not_traced;
        }
    }

    /// The collector's latest figures of the loads.
    pub fn set_loads(&self, loads: Vec<crate::loads::LiveLoad>) {
        if let Ok(mut f) = self.facts.lock() {
            f.loads = loads;
        }
    }

    pub fn stop(mut self) {
        self.shutdown();
    }

    /// Within [`SHUTDOWN_BOUND`].
    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let t0 = Instant::now();
            while !h.is_finished() && t0.elapsed() < SHUTDOWN_BOUND {
                std::thread::sleep(Duration::from_millis(2));
            }
            if h.is_finished() {
                let _ = h.join();
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Where a scrape reads from.
struct Source {
    threads: Vec<Arc<ThreadShared>>,
    facts: Arc<Mutex<Facts>>,
    started: Instant,
}
