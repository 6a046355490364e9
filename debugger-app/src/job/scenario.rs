//! Scenarios of a job. `save_scenario` asks every running rank to write its part
//! (`PATH.rank<R>`), and the parts merge into `PATH` once all answered. A rank that has
//! finished cannot answer: each rank sends its part as it calls `MPI_Finalize` (a `part`
//! event), which is kept here and written for it, so a scenario can be saved after some
//! ranks, or all but one, are gone.

use racetrack_protocol::replay_log::{from_hex, rank_part_path};
use racetrack_protocol::Event;
use std::collections::HashMap;

/// The parts the ranks sent as they finished, by world rank.
#[derive(Default)]
pub(super) struct Parts {
    kept: HashMap<usize, Vec<u8>>,
}

impl Parts {
    /// Rank `rank` finishing sent `hex`; `Err` says what was wrong with it.
    pub(super) fn keep(&mut self, rank: u32, hex: &str) -> Result<(), String> {
        let bytes = from_hex(hex).ok_or_else(|| format!("rank {rank} sent a part that is not hex"))?;
        self.kept.insert(rank as usize, bytes);
        Ok(())
    }

    /// The scenario at `path` from the job's `ranks` parts: the ranks in `gone` (world
    /// ranks whose connection closed) did not answer, their kept parts are written for
    /// them; the others wrote theirs. `first_error`: a running rank's refusal.
    pub(super) fn merge(
        &self,
        path: &str,
        ranks: usize,
        gone: &[usize],
        first_error: Option<Event>,
        req: Option<u64>,
    ) -> Event {
        if let Some(Event::Error { message, .. }) = first_error {
            return Event::Error { message, req };
        }
        let error = |message: String| Event::Error {
            message: format!("save_scenario: {message}"),
            req,
        };
        for &r in gone {
            let Some(bytes) = self.kept.get(&r) else {
                return error(format!(
                    "rank {r} ended without calling MPI_Finalize under the debugger: its choices are lost"
                ));
            };
            let part = rank_part_path(path, r);
            if let Err(e) = std::fs::write(&part, bytes) {
                return error(format!("cannot write {}: {e}", part.display()));
            }
        }
        match crate::mpirun::merge_parts(path, ranks, None, true) {
            Ok(m) => {
                let kept = match gone {
                    [] => String::new(),
                    [r] => format!(" (rank {r}'s part as it finished)"),
                    _ => {
                        let list: Vec<String> = gone.iter().map(ToString::to_string).collect();
                        format!(" (ranks {}: their parts as they finished)", list.join(", "))
                    }
                };
                Event::Ok {
                    cmd: "save_scenario".into(),
                    target: Some(format!(
                        "scenario {path}: {} choices in {} calls of {ranks} ranks, {} clock readings{kept}",
                        m.choices, m.calls, m.clocks
                    )),
                    req,
                }
            }
            Err(e) => error(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use racetrack_protocol::replay_log::{self as rl, Choice, Chose, LogHeader, ReplayLog};

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
    fn finished_ranks_parts_are_written_for_them() {
        let dir = std::env::temp_dir().join(format!("racetrack-parts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.rtrec").display().to_string();
        // Rank 0 runs and wrote its own part; rank 1 finished and sent its part.
        std::fs::write(rl::rank_part_path(&path, 0), part(0, 2, 30)).unwrap();
        let mut parts = Parts::default();
        parts.keep(1, &rl::to_hex(&part(1, 0, 12))).unwrap();
        assert!(parts.keep(2, "zz").is_err(), "not hex");
        let ev = parts.merge(&path, 2, &[1], None, Some(4));
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
        assert_eq!(log.ranks[1].choices[0].what, Chose::Match { source: 0, tag: 0 });
        // A rank gone without a part cannot be saved for, and says so.
        std::fs::write(rl::rank_part_path(&path, 0), part(0, 2, 30)).unwrap();
        let ev = Parts::default().merge(&path, 2, &[1], None, None);
        let Event::Error { message, .. } = ev else {
            panic!("{ev:?}")
        };
        assert!(
            message.contains("rank 1 ended without calling MPI_Finalize"),
            "{message}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
