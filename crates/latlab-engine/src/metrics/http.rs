//! The server's HTTP, by hand and bounded: one thread, non-blocking sockets and `poll(2)`,
//! each connection a small state machine with its own deadlines; `GET /metrics` answered in
//! the format the client accepts.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use prometheus_client::registry::Registry;

use super::scrape::scrape;
use super::{Source, LINGER, LINGER_BYTES, MAX_CONNECTIONS, MAX_REQUEST, POLL, REQUEST_DEADLINE};

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

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
pub(super) fn serve(listener: TcpListener, src: Source, stop: &AtomicBool) {
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
