//! What a rank's requests add to its wait: the receives a `Wait*` waits for (`awaits`),
//! and the `MPI_Irecv`s posted before a blocking receive (`posted`), which MPI serves
//! first.

use super::{any, rank_name, Need, Open, Waits};
use crate::links::{Channel, CommKey, Linker};
use racetrack_protocol::{Awaited, Peer, SpecialPeer, Tag};

impl Waits {
    /// A `Wait*` on receives (`awaits`): what the receives no pending message can complete
    /// need. Which receive took which message is not told until the call returns, so the
    /// messages are matched to the receives as well as they can be (a maximum matching):
    /// the call needs nothing when every receive can have one. Otherwise, when every
    /// receive names its source, each source short of messages is needed (`MPI_Wait`,
    /// `MPI_Waitall`); with a wildcard among them, any sender of any receive will do (an
    /// approximation towards "can go on"). `MPI_Waitany` and `MPI_Waitsome` need nothing
    /// when one receive can complete, else any sender of any. An unknown communicator or
    /// peer is a receive that may complete.
    pub(super) fn awaited(&self, r: usize, o: &Open, linker: &mut Linker) -> Need {
        let thread = rank_name(r);
        // Each receive: its candidate messages, and the ranks that could send it one.
        let mut recvs: Vec<Recv> = Vec::new();
        for a in o.call.awaits.iter().flatten() {
            let Some((key, me)) = linker.comms().of(&thread, &a.comm) else {
                return Need::Nothing;
            };
            let (src, tag) = match src_tag(a) {
                Some(st) => st,
                None => continue,
            };
            let whom = match src {
                Some(s) => match linker.comms().world(key, s).and_then(|x| usize::try_from(x).ok()) {
                    Some(x) => vec![x],
                    // Not a rank the events tell of: it may complete.
                    None => return Need::Nothing,
                },
                None => self.members(linker, key, Some(me)),
            };
            recvs.push(Recv {
                cands: linker.pending_messages((key, me), src, tag),
                whom,
                wild: src.is_none(),
            });
        }
        let cands: Vec<&[(Channel, usize)]> = recvs.iter().map(|r| r.cands.as_slice()).collect();
        let matched = max_matching(&cands);
        let all = o.op == "MPI_Waitall" || o.op == "MPI_Wait";
        if matched.iter().all(|m| *m) || (!all && matched.iter().any(|m| *m)) {
            return Need::Nothing;
        }
        let mut senders: Vec<usize> = Vec::new();
        let short = recvs.iter().zip(&matched).filter(|(_, m)| !**m || !all);
        for (rv, _) in short {
            for &x in &rv.whom {
                if !senders.contains(&x) {
                    senders.push(x);
                }
            }
        }
        if all && !recvs.iter().any(|rv| rv.wild) {
            // Named sources: each one short of messages is needed.
            return if senders.is_empty() {
                Need::Nothing
            } else {
                Need::All(senders)
            };
        }
        let every: Vec<usize> =
            recvs
                .iter()
                .flat_map(|rv| rv.whom.iter().copied())
                .fold(Vec::new(), |mut v, x| {
                    if !v.contains(&x) {
                        v.push(x);
                    }
                    v
                });
        any(every)
    }
}

/// A receive a `Wait*` waits for: its candidate messages, the ranks that could send it
/// one, and whether it is a wildcard.
struct Recv {
    cands: Vec<(Channel, usize)>,
    whom: Vec<usize>,
    wild: bool,
}

/// For each receive (its candidate messages), whether it gets a message in a maximum
/// matching of receives to distinct messages (augmenting paths; a few receives).
fn max_matching(cands: &[&[(Channel, usize)]]) -> Vec<bool> {
    let mut owner: Vec<((Channel, usize), usize)> = Vec::new();
    fn augment(
        r: usize,
        cands: &[&[(Channel, usize)]],
        owner: &mut Vec<((Channel, usize), usize)>,
        seen: &mut Vec<(Channel, usize)>,
    ) -> bool {
        for m in cands[r] {
            if seen.contains(m) {
                continue;
            }
            seen.push(*m);
            let held = owner.iter().position(|(x, _)| x == m);
            let free = match held {
                None => true,
                Some(i) => {
                    let other = owner[i].1;
                    augment(other, cands, owner, seen)
                }
            };
            if free {
                owner.retain(|(x, _)| x != m);
                owner.push((*m, r));
                return true;
            }
        }
        false
    }
    for r in 0..cands.len() {
        augment(r, cands, &mut owner, &mut Vec::new());
    }
    (0..cands.len())
        .map(|r| owner.iter().any(|(_, o)| *o == r))
        .collect()
}

/// A receive's source and tag (`None`: any); `None` for `MPI_PROC_NULL` (or `MPI_ROOT`),
/// which takes no message and completes at once.
fn src_tag(a: &Awaited) -> Option<(Option<i32>, Option<i32>)> {
    let src = match a.peer {
        Peer::Rank(s) => Some(s),
        Peer::Special(SpecialPeer::AnySource) => None,
        Peer::Special(_) => return None,
    };
    let tag = match a.tag {
        Tag::Tag(t) => Some(t),
        Tag::Any(_) => None,
    };
    Some((src, tag))
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
    let mut forced: Vec<Vec<(Channel, usize)>> = Vec::new();
    for p in posted {
        // A receive on another communicator takes none of these.
        if linker.comms().of(thread, &p.comm).map(|(k, _)| k) != Some(key) {
            continue;
        }
        let Some((ps, pt)) = src_tag(p) else { continue };
        let theirs = linker.pending_messages((key, me), ps, pt);
        if !theirs.is_empty() && theirs.iter().all(|m| mine.contains(m)) {
            forced.push(theirs);
        }
    }
    // Too few to take them all, or too many to try each way they could have: left.
    if forced.len() < mine.len() || forced.len() > 6 || mine.len() > 12 {
        return true;
    }
    some_left(&forced, &mut Vec::new(), mine.len())
}

/// Whether the posted receives `forced`, each in turn taking a candidate still there (any
/// one: which is not told), can leave one of the `mine` messages.
fn some_left(forced: &[Vec<(Channel, usize)>], taken: &mut Vec<(Channel, usize)>, mine: usize) -> bool {
    let Some((first, rest)) = forced.split_first() else {
        return taken.len() < mine;
    };
    let there: Vec<(Channel, usize)> = first.iter().filter(|m| !taken.contains(m)).copied().collect();
    if there.is_empty() {
        return some_left(rest, taken, mine);
    }
    for m in there {
        taken.push(m);
        let left = some_left(rest, taken, mine);
        taken.pop();
        if left {
            return true;
        }
    }
    false
}
