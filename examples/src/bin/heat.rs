//! `heat`: see [`racetrack_examples::heat`].

use racetrack_examples::args::{or_exit, Args};
use racetrack_examples::heat::{run, Config, USAGE};

fn main() {
    let a = Args::from_env_or_exit(&["fixed"], USAGE);
    or_exit(a.check_known(&["threads", "iters", "cells", "jitter-us"]), USAGE);
    let d = Config::default();
    let cfg = Config {
        threads: or_exit(a.num("threads", d.threads), USAGE).max(1),
        iters: or_exit(a.num("iters", d.iters), USAGE),
        cells: or_exit(a.num("cells", d.cells), USAGE),
        fixed: a.flag("fixed"),
        jitter_us: or_exit(a.num("jitter-us", d.jitter_us), USAGE),
    };
    racetrack_examples::main_with(|rt| run(rt, &cfg));
}
