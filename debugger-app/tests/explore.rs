//! `racetrack explore` on programs of Racetrack's runtime: real runs of the examples, each
//! ordering forced by a replay log, each outcome's replay file played again.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn racetrack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_racetrack"))
        .args(args)
        .output()
        .expect("racetrack runs")
}

/// Explore `example ARGS` into `out`; the summary line and the exit code.
fn explore(example: &str, args: &[&str], out: &Path, extra: &[&str]) -> (Value, i32) {
    let bin = support::example_bin(example);
    let out_dir = out.display().to_string();
    let mut all = vec!["explore", "--out", &out_dir, "--max-runs", "2000"];
    all.extend_from_slice(extra);
    all.push("--");
    let bin = bin.display().to_string();
    all.push(&bin);
    all.extend_from_slice(args);
    let o = racetrack(&all);
    // Kept with the replay files: what a failed test leaves behind to read.
    let _ = std::fs::write(out.join("stderr.txt"), &o.stderr);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let line = stdout.lines().last().unwrap_or_else(|| {
        panic!(
            "no summary from explore {example} {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (
        serde_json::from_str(line).expect("a JSON summary"),
        o.status.code().unwrap_or(-1),
    )
}

/// A directory of its own for the test `name`.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("racetrack-explore-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn report_of(outcome: &Value) -> Value {
    let line = outcome["result"]["output"].as_str().expect("an exit with output");
    serde_json::from_str(line).expect("the example's JSON report")
}

fn correct(outcome: &Value) -> bool {
    report_of(outcome)["matches_reference"] == Value::Bool(true)
}

/// The racy variant: every ordering explored, the race among the outcomes, named, and
/// its replay file makes the same wrong result again. The fixed one: one correct outcome.
fn race_found_and_fixed(example: &str, args: &[&str]) {
    let dir = scratch(example);
    let (s, code) = explore(example, args, &dir, &[]);
    assert_eq!(s["complete"], true, "{example} {args:?}: {s}");
    assert_eq!(code, 1, "outcomes differ: exit code 1");
    let outcomes = s["outcomes"].as_array().unwrap();
    assert!(outcomes.iter().any(correct), "a correct outcome: {s}");
    // The natural run may hit the race already: the ordering checked is that of an
    // outcome unlike the natural run's.
    let wrong = outcomes
        .iter()
        .find(|o| !correct(o))
        .unwrap_or_else(|| panic!("{example} {args:?}: the race was not found: {s}"));
    let departs = outcomes[1..]
        .iter()
        .find(|o| correct(o) != correct(&outcomes[0]))
        .expect("an outcome unlike the first");
    let differs = departs["differs"].as_str().expect("the ordering in words");
    assert!(
        differs.contains(" ran ") && differs.contains(" before "),
        "{differs}"
    );
    assert!(departs["ordering"][0]["took"].is_string(), "{departs}");
    let runs = s["runs"].as_u64().unwrap();
    assert!(s["orderings"].as_u64().unwrap() <= runs && runs >= 2, "{s}");

    // Without merging equal states: the race too. (Not
    // always the very same outcomes: a walk covers the branches its runs reveal, and a
    // sender whose message every run made after a step is not tried there; GUIDE §11.)
    let (plain, _) = explore(example, args, &dir.join("plain"), &["--no-merge"]);
    assert_eq!(plain["complete"], true, "{plain}");
    let plain_outcomes = plain["outcomes"].as_array().unwrap();
    assert!(
        plain_outcomes.iter().any(correct) && !plain_outcomes.iter().all(correct),
        "{plain}"
    );
    assert_eq!(plain["merged"], 0);
    assert!(s["delivered"].as_u64().unwrap() > s["delivered_after_forced"].as_u64().unwrap());

    // Each run's replay, held by the stop script at the first departure's step, starts
    // the message the ordering names: this run's, and the first run's instead.
    let first_departure = &departs["stop_at"];
    let stop = departs["stop_script"].as_str().expect("a stop script");
    let runs = [
        (departs["replay"].as_str().unwrap(), &first_departure["took"]),
        (
            outcomes[0]["replay"].as_str().unwrap(),
            &first_departure["instead"],
        ),
    ];
    for (file, message) in runs {
        let mut session = support::Session::replay(Path::new(file), example, args);
        // The first start, held at attach (the script's `continue` releases it).
        support::attached_and_held(&mut session);
        let script = std::fs::read_to_string(stop).unwrap();
        for line in script.lines() {
            session.send(serde_json::from_str(line).unwrap());
        }
        let thread = first_departure["thread"].as_str().unwrap();
        let held = session.expect("the stop", |v| {
            v["event"] == "start" && v["held"] == true && v["thread"] == thread
        });
        // `SendBorder 1.1.0 from proc[1]`: the operation and the message.
        let words: Vec<&str> = message.as_str().unwrap().split(' ').collect();
        assert_eq!(
            (held["op"].as_str(), held["msg"].as_str()),
            (Some(words[0]), Some(words[1])),
            "{file}"
        );
        session.close();
    }

    // The replay file plays the wrong result again.
    let file = wrong["replay"].as_str().expect("a replay file");
    let bin = support::example_bin(example).display().to_string();
    let mut replay = vec!["replay", file, "--", &bin];
    replay.extend_from_slice(args);
    let o = racetrack(&replay);
    let text = String::from_utf8_lossy(&o.stdout);
    let last: Value = serde_json::from_str(text.lines().last().expect("a report")).unwrap();
    assert_eq!(last["matches_reference"], false, "the replay of {file}: {text}");
    assert_eq!(
        last["result"],
        report_of(wrong)["result"],
        "the same wrong result"
    );

    let mut fixed_args = args.to_vec();
    fixed_args.push("--fixed");
    let (s, code) = explore(example, &fixed_args, &dir, &[]);
    assert_eq!(s["complete"], true, "{s}");
    let outcomes = s["outcomes"].as_array().unwrap();
    assert_eq!(outcomes.len(), 1, "the fixed variant has one outcome: {s}");
    assert!(correct(&outcomes[0]));
    assert_eq!(code, 0);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn heat_race_is_found_and_the_fix_proved() {
    race_found_and_fixed(
        "heat",
        &[
            "--threads",
            "2",
            "--iters",
            "1",
            "--cells",
            "8",
            "--local-us",
            "0",
        ],
    );
}

#[test]
fn heat_two_iterations_complete_with_equal_states_merged() {
    let dir = scratch("heat2");
    let args = [
        "--threads",
        "2",
        "--iters",
        "2",
        "--cells",
        "8",
        "--local-us",
        "0",
        "--fixed",
    ];
    let (s, code) = explore("heat", &args, &dir, &[]);
    assert_eq!(s["complete"], true, "{s}");
    assert_eq!(s["outcomes"].as_array().unwrap().len(), 1, "{s}");
    assert_eq!(code, 0);
    // Without merging, 20,000 runs do not get through it.
    assert!(s["merged"].as_u64().unwrap() > 0, "{s}");
    let _ = std::fs::remove_dir_all(dir);
}

/// One merge with five inputs: 5! = 120 orders. Adding up commutes, and the merge shows
/// its accumulator: orders that leave the same sum after the same inputs merge. Keeping
/// the first answer has five outcomes, each found.
#[test]
fn a_merge_that_commutes_is_explored_by_its_states() {
    let dir = scratch("gather");
    let (sum, code) = explore("gather", &["--inputs", "5"], &dir, &[]);
    assert_eq!(sum["complete"], true, "{sum}");
    assert_eq!(sum["outcomes"].as_array().unwrap().len(), 1, "{sum}");
    assert_eq!(code, 0);
    let (plain, _) = explore("gather", &["--inputs", "5"], &dir.join("plain"), &["--no-merge"]);
    assert_eq!(plain["complete"], true, "{plain}");
    assert_eq!(
        plain["orderings"], 120,
        "every order of the merge's inputs: {plain}"
    );
    let runs = sum["runs"].as_u64().unwrap();
    assert!(runs < 120 && sum["merged"].as_u64().unwrap() > 0, "{sum}");

    let (first, code) = explore("gather", &["--inputs", "5", "--first"], &dir.join("first"), &[]);
    assert_eq!(first["complete"], true, "{first}");
    let mut results: Vec<u64> = first["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| report_of(o)["result"].as_u64().unwrap())
        .collect();
    results.sort_unstable();
    assert_eq!(results, [1, 2, 5, 10, 17], "each input's answer first: {first}");
    assert_eq!(code, 1);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn search_race_is_found_and_the_fix_proved() {
    race_found_and_fixed("search", &["--threads", "2"]);
}

#[test]
fn race_free_programs_have_one_outcome() {
    let dir = scratch("race-free");
    for (example, args) in [
        (
            "mergesort",
            &["--threads", "2", "--size", "256", "--chunks", "4"][..],
        ),
        ("farm", &["--threads", "2", "--tasks", "4", "--work-us", "0"][..]),
    ] {
        let (s, code) = explore(example, args, &dir, &["--jobs", "2"]);
        assert_eq!(s["complete"], true, "{example}: {s}");
        assert_eq!(s["outcomes"].as_array().unwrap().len(), 1, "{example}: {s}");
        assert!(
            s["runs"].as_u64().unwrap() >= 2,
            "{example} has orderings to try: {s}"
        );
        assert_eq!(code, 0);
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Depth first and at random (breadth first is the default, which the other tests use),
/// the walk over heat's orderings still finishes, with the race among its outcomes; the
/// summary says the order and the seed.
#[test]
fn every_order_finds_the_heat_race_and_finishes() {
    let args = [
        "--threads",
        "2",
        "--iters",
        "1",
        "--cells",
        "8",
        "--local-us",
        "0",
    ];
    for extra in [&["--order", "depth"][..], &["--order", "random", "--seed", "11"]] {
        let dir = scratch("heat-order");
        let (s, code) = explore("heat", &args, &dir, extra);
        assert_eq!((&s["complete"], code), (&Value::Bool(true), 1), "{extra:?}: {s}");
        assert_eq!(s["order"], extra[1], "{s}");
        let outcomes = s["outcomes"].as_array().unwrap();
        assert!(outcomes.iter().any(|o| !correct(o)), "{extra:?}: the race: {s}");
        assert!(
            outcomes.iter().all(|o| o["first_run"].as_u64().unwrap() >= 1),
            "{s}"
        );
        assert_eq!(
            s["seed"],
            if extra.len() > 2 {
                Value::from(11)
            } else {
                Value::Null
            },
            "{s}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[test]
fn explore_says_what_is_wrong() {
    let o = racetrack(&["explore", "--", "/bin/true"]);
    assert_ne!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no readable trace") && err.contains("runtime"),
        "{err}"
    );

    let o = racetrack(&["explore", "-n", "2", "--", "/bin/true"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("add --mpi"), "{err}");

    let o = racetrack(&["explore", "--seed", "3", "--", "/bin/true"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--seed is for --order random"), "{err}");

    let o = racetrack(&["explore", "--", "/no/such/program"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cannot start /no/such/program"), "{err}");
}
