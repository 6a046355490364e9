use super::*;
use racetrack_protocol::{
    CollectionDesc, Event, Kind, Names, OperationDesc, PackedEv, RecvEv, SendEv, Step, StepEv,
};

fn step(id: u64, op: &str, thread: &str, msg: &str, held: bool) -> StepEv {
    StepEv {
        event_id: id,
        thread: thread.into(),
        op: op.into(),
        msg: msg.into(),
        instance: msg.into(),
        step: Step::Run,
        traced: false,
        held,
        reason: None,
        call: None,
    }
}

/// A send from Split@main[0] to Sort@proc[1] and its receive.
fn send_and_recv(m: &mut Model) {
    send_and_recv_in(m, ProcId::FIRST);
}

fn send_and_recv_in(m: &mut Model, p: ProcId) {
    m.ingest_in(
        p,
        &Event::Send(SendEv {
            event_id: 1,
            thread: Some("main[0]".into()),
            op: Some("Split".into()),
            msg: "0.0".into(),
            to_op: Some("Sort".into()),
            to_thread: Some("proc[1]".into()),
            type_name: "Chunk".into(),
            traced: false,
            held: false,
            reason: None,
            content: None,
            call: None,
        }),
    );
    m.ingest_in(
        p,
        &Event::Recv(RecvEv {
            event_id: 2,
            thread: "proc[1]".into(),
            op: "Sort".into(),
            msg: "0.0".into(),
            position: 0,
            traced: false,
            from: None,
            call: None,
        }),
    );
}

fn graph() -> Model {
    Model::new().with_unfolded()
}

#[test]
fn node_histories_stay_bounded_and_keep_the_latest() {
    let mut m = graph();
    for i in 0..5 * HISTORY {
        m.ingest(&Event::Start(step(
            i as u64,
            "Sort",
            "proc[1]",
            &format!("0.{i}"),
            false,
        )));
    }
    let n = m.node_named("Sort", "proc[1]").expect("the node");
    assert!(
        (HISTORY..=2 * HISTORY).contains(&n.processed.len()),
        "{}",
        n.processed.len()
    );
    assert_eq!(
        n.processed.last().map(|s| s.as_str()),
        Some(format!("0.{}", 5 * HISTORY - 1).as_str())
    );
    assert_eq!(n.steps, 5 * HISTORY as u64);
}

#[test]
fn lean_model_tracks_queues_and_holds_only() {
    let mut m = Model::new();
    send_and_recv(&mut m);
    let q = m.queue_named("proc[1]").expect("the queue");
    assert_eq!((q[0].id.as_str(), q[0].op.as_str()), ("0.0", "Sort"));
    // Who sent a queued message is the graph's to know: the controller's model keeps no
    // message in flight.
    assert_eq!(q[0].from, None);
    m.ingest(&Event::Start(step(3, "Sort", "proc[1]", "0.0", true)));
    assert!(m.queue_named("proc[1]").expect("the queue").is_empty());
    assert_eq!(m.held_of_named("proc[1]").map(|(id, _)| id.event_id), Some(3));
    m.ingest(&Event::Stop(step(4, "Sort", "proc[1]", "0.0", false)));
    assert!(m.unfolded().is_none() && m.nodes().is_empty());
    assert_eq!(m.control.event_count, 4);
}

#[test]
fn unfolds_graph_tracks_queue_and_holds() {
    let mut m = graph();
    send_and_recv(&mut m);
    assert_eq!(m.queue_named("proc[1]").map(VecDeque::len), Some(1));
    assert_eq!(
        m.queue_named("proc[1]").expect("queue")[0].from.as_deref(),
        Some("Split@main[0]")
    );
    m.ingest(&Event::Start(step(3, "Sort", "proc[1]", "0.0", true)));
    assert!(m.queue_named("proc[1]").expect("queue").is_empty());
    let key = m.node_key("Sort", "proc[1]").expect("key");
    let status = |m: &Model| m.node(key).map(|n| n.status);
    assert_eq!(status(&m), Some(NodeStatus::HeldStart));
    assert_eq!(m.held_of_named("proc[1]").map(|(id, _)| id.event_id), Some(3));
    let u = m.unfolded().expect("graph");
    let split = u
        .find(m.node_key("Split", "main[0]").expect("key"))
        .expect("split");
    let sort = u.find(key).expect("sort");
    assert_eq!(u.edge_between(split, sort).map(|e| e.count), Some(1));
    m.ingest(&Event::Released {
        event_id: 3,
        thread: "proc[1]".into(),
    });
    assert_eq!(status(&m), Some(NodeStatus::Running));
    assert!(m.control.held.is_empty());
    m.ingest(&Event::Stop(step(4, "Sort", "proc[1]", "0.0", false)));
    assert_eq!(status(&m), Some(NodeStatus::Idle));
    assert_eq!(m.node(key).expect("node").processed, ["0.0"]);
    assert_eq!(m.node_named("Split", "main[0]").expect("split").sent.len(), 1);
    assert_eq!(m.control.event_count, 4);
    m.program_exited(Some(0), None);
    assert_eq!(m.control.exited, Some(Some(0)));
    assert_eq!(status(&m), Some(NodeStatus::Finished));
}

#[test]
fn changes_say_what_is_new_once() {
    let mut m = graph();
    assert!(m.take_changes().is_empty());
    send_and_recv(&mut m);
    let c = m.take_changes();
    // The sender's node appeared with its send; the receiver's not yet (it has not run).
    assert_eq!(c.nodes_added, [NodeId(0)]);
    assert!(c.edges_added.is_empty() && c.nodes_changed.is_empty());
    let proc1 = m.thread_key("proc[1]").expect("thread");
    assert_eq!(c.threads.iter().copied().collect::<Vec<_>>(), [proc1]);
    m.ingest(&Event::Start(step(3, "Sort", "proc[1]", "0.0", true)));
    let c = m.take_changes();
    // The receiver ran: it appears, and the edge counted before it with it.
    assert_eq!(c.nodes_added, [NodeId(1)]);
    assert_eq!(c.edges_added, [EdgeId(0)]);
    assert!(c.held && c.log_appended == 1 && !c.structure);
    assert_eq!(m.unfolded().expect("graph").edges()[0].count, 1);
    for i in 4..8 {
        m.ingest(&Event::Stop(step(i, "Sort", "proc[1]", "0.0", false)));
    }
    let c = m.take_changes();
    assert_eq!(
        c.nodes_changed,
        [NodeId(1)],
        "listed once however often it changed"
    );
    assert!(c.nodes_added.is_empty() && !c.held);
    assert!(m.take_changes().is_empty());
    m.ingest(&crate::tests::structure());
    assert!(m.take_changes().structure);
}

fn structure() -> Event {
    let threads = vec!["main[0]".to_owned(), "proc[0]".to_owned(), "proc[1]".to_owned()];
    Event::Structure {
        operations: ["Split", "Sort"]
            .iter()
            .map(|o| OperationDesc {
                name: (*o).into(),
                kind: "leaf".into(),
                collection: "all".into(),
                threads: threads.clone(),
            })
            .collect(),
        collections: vec![CollectionDesc {
            name: "all".into(),
            threads,
        }],
        edges: vec![],
    }
}

#[test]
fn the_controllers_model_pays_nothing_for_a_graph() {
    let mut m = Model::new();
    m.ingest(&structure());
    let names = Names::of(&structure()).expect("names");
    for i in 0..1000u64 {
        let msg: racetrack_protocol::SmolStr = format!("0.{i}").into();
        let ev = |kind, id| PackedEv::from((kind, id, 2, 1, msg.clone(), 0, 0, false, "".into()));
        m.ingest_packed(
            &names,
            &PackedEv::from((Kind::Send, 4 * i, 0, 0, msg.clone(), 1, 2, false, "T".into())),
        );
        m.ingest_packed(&names, &ev(Kind::Recv, 4 * i + 1));
        m.ingest_packed(&names, &ev(Kind::Start, 4 * i + 2));
        m.ingest_packed(&names, &ev(Kind::Stop, 4 * i + 3));
    }
    assert_eq!(m.control.event_count, 4000);
    assert!(m.unfolded().is_none());
    let c = m.take_changes();
    assert!(c.nodes_added.is_empty() && c.nodes_changed.is_empty() && c.edges_added.is_empty());
    assert!(m.queue_named("proc[1]").expect("queue").is_empty());
    // The same stream into a model with the graph: the packed form builds it too.
    let mut g = graph();
    g.ingest(&structure());
    g.ingest_packed(
        &names,
        &PackedEv::from((Kind::Send, 0, 0, 0, "0.0".into(), 1, 2, false, "T".into())),
    );
    g.ingest_packed(
        &names,
        &PackedEv::from((Kind::Recv, 1, 2, 1, "0.0".into(), 0, 0, false, "".into())),
    );
    assert_eq!(
        g.queue_named("proc[1]").expect("queue")[0].from.as_deref(),
        Some("Split@main[0]")
    );
    g.ingest_packed(
        &names,
        &PackedEv::from((Kind::Start, 2, 2, 1, "0.0".into(), 0, 0, false, "".into())),
    );
    assert_eq!(g.nodes().len(), 2);
    assert_eq!(g.unfolded().expect("graph").edges().len(), 1);
}

#[test]
fn two_processes_threads_of_one_name_stay_apart() {
    let mut m = graph();
    let second = m.add_process();
    assert_eq!(second, ProcId(1));
    send_and_recv_in(&mut m, ProcId::FIRST);
    send_and_recv_in(&mut m, second);
    m.ingest_in(second, &Event::Start(step(3, "Sort", "proc[1]", "0.0", true)));
    let first_t = m.thread_key("proc[1]").expect("thread");
    let second_t = ThreadKey {
        proc: second,
        thread: m.processes()[1].thread_id("proc[1]").expect("thread"),
    };
    assert_ne!(first_t, second_t);
    // The second process's start took its own queue's message, held its own thread.
    assert_eq!(m.control.queue(first_t).map(VecDeque::len), Some(1));
    assert_eq!(m.control.queue(second_t).map(VecDeque::len), Some(0));
    assert!(m.control.held_of(first_t).is_none());
    assert_eq!(
        m.control.held_of(second_t).map(|(id, _)| id),
        Some(HeldId {
            proc: second,
            event_id: 3
        })
    );
    // Both Split@main[0] nodes exist, one per process; only the second's Sort ran.
    assert_eq!(m.nodes().len(), 3);
    assert!(m.node_named("Sort", "proc[1]").is_none());
    m.note_command_in(
        second,
        &Command::Pause {
            thread: "proc[1]".into(),
            on: true,
        },
    );
    assert_eq!(m.control.paused.iter().copied().collect::<Vec<_>>(), [second_t]);
}

#[test]
fn conditional_breakpoints_are_listed_replaced_and_cleared_as_the_agent_does() {
    let mut m = graph();
    let brk = |op: &str, thread: Option<&str>, on: bool, tag: Option<i32>, hit: Option<u64>| Command::Break {
        op: op.into(),
        thread: thread.map(Into::into),
        on,
        trace: false,
        when: tag.map(|t| racetrack_protocol::When {
            tag: Some(racetrack_protocol::Tag::Tag(t)),
            ..Default::default()
        }),
        hit,
    };
    m.note_command(&brk("Sort", Some("proc[1]"), true, None, None));
    m.note_command(&brk("Sort", Some("proc[1]"), true, Some(1), Some(2)));
    m.note_command(&brk("Sort", Some("proc[1]"), true, Some(1), Some(5)));
    m.note_command(&brk("*", None, true, None, Some(3)));
    assert_eq!(m.control.breakpoints.len(), 1, "the plain one");
    let listed: Vec<(&str, u64)> = m
        .control
        .conditional
        .iter()
        .map(|c| (c.op.as_str(), c.hit))
        .collect();
    assert_eq!(
        listed,
        [("Sort", 5), ("*", 3)],
        "the same condition again replaced the first"
    );
    // A targeted clear removes that one only; a plain clear of Sort@proc[1] the rest there.
    m.note_command(&brk("*", None, false, None, Some(3)));
    assert_eq!(m.control.conditional.len(), 1);
    m.note_command(&brk("Sort", Some("proc[1]"), false, None, None));
    assert!(m.control.conditional.is_empty() && m.control.breakpoints.is_empty());
}

#[test]
fn an_mpi_receive_does_not_wait_in_the_queue() {
    // An MPI rank reports its receive after the call's `start`, with the call: the
    // message was taken as it arrived, so the queue stays empty (it grew by one per
    // receive, and every start searched it, before).
    let mut m = Model::new();
    for i in 0..3u64 {
        let msg = format!("1.{i}");
        m.ingest(&Event::Start(step(3 * i, "MPI_Recv", "rank[1]", &msg, false)));
        m.ingest(&Event::Recv(RecvEv {
            event_id: 3 * i + 1,
            thread: "rank[1]".into(),
            op: "MPI_Recv".into(),
            msg: msg.clone().into(),
            position: 0,
            traced: false,
            from: None,
            call: Some(Box::default()),
        }));
        m.ingest(&Event::Stop(step(3 * i + 2, "MPI_Recv", "rank[1]", &msg, false)));
    }
    assert!(m.queue_named("rank[1]").is_none_or(VecDeque::is_empty));
    assert_eq!(m.control.event_count, 9);
}

#[test]
fn a_program_killed_by_a_signal_says_which() {
    let mut m = Model::new();
    m.program_exited(None, Some(6));
    assert_eq!(m.control.exited, Some(None));
    assert_eq!(m.control.killed_by, Some(6));
    let last = m.control.log.back().expect("a log line");
    assert!(
        last.text.contains("program killed by signal 6 (SIGABRT)"),
        "{last:?}"
    );
    assert_eq!(crate::signal_name(64), "signal 64");
}

#[test]
fn an_mpi_job_is_one_program_whose_ranks_run_in_their_own_processes() {
    let mut m = Model::new();
    m.ingest(&Event::Hello {
        program: "ring".into(),
        pid: 100,
        protocol: racetrack_protocol::PROTOCOL_VERSION,
    });
    let rank = |r: u32| racetrack_protocol::ThreadSnapshot {
        thread: format!("rank[{r}]"),
        queue: Vec::new(),
        more: 0,
        current: None,
        pid: Some(100 + r),
    };
    m.ingest(&Event::Snapshot {
        next_event_id: 0,
        threads: (0..3).map(rank).collect(),
        held: Vec::new(),
    });
    assert_eq!(m.processes().len(), 1, "one program");
    let p = m.first();
    assert_eq!(p.separate_processes(), 3);
    let pid_of = |name: &str| p.thread_pid(p.thread_id(name).expect("a rank thread"));
    assert_eq!(
        ["rank[0]", "rank[1]", "rank[2]"].map(pid_of),
        [Some(100), Some(101), Some(102)]
    );
    // A thread its snapshot gives no process of its own runs in the program's.
    m.ingest(&Event::Snapshot {
        next_event_id: 0,
        threads: vec![racetrack_protocol::ThreadSnapshot { pid: None, ..rank(7) }],
        held: Vec::new(),
    });
    let p = m.first();
    assert_eq!(p.thread_pid(p.thread_id("rank[7]").expect("thread")), Some(100));
}

/// An MPI job's events reach the model compact (the merge links them there): a linked
/// `recv` draws the same message edge, and orders the same events, as its full form.
#[test]
fn compact_mpi_events_draw_and_order_as_full_ones() {
    use racetrack_protocol::{CallInfo, Matched, MsgPath, Peer, Record, RecordText, SentBy, Tag};
    use std::sync::Arc;
    let threads = vec!["rank[0]".to_owned(), "rank[1]".to_owned()];
    let ops = vec!["MPI_Send".to_owned(), "MPI_Recv".to_owned()];
    let names = Names::new(ops.clone(), threads.clone());
    let structure = Event::Structure {
        operations: ops
            .iter()
            .map(|o| OperationDesc {
                name: o.clone(),
                kind: "call".into(),
                collection: "rank".into(),
                threads: threads.clone(),
            })
            .collect(),
        collections: vec![CollectionDesc {
            name: "rank".into(),
            threads: threads.clone(),
        }],
        edges: Vec::new(),
    };
    let call = |c: CallInfo| {
        Some(Arc::new(CallInfo {
            comm: Some("MPI_COMM_WORLD".into()),
            ..c
        }))
    };
    let send = call(CallInfo {
        peer: Some(Peer::Rank(1)),
        tag: Some(Tag::Tag(0)),
        ..CallInfo::default()
    });
    let recv = call(CallInfo {
        matched: Some(Matched {
            source: 0,
            tag: 0,
            bytes: 4,
        }),
        ..CallInfo::default()
    });
    let rec = |kind, id: u64, thread: i64, c: &Option<Arc<CallInfo>>| Record {
        kind,
        event_id: id,
        thread,
        op: thread,
        msg: MsgPath::from_slice(&[u64::try_from(thread).unwrap(), id]),
        a: if kind == Kind::Send { -1 } else { 0 },
        b: if kind == Kind::Send { 1 } else { 0 },
        text: RecordText::None,
        call: c.clone(),
        ..Record::default()
    };
    let mut linked = rec(Kind::Recv, 1_000_000_000_001, 1, &recv);
    linked.from = Some(Box::new(SentBy {
        thread: 0,
        event_id: 1,
    }));
    let events: Vec<PackedEv> = [
        rec(Kind::Start, 0, 0, &send),
        rec(Kind::Send, 1, 0, &send),
        rec(Kind::Stop, 2, 0, &send),
        rec(Kind::Start, 1_000_000_000_000, 1, &recv),
        linked,
        rec(Kind::Stop, 1_000_000_000_002, 1, &recv),
    ]
    .iter()
    .map(Record::to_packed)
    .collect();
    let mut compact = Model::new().with_unfolded().with_clocks();
    let mut full = Model::new().with_unfolded().with_clocks();
    compact.ingest(&structure);
    full.ingest(&structure);
    for p in &events {
        compact.ingest_packed(&names, p);
        full.ingest(&names.expand(p.clone()).unwrap());
    }
    let edges = |m: &Model| -> Vec<String> {
        let u = m.unfolded().unwrap();
        u.edges()
            .iter()
            .map(|e| {
                let (a, b) = (u.node(e.from).unwrap().key, u.node(e.to).unwrap().key);
                let ((ao, at), (bo, bt)) = (m.node_names(a), m.node_names(b));
                format!("{ao}@{at} -> {bo}@{bt} ×{}", e.count)
            })
            .collect()
    };
    assert_eq!(edges(&compact), ["MPI_Send@rank[0] -> MPI_Recv@rank[1] ×1"]);
    assert_eq!(edges(&compact), edges(&full));
    assert_eq!(compact.queue_named("rank[1]").map(VecDeque::len).unwrap_or(0), 0);
    for m in [&mut compact, &mut full] {
        let c = m.clocks().unwrap();
        assert_eq!(c.order(1, 1_000_000_000_001), Some(clocks::Order::Before));
        assert_eq!(c.order(0, 1_000_000_000_000), Some(clocks::Order::Concurrent));
    }
}

#[test]
fn an_unreported_call_lasts_until_the_ranks_next_event() {
    let mut m = Model::new();
    let told = |call: Option<&str>, before_attach: bool| Event::Unreported {
        thread: "rank[1]".into(),
        call: call.map(str::to_owned),
        site: Some("/src/io.c:12 (main)".into()),
        before_attach,
    };
    let rank1 = |m: &Model| m.control.unreported.values().next().cloned();
    m.ingest(&told(Some("MPI_File_open"), false));
    assert_eq!(rank1(&m).map(|u| u.call), Some("MPI_File_open".to_owned()));
    assert!(m
        .control
        .log
        .back()
        .is_some_and(|l| l.text.contains("rank[1] is in MPI_File_open at /src/io.c:12")));
    // Its next step's start ends it.
    m.ingest(&Event::Start(step(1, "MPI_Recv", "rank[1]", "1.0", false)));
    assert!(m.control.unreported.is_empty());
    // A sample that finds it outside MPI ends it too.
    m.ingest(&told(Some("MPI_Recv"), true));
    assert!(rank1(&m).is_some_and(|u| u.before_attach));
    m.ingest(&told(None, false));
    assert!(m.control.unreported.is_empty());
    // So does the end of the program.
    m.ingest(&told(Some("MPI_Barrier"), true));
    m.program_exited(Some(0), None);
    assert!(m.control.unreported.is_empty());
}
