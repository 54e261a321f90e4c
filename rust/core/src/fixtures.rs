//! Reproducible rigs, poses and targets for tests, benchmarks and demos, shared by the
//! Rust and Python test suites so both measure the same cases, and the fuzz targets' byte
//! decoding. Built only with the `fixtures` feature (this crate's tests, benchmarks and
//! examples, and `fuzz/`): not part of the public library.

use crate::math::EulerOrder;
use crate::rig::{
    AxisLimit, AxisTension, BoneDesc, JointLimits, Pose, Rig, RigDesc, SideTension, Transform,
};
use glam::{Quat, Vec3};

/// The humanoid with a tail and fingers of `tests/fixtures/humanoid.json` (Z up, facing
/// -Y, 50 bones).
pub const HUMANOID_JSON: &str = include_str!("../../../tests/fixtures/humanoid.json");

/// The humanoid of [`HUMANOID_JSON`].
pub fn humanoid() -> Rig {
    Rig::from_json(HUMANOID_JSON).expect("the humanoid fixture is valid")
}

/// Human-like joint limits for the humanoid's bones (radians, about each bone's own X, Y
/// (twist) and Z axes): a `None` axis is locked. Tension thresholds sit at the range's
/// ends, so the tension's wall is the limit.
type AxisRanges = [Option<(f32, f32)>; 3];

fn human_ranges(name: &str) -> AxisRanges {
    let part = name.split('.').next().unwrap_or(name);
    match part {
        "hips" => [Some((-0.5, 0.5)), Some((-0.6, 0.6)), Some((-0.4, 0.4))],
        "spine" | "chest" => [Some((-0.35, 0.5)), Some((-0.35, 0.35)), Some((-0.3, 0.3))],
        "neck" => [Some((-0.5, 0.6)), Some((-0.6, 0.6)), Some((-0.4, 0.4))],
        "head" => [Some((-0.5, 0.5)), Some((-0.8, 0.8)), Some((-0.4, 0.4))],
        "shoulder" => [Some((-0.2, 0.2)), None, Some((-0.3, 0.3))],
        "upper_arm" => [Some((-1.4, 1.4)), Some((-1.0, 1.0)), Some((-1.2, 1.2))],
        // The elbow hinges one way and twists the forearm.
        "forearm" => [Some((-2.4, 0.0)), Some((-1.2, 1.2)), None],
        "hand" => [Some((-1.0, 1.0)), None, Some((-0.5, 0.5))],
        "thigh" => [Some((-1.4, 0.5)), Some((-0.6, 0.6)), Some((-0.7, 0.4))],
        // The knee hinges one way only.
        "shin" => [Some((0.0, 2.4)), None, None],
        "foot" => [Some((-0.7, 0.6)), None, Some((-0.3, 0.3))],
        "tail" => [Some((-0.6, 0.6)), None, Some((-0.6, 0.6))],
        _ => [Some((-0.3, 1.4)), None, Some((-0.2, 0.2))],
    }
}

/// The humanoid of [`HUMANOID_JSON`] with human-like Euler limits and tension on every
/// joint (knees and elbows hinge one way, shoulders and feet do not twist).
pub fn humanoid_limited() -> Rig {
    let mut desc = humanoid().to_desc();
    for bone in &mut desc.bones {
        let ranges = human_ranges(&bone.name);
        let mut limits = JointLimits {
            order: EulerOrder::XYZ,
            ..JointLimits::FREE
        };
        let axes = [&mut limits.x, &mut limits.y, &mut limits.z];
        for ((limit, range), tension) in axes.into_iter().zip(ranges).zip(limits.tension.iter_mut())
        {
            *limit = match range {
                None => AxisLimit::Locked,
                Some((min, max)) => AxisLimit::Range { min, max },
            };
            if let Some((min, max)) = range {
                // The wall at the limit; a gentle pull back towards rest below it.
                let side = |bound: f32| SideTension {
                    threshold: bound.abs().max(0.05),
                    rigidity: 0.5,
                };
                *tension = AxisTension {
                    negative: side(min),
                    positive: side(max),
                };
            }
        }
        bone.limits = limits;
    }
    desc.build().expect("the limited humanoid is valid")
}

/// A small deterministic generator (SplitMix64): the same seed gives the same numbers on
/// every platform.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator started from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `[low, high)`.
    pub fn range(&mut self, low: f32, high: f32) -> f32 {
        let unit = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        low + (high - low) * unit
    }

    /// A direction spread over the sphere.
    pub fn direction(&mut self) -> Vec3 {
        loop {
            let v = Vec3::new(
                self.range(-1.0, 1.0),
                self.range(-1.0, 1.0),
                self.range(-1.0, 1.0),
            );
            let l = v.length_squared();
            if l > 1e-4 && l <= 1.0 {
                return v / l.sqrt();
            }
        }
    }
}

/// A serial chain of `bones` connected bones named `b0`, `b1`, ... along +Y, each bone
/// 0.5 to 1.5 long and bent 0.05 to 0.25 rad about X (and a little about Z) from its
/// parent: the gently bent rest pose the guide advises.
pub fn bent_chain(bones: usize, seed: u64) -> Rig {
    let mut rng = SplitMix64::new(seed);
    let mut parent_length = 0.0;
    let bones = (0..bones)
        .map(|i| {
            let length = rng.range(0.5, 1.5);
            let bend = Quat::from_rotation_x(rng.range(0.05, 0.25))
                * Quat::from_rotation_z(rng.range(-0.05, 0.05));
            let rest = Transform {
                translation: Vec3::new(0.0, parent_length, 0.0),
                rotation: if i == 0 { Quat::IDENTITY } else { bend },
                scale: Vec3::ONE,
            };
            parent_length = length;
            let parent = (i > 0).then(|| format!("b{}", i - 1));
            BoneDesc::new(format!("b{i}"), parent.as_deref(), rest, length)
        })
        .collect();
    RigDesc { bones }.build().expect("a bent chain is valid")
}

/// A pose with every bone turned by up to `max_angle` about a random axis.
pub fn random_pose(rig: &Rig, rng: &mut SplitMix64, max_angle: f32) -> Pose {
    let mut pose = Pose::rest(rig.len());
    for q in &mut pose.rotations {
        *q = Quat::from_axis_angle(rng.direction(), rng.range(0.0, max_angle));
    }
    pose
}

/// A pose with `bones` turned to random Euler angles inside their limits, each drawn from
/// `fraction` of its range (locked and free axes stay at rest).
pub fn random_pose_within_limits(
    rig: &Rig,
    bones: &[usize],
    rng: &mut SplitMix64,
    fraction: f32,
) -> Pose {
    let mut pose = Pose::rest(rig.len());
    for &bone in bones {
        let limits = rig.limits(bone);
        let mut angles = [0.0f32; 3];
        for (axis, limit) in limits.axes().into_iter().enumerate() {
            if let AxisLimit::Range { min, max } = limit {
                angles[axis] = rng.range(fraction * min, fraction * max);
            }
        }
        pose.rotations[bone] = limits.rotation_of(angles);
    }
    pose
}

/// Reads fuzzer bytes as a case: a rig description of up to 64 bones (any offsets,
/// rotations, scales, lengths and limits), up to four goals (any floats) and a solver
/// with short iteration caps. The fuzz target (`fuzz/`) and the replay of its findings
/// (`tests/robustness.rs`) share it. Missing bytes read as zeros.
pub fn fuzz_case(data: &[u8]) -> (RigDesc, Vec<crate::Goal>, crate::SolverConfig) {
    let mut bytes = FuzzBytes(data);
    let n = 1 + bytes.byte() as usize % 64;
    let bones = (0..n)
        .map(|i| {
            let parent =
                (i > 0 && bytes.byte() % 8 != 0).then(|| format!("b{}", bytes.byte() as usize % i));
            let mut bone = BoneDesc::new(
                format!("b{i}"),
                parent.as_deref(),
                Transform {
                    translation: bytes.vec3(),
                    rotation: Quat::from_xyzw(
                        bytes.float(),
                        bytes.float(),
                        bytes.float(),
                        bytes.float(),
                    ),
                    scale: bytes.vec3(),
                },
                bytes.float(),
            );
            for axis in [&mut bone.limits.x, &mut bone.limits.y, &mut bone.limits.z] {
                *axis = match bytes.byte() % 3 {
                    0 => AxisLimit::Free,
                    1 => AxisLimit::Locked,
                    _ => AxisLimit::Range {
                        min: bytes.float(),
                        max: bytes.float(),
                    },
                };
            }
            bone
        })
        .collect();
    let goals = (0..1 + bytes.byte() % 4)
        .map(|_| {
            let mut goal = crate::Goal::new(bytes.byte() as usize % (n + 1), bytes.vec3())
                .with_chain_length(bytes.byte() as usize % (n + 2));
            if bytes.byte() % 2 == 0 {
                let q = Quat::from_xyzw(bytes.float(), bytes.float(), bytes.float(), bytes.float());
                goal = goal.with_rotation(q, 0.5);
            }
            if bytes.byte() % 3 == 0 {
                goal = goal.with_pole(bytes.vec3());
            }
            goal
        })
        .collect();
    let mut config = crate::SolverConfig::all()[bytes.byte() as usize % 6];
    config.iteration_mut().max_iterations = 30;
    if let crate::SolverConfig::Tension(p) = &mut config {
        p.max_evaluations = 200;
    }
    (RigDesc { bones }, goals, config)
}

struct FuzzBytes<'a>(&'a [u8]);

impl FuzzBytes<'_> {
    fn byte(&mut self) -> u8 {
        let (first, rest) = self.0.split_first().map_or((0, &[][..]), |(f, r)| (*f, r));
        self.0 = rest;
        first
    }
    fn float(&mut self) -> f32 {
        f32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }
    fn vec3(&mut self) -> Vec3 {
        Vec3::new(self.float(), self.float(), self.float())
    }
}

/// Targets the tail of `bone` can reach: its tail in `count` random poses (joints turned
/// up to 0.8 rad).
pub fn reachable_targets(rig: &Rig, bone: usize, count: usize, seed: u64) -> Vec<Vec3> {
    let mut rng = SplitMix64::new(seed);
    let mut world = Vec::new();
    (0..count)
        .map(|_| {
            rig.forward_kinematics(&random_pose(rig, &mut rng, 0.8), &mut world);
            rig.head_tail(&world[bone], bone).1
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_is_reproducible_and_in_range() {
        let (mut a, mut b) = (SplitMix64::new(7), SplitMix64::new(7));
        for _ in 0..1000 {
            let x = a.range(-2.0, 3.0);
            assert_eq!(x.to_bits(), b.range(-2.0, 3.0).to_bits());
            assert!((-2.0..3.0).contains(&x));
        }
        assert!((a.direction().length() - 1.0).abs() < 1e-5);
    }

    #[test]
    fn humanoid_matches_its_armature_space_points() {
        let rig = humanoid();
        let world = rig.world_matrices(&Pose::rest(rig.len()));
        let point = |name: &str| {
            let i = rig.index_of(name).unwrap();
            rig.head_tail(&world[i], i)
        };
        assert!(point("hand.L").1.distance(Vec3::new(0.8, 0.0, 1.42)) < 1e-5);
        assert!(point("toe.R").1.distance(Vec3::new(-0.1, -0.18, 0.0)) < 1e-5);
        assert!(point("tail.4").1.distance(Vec3::new(0.0, 0.58, 0.61)) < 1e-5);
        assert!(point("head").0.distance(Vec3::new(0.0, -0.01, 1.6)) < 1e-5);
        assert_eq!(rig.len(), 50);
    }
}
