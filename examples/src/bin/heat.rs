//! `heat`: see [`racetrack_examples::heat`].

fn main() {
    racetrack_examples::bin_main("heat", racetrack_examples::heat::USAGE);
}
