//! The choice point: every place where a debugged program's course depends on timing asks
//! one interface, [`Chooser`], what to do.
//!
//! Timing decides, on the runtime, which pending message a thread takes next; in an MPI
//! rank, which send a wildcard receive or probe matches, whether a poll (`MPI_Test*`,
//! `MPI_Iprobe`) finds, which requests an any/some completion returns, and what a clock
//! reads. A front end describes such a moment as a [`Point`], on a *line* (a runtime
//! thread by its global index, an MPI rank's reporting thread as line 0), and applies the
//! [`Pick`] it gets back: a runtime thread takes the named sender's message first (or
//! waits for it), an MPI wrapper passes the picked source to MPI in place of the wildcard.
//! [`Pick::AsItComes`] leaves it to timing. Each front end applies picks in one place: the
//! runtime's `agent::flow::take` (a suspended thread's queue), the MPI wrappers' forced
//! source, poll outcome and request indices (`rt_start`).
//!
//! Implementations:
//! - the replay engine, [`Script`]: what a replay log recorded, for runtime threads and
//!   MPI ranks alike (`racetrack replay`, scenarios);
//! - live control: the debugger's picks for a held event: a runtime thread's new order
//!   (`reorder`, `move`: [`Pick::Order`]), an MPI call's match (`match`), which wins over
//!   the log's ([`first`]);
//! - as it comes: no chooser at all (a free run).
//!
//! A new engine (exploration, fault injection) is another `Chooser`: it is given the same
//! points, and the front ends already apply its picks.

mod script;

use racetrack_protocol::Rest;
pub use script::Script;

/// A moment where timing would decide, as a front end describes it, with the
/// alternatives enabled there.
#[derive(Clone, Copy)]
pub enum Point<'a> {
    /// A runtime thread is about to take the message of its step number `step` (counted
    /// from 0 on that thread): `next`, as it comes, or another of `pending`. Picks:
    /// [`Pick::Sender`], [`Pick::Order`].
    Message {
        /// The thread's steps on messages so far.
        step: u64,
        /// The sender of the message about to start (sender codes as in [`Pick::Sender`]).
        next: u64,
        /// The messages it could take instead.
        pending: &'a dyn Pending,
    },
    /// An MPI call whose outcome timing decides, number `call` on its rank (counted from
    /// 0 at `MPI_Init`), `op` its index in the library's list of calls. Picks:
    /// [`Pick::Match`], [`Pick::Miss`], [`Pick::Found`], [`Pick::Requests`]. A rank sees
    /// no other rank's sends: a wildcard's candidates are the debugger's to know, from
    /// happens-before.
    Call {
        /// The call's number on its rank.
        call: u64,
        /// The call's index in the library's list of calls.
        op: u8,
        /// A poll (`MPI_Test*`, `MPI_Iprobe`): it may find nothing.
        poll: bool,
    },
    /// The line's clock reading number `n` (counted from 0). Picks: [`Pick::Reading`].
    Clock {
        /// How many readings the line took before.
        n: u64,
    },
}

impl std::fmt::Debug for Point<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Point::Message { step, next, .. } => {
                write!(f, "Message {{ step: {step}, next: {next} }}")
            }
            Point::Call { call, op, poll } => {
                write!(f, "Call {{ call: {call}, op: {op}, poll: {poll} }}")
            }
            Point::Clock { n } => write!(f, "Clock {{ n: {n} }}"),
        }
    }
}

/// A runtime thread's pending messages, read only when a chooser asks (reading locks the
/// thread's queue and copies it).
pub trait Pending {
    /// The senders of the pending messages, in queue order (sender codes as in
    /// [`Pick::Sender`]).
    fn senders(&self) -> Vec<u64>;
}

/// No pending message.
impl Pending for () {
    fn senders(&self) -> Vec<u64> {
        Vec::new()
    }
}

/// What a chooser wants at a [`Point`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick<'a> {
    /// No preference: timing decides.
    AsItComes,
    /// Runtime: the thread takes the first pending message of this sender next (the sender
    /// code of the replay log: 0 for a schedule's input, else the sending thread's global
    /// index plus one), waiting for one if none is pending.
    Sender(u64),
    /// Runtime: the thread's pending messages (the one about to start among them) in this
    /// order, by `id@op`; `rest` places those the order does not name (`None`: it names
    /// every one). The debugger's `reorder` and `move`; a replay's [`Pick::Sender`]
    /// becomes one once the sender's message is found.
    Order {
        /// The messages, as `id@op`.
        order: &'a [String],
        /// Where the others go.
        rest: Option<Rest>,
    },
    /// MPI: the receive or probe matches this source and tag (a poll finds it).
    Match {
        /// The source rank, in the call's communicator.
        source: i32,
        /// The tag.
        tag: i32,
    },
    /// MPI: the poll finds nothing.
    Miss,
    /// MPI: the poll finds (whatever it finds).
    Found,
    /// MPI: the any/some completion completes the requests at these indices.
    Requests(&'a [i32]),
    /// A clock reads this (`f64::to_bits`).
    Reading(u64),
    /// The chooser has nothing more for this line: the line runs free from here.
    Done,
    /// The chooser expected the line to end before this point (a complete log): the
    /// program went another way.
    Overrun,
    /// The chooser expected another call here: the one with this index in the library's
    /// list.
    Mismatch {
        /// The expected call's index in the library's list.
        expected: u8,
    },
}

/// Whoever decides what timing would: see the module's documentation. `choose` is called
/// on the program's thread, at the point itself; it must not block for long unless
/// holding that thread is the point (it is the program's time).
pub trait Chooser {
    /// What to do at `at` on line `line`.
    fn choose(&self, line: usize, at: Point<'_>) -> Pick<'_>;
}

/// The first preference among `picks`, in order: the first that is not
/// [`Pick::AsItComes`]. Front ends list live control before the replay.
pub fn first<'a>(picks: impl IntoIterator<Item = Pick<'a>>) -> Pick<'a> {
    picks
        .into_iter()
        .find(|p| *p != Pick::AsItComes)
        .unwrap_or(Pick::AsItComes)
}

#[cfg(test)]
mod tests;
