//! `farm`: see [`racetrack_examples::farm`].

fn main() {
    racetrack_examples::bin_main("farm", racetrack_examples::farm::USAGE);
}
