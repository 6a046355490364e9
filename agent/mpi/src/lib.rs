//! Racetrack's MPI interposition library: the Rust core behind the C wrappers of the MPI
//! calls (`c/`, compiled per implementation by `build.rs`). Both are preloaded into every
//! rank of a job (`racetrack mpirun` does it); the wrappers call `MPI_*`'s `PMPI_*`
//! and report each call here through the C seam `c/racetrack_mpi.h`.
//!
//! Each rank runs its own agent (the agent core, `racetrack_agent::agent::front`), which
//! dials the debugger named by `RACETRACK_CONNECT`. The rank is the thread `rank[R]` of
//! the collection `rank`; each call is a step of the operation named after it
//! (`MPI_Send`), reported as `start` (holdable: the rank stops before calling MPI),
//! `send` (a send's message, its content decoded for basic datatypes, editable while
//! held), `recv` (a receive matched, with the actual source, tag and size) and `stop`,
//! each carrying the call's parameters ([`racetrack_protocol::CallInfo`]). Holds are
//! decided in the rank; a free run streams without waiting for the debugger.

mod call;
mod choices;
mod core;
mod ffi;
mod site;
mod site_lines;

pub use call::{Elem, ElemKind};
pub use core::CALLS;
