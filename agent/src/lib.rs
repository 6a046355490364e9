//! Racetrack's agent crate: the parallel runtime that programs are written against, and
//! (behind `RACETRACK_LISTEN`) the in-process agent that reports to the debugger.
//!
//! A program builds [`Runtime`], adds thread collections, composes a flow graph of
//! split / leaf / merge / stream operations with `>>`, and calls [`Runtime::schedule`]:
//!
//! ```
//! use racetrack_agent::{ops, Route, Runtime};
//!
//! let rt = Runtime::builder().build();
//! let main = rt.collection::<()>("main", 1);
//! let workers = rt.collection::<u64>("proc", 2);
//! let graph = rt
//!     .graph(
//!         ops::split("Split", &main, Route::constant(0), |n: u32, _ctx, out| {
//!             for i in 0..n {
//!                 out.post(i);
//!             }
//!         }) >> ops::leaf("Square", &workers, Route::round_robin(), |x: u32, ctx| {
//!             *ctx.state += 1; // how many this thread squared
//!             u64::from(x) * u64::from(x)
//!         }) >> ops::merge(
//!             "Sum",
//!             &main,
//!             Route::constant(0),
//!             |acc: &mut u64, x: u64, _ctx| *acc += x,
//!             |acc, _ctx| acc,
//!         ),
//!     )
//!     .expect("well-formed graph");
//! assert_eq!(rt.schedule(&graph, 4).expect("no panic"), 0 + 1 + 4 + 9);
//! ```
//!
//! Every send, receive (enqueue), step start and step stop passes through one [`Hook`]
//! (see [`runtime::hook`]); without a debugger it is absent and costs one branch.

pub mod agent;
pub mod runtime;

pub use runtime::error::{BuildError, ScheduleError};
pub use runtime::graph::{Chain, FlowGraph};
pub use runtime::hook::Hook;
pub use runtime::ids::MsgId;
pub use runtime::ops;
pub use runtime::route::Route;
pub use runtime::{Collection, Ctx, Message, Outputs, Runtime, RuntimeBuilder, ThreadState};
