//! The agent's own thread (`racetrack-agent`): a single-threaded tokio runtime that
//! accepts debugger connections, sends `hello`, `structure` and `snapshot`, then flushes
//! the event buffer in `batch` and `packed` frames (at once when woken, else every tick;
//! packed ones binary if the debugger asked so in its handshake) and applies the commands
//! it receives. One controlling debugger at a time.

use super::phase::Phase;
use super::record::{self, Frame, Packing};
use super::Agent;
use futures_util::{SinkExt, StreamExt};
use racetrack_protocol::{Command, Event, Names, Request as CmdRequest, BINARY_HEADER, MAX_FRAME_BYTES};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// Streamed events are flushed at least this often.
pub(super) const TICK: Duration = Duration::from_millis(10);
/// How long a finishing program waits for the debugger to answer its close.
const CLOSE_PATIENCE: Duration = Duration::from_secs(10);
/// Events per `batch` or `packed` frame at most. A debugger decodes a packed frame into
/// one vector of about 100 bytes per event: at 1,024 it stays below the size at which
/// glibc's allocator maps fresh pages for every frame (and faults them in: with 4,096 the
/// debugger spent much of its time there).
pub(super) const BATCH_MAX: usize = 1024;
/// A dialling agent retries this many times, [`DIAL_PAUSE`] apart, while nothing listens
/// at the debugger's address.
const DIAL_TRIES: u32 = 50;
const DIAL_PAUSE: Duration = Duration::from_millis(100);

pub(super) fn spawn(agent: Arc<Agent>, listener: std::net::TcpListener) {
    let spawned = std::thread::Builder::new()
        .name("racetrack-agent".into())
        .spawn(move || {
            super::death::keep_off_this_thread();
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => return eprintln!("racetrack: agent runtime: {e}"),
            };
            rt.block_on(accept_loop(agent, listener));
        });
    if let Err(e) = spawned {
        eprintln!("racetrack: cannot start the agent thread: {e}");
    }
}

async fn accept_loop(agent: Arc<Agent>, listener: std::net::TcpListener) {
    let listener = match listener
        .set_nonblocking(true)
        .and_then(|()| tokio::net::TcpListener::from_std(listener))
    {
        Ok(l) => l,
        Err(e) => return eprintln!("racetrack: agent listener: {e}"),
    };
    loop {
        match listener.accept().await {
            Ok((stream, _peer)) => {
                let agent = agent.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve(&agent, stream).await {
                        eprintln!("racetrack: debugger connection: {e}");
                    }
                });
            }
            Err(e) => {
                eprintln!("racetrack: accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

fn is_loopback_host(host: &str) -> bool {
    let h = host.rsplit_once(':').map_or(host, |(h, p)| {
        if p.chars().all(|c| c.is_ascii_digit()) {
            h
        } else {
            host
        }
    });
    let h = h.trim_start_matches('[').trim_end_matches(']');
    h == "localhost" || h.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// How the client asked for packed events: binary with the request header
/// [`BINARY_HEADER`]`: binary`, JSON text otherwise.
fn packing_asked(req: &Request) -> Packing {
    let binary = req
        .headers()
        .get(BINARY_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("binary"));
    if binary {
        Packing::Binary
    } else {
        Packing::Text
    }
}

/// Check the WebSocket handshake: token, browser origins, DNS rebinding.
#[allow(clippy::result_large_err)]
fn check_handshake(req: &Request, token: Option<&str>) -> Result<(), String> {
    let header = |n: &str| req.headers().get(n).and_then(|v| v.to_str().ok());
    if let Some(origin) = header("origin") {
        let allowed = std::env::var(racetrack_protocol::launch::ENV_ALLOW_ORIGIN).unwrap_or_default();
        if !allowed.split(',').any(|a| !a.is_empty() && a.trim() == origin) {
            return Err(format!(
                "origin `{origin}` is not allowed (set RACETRACK_ALLOW_ORIGIN)"
            ));
        }
    }
    if let Some(host) = header("host") {
        let allowed = std::env::var(racetrack_protocol::launch::ENV_ALLOW_HOST).unwrap_or_default();
        if !is_loopback_host(host) && !allowed.split(',').any(|a| a.trim() == host) && token.is_none() {
            return Err(format!("host `{host}` is not a loopback name"));
        }
    }
    if let Some(token) = token {
        let q = req.uri().query().unwrap_or("");
        let in_query = q.split('&').any(|kv| kv == format!("token={token}"));
        let in_header = header("authorization") == Some(&format!("Bearer {token}"));
        if !in_query && !in_header {
            return Err("a valid token is required (RACETRACK_TOKEN)".to_owned());
        }
    }
    Ok(())
}

/// Take a connection through the WebSocket handshake ([`check_handshake`]); returns the
/// socket and how the debugger asked for packed events.
async fn handshake(
    agent: &Agent,
    stream: tokio::net::TcpStream,
) -> Result<(WebSocketStream<tokio::net::TcpStream>, Packing), String> {
    let _ = stream.set_nodelay(true);
    // Commands are small: reading them 4 KiB at a time (the default, 128 KiB, had every
    // poll of the connection zero that much first: a few percent of this thread's time
    // while events stream out).
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_FRAME_BYTES))
        .max_frame_size(Some(MAX_FRAME_BYTES))
        .read_buffer_size(4096);
    let token = agent.token.clone();
    let mut packing = Packing::Text;
    #[allow(clippy::result_large_err)]
    let callback = |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
        packing = packing_asked(req);
        match check_handshake(req, token.as_deref()) {
            Ok(()) => Ok(resp),
            Err(reason) => {
                let mut r = ErrorResponse::new(Some(reason));
                *r.status_mut() = StatusCode::FORBIDDEN;
                Err(r)
            }
        }
    };
    let ws = tokio_tungstenite::accept_hdr_async_with_config(stream, callback, Some(config))
        .await
        .map_err(|e| format!("handshake refused or failed: {e}"))?;
    Ok((ws, packing))
}

async fn serve(agent: &Arc<Agent>, stream: tokio::net::TcpStream) -> Result<(), String> {
    let (ws, packing) = handshake(agent, stream).await?;
    session(agent, ws, packing).await
}

/// Dial the debugger at `url` (`RACETRACK_CONNECT`) instead of listening: what an MPI
/// job's ranks do, each reaching the one debugger that launched them. Tries for a few
/// seconds (the debugger may be starting); if it cannot connect, or once the session
/// ends, the program runs free: every hold is released and no new one is taken.
pub(super) fn spawn_dial(agent: Arc<Agent>, url: String) {
    let spawned = std::thread::Builder::new()
        .name("racetrack-agent".into())
        .spawn(move || {
            super::death::keep_off_this_thread();
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    agent.shutdown();
                    return eprintln!("racetrack: agent runtime: {e}");
                }
            };
            if let Err(e) = rt.block_on(dial(&agent, &url)) {
                eprintln!("racetrack: debugger connection ({url}): {e}; the program runs free");
            }
            agent.shutdown();
            agent.signal_finished();
        });
    if let Err(e) = spawned {
        eprintln!("racetrack: cannot start the agent thread: {e}");
    }
}

/// Connect to the debugger (retrying while it is not listening yet), then serve it.
async fn dial(agent: &Arc<Agent>, url: &str) -> Result<(), String> {
    let mut request = url
        .into_client_request()
        .map_err(|e| format!("`{url}` is not a ws:// URL: {e}"))?;
    if let Some(token) = &agent.token {
        let bearer = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|e| e.to_string())?;
        request.headers_mut().insert("authorization", bearer);
    }
    let host = request
        .uri()
        .host()
        .unwrap_or("127.0.0.1")
        .trim_matches(['[', ']'])
        .to_owned();
    let port = request.uri().port_u16().unwrap_or(80);
    let mut tries = 0;
    let stream = loop {
        match tokio::net::TcpStream::connect((host.as_str(), port)).await {
            Ok(s) => break s,
            Err(e) if tries >= DIAL_TRIES => return Err(format!("cannot connect: {e}")),
            Err(_) => {
                tries += 1;
                tokio::time::sleep(DIAL_PAUSE).await;
            }
        }
    };
    let _ = stream.set_nodelay(true);
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_FRAME_BYTES))
        .max_frame_size(Some(MAX_FRAME_BYTES))
        .read_buffer_size(4096);
    let (ws, response) = tokio_tungstenite::client_async_with_config(request, stream, Some(config))
        .await
        .map_err(|e| format!("handshake refused or failed: {e}"))?;
    // The debugger says in its answer how it wants packed events.
    let binary = response
        .headers()
        .get(BINARY_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("binary"));
    let packing = if binary { Packing::Binary } else { Packing::Text };
    session(agent, ws, packing).await
}

/// After the debuggee's tick, send what the buffer holds as frames of at most
/// [`BATCH_MAX`] events, counting them (what a final flush waits for).
async fn flush<S>(agent: &Agent, tx: &mut S, packing: Packing) -> Result<(), String>
where
    S: futures_util::Sink<Message> + Unpin,
    S::Error: std::fmt::Display,
{
    if let Some(d) = agent.debuggee.get() {
        d.tick();
    }
    let chunks = agent.drain();
    // A text client gets the events themselves, named as the structure names them now.
    let names = match packing {
        Packing::Text => Names::of(&agent.structure_event()),
        Packing::Binary => None,
    };
    let frames = record::frames(chunks.iter().flatten(), BATCH_MAX, names.as_ref());
    if !chunks.is_empty() {
        agent.recycle(chunks);
    }
    for (frame, n) in frames {
        let m = match frame {
            Frame::Text(t) => Message::Text(t.into()),
            Frame::Binary(b) => Message::Binary(b.into()),
        };
        tx.send(m).await.map_err(|e| format!("send: {e}"))?;
        agent.stream.sent.fetch_add(1, Relaxed);
        agent.stream.sent_events.fetch_add(n as u64, Relaxed);
    }
    Ok(())
}

/// One debugger's session on an open WebSocket, whichever side opened it: `hello`,
/// `structure`, `snapshot`, then the stream and the commands until either side closes.
async fn session(
    agent: &Arc<Agent>,
    ws: WebSocketStream<tokio::net::TcpStream>,
    packing: Packing,
) -> Result<(), String> {
    let (mut tx, mut rx) = ws.split();
    let send = |ev: &Event| Message::Text(ev.to_json().into());
    if let Err(phase) = agent.phase.claim() {
        let message = if phase == Phase::Finished {
            "this program has finished: it serves no debugger any more"
        } else {
            "another debugger is already attached to this program"
        };
        let refusal = Event::Error {
            message: message.into(),
            req: None,
        };
        let _ = tx.send(send(&refusal)).await;
        let _ = tx.close().await;
        return Ok(());
    }
    let result = async {
        tx.send(send(&agent.hello())).await.map_err(|e| e.to_string())?;
        tx.send(send(&agent.attach_structure())).await.map_err(|e| e.to_string())?;
        let snapshot = agent.attach();
        tx.send(send(&snapshot)).await.map_err(|e| e.to_string())?;
        let mut tick = tokio::time::interval(TICK);
        loop {
            let mut close = false;
            let mut detach_req = None;
            tokio::select! {
                m = rx.next() => match m {
                    Some(Ok(Message::Text(t))) => match CmdRequest::parse(&t) {
                        Ok(CmdRequest { cmd: Command::Detach, req }) => { agent.detach(); close = true; detach_req = req; }
                        Ok(CmdRequest { cmd, req }) => agent.apply(cmd, req),
                        Err(e) => agent.error(e.error.to_string(), e.req),
                    },
                    Some(Ok(Message::Binary(_))) => agent.error("binary frames from a debugger are not accepted; send commands as JSON text".into(), None),
                    Some(Ok(Message::Close(_))) | None => close = true,
                    Some(Ok(_)) => {}
                    Some(Err(e)) => return Err(format!("receive: {e}")),
                },
                () = agent.stream.wake.notified() => {}
                _ = tick.tick() => {}
            }
            flush(agent, &mut tx, packing).await?;
            if close {
                // A numbered detach gets its verdict before the close (the buffer is
                // cleared and no longer fed once detached).
                if detach_req.is_some() {
                    let ok = Event::Ok { cmd: "detach".into(), target: None, req: detach_req };
                    let _ = tx.send(send(&ok)).await;
                }
                let _ = tx.close().await;
                return Ok(());
            }
            if agent.phase.is_finishing() && agent.drain_is_empty() {
                let _ = tx.close().await;
                // The debugger's close answers ours once it has read every frame before
                // it. Exiting sooner can lose the last frames: a socket closed with input
                // unread is reset, and a reset discards what the debugger has not read yet
                // (an MPI rank lost its last calls so, behind a lagging debugger).
                let answered = async { while let Some(Ok(m)) = rx.next().await { if m.is_close() { break; } } };
                let _ = tokio::time::timeout(CLOSE_PATIENCE, answered).await;
                agent.signal_finished();
                return Ok(());
            }
        }
    }
    .await;
    agent.detach();
    // Another debugger may connect now (unless this one was the last: Finished).
    agent.phase.release();
    result
}
