use super::*;
use crate::{CollectionDesc, OperationDesc, Record, RecordText};
use smol_str::SmolStr;

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
fn records_read_back_from_binary_frames_as_to_packed_says() {
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
        from: None,
        call: None,
    };
    let recs = [
        rec(Kind::Send, &[0, 3], RecordText::Type("Wei\"rd".into())),
        rec(Kind::Recv, &[0, 3], RecordText::None),
        rec(Kind::Stop, &[0, 3, 1], RecordText::Parent),
        rec(
            Kind::Start,
            &[1, 2, 3, 4],
            RecordText::Instance(Box::new(crate::MsgPath::from_slice(&[9]))),
        ),
    ];
    let mut binary = crate::BinaryWriter::with_capacity(64);
    recs.iter().for_each(|r| binary.push(r));
    let from_binary = crate::binary::parse_binary(&binary.finish()).expect("parses");
    let packed: Vec<PackedEv> = recs.iter().map(Record::to_packed).collect();
    assert_eq!(from_binary, packed);
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
fn a_text_packed_frame_is_not_an_event() {
    // Text clients get `batch` frames of full events; compact events travel only in
    // binary frames.
    let e = Decoder::default()
        .decode(r#"{"event":"packed","events":[[1,1,0,0,"0",0,0,false,""]]}"#)
        .unwrap_err();
    assert!(e.to_string().contains("packed"), "{e}");
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
    // A binary frame naming a thread the names do not have fails as a whole.
    let mut binary = crate::BinaryWriter::with_capacity(64);
    binary.push(&Record {
        kind: Kind::Recv,
        event_id: 1,
        thread: 0,
        op: 0,
        msg: crate::MsgPath::from_slice(&[0]),
        a: 0,
        b: 0,
        traced: false,
        text: RecordText::None,
        from: None,
        call: None,
    });
    let e = Decoder::default().decode_binary(&binary.finish()).unwrap_err();
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
}
