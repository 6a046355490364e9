//! The command line as a user meets it: help for every subcommand (exit 0), a misspelt
//! flag named with the closest valid one, the version, completions, and the mistakes a
//! user makes most (no program, a bad rank count).

use std::process::{Command, Output};

fn racetrack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_racetrack"))
        .args(args)
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .expect("racetrack runs")
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

/// The subcommands `racetrack --help` lists (clap's `Commands:` section).
fn subcommands() -> Vec<String> {
    let out = racetrack(&["--help"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let help = text(&out.stdout);
    let section = help
        .split("Commands:")
        .nth(1)
        .unwrap_or_else(|| panic!("no Commands: section in\n{help}"));
    section
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_subcommand_has_help_that_exits_0() {
    let subs = subcommands();
    for expected in [
        "demo",
        "run",
        "mpirun",
        "listen",
        "attach",
        "ctl",
        "record",
        "replay",
        "open",
        "export",
        "example",
        "completions",
        "help",
    ] {
        assert!(
            subs.iter().any(|s| s == expected),
            "`{expected}` missing from {subs:?}"
        );
    }
    for sub in subs.iter().filter(|s| *s != "help") {
        for argv in [vec![sub.as_str(), "--help"], vec!["help", sub.as_str()]] {
            let out = racetrack(&argv);
            let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
            assert_eq!(out.status.code(), Some(0), "{argv:?}: {stderr}");
            assert!(
                stdout.contains(&format!("Usage: racetrack {sub}")),
                "{argv:?} printed:\n{stdout}"
            );
            assert!(stderr.is_empty(), "{argv:?} wrote to stderr: {stderr}");
        }
    }
}

#[test]
fn help_is_as_informative_as_the_usage_was() {
    let out = racetrack(&["mpirun", "--help"]);
    let help = text(&out.stdout);
    for words in [
        "-n <N>",
        "--impl <IMPL>",
        "mpich",
        "openmpi",
        "--record <LOG>",
        "--ctl",
        "--script <FILE>",
        "--set <NAME=VALUE>",
        "MPI_Init",
        "PROGRAM [ARGS]",
    ] {
        assert!(help.contains(words), "`{words}` not in mpirun --help:\n{help}");
    }
    let out = racetrack(&["demo", "--help"]);
    let help = text(&out.stdout);
    for words in [
        "heat",
        "mergesort",
        "farm",
        "search",
        "--threads <N>",
        "--fixed",
        "--script <FILE>",
    ] {
        assert!(help.contains(words), "`{words}` not in demo --help:\n{help}");
    }
}

#[test]
fn a_misspelt_flag_is_named_with_the_closest_valid_one() {
    let out = racetrack(&["run", "--scirpt", "s.jsonl", "--", "prog"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("'--scirpt'"), "{err}");
    assert!(err.contains("similar argument exists: '--script'"), "{err}");
    let out = racetrack(&["mpirun", "--imp", "mpich", "-n", "2", "--", "prog"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("'--impl'"), "{err}");
    // A misspelt subcommand too.
    let out = racetrack(&["mpiurn", "-n", "2"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("similar subcommand exists: 'mpirun'"), "{err}");
}

#[test]
fn common_mistakes_get_a_clear_error() {
    // No program.
    let out = racetrack(&["mpirun", "-n", "4"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("PROGRAM [ARGS]"), "{err}");
    // Not a number of ranks; `-np` is read as `-n`.
    let out = racetrack(&["mpirun", "-np", "four", "--", "prog"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("'four'") && err.contains("-n <N>"), "{err}");
    let out = racetrack(&["mpirun", "-n", "0", "--", "prog"]);
    assert_eq!(out.status.code(), Some(2));
    // --record runs free: no controller.
    let out = racetrack(&["mpirun", "--record", "x.rtrec", "--ctl", "-n", "2", "--", "prog"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot be used with"), "{err}");
    // A scenario variable without a scenario.
    let out = racetrack(&["run", "--set", "A=1", "--", "prog"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    // The program without `--`, as `mpiexec -n 4 ./prog` is typed.
    let out = racetrack(&["mpirun", "-n", "4", "./prog"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("tip: the program and its arguments go after `--`"),
        "{err}"
    );
    // An option the example does not take, refused before anything starts.
    let out = racetrack(&["demo", "heat", "--tasks", "3"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("heat: unknown option `--tasks`") && err.contains("usage: heat"),
        "{err}"
    );
    // Not an example.
    let out = racetrack(&["demo", "heet"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("'heat'"), "{err}");
    // A program that is not there: the library's error, as `racetrack: …`.
    let out = racetrack(&["record", "-o", "/tmp/never.rtrec", "--", "/nonexistent/prog"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("racetrack: cannot start /nonexistent/prog"),
        "{err}"
    );
}

#[test]
fn version_names_the_protocol() {
    let out = racetrack(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    let v = text(&out.stdout);
    assert_eq!(
        v.trim(),
        format!(
            "racetrack {} (protocol {})",
            env!("CARGO_PKG_VERSION"),
            racetrack_protocol::PROTOCOL_VERSION
        )
    );
}

#[test]
fn completions_for_bash_zsh_and_fish() {
    let shells = [
        ("bash", "complete -F", "--impl"),
        ("zsh", "#compdef racetrack", "--impl"),
        ("fish", "complete -c racetrack", "-l impl"),
    ];
    for (shell, marker, flag) in shells {
        let out = racetrack(&["completions", shell]);
        let script = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", text(&out.stderr));
        assert!(script.contains(marker), "{shell}: no `{marker}` in\n{script}");
        assert!(
            script.contains("mpirun") && script.contains(flag),
            "{shell}: no `{flag}`"
        );
    }
    let out = racetrack(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
}
