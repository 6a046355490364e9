//! How a rank names itself to the agent: its thread among the job's (`rank[R]` is thread
//! R of the collection `rank`, which names every rank, so that every rank's events name a
//! thread, their own or a send's destination, by one index), the points the policy
//! decides at, and the compact record of a notification nothing holds.

use super::Core;
use racetrack_agent::agent::front::{Point, Thread};
use racetrack_protocol::{CallInfo, Kind, MsgPath, Record, RecordText};
use std::sync::Arc;

/// The start of call `op` with `info` on thread `thread`, as the policy sees it.
pub(super) fn start_point(thread: usize, op: usize, info: &CallInfo) -> Point<'_> {
    Point::Start {
        thread,
        op,
        traced: false,
        call: Some(info),
    }
}

/// The threads of the collection `rank`: every rank of the job, `rank[R]` as thread R
/// (`own` is this rank's name, made once).
pub(super) fn job_threads(rank: i32, size: i32, own: &Arc<str>) -> Vec<Thread> {
    (0..size.max(rank + 1))
        .map(|r| {
            let name = if r == rank {
                own.clone()
            } else {
                format!("rank[{r}]").into()
            };
            Thread::new(usize::try_from(r).unwrap_or_default(), 0, name)
        })
        .collect()
}

impl Core {
    /// The rank's thread index: `rank[R]` is thread R.
    pub(super) fn global(&self) -> usize {
        usize::try_from(self.rank).unwrap_or_default()
    }

    /// The rank's sends as the policy sees them.
    pub(super) fn send_point(&self) -> Point<'static> {
        Point::Send {
            thread: Some(self.global()),
        }
    }

    /// The rank's stops as the policy sees them.
    pub(super) fn stop_point(&self) -> Point<'static> {
        Point::Stop {
            thread: self.global(),
        }
    }

    /// A notification of call `seq` (operation `op`) that nothing holds: a compact record
    /// sharing the call's parameters. A `send` fills in its destination and type.
    pub(super) fn record(&self, kind: Kind, seq: u64, op: usize, info: Arc<CallInfo>) -> Record {
        Record {
            kind,
            event_id: 0,
            thread: self.rank.into(),
            op: i64::try_from(op).unwrap_or(-1),
            msg: MsgPath::from_slice(&[u64::try_from(self.rank).unwrap_or_default(), seq]),
            // A send's destination operation (none), a receive's queue position, a step's
            // kind (a run): -1, 0, 0.
            a: if kind == Kind::Send { -1 } else { 0 },
            b: if kind == Kind::Send { -1 } else { 0 },
            traced: false,
            text: RecordText::None,
            call: Some(info),
            ..Record::default()
        }
    }
}
