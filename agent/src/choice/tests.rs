use super::*;
use racetrack_protocol::replay_log::{Choice, Chose, LogEnd, LogThread, RankLog, ReplayLog, Run};

/// A step start with nothing else pending.
fn msg(step: u64) -> Point<'static> {
    Point::Message {
        step,
        next: 0,
        pending: &(),
    }
}

fn run(sender: u64, count: u64) -> Run {
    Run { sender, count }
}

/// Two threads: thread 0 took 2 steps from the input then 1 from thread 1; thread 1 took
/// 3 from thread 0.
fn runtime_log(complete: bool) -> ReplayLog {
    let thread = |name: &str, steps| LogThread {
        name: name.into(),
        steps,
    };
    ReplayLog {
        threads: vec![vec![run(0, 2), run(2, 1)], vec![run(1, 3)]],
        end: Some(LogEnd {
            threads: vec![thread("main[0]", 3), thread("proc[0]", 3), thread("proc[1]", 0)],
            ops: Vec::new(),
            prefix: !complete,
        }),
        ..ReplayLog::default()
    }
}

#[test]
fn a_thread_takes_each_run_s_sender_for_the_run_s_steps() {
    let s = Script::of_threads(&runtime_log(true));
    let picks: Vec<Pick> = (0..3).map(|step| s.choose(0, msg(step))).collect();
    assert_eq!(picks, [Pick::Sender(0), Pick::Sender(0), Pick::Sender(2)]);
    assert_eq!(s.choose(1, msg(2)), Pick::Sender(1));
    // Asked again at an earlier step (the debugger put a started message back).
    assert_eq!(s.choose(0, msg(1)), Pick::Sender(0));
    assert_eq!((s.covers(0), s.covers(1), s.covers(2)), (3, 3, 0));
}

#[test]
fn past_the_log_a_complete_run_diverges_and_a_prefix_runs_free() {
    let complete = Script::of_threads(&runtime_log(true));
    assert_eq!(complete.choose(0, msg(3)), Pick::Overrun);
    // A thread of the recorded run that took no step: any step is one too many.
    assert!(complete.has_line(2));
    assert_eq!(complete.choose(2, msg(0)), Pick::Overrun);
    // A thread the recorded run did not have.
    assert!(!complete.has_line(3));
    let prefix = Script::of_threads(&runtime_log(false));
    assert_eq!(prefix.choose(0, msg(3)), Pick::Done);
    assert_eq!(prefix.choose(1, msg(9)), Pick::Done);
}

/// Rank 1 of a job: call 2 a wildcard receive that matched rank 3 with tag 7, calls 4–6
/// polls that missed (call 7 is one that found), call 9 a `Waitsome` that completed
/// requests 2 and 0; 12 calls up to `MPI_Finalize`; two clock readings.
fn mpi_log(finished: bool) -> ReplayLog {
    let choice = |call, op, what| Choice { call, op, what };
    let rank = RankLog {
        choices: vec![
            choice(2, 5, Chose::Match { source: 3, tag: 7 }),
            choice(4, 9, Chose::Miss { n: 3 }),
            choice(9, 11, Chose::Indices(vec![2, 0])),
        ],
        calls: finished.then_some(12),
        clocks: vec![1.5f64.to_bits(), 2.5f64.to_bits()],
    };
    ReplayLog {
        end: Some(LogEnd::default()),
        ranks: vec![RankLog::default(), rank],
        ..ReplayLog::default()
    }
}

#[test]
fn a_rank_s_calls_get_what_the_log_recorded_for_them() {
    let s = Script::of_rank(&mpi_log(true), 1);
    let call = |call, op, poll| s.choose(0, Point::Call { call, op, poll });
    assert_eq!(call(0, 1, false), Pick::AsItComes);
    assert_eq!(call(2, 5, false), Pick::Match { source: 3, tag: 7 });
    for c in 4..7 {
        assert_eq!(call(c, 9, true), Pick::Miss, "call {c}");
    }
    assert_eq!(
        call(7, 9, true),
        Pick::Found,
        "a poll the log does not name found"
    );
    assert_eq!(call(9, 11, false), Pick::Requests(&[2, 0]));
    assert_eq!(call(2, 6, false), Pick::Mismatch { expected: 5 });
    assert_eq!(call(11, 1, false), Pick::AsItComes);
    assert_eq!(
        call(12, 1, false),
        Pick::Overrun,
        "past MPI_Finalize's call count"
    );
    let clock = |n| s.choose(0, Point::Clock { n });
    assert_eq!(clock(1), Pick::Reading(2.5f64.to_bits()));
    assert_eq!(
        clock(2),
        Pick::AsItComes,
        "past the recorded readings: the real one"
    );
}

#[test]
fn a_rank_that_did_not_finish_runs_free_after_its_last_choice() {
    let s = Script::of_rank(&mpi_log(false), 1);
    // The log covers up to its last choice, the Waitsome at call 9.
    assert_eq!(s.covers(0), 10);
    assert!(!s.strict(0));
    assert_eq!(
        s.choose(
            0,
            Point::Call {
                call: 9,
                op: 11,
                poll: false
            }
        ),
        Pick::Requests(&[2, 0])
    );
    assert_eq!(
        s.choose(
            0,
            Point::Call {
                call: 10,
                op: 1,
                poll: false
            }
        ),
        Pick::Done
    );
    // A rank the log has nothing for.
    let other = Script::of_rank(&mpi_log(true), 5);
    assert_eq!(
        other.choose(
            0,
            Point::Call {
                call: 0,
                op: 1,
                poll: true
            }
        ),
        Pick::Done
    );
}

#[test]
fn live_control_wins_over_the_log() {
    let s = Script::of_rank(&mpi_log(true), 1);
    let logged = s.choose(
        0,
        Point::Call {
            call: 2,
            op: 5,
            poll: false,
        },
    );
    let live = Pick::Match { source: 1, tag: 7 };
    assert_eq!(first([live, logged]), live);
    assert_eq!(first([Pick::AsItComes, logged]), logged);
    assert_eq!(first([Pick::AsItComes, Pick::AsItComes]), Pick::AsItComes);
}
