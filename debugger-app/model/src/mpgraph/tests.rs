use crate::Model;
use racetrack_protocol::{
    CallInfo, Collective, Event, Link, Peer, RecvEv, SendEv, SmolStr, SpecialPeer, Step, StepEv, Tag,
};

/// A job's events into a model that keeps the graph, numbered as the job's merge numbers
/// them (rank R from R × 10^12).
struct Job {
    model: Model,
    next: [u64; 4],
}

fn rank(r: usize) -> SmolStr {
    format!("rank[{r}]").into()
}

fn p2p(peer: Peer) -> CallInfo {
    CallInfo {
        comm: Some("MPI_COMM_WORLD".into()),
        peer: Some(peer),
        bytes: Some(8),
        site: Some("t.c:9 (main)".into()),
        ..CallInfo::default()
    }
}

fn coll(n: u64) -> CallInfo {
    CallInfo {
        comm: Some("MPI_COMM_WORLD".into()),
        collective: Some(Collective {
            comm: "MPI_COMM_WORLD".into(),
            leader: 0,
            n,
        }),
        ..CallInfo::default()
    }
}

impl Job {
    fn new() -> Self {
        Job {
            model: Model::new().with_messages(),
            next: [0, 1, 2, 3].map(|r| r * 1_000_000_000_000),
        }
    }

    fn id(&mut self, r: usize) -> u64 {
        self.next[r] += 1;
        self.next[r]
    }

    fn step(&mut self, r: usize, op: &str, call: CallInfo, start: bool) -> u64 {
        let ev = StepEv {
            event_id: self.id(r),
            thread: rank(r),
            op: op.into(),
            msg: "0".into(),
            instance: "0".into(),
            step: Step::Run,
            traced: false,
            held: false,
            reason: None,
            call: Some(Box::new(call)),
        };
        let id = ev.event_id;
        self.model
            .ingest(&if start { Event::Start(ev) } else { Event::Stop(ev) });
        id
    }

    /// Rank `r` calls `op` whole: start, stop.
    fn call(&mut self, r: usize, op: &str, call: CallInfo) {
        self.step(r, op, call.clone(), true);
        self.step(r, op, call, false);
    }

    /// Rank `r` sends to `to` in `op`: start, send, stop; the send's number.
    fn send(&mut self, r: usize, op: &str, to: i32) -> u64 {
        self.send_with(r, op, p2p(Peer::Rank(to)))
    }

    /// Rank `r` sends in `op` with `c` (start, send, stop); the send's number.
    fn send_with(&mut self, r: usize, op: &str, c: CallInfo) -> u64 {
        self.step(r, op, c.clone(), true);
        let id = self.id(r);
        self.model.ingest(&Event::Send(SendEv {
            event_id: id,
            thread: Some(rank(r)),
            op: Some(op.into()),
            msg: "m".into(),
            to_op: None,
            to_thread: None,
            type_name: "MPI_INT".into(),
            traced: false,
            held: false,
            reason: None,
            content: None,
            call: Some(Box::new(c.clone())),
        }));
        self.step(r, op, c, false);
        id
    }

    /// Rank `r`'s receive in its open call takes send `send` of rank `from`.
    fn recv(&mut self, r: usize, op: &str, from: usize, send: u64) {
        let id = self.id(r);
        self.model.ingest(&Event::Recv(RecvEv {
            event_id: id,
            thread: rank(r),
            op: op.into(),
            msg: "m".into(),
            position: 0,
            traced: false,
            from: Some(Link {
                thread: rank(from),
                event_id: send,
            }),
            call: Some(Box::new(p2p(Peer::Rank(from as i32)))),
        }));
    }

    fn rows(&self, r: i32) -> Vec<(String, u32)> {
        let g = self.model.messages().unwrap();
        let lane = g.lanes().iter().find(|l| l.rank == Some(r)).unwrap();
        lane.vertices
            .iter()
            .map(|&v| {
                let x = &g.vertices()[v as usize];
                (self.model.first().op_name(x.call).to_owned(), g.row(v))
            })
            .collect()
    }
}

#[test]
fn a_receive_sits_below_the_send_it_took_and_an_edge_joins_them() {
    let mut j = Job::new();
    for r in 0..2 {
        j.call(r, "MPI_Init", CallInfo::default());
    }
    // Rank 0 computes (three calls) before it sends; rank 1 waits in a wildcard receive.
    for _ in 0..3 {
        j.call(0, "MPI_Comm_rank", CallInfo::default());
    }
    j.step(1, "MPI_Recv", p2p(Peer::Special(SpecialPeer::AnySource)), true);
    let g = j.model.messages().unwrap();
    let pending = g.vertices().iter().filter(|v| v.pending_wildcard()).count();
    assert_eq!(pending, 1, "the wildcard receive is pending until it matches");
    let send = j.send(0, "MPI_Send", 1);
    j.recv(1, "MPI_Recv", 0, send);
    j.step(1, "MPI_Recv", p2p(Peer::Special(SpecialPeer::AnySource)), false);

    assert_eq!(
        j.rows(0),
        [
            ("MPI_Init", 0),
            ("MPI_Comm_rank", 1),
            ("MPI_Comm_rank", 2),
            ("MPI_Comm_rank", 3),
            ("MPI_Send", 4)
        ]
        .map(|(a, b)| (a.to_owned(), b))
    );
    assert_eq!(
        j.rows(1),
        [("MPI_Init".to_owned(), 0), ("MPI_Recv".to_owned(), 5)]
    );
    let g = j.model.messages().unwrap();
    assert_eq!(g.edges().len(), 1);
    let (a, b) = g.edges()[0];
    assert_eq!(g.row(a) + 1, g.row(b));
    assert!(g.vertices().iter().all(|v| !v.pending_wildcard()));
    let site = g.vertices()[b as usize].params.site.map(|s| g.name(s));
    assert_eq!(site, Some("t.c:9 (main)"));
}

#[test]
fn a_collective_lines_up_its_members_and_later_calls_follow_it() {
    let mut j = Job::new();
    // Rank 0 enters the barrier at once; rank 1 after two other calls.
    j.step(0, "MPI_Barrier", coll(0), true);
    j.call(1, "MPI_Comm_size", CallInfo::default());
    j.call(1, "MPI_Comm_rank", CallInfo::default());
    j.step(1, "MPI_Barrier", coll(0), true);
    j.step(1, "MPI_Barrier", coll(0), false);
    j.step(0, "MPI_Barrier", coll(0), false);
    j.call(0, "MPI_Finalize", CallInfo::default());
    assert_eq!(
        j.rows(0),
        [("MPI_Barrier".to_owned(), 2), ("MPI_Finalize".to_owned(), 3)]
    );
    assert_eq!(j.rows(1)[2], ("MPI_Barrier".to_owned(), 2));
    let g = j.model.messages().unwrap();
    assert_eq!(g.collectives().len(), 1);
    assert_eq!(g.collectives()[0].members.len(), 2);
    assert!(g.lanes().iter().find(|l| l.rank == Some(0)).unwrap().finished);
    assert!(!g.lanes().iter().find(|l| l.rank == Some(1)).unwrap().finished);
    // Rows along a lane only grow, whatever order the members come in.
    j.step(0, "MPI_Barrier", coll(1), true);
    for _ in 0..5 {
        j.call(1, "MPI_Comm_rank", CallInfo::default());
    }
    j.step(1, "MPI_Barrier", coll(1), true);
    for r in 0..2 {
        let rows: Vec<u32> = j.rows(r).iter().map(|x| x.1).collect();
        assert!(rows.windows(2).all(|w| w[0] < w[1]), "rank {r}: {rows:?}");
    }
    let g = j.model.messages().unwrap();
    let lane = g.lane_order()[1];
    assert_eq!(g.in_rows(lane, 3, 5).len(), 3, "binary search by rows");
}

#[test]
fn runtime_events_leave_the_graph_empty() {
    let mut m = Model::new().with_messages();
    m.ingest(&Event::Start(StepEv {
        event_id: 1,
        thread: "proc[0]".into(),
        op: "Heat".into(),
        msg: "0".into(),
        instance: "0".into(),
        step: Step::Run,
        traced: false,
        held: false,
        reason: None,
        call: None,
    }));
    assert!(m.messages().unwrap().vertices().is_empty());
}

#[test]
fn a_wildcard_receive_lists_each_senders_first_matching_send() {
    let mut j = Job::new();
    let with = |bytes: i64, tag: i32| CallInfo {
        bytes: Some(bytes),
        tag: Some(Tag::Tag(tag)),
        ..p2p(Peer::Rank(0))
    };
    let recv = CallInfo {
        bytes: Some(8),
        tag: Some(Tag::Tag(0)),
        ..p2p(Peer::Special(SpecialPeer::AnySource))
    };
    j.step(0, "MPI_Recv", recv.clone(), true);
    let first = j.send_with(1, "MPI_Isend", with(8, 0));
    j.send_with(1, "MPI_Isend", with(4, 0));
    j.send_with(2, "MPI_Send", with(16, 0));
    j.send_with(3, "MPI_Send", with(4, 5));
    let g = j.model.messages().unwrap();
    let lane = |name: &str| g.lane(j.model.thread_key(name).unwrap()).unwrap() as usize;
    let v = *g.lanes()[lane("rank[0]")].vertices.last().unwrap();
    let c = g.candidates(v);
    let got: Vec<(i32, bool)> = c.iter().map(|c| (c.source, c.fits)).collect();
    assert_eq!(
        got,
        [(1, true), (2, false)],
        "rank 3's tag differs; rank 2's would truncate"
    );
    assert_eq!(
        c[0].send,
        g.lanes()[lane("rank[1]")].vertices[0],
        "rank 1's first send"
    );
    // Once it took rank 1's first message, the receive is no wildcard in waiting.
    j.recv(0, "MPI_Recv", 1, first);
    j.step(0, "MPI_Recv", recv, false);
    assert!(j.model.messages().unwrap().candidates(v).is_empty());
}

#[test]
fn a_member_that_went_on_is_lifted_with_what_followed_it() {
    // Rank 1's whole barrier, and a send after it that rank 2 received, reach the
    // debugger before rank 0 (three calls in) enters the barrier.
    let mut j = Job::new();
    j.call(1, "MPI_Barrier", coll(0));
    let send = j.send(1, "MPI_Send", 2);
    j.step(2, "MPI_Recv", p2p(Peer::Rank(1)), true);
    j.recv(2, "MPI_Recv", 1, send);
    j.step(2, "MPI_Recv", p2p(Peer::Rank(1)), false);
    assert_eq!(
        j.rows(1),
        [("MPI_Barrier".to_owned(), 0), ("MPI_Send".to_owned(), 1)]
    );
    assert_eq!(j.rows(2), [("MPI_Recv".to_owned(), 2)]);
    for _ in 0..3 {
        j.call(0, "MPI_Comm_rank", CallInfo::default());
    }
    j.call(0, "MPI_Barrier", coll(0));
    assert_eq!(j.rows(0)[3], ("MPI_Barrier".to_owned(), 3));
    assert_eq!(
        j.rows(1),
        [("MPI_Barrier".to_owned(), 3), ("MPI_Send".to_owned(), 4)]
    );
    assert_eq!(
        j.rows(2),
        [("MPI_Recv".to_owned(), 5)],
        "the receive stays below its send"
    );
    assert_eq!(j.model.messages().unwrap().collectives()[0].row, 3);
}
