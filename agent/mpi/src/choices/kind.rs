//! What each MPI call is to record and replay, and its number in the log.

/// What a call is, for record and replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A receive or probe whose source or tag is a wildcard (Sendrecv: always, as its
    /// receive side is not described to the core).
    Wildcard {
        nonblocking: bool,
        poll: bool,
    },
    /// `MPI_Test`, `MPI_Testall`, a non-wildcard `MPI_Iprobe`.
    Poll,
    /// `MPI_Waitany`/`Waitsome` (`poll`: `Testany`/`Testsome`).
    Pick {
        poll: bool,
    },
    Finalize,
    Abort,
    Other,
}

pub(super) fn kind(name: &str, peer: i32) -> Kind {
    // `MPI_ANY_TAG` from a named source needs nothing: the match is that source's first
    // message the receive can take, a function of its sends (non-overtaking).
    let wild = peer == crate::ffi::RT_ANY;
    match name {
        "MPI_Recv" | "MPI_Probe" | "MPI_Mprobe" if wild => Kind::Wildcard {
            nonblocking: false,
            poll: false,
        },
        "MPI_Sendrecv" | "MPI_Sendrecv_replace" => Kind::Wildcard {
            nonblocking: false,
            poll: false,
        },
        "MPI_Irecv" if wild => Kind::Wildcard {
            nonblocking: true,
            poll: false,
        },
        "MPI_Iprobe" | "MPI_Improbe" if wild => Kind::Wildcard {
            nonblocking: false,
            poll: true,
        },
        "MPI_Iprobe" | "MPI_Improbe" | "MPI_Test" | "MPI_Testall" => Kind::Poll,
        "MPI_Waitany" | "MPI_Waitsome" => Kind::Pick { poll: false },
        "MPI_Testany" | "MPI_Testsome" => Kind::Pick { poll: true },
        "MPI_Finalize" => Kind::Finalize,
        "MPI_Abort" => Kind::Abort,
        _ => Kind::Other,
    }
}

/// The call's index in [`crate::core::CALLS`] (the op byte of its choices).
pub(super) fn op_of(name: &str) -> u8 {
    crate::core::CALLS
        .iter()
        .position(|c| *c == name)
        .and_then(|i| u8::try_from(i).ok())
        .filter(|i| *i < 63)
        .unwrap_or(63)
}

pub(super) fn op_name(op: u8) -> &'static str {
    // 63 stands for every call from there on: it names none of them.
    crate::core::CALLS
        .get(usize::from(op))
        .copied()
        .filter(|_| op < 63)
        .unwrap_or("another call")
}
