//! `latlab run --metrics-listen ADDR`: `/metrics` for Prometheus while the run measures.
//!
//! **Threading.** One thread of its own, started after the measuring threads and stopped
//! before the record is written, serves the scrapes. It reads what the measuring threads
//! publish for the collector and the live display ([`latlab_sys::live`]: a seqlocked histogram
//! and atomics) and what the collector hands it (spikes traced and not traced) under a mutex the
//! measuring threads never touch. A scrape therefore costs the measuring threads nothing but
//! the cache lines it reads.
//!
//! **HTTP, by hand and bounded.** One client at a time; a request is read up to
//! [`MAX_REQUEST`] bytes (more: 431) within [`REQUEST_DEADLINE`] (read and write timeouts on the
//! socket too); only `GET /metrics` (a query string is ignored) is served, other paths are 404,
//! other methods 405. Every response closes the connection.
//!
//! **Encoding** is the `prometheus-client` crate's: the Prometheus text format 0.0.4 by
//! default, OpenMetrics 1.0 when the `Accept` header asks for `application/openmetrics-text`.
//! The metric names and labels are a contract (docs/contract.md).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use latlab_sys::measure::ThreadShared;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::exemplar::Exemplar;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

/// A request larger than this (request line and headers) is refused with 431.
pub const MAX_REQUEST: usize = 8 * 1024;
/// A client has this long to send its request; reads and writes time out as well.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// How often the server thread looks for a client or the end of the run.
const POLL: Duration = Duration::from_millis(20);

/// The fixed bucket ladder of `latlab_latency_seconds`, in ns (+Inf follows).
pub const LADDER_NS: [u64; 13] = [
    1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000, 2_000_000,
    5_000_000, 10_000_000,
];

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

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
    pub loads: Vec<crate::load_session::LiveLoad>,
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
    pub fn set_loads(&self, loads: Vec<crate::load_session::LiveLoad>) {
        if let Ok(mut f) = self.facts.lock() {
            f.loads = loads;
        }
    }

    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
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

fn serve(listener: TcpListener, src: Source, stop: &AtomicBool) {
    while !stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((mut s, _)) => {
                // A client that misbehaves only loses its own answer.
                let _ = handle(&mut s, &src);
                linger(&mut s);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

/// Close gently: a client whose request was not read to its end (431, a body) would otherwise
/// get a reset that may destroy the answer before it reads it. Bounded: 64 KiB or 200 ms.
fn linger(s: &mut TcpStream) {
    let _ = s.shutdown(std::net::Shutdown::Write);
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    let mut sink = [0u8; 4096];
    let t0 = Instant::now();
    let mut left: usize = 64 * 1024;
    while left > 0 && t0.elapsed() < Duration::from_millis(200) {
        match s.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(k) => left = left.saturating_sub(k),
        }
    }
}

fn respond(
    s: &mut TcpStream,
    status: &str,
    ctype: &str,
    extra: &str,
    body: &[u8],
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes())?;
    s.write_all(body)?;
    s.flush()
}

fn handle(s: &mut TcpStream, src: &Source) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(REQUEST_DEADLINE))?;
    s.set_write_timeout(Some(REQUEST_DEADLINE))?;
    let t0 = Instant::now();
    let mut buf = vec![0u8; MAX_REQUEST + 1];
    let mut n = 0;
    let end = loop {
        if let Some(i) = buf[..n].windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if n > MAX_REQUEST {
            return respond(
                s,
                "431 Request Header Fields Too Large",
                "text/plain; charset=utf-8",
                "",
                format!("request larger than {MAX_REQUEST} bytes\n").as_bytes(),
            );
        }
        if t0.elapsed() > REQUEST_DEADLINE {
            return respond(
                s,
                "408 Request Timeout",
                "text/plain; charset=utf-8",
                "",
                b"request too slow\n",
            );
        }
        match s.read(&mut buf[n..])? {
            0 => return Ok(()),
            k => n += k,
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]);
    let mut lines = head.split("\r\n");
    let mut req = lines.next().unwrap_or("").split(' ');
    let (method, target) = (req.next().unwrap_or(""), req.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    if path != "/metrics" {
        return respond(
            s,
            "404 Not Found",
            "text/plain; charset=utf-8",
            "",
            b"latlab serves /metrics only\n",
        );
    }
    if method != "GET" {
        return respond(
            s,
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            "Allow: GET\r\n",
            b"only GET\n",
        );
    }
    let openmetrics = lines.any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("accept") && v.contains("application/openmetrics-text")
        })
    });
    let mut reg = Registry::default();
    reg.register_collector(Box::new(scrape(src)));
    let mut body = String::new();
    let enc = if openmetrics {
        prometheus_client::encoding::text::encode(&mut body, &reg)
    } else {
        prometheus_client::encoding::prometheus_text::encode(&mut body, &reg)
    };
    if enc.is_err() {
        return respond(
            s,
            "500 Internal Server Error",
            "text/plain; charset=utf-8",
            "",
            b"encoding failed\n",
        );
    }
    let ctype = if openmetrics {
        OPENMETRICS
    } else {
        prometheus_client::encoding::prometheus_text::CONTENT_TYPE
    };
    respond(s, "200 OK", ctype, "", body.as_bytes())
}

/// One CPU's figures, read once per scrape.
#[derive(Debug)]
struct CpuFigures {
    cpu: String,
    /// Per ladder range (not cumulative: the encoder accumulates), +Inf last.
    buckets: Vec<(f64, u64)>,
    count: u64,
    sum_s: f64,
    max_s: f64,
    missed: u64,
}

#[derive(Debug)]
struct Scrape {
    cpus: Vec<CpuFigures>,
    facts: Facts,
    elapsed_s: f64,
}

fn scrape(src: &Source) -> Scrape {
    let cpus = src
        .threads
        .iter()
        .map(|t| {
            // One snapshot: its buckets, count and sum agree with each other.
            let h = t.hist.snapshot();
            let mut per = vec![0u64; LADDER_NS.len() + 1];
            for (_, upper, c) in h.buckets() {
                // A bucket counts under the first bound its upper edge does not exceed: a
                // sample is counted under `le` only when its whole bucket lies below (never
                // early; the 1 µs buckets end on the ladder's bounds).
                let i = LADDER_NS.partition_point(|&le| le < upper);
                per[i] += c;
            }
            let mut buckets: Vec<(f64, u64)> = LADDER_NS
                .iter()
                .zip(&per)
                .map(|(&le, &c)| (le as f64 / 1e9, c))
                .collect();
            buckets.push((f64::INFINITY, per[LADDER_NS.len()]));
            CpuFigures {
                cpu: t.cpu.to_string(),
                buckets,
                count: h.count(),
                sum_s: h.sum() as f64 / 1e9,
                max_s: h.max().unwrap_or(0) as f64 / 1e9,
                missed: t.missed.load(Ordering::Relaxed) + t.mode.coalesced.load(Ordering::Relaxed),
            }
        })
        .collect();
    Scrape {
        cpus,
        facts: src.facts.lock().map(|f| f.clone()).unwrap_or_default(),
        elapsed_s: src.started.elapsed().as_secs_f64(),
    }
}

type NoExemplar = Exemplar<NoLabelSet, f64>;

impl Collector for Scrape {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let label = |c: &CpuFigures| [("cpu", c.cpu.clone())];
        {
            let mut m = e.encode_descriptor(
                "latlab_latency",
                "Wake-up latency per measured CPU since the measurement started",
                Some(&Unit::Seconds),
                MetricType::Histogram,
            )?;
            for c in &self.cpus {
                let l = label(c);
                m.encode_family(&l)?
                    .encode_histogram::<NoLabelSet>(c.sum_s, c.count, &c.buckets, None)?;
            }
        }
        type PerCpu = fn(&CpuFigures) -> u64;
        let counters: [(&str, &str, PerCpu); 2] = [
            ("latlab_samples", "Samples measured per CPU", |c| c.count),
            (
                "latlab_missed_periods",
                "Wake-up periods missed per CPU (a wake-up later than the next period)",
                |c| c.missed,
            ),
        ];
        for (name, help, f) in counters {
            let mut m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
            for c in &self.cpus {
                let l = label(c);
                m.encode_family(&l)?
                    .encode_counter::<NoLabelSet, _, f64>(&f(c), None::<&NoExemplar>)?;
            }
        }
        {
            let mut m = e.encode_descriptor(
                "latlab_max_latency",
                "Largest wake-up latency per CPU since the measurement started",
                Some(&Unit::Seconds),
                MetricType::Gauge,
            )?;
            for c in &self.cpus {
                let l = label(c);
                m.encode_family(&l)?.encode_gauge(&c.max_s)?;
            }
        }
        for (name, help, v) in [
            (
                "latlab_spikes_traced",
                "Spikes whose trace the flight recorder saved",
                self.facts.spikes_traced,
            ),
            (
                "latlab_spikes_not_traced",
                "Spikes above --trace-threshold whose trace was not saved (recorder busy or --trace-max-spikes reached)",
                self.facts.spikes_not_traced,
            ),
        ] {
            let mut m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
            m.encode_counter::<NoLabelSet, _, f64>(&v, None::<&NoExemplar>)?;
        }
        {
            let mut m = e.encode_descriptor(
                "latlab_load_throughput",
                "A load's throughput so far, as its own log reports it per finished iteration (unit label: ops/s, s/iteration, MB/s)",
                None,
                MetricType::Gauge,
            )?;
            for l in &self.facts.loads {
                if let Some((v, unit)) = l.throughput {
                    let lab = [
                        ("load", l.profile.clone()),
                        ("part", l.part.clone()),
                        ("unit", unit.to_string()),
                    ];
                    m.encode_family(&lab)?.encode_gauge(&v)?;
                }
            }
        }
        for (name, help, restarts) in [
            (
                "latlab_load_restarts",
                "Times the supervisor restarted a load's part (it ended before the run)",
                true,
            ),
            (
                "latlab_load_failures",
                "Times a load's part ended in failure (non-zero exit or signal)",
                false,
            ),
        ] {
            let mut m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
            for l in &self.facts.loads {
                let lab = [("load", l.profile.clone()), ("part", l.part.clone())];
                let v = if restarts { l.restarts } else { l.failures } as u64;
                m.encode_family(&lab)?
                    .encode_counter::<NoLabelSet, _, f64>(&v, None::<&NoExemplar>)?;
            }
        }
        let mut m = e.encode_descriptor(
            "latlab_measured",
            "Time since the measurement started",
            Some(&Unit::Seconds),
            MetricType::Gauge,
        )?;
        m.encode_gauge(&self.elapsed_s)?;
        Ok(())
    }
}
