use super::*;

fn miss(call: u64, op: u8) -> Choice {
    Choice {
        call,
        op,
        what: Chose::Miss { n: 1 },
    }
}

#[test]
fn consecutive_misses_of_one_call_are_one_run() {
    let test = op_of("MPI_Test");
    let iprobe = op_of("MPI_Iprobe");
    let mut rec = Recording::new(None);
    for call in 10..15 {
        keep(0, &mut rec, miss(call, test));
    }
    // Another call's miss, then a gap: new runs.
    keep(0, &mut rec, miss(15, iprobe));
    keep(0, &mut rec, miss(17, iprobe));
    let runs: Vec<(u64, u64)> = rec
        .pending
        .values()
        .map(|c| match c.what {
            Chose::Miss { n } => (c.call, n),
            _ => panic!("{c:?}"),
        })
        .collect();
    assert_eq!(runs, [(10, 5), (15, 1), (17, 1)]);
}

#[test]
fn only_any_source_receives_and_polls_are_choices() {
    let any = crate::ffi::RT_ANY;
    assert!(matches!(
        kind("MPI_Recv", any),
        Kind::Wildcard {
            nonblocking: false,
            ..
        }
    ));
    assert!(matches!(
        kind("MPI_Irecv", any),
        Kind::Wildcard {
            nonblocking: true,
            ..
        }
    ));
    assert!(matches!(
        kind("MPI_Iprobe", any),
        Kind::Wildcard { poll: true, .. }
    ));
    // A named source (any tag) matches its first message: nothing to record.
    assert_eq!(kind("MPI_Recv", 3), Kind::Other);
    assert_eq!(kind("MPI_Iprobe", 3), Kind::Poll);
    assert_eq!(
        kind("MPI_Testany", crate::ffi::RT_NONE),
        Kind::Pick { poll: true }
    );
    assert_eq!(
        kind("MPI_Waitsome", crate::ffi::RT_NONE),
        Kind::Pick { poll: false }
    );
    assert_eq!(kind("MPI_Send", 1), Kind::Other);
    assert_eq!(op_name(op_of("MPI_Recv")), "MPI_Recv");
}

#[test]
fn matched_probes_are_recorded_as_probes_and_fit_the_op_bits() {
    let any = crate::ffi::RT_ANY;
    assert_eq!(
        kind("MPI_Mprobe", any),
        Kind::Wildcard {
            nonblocking: false,
            poll: false
        }
    );
    assert_eq!(
        kind("MPI_Improbe", any),
        Kind::Wildcard {
            nonblocking: false,
            poll: true
        }
    );
    assert_eq!(kind("MPI_Improbe", 2), Kind::Poll);
    assert_eq!(kind("MPI_Mprobe", 2), Kind::Other);
    // A log keeps 6 bits of the op: every call that records a choice fits, the rest
    // share 63 ("another call").
    for name in ["MPI_Mprobe", "MPI_Improbe", "MPI_Recv", "MPI_Testsome"] {
        assert!(op_of(name) < 63, "{name}");
        assert_eq!(op_name(op_of(name)), name);
    }
    assert_eq!(op_of("MPI_Accumulate"), 63);
    assert_eq!(op_name(63), "another call", "63 names no call");
}
