//! Outcome comparison and shrinking.

use super::shrink::shrink;
use super::summary::without_timing;
use super::*;

#[test]
fn results_are_compared_without_their_timing() {
    let a = without_timing(r#"{"program":"mergesort","matches_reference":true,"elapsed_ms":3.2}"#);
    let b = without_timing(r#"{"program":"mergesort","matches_reference":true,"elapsed_ms":9.7}"#);
    assert_eq!(a, b);
    assert!(a.contains("matches_reference"));
    assert_eq!(without_timing("  sorted 4000 numbers "), "sorted 4000 numbers");
    let lines = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert!(Outcome::exit(Some(1), &lines(&["x"])).failed());
    assert!(!Outcome::exit(Some(0), &lines(&["x"])).failed());
    // The ranks' lines in another order: the same outcome, and the last line shown.
    let a = Outcome::exit(Some(0), &lines(&["rank 1 done", "rank 2 done"]));
    let b = Outcome::exit(Some(0), &lines(&["rank 2 done", "rank 1 done"]));
    assert_eq!(a, b);
    assert_ne!(a, Outcome::exit(Some(0), &lines(&["rank 1 done"])));
}

fn departure(rank: u32, source: i32) -> Departure {
    Departure {
        key: (format!("rank[{rank}]"), 0),
        source,
        natural: 0,
        site: None,
        took: None,
        hit: None,
        prefix: Schedule::new(),
    }
}

#[test]
fn shrinking_keeps_only_the_departures_that_matter() {
    // An outcome reached whenever rank 2's receive departs, whatever the others do.
    let all = vec![departure(1, 3), departure(2, 3), departure(3, 1)];
    let mut tried = 0;
    let kept = shrink(all.clone(), |trial| {
        tried += 1;
        Some(trial.iter().any(|d| d.key.0 == "rank[2]"))
    });
    assert_eq!(kept, vec![departure(2, 3)]);
    assert_eq!(tried, 3, "one run per departure left out");
    // Two departures needed together: neither goes.
    let kept = shrink(all.clone(), |trial| {
        Some(trial.iter().filter(|d| d.key.0 != "rank[3]").count() == 2)
    });
    assert_eq!(kept, vec![departure(1, 3), departure(2, 3)]);
    // The budget spent at once: nothing shrinks.
    assert_eq!(shrink(all.clone(), |_| None), all);
}

/// Two threads that each take one message from one of two senders, independently: the
/// outcome is the pair of senders.
struct TwoRaces;

impl Runner for TwoRaces {
    fn run(&self, forced: &Schedule, _file: &Path) -> anyhow::Result<Run> {
        let pick = |thread: &str, natural: i32, other: i32| {
            let key = (thread.to_owned(), 0);
            Pick {
                source: forced.get(&key).copied().unwrap_or(natural),
                forced: forced.contains_key(&key),
                key,
                candidates: vec![natural, other],
                site: None,
                refused: None,
                after: Vec::new(),
                known: true,
                label: Some(format!("a message from {natural} or {other}")),
                needs: vec![BTreeMap::new(), BTreeMap::new()],
                starts: 0,
                clock: BTreeMap::new(),
            }
        };
        let picks = vec![pick("a", 1, 2), pick("b", 3, 4)];
        Ok(fake_run(picks))
    }

    fn linear(&self) -> bool {
        true
    }

    fn shrinks(&self) -> bool {
        false
    }
}

#[test]
fn independent_races_are_explored_in_every_combination() {
    let (s, seen) = walk(&TwoRaces, "two", Order::Depth);
    // Keeping only the picks made before a branch leaves the other race free in it: the
    // fourth combination, both departing, is reached too.
    assert_eq!(seen, ["1 3", "1 4", "2 3", "2 4"]);
    assert!(s.complete, "{:?}", s.stopped);
    assert_eq!(s.runs, 4, "one run per combination");
}

/// Thread `t`'s first step takes sender 1's message, or sender 2's, which comes in time
/// only when thread `u`'s first step took sender 4's instead of 3's. In the first run,
/// `t` goes first and sender 2 is not a candidate: only the run that departed at `u`,
/// where `t` was forced as it went, shows the race.
struct LateRace;

impl Runner for LateRace {
    fn run(&self, forced: &Schedule, _file: &Path) -> anyhow::Result<Run> {
        let key = |t: &str| (t.to_owned(), 0);
        let u = forced.get(&key("u")).copied().unwrap_or(3);
        let t = forced.get(&key("t")).copied().unwrap_or(1);
        let pick = |thread: &str, source: i32, candidates: Vec<i32>| Pick {
            forced: forced.contains_key(&key(thread)),
            key: key(thread),
            source,
            needs: vec![BTreeMap::new(); candidates.len()],
            candidates,
            site: None,
            refused: None,
            after: Vec::new(),
            known: true,
            label: Some(format!("{thread}'s message")),
            starts: 0,
            clock: BTreeMap::from([(thread.to_owned(), 1)]),
        };
        let t_candidates = if u == 4 { vec![1, 2] } else { vec![1] };
        let picks = vec![pick("t", t, t_candidates), pick("u", u, vec![3, 4])];
        Ok(fake_run(picks))
    }

    fn linear(&self) -> bool {
        true
    }

    fn shrinks(&self) -> bool {
        false
    }
}

#[test]
fn a_race_a_departure_reveals_is_reversed_at_the_forced_step() {
    let (s, seen) = walk(&LateRace, "late", Order::Depth);
    assert_eq!(seen, ["1 3", "1 4", "2 4"], "the forced step offered sender 2");
    assert_eq!(s.reversals, 1);
    assert!(s.complete);
}

#[test]
fn every_order_finishes_with_the_same_outcomes() {
    for order in [Order::Breadth, Order::Random(1), Order::Random(2)] {
        let (s, seen) = walk(&TwoRaces, "two-order", order);
        assert_eq!(seen, ["1 3", "1 4", "2 3", "2 4"], "{order:?}");
        assert!(s.complete, "{order:?}");
        let (s, seen) = walk(&LateRace, "late-order", order);
        assert_eq!(seen, ["1 3", "1 4", "2 4"], "{order:?}");
        assert!(s.complete, "{order:?}");
    }
}

/// Walk `runner`'s runs; the summary and each outcome's line, sorted.
fn walk(runner: &impl Runner, name: &str, order: Order) -> (Summary, Vec<String>) {
    let out = std::env::temp_dir().join(format!("racetrack-explore-{name}-{}", std::process::id()));
    let opts = Options {
        max_runs: 100,
        budget: Duration::from_secs(60),
        run_limit: Duration::from_secs(1),
        out: out.clone(),
        jobs: 1,
        merge: true,
        order,
    };
    let s = explore(runner, &opts, |_| {}).expect("the walk runs");
    let _ = std::fs::remove_dir_all(out);
    let mut seen: Vec<String> = s
        .outcomes
        .iter()
        .map(|f| match &f.outcome {
            Outcome::Exit(_, line, _) => line.clone(),
            other => other.words(),
        })
        .collect();
    seen.sort();
    (s, seen)
}

/// A run of the fake programs: two picks, their senders as the outcome.
fn fake_run(picks: Vec<Pick>) -> Run {
    let line = format!("{} {}", picks[0].source, picks[1].source);
    Run {
        outcome: Outcome::exit(Some(0), &[line]),
        picks,
        delivered: 2,
        fresh: Some(2),
        unexplored: 0,
        dropped: false,
        saved: false,
        ordering: None,
        states: None,
    }
}
