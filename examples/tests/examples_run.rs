//! Runs the example binaries as real processes with 1, 2, 4 and 8 worker threads and
//! checks the final JSON line.

use std::process::Command;

fn last_line(bin: &str, args: &[&str]) -> serde_json::Value {
    let out = Command::new(bin).args(args).output().expect("example runs");
    assert!(
        out.status.success(),
        "{bin} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let line = stdout.lines().last().expect("a final line");
    serde_json::from_str(line).unwrap_or_else(|e| panic!("last line is not JSON ({e}): {line}"))
}

fn check_all_thread_counts(bin: &str, extra: &[&str]) {
    for threads in ["1", "2", "4", "8"] {
        let mut args = vec!["--threads", threads];
        args.extend_from_slice(extra);
        let v = last_line(bin, &args);
        assert_eq!(v["matches_reference"], true, "{bin} {args:?}: {v}");
        assert_eq!(v["threads"], threads.parse::<u64>().expect("number"), "{v}");
        assert_eq!(v["result"], v["reference"], "{v}");
    }
}

#[test]
fn farm_matches_reference_on_1_2_4_8_threads() {
    check_all_thread_counts(env!("CARGO_BIN_EXE_farm"), &["--tasks", "2000", "--work-us", "5"]);
}

#[test]
fn mergesort_matches_reference_on_1_2_4_8_threads() {
    check_all_thread_counts(env!("CARGO_BIN_EXE_mergesort"), &["--size", "50000"]);
}

#[test]
fn heat_fixed_matches_reference_on_1_2_4_8_threads() {
    check_all_thread_counts(
        env!("CARGO_BIN_EXE_heat"),
        &["--fixed", "--iters", "20", "--jitter-us", "50"],
    );
}

#[test]
fn bad_arguments_get_a_clear_error_and_exit_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_heat"))
        .args(["--threads", "many"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--threads many") && err.contains("usage"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_farm"))
        .args(["--bogus", "1"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown option `--bogus`"));
}
