//! A second front end, outside the crate, on the core's public API only
//! (`racetrack_agent::agent::front`): a toy MPI program of two ranks, `rank[0]` and
//! `rank[1]` in the collection `rank`, each on its own thread, reporting `MPI_Init`,
//! `MPI_Send` and `MPI_Recv` as the MPI interposition library will. A real WebSocket
//! client attaches, breaks on rank[1]'s `MPI_Send`, reads and sets the held rank's state,
//! has a reorder refused, and continues. Runs with and without the `runtime` feature.

use futures_util::{SinkExt, StreamExt};
use racetrack_agent::agent::front::{
    Collection, Debuggee, Decision, HoldReason, Kind, MsgPath, Operation, Point, Record, RecordText, Site,
    SiteError, Thread,
};
use racetrack_agent::agent::{self, Agent};
use racetrack_protocol::{self as proto, Decoder, Event, QueueEntry, Rest, ThreadSnapshot};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Barrier, Condvar, Mutex};
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

/// Operation indexes, in registration order.
const INIT: usize = 0;
const SEND: usize = 1;
const RECV: usize = 2;
const OPS: [&str; 3] = ["MPI_Init", "MPI_Send", "MPI_Recv"];
const RANKS: [&str; 2] = ["rank[0]", "rank[1]"];
/// How long any one wait of the test may take before it fails.
const PATIENCE: Duration = Duration::from_secs(20);

/// Each rank's mailbox: message ids (`rank.n`) delivered to it, not yet received.
#[derive(Default)]
struct Mailboxes {
    boxes: [Mutex<VecDeque<[u64; 2]>>; 2],
    arrived: Condvar,
}

impl Mailboxes {
    fn entry(rank: usize, id: [u64; 2]) -> QueueEntry {
        QueueEntry {
            id: format!("{}.{}", id[0], id[1]).into(),
            type_name: "i32".into(),
            from: None,
            to: format!("MPI_Recv@{}", RANKS[rank]),
            op: "MPI_Recv".into(),
            traced: false,
            content: None,
        }
    }

    fn list(&self, rank: usize, max: usize) -> (Vec<QueueEntry>, usize) {
        let q = self.boxes[rank].lock().expect("mailbox");
        let listed = q.iter().take(max).map(|id| Self::entry(rank, *id)).collect();
        (listed, q.len().saturating_sub(max))
    }
}

/// The toy program as the core's debuggee: its ranks and their mailboxes.
struct Toy(Arc<Mailboxes>);

fn threads() -> Vec<Thread> {
    RANKS
        .iter()
        .enumerate()
        .map(|(g, n)| Thread::new(g, 0, *n))
        .collect()
}

impl Debuggee for Toy {
    fn threads(&self) -> Vec<Thread> {
        threads()
    }

    fn queue(&self, global: usize, max: usize, _content: bool) -> (Vec<QueueEntry>, usize) {
        self.0.list(global, max)
    }

    fn snapshot(&self, per_thread: usize, cut: &mut dyn FnMut(Vec<ThreadSnapshot>)) {
        // Both mailboxes locked for the cut: no message moves meanwhile.
        let boxes: Vec<_> = self.0.boxes.iter().map(|b| b.lock().expect("mailbox")).collect();
        let snaps = boxes
            .iter()
            .enumerate()
            .map(|(rank, q)| ThreadSnapshot {
                thread: RANKS[rank].to_owned(),
                queue: q
                    .iter()
                    .take(per_thread)
                    .map(|id| Mailboxes::entry(rank, *id))
                    .collect(),
                more: q.len().saturating_sub(per_thread),
                current: None,
                pid: None,
            })
            .collect();
        cut(snaps);
    }
}

/// A held rank: its state can be read and replaced; MPI fixes the matching order, so the
/// toy refuses a reorder, and only its sends carry a message to edit.
struct RankSite<'a> {
    rank: usize,
    state: &'a mut Value,
    mail: &'a Mailboxes,
}

impl Site for RankSite<'_> {
    fn reorder(&mut self, _order: &[String], _rest: Option<Rest>) -> Result<bool, SiteError> {
        Err(SiteError::NotApplicable(
            "the toy MPI front end cannot reorder a rank's messages (MPI matching order is fixed)".into(),
        ))
    }
    fn edit(&mut self, _content: Value) -> Result<(), SiteError> {
        Err(SiteError::NotApplicable(
            "cannot be edited by the toy MPI front end".into(),
        ))
    }
    fn state(&self) -> Result<Value, SiteError> {
        Ok(self.state.clone())
    }
    fn set_state(&mut self, content: Value) -> Result<(), SiteError> {
        *self.state = content;
        Ok(())
    }
    fn queue(&self, max: usize) -> (Vec<QueueEntry>, usize) {
        self.mail.list(self.rank, max)
    }
}

/// One rank of the toy program: the front end's per-event calls, as the MPI library's.
struct Rank {
    agent: Arc<Agent>,
    global: usize,
    name: Arc<str>,
    mail: Arc<Mailboxes>,
    /// The rank's state, as the debugger reads and sets it while the rank is held.
    state: Value,
    /// Operations the rank completed: the test checks a held rank makes no progress.
    progress: Arc<AtomicUsize>,
}

impl Rank {
    fn record(&self, kind: Kind, op: usize, msg: [u64; 2], a: i64) {
        let rec = Record {
            from: None,
            kind,
            event_id: 0,
            thread: self.global as i64,
            op: op as i64,
            msg: MsgPath::from_slice(&msg),
            a,
            b: 0,
            traced: false,
            text: RecordText::None,
            call: None,
        };
        let _ = self.agent.record(rec, true);
    }

    /// Hold `ev` (its reason given) until the debugger releases it.
    fn hold(&mut self, ev: Event, reason: HoldReason, still: &dyn Fn() -> bool) {
        let agent = self.agent.clone();
        let name = self.name.clone();
        let mut site = RankSite {
            rank: self.global,
            state: &mut self.state,
            mail: &self.mail,
        };
        agent.hold(ev, (self.global, &name), reason, &mut site, still);
    }

    fn start(&mut self, op: usize, msg: [u64; 2]) {
        let (g, agent) = (self.global, self.agent.clone());
        let point = Point::Start {
            thread: g,
            op,
            traced: false,
            call: None,
        };
        match agent.decide(&point) {
            Decision::Skip => {}
            Decision::Stream { .. } => self.record(Kind::Start, op, msg, 0),
            Decision::Hold { reason: r, .. } => {
                let ev = Event::Start(proto::StepEv {
                    event_id: 0,
                    thread: self.name.to_string().into(),
                    op: OPS[op].into(),
                    msg: format!("{}.{}", msg[0], msg[1]).into(),
                    instance: format!("{}.{}", msg[0], msg[1]).into(),
                    step: proto::Step::Run,
                    traced: false,
                    held: true,
                    reason: Some(r),
                    call: None,
                });
                self.hold(ev, r, &|| agent.still_holds(&point));
            }
        }
    }

    fn stop(&mut self, op: usize, msg: [u64; 2]) {
        match self.agent.decide(&Point::Stop { thread: self.global }) {
            Decision::Skip => {}
            Decision::Stream { .. } => self.record(Kind::Stop, op, msg, 0),
            // The toy's policy for stops is the same as for sends; it never holds here in
            // this test (no step mode).
            hold @ Decision::Hold { .. } => panic!("{}: a stop held: {hold:?}", self.name),
        }
        self.progress.fetch_add(1, SeqCst);
    }

    /// `MPI_Send` of message `msg` to rank `to`: reported as a full event.
    fn send(&mut self, to: usize, msg: [u64; 2]) {
        self.start(SEND, msg);
        let point = Point::Send {
            thread: Some(self.global),
        };
        let decision = self.agent.decide(&point);
        if decision != Decision::Skip {
            let (reason, content) = match decision {
                Decision::Hold { reason, .. } => (Some(reason), true),
                Decision::Stream { content } => (None, content),
                Decision::Skip => (None, false),
            };
            let ev = Event::Send(proto::SendEv {
                event_id: 0,
                thread: Some(self.name.to_string().into()),
                op: Some(OPS[SEND].into()),
                msg: format!("{}.{}", msg[0], msg[1]).into(),
                to_op: Some(OPS[RECV].into()),
                to_thread: Some(RANKS[to].into()),
                type_name: "i32".into(),
                traced: false,
                held: reason.is_some(),
                reason,
                content: content.then(|| json!(42)),
                call: None,
            });
            match reason {
                None => self.agent.emit(ev, true),
                Some(r) => {
                    let agent = self.agent.clone();
                    self.hold(ev, r, &|| agent.still_holds(&point));
                }
            }
        }
        let mut q = self.mail.boxes[to].lock().expect("mailbox");
        q.push_back(msg);
        self.mail.arrived.notify_all();
        drop(q);
        self.stop(SEND, msg);
    }

    /// `MPI_Recv`: waits for a message, then reports its receipt (compact, no
    /// backpressure: it holds the mailbox's lock, as a runtime's recv holds its queue's).
    fn recv(&mut self) -> [u64; 2] {
        let probe = [self.global as u64, 1000];
        self.start(RECV, probe);
        let mut q = self.mail.boxes[self.global].lock().expect("mailbox");
        let deadline = std::time::Instant::now() + PATIENCE;
        let msg = loop {
            if let Some(m) = q.pop_front() {
                break m;
            }
            assert!(std::time::Instant::now() < deadline, "{}: no message", self.name);
            q = self
                .mail
                .arrived
                .wait_timeout(q, Duration::from_millis(50))
                .expect("mailbox")
                .0;
        };
        if self.agent.is_hot() && self.agent.is_attached() {
            let rec = Record {
                from: None,
                kind: Kind::Recv,
                event_id: 0,
                thread: self.global as i64,
                op: RECV as i64,
                msg: MsgPath::from_slice(&msg),
                a: 0,
                b: 0,
                traced: false,
                text: RecordText::None,
                call: None,
            };
            let _ = self.agent.record(rec, false);
        }
        drop(q);
        self.stop(RECV, probe);
        msg
    }
}

/// The toy program: registers its structure, runs both ranks (rank[0] sends to rank[1],
/// which answers), then shuts the agent down and waits until everything was streamed.
/// Returns the ranks' progress counters and a channel that says when the program ended.
fn run_toy(agent: Arc<Agent>) -> ([Arc<AtomicUsize>; 2], mpsc::Receiver<Vec<[u64; 2]>>) {
    let mail = Arc::new(Mailboxes::default());
    agent.set_debuggee(Box::new(Toy(mail.clone())));
    agent.add_collection(Collection::new("rank", threads()));
    let ops = OPS
        .iter()
        .map(|o| Operation::new(*o, o.trim_start_matches("MPI_").to_lowercase(), 0));
    agent.add_operations(ops, &[(SEND, RECV)]);
    let progress = [Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0))];
    let (done_tx, done) = mpsc::channel();
    let counters = progress.clone();
    std::thread::spawn(move || {
        // rank[1] starts MPI_Init only once rank[0]'s is released from the start hold, so
        // that every event after the attach is streamed.
        let init = Arc::new(Barrier::new(2));
        let handles: Vec<_> = (0..2)
            .map(|g| {
                let mut rank = Rank {
                    agent: agent.clone(),
                    global: g,
                    name: RANKS[g].into(),
                    mail: mail.clone(),
                    state: json!({ "rank": g, "sent": 0 }),
                    progress: counters[g].clone(),
                };
                let init = init.clone();
                std::thread::spawn(move || {
                    if g == 1 {
                        init.wait();
                    }
                    rank.start(INIT, [g as u64, 0]);
                    if g == 0 {
                        init.wait();
                    }
                    rank.stop(INIT, [g as u64, 0]);
                    let got = if g == 0 {
                        rank.send(1, [0, 1]);
                        rank.recv()
                    } else {
                        let got = rank.recv();
                        rank.send(0, [1, 1]);
                        got
                    };
                    (got, rank.state)
                })
            })
            .collect();
        let mut got = Vec::new();
        for h in handles {
            let (msg, state) = h.join().expect("rank thread");
            got.push(msg);
            if state["rank"] == 1 {
                assert_eq!(
                    state,
                    json!({ "rank": 1, "sent": 7 }),
                    "set_state reached the rank"
                );
            }
        }
        agent.shutdown();
        agent.finish();
        let _ = done_tx.send(got);
    });
    (progress, done)
}

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The debugger's side: a WebSocket connection and the events read so far, expanded.
struct Client {
    ws: Ws,
    decoder: Decoder,
    pending: VecDeque<Event>,
    closed: bool,
    /// Every event read, in order.
    log: Vec<Event>,
}

impl Client {
    async fn send(&mut self, cmd: &str) {
        self.ws
            .send(Message::Text(cmd.into()))
            .await
            .expect("send command");
    }

    /// The next event (packed frames expanded), `None` once the agent closed.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                self.log.push(ev.clone());
                return Some(ev);
            }
            if self.closed {
                return None;
            }
            let frame = tokio::time::timeout(PATIENCE, self.ws.next())
                .await
                .expect("an event in time");
            match frame {
                Some(Ok(Message::Text(t))) => self.pending.extend(self.decoder.decode(&t).expect("decodes")),
                Some(Ok(Message::Close(_))) | None => self.closed = true,
                Some(Ok(_)) => {}
                Some(Err(e)) => panic!("receive: {e}"),
            }
        }
    }

    /// Read events until one matches `want`; returns the events read before it and it.
    async fn until(&mut self, what: &str, want: impl Fn(&Event) -> bool) -> (Vec<Event>, Event) {
        let mut seen = Vec::new();
        loop {
            match self.next().await {
                Some(ev) if want(&ev) => return (seen, ev),
                Some(ev) => seen.push(ev),
                None => panic!("closed before {what}; read {seen:?}"),
            }
        }
    }
}

/// (event, thread, op) of a stream event.
fn key(ev: &Event) -> Option<(&'static str, String, String)> {
    match ev {
        Event::Send(s) => Some(("send", s.thread.clone()?.to_string(), s.op.clone()?.to_string())),
        Event::Recv(r) => Some(("recv", r.thread.to_string(), r.op.to_string())),
        Event::Start(s) => Some(("start", s.thread.to_string(), s.op.to_string())),
        Event::Stop(s) => Some(("stop", s.thread.to_string(), s.op.to_string())),
        _ => None,
    }
}

fn is_ok(req: u64) -> impl Fn(&Event) -> bool {
    move |ev| matches!(ev, Event::Ok { req: Some(r), .. } if *r == req)
}

impl Client {
    async fn connect(url: &str) -> Client {
        let (ws, _) = tokio::time::timeout(PATIENCE, tokio_tungstenite::connect_async(url))
            .await
            .expect("connects in time")
            .expect("connects");
        Client {
            ws,
            decoder: Decoder::default(),
            pending: VecDeque::new(),
            closed: false,
            log: Vec::new(),
        }
    }
}

fn is_start_hold(ev: &Event) -> bool {
    matches!(ev, Event::Start(s)
        if s.held && s.thread == "rank[0]" && s.op == "MPI_Init" && s.reason == Some(HoldReason::Wait))
}

/// `hello`, `structure`, `snapshot`; the start hold holds rank[0]'s MPI_Init.
async fn attach(c: &mut Client, progress: &[Arc<AtomicUsize>; 2]) {
    assert!(matches!(c.next().await, Some(Event::Hello { .. })));
    match c.next().await {
        Some(Event::Structure {
            operations,
            collections,
            edges,
        }) => {
            let names: Vec<_> = operations.iter().map(|o| o.name.as_str()).collect();
            assert_eq!(names, OPS);
            assert_eq!(collections[0].name, "rank");
            assert_eq!(collections[0].threads, RANKS);
            assert_eq!(edges, [["MPI_Send".to_owned(), "MPI_Recv".to_owned()]]);
        }
        other => panic!("expected the structure, got {other:?}"),
    }
    let Some(Event::Snapshot { threads, held, .. }) = c.next().await else {
        panic!("expected the snapshot");
    };
    assert_eq!(threads.len(), 2);
    // rank[0] may reach its start hold before the attach (the snapshot lists it) or
    // after (it is streamed, held): the hold waits for a debugger either way.
    match &held[..] {
        [ev] => assert!(is_start_hold(ev), "held at attach: {held:?}"),
        [] => {
            let (before, _) = c.until("the start hold", is_start_hold).await;
            assert!(before.iter().all(|ev| key(ev).is_none()), "{before:?}");
        }
        _ => panic!("only the start hold is held at attach: {held:?}"),
    }
    let ran = progress[0].load(SeqCst) + progress[1].load(SeqCst);
    assert_eq!(ran, 0, "nothing ran during the start hold");
}

/// rank[0]'s events that may come before rank[1]'s MPI_Send is held, in order.
const R0_BEFORE: [(&str, &str); 5] = [
    ("stop", "MPI_Init"),
    ("start", "MPI_Send"),
    ("send", "MPI_Send"),
    ("stop", "MPI_Send"),
    ("start", "MPI_Recv"),
];

/// Break on rank[1]'s MPI_Send and continue: returns the held start and what rank[0]
/// reported before it.
async fn break_and_continue(
    c: &mut Client,
    progress: &[Arc<AtomicUsize>; 2],
) -> (proto::StepEv, Vec<(&'static str, String)>) {
    c.send(r#"{"cmd":"break","op":"MPI_Send","thread":"rank[1]","on":true,"req":1}"#)
        .await;
    c.until("the break's ok", is_ok(1)).await;
    c.send(r#"{"cmd":"continue","req":2}"#).await;
    let is_held = |ev: &Event| matches!(ev, Event::Start(s) if s.held);
    let (before, held) = c.until("rank[1]'s MPI_Send held", is_held).await;
    let Event::Start(held) = held else { unreachable!() };
    let what = (held.thread.as_str(), held.op.as_str(), held.reason);
    assert_eq!(what, ("rank[1]", "MPI_Send", Some(HoldReason::Break)));
    let of = |rank: &str| -> Vec<(&'static str, String)> {
        before
            .iter()
            .filter_map(key)
            .filter(|k| k.1 == rank)
            .map(|k| (k.0, k.2))
            .collect()
    };
    // rank[0] runs on meanwhile: how far it got before the hold varies, not its order.
    let r0 = of("rank[0]");
    assert!(
        (3..=5).contains(&r0.len()),
        "rank[0] sent before rank[1] received: {r0:?}"
    );
    assert_eq!(r0, want(&R0_BEFORE[..r0.len()]), "rank[0]");
    let r1 = [
        ("start", "MPI_Init"),
        ("stop", "MPI_Init"),
        ("start", "MPI_Recv"),
        ("recv", "MPI_Recv"),
        ("stop", "MPI_Recv"),
    ];
    assert_eq!(of("rank[1]"), want(&r1), "rank[1]");
    let at = |k: (&str, &str, &str)| {
        before
            .iter()
            .position(|ev| key(ev).is_some_and(|e| (e.0, &*e.1, &*e.2) == k))
    };
    let (sent, received) = (
        at(("send", "rank[0]", "MPI_Send")),
        at(("recv", "rank[1]", "MPI_Recv")),
    );
    assert!(sent.is_some() && sent < received, "sent before received");

    // Held: rank[1] does not progress (its MPI_Init and MPI_Recv are done, no more).
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(progress[1].load(SeqCst), 2, "rank[1] is blocked at its MPI_Send");
    (held, r0)
}

/// The held rank's site answers the debugger's commands: `state`, `set_state`, and a
/// refused `reorder`.
async fn commands(c: &mut Client, progress: &[Arc<AtomicUsize>; 2]) {
    c.send(r#"{"cmd":"state","thread":"rank[1]","req":3}"#).await;
    let (_, state) = c.until("the state", |ev| matches!(ev, Event::State { .. })).await;
    let content = json!({ "rank": 1, "sent": 0 });
    assert_eq!(
        state,
        Event::State {
            thread: "rank[1]".into(),
            content
        }
    );
    c.until("the state's ok", is_ok(3)).await;
    c.send(r#"{"cmd":"set_state","thread":"rank[1]","content":{"rank":1,"sent":7},"req":4}"#)
        .await;
    c.until("set_state's ok", is_ok(4)).await;
    c.send(r#"{"cmd":"reorder","thread":"rank[1]","order":["0.1"],"rest":"after","req":5}"#)
        .await;
    let is_refusal = |ev: &Event| matches!(ev, Event::Error { req: Some(5), .. });
    let (_, refused) = c.until("the reorder's refusal", is_refusal).await;
    let Event::Error { message, .. } = refused else {
        unreachable!()
    };
    assert!(message.contains("reorder of rank[1] not applied"), "{message}");
    assert!(
        message.contains("MPI matching order"),
        "the site's reason: {message}"
    );
    assert_eq!(progress[1].load(SeqCst), 2, "still held after the commands");
}

/// Continue: rank[1] sends, rank[0] receives, the program ends and the agent closes the
/// connection; every rank's events came, in order.
async fn finish(c: &mut Client, held: &proto::StepEv, r0_before: &[(&'static str, String)]) {
    c.send(r#"{"cmd":"continue","req":6}"#).await;
    let mut rest = Vec::new();
    while let Some(ev) = c.next().await {
        rest.push(ev);
    }
    let released = |ev: &Event| {
        matches!(ev, Event::Released { event_id, thread }
            if *event_id == held.event_id && thread == "rank[1]")
    };
    assert!(rest.iter().any(released), "released: {rest:?}");
    let of = |evs: &[Event], rank: &str| -> Vec<(&'static str, String)> {
        evs.iter()
            .filter(|ev| !is_start_hold(ev))
            .filter_map(key)
            .filter(|k| k.1 == rank)
            .map(|k| (k.0, k.2))
            .collect()
    };
    let r1_after = want(&[("send", "MPI_Send"), ("stop", "MPI_Send")]);
    assert_eq!(of(&rest, "rank[1]"), r1_after, "rank[1] sent only once released");
    // Every streamed event of each rank, in stream order (the start hold aside).
    let r0 = [&R0_BEFORE[..], &[("recv", "MPI_Recv"), ("stop", "MPI_Recv")]].concat();
    assert_eq!(of(&c.log, "rank[0]"), want(&r0), "rank[0]'s events, in order");
    assert!(of(&c.log, "rank[0]").starts_with(r0_before));
    let r1 = [
        ("start", "MPI_Init"),
        ("stop", "MPI_Init"),
        ("start", "MPI_Recv"),
        ("recv", "MPI_Recv"),
        ("stop", "MPI_Recv"),
        ("start", "MPI_Send"),
        ("send", "MPI_Send"),
        ("stop", "MPI_Send"),
    ];
    assert_eq!(of(&c.log, "rank[1]"), want(&r1), "rank[1]'s events, in order");
}

fn want(evs: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    evs.iter().map(|(e, o)| (*e, (*o).to_owned())).collect()
}

#[test]
fn a_second_front_end_drives_the_core_through_the_public_api() {
    let agent = agent::start("127.0.0.1:0", true, None).expect("agent starts");
    let url = agent.local_url();
    let (progress, done) = run_toy(agent.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(async {
        let mut c = Client::connect(&url).await;
        attach(&mut c, &progress).await;
        let (held, r0_before) = break_and_continue(&mut c, &progress).await;
        commands(&mut c, &progress).await;
        finish(&mut c, &held, &r0_before).await;
    });
    let got = done.recv_timeout(PATIENCE).expect("the toy program ended");
    assert_eq!(got, [[1, 1], [0, 1]], "each rank received the other's message");
    assert_eq!(
        progress[0].load(SeqCst),
        3,
        "rank[0] completed MPI_Init, MPI_Send, MPI_Recv"
    );
    assert_eq!(
        progress[1].load(SeqCst),
        3,
        "rank[1] completed MPI_Init, MPI_Recv, MPI_Send"
    );
}
