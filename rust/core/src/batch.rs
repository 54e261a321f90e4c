//! Solving a range of frames, as baking does: per frame the goals' targets (and rotation
//! targets and poles) change, the start is the frame's animated pose or one pose for all,
//! and with a warm start each frame starts from the previous frame's answer.
//!
//! The warm-start policy lives here so every caller bakes alike: with one start pose the
//! next frame starts from the last answer's rotations; with an animated pose per frame, the
//! bones a solve has turned (on this frame or any before) start where the last solve left
//! them, turned on by the animation's own turn since the last frame and settled towards
//! the animated pose as far as the animation moved, and every other bone takes the
//! frame's animated value; the bones of chains with a Blender pole always start from the
//! frame's pose, as Blender's IK does. Translations always come from the start (or the frame's pose):
//! a root `move_root` moved for the frames that needed it goes back where it was when no
//! target needs it (it stayed moved on every later frame). The tension minimiser relaxing towards "the pose before the solve" is
//! given the frame's animated pose for it ([`Solver::solve_near`]).
//!
//! [`solve_frames_threaded`] gives the same answer with the goals' independent groups
//! (limbs whose chains share no bone and hang from none another turns) solved at once on
//! separate threads, each group over the whole range, for the solvers that solve such
//! groups each as if alone ([`Solver::solves_groups_apart`]).
//!
//! ```
//! use glam::Vec3;
//! use tendon_core::batch::{solve_frames, FrameInput};
//! use tendon_core::*;
//!
//! /// A target sliding along x, one start pose for all frames.
//! struct Slide(Vec3);
//! impl FrameInput for Slide {
//!     fn frame_count(&self) -> usize {
//!         10
//!     }
//!     fn set_goals(&self, frame: usize, goals: &mut [Goal]) {
//!         goals[0].target = self.0 + Vec3::new(0.02 * frame as f32, 0.0, 0.0);
//!     }
//! }
//!
//! // Three bones along +Y, each bent a little at its head.
//! let bent = |y: f32| Transform {
//!     translation: Vec3::new(0.0, y, 0.0),
//!     rotation: glam::Quat::from_rotation_x(0.2),
//!     scale: Vec3::ONE,
//! };
//! let rig = RigDesc {
//!     bones: vec![
//!         BoneDesc::new("upper", None, Transform::IDENTITY, 1.0),
//!         BoneDesc::new("lower", Some("upper"), bent(1.0), 1.0),
//!         BoneDesc::new("hand", Some("lower"), bent(1.0), 0.5),
//!     ],
//! }
//! .build()?;
//! let rest = Pose::rest(3);
//! let tail = rig.head_tail(&rig.world_matrices(&rest)[2], 2).1;
//! let mut goals = [Goal::new(2, tail)];
//! let mut reached = 0;
//! let mut solver = Fabrik::default();
//! solve_frames(&mut solver, &rig, &rest, &mut goals, &Slide(tail), true, |_, _, report| {
//!     reached += report.reached as usize
//! })?;
//! assert_eq!(reached, 10);
//! # Ok::<(), TendonError>(())
//! ```

use crate::error::Result;
use crate::goal::{EffectorPoint, Goal};
use crate::math::angle_between;
use crate::rig::{Pose, Rig};
use crate::solvers::{
    chain_root, Apart, IterationParams, JacobianDls, JacobianDlsParams, SolveReport, Solver,
    MIN_LENGTH_SCALE,
};
use glam::{Quat, Vec3};
use std::cell::RefCell;

/// Whether a solve turned a bone from `before` to `after`: more than rounding, either sign.
fn turned(before: Quat, after: Quat) -> bool {
    let before = before.normalize();
    (before - after)
        .length_squared()
        .min((before + after).length_squared())
        > 1e-12
}

/// The bones the goals' chains turn (each goal's bone up to its chain's top), ascending.
fn chain_bones(rig: &Rig, goals: &[Goal]) -> Vec<usize> {
    let mut bones = Vec::new();
    for goal in goals.iter().filter(|g| g.bone < rig.len()) {
        let top = chain_root(rig, goal.bone, goal.chain_length);
        let mut bone = goal.bone;
        loop {
            bones.push(bone);
            if bone == top {
                break;
            }
            match rig.parent(bone) {
                Some(p) => bone = p,
                None => break,
            }
        }
    }
    bones.sort_unstable();
    bones.dedup();
    bones
}

/// Per bone, whether a goal with a Blender pole ([`Goal::pole_angle`]) turns it. Such a
/// chain is turned onto its pole before each solve and bent from where it starts, so a
/// frame's answer is Blender's (whose IK solves from the frame's own pose) only from the
/// frame's pose: warm frames start these bones from the animated pose (or the one start
/// pose), not the last answer (a baked elbow wandered up to 2.2 cm, 5.9 degrees of
/// swivel, from Blender's; QA helper).
fn posed_by_pole(rig: &Rig, goals: &[Goal]) -> Vec<bool> {
    let mut by_pole = vec![false; rig.len()];
    let poled: Vec<Goal> = goals
        .iter()
        .filter(|goal| goal.pole.is_some() && goal.pole_angle.is_some())
        .copied()
        .collect();
    for bone in chain_bones(rig, &poled) {
        by_pole[bone] = true;
    }
    by_pole
}

/// `answer` turned on by the animation's turn from `before` to `now` (in the bone's own
/// axes, after its rotation), exactly `answer` when the animation holds still.
fn with_animation_turn(answer: Quat, before: Quat, now: Quat) -> Quat {
    if before == now {
        return answer;
    }
    let turned = answer * (before.normalize().conjugate() * now.normalize());
    match turned.is_finite() && turned.length_squared() > 0.0 {
        true => turned.normalize(),
        false => answer,
    }
}

/// A warm frame's answer turning a chain bone by more than this (radians, 8.6 degrees)
/// from where the frame started, and by far more than its targets moved, is a jump (see
/// [`Coherence`]). At 20 degrees CCD's elbow still took 20-degree steps where the clip
/// turned 1-3.
const JUMP_ANGLE: f32 = 0.15;

/// The share of the way back to the animated pose a carried bone's start takes on each
/// frame whose animation meets its group's goals (see [`solve_frames`]).
const HOMING: f32 = 0.25;

/// The share of the way back to the animated pose a carried bone's start takes on the
/// other frames, per radian its group's animation turned since the last frame (see
/// [`Coherence::animation_moves`]).
const SETTLING: f32 = 2.0;

/// The most a carried bone's start settles towards the animation in one frame (radians,
/// 5.7 degrees; see [`Coherence::animation_moves`]). At 2 or 4 degrees FABRIK still crept
/// 18 or 2 degrees in two cycles of `a_still_target_off_a_swinging_animation_...`.
const MAX_SETTLE: f32 = 0.1;

/// How many times the targets' move (relative to their chains' lengths, as an angle) a
/// warm frame's largest turn may be before it counts as a jump.
const JUMP_FACTOR: f32 = 4.0;

/// Keeps warm frames from jumping: a solver that turns one bone at a time within limits
/// (CCD, FABRIK) or finishes from a retry can land a frame on another solution than the
/// last frame's, though the targets moved by millimetres (an elbow with Human Limits
/// flipped 160 degrees in one frame of a motion-capture bake and back 20 frames later;
/// 36-41 degrees a frame with FABRIK; QA helper). Such a group of goals is solved again by
/// damped least squares from the same start, which moves as little as it must, and that
/// answer is kept when it reaches with a smaller turn. Judged per independent group
/// ([`independent_groups`], for the solvers that solve groups apart), so a range solved
/// on threads, group by group, gives the same answer.
struct Coherence {
    groups: Vec<CoherentGroup>,
    /// The solver's tolerances and settings: the fallback keeps to them (with damped
    /// least squares' own step, and the smaller iteration cap), and a frame it changed is
    /// measured with them.
    params: IterationParams,
    fallback: Option<JacobianDls>,
    subset: Vec<Goal>,
    answer: Pose,
    /// Each bone's goals (those whose chains turn it), and per goal whether the frame's
    /// animated pose meets it (see [`Coherence::animation_meets`]).
    goals_of_bone: Vec<Vec<usize>>,
    met: Vec<bool>,
    /// The goals' bones and every bone above them, ascending (parents first), and their
    /// frames in the animated pose (only these: a whole rig's, per frame, cost the bake).
    path: Vec<usize>,
    world: Vec<glam::Affine3A>,
    /// Per bone, the share of the way back to the animation its start takes this frame
    /// (see [`Coherence::animation_moves`]).
    settling: Vec<f32>,
}

/// One group's goals, the bones their chains turn, each goal's chain length and its
/// target on the last frame.
struct CoherentGroup {
    goals: Vec<usize>,
    bones: Vec<usize>,
    reach: Vec<f32>,
    last: Vec<Vec3>,
}

impl Coherence {
    fn new(rig: &Rig, goals: &[Goal], apart: bool, params: IterationParams) -> Self {
        let groups = match apart {
            true => independent_groups(rig, goals),
            false => vec![(0..goals.len()).collect()],
        };
        let groups: Vec<CoherentGroup> = groups
            .into_iter()
            .map(|members| {
                let own: Vec<Goal> = members.iter().map(|&k| goals[k]).collect();
                CoherentGroup {
                    bones: chain_bones(rig, &own),
                    reach: own.iter().map(|goal| chain_reach(rig, goal)).collect(),
                    last: own.iter().map(|goal| goal.target).collect(),
                    goals: members,
                }
            })
            .collect();
        let mut path: Vec<usize> = goals
            .iter()
            .filter(|goal| goal.bone < rig.len())
            .flat_map(|goal| std::iter::successors(Some(goal.bone), |&bone| rig.parent(bone)))
            .collect();
        path.sort_unstable();
        path.dedup();
        let mut goals_of_bone = vec![Vec::new(); rig.len()];
        for (k, goal) in goals.iter().enumerate() {
            for bone in chain_bones(rig, std::slice::from_ref(goal)) {
                goals_of_bone[bone].push(k);
            }
        }
        Coherence {
            met: vec![false; goals.len()],
            groups,
            params,
            fallback: None,
            subset: Vec::new(),
            answer: Pose::rest(0),
            goals_of_bone,
            path,
            world: vec![glam::Affine3A::IDENTITY; rig.len()],
            settling: vec![0.0; rig.len()],
        }
    }

    /// Notes, per goal, whether the frame's animated pose `animated` meets it, or nearly
    /// (its effector within 1% of its chain's length of its target, a rotation target within
    /// 0.01 rad): the target has come back onto the animation. (Met exactly, an arm whose
    /// target came back to 0.5 mm off the clip stayed 17 degrees off it; QA helper.)
    fn animation_meets(&mut self, rig: &Rig, animated: &Pose, goals: &[Goal]) {
        for &bone in &self.path {
            let local = rig.local_matrix(animated, bone);
            self.world[bone] = match rig.parent(bone) {
                Some(parent) => self.world[parent] * local,
                None => local,
            };
        }
        for group in &self.groups {
            for (&k, reach) in group.goals.iter().zip(&group.reach) {
                let goal = &goals[k];
                if goal.bone >= rig.len() || goal.weight <= 0.0 {
                    self.met[k] = true;
                    continue;
                }
                let (head, tail) = rig.head_tail(&self.world[goal.bone], goal.bone);
                let point = match goal.point {
                    crate::goal::EffectorPoint::Head => head,
                    crate::goal::EffectorPoint::Tail => tail,
                };
                let turned = goal
                    .rotation
                    .filter(|_| goal.rotation_weight > 0.0)
                    .map(|r| {
                        let world =
                            glam::Quat::from_mat3a(&self.world[goal.bone].matrix3).normalize();
                        angle_between(world, r.normalize())
                    });
                self.met[k] = point.distance(goal.target) <= 1e-2 * reach
                    && turned.map_or(true, |a| a <= 1e-2);
            }
        }
    }

    /// Notes, per group, how far its chains' animation turned from `before` to `now` (the
    /// largest turn of one of its bones): the carried bones' starts take a share of the
    /// way back to the animation in proportion. Carried on the last answer turned by the
    /// animation's own turn, a chain whose target stands still off a swinging animation
    /// crept 17-19 degrees a cycle (every iterative solver but tension; QA helper); where
    /// the animation stands still, so does the start (a target standing still is held).
    fn animation_moves(&mut self, before: &[Quat], now: &Pose) {
        for group in &self.groups {
            let moved = group
                .bones
                .iter()
                .map(|&b| angle_between(before[b], now.rotations[b]))
                .fold(0.0f32, f32::max);
            let pull = (SETTLING * moved).min(1.0);
            for &bone in &group.bones {
                self.settling[bone] = pull;
            }
        }
    }

    /// The share of the way back to the animation `bone`'s start takes this frame.
    fn settling(&self, bone: usize) -> f32 {
        self.settling[bone]
    }

    /// Whether every goal whose chain turns `bone` is met by the animation on this frame
    /// (an arm whose own target is back comes home though the other hand, sharing the
    /// spine, is still away: the spine stays).
    fn homing(&self, bone: usize) -> bool {
        self.goals_of_bone
            .get(bone)
            .is_some_and(|goals| !goals.is_empty() && goals.iter().all(|&k| self.met[k]))
    }

    /// Takes the frame's targets as the last ones (the first frame, which is not checked).
    fn remember(&mut self, goals: &[Goal]) {
        for group in &mut self.groups {
            for (last, &k) in group.last.iter_mut().zip(&group.goals) {
                *last = goals[k].target;
            }
        }
    }

    /// Checks the frame just solved (`out`, `report`): its turns are measured from `from`,
    /// where the last answer leads (the start before it settles towards the animation),
    /// and the fallback solves from `start`, the frame's own; where a group jumped and the
    /// fallback does better, its bones take the fallback's answer, and the report
    /// its residual and iterations where larger (its reach is the report's already: the
    /// fallback's answer is taken only when it reaches).
    fn check(
        &mut self,
        rig: &Rig,
        from: &Pose,
        start: &Pose,
        goals: &[Goal],
        out: &mut Pose,
        report: &mut SolveReport,
    ) -> Result<()> {
        let mut swapped = false;
        for g in 0..self.groups.len() {
            let group = &mut self.groups[g];
            let moved = group
                .goals
                .iter()
                .zip(&group.last)
                .zip(&group.reach)
                .map(|((&k, last), reach)| goals[k].target.distance(*last) / reach.max(1e-12))
                .fold(0.0f32, f32::max);
            for (last, &k) in group.last.iter_mut().zip(&group.goals) {
                *last = goals[k].target;
            }
            let turn = largest_turn(&group.bones, from, out);
            if !(turn > JUMP_ANGLE && turn > JUMP_FACTOR * moved) {
                continue;
            }
            self.subset.clear();
            self.subset.extend(group.goals.iter().map(|&k| goals[k]));
            let params = self.params;
            let fallback = self.fallback.get_or_insert_with(|| {
                // The caller's tolerances and settings, with damped least squares' own
                // step, and its cap or the caller's if smaller (a cap of 2 ran 100
                // iterations; QA helper), as the finishing passes have them.
                let own = JacobianDlsParams::default();
                JacobianDls::new(JacobianDlsParams {
                    iteration: IterationParams {
                        max_iterations: own.iteration.max_iterations.min(params.max_iterations),
                        max_step_angle: own.iteration.max_step_angle,
                        ..params
                    },
                    ..own
                })
            });
            let other = fallback.solve_into(rig, start, &self.subset, &mut self.answer)?;
            if other.reached && largest_turn(&group.bones, from, &self.answer) < turn {
                for &bone in &group.bones {
                    out.rotations[bone] = self.answer.rotations[bone];
                }
                swapped = true;
                report.iterations = report.iterations.max(other.iterations);
            }
        }
        if swapped {
            // The frame's pose is another now: its report too (it kept the jumping
            // answer's miss where the pose reached, 0.25 off; QA helper).
            let measured = pose_report(rig, out, goals, &self.params);
            *report = SolveReport {
                iterations: report.iterations,
                ..measured
            };
        }
        Ok(())
    }
}

/// `pose`'s report against `goals` as the solvers measure it: each effector's distance to
/// its target, reached within `params.tolerance` times its chain's length in the pose (its
/// bone's own length for a chain of none), each full-weight rotation target within
/// `params.rotation_tolerance`; no iterations.
fn pose_report(rig: &Rig, pose: &Pose, goals: &[Goal], params: &IterationParams) -> SolveReport {
    let world = rig.world_matrices(pose);
    let mut report = SolveReport {
        iterations: 0,
        residual: 0.0,
        rotation_residual: 0.0,
        reached: true,
    };
    for goal in goals
        .iter()
        .filter(|goal| goal.weight > 0.0 && goal.bone < rig.len())
    {
        let (head, tail) = rig.head_tail(&world[goal.bone], goal.bone);
        let point = match goal.point {
            EffectorPoint::Head => head,
            EffectorPoint::Tail => tail,
        };
        let error = point.distance(goal.target);
        let top = chain_root(rig, goal.bone, goal.chain_length);
        // From the point through each head up to the chain's top (a head goal's own bone
        // does not move it).
        let (mut reach, mut from, mut bone) = (0.0, point, goal.bone);
        if goal.point == EffectorPoint::Head {
            if bone == top {
                reach = 0.0;
            } else {
                bone = rig.parent(bone).unwrap_or(bone);
            }
        }
        loop {
            let head = Vec3::from(world[bone].translation);
            reach += from.distance(head);
            from = head;
            match rig.parent(bone) {
                Some(parent) if bone != top => bone = parent,
                _ => break,
            }
        }
        let scale = if reach > MIN_LENGTH_SCALE {
            reach
        } else {
            rig.length(goal.bone).max(MIN_LENGTH_SCALE)
        };
        report.residual = report.residual.max(error);
        report.reached &= error <= params.tolerance * scale;
        if let Some(rotation) = goal.rotation.filter(|_| goal.rotation_weight > 0.0) {
            let (_, turned, _) = world[goal.bone].to_scale_rotation_translation();
            let angle = angle_between(turned, rotation);
            report.rotation_residual = report.rotation_residual.max(angle);
            if goal.rotation_weight >= 1.0 {
                report.reached &= angle <= params.rotation_tolerance;
            }
        }
    }
    report
}

/// The largest turn of one of `bones` from `from` to `to`.
fn largest_turn(bones: &[usize], from: &Pose, to: &Pose) -> f32 {
    bones
        .iter()
        .map(|&b| angle_between(from.rotations[b], to.rotations[b]))
        .fold(0.0, f32::max)
}

/// The length of `goal`'s chain: its bone's, and each head's offset from its parent's up
/// to the chain's top.
fn chain_reach(rig: &Rig, goal: &Goal) -> f32 {
    if goal.bone >= rig.len() {
        return 0.0;
    }
    let top = chain_root(rig, goal.bone, goal.chain_length);
    let (mut bone, mut total) = (goal.bone, rig.length(goal.bone));
    while bone != top {
        let Some(parent) = rig.parent(bone) else {
            break;
        };
        total += Vec3::from(rig.rest_matrix(bone).translation).length();
        bone = parent;
    }
    total
}

/// What changes from frame to frame.
pub trait FrameInput {
    /// How many frames there are.
    fn frame_count(&self) -> usize;

    /// Sets the goals' targets (and rotation targets and poles, where they change) for
    /// `frame`.
    fn set_goals(&self, frame: usize, goals: &mut [Goal]);

    /// Whether each frame has a pose of its own ([`FrameInput::frame_pose`]); otherwise
    /// the start pose given to [`solve_frames`] stands for every frame.
    fn has_frame_poses(&self) -> bool {
        false
    }

    /// Writes the animated pose of `frame` into `pose` (sized for `rig`, depth-first).
    fn frame_pose(&self, rig: &Rig, frame: usize, pose: &mut Pose) {
        let _ = (rig, frame, pose);
    }
}

/// Solves every frame of `input` with `solver` from `start` (or the frames' own poses),
/// calling `output` with each frame's index, answer and report in order. With `warm`, a
/// frame starts from the previous frame's answer (see the module documentation).
pub fn solve_frames<S: Solver + ?Sized>(
    solver: &mut S,
    rig: &Rig,
    start: &Pose,
    goals: &mut [Goal],
    input: &dyn FrameInput,
    warm: bool,
    mut output: impl FnMut(usize, &Pose, SolveReport),
) -> Result<()> {
    let n = rig.len();
    let per_frame = input.has_frame_poses();
    let mut from = start.clone();
    // The next frame's start, built beside `from` (which the warm start compares against).
    let mut next = Pose::rest(if per_frame { n } else { 0 });
    // The frame's start before it settles towards the animation: where the jump guard
    // measures turns from, what the user sees move (measured from the settled start, a
    // foot whose start settled a third of the way to a clip 15 cm off its target snapped
    // 37 degrees in one frame with FABRIK and CCD where the clip turned 9; QA helper).
    // Its fallback still solves from the settled start (from this one it undid the
    // settling, and the creep came back).
    let mut unsettled = Pose::rest(if per_frame && warm { n } else { 0 });
    // The frame's animated pose when the start is the previous answer.
    let animated_beside = per_frame && warm && solver.uses_near();
    let mut animated = Pose::rest(if animated_beside { n } else { 0 });
    let mut out = Pose::rest(0);
    // Per bone, whether it has taken a solve's answer, and the last frame's animated
    // rotations (see the warm start below).
    let mut carried = vec![false; if per_frame && warm { n } else { 0 }];
    let mut animated_before = vec![Quat::IDENTITY; carried.len()];
    let mut coherence = (warm && solver.guards_warm_frames()).then(|| {
        Coherence::new(
            rig,
            goals,
            solver.solves_groups_apart(),
            solver.iteration_params(),
        )
    });
    // The bones of chains with a Blender pole (see `posed_by_pole`), found on the first
    // frame (whose goals have their poles).
    let mut by_pole: Vec<bool> = Vec::new();
    for frame in 0..input.frame_count() {
        input.set_goals(frame, goals);
        if frame == 0 && warm {
            by_pole = posed_by_pole(rig, goals);
        }
        if per_frame {
            input.frame_pose(rig, frame, &mut next);
            // A frame pose of another size (a panic on a copy, warm; QA helper).
            next.check_size(rig.len())
                .map_err(|e| e.at(&format!("in the frame pose at frame index {frame}")))?;
            if warm && frame > 0 {
                // Bones a solve has turned start, from then on, from the last answer turned
                // on by the animation's own turn since the last frame; the rest are
                // animated (so where the animation already reaches, the bake keeps it).
                // Kept even when this frame's solve left such a bone alone: a target
                // standing still is met at once, and taking the animated value again on
                // the next frame made the chain jump back to a cold solution (9 to 113
                // degrees on a frame where nothing moved, depending on the solver). Turned
                // on by the animation, or a motion-capture wrist kept from an early frame
                // drifted 122 degrees from the clip over the range and snapped back after
                // it. A quaternion the solve only normalised was not turned: compared
                // exactly, an animated bone outside the chains took the last frame's value
                // on every other frame.
                if let Some(coherence) = coherence.as_mut() {
                    coherence.animation_meets(rig, &next, goals);
                    coherence.animation_moves(&animated_before, &next);
                }
                unsettled.copy_from(&next);
                for (i, carried) in carried.iter_mut().enumerate() {
                    let animated = next.rotations[i];
                    if by_pole[i] {
                        animated_before[i] = animated;
                        continue;
                    }
                    if *carried || turned(from.rotations[i], out.rotations[i]) {
                        let warm =
                            with_animation_turn(out.rotations[i], animated_before[i], animated);
                        // Targets back on the animation: the chain comes home to it over a
                        // few frames (kept on the last answer, an arm stayed 17-51 degrees
                        // off the clip to the range's end and snapped back after it; QA
                        // helper), reaching all the while. Then the start settles towards
                        // the animation as far as the animation moves (see
                        // `Coherence::animation_moves`).
                        let home = coherence.as_ref().is_some_and(|c| c.homing(i));
                        let base = match home {
                            true => warm.slerp(animated.normalize(), HOMING),
                            false => warm,
                        };
                        let settle = coherence.as_ref().map_or(0.0, |c| c.settling(i));
                        let gap = angle_between(base, animated.normalize());
                        // At most `MAX_SETTLE` a frame: a start settled a third of the way
                        // to a clip far off its targets led FABRIK and CCD onto another
                        // solution (a foot snapped 37 degrees in a frame; QA helper).
                        let settle = (settle * gap).min(MAX_SETTLE) / gap.max(1e-9);
                        next.rotations[i] = match settle > 0.0 {
                            true => base.slerp(animated.normalize(), settle),
                            false => base,
                        };
                        unsettled.rotations[i] = base;
                        *carried = true;
                    }
                    animated_before[i] = animated;
                }
            } else if warm {
                animated_before.copy_from_slice(&next.rotations);
            }
            std::mem::swap(&mut next, &mut from);
        }
        let solved = if animated_beside {
            input.frame_pose(rig, frame, &mut animated);
            // A frame pose of another size (a panic on a copy, warm; QA helper).
            animated
                .check_size(rig.len())
                .map_err(|e| e.at(&format!("in the frame pose at frame index {frame}")))?;
            solver.solve_near(rig, &from, &animated, goals, &mut out)
        } else {
            solver.solve_into(rig, &from, goals, &mut out)
        };
        // Which frame, or a NaN in one frame of a thousand names only its bone.
        let mut report = solved.map_err(|e| e.at(&format!("at frame index {frame}")))?;
        if let Some(coherence) = coherence.as_mut() {
            if frame > 0 {
                let before = if per_frame { &unsettled } else { &from };
                coherence
                    .check(rig, before, &from, goals, &mut out, &mut report)
                    .map_err(|e| e.at(&format!("at frame index {frame}")))?;
            } else {
                coherence.remember(goals);
            }
        }
        output(frame, &out, report);
        if warm && !per_frame {
            for (i, rotation) in from.rotations.iter_mut().enumerate() {
                if !by_pole[i] {
                    *rotation = out.rotations[i];
                }
            }
        }
    }
    Ok(())
}

/// The goals in groups no other group touches: no bone a group's chains turn is one
/// another group's effectors hang from. Solvers that say so
/// ([`Solver::solves_groups_apart`]) solve each group as if alone, so the groups can also
/// be solved at once. Groups list goal indices in order; a goal on a bone the rig does not
/// have shares the first group (the solve names it).
pub fn independent_groups(rig: &Rig, goals: &[Goal]) -> Vec<Vec<usize>> {
    let mut apart = Apart::default();
    let mut groups = vec![Vec::new(); apart.split(rig, goals)];
    for k in 0..goals.len() {
        groups[apart.group_of(k)].push(k);
    }
    groups
}

/// [`solve_frames`] with the goals' independent groups ([`independent_groups`]) spread
/// over up to `threads` threads (0: as many as the machine runs at once), each thread
/// solving its groups over the whole range, through `output` in frame order. The answer
/// is [`solve_frames`]'s to the last bit: the solvers that say so
/// ([`Solver::solves_groups_apart`]) solve each group as if alone in any solve. Other
/// solvers, a single group, a single thread or a short range go through [`solve_frames`]
/// itself; so does a range that fails, which then fails as there (same error, `output`
/// called for the frames before it).
#[allow(clippy::too_many_arguments)]
pub fn solve_frames_threaded<S: Solver + Clone + Send>(
    solver: &mut S,
    rig: &Rig,
    start: &Pose,
    goals: &mut [Goal],
    input: &(dyn FrameInput + Sync),
    warm: bool,
    threads: usize,
    mut output: impl FnMut(usize, &Pose, SolveReport),
) -> Result<()> {
    let frames = input.frame_count();
    let threads = match threads {
        0 => crate::machine_threads(),
        t => t,
    };
    let groups = match solver.solves_groups_apart() && threads > 1 && frames >= MIN_THREADED_FRAMES
    {
        true => independent_groups(rig, goals),
        false => Vec::new(),
    };
    if groups.len() < 2 {
        return solve_frames(solver, rig, start, goals, input, warm, output);
    }
    let shares = share_groups(rig, goals, &groups, threads);
    // Each share's bones: its goals' chains (no other share's chains touch them).
    let owned: Vec<Vec<usize>> = shares
        .iter()
        .map(|share| {
            let own: Vec<Goal> = share.iter().map(|&k| goals[k]).collect();
            chain_bones(rig, &own)
        })
        .collect();
    let all_goals: &[Goal] = goals;
    let results: Vec<Option<ShareFrames>> = std::thread::scope(|scope| {
        // Every share but the first on a thread of its own; the first on this one (which
        // would only wait).
        let handles: Vec<_> = shares
            .iter()
            .zip(&owned)
            .skip(1)
            .map(|(share, bones)| {
                let mut solver = solver.clone();
                scope.spawn(move || {
                    solve_share(
                        &mut solver,
                        rig,
                        start,
                        all_goals,
                        share,
                        bones,
                        input,
                        warm,
                    )
                })
            })
            .collect();
        let mut own = solver.clone();
        let first = solve_share(
            &mut own, rig, start, all_goals, &shares[0], &owned[0], input, warm,
        );
        std::iter::once(first)
            .chain(handles.into_iter().map(|h| h.join().ok().flatten()))
            .collect()
    });
    if results.iter().any(Option::is_none) {
        // A share failed: the plain path gives the error as it always does.
        return solve_frames(solver, rig, start, goals, input, warm, output);
    }
    let results: Vec<ShareFrames> = results.into_iter().flatten().collect();
    let per_frame = input.has_frame_poses();
    let mut pose = start.clone();
    // The bones outside the chains as the solvers give them, of unit length: with one start
    // for every frame, checked once (the solved bones are already).
    if !per_frame {
        pose.validate(rig)?;
    }
    for frame in 0..frames {
        if per_frame {
            input.frame_pose(rig, frame, &mut pose);
            // A frame pose of another size (a panic on a copy, warm; QA helper).
            pose.check_size(rig.len())
                .map_err(|e| e.at(&format!("in the frame pose at frame index {frame}")))?;
        }
        let mut report = SolveReport {
            iterations: 0,
            residual: 0.0,
            rotation_residual: 0.0,
            reached: true,
        };
        for (result, bones) in results.iter().zip(&owned) {
            let at = frame * bones.len();
            for (k, &bone) in bones.iter().enumerate() {
                pose.rotations[bone] = result.rotations[at + k];
                pose.translations[bone] = result.translations[at + k];
                pose.scales[bone] = result.scales[at + k];
            }
            let r = result.reports[frame];
            report.iterations = report.iterations.max(r.iterations);
            report.residual = report.residual.max(r.residual);
            report.rotation_residual = report.rotation_residual.max(r.rotation_residual);
            report.reached &= r.reached;
        }
        if per_frame {
            pose.validate(rig)?;
        }
        output(frame, &pose, report);
    }
    // The caller's goals as the plain path leaves them: set for the last frame.
    if frames > 0 {
        input.set_goals(frames - 1, goals);
    }
    Ok(())
}

/// Ranges shorter than this are solved on one thread (starting threads costs more).
const MIN_THREADED_FRAMES: usize = 16;

/// One share's answers: per frame its bones' channels (in its bone order), and reports.
struct ShareFrames {
    rotations: Vec<Quat>,
    translations: Vec<Vec3>,
    scales: Vec<Vec3>,
    reports: Vec<SolveReport>,
}

/// The groups dealt to at most `threads` shares with the largest share as small as can be
/// (a group's load: per goal one, plus its chain's bones): tried every way for two shares
/// and up to 16 groups (a humanoid's limbs and head, 3/3/2/2/2 bones, split 6/6 rather than
/// 7/5), else largest first to the least loaded.
fn share_groups(
    rig: &Rig,
    goals: &[Goal],
    groups: &[Vec<usize>],
    threads: usize,
) -> Vec<Vec<usize>> {
    let loads: Vec<usize> = groups
        .iter()
        .map(|g| {
            g.iter()
                .map(|&k| 1 + chain_bones(rig, &goals[k..=k]).len())
                .sum()
        })
        .collect();
    let count = threads.min(groups.len());
    let mut share_of = vec![0; groups.len()];
    if count == 2 && groups.len() <= 16 {
        let total: usize = loads.iter().sum();
        // Group 0 stays in share 0: each split is tried once.
        let best = (0..1u32 << (groups.len() - 1))
            .map(|mask| mask << 1)
            .filter(|mask| *mask != 0)
            .min_by_key(|mask| {
                let second: usize = (0..groups.len())
                    .filter(|g| mask & (1 << g) != 0)
                    .map(|g| loads[g])
                    .sum();
                second.max(total - second)
            })
            .unwrap_or(0);
        for (g, share) in share_of.iter_mut().enumerate() {
            *share = usize::from(best & (1 << g) != 0);
        }
    } else {
        let mut order: Vec<usize> = (0..groups.len()).collect();
        order.sort_by_key(|&g| std::cmp::Reverse(loads[g]));
        let mut totals = vec![0; count];
        for g in order {
            let least = (0..count).min_by_key(|&s| totals[s]).unwrap_or(0);
            totals[least] += loads[g];
            share_of[g] = least;
        }
    }
    let mut shares = vec![Vec::new(); count];
    for (g, group) in groups.iter().enumerate() {
        shares[share_of[g]].extend_from_slice(group);
    }
    shares.retain(|share: &Vec<usize>| !share.is_empty());
    for share in &mut shares {
        share.sort_unstable();
    }
    shares
}

/// The frame input seen by one share: its own goals only.
struct ShareInput<'a> {
    input: &'a (dyn FrameInput + Sync),
    share: &'a [usize],
    all: RefCell<Vec<Goal>>,
}

impl FrameInput for ShareInput<'_> {
    fn frame_count(&self) -> usize {
        self.input.frame_count()
    }

    fn set_goals(&self, frame: usize, goals: &mut [Goal]) {
        let mut all = self.all.borrow_mut();
        self.input.set_goals(frame, &mut all);
        for (goal, &k) in goals.iter_mut().zip(self.share) {
            *goal = all[k];
        }
    }

    fn has_frame_poses(&self) -> bool {
        self.input.has_frame_poses()
    }

    fn frame_pose(&self, rig: &Rig, frame: usize, pose: &mut Pose) {
        self.input.frame_pose(rig, frame, pose);
    }
}

/// Solves one share's goals over the range; None if any frame fails.
#[allow(clippy::too_many_arguments)]
fn solve_share<S: Solver + ?Sized>(
    solver: &mut S,
    rig: &Rig,
    start: &Pose,
    goals: &[Goal],
    share: &[usize],
    bones: &[usize],
    input: &(dyn FrameInput + Sync),
    warm: bool,
) -> Option<ShareFrames> {
    let frames = input.frame_count();
    let mut own: Vec<Goal> = share.iter().map(|&k| goals[k]).collect();
    let share_input = ShareInput {
        input,
        share,
        all: RefCell::new(goals.to_vec()),
    };
    let mut result = ShareFrames {
        rotations: Vec::with_capacity(frames * bones.len()),
        translations: Vec::with_capacity(frames * bones.len()),
        scales: Vec::with_capacity(frames * bones.len()),
        reports: Vec::with_capacity(frames),
    };
    solve_frames(
        solver,
        rig,
        start,
        &mut own,
        &share_input,
        warm,
        |_, pose, report| {
            for &bone in bones {
                result.rotations.push(pose.rotations[bone]);
                result.translations.push(pose.translations[bone]);
                result.scales.push(pose.scales[bone]);
            }
            result.reports.push(report);
        },
    )
    .ok()?;
    Some(result)
}
