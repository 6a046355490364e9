use super::*;
use racetrack_protocol::{CallInfo, Link, Matched, Peer, RecvEv, SendEv, Step, StepEv, Tag};

fn call(comm: &str, root: Option<i32>) -> Option<Box<CallInfo>> {
    Some(Box::new(CallInfo {
        comm: Some(comm.into()),
        root,
        ..CallInfo::default()
    }))
}

fn send(id: u64, thread: &str, msg: &str, mpi_to: Option<i32>) -> Event {
    Event::Send(SendEv {
        event_id: id,
        thread: Some(thread.into()),
        op: Some("Op".into()),
        msg: msg.into(),
        to_op: None,
        to_thread: None,
        type_name: "T".into(),
        traced: false,
        held: false,
        reason: None,
        content: None,
        call: mpi_to.map(|to| {
            Box::new(CallInfo {
                comm: Some("MPI_COMM_WORLD".into()),
                peer: Some(Peer::Rank(to)),
                tag: Some(Tag::Tag(0)),
                ..CallInfo::default()
            })
        }),
    })
}

fn recv(id: u64, thread: &str, msg: &str, from: Option<(&str, u64)>) -> Event {
    Event::Recv(RecvEv {
        event_id: id,
        thread: thread.into(),
        op: "Op".into(),
        msg: msg.into(),
        position: 0,
        traced: false,
        from: from.map(|(t, e)| Link {
            thread: t.into(),
            event_id: e,
        }),
        call: from.map(|_| {
            Box::new(CallInfo {
                comm: Some("MPI_COMM_WORLD".into()),
                matched: Some(Matched {
                    source: 1,
                    tag: 0,
                    bytes: 4,
                }),
                ..CallInfo::default()
            })
        }),
    })
}

fn step(start: bool, id: u64, thread: &str, op: &str, msg: &str, call: Option<Box<CallInfo>>) -> Event {
    let s = StepEv {
        event_id: id,
        thread: thread.into(),
        op: op.into(),
        msg: msg.into(),
        instance: msg.into(),
        step: Step::Run,
        traced: false,
        held: false,
        reason: None,
        call,
    };
    if start {
        Event::Start(s)
    } else {
        Event::Stop(s)
    }
}

fn clocks(evs: &[Event]) -> Clocks {
    let mut c = Clocks::new();
    evs.iter().for_each(|e| c.observe(e));
    c
}

#[test]
fn an_mpi_send_precedes_its_receive_and_racing_sends_are_concurrent() {
    let w = || call("MPI_COMM_WORLD", None);
    let mut c = clocks(&[
        // The receive arrives first: the ranks' streams interleave.
        step(true, 1, "rank[0]", "MPI_Recv", "0.1", w()),
        recv(2, "rank[0]", "0.1", Some(("rank[1]", 101))),
        step(false, 3, "rank[0]", "MPI_Recv", "0.1", w()),
        send(101, "rank[1]", "1.1", Some(0)),
        send(201, "rank[2]", "2.1", Some(0)),
    ]);
    assert_eq!(c.order(101, 2), Some(Order::Before));
    assert_eq!(c.order(3, 101), Some(Order::After));
    assert_eq!(
        c.order(101, 201),
        Some(Order::Concurrent),
        "two sends racing for one receive"
    );
    assert_eq!(
        c.order(201, 3),
        Some(Order::Concurrent),
        "the send the receive did not take"
    );
    assert_eq!(c.order(1, 1), Some(Order::Same));
    assert_eq!(c.order(1, 999), None);
    let clock = c.clock(3).expect("known");
    assert_eq!(clock, vec![("rank[0]".into(), 3), ("rank[1]".into(), 1)]);
}

#[test]
fn a_barrier_orders_everything_before_it_before_everything_after_it() {
    let w = || call("MPI_COMM_WORLD", None);
    let mut c = Clocks::new();
    for r in 0..3u64 {
        let t = format!("rank[{r}]");
        c.observe(&send(r * 100 + 1, &t, "x", Some(9)));
        c.observe(&step(true, r * 100 + 2, &t, "MPI_Barrier", "b", w()));
    }
    for r in 0..3u64 {
        let t = format!("rank[{r}]");
        c.observe(&step(false, r * 100 + 3, &t, "MPI_Barrier", "b", w()));
        c.observe(&send(r * 100 + 4, &t, "y", Some(9)));
    }
    for (a, b) in [(1, 104), (101, 4), (201, 104), (2, 203)] {
        assert_eq!(c.order(a, b), Some(Order::Before), "{a} before {b}");
    }
    assert_eq!(c.order(1, 101), Some(Order::Concurrent), "before the barrier");
    assert_eq!(c.order(4, 104), Some(Order::Concurrent), "after the barrier");
}

#[test]
fn a_broadcast_orders_the_root_before_the_others_only() {
    let b = || call("MPI_COMM_WORLD", Some(1));
    let mut c = clocks(&[
        step(true, 1, "rank[0]", "MPI_Bcast", "0.1", b()),
        step(false, 2, "rank[0]", "MPI_Bcast", "0.1", b()),
        step(true, 101, "rank[1]", "MPI_Bcast", "1.1", b()),
        step(false, 102, "rank[1]", "MPI_Bcast", "1.1", b()),
    ]);
    assert_eq!(
        c.order(101, 2),
        Some(Order::Before),
        "the root's start before the stops"
    );
    assert_eq!(
        c.order(1, 102),
        Some(Order::Concurrent),
        "a leaf feeds nothing back"
    );
}

#[test]
fn a_runtime_message_orders_its_send_before_the_step_that_takes_it() {
    let mut c = clocks(&[
        step(true, 1, "proc[0]", "Split", "0", None),
        send(2, "proc[0]", "0.1", None),
        send(3, "proc[2]", "0.2", None),
        recv(4, "proc[1]", "0.1", None),
        recv(5, "proc[1]", "0.2", None),
        step(false, 6, "proc[0]", "Split", "0", None),
        step(true, 7, "proc[1]", "Merge", "0.2", None),
        step(false, 8, "proc[1]", "Merge", "0.2", None),
        step(true, 9, "proc[1]", "Merge", "0.1", None),
    ]);
    assert_eq!(
        c.order(2, 9),
        Some(Order::Before),
        "a send precedes the step taking it"
    );
    assert_eq!(c.order(3, 7), Some(Order::Before));
    assert_eq!(
        c.order(2, 3),
        Some(Order::Concurrent),
        "two sends racing for one merge"
    );
    assert_eq!(
        c.order(4, 6),
        Some(Order::Before),
        "the sender queued it in its step"
    );
    assert_eq!(c.order(2, 7), Some(Order::Concurrent), "7 took the other message");
}
