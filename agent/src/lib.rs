//! Racetrack's in-process debugging agent ([`agent`]), and the runtime it debugs with the
//! agent installed from the environment: a program depends on this crate alone and builds
//! its runtime with `runtime()`. The runtime itself is `racetrack-runtime`, re-exported
//! here whole; it knows the agent only as its `Hook`.
//!
//! The runtime's part (the re-export, `runtime()` and the agent's front end for it) is
//! the default feature `runtime`; without it the crate is the agent core alone, linking
//! no runtime, for another front end (an MPI interposition library), which drives it
//! through [`agent::front`].
//!
//! Every place where a program's course depends on timing goes through one interface,
//! [`choice::Chooser`]: the replay engine ([`choice::Script`]) and live control are its
//! implementations today, and a new engine (exploration, fault injection) is another.
//!
//! ```
//! use racetrack_agent::{ops, Route};
//!
//! // With RACETRACK_LISTEN=127.0.0.1:PORT the agent starts and a debugger can attach;
//! // without it there is no hook at all.
//! let rt = racetrack_agent::runtime().build();
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

// The API programs are written against: every public item says what it is for.
#![warn(missing_docs)]

pub mod agent;
pub mod choice;
#[cfg(feature = "runtime")]
pub mod replay;

#[cfg(feature = "runtime")]
pub use racetrack_runtime::*;

#[cfg(feature = "runtime")]
use std::sync::Arc;

/// A runtime builder whose hook is the debugging agent when `RACETRACK_LISTEN` is set
/// (see [`agent::start_from_env`]), and none otherwise.
#[cfg(feature = "runtime")]
pub fn runtime() -> RuntimeBuilder {
    Runtime::builder().hook_source(agent_from_env)
}

#[cfg(feature = "runtime")]
fn agent_from_env() -> Option<Arc<dyn Hook>> {
    replay::from_env(agent::start_from_env)
        .unwrap_or_else(|| agent::start_from_env().map(|a| a as Arc<dyn Hook>))
}
