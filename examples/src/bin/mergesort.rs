//! `mergesort`: see [`racetrack_examples::mergesort`].

use racetrack_examples::args::{or_exit, Args};
use racetrack_examples::mergesort::{run, Config, USAGE};

fn main() {
    let a = Args::from_env_or_exit(&[], USAGE);
    or_exit(a.check_known(&["threads", "size", "chunks", "jitter-us"]), USAGE);
    let d = Config::default();
    let cfg = Config {
        threads: or_exit(a.num("threads", d.threads), USAGE).max(1),
        size: or_exit(a.num("size", d.size), USAGE),
        chunks: or_exit(a.num("chunks", d.chunks), USAGE),
        jitter_us: or_exit(a.num("jitter-us", d.jitter_us), USAGE),
    };
    racetrack_examples::main_with(|rt| run(rt, &cfg));
}
