//! Binary event frames: written and read back, shared events, damage.

use super::read::parse_events;
use super::*;
use crate::call::{Collective, Created, Forced, Matched};
use crate::{BinaryFrame, DecodeError, Link, RecvEv, SendEv, StepEv};

fn step(start: bool, call: Option<CallInfo>) -> Event {
    let s = StepEv {
        event_id: 2_000_000_000_007,
        thread: "rank[2]".into(),
        op: "MPI_Recv".into(),
        msg: "2.7".into(),
        instance: "2.7".into(),
        step: Step::Run,
        traced: false,
        held: false,
        reason: None,
        call: call.map(Box::new),
    };
    if start {
        Event::Start(s)
    } else {
        Event::Stop(s)
    }
}

fn every_field() -> CallInfo {
    CallInfo {
        comm: Some("comm 3".into()),
        peer: Some(Peer::Special(SpecialPeer::AnySource)),
        tag: Some(Tag::Any(AnyTag::AnyTag)),
        count: Some(-1),
        datatype: Some("MPI_DOUBLE".into()),
        bytes: Some(1 << 40),
        root: Some(0),
        site: Some("/src/ring.c:43 (pass_token) «é»".into()),
        matched: Some(Matched {
            source: 3,
            tag: i32::MAX,
            bytes: -1,
        }),
        forced: Some(Forced {
            source: 1,
            tag: Some(-5),
        }),
        created: Some(Created {
            comm: "comm 4".into(),
            rank: 2,
            leader: i32::MIN,
        }),
        label: Some("phase \"2\"".into()),
        rc: Some(15),
        polls: Some(u64::MAX),
        collective: Some(Collective {
            comm: "comm 1".into(),
            leader: 2,
            n: 7,
        }),
        saw: Some(Link {
            thread: "rank[3]".into(),
            event_id: 3_000_000_000_009,
        }),
    }
}

/// Every kind and every field goes through unchanged, in order.
#[test]
fn events_read_back_as_written() {
    let mut evs = vec![
        step(true, Some(every_field())),
        step(false, None),
        step(
            true,
            Some(CallInfo {
                peer: Some(Peer::Rank(-7)),
                tag: Some(Tag::Tag(0)),
                forced: Some(Forced { source: 0, tag: None }),
                ..CallInfo::default()
            }),
        ),
        Event::Send(SendEv {
            event_id: 1,
            thread: Some("rank[0]".into()),
            op: None,
            msg: "0.1".into(),
            to_op: None,
            to_thread: Some("rank[1]".into()),
            type_name: "MPI_INT".into(),
            traced: true,
            held: false,
            reason: None,
            content: None,
            call: Some(Box::new(CallInfo {
                peer: Some(Peer::Special(SpecialPeer::ProcNull)),
                ..CallInfo::default()
            })),
        }),
        Event::Recv(RecvEv {
            event_id: 0,
            thread: "rank[1]".into(),
            op: "MPI_Irecv".into(),
            msg: "1.4".into(),
            position: 300,
            traced: false,
            from: Some(Link {
                thread: "rank[2]".into(),
                event_id: 2_000_000_000_003,
            }),
            call: None,
        }),
    ];
    if let Event::Stop(s) = &mut evs[1] {
        s.instance = "2.1".into();
        s.step = Step::Final;
    }
    let mut w = EventWriter::with_capacity(16);
    for ev in &evs {
        assert!(w.push(ev), "{ev:?}");
    }
    assert_eq!(w.len(), evs.len());
    assert_eq!(parse_events(&w.finish()).expect("decodes"), evs);
}

/// A shared event is written byte for byte as the event it stands for.
#[test]
fn a_shared_event_is_written_as_its_event() {
    let call = Arc::new(every_field());
    let name = |s: &str| -> Arc<str> { s.into() };
    for kind in [Kind::Send, Kind::Recv, Kind::Start, Kind::Stop] {
        for (to_thread, call) in [(None, None), (Some(name("rank[3]")), Some(call.clone()))] {
            let ev = SharedEv {
                kind,
                event_id: 1_000_000_000_042,
                thread: name("rank[1]"),
                op: name("MPI_Isend"),
                msg: [1, 41],
                to_thread: to_thread.filter(|_| kind == Kind::Send),
                type_name: name(if kind == Kind::Send { "MPI_INT" } else { "" }),
                call,
            };
            let (mut a, mut b) = (EventWriter::with_capacity(8), EventWriter::with_capacity(8));
            for _ in 0..2 {
                a.push_shared(&ev);
                assert!(b.push(&ev.to_event()));
            }
            let (a, b) = (a.finish(), b.finish());
            assert_eq!(a, b, "{kind:?}");
            assert_eq!(
                parse_events(&a).expect("decodes"),
                vec![ev.to_event(), ev.to_event()]
            );
        }
    }
}

/// Held events and contents are left to JSON frames; damage is named, never a panic.
#[test]
fn what_does_not_fit_is_refused_and_damage_is_an_error() {
    let mut held = step(true, None);
    if let Event::Start(s) = &mut held {
        s.held = true;
    }
    let mut w = EventWriter::with_capacity(16);
    assert!(!w.push(&held));
    assert!(!w.push(&Event::Released {
        event_id: 1,
        thread: "t".into()
    }));
    assert!(w.is_empty());
    assert!(w.push(&step(true, Some(every_field()))));
    let bytes = w.finish();
    for cut in 1..bytes.len() {
        let e = parse_events(&bytes[..cut]).expect_err("a truncated frame");
        assert!(e.to_string().starts_with("binary event frame: "), "{e}");
    }
    let mut wrong = bytes.clone();
    wrong[1] = 2;
    assert!(parse_events(&wrong).is_err());
    let mut bad_step = bytes;
    bad_step[HEADER] |= 3 << 5;
    let e = parse_events(&bad_step).expect_err("bad head");
    assert!(
        matches!(
            e,
            DecodeError::BadHead {
                frame: BinaryFrame::Events,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("bad event head"), "{e}");
}
