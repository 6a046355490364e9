//! Scenarios of a job. `save_scenario` asks every running rank for its part, and the
//! parts merge into one scenario, written by the debugger, once all answered. A rank that
//! has finished cannot answer: each rank sends its part as it calls `MPI_Finalize` (a
//! `scenario` event without a path), which is kept here and used for it. So a scenario
//! can be saved after some ranks, or all, are gone: once every rank has, the job's
//! scenario is kept for the connection ([`crate::scenarios::Kept`]).

use racetrack_protocol::replay_log::from_hex;
use racetrack_protocol::Event;
use std::collections::HashMap;

/// The parts the ranks sent as they finished, and those of the scenarios being saved.
#[derive(Default)]
pub(super) struct Parts {
    /// By world rank.
    kept: HashMap<usize, Vec<u8>>,
    /// `save_scenario` requests the running ranks are answering, by request number: the
    /// path, and the parts in so far by world rank.
    saving: HashMap<u64, (String, HashMap<usize, Vec<u8>>)>,
}

/// A rank's answer to `save_scenario` request `n`, as the merge counts it.
pub(super) fn verdict(got: Result<(), String>, n: u64) -> Event {
    match got {
        Ok(()) => Event::Ok {
            cmd: "save_scenario".into(),
            target: None,
            req: Some(n),
        },
        Err(message) => Event::Error {
            message,
            req: Some(n),
        },
    }
}

fn bytes(rank: usize, hex: &str) -> Result<Vec<u8>, String> {
    from_hex(hex).ok_or_else(|| format!("rank {rank} sent a part that is not hex"))
}

impl Parts {
    /// Rank `rank` finishing sent `hex`; `Err` says what was wrong with it.
    pub(super) fn keep(&mut self, rank: usize, hex: &str) -> Result<(), String> {
        self.kept.insert(rank, bytes(rank, hex)?);
        Ok(())
    }

    /// Rank `rank` sent a part: its answer to request `req` (`asked`), or unasked, as it
    /// finished. `Err` says what was wrong with it.
    pub(super) fn received(
        &mut self,
        rank: usize,
        asked: bool,
        hex: &str,
        req: Option<u64>,
    ) -> Result<(), String> {
        match (asked, req) {
            (true, Some(n)) if self.is_saving(n) => self.answered(n, rank, hex),
            (false, _) => self.keep(rank, hex),
            _ => Ok(()),
        }
    }

    /// Request `n` asks the running ranks for their parts of a scenario at `path`.
    pub(super) fn begin(&mut self, n: u64, path: String) {
        self.saving.insert(n, (path, HashMap::new()));
    }

    pub(super) fn is_saving(&self, n: u64) -> bool {
        self.saving.contains_key(&n)
    }

    /// Rank `rank` answered request `n` with its part `hex`.
    pub(super) fn answered(&mut self, n: u64, rank: usize, hex: &str) -> Result<(), String> {
        let part = bytes(rank, hex)?;
        if let Some((_, parts)) = self.saving.get_mut(&n) {
            parts.insert(rank, part);
        }
        Ok(())
    }

    /// Request `n` is answered (by every running rank, or refused: `first_error`): the
    /// verdict, the scenario written. `None`: `n` was not a `save_scenario`.
    pub(super) fn finish(
        &mut self,
        n: u64,
        ranks: usize,
        first_error: Option<Event>,
        req: Option<u64>,
    ) -> Option<Event> {
        let (path, parts) = self.saving.remove(&n)?;
        if let Some(Event::Error { message, .. }) = first_error {
            return Some(Event::Error { message, req });
        }
        Some(self.save(&path, ranks, &parts, req))
    }

    /// The scenario at `path` of a job of `ranks` ranks from the running ranks' `parts`
    /// and the kept parts of the others.
    pub(super) fn save(
        &self,
        path: &str,
        ranks: usize,
        parts: &HashMap<usize, Vec<u8>>,
        req: Option<u64>,
    ) -> Event {
        match self.merged(ranks, parts) {
            Ok((bytes, summary)) => crate::scenarios::write(path, &bytes, &summary, req),
            Err(message) => Event::Error {
                message: format!("save_scenario: {message}"),
                req,
            },
        }
    }

    /// The job's scenario once every rank is gone: all their kept parts, if every rank
    /// left one.
    pub(super) fn at_end(&self, ranks: usize) -> Option<(Vec<u8>, String)> {
        self.merged(ranks, &HashMap::new()).ok()
    }

    /// One scenario from `parts`, and for the ranks not in it their kept parts.
    fn merged(&self, ranks: usize, parts: &HashMap<usize, Vec<u8>>) -> Result<(Vec<u8>, String), String> {
        let mut all = Vec::with_capacity(ranks);
        let mut kept = Vec::new();
        for r in 0..ranks {
            let part = match parts.get(&r) {
                Some(p) => p,
                None => {
                    kept.push(r.to_string());
                    self.kept.get(&r).ok_or_else(|| {
                        format!("rank {r} ended without calling MPI_Finalize under the debugger: its choices are lost")
                    })?
                }
            };
            all.push(part.clone());
        }
        let (bytes, m) = crate::mpirun::merge_bytes(&all, None, true)
            .map_err(|(r, e)| format!("rank {r}'s part is damaged: {e}"))?;
        let kept = match kept.as_slice() {
            [] => String::new(),
            [r] => format!(" (rank {r}'s part as it finished)"),
            list => format!(" (ranks {}: their parts as they finished)", list.join(", ")),
        };
        let summary = format!(
            "{} choices in {} calls of {ranks} ranks, {} clock readings{kept}",
            m.choices, m.calls, m.clocks
        );
        Ok((bytes, summary))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use racetrack_protocol::replay_log::{self as rl, to_hex, Choice, Chose, LogHeader, ReplayLog};

    /// Rank `rank`'s part: one forced match at call 3 of `calls`.
    fn part(rank: usize, source: i32, calls: u64) -> Vec<u8> {
        let header = LogHeader {
            program: "mergesort".into(),
            args: Vec::new(),
            mpi: None,
        };
        let mut bytes = rl::header_bytes(&header);
        let c = Choice {
            call: 3,
            op: 1,
            what: Chose::Match { source, tag: 0 },
        };
        rl::put_calls_record(&mut bytes, rank, 0, &[c]);
        bytes.extend(rl::rank_end_record(rank, calls));
        bytes
    }

    #[test]
    fn finished_ranks_parts_are_used_for_them() {
        let dir = std::env::temp_dir().join(format!("racetrack-parts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.rtrec").display().to_string();
        // Rank 0 runs and answers request 4; rank 1 finished and sent its part.
        let mut parts = Parts::default();
        parts.keep(1, &to_hex(&part(1, 0, 12))).unwrap();
        assert!(parts.keep(2, "zz").is_err(), "not hex");
        parts.begin(4, path.clone());
        assert!(parts.is_saving(4) && !parts.is_saving(5));
        parts.answered(4, 0, &to_hex(&part(0, 2, 30))).unwrap();
        let ev = parts.finish(4, 2, None, Some(4)).unwrap();
        let Event::Ok {
            target: Some(t),
            req: Some(4),
            ..
        } = ev
        else {
            panic!("{ev:?}")
        };
        assert!(t.ends_with("(rank 1's part as it finished)"), "{t}");
        let log = ReplayLog::parse(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(log.ranks[0].choices[0].what, Chose::Match { source: 2, tag: 0 });
        assert_eq!(log.ranks[1].choices[0].what, Chose::Match { source: 0, tag: 0 });
        assert_eq!(parts.finish(4, 2, None, None), None, "answered once");
        // Once every rank finished, the job's scenario is their kept parts.
        assert!(parts.at_end(2).is_none(), "rank 0 left none");
        parts.keep(0, &to_hex(&part(0, 2, 31))).unwrap();
        let (bytes, summary) = parts.at_end(2).unwrap();
        assert!(
            summary.ends_with("(ranks 0, 1: their parts as they finished)"),
            "{summary}"
        );
        assert_eq!(ReplayLog::parse(&bytes).unwrap().ranks[0].calls, Some(31));
        // A rank gone without a part cannot be saved for, and says so.
        let mut parts = Parts::default();
        parts.begin(1, path.clone());
        let ev = parts.finish(1, 2, None, None).unwrap();
        let Event::Error { message, .. } = ev else {
            panic!("{ev:?}")
        };
        assert!(
            message.contains("rank 0 ended without calling MPI_Finalize"),
            "{message}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
