//! The fewest departures from the natural order that still reach an outcome.

use super::{Departure, Note, Options, Outcome, Runner, Schedule, Summary};
use std::path::PathBuf;
use std::time::Instant;

/// Shrink the departures that reach each outcome but the natural run's, within the time
/// budget: the runs it makes are counted apart (`shrink_runs`).
pub(super) fn shrink_all(
    runner: &impl Runner,
    opts: &Options,
    s: &mut Summary,
    t0: Instant,
    say: &mut impl FnMut(Note),
) {
    for i in 1..s.outcomes.len() {
        if s.outcomes[i].minimal.len() < 2 || matches!(s.outcomes[i].outcome, Outcome::Timeout(_)) {
            continue;
        }
        let target = s.outcomes[i].outcome.clone();
        let mut smallest: Option<PathBuf> = None;
        let mut runs = 0;
        let all = s.outcomes[i].minimal.clone();
        let kept = shrink(all.clone(), |trial| {
            if t0.elapsed() >= opts.budget {
                return None;
            }
            let schedule: Schedule = trial
                .iter()
                .flat_map(|d| d.prefix.iter().chain([(&d.key, &d.source)]))
                .map(|(k, &v)| (k.clone(), v))
                .collect();
            // A departure the others need (a runtime message's sender took it) cannot be
            // left out.
            if all
                .iter()
                .any(|d| !trial.contains(d) && schedule.get(&d.key) == Some(&d.source))
            {
                return Some(false);
            }
            runs += 1;
            let file = opts.out.join(format!("shrink-{}-{runs}.rtrec", i + 1));
            let r = runner.run(&schedule, &file).ok()?;
            let reached = r.outcome == target;
            say(Note::Run(&format!(
                "shrinking outcome {}: {} departures -> {}",
                i + 1,
                trial.len(),
                if reached {
                    "same outcome"
                } else {
                    "another outcome"
                }
            )));
            // The latest run that reached it is the ordering kept so far: its scenario, or
            // none when it could not be saved (an older one would replay another ordering).
            if reached {
                if let Some(old) = smallest.take() {
                    let _ = std::fs::remove_file(old);
                }
                smallest = r.saved.then_some(file);
            } else {
                let _ = std::fs::remove_file(&file);
            }
            Some(reached)
        });
        s.shrink_runs += runs;
        let f = &mut s.outcomes[i];
        if kept.len() < f.minimal.len() {
            f.minimal = kept;
            f.minimal_replay = smallest;
        } else if let Some(unused) = smallest {
            let _ = std::fs::remove_file(unused);
        }
    }
}

/// The fewest departures found that still reach an outcome: each in turn is left out
/// (its receive left to MPI), and stays out when `reaches` says the rest still reach it
/// (`None`: stop, the budget is spent). One run per departure, so a local minimum: no
/// single departure left can go.
pub(super) fn shrink(
    mut kept: Vec<Departure>,
    mut reaches: impl FnMut(&[Departure]) -> Option<bool>,
) -> Vec<Departure> {
    let mut i = 0;
    while i < kept.len() && kept.len() > 1 {
        let trial: Vec<Departure> = kept
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .map(|(_, d)| d.clone())
            .collect();
        match reaches(&trial) {
            Some(true) => kept = trial,
            Some(false) => i += 1,
            None => break,
        }
    }
    kept
}
