use super::*;
use crate::{CollectionDesc, OperationDesc};

fn names() -> Names {
    let ev = Event::Structure {
        operations: vec![
            OperationDesc {
                name: "Split".into(),
                kind: "split".into(),
                collection: "main".into(),
                threads: vec!["main[0]".into()],
            },
            OperationDesc {
                name: "Wo\"rk".into(),
                kind: "leaf".into(),
                collection: "proc".into(),
                threads: vec!["proc[0]".into(), "proc[1]".into()],
            },
        ],
        collections: vec![
            CollectionDesc {
                name: "main".into(),
                threads: vec!["main[0]".into()],
            },
            CollectionDesc {
                name: "proc".into(),
                threads: vec!["proc[0]".into(), "proc[1]".into()],
            },
        ],
        edges: vec![],
    };
    Names::of(&ev).expect("a structure")
}

#[test]
fn write_json_prints_exactly_the_expanded_event() {
    let n = names();
    let cases = [
        PackedEv::from((Kind::Send, 1, 0, 0, "0.3".into(), 1, 2, false, "Task".into())),
        PackedEv::from((Kind::Send, 2, -1, -1, "0".into(), 0, 0, true, "Job".into())),
        PackedEv::from((Kind::Send, 3, 2, 1, "0.3".into(), -1, -1, false, "u64".into())),
        PackedEv::from((Kind::Recv, 4, 2, 1, "0.3".into(), 5, 0, true, SmolStr::default())),
        PackedEv::from((
            Kind::Start,
            5,
            2,
            1,
            "0.3".into(),
            0,
            0,
            false,
            SmolStr::default(),
        )),
        PackedEv::from((Kind::Stop, 6, 0, 0, "0.3.1".into(), 2, 0, true, "0.3".into())),
        PackedEv::from((Kind::Stop, 7, 0, 0, "0.3".into(), 1, 0, false, SmolStr::default())),
        // Text that needs escaping, and text that does not but is not ASCII.
        PackedEv::from((
            Kind::Send,
            8,
            0,
            0,
            "x\"y".into(),
            1,
            2,
            false,
            "Wei\\rd<\u{7}>".into(),
        )),
        PackedEv::from((Kind::Start, 9, 2, 1, "0.1".into(), 1, 0, true, "é\u{7f}".into())),
    ];
    for p in cases {
        let mut out = Vec::new();
        p.write_json(&n, &mut out).expect("writes");
        let expanded = n.expand(p.clone()).expect("expands");
        assert_eq!(
            String::from_utf8(out).expect("utf-8"),
            expanded.to_json(),
            "{p:?}"
        );
    }
}

#[test]
fn records_read_back_the_same_from_text_and_binary_frames() {
    let rec = |kind, msg: &[u64], text| Record {
        kind,
        event_id: 40,
        thread: 1,
        op: 0,
        msg: crate::MsgPath::from_slice(msg),
        a: 1,
        b: -1,
        traced: kind == Kind::Start,
        text,
    };
    let recs = [
        rec(Kind::Send, &[0, 3], RecordText::Type("Wei\"rd")),
        rec(Kind::Recv, &[0, 3], RecordText::None),
        rec(Kind::Stop, &[0, 3, 1], RecordText::Parent),
        rec(
            Kind::Start,
            &[1, 2, 3, 4],
            RecordText::Instance(Box::new(crate::MsgPath::from_slice(&[9]))),
        ),
    ];
    let mut text = br#"{"event":"packed","events":["#.to_vec();
    let mut binary = crate::BinaryWriter::with_capacity(64);
    for (i, r) in recs.iter().enumerate() {
        if i > 0 {
            text.push(b',');
        }
        r.append_packed(&mut text);
        binary.push(r);
    }
    text.extend_from_slice(b"]}");
    let text = String::from_utf8(text).expect("utf-8");
    // The escaped type name sends the text frame through serde, which must agree.
    let from_text: PackedFrame = serde_json::from_str(&text).expect("parses");
    let from_binary = crate::binary::parse_binary(&binary.finish()).expect("parses");
    assert_eq!(from_text.events, from_binary);
    let texts: Vec<(&str, &str)> = from_binary.iter().map(|p| (&*p.msg, &*p.text)).collect();
    assert_eq!(
        texts,
        [
            ("0.3", "Wei\"rd"),
            ("0.3", ""),
            ("0.3.1", "0.3"),
            ("1.2.3.4", "9")
        ]
    );
}

#[test]
fn the_fast_parser_reads_what_serde_reads() {
    let frame = Event::Packed {
        events: vec![
            PackedEv::from((
                Kind::Send,
                12,
                0,
                -1,
                "0.5".into(),
                1,
                3,
                false,
                "farm::Task".into(),
            )),
            PackedEv::from((
                Kind::Stop,
                u64::MAX,
                3,
                1,
                "0.5.18446744073709551615".into(),
                0,
                -7,
                true,
                "0.5".into(),
            )),
        ],
    };
    let text = frame.to_json();
    let Event::Packed { events } = frame else {
        unreachable!()
    };
    assert_eq!(parse_packed(&text), Some(events));
    assert_eq!(parse_packed(r#"{"event":"packed","events":[]}"#), Some(vec![]));
    // Anything laid out otherwise goes to serde: escapes, spaces, trailing text.
    for other in [
        r#"{"event":"packed","events":[[1,1,0,0,"a\"b",0,0,false,""]]}"#,
        r#"{"event":"packed","events":[[1,1,0,0,"0",0,0,false,""] ]}"#,
        r#"{"event":"packed","events":[[1,1,0,0,"0",0,0,false,""]]}x"#,
        r#"{"event":"packed","events":[[1,1,0,0,"0",0,0,maybe,""]]}"#,
    ] {
        assert_eq!(parse_packed(other), None, "{other}");
    }
    let mut d = Decoder::default();
    d.observe(&Event::Structure {
        operations: vec![],
        collections: vec![CollectionDesc {
            name: "p".into(),
            threads: vec!["p[0]".into()],
        }],
        edges: vec![],
    });
    // The escaped one still decodes (through serde), to the right string.
    let evs = d
        .decode(r#"{"event":"packed","events":[[0,1,0,-1,"a\"b",-1,-1,false,"T"]]}"#)
        .expect("decodes");
    assert!(matches!(&evs[0], Event::Send(s) if s.msg == "a\"b"));
}

#[test]
fn bad_indexes_are_errors() {
    let n = names();
    assert!(n
        .check(&PackedEv::from((
            Kind::Recv,
            1,
            9,
            0,
            "0".into(),
            0,
            0,
            false,
            SmolStr::default()
        )))
        .unwrap_err()
        .to_string()
        .contains("thread #9"));
    assert!(n
        .check(&PackedEv::from((
            Kind::Start,
            1,
            0,
            0,
            "0".into(),
            7,
            0,
            false,
            SmolStr::default()
        )))
        .unwrap_err()
        .to_string()
        .contains("step"));
    assert!(n
        .check(&PackedEv::from((
            Kind::Recv,
            1,
            -1,
            0,
            "0".into(),
            0,
            0,
            false,
            SmolStr::default()
        )))
        .is_err());
    let mut d = Decoder::default();
    let e = d
        .decode(r#"{"event":"packed","events":[[1,1,0,0,"0",0,0,false,""]]}"#)
        .unwrap_err();
    assert!(
        matches!(
            e,
            DecodeError::UnknownName {
                what: "thread",
                index: 0
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("thread #0"), "{e}");
    // A kind is one of four: anything else is refused where the frame is read.
    let e = d
        .decode(r#"{"event":"packed","events":[[8,1,0,0,"0",0,0,false,""]]}"#)
        .unwrap_err();
    assert!(matches!(e, DecodeError::Json(_)), "{e}");
    assert!(e.to_string().contains("unknown kind 8"), "{e}");
}
