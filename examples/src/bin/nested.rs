//! `nested`: see [`racetrack_examples::nested`].

fn main() {
    racetrack_examples::bin_main("nested", racetrack_examples::nested::USAGE);
}
