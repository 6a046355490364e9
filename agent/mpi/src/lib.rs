//! Racetrack's MPI interposition library (placeholder while it is built).
