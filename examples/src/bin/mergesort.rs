//! `mergesort`: see [`racetrack_examples::mergesort`].

fn main() {
    racetrack_examples::bin_main("mergesort", racetrack_examples::mergesort::USAGE);
}
