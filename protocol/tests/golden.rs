//! Golden JSON for every message kind: any change of the wire format shows up here.

use racetrack_protocol::*;
use serde_json::json;

fn golden_event(ev: Event, expected: &str) {
    assert_eq!(ev.to_json(), expected, "serialization changed");
    let back: Event = serde_json::from_str(expected).expect("parses back");
    assert_eq!(back, ev, "round trip");
}

fn golden_cmd(text: &str, expected: Command) {
    assert_eq!(Command::parse(text).expect(text), expected, "{text}");
    let again = serde_json::to_string(&expected).expect("serializes");
    assert_eq!(
        Command::parse(&again).expect(&again),
        expected,
        "round trip of {again}"
    );
}

fn step(event_id: u64, held: bool) -> StepEv {
    StepEv {
        event_id,
        thread: "proc[1]".into(),
        op: "Sort".into(),
        msg: "0.3".into(),
        instance: "0.3".into(),
        step: Step::Run,
        traced: false,
        held,
        reason: held.then_some(HoldReason::Break),
        call: None,
    }
}

#[test]
fn events() {
    golden_event(
        Event::Hello {
            program: "farm".into(),
            pid: 42,
            protocol: 3,
        },
        r#"{"event":"hello","program":"farm","pid":42,"protocol":3}"#,
    );
    golden_event(
        Event::Structure {
            operations: vec![OperationDesc {
                name: "Split".into(),
                kind: "split".into(),
                collection: "main".into(),
                threads: vec!["main[0]".into()],
            }],
            collections: vec![CollectionDesc {
                name: "main".into(),
                threads: vec!["main[0]".into()],
            }],
            edges: vec![["Split".into(), "Sort".into()]],
        },
        r#"{"event":"structure","operations":[{"name":"Split","kind":"split","collection":"main","threads":["main[0]"]}],"collections":[{"name":"main","threads":["main[0]"]}],"edges":[["Split","Sort"]]}"#,
    );
    golden_event(
        Event::Start(step(17, true)),
        r#"{"event":"start","event_id":17,"thread":"proc[1]","op":"Sort","msg":"0.3","instance":"0.3","step":"run","traced":false,"held":true,"reason":"break"}"#,
    );
    golden_event(
        Event::Stop(step(18, false)),
        r#"{"event":"stop","event_id":18,"thread":"proc[1]","op":"Sort","msg":"0.3","instance":"0.3","step":"run","traced":false,"held":false}"#,
    );
    golden_event(
        Event::Send(SendEv {
            event_id: 5,
            thread: Some("main[0]".into()),
            op: Some("Split".into()),
            msg: "0.1".into(),
            to_op: Some("Sort".into()),
            to_thread: Some("proc[1]".into()),
            type_name: "Chunk".into(),
            traced: true,
            held: true,
            reason: Some(HoldReason::Trace),
            content: Some(json!({"target": 1})),
            call: None,
        }),
        r#"{"event":"send","event_id":5,"thread":"main[0]","op":"Split","msg":"0.1","to_op":"Sort","to_thread":"proc[1]","type":"Chunk","traced":true,"held":true,"reason":"trace","content":{"target":1}}"#,
    );
    golden_event(
        Event::Send(SendEv {
            event_id: 1,
            thread: None,
            op: None,
            msg: "0".into(),
            to_op: Some("Split".into()),
            to_thread: Some("main[0]".into()),
            type_name: "Input".into(),
            traced: false,
            held: false,
            reason: None,
            content: None,
            call: None,
        }),
        r#"{"event":"send","event_id":1,"msg":"0","to_op":"Split","to_thread":"main[0]","type":"Input","traced":false,"held":false}"#,
    );
    golden_event(
        Event::Recv(RecvEv {
            event_id: 6,
            thread: "proc[1]".into(),
            op: "Sort".into(),
            msg: "0.1".into(),
            position: 0,
            traced: false,
            from: None,
            call: None,
        }),
        r#"{"event":"recv","event_id":6,"thread":"proc[1]","op":"Sort","msg":"0.1","position":0,"traced":false}"#,
    );
    golden_event(
        Event::Recv(RecvEv {
            event_id: 9,
            thread: "rank[0]".into(),
            op: "MPI_Irecv".into(),
            msg: "0.3".into(),
            position: 0,
            traced: false,
            from: Some(Link {
                thread: "rank[2]".into(),
                event_id: 2_000_000_000_003,
            }),
            call: None,
        }),
        r#"{"event":"recv","event_id":9,"thread":"rank[0]","op":"MPI_Irecv","msg":"0.3","position":0,"traced":false,"from":{"thread":"rank[2]","event_id":2000000000003}}"#,
    );
    let entry = QueueEntry {
        id: "0.2".into(),
        type_name: "Chunk".into(),
        from: Some("Split@main[0]".into()),
        to: "Sort@proc[1]".into(),
        op: "Sort".into(),
        traced: false,
        content: None,
    };
    golden_event(
        Event::Queue {
            thread: "proc[1]".into(),
            messages: vec![entry.clone()],
            more: 0,
        },
        r#"{"event":"queue","thread":"proc[1]","messages":[{"id":"0.2","type":"Chunk","from":"Split@main[0]","to":"Sort@proc[1]","op":"Sort","traced":false}]}"#,
    );
    golden_event(
        Event::Queue {
            thread: "proc[1]".into(),
            messages: vec![entry.clone()],
            more: 41,
        },
        r#"{"event":"queue","thread":"proc[1]","messages":[{"id":"0.2","type":"Chunk","from":"Split@main[0]","to":"Sort@proc[1]","op":"Sort","traced":false}],"more":41}"#,
    );
    golden_event(
        Event::Snapshot {
            next_event_id: 9,
            threads: vec![ThreadSnapshot {
                more: 0,
                thread: "proc[1]".into(),
                queue: vec![entry],
                current: Some(CurrentStep {
                    op: "Sort".into(),
                    msg: "0.1".into(),
                    step: Step::Run,
                }),
                pid: None,
            }],
            held: vec![Event::Start(step(8, true))],
        },
        r#"{"event":"snapshot","next_event_id":9,"threads":[{"thread":"proc[1]","queue":[{"id":"0.2","type":"Chunk","from":"Split@main[0]","to":"Sort@proc[1]","op":"Sort","traced":false}],"current":{"op":"Sort","msg":"0.1","step":"run"}}],"held":[{"event":"start","event_id":8,"thread":"proc[1]","op":"Sort","msg":"0.3","instance":"0.3","step":"run","traced":false,"held":true,"reason":"break"}]}"#,
    );
    // An MPI job's snapshot: each rank, a thread of the session, names its process.
    golden_event(
        Event::Snapshot {
            next_event_id: 2000000000000,
            threads: vec![ThreadSnapshot {
                thread: "rank[2]".into(),
                queue: Vec::new(),
                more: 0,
                current: None,
                pid: Some(4242),
            }],
            held: Vec::new(),
        },
        r#"{"event":"snapshot","next_event_id":2000000000000,"threads":[{"thread":"rank[2]","queue":[],"pid":4242}],"held":[]}"#,
    );
    golden_event(
        Event::Batch {
            events: vec![Event::Stop(step(18, false))],
        },
        r#"{"event":"batch","events":[{"event":"stop","event_id":18,"thread":"proc[1]","op":"Sort","msg":"0.3","instance":"0.3","step":"run","traced":false,"held":false}]}"#,
    );
    golden_event(
        Event::Released {
            event_id: 17,
            thread: "proc[1]".into(),
        },
        r#"{"event":"released","event_id":17,"thread":"proc[1]"}"#,
    );
    golden_event(
        Event::State {
            thread: "proc[1]".into(),
            content: json!({"cells": [1.0]}),
        },
        r#"{"event":"state","thread":"proc[1]","content":{"cells":[1.0]}}"#,
    );
    golden_event(
        Event::Ok {
            cmd: "edit".into(),
            target: Some("42".into()),
            req: None,
        },
        r#"{"event":"ok","cmd":"edit","target":"42"}"#,
    );
    golden_event(
        Event::Ok {
            cmd: "break".into(),
            target: None,
            req: Some(7),
        },
        r#"{"event":"ok","cmd":"break","req":7}"#,
    );
    golden_event(
        Event::Panic {
            thread: "proc[0]".into(),
            op: "Work".into(),
            msg: "0.3".into(),
            message: "boom".into(),
        },
        r#"{"event":"panic","thread":"proc[0]","op":"Work","msg":"0.3","message":"boom"}"#,
    );
    golden_event(
        Event::Error {
            message: "no".into(),
            req: None,
        },
        r#"{"event":"error","message":"no"}"#,
    );
    golden_event(
        Event::Error {
            message: "no".into(),
            req: Some(7),
        },
        r#"{"event":"error","message":"no","req":7}"#,
    );
    golden_event(
        Event::Scenario {
            path: Some("race.rtrec".into()),
            log: "52".into(),
            summary: "1 bytes".into(),
            req: Some(3),
        },
        r#"{"event":"scenario","path":"race.rtrec","log":"52","summary":"1 bytes","req":3}"#,
    );
    golden_event(
        Event::Scenario {
            path: None,
            log: "52".into(),
            summary: "1 bytes".into(),
            req: None,
        },
        r#"{"event":"scenario","log":"52","summary":"1 bytes"}"#,
    );
    golden_event(
        Event::Deadlock {
            waits: vec![
                Waiting {
                    thread: "rank[0]".into(),
                    call: "MPI_Recv".into(),
                    event_id: 2,
                    site: Some("d.c:4 (main)".into()),
                    waits_for: vec!["rank[1]".into()],
                    needs: Needs::All,
                    finished: Vec::new(),
                    why: None,
                },
                Waiting {
                    thread: "rank[1]".into(),
                    call: "MPI_Recv".into(),
                    event_id: 1_000_000_000_002,
                    site: None,
                    waits_for: vec!["rank[0]".into(), "rank[2]".into()],
                    needs: Needs::Any,
                    finished: vec!["rank[2]".into()],
                    why: None,
                },
            ],
            cycle: vec!["rank[0]".into(), "rank[1]".into()],
        },
        concat!(
            r#"{"event":"deadlock","waits":[{"thread":"rank[0]","call":"MPI_Recv","event_id":2,"#,
            r#""site":"d.c:4 (main)","waits_for":["rank[1]"],"needs":"all"},"#,
            r#"{"thread":"rank[1]","call":"MPI_Recv","event_id":1000000000002,"#,
            r#""waits_for":["rank[0]","rank[2]"],"needs":"any","finished":["rank[2]"]}],"#,
            r#""cycle":["rank[0]","rank[1]"]}"#
        ),
    );
    golden_event(
        Event::Unreported {
            thread: "rank[1]".into(),
            call: Some("MPI_File_write_all".into()),
            site: Some("io.c:12 (main)".into()),
            before_attach: false,
        },
        r#"{"event":"unreported","thread":"rank[1]","call":"MPI_File_write_all","site":"io.c:12 (main)"}"#,
    );
    golden_event(
        Event::Unreported {
            thread: "rank[1]".into(),
            call: Some("MPI_Recv".into()),
            site: None,
            before_attach: true,
        },
        r#"{"event":"unreported","thread":"rank[1]","call":"MPI_Recv","before_attach":true}"#,
    );
    golden_event(
        Event::Unreported {
            thread: "rank[1]".into(),
            call: None,
            site: None,
            before_attach: false,
        },
        r#"{"event":"unreported","thread":"rank[1]"}"#,
    );
}

fn golden_ctl(ev: CtlEvent, expected: &str) {
    assert_eq!(ev.to_json(), expected, "serialization changed");
    let back: CtlEvent = serde_json::from_str(expected).expect("parses back");
    assert_eq!(back, ev, "round trip");
}

/// What `racetrack ctl` prints of its own, beside the agent's events.
#[test]
fn controller_events() {
    golden_ctl(
        CtlEvent::Output {
            stream: "stdout".into(),
            line: "{}".into(),
        },
        r#"{"event":"output","stream":"stdout","line":"{}"}"#,
    );
    golden_ctl(
        CtlEvent::Waited { until: "held".into() },
        r#"{"event":"waited","until":"held"}"#,
    );
    golden_ctl(
        CtlEvent::Exit {
            code: Some(0),
            signal: None,
        },
        r#"{"event":"exit","code":0}"#,
    );
    golden_ctl(
        CtlEvent::Exit {
            code: None,
            signal: Some(6),
        },
        r#"{"event":"exit","signal":6}"#,
    );
    golden_ctl(
        CtlEvent::Outcome {
            result: json!({"matches_reference": false}),
        },
        r#"{"event":"outcome","result":{"matches_reference":false}}"#,
    );
    // Not wire events: an agent's stream cannot carry them.
    assert!(serde_json::from_str::<Event>(r#"{"event":"exit","code":0}"#).is_err());
}

#[test]
fn commands() {
    golden_cmd(
        r#"{"cmd":"continue"}"#,
        Command::Continue {
            thread: None,
            event_id: None,
            trace: None,
        },
    );
    golden_cmd(
        r#"{"cmd":"continue","thread":"proc[1]"}"#,
        Command::Continue {
            thread: Some("proc[1]".into()),
            event_id: None,
            trace: None,
        },
    );
    golden_cmd(
        r#"{"cmd":"continue","event_id":4,"trace":false}"#,
        Command::Continue {
            thread: None,
            event_id: Some(4),
            trace: Some(false),
        },
    );
    golden_cmd(r#"{"cmd":"step_mode","on":true}"#, Command::StepMode { on: true });
    golden_cmd(
        r#"{"cmd":"break","op":"Split","thread":"proc[1]","on":true,"trace":false}"#,
        Command::Break {
            op: "Split".into(),
            thread: Some("proc[1]".into()),
            on: true,
            trace: false,
            when: None,
            hit: None,
        },
    );
    golden_cmd(
        r#"{"cmd":"break","op":"MPI_Send","thread":"rank[0]","on":true,"trace":false,"when":{"peer":2,"tag":7,"datatype":"MPI_INT","comm":"MPI_COMM_WORLD","min_bytes":8},"hit":3}"#,
        Command::Break {
            op: "MPI_Send".into(),
            thread: Some("rank[0]".into()),
            on: true,
            trace: false,
            when: Some(When {
                peer: Some(Peer::Rank(2)),
                tag: Some(Tag::Tag(7)),
                datatype: Some("MPI_INT".into()),
                comm: Some("MPI_COMM_WORLD".into()),
                min_bytes: Some(8),
                ..When::default()
            }),
            hit: Some(3),
        },
    );
    golden_cmd(
        r#"{"cmd":"break","op":"*","on":true,"trace":false,"when":{"peer":"MPI_ANY_SOURCE","tag":"MPI_ANY_TAG"}}"#,
        Command::Break {
            op: "*".into(),
            thread: None,
            on: true,
            trace: false,
            when: Some(When {
                peer: Some(Peer::Special(SpecialPeer::AnySource)),
                tag: Some(Tag::Any(AnyTag::AnyTag)),
                ..When::default()
            }),
            hit: None,
        },
    );
    golden_cmd(
        r#"{"cmd":"pause","thread":"proc[1]","on":true}"#,
        Command::Pause {
            thread: "proc[1]".into(),
            on: true,
        },
    );
    golden_cmd(
        r#"{"cmd":"queue","thread":"proc[1]"}"#,
        Command::Queue {
            thread: "proc[1]".into(),
            content: false,
        },
    );
    golden_cmd(
        r#"{"cmd":"reorder","thread":"proc[1]","order":["0.1.0","0.0.1"]}"#,
        Command::Reorder {
            thread: "proc[1]".into(),
            order: vec!["0.1.0".into(), "0.0.1".into()],
            rest: None,
        },
    );
    golden_cmd(
        r#"{"cmd":"reorder","thread":"proc[1]","order":["0.2"],"rest":"after"}"#,
        Command::Reorder {
            thread: "proc[1]".into(),
            order: vec!["0.2".into()],
            rest: Some(Rest::After),
        },
    );
    golden_cmd(
        r#"{"cmd":"reorder","thread":"proc[1]","order":["0.2@Sum"],"rest":"before"}"#,
        Command::Reorder {
            thread: "proc[1]".into(),
            order: vec!["0.2@Sum".into()],
            rest: Some(Rest::Before),
        },
    );
    golden_cmd(
        r#"{"cmd":"edit","event_id":42,"content":{"target":3}}"#,
        Command::Edit {
            event_id: Some(42),
            thread: None,
            content: json!({"target": 3}),
        },
    );
    // The held event named by the thread held at it (or by both: the agent checks that
    // they agree).
    golden_cmd(
        r#"{"cmd":"edit","thread":"main[0]","content":{"target":3}}"#,
        Command::Edit {
            event_id: None,
            thread: Some("main[0]".into()),
            content: json!({"target": 3}),
        },
    );
    golden_cmd(
        r#"{"cmd":"state","thread":"proc[1]"}"#,
        Command::State {
            thread: Some("proc[1]".into()),
            event_id: None,
        },
    );
    golden_cmd(
        r#"{"cmd":"state","event_id":42}"#,
        Command::State {
            thread: None,
            event_id: Some(42),
        },
    );
    golden_cmd(
        r#"{"cmd":"set_state","thread":"proc[1]","content":{"x":1}}"#,
        Command::SetState {
            thread: Some("proc[1]".into()),
            event_id: None,
            content: json!({"x": 1}),
        },
    );
    golden_cmd(r#"{"cmd":"ack_all","on":true}"#, Command::AckAll { on: true });
    golden_cmd(r#"{"cmd":"content","on":true}"#, Command::Content { on: true });
    golden_cmd(r#"{"cmd":"detach"}"#, Command::Detach);
    golden_cmd(r#"{"cmd":"take_over"}"#, Command::TakeOver);
    golden_cmd(
        r#"{"cmd":"save_scenario","path":"race.rtrec"}"#,
        Command::SaveScenario {
            path: "race.rtrec".into(),
        },
    );
    golden_cmd(
        r#"{"cmd":"match","event_id":42,"source":2}"#,
        Command::Match {
            event_id: Some(42),
            thread: None,
            source: 2,
            tag: None,
        },
    );
    golden_cmd(
        r#"{"cmd":"match","thread":"rank[0]","source":2}"#,
        Command::Match {
            event_id: None,
            thread: Some("rank[0]".into()),
            source: 2,
            tag: None,
        },
    );
    golden_cmd(
        r#"{"cmd":"match","event_id":42,"thread":"rank[0]","source":2}"#,
        Command::Match {
            event_id: Some(42),
            thread: Some("rank[0]".into()),
            source: 2,
            tag: None,
        },
    );
    golden_cmd(
        r#"{"cmd":"match","event_id":42,"source":2,"tag":7}"#,
        Command::Match {
            event_id: Some(42),
            thread: None,
            source: 2,
            tag: Some(7),
        },
    );
}

#[test]
fn mpi_calls_carry_their_parameters() {
    let mut ev = step(7, false);
    ev.thread = "rank[0]".into();
    ev.op = "MPI_Recv".into();
    ev.msg = "0.2".into();
    ev.instance = "0.2".into();
    ev.call = Some(Box::new(CallInfo {
        comm: Some("MPI_COMM_WORLD".into()),
        peer: Some(Peer::Special(SpecialPeer::AnySource)),
        tag: Some(Tag::Any(AnyTag::AnyTag)),
        count: Some(4),
        datatype: Some("MPI_INT".into()),
        bytes: Some(16),
        site: Some("main+0x1f3 (ring)".into()),
        matched: Some(Matched {
            source: 2,
            tag: 5,
            bytes: 16,
        }),
        forced: Some(Forced { source: 2, tag: None }),
        ..CallInfo::default()
    }));
    golden_event(
        Event::Stop(ev),
        r#"{"event":"stop","event_id":7,"thread":"rank[0]","op":"MPI_Recv","msg":"0.2","instance":"0.2","step":"run","traced":false,"held":false,"call":{"comm":"MPI_COMM_WORLD","peer":"MPI_ANY_SOURCE","tag":"MPI_ANY_TAG","count":4,"datatype":"MPI_INT","bytes":16,"site":"main+0x1f3 (ring)","matched":{"source":2,"tag":5,"bytes":16},"forced":{"source":2}}}"#,
    );
    let created = CallInfo {
        peer: Some(Peer::Rank(3)),
        tag: Some(Tag::Tag(9)),
        root: Some(0),
        created: Some(Created {
            comm: "comm 5".into(),
            rank: 1,
            leader: 2,
        }),
        rc: Some(15),
        label: Some("phase 2".into()),
        ..CallInfo::default()
    };
    assert_eq!(
        serde_json::to_string(&created).expect("serializes"),
        r#"{"peer":3,"tag":9,"root":0,"created":{"comm":"comm 5","rank":1,"leader":2},"label":"phase 2","rc":15}"#
    );
}

#[test]
fn requests_carry_an_optional_number() {
    let text = r#"{"cmd":"break","op":"Sum","on":true,"req":12}"#;
    let r = Request::parse(text).expect("parses");
    assert_eq!(r.req, Some(12));
    assert_eq!(
        r.cmd,
        Command::Break {
            op: "Sum".into(),
            thread: None,
            on: true,
            trace: false,
            when: None,
            hit: None,
        }
    );
    assert_eq!(
        r.to_json(),
        r#"{"cmd":"break","op":"Sum","on":true,"trace":false,"req":12}"#
    );
    assert_eq!(Request::parse(&r.to_json()).expect("parses"), r);
    // Without a number: the command's own JSON, unchanged.
    let plain = Request::from(Command::Detach);
    assert_eq!(plain.to_json(), r#"{"cmd":"detach"}"#);
    assert_eq!(Request::parse(r#"{"cmd":"detach"}"#).expect("parses"), plain);
    // A bad command keeps its number, so the refusal can carry it.
    let RequestError { req, error: e } = Request::parse(r#"{"cmd":"explode","req":3}"#).unwrap_err();
    assert_eq!(req, Some(3));
    assert!(
        matches!(&e, CommandError::Bad { cmd, .. } if cmd == "explode"),
        "{e}"
    );
    assert!(e.to_string().contains("unknown variant `explode`"), "{e}");
    let RequestError { req, error: e } = Request::parse(r#"{"cmd":"detach","req":-1}"#).unwrap_err();
    assert_eq!(req, None);
    assert!(matches!(e, CommandError::BadReq { .. }), "{e}");
    assert_eq!(e.to_string(), "`req` must be a non-negative integer, not -1");
    // `Command` itself still refuses the field.
    let e = Command::parse(r#"{"cmd":"pause","thread":"proc[1]","on":true,"req":1}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown field `req`"), "{e}");
}

#[test]
fn bad_commands_say_what_is_wrong() {
    let e = Command::parse("{not json").unwrap_err().to_string();
    assert!(e.starts_with("malformed JSON"), "{e}");
    let e = Command::parse(r#"{"on":true}"#).unwrap_err().to_string();
    assert!(e.contains("missing `cmd`"), "{e}");
    let e = Command::parse(r#"{"cmd":"explode"}"#).unwrap_err().to_string();
    assert!(e.contains("unknown variant `explode`"), "{e}");
    let e = Command::parse(r#"{"cmd":"step_mode","on":"yes"}"#)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("bad `step_mode` command") && e.contains("invalid type"),
        "{e}"
    );
    let e = Command::parse(r#"{"cmd":"edit","event_id":4}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing field `content`"), "{e}");
    let e = Command::parse(r#"{"cmd":"pause","thread":"proc[1]","on":true,"bogus":1}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown field `bogus`"), "{e}");
}

/// A binary packed frame, byte for byte: the layout byte, the count, then per event its
/// head, id difference, thread, op, message id, `a`, `b`, text, link and call
/// (docs/PROTOCOL.md).
#[test]
fn binary_packed_frame() {
    let rec = |kind, event_id, thread, op, a, b, text| Record {
        from: None,
        kind,
        event_id,
        thread,
        op,
        msg: MsgPath::from_slice(&[0, 5]),
        a,
        b,
        traced: false,
        text,
        call: None,
    };
    let mut w = BinaryWriter::with_capacity(64);
    w.push(&rec(Kind::Send, 12, 0, 0, 1, 3, RecordText::Type("Task".into())));
    w.push(&rec(Kind::Recv, 13, 3, 1, 0, 0, RecordText::None));
    let mut start = rec(Kind::Start, 14, 3, 1, 0, 0, RecordText::None);
    start.call = Some(std::sync::Arc::new(CallInfo {
        comm: Some("W".into()),
        peer: Some(Peer::Rank(2)),
        tag: Some(Tag::Tag(7)),
        ..CallInfo::default()
    }));
    w.push(&start);
    let mut linked = rec(Kind::Recv, 15, 3, 1, 0, 0, RecordText::None);
    linked.from = Some(Box::new(SentBy {
        thread: 2,
        event_id: 12,
    }));
    w.push(&linked);
    #[rustfmt::skip]
    let expected = [
        1, 4, 0, 0, 0,
        // send: head 8 (a string text), id 12, thread 0, op 0, "0.5", a 1, b 3, "Task"
        8, 12, 0, 0, 2, 0, 5, 2, 6, 4, b'T', b'a', b's', b'k',
        // recv: head 1, id +1, thread 3, op 1, "0.5", position 0, 0, no text
        1, 1, 6, 2, 2, 0, 5, 0, 0,
        // start: head 34 (a call), id +1, thread 3, op 1, "0.5", run, 0, no text; the
        // call: mask 7 (comm, peer, tag), "W", peer 3 + zigzag(2), tag 1 + zigzag(7)
        34, 1, 6, 2, 2, 0, 5, 0, 0, 7, 1, b'W', 7, 15,
        // recv: head 65 (a link), id +1, thread 3, op 1, "0.5", 0, 0, no text; from
        // thread 2, event 12
        65, 1, 6, 2, 2, 0, 5, 0, 0, 4, 12,
    ];
    let frame = w.finish();
    assert_eq!(frame, expected);
    // The JSON a text client gets for the start: the call last, as `Event` writes it.
    let names = Names::new(
        vec!["Sum".into(), "MPI_Send".into()],
        vec![
            "rank[0]".into(),
            "rank[1]".into(),
            "rank[2]".into(),
            "rank[3]".into(),
        ],
    );
    let mut json = Vec::new();
    start.to_packed().append_json(&names, &mut json);
    let expected = r#"{"event":"start","event_id":14,"thread":"rank[3]","op":"MPI_Send","msg":"0.5","instance":"0.5","step":"run","traced":false,"held":false,"call":{"comm":"W","peer":2,"tag":7}}"#;
    assert_eq!(String::from_utf8(json).unwrap(), expected);
    let ev = names.expand(start.to_packed()).unwrap();
    assert_eq!(ev.to_json(), expected);
    // And for the linked receive: `from` names the send's thread.
    let mut json = Vec::new();
    linked.to_packed().append_json(&names, &mut json);
    let expected = r#"{"event":"recv","event_id":15,"thread":"rank[3]","op":"MPI_Send","msg":"0.5","position":0,"traced":false,"from":{"thread":"rank[2]","event_id":12}}"#;
    assert_eq!(String::from_utf8(json).unwrap(), expected);
    assert_eq!(names.expand(linked.to_packed()).unwrap().to_json(), expected);
}
