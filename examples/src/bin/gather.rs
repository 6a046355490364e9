//! `gather`: see [`racetrack_examples::gather`].

fn main() {
    racetrack_examples::bin_main("gather", racetrack_examples::gather::USAGE);
}
