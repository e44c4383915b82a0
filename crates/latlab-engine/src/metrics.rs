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

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
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

/// One client connection and how far it has got.
struct Conn {
    s: TcpStream,
    accepted: Instant,
    state: State,
}

enum State {
    /// Reading the request, until the blank line (or [`MAX_REQUEST`], or the deadline).
    Reading { buf: Vec<u8>, deadline: Instant },
    /// Writing the response.
    Writing {
        out: Vec<u8>,
        off: usize,
        deadline: Instant,
    },
    /// The response is out: reading what the client still sends (see [`LINGER`]).
    Lingering { left: usize, deadline: Instant },
}

impl State {
    /// Which connection gives up its slot first when a new one comes and all are taken:
    /// one that is done (lingering), then one still sending its request (a slowloris), then
    /// one whose answer is still being written (a client that does not read). Lower first.
    fn eviction_rank(&self) -> u8 {
        match self {
            State::Lingering { .. } => 0,
            State::Reading { .. } => 1,
            State::Writing { .. } => 2,
        }
    }
}

/// The server loop: every socket non-blocking, `poll(2)` for readiness, each connection a
/// small state machine with its own deadlines, so no client holds up another or the end of
/// the run. A new connection always gets a slot: at [`MAX_CONNECTIONS`], the one ranked first
/// by [`State::eviction_rank`] (oldest first) is closed for it.
fn serve(listener: TcpListener, src: Source, stop: &AtomicBool) {
    let mut conns: Vec<Conn> = Vec::new();
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(MAX_CONNECTIONS + 1);
    while !stop.load(Ordering::Acquire) {
        fds.clear();
        fds.push(libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        for c in &conns {
            fds.push(libc::pollfd {
                fd: c.s.as_raw_fd(),
                events: match c.state {
                    State::Writing { .. } => libc::POLLOUT,
                    _ => libc::POLLIN,
                },
                revents: 0,
            });
        }
        // SAFETY: fds is a valid array of initialised pollfds.
        unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                POLL.as_millis() as i32,
            )
        };
        // Accept what waits, a bounded number per round (a flood cannot keep the loop here).
        for _ in 0..MAX_CONNECTIONS {
            match listener.accept() {
                Ok((s, _)) => {
                    if s.set_nonblocking(true).is_err() {
                        continue;
                    }
                    if conns.len() >= MAX_CONNECTIONS {
                        if let Some(i) = (0..conns.len())
                            .min_by_key(|&i| (conns[i].state.eviction_rank(), conns[i].accepted))
                        {
                            conns.swap_remove(i);
                        }
                    }
                    let now = Instant::now();
                    conns.push(Conn {
                        s,
                        accepted: now,
                        state: State::Reading {
                            buf: Vec::new(),
                            deadline: now + REQUEST_DEADLINE,
                        },
                    });
                }
                Err(_) => break,
            }
        }
        conns.retain_mut(|c| advance(c, &src));
    }
    // Closed at once: the run does not wait for its clients.
}

/// Move a connection on as far as it goes without blocking; false when it is finished.
fn advance(c: &mut Conn, src: &Source) -> bool {
    loop {
        let now = Instant::now();
        match &mut c.state {
            State::Reading { buf, deadline } => {
                match read_request(&mut c.s, buf, *deadline, now, src) {
                    Progress::Wait => return true,
                    Progress::Closed => return false,
                    Progress::Respond(out) => c.state = writing(out, now),
                }
            }
            State::Writing { out, off, deadline } => {
                while *off < out.len() {
                    match c.s.write(&out[*off..]) {
                        Ok(0) => return false,
                        Ok(k) => *off += k,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            return now < *deadline;
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => return false,
                    }
                }
                // Close gently: a client whose request was not read to its end (431, a
                // body) would otherwise get a reset that may destroy the answer before it
                // reads it.
                let _ = c.s.shutdown(std::net::Shutdown::Write);
                c.state = State::Lingering {
                    left: LINGER_BYTES,
                    deadline: now + LINGER,
                };
            }
            State::Lingering { left, deadline } => {
                let mut sink = [0u8; 4096];
                loop {
                    match c.s.read(&mut sink) {
                        Ok(0) => return false,
                        Ok(k) => {
                            *left = left.saturating_sub(k);
                            if *left == 0 {
                                return false;
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            return now < *deadline;
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => return false,
                    }
                }
            }
        }
    }
}

/// Where reading a request got to.
enum Progress {
    /// Nothing more to read now.
    Wait,
    /// The client went away (or the socket failed).
    Closed,
    /// The request is complete, too large or too slow: this is the answer.
    Respond(Vec<u8>),
}

/// Read what the client has sent, without blocking.
fn read_request(
    s: &mut TcpStream,
    buf: &mut Vec<u8>,
    deadline: Instant,
    now: Instant,
    src: &Source,
) -> Progress {
    let mut chunk = [0u8; 2048];
    loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return Progress::Respond(answer(&buf[..i], src));
        }
        if buf.len() > MAX_REQUEST {
            return Progress::Respond(response(
                "431 Request Header Fields Too Large",
                "text/plain; charset=utf-8",
                "",
                format!("request larger than {MAX_REQUEST} bytes\n").as_bytes(),
            ));
        }
        let want = (MAX_REQUEST + 1 - buf.len()).min(chunk.len());
        match s.read(&mut chunk[..want]) {
            Ok(0) => return Progress::Closed,
            Ok(k) => buf.extend_from_slice(&chunk[..k]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if now >= deadline {
                    return Progress::Respond(response(
                        "408 Request Timeout",
                        "text/plain; charset=utf-8",
                        "",
                        b"request too slow\n",
                    ));
                }
                return Progress::Wait;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Progress::Closed,
        }
    }
}

fn writing(out: Vec<u8>, now: Instant) -> State {
    State::Writing {
        out,
        off: 0,
        deadline: now + REQUEST_DEADLINE,
    }
}

fn response(status: &str, ctype: &str, extra: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// The response to a request whose head (up to the blank line) is `head`.
fn answer(head: &[u8], src: &Source) -> Vec<u8> {
    let head = String::from_utf8_lossy(head);
    let mut lines = head.split("\r\n");
    let mut req = lines.next().unwrap_or("").split(' ');
    let (method, target) = (req.next().unwrap_or(""), req.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    if path != "/metrics" {
        return response(
            "404 Not Found",
            "text/plain; charset=utf-8",
            "",
            b"latlab serves /metrics only\n",
        );
    }
    if method != "GET" {
        return response(
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
        return response(
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
    response("200 OK", ctype, "", body.as_bytes())
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
