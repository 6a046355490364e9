//! One session over the ranks of an MPI job. The debugger listens; every rank's agent
//! dials in (`RACETRACK_CONNECT`); the ranks' streams are merged into one [`Connection`],
//! so the controller and the GUI see one program whose threads are the ranks (`rank[0]`,
//! `rank[1]`, … of the collection `rank`; `docs/PROTOCOL.md`, "MPI jobs"):
//!
//! - one `structure` (the ranks' merged) and one `snapshot`, when every rank sent its
//!   own (a rank's events wait until then; the structure is sent again when it changes),
//!   then the ranks' events as they come: each
//!   rank's stay in order, and each `recv` names the `send` it matched ([`links`]);
//! - a command for a thread or a held event goes to the rank that has it; any other goes
//!   to every rank, and its verdict (`ok` / `error` with its request number) is one: the
//!   first error, else `ok` once every rank said so (a command without a request number
//!   is numbered here, so that its refusal is one `error` too, without the number);
//! - the connection closes when every rank's has.
//!
//! Event numbers are unique across the job: each rank numbers from its own range.

use crate::conn::{Connection, Waker};
use crate::scenarios::Kept;
use racetrack_protocol::{BINARY_HEADER, MAX_FRAME_BYTES};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request as HttpRequest, Response};
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::WebSocketStream;

mod links;
mod merge;
mod out;
mod scenario;
mod watch;
use merge::Merge;

type Ws = WebSocketStream<TcpStream>;

/// Why a job's socket could not be opened, or its ranks did not all connect.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// Not a socket address.
    #[error("`{addr}` is not an address such as 127.0.0.1:0")]
    BadAddress {
        /// As given.
        addr: String,
    },
    /// Beyond loopback without a token.
    #[error(
        "{addr} is not a loopback address: set RACETRACK_TOKEN so that only the job's ranks can connect"
    )]
    NotLoopback {
        /// As given.
        addr: String,
    },
    /// The address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// As given.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The socket, the job's thread or its runtime failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Accepting a rank's connection failed.
    #[error("accept: {0}")]
    Accept(#[source] std::io::Error),
    /// The job's connection thread stopped before the ranks connected.
    #[error("the job's connection thread stopped")]
    ThreadStopped,
    /// The launcher is gone, and says why (what `accept`'s `gone` returned).
    #[error("{0}")]
    Gone(String),
    /// Not every rank connected in time.
    #[error(
        "{joined} of {ranks} ranks connected within {secs} s (is the program an MPI program, and were the wrappers preloaded?)"
    )]
    Timeout {
        /// Ranks connected.
        joined: usize,
        /// Ranks expected.
        ranks: usize,
        /// The timeout.
        secs: u64,
    },
}

/// A socket the ranks of a job dial.
pub struct JobListener {
    listener: std::net::TcpListener,
    url: String,
    token: Option<String>,
}

impl JobListener {
    /// Listen on `addr` (`127.0.0.1:0` picks a port). Beyond loopback, ranks must present
    /// `token` (`RACETRACK_TOKEN` in their environment).
    pub fn bind(addr: &str, token: Option<String>) -> Result<Self, JobError> {
        let sa: std::net::SocketAddr = addr.parse().map_err(|_| JobError::BadAddress {
            addr: addr.to_owned(),
        })?;
        if !sa.ip().is_loopback() && token.is_none() {
            return Err(JobError::NotLoopback {
                addr: addr.to_owned(),
            });
        }
        let listener = std::net::TcpListener::bind(sa).map_err(|source| JobError::Listen {
            addr: addr.to_owned(),
            source,
        })?;
        let local = listener.local_addr()?;
        Ok(Self {
            listener,
            url: format!("ws://{local}"),
            token,
        })
    }

    /// What the ranks dial (`RACETRACK_CONNECT`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Wait until `ranks` ranks connected (checking `gone` every 100 ms: the launcher
    /// may have failed, and says why), then merge them into one connection.
    pub fn accept(
        self,
        ranks: usize,
        timeout: Duration,
        waker: Waker,
        mut gone: impl FnMut() -> Option<String>,
    ) -> Result<Connection, JobError> {
        let (ev_tx, ev_rx) = mpsc::sync_channel(crate::conn::EVENTS_CAP);
        let (cmd_tx, cmd_rx) = tokio::sync::mpsc::unbounded_channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        let joined = Arc::new(AtomicUsize::new(0));
        let kept = Kept::default();
        let k = kept.clone();
        let j = joined.clone();
        std::thread::Builder::new()
            .name("racetrack-job".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => return drop(ready_tx.send(Err(JobError::Io(e)))),
                };
                rt.block_on(async move {
                    match gather(self.listener, self.token, ranks, &j).await {
                        Ok(socks) => {
                            let _ = ready_tx.send(Ok(()));
                            Merge::new(socks, ev_tx, waker, k).run(cmd_rx).await;
                        }
                        Err(e) => drop(ready_tx.send(Err(e))),
                    }
                });
            })
            .map_err(JobError::Io)?;
        let deadline = Instant::now() + timeout;
        loop {
            match ready_rx.recv_timeout(Duration::from_millis(100)) {
                Ok(Ok(())) => return Ok(Connection::from_parts(ev_rx, cmd_tx, kept)),
                Ok(Err(e)) => return Err(e),
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(JobError::ThreadStopped),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            if let Some(why) = gone() {
                return Err(JobError::Gone(why));
            }
            if Instant::now() > deadline {
                return Err(JobError::Timeout {
                    joined: joined.load(SeqCst),
                    ranks,
                    secs: timeout.as_secs(),
                });
            }
        }
    }
}

/// Accept `ranks` WebSocket connections (refusing a missing token), in arrival order.
async fn gather(
    listener: std::net::TcpListener,
    token: Option<String>,
    ranks: usize,
    joined: &AtomicUsize,
) -> Result<Vec<Ws>, JobError> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let mut socks = Vec::with_capacity(ranks);
    while socks.len() < ranks {
        let (stream, peer) = listener.accept().await.map_err(JobError::Accept)?;
        let _ = stream.set_nodelay(true);
        match handshake(stream, token.as_deref()).await {
            Ok(ws) => {
                socks.push(ws);
                joined.store(socks.len(), SeqCst);
            }
            Err(e) => eprintln!("racetrack: refused a connection from {peer}: {e}"),
        }
    }
    Ok(socks)
}

async fn handshake(stream: TcpStream, token: Option<&str>) -> Result<Ws, String> {
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_FRAME_BYTES))
        .max_frame_size(Some(MAX_FRAME_BYTES));
    // Why the check refused, for the user: tungstenite's own error says only "403".
    let refusal = std::cell::Cell::new(None);
    #[allow(clippy::result_large_err)]
    let check = |req: &HttpRequest, mut resp: Response| -> Result<Response, ErrorResponse> {
        if let Some(t) = token {
            let auth = req.headers().get("authorization").and_then(|v| v.to_str().ok());
            if auth != Some(&format!("Bearer {t}")) {
                refusal.set(Some(match auth {
                    None => "it sent no token (RACETRACK_TOKEN in the ranks' environment)",
                    Some(_) => "it sent a wrong token (RACETRACK_TOKEN differs from this listener's)",
                }));
                let mut r = ErrorResponse::new(Some("a valid token is required (RACETRACK_TOKEN)".into()));
                *r.status_mut() = StatusCode::FORBIDDEN;
                return Err(r);
            }
        }
        // Packed events in binary frames: no decimal numbers to parse.
        resp.headers_mut()
            .insert(BINARY_HEADER, HeaderValue::from_static("binary"));
        Ok(resp)
    };
    let accepted = tokio_tungstenite::accept_hdr_async_with_config(stream, check, Some(config)).await;
    accepted.map_err(|e| match refusal.take() {
        Some(why) => why.to_owned(),
        None => format!("handshake: {e}"),
    })
}
