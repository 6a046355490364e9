//! What the merge sends its consumer: the ranks' events in items of up to
//! [`PENDING_MAX`], full events as `Events`, compact ones as `Packed` frames named by the
//! job's merged structure (each rank's indexes translated into its: [`Remap`]).

use super::links::Item;
use crate::conn::{ConnEvent, Waker};
use racetrack_model::ids::FastMap;
use racetrack_protocol::{Event, Kind, Names, PackedEv};
use std::sync::{mpsc, Arc};

/// Events sent to the consumer as one item at most (an agent's frame holds up to 1,024).
const PENDING_MAX: usize = 1024;

/// The consumer's end, and the run of events going to it next.
pub(super) struct Out {
    tx: mpsc::SyncSender<ConnEvent>,
    waker: Waker,
    /// Full events waiting to go (none while `packed` has some: order is kept).
    full: Vec<Event>,
    /// Compact events waiting to go, in the job's names.
    packed: Vec<PackedEv>,
    /// The names of the job's structure as last sent.
    names: Arc<Names>,
    /// Each rank's names translated into `names`, by the address of the rank's.
    remaps: FastMap<usize, (Arc<Names>, Remap)>,
}

impl Out {
    pub(super) fn new(tx: mpsc::SyncSender<ConnEvent>, waker: Waker) -> Self {
        Self {
            tx,
            waker,
            full: Vec::new(),
            packed: Vec::new(),
            names: Arc::default(),
            remaps: FastMap::default(),
        }
    }

    /// The job's structure changed to `structure` (sent before the events that follow).
    pub(super) fn structure(&mut self, structure: &Event) {
        if let Some(n) = Names::of(structure) {
            self.flush();
            self.names = Arc::new(n);
            self.remaps.clear();
        }
    }

    /// One event, after those pushed before.
    pub(super) fn push(&mut self, it: Item) {
        match it {
            Item::Full(ev) => {
                self.flush_packed();
                self.full.push(ev);
            }
            Item::Packed(names, mut p) => {
                self.flush_full();
                let key = Arc::as_ptr(&names) as usize;
                let to = &self.names;
                let (_, remap) = self
                    .remaps
                    .entry(key)
                    .or_insert_with(|| (names.clone(), Remap::new(&names, to)));
                remap.apply(&mut p);
                self.packed.push(p);
            }
        }
        if self.full.len() + self.packed.len() >= PENDING_MAX {
            self.flush();
        }
    }

    /// Something other than events (the end), after every event pushed.
    pub(super) fn send(&mut self, ce: ConnEvent) {
        self.flush();
        // A consumer that is gone: the commands' channel closes too, ending the merge.
        let _ = self.tx.send(ce);
        (self.waker)();
    }

    /// Send the events pushed so far.
    pub(super) fn flush(&mut self) {
        self.flush_full();
        self.flush_packed();
    }

    fn flush_full(&mut self) {
        if !self.full.is_empty() {
            let _ = self.tx.send(ConnEvent::batch(std::mem::take(&mut self.full)));
            (self.waker)();
        }
    }

    fn flush_packed(&mut self) {
        if !self.packed.is_empty() {
            let ps = std::mem::take(&mut self.packed);
            let _ = self.tx.send(ConnEvent::Packed(self.names.clone(), ps));
            (self.waker)();
        }
    }
}

/// A rank's thread and operation indexes as the job's names number them (-1: a name the
/// job's lack, which cannot happen: they are every rank's united).
pub(super) struct Remap {
    threads: Vec<i64>,
    ops: Vec<i64>,
    /// Every index stays (every rank names every rank's thread alike, and nearly always
    /// the operations too): nothing to do per event.
    identity: bool,
}

impl Remap {
    fn new(from: &Names, to: &Names) -> Self {
        let map = |from: &[String], to: &[String]| -> Vec<i64> {
            let at: FastMap<&str, i64> = (to.iter().enumerate())
                .map(|(i, n)| (n.as_str(), i64::try_from(i).unwrap_or(-1)))
                .collect();
            from.iter()
                .map(|n| at.get(n.as_str()).copied().unwrap_or(-1))
                .collect()
        };
        let (threads, ops) = (map(&from.threads, &to.threads), map(&from.ops, &to.ops));
        let same = |v: &[i64]| {
            v.iter()
                .enumerate()
                .all(|(i, j)| i64::try_from(i).ok() == Some(*j))
        };
        let identity = same(&threads) && same(&ops);
        Self {
            threads,
            ops,
            identity,
        }
    }

    fn apply(&self, p: &mut PackedEv) {
        if self.identity {
            return;
        }
        let map = |v: &[i64], i: i64| {
            usize::try_from(i)
                .ok()
                .and_then(|i| v.get(i))
                .copied()
                .unwrap_or(-1)
        };
        p.thread = map(&self.threads, p.thread);
        p.op = map(&self.ops, p.op);
        if p.kind == Kind::Send {
            p.a = map(&self.ops, p.a);
            p.b = map(&self.threads, p.b);
        }
        if let Some(f) = &mut p.from {
            f.thread = map(&self.threads, f.thread);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use racetrack_protocol::{MsgPath, Record, RecordText, SentBy};

    /// A rank whose operations came in another order than the job's: its events are
    /// named as the job names them, -1 staying -1.
    #[test]
    fn a_ranks_indexes_become_the_jobs() {
        let job = Names::new(
            vec!["MPI_Send".into(), "MPI_Recv".into(), "MPI_Exscan".into()],
            vec!["rank[0]".into(), "rank[1]".into()],
        );
        let rank = Names::new(
            vec!["MPI_Send".into(), "MPI_Exscan".into(), "MPI_Recv".into()],
            vec!["rank[0]".into(), "rank[1]".into()],
        );
        assert!(Remap::new(&job, &job).identity);
        let remap = Remap::new(&rank, &job);
        assert!(!remap.identity);
        let mut send = Record {
            kind: Kind::Send,
            event_id: 1,
            thread: 1,
            op: 1,
            msg: MsgPath::from_slice(&[1, 1]),
            a: -1,
            b: 0,
            traced: false,
            text: RecordText::None,
            from: Some(Box::new(SentBy {
                thread: 1,
                event_id: 0,
            })),
            call: None,
        }
        .to_packed();
        remap.apply(&mut send);
        assert_eq!((send.thread, send.op, send.a, send.b), (1, 2, -1, 0));
        assert_eq!(send.from.map(|f| f.thread), Some(1));
    }
}
