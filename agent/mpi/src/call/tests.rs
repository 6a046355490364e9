use super::*;
use serde_json::json;

#[test]
fn ints_round_trip_through_json() {
    let e = Elem::of(b'i', 4).expect("basic");
    let bytes: Vec<u8> = [-3i32, 7, i32::MAX]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect();
    let shown = e.decode(&bytes);
    assert_eq!(shown, json!([-3, 7, i32::MAX]));
    assert_eq!(e.encode(&shown, 3).expect("fits"), bytes);
}

#[test]
fn doubles_and_chars_decode() {
    let d = Elem::of(b'f', 8).expect("basic");
    let bytes: Vec<u8> = [0.5f64, -2.25].iter().flat_map(|v| v.to_ne_bytes()).collect();
    assert_eq!(d.decode(&bytes), json!([0.5, -2.25]));
    let c = Elem::of(b'c', 1).expect("basic");
    assert_eq!(c.decode(b"hi\0\0"), json!("hi"));
    assert_eq!(c.encode(&json!("ok"), 4).expect("fits"), b"ok\0\0".to_vec());
}

#[test]
fn edits_that_do_not_fit_say_why() {
    let e = Elem::of(b'i', 4).expect("basic");
    let err = e.encode(&json!([1, 2]), 3).expect_err("count");
    assert!(err.contains("has 2 values; the send carries 3"), "{err}");
    let err = e.encode(&json!([1, 2, 5_000_000_000i64]), 3).expect_err("range");
    assert!(
        err.contains("value 2") && err.contains("does not fit 4 signed bytes"),
        "{err}"
    );
    let l = Elem::of(b'i', 8).expect("basic");
    let err = l
        .encode(&json!([9_223_372_036_854_775_808u64]), 1)
        .expect_err("range");
    assert!(err.contains("does not fit 8 signed bytes"), "{err}");
    let err = e.encode(&json!([1, "x", 3]), 3).expect_err("type");
    assert!(err.contains("is not an integer"), "{err}");
    let err = e.encode(&json!({"a": 1}), 3).expect_err("shape");
    assert!(err.contains("must be an array of 3 numbers"), "{err}");
    let u = Elem::of(b'u', 1).expect("basic");
    assert!(u.encode(&json!([256]), 1).is_err());
    assert!(u.encode(&json!([-1]), 1).is_err());
}

#[test]
fn non_basic_kinds_are_not_elements() {
    assert_eq!(Elem::of(0, 4), None);
    assert_eq!(Elem::of(b'i', 3), None);
    assert_eq!(Elem::of(b'f', 2), None);
}

fn named(name: &'static str, peer: i32, starts: Option<Starts>) -> Call {
    Call {
        name,
        peer: Some(peer),
        source: None,
        peer_world: None,
        tag: Some(0),
        count: Some(1),
        root: None,
        bytes: None,
        datatype: None,
        comm: None,
        elem: None,
        content: None,
        caller: 0,
        starts,
        awaits: None,
    }
}

#[test]
fn new_calls_send_receive_poll_and_force_as_their_kind_does() {
    let send = named("MPI_Start", 1, Some(Starts::Send));
    assert!(send.sends() && !send.receives());
    let recv = named("MPI_Start", RT_ANY, Some(Starts::Recv));
    assert!(recv.receives() && !recv.sends());
    // Its match is bound at MPI_Recv_init: a started wildcard cannot be forced.
    assert!(!recv.can_force());
    let unknown = named("MPI_Start", 1, None);
    assert!(!unknown.sends() && !unknown.receives());
    assert!(named("MPI_Mprobe", RT_ANY, None).can_force());
    assert!(!named("MPI_Mprobe", 2, None).can_force());
    let improbe = named("MPI_Improbe", RT_ANY, None);
    assert!(improbe.can_force() && improbe.polls() && !improbe.receives());
    assert!(named("MPI_Mrecv", 2, None).receives());
    assert!(named("MPI_Imrecv", 2, None).receives());
    assert!(!named("MPI_Mrecv", 2, None).can_force());
    for other in ["MPI_Ibarrier", "MPI_Send_init", "MPI_Put", "MPI_Startall"] {
        let c = named(other, 1, None);
        assert!(
            !c.sends() && !c.receives() && !c.polls() && !c.can_force(),
            "{other}"
        );
    }
}
