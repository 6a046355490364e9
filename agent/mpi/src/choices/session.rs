//! The end of a rank's run (`MPI_Finalize`, `MPI_Abort`), the debugger taking over a
//! replay, and a session saved as a scenario.

use super::{append, lock, Choice, Chose, Kind, CHOICES};
use racetrack_agent::agent::ReplayError;
use racetrack_protocol::replay_log;

/// `rt_finalize` (also reached from `MPI_Abort`): a recording's last choices and, if the
/// rank reached `MPI_Finalize`, its end; a replay checks that the rank made the recorded
/// run's calls.
pub(crate) fn finalize() {
    let Some(ch) = CHOICES.get() else { return };
    let (aborted, calls) = {
        let mut st = lock(&ch.state);
        if st.finished {
            return;
        }
        st.finished = true;
        let aborted = st.current.as_ref().is_some_and(|c| c.kind == Kind::Abort)
            || !matches!(st.current.as_ref().map(|c| c.kind), None | Some(Kind::Finalize));
        // The MPI_Finalize call was numbered by its rt_start and ended by its rt_stop.
        let calls = st.next;
        let rank = ch.rank;
        if let Some(rp) = st.replay.as_mut().filter(|r| r.active && r.script.strict(0)) {
            if !aborted && calls != rp.calls() {
                let what = format!(
                    "it reached MPI_Finalize after {calls} calls; the recorded rank {rank} after {}",
                    rp.calls()
                );
                ch.diverged(rp, &what);
            }
        }
        (aborted, calls)
    };
    if lock(&ch.state).record.as_ref().is_none_or(|r| r.file.is_none()) {
        return;
    }
    let (flag, cv) = &*ch.done;
    *lock(flag) = true;
    cv.notify_all();
    ch.write(true);
    let st = lock(&ch.state);
    if let Some(rec) = st.record.as_ref().filter(|r| !r.lost && !aborted) {
        let file = rec.file.clone().unwrap_or_default();
        drop(st);
        if let Err(e) = append(&file, &replay_log::rank_end_record(ch.rank, calls)) {
            eprintln!(
                "racetrack: rank {}: cannot write {}: {e}",
                ch.rank,
                file.display()
            );
        }
    }
}

/// Stop forcing (the debugger took over); `None` if this rank is not replaying, else
/// the calls made and the calls recorded.
pub(crate) fn take_over() -> Option<(u64, u64)> {
    let ch = CHOICES.get()?;
    let mut st = lock(&ch.state);
    let next = st.next;
    let rp = st.replay.as_mut()?;
    rp.active = false;
    Some((next, rp.calls()))
}

/// `save_scenario`: this rank's choices so far, up to the first call not over yet (the
/// one held, or a wildcard `MPI_Irecv` not completed), as the bytes of its part of a
/// scenario (which the debugger merges with the other ranks'), and what they hold in
/// words.
pub(crate) fn part() -> Result<(Vec<u8>, String), ReplayError> {
    let ch = CHOICES.get().ok_or(ReplayError::NotRecording)?;
    let of_rank = |error| ReplayError::Rank {
        rank: ch.rank,
        error: Box::new(error),
    };
    let st = lock(&ch.state);
    let rec = st.record.as_ref().ok_or(ReplayError::NotRecording)?;
    if rec.lost {
        return Err(of_rank(ReplayError::RecordingStopped));
    }
    if rec.written_next > 0 {
        return Err(of_rank(ReplayError::RecordedToFile));
    }
    let held = st.current.as_ref().map_or(st.next, |c| c.call);
    let upto = rec.open.first().copied().unwrap_or(u64::MAX).min(held);
    let choices: Vec<Choice> = rec
        .pending
        .values()
        .filter(|c| c.call < upto)
        .cloned()
        .map(|mut c| {
            // A run of misses that goes on past the prefix ends with it.
            if let Chose::Miss { n } = &mut c.what {
                *n = (*n).min(upto - c.call);
            }
            c
        })
        .collect();
    let clocks = rec.clocks.clone();
    drop(st);
    let mut bytes = replay_log::header_bytes(&ch.header);
    replay_log::put_calls_record(&mut bytes, ch.rank, 0, &choices);
    replay_log::put_clocks_record(&mut bytes, ch.rank, 0, &clocks);
    bytes.extend(replay_log::rank_end_record(ch.rank, upto));
    let summary = format!(
        "rank {}: {} choices in {upto} calls, {} clock readings",
        ch.rank,
        choices.len(),
        clocks.len()
    );
    Ok((bytes, summary))
}
