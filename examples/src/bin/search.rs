//! `search`: see [`racetrack_examples::search`].

fn main() {
    racetrack_examples::bin_main("search", racetrack_examples::search::USAGE);
}
