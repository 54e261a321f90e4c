//! The frame driver: per-frame animated poses, warm starts, and what each frame hands back.

use glam::{Quat, Vec3};
use tendon_core::batch::{solve_frames, FrameInput};
use tendon_core::fixtures::humanoid;
use tendon_core::*;

/// The spine sways (animated, outside the arm's chain) while the hand's target circles.
struct Sway {
    spine: usize,
    centre: Vec3,
}

const FRAMES: usize = 24;

impl FrameInput for Sway {
    fn frame_count(&self) -> usize {
        FRAMES
    }
    fn set_goals(&self, frame: usize, goals: &mut [Goal]) {
        let t = frame as f32 / FRAMES as f32 * std::f32::consts::TAU;
        goals[0].target = self.centre + 0.05 * Vec3::new(t.cos(), t.sin(), 0.0);
    }
    fn has_frame_poses(&self) -> bool {
        true
    }
    fn frame_pose(&self, rig: &Rig, frame: usize, pose: &mut Pose) {
        pose.reset(rig.len());
        pose.rotations[self.spine] = Quat::from_rotation_z(0.002 * frame as f32);
    }
}

#[test]
fn warm_frames_keep_the_chain_and_take_the_animation_elsewhere() {
    let rig = humanoid();
    let hand = rig.index_of("hand.L").unwrap();
    let spine = rig.index_of("spine").unwrap();
    let rest = Pose::rest(rig.len());
    // Well inside the arm's reach: four fifths of the way from the shoulder to the hand.
    let world = rig.world_matrices(&rest);
    let upper_arm = rig.index_of("upper_arm.L").unwrap();
    let shoulder = rig.head_tail(&world[upper_arm], upper_arm).0;
    let centre = shoulder.lerp(rig.head_tail(&world[hand], hand).1, 0.8);
    let input = Sway { spine, centre };
    let mut iterations = [0u32; 2];
    for (warm, total) in [true, false].into_iter().zip(&mut iterations) {
        let mut goals = [Goal::new(hand, Vec3::ZERO).with_chain_length(3)];
        let mut solver = JacobianDls::default();
        let mut frames = 0;
        solve_frames(
            &mut solver,
            &rig,
            &rest,
            &mut goals,
            &input,
            warm,
            |frame, pose, report| {
                assert!(report.reached, "frame {frame} warm {warm}: {report:?}");
                // The spine is outside the chain: it is the frame's animated value.
                let animated = Quat::from_rotation_z(0.002 * frame as f32);
                assert!(
                    pose.rotations[spine].abs_diff_eq(animated, 1e-6),
                    "frame {frame}: {} vs {animated}",
                    pose.rotations[spine]
                );
                *total += report.iterations;
                frames += 1;
            },
        )
        .unwrap();
        assert_eq!(frames, FRAMES);
    }
    // Starting each frame from the last answer takes fewer iterations than from the pose.
    assert!(
        iterations[0] < iterations[1],
        "warm {} vs cold {}",
        iterations[0],
        iterations[1]
    );
}

/// Both hands lowered below their straight arms' reach on the middle frame only.
struct Dip {
    hands: [(usize, Vec3); 2],
}

impl FrameInput for Dip {
    fn frame_count(&self) -> usize {
        3
    }
    fn set_goals(&self, frame: usize, goals: &mut [Goal]) {
        let drop = if frame == 1 { 0.05 } else { 0.0 };
        for (goal, &(_, rest_tail)) in goals.iter_mut().zip(&self.hands) {
            goal.target = rest_tail - Vec3::Z * drop;
        }
    }
}

#[test]
fn a_warm_root_moved_for_one_frame_goes_back_on_the_next() {
    // With one start pose, a warm frame starts from the last answer's rotations; the
    // root `move_root` lowered for the middle frame is back where the start has it on the
    // last (it stayed 4.8 mm down; found by a helper review).
    let rig = humanoid();
    let rest = Pose::rest(rig.len());
    let world = rig.world_matrices(&rest);
    let hand = |name: &str| {
        let bone = rig.index_of(name).unwrap();
        (bone, rig.head_tail(&world[bone], bone).1)
    };
    let input = Dip {
        hands: [hand("hand.L"), hand("hand.R")],
    };
    let mut goals: Vec<Goal> = input
        .hands
        .iter()
        .map(|&(bone, tail)| Goal::new(bone, tail).with_chain_length(3))
        .collect();
    let mut config = SolverConfig::by_name("jacobian_dls").unwrap();
    config.iteration_mut().move_root = true;
    let mut solver = config.build();
    let hips = rig.index_of("hips").unwrap();
    let mut roots = Vec::new();
    solve_frames(
        &mut solver,
        &rig,
        &rest,
        &mut goals,
        &input,
        true,
        |frame, pose, report| {
            assert!(report.reached, "frame {frame}: {report:?}");
            roots.push(pose.translations[hips]);
        },
    )
    .unwrap();
    assert!(
        roots[1].length() > 1e-3,
        "the middle frame needs the root: {roots:?}"
    );
    assert_eq!(roots[2], rest.translations[hips], "{roots:?}");
}
