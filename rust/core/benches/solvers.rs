//! Solve time per solver and chain length, cold (from the rest pose) and warm (from the
//! previous frame's solution while the target moves a little, as when baking).
//! Tolerance 1e-4 of the chain length, as the performance targets state.
//!
//! `scripts/bench` runs this and writes the table into the README.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use glam::{Quat, Vec3};
use std::time::Duration;
use tendon_core::fixtures::{bent_chain, reachable_targets};
use tendon_core::*;

const TARGETS: usize = 32;

/// A target moving a little each frame, with each frame's start pose the previous solution.
fn warm_frames(rig: &Rig, solver: &mut AnySolver) -> Vec<(Pose, Vec3)> {
    let end = rig.len() - 1;
    let world = rig.world_matrices(&Pose::rest(rig.len()));
    let tip = rig.head_tail(&world[end], end).1;
    let radius = 0.05 * tip.length();
    let mut frames = Vec::with_capacity(TARGETS);
    let mut pose = Pose::rest(rig.len());
    for f in 0..=TARGETS {
        let angle = f as f32 * 0.2;
        let target = tip * 0.9 + Vec3::new(angle.cos(), 0.0, angle.sin()) * radius;
        if f > 0 {
            frames.push((pose.clone(), target));
        }
        pose = solver
            .solve(rig, &pose, &[Goal::new(end, target)])
            .unwrap()
            .0;
    }
    frames
}

fn chains(c: &mut Criterion) {
    let lengths: Vec<usize> = match std::env::var("TENDON_BENCH_LENGTHS") {
        Ok(list) => list
            .split(',')
            .filter_map(|s| s.trim().parse().ok())
            .collect(),
        Err(_) => vec![2, 4, 8, 16, 32, 64, 128, 256],
    };
    // Every iterative solver with its defaults, to the tolerance of the performance targets.
    for config in SolverConfig::all()
        .into_iter()
        .filter(|c| c.name() != "two_bone")
    {
        let (name, config) = (config.name(), config.with_tolerance(1e-4));
        let mut group = c.benchmark_group(name);
        // The simplex grows with the degrees of freedom: long free chains are not its use.
        let longest = if name == "tension" { 16 } else { usize::MAX };
        for &n in lengths.iter().filter(|&&n| n <= longest) {
            let rig = bent_chain(n, n as u64);
            let end = n - 1;
            let mut solver = config.build();
            let mut out = Pose::rest(n);
            let rest = Pose::rest(n);
            let targets = reachable_targets(&rig, end, TARGETS, 1000 + n as u64);
            let mut k = 0;
            group.bench_with_input(BenchmarkId::new("cold", n), &n, |b, _| {
                b.iter(|| {
                    k = (k + 1) % TARGETS;
                    let goal = [Goal::new(end, targets[k])];
                    black_box(solver.solve_into(&rig, &rest, &goal, &mut out).unwrap())
                })
            });
            let frames = warm_frames(&rig, &mut solver);
            group.bench_with_input(BenchmarkId::new("warm", n), &n, |b, _| {
                b.iter(|| {
                    k = (k + 1) % TARGETS;
                    let (start, target) = &frames[k];
                    black_box(
                        solver
                            .solve_into(&rig, start, &[Goal::new(end, *target)], &mut out)
                            .unwrap(),
                    )
                })
            });
        }
        group.finish();
    }
}

fn two_bone(c: &mut Criterion) {
    let rig = bent_chain(2, 2);
    let targets = reachable_targets(&rig, 1, TARGETS, 7);
    let mut solver = TwoBone::default();
    let rest = Pose::rest(2);
    let mut out = Pose::rest(2);
    let mut k = 0;
    let mut group = c.benchmark_group("two_bone");
    group.bench_function(BenchmarkId::new("cold", 2), |b| {
        b.iter(|| {
            k = (k + 1) % TARGETS;
            black_box(
                solver
                    .solve_into(&rig, &rest, &[Goal::new(1, targets[k])], &mut out)
                    .unwrap(),
            )
        })
    });
    group.bench_function(BenchmarkId::new("limb", 2), |b| {
        let (hip, knee, foot) = (
            Vec3::ZERO,
            Vec3::new(0.0, 1.0, 0.1),
            Vec3::new(0.0, 2.0, 0.0),
        );
        b.iter(|| {
            k = (k + 1) % TARGETS;
            black_box(solvers::two_bone_limb(hip, knee, foot, targets[k], None))
        })
    });
    group.finish();
}

/// A body bone with a 16-bone tail hanging off it, the body swaying.
fn spring_rig(tails: usize) -> (Rig, Vec<SpringChain>) {
    let mut bones = vec![BoneDesc::new("body", None, Transform::IDENTITY, 0.5)];
    for t in 0..tails {
        for i in 0..16 {
            let parent = if i == 0 {
                "body".to_string()
            } else {
                format!("tail{t}.{}", i - 1)
            };
            let rest = Transform {
                translation: Vec3::new(0.1 * t as f32, if i == 0 { 0.5 } else { 0.2 }, 0.0),
                rotation: Quat::from_rotation_x(0.05),
                scale: Vec3::ONE,
            };
            bones.push(BoneDesc::new(
                format!("tail{t}.{i}"),
                Some(parent.as_str()),
                rest,
                0.2,
            ));
        }
    }
    let rig = RigDesc { bones }.build().unwrap();
    let chains = (0..tails)
        .map(|t| SpringChain::new(&rig, rig.index_of(&format!("tail{t}.15")).unwrap(), 16).unwrap())
        .collect();
    (rig, chains)
}

fn swaying(rig: &Rig, frame: usize) -> Pose {
    let mut pose = Pose::rest(rig.len());
    pose.rotations[0] = Quat::from_rotation_z(0.5 * (frame as f32 * 0.13).sin());
    pose
}

fn spring(c: &mut Criterion) {
    let mut group = c.benchmark_group("spring");
    let (rig, chains) = spring_rig(1);
    let mut sim = SpringSimulation::new(&rig, chains, vec![], SpringParams::default()).unwrap();
    let poses: Vec<Pose> = (0..48).map(|f| swaying(&rig, f)).collect();
    let mut out = Pose::rest(rig.len());
    let mut frame = 0;
    // One frame at 24 fps of one 16-bone chain: ten internal steps.
    group.bench_function(BenchmarkId::new("frame", 16), |b| {
        b.iter(|| {
            frame = (frame + 1) % poses.len();
            sim.advance(&rig, &poses[frame], 1.0 / 24.0, &mut out)
                .unwrap();
            black_box(&out);
        })
    });
    // 1000 frames of ten such chains.
    let (rig, chains) = spring_rig(10);
    let poses: Vec<Pose> = (0..1000).map(|f| swaying(&rig, f)).collect();
    let mut out = Pose::rest(rig.len());
    group.sample_size(10);
    group.bench_function(BenchmarkId::new("thousand_frames_ten_chains", 160), |b| {
        b.iter(|| {
            let mut sim =
                SpringSimulation::new(&rig, chains.clone(), vec![], SpringParams::default())
                    .unwrap();
            for pose in &poses {
                sim.advance(&rig, pose, 1.0 / 24.0, &mut out).unwrap();
            }
            black_box(&out);
        })
    });
    group.finish();
}

/// Five effectors of the humanoid (hands, ankles, head) at the points of random poses of
/// their chains.
fn humanoid_goal_sets(rig: &Rig, count: usize) -> Vec<Vec<Goal>> {
    let effectors = [
        ("hand.L", 3),
        ("hand.R", 3),
        ("shin.L", 2),
        ("shin.R", 2),
        ("head", 2),
    ];
    let mut rng = tendon_core::fixtures::SplitMix64::new(5);
    (0..count)
        .map(|_| {
            let pose = tendon_core::fixtures::random_pose(rig, &mut rng, 0.5);
            let world = rig.world_matrices(&pose);
            effectors
                .iter()
                .map(|&(name, length)| {
                    let bone = rig.index_of(name).unwrap();
                    Goal::new(bone, rig.head_tail(&world[bone], bone).1).with_chain_length(length)
                })
                .collect()
        })
        .collect()
}

fn full_body(c: &mut Criterion) {
    let rig = tendon_core::fixtures::humanoid();
    let sets = humanoid_goal_sets(&rig, TARGETS);
    let rest = Pose::rest(rig.len());
    let mut out = Pose::rest(rig.len());
    let mut group = c.benchmark_group("full_body");
    for name in ["fabrik", "jacobian_dls"] {
        let mut solver = SolverConfig::by_name(name)
            .unwrap()
            .with_tolerance(1e-4)
            .build();
        let mut k = 0;
        group.bench_function(BenchmarkId::new(name, rig.len()), |b| {
            b.iter(|| {
                k = (k + 1) % sets.len();
                black_box(solver.solve_into(&rig, &rest, &sets[k], &mut out).unwrap())
            })
        });
    }
    group.finish();
}

fn tension(c: &mut Criterion) {
    // A limb with seven degrees of freedom: shoulder joint 3, elbow 2, wrist 2.
    let rig = tendon_core::fixtures::humanoid_limited();
    let hand = rig.index_of("hand.L").unwrap();
    let mut rng = tendon_core::fixtures::SplitMix64::new(8);
    let targets: Vec<Vec3> = (0..TARGETS)
        .map(|_| {
            let forearm = rig.parent(hand).unwrap();
            let limb = [hand, forearm, rig.parent(forearm).unwrap()];
            let pose = tendon_core::fixtures::random_pose_within_limits(&rig, &limb, &mut rng, 0.5);
            let world = rig.world_matrices(&pose);
            rig.head_tail(&world[hand], hand).1
        })
        .collect();
    let rest = Pose::rest(rig.len());
    let mut out = Pose::rest(rig.len());
    let mut solver = SolverConfig::by_name("tension")
        .unwrap()
        .with_tolerance(1e-4)
        .build();
    let mut k = 0;
    let mut group = c.benchmark_group("tension");
    group.bench_function(BenchmarkId::new("limb", 7), |b| {
        b.iter(|| {
            k = (k + 1) % targets.len();
            let goal = Goal::new(hand, targets[k]).with_chain_length(3);
            black_box(solver.solve_into(&rig, &rest, &[goal], &mut out).unwrap())
        })
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1000))
}

criterion_group! {
    name = benches;
    config = config();
    targets = chains, two_bone, spring, full_body, tension
}
criterion_main!(benches);
