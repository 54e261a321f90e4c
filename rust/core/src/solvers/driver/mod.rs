//! Machinery shared by every solver, by concern: [`goals`] (validation, chain roots,
//! exclusive chains and carriers, Blender's pole pre-rotation), [`workspace`] (the working
//! pose, its forward kinematics and rotation updates through the joint limits) and
//! [`iteration`] (residuals, the iteration loop with its cap, tolerance, stall exit and
//! colinear bump, pole twists, full-body solving's second phase, and the final report).

mod bends;
mod goals;
pub(crate) use goals::{chain_root, validate_goal};
mod iteration;
mod workspace;

use super::{IterationParams, SolveReport};
use crate::error::{Result, TendonError};
use crate::goal::{EffectorPoint, Goal};
use crate::math::{angle_between, from_to};
use crate::rig::{Pose, Rig};
use glam::{Affine3A, Mat3A, Quat, Vec3};

/// Smallest length errors are measured against (a chain of zero-length bones).
pub(crate) const MIN_LENGTH_SCALE: f32 = 1e-12;

/// A joint whose lever is under this share of its parent's is a knuckle
/// (`Workspace::find_knuckles`).
pub(crate) const KNUCKLE_RATIO: f32 = 0.1;

/// How rotation targets are handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GoalMode {
    /// Position-only solvers (FABRIK, CCD, two-bone): a rotation target fixes the
    /// effector bone's orientation, and its chain above reaches for the point that
    /// orientation implies.
    Positional,
    /// The Jacobian solvers: rotation targets are rows of the system.
    Full,
}

/// A validated goal with everything a solver needs precomputed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PreparedGoal {
    /// The goal as given (rotation normalised).
    pub goal: Goal,
    /// Its position in the caller's goals.
    pub index: usize,
    /// The bone whose frame carries the point the solver positions (`None`: nothing moves it).
    pub owner: Option<usize>,
    /// That point in the owner's frame.
    pub local_point: Vec3,
    /// The goal's effector point (head or tail) in its bone's frame.
    pub effector_local: Vec3,
    /// Where the positioned point (`local_point` in `owner`) should go.
    pub target: Vec3,
    /// Armature-space rotation imposed on the effector bone after each step (positional mode).
    pub orientation: Option<Quat>,
    /// Range in `Workspace::goal_joints` of the bones the goal may turn, nearest first.
    pub joints: (usize, usize),
    /// Length of the chain the solver positions (sum of its segments).
    pub reach: f32,
    /// Length of the goal's own chain (never zero): position errors are measured against it.
    pub length_scale: f32,
    /// Absolute position tolerance for this goal.
    pub tolerance: f32,
    /// The nearest bone above the goal's chain that another goal turns (none with
    /// exclusive chains): turning it carries this goal's chain, so it serves this goal too.
    pub carrier: Option<usize>,
    /// The target lies beyond the reach of every moving bone above the goal's point (on a
    /// chain no other goal turns): no step can bring it nearer than stretching the chain
    /// towards it, which the driver does before and after iterating. Its distance then
    /// counts in no score (what steps minimise and the stall exit watches: it would
    /// outweigh every other goal's) and it pulls on no joint; residuals and reach are
    /// still measured from the target (see `Workspace::find_carriers`).
    pub beyond_reach: bool,
    /// The topmost moving bone the goal's point hangs from (its chain's top, or above
    /// through carriers), and the reach from that bone's head through every moving head
    /// down to the point: what decides whether the goal is within reach.
    pub base: usize,
    pub base_reach: f32,
}

/// Residuals of the current pose.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Evaluation {
    pub residual: f32,
    pub rotation_residual: f32,
    pub reached: bool,
    /// Weighted sum of squared relative errors: what the driver watches for progress.
    pub score: f64,
    /// The same sum over the goals whose targets lie within their chains' reach, and
    /// whether all of those are reached: the error of a target out of reach stays however
    /// the others converge, so progress is also judged without it.
    pub within_reach_score: f64,
    pub within_reach_reached: bool,
    /// Whether every goal within reach is reached (a target beyond reach counts as
    /// settled: its chain is stretched towards it, see [`PreparedGoal::beyond_reach`]).
    /// Solving ends there.
    pub settled: bool,
}

/// The working state of one solver, reused from solve to solve.
#[derive(Debug, Clone)]
pub(crate) struct Workspace {
    pub pose: Pose,
    pub world: Vec<Affine3A>,
    /// Each bone's rest transform times its (fixed) pose translation: the part of its local
    /// matrix a solve never changes (set for the bones on the goals' paths only).
    pub fixed_local: Vec<Affine3A>,
    /// Rotation part of each bone's armature-space frame (rest and pose rotations only).
    pub world_rot: Vec<Quat>,
    pub goals: Vec<PreparedGoal>,
    pub goal_joints: Vec<usize>,
    /// Euler angles of limited joints, kept near their previous values between steps.
    pub euler: Vec<[f32; 3]>,
    /// Smallest index any goal may move: forward kinematics restarts here.
    pub first_active: usize,
    pub mode: GoalMode,
    /// Whether each goal may move only its own (exclusive) chain.
    pub exclusive: bool,
    /// The validated start pose's rotations and translations (fallbacks for `write_pose`).
    pub start_rotations: Vec<Quat>,
    pub start_translations: Vec<Vec3>,
    /// Scratch for exclusive chains: bones an earlier goal's chain moves.
    claimed: Vec<bool>,
    /// Scratch for `refresh_path`.
    path: Vec<usize>,
    /// Scratch for `leave_out_shared_beyond_reach`, by goal.
    kept_beyond: Vec<bool>,
    /// The chains' knuckles, by bone (`Workspace::find_knuckles`).
    pub knuckles: Vec<bool>,
    /// Scratch for `move_root`: the goals the root's translation serves.
    root_goals: Vec<usize>,
    /// Scratch of `move_root`: the goals tried without one of them.
    root_trial: Vec<usize>,
    /// Whether this solve's root has had to move for a goal beyond reach (only then does
    /// it also follow the goals' remaining errors).
    root_needed: bool,
    /// The goals given, validated, with weight (their index among those given).
    valid_goals: Vec<(usize, Goal)>,
    /// The goals' bones and their ancestors, depth-first: the bones whose frames
    /// [`Workspace::forward_kinematics`] keeps current.
    pub goal_paths: Vec<usize>,
    /// Whether any goal may turn each bone.
    pub moving: Vec<bool>,
    /// Full-body solving: the pose the exclusive chains reached, and which goals (by the
    /// caller's index) it reached, while the shared chains try for the rest.
    exclusive_pose: Pose,
    exclusive_reached: Vec<bool>,
    exclusive_score: f64,
    shared_start: Pose,
    /// Whether full-body solving may run its second phase (a caller with a reaching
    /// answer of its own to fall back on turns it off).
    pub second_phase: bool,
    /// Each goal's bends in the start pose, top first: at each joint below the chain's top
    /// joint, the bend's normal in the frame of the bone above it, or none where the chain
    /// is straight (`bend_start[from..to]` with `(from, to) = bend_slots[i]` for the goal
    /// the caller gave `i`-th: the workspace's goals are sorted, and sorted again when
    /// full-body solving prepares its second phase); and scratch for the chain's points
    /// now (see `Workspace::keep_bend_sides`).
    bend_start: Vec<Option<Vec3>>,
    bend_slots: Vec<(usize, usize)>,
    /// Whether `record_bends` keeps what it has (a retry from a stalled pose measures
    /// against the caller's start, not the stall's).
    pub bends_frozen: bool,
    bend_points: Vec<Vec3>,
    /// Set by [`Apart`](crate::solvers::Apart) for the next [`Workspace::prepare`] only:
    /// its start is an earlier solve's answer (of the same rig), already validated.
    pub(crate) trusted_start: bool,
    /// Whether [`Workspace::prepare`] leaves the goals' Blender-style poles as the start has
    /// them: the start goes on from a solve that aimed them already (a tension minimiser
    /// relaxing a start solve's answer, a finish or a retry from a stalled pose). Aimed
    /// again there, the turn about the root-to-target line was measured on an already bent,
    /// turned chain, and the knee's plane left Blender's by up to 5.7 degrees.
    pub(crate) poles_aimed: bool,
}

impl Default for Workspace {
    fn default() -> Self {
        Workspace {
            pose: Pose::rest(0),
            world: Vec::new(),
            fixed_local: Vec::new(),
            world_rot: Vec::new(),
            goals: Vec::new(),
            goal_joints: Vec::new(),
            euler: Vec::new(),
            first_active: 0,
            mode: GoalMode::Positional,
            exclusive: false,
            start_rotations: Vec::new(),
            start_translations: Vec::new(),
            claimed: Vec::new(),
            path: Vec::new(),
            kept_beyond: Vec::new(),
            knuckles: Vec::new(),
            root_goals: Vec::new(),
            root_trial: Vec::new(),
            root_needed: false,
            valid_goals: Vec::new(),
            goal_paths: Vec::new(),
            moving: Vec::new(),
            exclusive_pose: Pose::rest(0),
            exclusive_reached: Vec::new(),
            exclusive_score: 0.0,
            shared_start: Pose::rest(0),
            second_phase: true,
            bend_start: Vec::new(),
            bend_slots: Vec::new(),
            bends_frozen: false,
            bend_points: Vec::new(),
            trusted_start: false,
            poles_aimed: false,
        }
    }
}

/// The component of `v` perpendicular to the unit vector `axis`.
#[inline]
pub(crate) fn reject(v: Vec3, axis: Vec3) -> Vec3 {
    v - axis * v.dot(axis)
}
