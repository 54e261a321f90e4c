//! Solving a range of frames, as baking does: per frame the goals' targets (and rotation
//! targets and poles) change, the start is the frame's animated pose or one pose for all,
//! and with a warm start each frame starts from the previous frame's answer.
//!
//! The warm-start policy lives here so every caller bakes alike: with one start pose the
//! next frame starts from the last answer's rotations; with an animated pose per frame, the
//! bones the last solve turned start where it left them and every other bone takes the
//! frame's animated value. Translations always come from the start (or the frame's pose):
//! a root `move_root` moved for the frames that needed it goes back where it was when no
//! target needs it (it stayed moved on every later frame). The tension minimiser relaxing towards "the pose before the solve" is
//! given the frame's animated pose for it ([`Solver::solve_near`]).
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
use crate::goal::Goal;
use crate::rig::{Pose, Rig};
use crate::solvers::{SolveReport, Solver};

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
    // The frame's animated pose when the start is the previous answer.
    let animated_beside = per_frame && warm && solver.uses_near();
    let mut animated = Pose::rest(if animated_beside { n } else { 0 });
    let mut out = Pose::rest(0);
    for frame in 0..input.frame_count() {
        input.set_goals(frame, goals);
        if per_frame {
            input.frame_pose(rig, frame, &mut next);
            if warm && frame > 0 {
                // Bones the last solve turned keep its answer; the rest are animated.
                for i in 0..n {
                    if out.rotations[i] != from.rotations[i] {
                        next.rotations[i] = out.rotations[i];
                    }
                }
            }
            std::mem::swap(&mut next, &mut from);
        }
        let solved = if animated_beside {
            input.frame_pose(rig, frame, &mut animated);
            solver.solve_near(rig, &from, &animated, goals, &mut out)
        } else {
            solver.solve_into(rig, &from, goals, &mut out)
        };
        // Which frame, or a NaN in one frame of a thousand names only its bone.
        let report = solved.map_err(|e| e.at(&format!("at frame index {frame}")))?;
        output(frame, &out, report);
        if warm && !per_frame {
            from.rotations.copy_from_slice(&out.rotations);
        }
    }
    Ok(())
}
