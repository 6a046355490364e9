//! Outcome comparison and shrinking.

use super::shrink::shrink;
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
