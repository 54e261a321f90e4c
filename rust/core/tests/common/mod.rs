//! Helpers shared by the integration tests (rigs and targets come from `fixtures`).
#![allow(dead_code)]

use glam::Vec3;
// Not every test file uses every helper.
#[allow(unused_imports)]
pub use tendon_core::fixtures::{bent_chain, random_pose, SplitMix64};
use tendon_core::{AnySolver, EffectorPoint, Goal, Pose, Rig, SolverConfig};

/// Every solver with its defaults, by name.
pub fn all_solvers() -> Vec<(&'static str, AnySolver)> {
    SolverConfig::all()
        .iter()
        .map(|c| (c.name(), c.build()))
        .collect()
}

pub fn rng(seed: u64) -> SplitMix64 {
    SplitMix64::new(seed)
}

/// The tail of bone `bone` in `pose`.
pub fn tail(rig: &Rig, pose: &Pose, bone: usize) -> Vec3 {
    let world = rig.world_matrices(pose);
    rig.head_tail(&world[bone], bone).1
}

/// Sum of the bone lengths from the root to `bone`.
pub fn chain_length(rig: &Rig, bone: usize) -> f32 {
    let mut total = 0.0;
    let mut b = Some(bone);
    while let Some(i) = b {
        total += rig.length(i);
        b = rig.parent(i);
    }
    total
}

/// Angle between two directions, accurate near zero (unlike an `acos`).
pub fn angle(a: Vec3, b: Vec3) -> f32 {
    a.cross(b).length().atan2(a.dot(b))
}

/// The largest distance from an effector to its target in `pose`, as the caller measures
/// it (head or tail as each goal says).
pub fn measured_residual(rig: &Rig, pose: &Pose, goals: &[Goal]) -> f32 {
    let world = rig.world_matrices(pose);
    goals
        .iter()
        .map(|goal| {
            let (head, tail) = rig.head_tail(&world[goal.bone], goal.bone);
            let point = match goal.point {
                EffectorPoint::Head => head,
                EffectorPoint::Tail => tail,
            };
            point.distance(goal.target)
        })
        .fold(0.0, f32::max)
}
