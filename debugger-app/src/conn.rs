//! The connection to an agent, run off the caller's thread: a `racetrack-conn` thread
//! with a single-threaded tokio runtime owns the WebSocket; events arrive on a channel
//! (batches flattened, in order), commands leave through another. Nothing here blocks the
//! UI: a waker is called whenever events arrive.

use crate::scenarios::Kept;
use futures_util::{SinkExt, StreamExt};
use racetrack_protocol::{
    Decoded, Decoder, Event, Names, PackedEv, Request, BINARY_HEADER, MAX_FRAME_BYTES, PROTOCOL_VERSION,
};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

/// Why a connection to an agent could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The connection's thread or its runtime could not be started.
    #[error("{0}")]
    Thread(#[source] std::io::Error),
    /// The URL is not a WebSocket URL, or the agent refused or did not answer.
    #[error("cannot connect to {url}: {source}")]
    Connect {
        /// The agent's URL.
        url: String,
        /// tungstenite's error.
        source: Box<tokio_tungstenite::tungstenite::Error>,
    },
    /// No handshake within the timeout.
    #[error("no answer from the agent within {ms} ms")]
    Timeout {
        /// The timeout.
        ms: u128,
    },
}

/// What the connection delivers.
#[derive(Debug, Clone, PartialEq)]
pub enum ConnEvent {
    /// An event from the agent.
    Event(Event),
    /// Several events from the agent, in order: a frame's (one channel operation for
    /// them all).
    Events(Vec<Event>),
    /// A frame of streamed events in compact form (see [`racetrack_protocol::Decoded`]),
    /// checked against the names they use.
    Packed(Arc<Names>, Vec<PackedEv>),
    /// The connection closed (with the reason if it was an error).
    Closed(Option<String>),
}

impl ConnEvent {
    /// `evs` as one item: [`ConnEvent::Event`] for a single one.
    pub fn batch(mut evs: Vec<Event>) -> Self {
        if evs.len() == 1 {
            if let Some(ev) = evs.pop() {
                return ConnEvent::Event(ev);
            }
        }
        ConnEvent::Events(evs)
    }
}

/// A live connection. Dropping it closes the connection (the agent then detaches and
/// releases every hold).
pub struct Connection {
    /// Events in arrival order.
    pub events: mpsc::Receiver<ConnEvent>,
    cmds: tokio::sync::mpsc::UnboundedSender<Request>,
    kept: Kept,
}

/// Called after events arrive (a GUI asks for a repaint there).
pub type Waker = Box<dyn Fn() + Send>;

/// Items buffered between the connection thread and the consumer: single events, or
/// frames of up to 1,024 events (the agent's batch size: packed frames, or a frame's
/// events as one [`ConnEvent::Events`]), so at most about a quarter of a million events,
/// and usually far fewer (a consumer that lags behind mostly has whole frames waiting).
pub(crate) const EVENTS_CAP: usize = 256;

impl Connection {
    /// Connect to `url` (e.g. `ws://127.0.0.1:4000`), waiting up to `timeout` for the
    /// handshake.
    pub fn connect(url: &str, timeout: Duration) -> Result<Self, ConnectError> {
        Self::connect_with_waker(url, timeout, Box::new(|| {}))
    }

    /// Like [`Connection::connect`]; `waker` is called after events arrive (a GUI asks
    /// for a repaint there).
    pub fn connect_with_waker(url: &str, timeout: Duration, waker: Waker) -> Result<Self, ConnectError> {
        // Bounded: a consumer that falls behind stops this thread reading the socket, which
        // makes the agent slow the program down (backpressure) instead of memory growing here.
        let (ev_tx, ev_rx) = mpsc::sync_channel(EVENTS_CAP);
        let (cmd_tx, cmd_rx) = tokio::sync::mpsc::unbounded_channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        let url = url.to_owned();
        let kept = Kept::default();
        let k = kept.clone();
        std::thread::Builder::new()
            .name("racetrack-conn".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(ConnectError::Thread(e)));
                        return;
                    }
                };
                rt.block_on(run(url, ev_tx, cmd_rx, ready_tx, waker, k));
            })
            .map_err(ConnectError::Thread)?;
        match ready_rx.recv_timeout(timeout) {
            Ok(Ok(())) => Ok(Self {
                events: ev_rx,
                cmds: cmd_tx,
                kept,
            }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(ConnectError::Timeout {
                ms: timeout.as_millis(),
            }),
        }
    }

    /// A connection made elsewhere (the merged ranks of a job, [`crate::job`]) from its
    /// event receiver and command sender, and where it keeps the session as it ended.
    pub(crate) fn from_parts(
        events: mpsc::Receiver<ConnEvent>,
        cmds: tokio::sync::mpsc::UnboundedSender<Request>,
        kept: Kept,
    ) -> Self {
        Self { events, cmds, kept }
    }

    /// Send a command (never blocks), with or without a request number (a
    /// [`racetrack_protocol::Command`] converts to a [`Request`] without one). False if the
    /// connection is closed.
    pub fn send(&self, cmd: impl Into<Request>) -> bool {
        self.cmds.send(cmd.into()).is_ok()
    }

    /// Separate the sending half (cloneable, for other threads) from the events.
    pub fn split(self) -> (CommandSender, mpsc::Receiver<ConnEvent>) {
        (
            CommandSender {
                cmds: self.cmds,
                kept: self.kept,
            },
            self.events,
        )
    }

    /// `save_scenario` to `path` once the program has ended (see [`Kept::save`]).
    pub fn save_kept(&self, path: &str, req: Option<u64>) -> Event {
        self.kept.save(path, req)
    }
}

/// The sending half of a [`Connection`]; dropping every clone closes the connection.
#[derive(Clone)]
pub struct CommandSender {
    cmds: tokio::sync::mpsc::UnboundedSender<Request>,
    kept: Kept,
}

impl CommandSender {
    /// Send a command (never blocks), with or without a request number. False if the
    /// connection is closed.
    pub fn send(&self, cmd: impl Into<Request>) -> bool {
        self.cmds.send(cmd.into()).is_ok()
    }

    /// `save_scenario` to `path` once the program has ended (see [`Kept::save`]).
    pub fn save_kept(&self, path: &str, req: Option<u64>) -> Event {
        self.kept.save(path, req)
    }
}

/// Open the WebSocket to the agent at `url`, asking for binary packed frames (no decimal
/// numbers to parse) and accepting frames up to the protocol's limit.
async fn connect(
    url: &str,
) -> Result<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    ConnectError,
> {
    let failed = |e| ConnectError::Connect {
        url: url.to_owned(),
        source: Box::new(e),
    };
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_FRAME_BYTES))
        .max_frame_size(Some(MAX_FRAME_BYTES));
    let mut request = url.into_client_request().map_err(failed)?;
    request
        .headers_mut()
        .insert(BINARY_HEADER, HeaderValue::from_static("binary"));
    tokio_tungstenite::connect_async_with_config(request, Some(config), true)
        .await
        .map(|(ws, _)| ws)
        .map_err(failed)
}

async fn run(
    url: String,
    events: mpsc::SyncSender<ConnEvent>,
    mut cmds: tokio::sync::mpsc::UnboundedReceiver<Request>,
    ready: mpsc::Sender<Result<(), ConnectError>>,
    waker: Waker,
    kept: Kept,
) {
    let ws = match connect(&url).await {
        Ok(ws) => ws,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let _ = ready.send(Ok(()));
    let (mut tx, mut rx) = ws.split();
    let mut decoder = Decoder::default();
    let mut asked = crate::scenarios::Asked::new();
    let reason = loop {
        tokio::select! {
            m = rx.next() => {
                let decoded = match m {
                    Some(Ok(Message::Text(t))) => decoder.decode_frame(&t),
                    Some(Ok(Message::Binary(b))) => decoder.decode_binary(&b),
                    Some(Ok(Message::Close(_))) | None => break None,
                    Some(Ok(_)) => continue,
                    Some(Err(e)) => break Some(format!("connection lost: {e}")),
                };
                match decoded {
                    Ok(Decoded::Packed(names, ps)) => {
                        // One channel operation for the whole frame.
                        if events.send(ConnEvent::Packed(names, ps)).is_err() {
                            break None;
                        }
                        waker();
                    }
                    Ok(Decoded::Events(evs)) => {
                        // Scenarios are written here, or kept: never passed on.
                        let evs: Vec<Event> = evs.into_iter().filter_map(|ev| crate::scenarios::take(ev, &kept, &mut asked)).collect();
                        if evs.is_empty() {
                            continue;
                        }
                        if let Some(Event::Hello { protocol, .. }) = evs.first() {
                            if *protocol != PROTOCOL_VERSION {
                                break Some(format!("the agent speaks protocol {protocol}; this debugger speaks {PROTOCOL_VERSION}"));
                            }
                        }
                        if events.send(ConnEvent::batch(evs)).is_err() {
                            break None;
                        }
                        waker();
                    }
                    Err(e) => {
                        let _ = events.send(ConnEvent::Event(Event::Error { message: format!("unreadable frame from the agent: {e}"), req: None }));
                    }
                }
            }
            c = cmds.recv() => match c {
                Some(cmd) => {
                    if let racetrack_protocol::Command::SaveScenario { path } = &cmd.cmd {
                        asked.push((cmd.req, path.clone()));
                    }
                    let text = cmd.to_json();
                    if let Err(e) = tx.send(Message::Text(text.into())).await {
                        break Some(format!("connection lost: {e}"));
                    }
                }
                None => {
                    // The owner dropped the connection: close politely.
                    let _ = tx.close().await;
                    break None;
                }
            },
        }
    };
    let _ = events.send(ConnEvent::Closed(reason));
    waker();
}
