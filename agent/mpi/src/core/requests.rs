//! Nonblocking calls' requests: what each is for (`rt_request`), its completion
//! (`rt_completed`: a receive's is its `recv`), and what a `Wait*` given some waits for.

use super::{lock, Core, CORE};
use racetrack_protocol::{Awaited, CallInfo, Matched, Peer, Tag};
use std::sync::Arc;

/// A nonblocking call's request, to report its completion.
pub(super) struct Pending {
    seq: u64,
    op: usize,
    /// The call that made it (`MPI_Irecv`, …).
    name: &'static str,
    receives: bool,
    info: Arc<CallInfo>,
    /// The receive as MPI was given it (`awaits`, `posted`): the debugger may have forced
    /// a wildcard's source and tag.
    made: Option<Awaited>,
}

/// `rt_request`: remember what a nonblocking call's request is for.
pub fn request(token: u64, request: i64) {
    let Some(core) = CORE.get() else { return };
    let flights = lock(&core.in_flight);
    let Some(fl) = flights.get(&token) else { return };
    let i = &fl.info;
    let made = (|| {
        let (peer, tag) = match &fl.forced {
            Some(f) => (Peer::Rank(f.source), f.tag.map_or(i.tag?, Tag::Tag)),
            None => (i.peer?, i.tag?),
        };
        Some(Awaited {
            comm: i.comm.clone()?,
            peer,
            tag,
        })
    })();
    let pending = Pending {
        seq: fl.seq,
        op: fl.op,
        name: fl.call.name,
        receives: fl.call.receives(),
        info: fl.info.clone(),
        made,
    };
    drop(flights);
    lock(&core.requests).insert(request, pending);
}

/// `rt_completed`: a request completed; a receive's is its `recv`.
pub fn completed(_token: u64, request: i64, (source, tag, bytes): (i32, i32, i64), cancelled: bool) {
    let Some(core) = CORE.get() else { return };
    let Some(p) = lock(&core.requests).remove(&request) else {
        return;
    };
    if p.receives && !cancelled {
        let mut info = p.info;
        Arc::make_mut(&mut info).matched = Some(Matched { source, tag, bytes });
        core.report_recv(p.seq, p.op, info);
    }
}

impl Core {
    /// The receives a `Wait*` call given requests `ids` waits for, as the deadlock model
    /// reads them (`CallInfo::awaits`): `None` unless each request is one this library
    /// saw made by `MPI_Irecv` (a receive to wait for) or `MPI_Isend` (which completes
    /// without anyone here); anything else may wait for anyone. `any`: one completion
    /// ends the call (`MPI_Waitany`, `MPI_Waitsome`), so a send among them waits for
    /// nobody.
    pub(super) fn awaited(&self, ids: &[i64], any: bool) -> Option<Vec<Awaited>> {
        let requests = lock(&self.requests);
        let mut out = Vec::new();
        let mut sends = false;
        for id in ids {
            let p = requests.get(id)?;
            match p.name {
                "MPI_Isend" => sends = true,
                "MPI_Irecv" => {
                    out.push(p.made.clone()?);
                }
                _ => return None,
            }
        }
        if any && sends {
            out.clear();
        }
        Some(out)
    }

    /// The rank's incomplete receive requests, in posting order, for a blocking receive
    /// or probe (`CallInfo::posted`): `None` when there are none, or when one was not made
    /// by `MPI_Irecv` (a started persistent receive, a matched `MPI_Imrecv`).
    pub(super) fn posted(&self) -> Option<Vec<Awaited>> {
        let requests = lock(&self.requests);
        let mut recvs: Vec<&Pending> = requests.values().filter(|p| p.receives).collect();
        if recvs.is_empty() {
            return None;
        }
        recvs.sort_by_key(|p| p.seq);
        recvs
            .into_iter()
            .map(|p| {
                (p.name == "MPI_Irecv").then_some(())?;
                p.made.clone()
            })
            .collect()
    }

    /// `MPI_Request_free` was given `ids`: they are not waited for, nor posted, any more.
    pub(super) fn forget(&self, ids: &[i64]) {
        let mut requests = lock(&self.requests);
        for id in ids {
            requests.remove(id);
        }
    }
}
