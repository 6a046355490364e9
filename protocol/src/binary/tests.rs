//! The binary packed frame's writer and parser.

use super::*;
use crate::MsgPath;

fn id(parts: &[u64]) -> RecordText {
    RecordText::Instance(Box::new(MsgPath::from_slice(parts)))
}

fn ev(kind: Kind, event_id: u64, msg: &[u64], text: RecordText) -> Record {
    Record {
        kind,
        event_id,
        thread: if kind == Kind::Send { -1 } else { 3 },
        op: 2,
        msg: MsgPath::from_slice(msg),
        a: -1,
        b: 1 << 40,
        traced: kind == Kind::Start,
        text,
        from: None,
        call: None,
    }
}

#[test]
fn events_read_back_as_written() {
    let mut w = BinaryWriter::with_capacity(64);
    let events = [
        ev(Kind::Send, 12, &[0, 5], RecordText::Type("Task<é>".into())),
        ev(Kind::Recv, 13, &[0, 5], RecordText::None),
        ev(Kind::Start, 14, &[u64::MAX, 0, 127, 128], id(&[7])),
        ev(Kind::Stop, 3, &[], RecordText::None),
    ];
    for e in &events {
        w.push(e);
    }
    assert_eq!(w.len(), 4);
    let read = parse_binary(&w.finish()).unwrap();
    let want = vec![
        PackedEv::from((
            Kind::Send,
            12,
            -1,
            2,
            "0.5".into(),
            -1,
            1 << 40,
            false,
            "Task<é>".into(),
        )),
        PackedEv::from((Kind::Recv, 13, 3, 2, "0.5".into(), -1, 1 << 40, false, "".into())),
        PackedEv::from((
            Kind::Start,
            14,
            3,
            2,
            "18446744073709551615.0.127.128".into(),
            -1,
            1 << 40,
            true,
            "7".into(),
        )),
        // Ids need not increase: differences wrap.
        PackedEv::from((Kind::Stop, 3, 3, 2, "".into(), -1, 1 << 40, false, "".into())),
    ];
    assert_eq!(read, want);
}

#[test]
fn signed_numbers_survive_the_zigzag() {
    for n in [0, 1, -1, 63, -64, 64, i64::MAX, i64::MIN] {
        let mut out = Vec::new();
        put_i(&mut out, n);
        let mut r = Reader::new(&out);
        assert_eq!(r.i().unwrap(), n);
        assert_eq!(r.i, out.len());
    }
}

#[test]
fn random_damage_never_panics() {
    let mut w = BinaryWriter::with_capacity(256);
    for (i, e) in [
        ev(Kind::Send, 7, &[0, 300], RecordText::Type("Task".into())),
        ev(Kind::Recv, 8, &[0, 300], RecordText::None),
        ev(Kind::Start, 9, &[1, 2, 3, 4, 5, 6, 7, 8], id(&[u64::MAX; 3])),
        ev(Kind::Stop, 10, &[0], RecordText::None),
    ]
    .iter()
    .enumerate()
    {
        assert_eq!(w.len(), i);
        w.push(e);
    }
    let good = w.finish();
    assert_eq!(parse_binary(&good).unwrap().len(), 4);
    // A small linear congruential generator: the same cases every run.
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) as usize
    };
    let mut errors = 0;
    for _ in 0..20_000 {
        let mut bad = good.clone();
        for _ in 0..=next() % 4 {
            let at = next() % bad.len();
            bad[at] = next() as u8;
        }
        bad.truncate(next() % (bad.len() + 1));
        // Either outcome is fine; a panic fails the test.
        errors += usize::from(parse_binary(&bad).is_err());
    }
    assert!(
        errors > 10_000,
        "most damaged frames are refused: {errors} of 20000"
    );
}

#[test]
fn damaged_frames_are_errors_not_panics() {
    let mut w = BinaryWriter::with_capacity(64);
    w.push(&ev(Kind::Send, 1, &[1, 2, 3], RecordText::Type("T".into())));
    let good = w.finish();
    // Any cut: no layout, no count, or fewer events than counted.
    for cut in 0..good.len() {
        let r = parse_binary(&good[..cut]);
        assert!(r.is_err(), "a frame cut to {cut} bytes read as {r:?}");
    }
    let mut bad = good.clone();
    bad[0] = 9;
    let e = parse_binary(&bad).unwrap_err();
    assert!(matches!(e, DecodeError::UnknownLayout { found: 9 }), "{e}");
    assert!(e.to_string().contains("unknown layout 9"), "{e}");
    let mut bad = good.clone();
    bad[5] = 0xff;
    let e = parse_binary(&bad).unwrap_err();
    assert!(matches!(e, DecodeError::BadHead { head: 0xff, .. }), "{e}");
    assert!(e.to_string().contains("bad event head"), "{e}");
    // Counts that disagree with the events.
    let mut bad = good.clone();
    bad[1] = 9;
    let e = parse_binary(&bad).unwrap_err();
    assert!(matches!(e, DecodeError::CountTooLarge { count: 9, .. }), "{e}");
    assert!(e.to_string().contains("cannot fit"), "{e}");
    let mut bad = good.clone();
    bad.extend_from_slice(&good[5..]);
    let e = parse_binary(&bad).unwrap_err();
    assert!(
        matches!(
            e,
            DecodeError::CountMismatch {
                found: 2,
                count: 1,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("2 events where its header says 1"), "{e}");
    // A varint longer than 64 bits.
    let mut bad = vec![BINARY_PACKED, 1, 0, 0, 0, 0];
    bad.extend([0xff; 10]);
    bad.push(0);
    let e = parse_binary(&bad).unwrap_err();
    assert!(matches!(e, DecodeError::NumberTooLarge { .. }), "{e}");
    assert!(e.to_string().contains("too large"), "{e}");
    // A huge component count.
    let bad = [
        BINARY_PACKED,
        1,
        0,
        0,
        0,
        0,
        1,
        0,
        0,
        0xff,
        0xff,
        0xff,
        0xff,
        0x0f,
    ];
    assert!(parse_binary(&bad).is_err());
}

fn every_field() -> crate::CallInfo {
    use crate::call::{AnyTag, Collective, Created, Forced, Matched, Peer, SpecialPeer, Tag};
    crate::CallInfo {
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
        saw: Some(crate::Link {
            thread: "rank[3]".into(),
            event_id: 3_000_000_000_009,
        }),
        source: Some(Peer::Special(SpecialPeer::AnySource)),
        awaits: Some(vec![
            crate::Awaited {
                comm: "comm 3".into(),
                peer: Peer::Special(SpecialPeer::AnySource),
                tag: Tag::Any(AnyTag::AnyTag),
            },
            crate::Awaited {
                comm: "MPI_COMM_WORLD".into(),
                peer: Peer::Rank(-2),
                tag: Tag::Tag(i32::MIN),
            },
        ]),
        posted: Some(vec![crate::Awaited {
            comm: "comm 3".into(),
            peer: Peer::Rank(1),
            tag: Tag::Tag(9),
        }]),
    }
}

/// An MPI call's parameters go through unchanged with every kind of event, every field
/// and the special peers and tags included; a call shared by several events is written
/// for each.
#[test]
fn calls_read_back_as_written() {
    use crate::call::{Forced, Peer, SpecialPeer, Tag};
    let calls = [
        every_field(),
        crate::CallInfo {
            peer: Some(Peer::Rank(-7)),
            tag: Some(Tag::Tag(0)),
            forced: Some(Forced { source: 0, tag: None }),
            ..crate::CallInfo::default()
        },
        crate::CallInfo {
            peer: Some(Peer::Special(SpecialPeer::ProcNull)),
            ..crate::CallInfo::default()
        },
    ]
    .map(Arc::new);
    let mut w = BinaryWriter::with_capacity(64);
    let mut events = Vec::new();
    for (i, kind) in [Kind::Send, Kind::Recv, Kind::Start, Kind::Stop]
        .into_iter()
        .enumerate()
    {
        for call in [None, Some(calls[i % 3].clone()), Some(calls[(i + 1) % 3].clone())] {
            let mut e = ev(kind, 2_000_000_000_007 + i as u64, &[2, 7], RecordText::None);
            if kind == Kind::Send {
                e.text = RecordText::Type("MPI_INT".into());
            }
            e.call = call;
            w.push(&e);
            events.push(e);
        }
    }
    let read = parse_binary(&w.finish()).unwrap();
    assert_eq!(read, events.iter().map(Record::to_packed).collect::<Vec<_>>());
}

/// Texts a frame repeats are shared, not mixed up: sites of one length that differ by a
/// byte, more of them than the reader keeps, in an order that comes back to each.
#[test]
fn repeated_texts_read_back_each_as_written() {
    let site = |k: usize| format!("/home/someone/project/src/solver_{:02}.c:1{k:02} (step)", k % 23);
    let mut w = BinaryWriter::with_capacity(64);
    let mut events = Vec::new();
    for k in (0..40).chain((0..40).rev()).chain((0..40).step_by(3)) {
        let mut e = ev(Kind::Start, 100 + k as u64, &[1], RecordText::None);
        e.call = Some(Arc::new(crate::CallInfo {
            site: Some(site(k).into()),
            comm: Some(format!("comm {}", k % 5).into()),
            ..crate::CallInfo::default()
        }));
        w.push(&e);
        events.push(e);
    }
    let read = parse_binary(&w.finish()).unwrap();
    assert_eq!(read, events.iter().map(Record::to_packed).collect::<Vec<_>>());
}

/// A damaged call is named, never a panic: every truncation, unknown fields, a head with
/// bits no layout uses.
#[test]
fn damaged_calls_are_errors() {
    let mut e = ev(Kind::Start, 5, &[1, 2], RecordText::None);
    e.call = Some(Arc::new(every_field()));
    let mut w = BinaryWriter::with_capacity(64);
    w.push(&e);
    let bytes = w.finish();
    for cut in HEADER..bytes.len() {
        let e = parse_binary(&bytes[..cut]).expect_err("a truncated frame");
        assert!(e.to_string().starts_with("binary packed frame"), "{e}");
    }
    // The call's mask comes where the same event without a call ends.
    let mut plain = BinaryWriter::with_capacity(64);
    plain.push(&ev(Kind::Start, 5, &[1, 2], RecordText::None));
    let mask_at = plain.finish().len();
    let mut unknown = bytes.clone();
    assert_eq!(unknown[mask_at], 0xff, "the mask's first byte");
    unknown[mask_at + 2] = 0x7f;
    let e = parse_binary(&unknown).expect_err("unknown fields");
    assert!(matches!(e, DecodeError::UnknownCallFields { .. }), "{e}");
    let mut bad = bytes;
    bad[HEADER] |= 1 << 7;
    let e = parse_binary(&bad).expect_err("bad head");
    assert!(matches!(e, DecodeError::BadHead { .. }), "{e}");
}
