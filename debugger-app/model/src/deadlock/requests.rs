//! What a rank's requests add to its wait: the receives a `Wait*` waits for (`awaits`),
//! and the `MPI_Irecv`s posted before a blocking receive (`posted`), which MPI serves
//! first.

use super::{any, rank_name, Need, Open, Waits};
use crate::links::{CommKey, Linker};
use racetrack_protocol::{Awaited, Peer, SpecialPeer, Tag};

impl Waits {
    /// A `Wait*` on receives (`awaits`): what its receives that no pending message will
    /// complete need. Pending messages go to the receives in order, one each (MPI's
    /// matching of receives posted in that order); an unknown communicator or peer is a
    /// receive that may complete.
    pub(super) fn awaited(&self, r: usize, o: &Open, linker: &mut Linker) -> Need {
        let thread = rank_name(r);
        let mut taken = Vec::new();
        let mut left: Vec<Vec<usize>> = Vec::new();
        for a in o.call.awaits.iter().flatten() {
            // An unknown communicator: this receive may complete, and so may the call.
            let Some((key, me)) = linker.comms().of(&thread, &a.comm) else {
                return Need::Nothing;
            };
            let src = match a.peer {
                Peer::Rank(s) => Some(s),
                Peer::Special(SpecialPeer::AnySource) => None,
                Peer::Special(_) => continue,
            };
            let tag = match a.tag {
                Tag::Tag(t) => Some(t),
                Tag::Any(_) => None,
            };
            if let Some(m) = linker.pending_message((key, me), src, tag, &taken) {
                taken.push(m);
                continue;
            }
            let whom = match src {
                Some(s) => match linker.comms().world(key, s).and_then(|x| usize::try_from(x).ok()) {
                    Some(x) => vec![x],
                    // Not a rank the events tell of: it may complete.
                    None => continue,
                },
                None => self.members(linker, key, Some(me)),
            };
            if whom.is_empty() {
                continue;
            }
            left.push(whom);
        }
        if left.is_empty() {
            return Need::Nothing;
        }
        if o.op == "MPI_Waitall" || o.op == "MPI_Wait" {
            return Need::Each(left);
        }
        // `MPI_Waitany`, `MPI_Waitsome`: one completion will do.
        if !taken.is_empty() {
            return Need::Nothing;
        }
        any(Need::Each(left).ranks())
    }
}

/// A posted receive's source and tag (`None`: any).
fn src_tag(a: &Awaited) -> (Option<i32>, Option<i32>) {
    let src = match a.peer {
        Peer::Rank(s) => Some(s),
        _ => None,
    };
    let tag = match a.tag {
        Tag::Tag(t) => Some(t),
        Tag::Any(_) => None,
    };
    (src, tag)
}

/// Whether a pending message is left for `thread`'s blocking receive or probe on
/// `(key, me)` from `src` with `tag` (`None`: any), once the receives `posted` before it
/// (`MPI_Irecv`s not complete) took theirs: MPI gives those a message first. Erring
/// towards "left": a posted receive that may take a message this one cannot is taken to;
/// only those whose every candidate is one of this receive's consume them.
pub(super) fn left_for(
    thread: &str,
    (key, me): (CommKey, i32),
    (src, tag): (Option<i32>, Option<i32>),
    posted: Option<&[Awaited]>,
    linker: &mut Linker,
) -> bool {
    let mine = linker.pending_messages((key, me), src, tag);
    if mine.is_empty() {
        return false;
    }
    let Some(posted) = posted else { return true };
    let mut forced = 0;
    for p in posted {
        // A receive on another communicator takes none of these.
        if linker.comms().of(thread, &p.comm).map(|(k, _)| k) != Some(key) {
            continue;
        }
        let (ps, pt) = src_tag(p);
        let theirs = linker.pending_messages((key, me), ps, pt);
        if !theirs.is_empty() && theirs.iter().all(|m| mine.contains(m)) {
            forced += 1;
        }
    }
    forced < mine.len()
}
