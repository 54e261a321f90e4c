//! Rigs and targets shared by the integration tests, the benchmarks and the demo.
#![allow(dead_code)]

use glam::{Quat, Vec3};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tendon_core::{BoneDesc, Pose, Rig, RigDesc, Transform};

pub fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// A serial chain of `n` connected bones with a gently bent rest pose (each joint bent a
/// little about its X axis, with a small random sideways component) and varied lengths.
pub fn bent_chain(n: usize, seed: u64) -> Rig {
    let mut r = rng(seed);
    let mut bones = Vec::with_capacity(n);
    let mut parent_len = 0.0;
    for i in 0..n {
        let length = r.gen_range(0.5..1.5);
        let bend = Quat::from_rotation_x(r.gen_range(0.05..0.25))
            * Quat::from_rotation_z(r.gen_range(-0.05..0.05));
        let rest = Transform {
            translation: Vec3::new(0.0, parent_len, 0.0),
            rotation: if i == 0 { Quat::IDENTITY } else { bend },
            scale: Vec3::ONE,
        };
        let name = format!("b{i}");
        let parent = (i > 0).then(|| format!("b{}", i - 1));
        bones.push(BoneDesc::new(name, parent.as_deref(), rest, length));
        parent_len = length;
    }
    RigDesc { bones }.build().unwrap()
}

/// A random pose with every joint turned up to `max_angle` about a random axis.
pub fn random_pose(rig: &Rig, r: &mut impl Rng, max_angle: f32) -> Pose {
    let mut pose = Pose::rest(rig.len());
    for q in &mut pose.rotations {
        let axis = Vec3::new(
            r.gen_range(-1.0..1.0),
            r.gen_range(-1.0..1.0),
            r.gen_range(-1.0..1.0),
        );
        *q = Quat::from_axis_angle(axis.normalize_or(Vec3::X), r.gen_range(0.0..max_angle));
    }
    pose
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
