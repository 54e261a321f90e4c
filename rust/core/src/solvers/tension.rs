//! The tension minimiser: natural poses within joint limits.
//!
//! Each joint the goals move is decomposed into Euler angles in its own order (the
//! representation nearest its start, so nothing jumps by 2*pi); the unlocked angles are
//! the degrees of freedom (locked axes are not degrees of freedom at all). The downhill
//! simplex ([`Simplex`]) minimises the goals' weighted squared error (relative to each
//! chain's length, times `reach_weight`) plus every joint's tension
//! `R * (a / P)^1.25 + (a / P)^16` per axis and side ([`JointLimits::tension_of`]), where
//! `a` are the Euler angles of the joint's turn away from the reference pose
//! ([`TensionReference`]: the rest pose, the pose before the solve, or a stored pose;
//! from a reference other than rest the turn costs alike both ways, and the wall stays at
//! the thresholds from rest: [`JointLimits::tension_from`]). For a joint with ranges the
//! turn is the change of each Euler angle (the simplex's own coordinates); a joint without
//! them has no anatomical axes, and its turn is measured as a rotation vector. A reference
//! outside the ranges is measured from its nearest rotation within them.
//! The limits' ranges stay anatomical: relative to rest, whatever the reference.
//! Angles are clamped into their ranges, and leaving a range costs a penalty, so the
//! simplex stays inside. The simplex starts scaled to each joint's range and restarts when
//! it collapses; a final damped least squares pass, also within the limits, closes what is
//! left of the distance to the targets.
//!
//! [`JointLimits::tension_of`]: crate::JointLimits::tension_of
//! [`JointLimits::tension_from`]: crate::JointLimits::tension_from

use super::driver::{GoalMode, Workspace};
use super::{IterationParams, JacobianDls, JacobianDlsParams, SolveReport, Solver};
use crate::error::{Result, TendonError};
use crate::goal::{EffectorPoint, Goal};
use crate::math::simplex::{Simplex, SimplexParams};
use crate::rig::{AxisLimit, Pose, Rig};
use crate::Fabrik;
use glam::Quat;
use serde::{Deserialize, Serialize};

/// Where the tension minimiser starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TensionStart {
    /// From the start pose.
    Pose,
    /// From FABRIK's solution (then relaxed).
    Fabrik,
    /// From damped least squares' solution, within the limits (then relaxed): the
    /// default, since the simplex relaxes best from a pose that already reaches.
    #[default]
    JacobianDls,
}

/// The pose tension is measured from: relaxing pulls each joint towards it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TensionReference {
    /// The rest pose.
    Rest,
    /// The pose before the solve ("move as little as needed"): the start pose, or when
    /// baking from the previous frame's answer, the frame's animated pose
    /// ([`Solver::solve_near`]).
    #[default]
    Start,
    /// The pose given to [`TensionMinimizer::set_reference_pose`].
    Pose,
}

/// Settings of [`TensionMinimizer`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TensionParams {
    /// Tolerances; `max_iterations` caps the final damped least squares pass.
    #[serde(flatten)]
    pub iteration: IterationParams,
    /// Most objective evaluations of the simplex.
    pub max_evaluations: u32,
    /// Simplex restarts after a collapse.
    pub restarts: u32,
    /// How much reaching counts against relaxing: the weight of the squared error
    /// (relative to the chain's length) against the summed tension.
    pub reach_weight: f32,
    /// Where the search starts.
    pub start: TensionStart,
    /// Close the remaining distance with damped least squares (within the limits).
    pub polish: bool,
    /// The pose tension is measured from.
    pub reference: TensionReference,
    /// With the start as the reference: how much each limited joint is also pulled
    /// towards its limits' neutral (the pose its angles measure from; for Human Limits a
    /// relaxed standing pose), as a factor on the same soft cost measured from the
    /// neutral instead of the start ([`JointLimits::tension_from`]; a stored reference
    /// pose is what the user asked for, and is measured from alone). A start that
    /// already reaches every goal is left as it is: the pull chooses among the poses that
    /// must move.
    /// 0 measures from the start alone; then frames solved each from the last wander
    /// (bench_mocap with Human Limits, tuning clips, warm start, mean angle from the
    /// actor's pose: limbs 22.9 deg with 0, 15.0 with 0.5; full body 30.0 and 24.6).
    ///
    /// [`JointLimits::tension_from`]: crate::JointLimits::tension_from
    pub comfort: f32,
}

/// The move of the targets (from the start's effectors, relative to each chain's length)
/// from which the pull towards the neutral (`TensionParams::comfort`) takes its full weight;
/// below it the pull shrinks with the move (see `TensionMinimizer::comfort_share`).
const FULL_COMFORT_MOVE: f32 = 0.02;

impl Default for TensionParams {
    fn default() -> Self {
        TensionParams {
            iteration: IterationParams {
                max_iterations: 200,
                // The damped least squares passes' (the start and the polish) own clamp:
                // with the generic half turn, a step from a hinge folded near a bound of
                // its range landed on the bound and stalled there (a chain limited to
                // +-179 degrees, folded back 150-178: 9 of 12 reachable targets reached).
                max_step_angle: JacobianDlsParams::default().iteration.max_step_angle,
                ..IterationParams::default()
            },
            max_evaluations: 400,
            restarts: 1,
            reach_weight: 1e3,
            start: TensionStart::default(),
            polish: true,
            reference: TensionReference::default(),
            comfort: 0.5,
        }
    }
}

/// The reach weight that judges sending a degree of freedom back to its reference: any
/// reach it costs outweighs tension (a relative error of 1e-6 squared, times this, is
/// already 1), so goals already reached stay reached and the polish has nothing to move.
const SNAP_REACH_WEIGHT: f64 = 1e12;

/// Fewest simplex evaluations a group gets, however small its share.
const MIN_GROUP_EVALUATIONS: u32 = 300;

/// One degree of freedom: an unlocked Euler axis of a joint, or an axis of the root's
/// translation (with `move_root`).
#[derive(Debug, Clone, Copy)]
struct Dof {
    /// Index into the joints (for a rotation) or the root bone (for a translation).
    bone: usize,
    axis: usize,
    /// The range, or None when free.
    range: Option<(f32, f32)>,
    translation: bool,
}

/// Goals that share no moving joint with other goals, and what minimising them alone needs:
/// ranges into the minimiser's goal, degree-of-freedom, joint and refresh lists. Separate
/// limbs are separate groups; chains up a shared spine are one. Each group is a simplex of
/// its own: a few dimensions converge in far fewer evaluations than all of them at once,
/// and an evaluation refreshes only the group's bones.
#[derive(Debug, Clone)]
struct Group {
    goals: std::ops::Range<usize>,
    dofs: std::ops::Range<usize>,
    joints: std::ops::Range<usize>,
    refresh: std::ops::Range<usize>,
}

/// A joint's reference rotation: its inverse and its Euler angles (None: rest).
type Reference = Option<(Quat, [f32; 3])>;

/// The tension minimiser (see the module documentation).
#[derive(Debug, Clone)]
pub struct TensionMinimizer {
    /// Settings.
    pub params: TensionParams,
    ws: Workspace,
    simplex: Simplex,
    dofs: Vec<Dof>,
    /// The joints moved, with their Euler angles (locked axes at zero).
    joints: Vec<(usize, [f32; 3])>,
    /// Per joint, the inverse of its reference rotation and the reference's Euler angles
    /// (None: the reference is rest).
    reference_inverse: Vec<Reference>,
    /// The stored pose of [`TensionReference::Pose`].
    reference_pose: Option<Pose>,
    /// The bones whose frames an evaluation refreshes, parents first: every goal's chain
    /// down to its effector bone (each group's bones together).
    refresh: Vec<usize>,
    /// The independent parts of the problem, each minimised on its own (see [`Group`]).
    groups: Vec<Group>,
    /// The goals of each group, together.
    group_goals: Vec<usize>,
    /// Scratch for grouping: each goal's representative, and the goal that first claimed
    /// each moving bone above its effector.
    leader: Vec<usize>,
    claimed: Vec<usize>,
    x: Vec<f32>,
    steps: Vec<f32>,
    first: Pose,
    /// The start with the goals' joints at a stored reference pose.
    seed: Pose,
    /// The relaxed pose the polish starts from.
    relaxed: Pose,
    fabrik: Fabrik,
    dls: JacobianDls,
}

impl Default for TensionMinimizer {
    fn default() -> Self {
        TensionMinimizer::new(TensionParams::default())
    }
}

impl TensionMinimizer {
    /// A solver with these settings.
    pub fn new(params: TensionParams) -> Self {
        TensionMinimizer {
            params,
            ws: Workspace::default(),
            simplex: Simplex::default(),
            dofs: Vec::new(),
            joints: Vec::new(),
            reference_inverse: Vec::new(),
            reference_pose: None,
            refresh: Vec::new(),
            groups: Vec::new(),
            group_goals: Vec::new(),
            leader: Vec::new(),
            claimed: Vec::new(),
            x: Vec::new(),
            steps: Vec::new(),
            first: Pose::rest(0),
            seed: Pose::rest(0),
            relaxed: Pose::rest(0),
            fabrik: Fabrik::default(),
            dls: {
                let mut dls = JacobianDls::default();
                dls.allow_scaled_start(false);
                dls
            },
        }
    }
}

impl TensionMinimizer {
    /// Stores the pose of [`TensionReference::Pose`] (local rotations relative to rest, in
    /// the rig's depth-first order; `None` forgets it).
    pub fn set_reference_pose(&mut self, pose: Option<Pose>) {
        self.reference_pose = pose;
    }

    /// The stored reference pose.
    pub fn reference_pose(&self) -> Option<&Pose> {
        self.reference_pose.as_ref()
    }

    /// The share of the pull towards the neutral this solve takes: the targets' largest
    /// move from the start's effectors (relative to each chain's length) over
    /// [`FULL_COMFORT_MOVE`], at most 1. The pull chooses among the poses that must move;
    /// taken whole for a nudge, it moved the pose a seventeenth of the way to the neutral
    /// at every solve, however small the move: with Human Limits an arm posed by hand
    /// turned 1.4 degrees for a target moved 1 mm, and 25-35 degrees after 200 nudges of
    /// 1 mm and back (live posing), where damped least squares turned it by none.
    fn comfort_share(
        &mut self,
        rig: &Rig,
        start: &Pose,
        goals: &[Goal],
        params: &TensionParams,
    ) -> Result<f32> {
        self.ws
            .prepare(rig, start, goals, GoalMode::Full, &params.iteration)?;
        let ws = &self.ws;
        let moved = (0..ws.goals.len())
            .map(|g| ws.effector(g).distance(ws.goals[g].goal.target) / ws.goals[g].length_scale)
            .fold(0.0f32, f32::max);
        Ok((moved / FULL_COMFORT_MOVE).min(1.0))
    }

    /// Checks the reference pose the settings name fits `rig` and is finite.
    fn check_reference(&self, rig: &Rig, near: &Pose) -> Result<()> {
        let bad = |reason: String| TendonError::InvalidValue {
            what: "tension reference pose".into(),
            reason,
        };
        let reference = match self.params.reference {
            TensionReference::Rest => return Ok(()),
            TensionReference::Start => near,
            TensionReference::Pose => self
                .reference_pose
                .as_ref()
                .ok_or_else(|| bad("the reference is 'pose' but no pose was stored".into()))?,
        };
        if reference.len() != rig.len() {
            return Err(bad(format!(
                "the pose has {} bones, the rig {}",
                reference.len(),
                rig.len()
            )));
        }
        match reference.rotations.iter().position(|q| !q.is_finite()) {
            Some(bone) => Err(TendonError::NonFinite {
                what: format!("tension reference rotation of bone '{}'", rig.name(bone)),
            }),
            None => Ok(()),
        }
    }
}

impl Solver for TensionMinimizer {
    fn iteration_params(&self) -> IterationParams {
        self.params.iteration
    }

    fn solve_into(
        &mut self,
        rig: &Rig,
        start: &Pose,
        goals: &[Goal],
        out: &mut Pose,
    ) -> Result<SolveReport> {
        self.solve_near(rig, start, start, goals, out)
    }

    fn uses_near(&self) -> bool {
        self.params.reference == TensionReference::Start
    }

    fn solve_near(
        &mut self,
        rig: &Rig,
        start: &Pose,
        near: &Pose,
        goals: &[Goal],
        out: &mut Pose,
    ) -> Result<SolveReport> {
        let mut params = self.params;
        for (what, value) in [
            ("reach_weight", params.reach_weight),
            ("comfort", params.comfort),
        ] {
            if !(value.is_finite() && value >= 0.0) {
                return Err(TendonError::InvalidValue {
                    what: what.into(),
                    reason: format!("{value} must be a finite number >= 0"),
                });
            }
        }
        if params.reference != TensionReference::Start {
            params.comfort = 0.0;
        } else if params.comfort > 0.0 {
            params.comfort *= self.comfort_share(rig, start, goals, &params)?;
        }
        // With the start as the reference, the workspace's own checks of the start suffice.
        if !(params.reference == TensionReference::Start && std::ptr::eq(start, near)) {
            self.check_reference(rig, near)?;
        }
        // A stored reference is where the search starts: the goals' joints take its
        // rotations (the other bones keep the start's), so the reaching pose found first is
        // one near the reference, which the simplex alone could not travel to.
        let start = match (params.reference, &self.reference_pose) {
            (TensionReference::Pose, Some(reference)) => {
                self.ws
                    .prepare(rig, start, goals, GoalMode::Full, &params.iteration)?;
                self.seed.copy_from(start);
                for g in 0..self.ws.goals.len() {
                    for &bone in self.ws.joints(g) {
                        self.seed.rotations[bone] = reference.rotations[bone];
                    }
                }
                &self.seed
            }
            _ => start,
        };
        // Optionally start from another solver's answer.
        let first = match params.start {
            TensionStart::Pose => None,
            TensionStart::Fabrik => {
                self.fabrik.params.iteration = params.iteration;
                Some(self.fabrik.solve_into(rig, start, goals, &mut self.first)?)
            }
            TensionStart::JacobianDls => {
                self.dls.params.iteration = params.iteration;
                Some(self.dls.solve_into(rig, start, goals, &mut self.first)?)
            }
        };
        if let Some(report) = first.filter(|r| !r.reached) {
            // Out of reach: relaxing could only pull the chain further from the target.
            out.copy_from(&self.first);
            return Ok(report);
        }
        let from = if first.is_some() { &self.first } else { start };
        // The start solve aimed the poles already (see `Workspace::poles_aimed`).
        self.ws.poles_aimed = first.is_some();
        let prepared = self
            .ws
            .prepare(rig, from, goals, GoalMode::Full, &params.iteration);
        self.ws.poles_aimed = false;
        prepared?;
        self.collect_dofs(rig);
        let reference = match params.reference {
            TensionReference::Rest => None,
            TensionReference::Start => Some(near),
            TensionReference::Pose => self.reference_pose.as_ref(),
        };
        self.reference_inverse.clear();
        self.reference_inverse
            .extend(self.joints.iter().map(|&(bone, angles)| {
                let limits = rig.limits(bone);
                // A reference outside the joint's limits (an imported or captured pose) is
                // measured from its nearest rotation within them: the turn that merely brings
                // it inside costs nothing. Measured from outside, that turn was paid about
                // other axes: a forearm starting 7 degrees past its side-bend range of 5,
                // where side bend is stiff, twisted 60 degrees to make the turn look cheap
                // (TENSION with Human Limits on a Daz-named clip: forearms 52 degrees off).
                let q = reference.map_or(Quat::IDENTITY, |pose| {
                    limits.clamp_rotation(pose.rotations[bone].normalize())
                });
                // Rest as the reference is `None` (measured as in `JointLimits::tension_of`)
                // unless the angles measure from a neutral elsewhere.
                let at_rest =
                    q.abs_diff_eq(Quat::IDENTITY, 1e-7) && limits.neutral == Quat::IDENTITY;
                (!at_rest).then(|| (q.conjugate(), limits.angles_of(q, angles)))
            }));
        let at_start = self.ws.report_now(&params.iteration, 0);
        let relaxed =
            self.joints
                .iter()
                .zip(&self.reference_inverse)
                .all(|(&(bone, angles), inverse)| {
                    let rotation = rig.limits(bone).rotation_of(angles);
                    joint_tension(rig, bone, angles, rotation, inverse, params.comfort) == 0.0
                });
        // Measured from the start, a start that already reaches every goal is where the
        // minimiser would end but for the pull towards the neutral (`comfort`), which is
        // there to choose among the poses that must move, not to move a pose that need not:
        // solving again crept the pose towards the neutral each time (a joint of the
        // limited humanoid 2.8 degrees in ten solves), and a bake through every frame a
        // target held still.
        let start_reaches = at_start.reached
            && params.reference == TensionReference::Start
            && !matches!(first, Some(report) if report.iterations > 0);
        if at_start.reached && relaxed || start_reaches {
            // Reached with nothing to relax: nothing to minimise.
            return Ok(self.ws.finish(rig, &params.iteration, 0, out));
        }
        let simplex_params = SimplexParams {
            max_evaluations: params.max_evaluations,
            restarts: params.restarts,
            // A hundredth of each initial step (a few thousandths of a radian) and 1e-4 of
            // the objective: finer relaxing changes nothing visible, and the polish
            // settles the reach.
            size_tolerance: 1e-2,
            value_tolerance: 1e-4,
        };
        let reach_weight = params.reach_weight as f64;
        let total_dofs = self.dofs.len().max(1);
        let mut evaluations = 0;
        for group in &self.groups {
            let (dofs, goals, refresh) = (
                &self.dofs[group.dofs.clone()],
                &self.group_goals[group.goals.clone()],
                &self.refresh[group.refresh.clone()],
            );
            // A pole sets the plane its chain bends in, which relaxing would leave (the
            // knee 0.8-9 cm off the pole's plane on a two-bone leg): such a group keeps
            // the pose the start solve gave it, the pole's.
            if goals.iter().any(|&g| self.ws.goals[g].goal.pole.is_some()) {
                continue;
            }
            let (ws, joints, references) =
                (&mut self.ws, &mut self.joints, &self.reference_inverse);
            let joint_range = group.joints.clone();
            // The evaluations shared out by degrees of freedom, enough for a small group.
            let share = (params.max_evaluations as usize * dofs.len() / total_dofs) as u32;
            let group_params = SimplexParams {
                max_evaluations: share.max(MIN_GROUP_EVALUATIONS.min(params.max_evaluations)),
                ..simplex_params
            };
            // A simplex needs one evaluation per degree of freedom, and one, before its
            // first move: a group its share cannot pay that for keeps the start solve's
            // pose (a 400-bone chain with a cap of 10 spent 1201 evaluations there and
            // moved nothing; 5000 bones took seconds).
            if dofs.len() as u32 >= group_params.max_evaluations {
                continue;
            }
            let mut evaluate = |x: &[f32], reach_weight: f64| {
                objective(
                    ws,
                    rig,
                    dofs,
                    joints,
                    joint_range.clone(),
                    references,
                    refresh,
                    goals,
                    x,
                    reach_weight,
                    params.comfort,
                )
            };
            let x = &mut self.x[group.dofs.clone()];
            let report = self.simplex.minimize(
                |x| evaluate(x, reach_weight),
                x,
                &self.steps[group.dofs.clone()],
                &group_params,
            );
            // Degrees of freedom no goal feels (a hand's twist about the line to its
            // target) keep whatever turn the simplex left them, and from frame to frame
            // (warm starts) that wanders: each goes back to its reference value when that
            // costs no reach (judged with reach weighed far above tension): one evaluation
            // each at most, fewer than the group's share (see above).
            let mut best = evaluate(x, SNAP_REACH_WEIGHT);
            let mut snap_evaluations = 1;
            for (k, dof) in dofs.iter().enumerate() {
                if dof.translation {
                    continue;
                }
                let reference = references[dof.bone].map_or(0.0, |(_, angles)| angles[dof.axis]);
                let reference = dof
                    .range
                    .map_or(reference, |(lo, hi)| reference.clamp(lo, hi));
                let value = x[k];
                if (value - reference).abs() < 1e-6 {
                    continue;
                }
                x[k] = reference;
                let tried = evaluate(x, SNAP_REACH_WEIGHT);
                snap_evaluations += 1;
                if tried <= best {
                    best = tried;
                } else {
                    x[k] = value;
                }
            }
            // Leave the workspace at the best point (the last evaluation may be another).
            evaluate(x, reach_weight);
            evaluations += report.evaluations + snap_evaluations + 1;
        }
        // Also refreshes the bones below the chains, which the search left stale.
        let result = self
            .ws
            .finish(rig, &params.iteration, evaluations, &mut self.relaxed);
        if params.polish && !result.reached {
            self.dls.params = JacobianDlsParams {
                iteration: params.iteration,
                ..JacobianDlsParams::default()
            };
            // The start solve reached (else it was returned above): the polish must not
            // trade the full body's priorities for reach it can fall back on.
            self.dls.allow_second_phase(false);
            self.dls.start_poles_aimed(true);
            let polished = self.dls.solve_into(rig, &self.relaxed, goals, out);
            self.dls.start_poles_aimed(false);
            self.dls.allow_second_phase(true);
            let polished = polished?;
            if !polished.reached {
                if let Some(reached) = first {
                    // Relaxing cost the reach and the polish could not win it back: the
                    // start solver's reaching pose (still in `first`) is the better answer.
                    out.copy_from(&self.first);
                    return Ok(reached);
                }
            }
            return Ok(SolveReport {
                iterations: result.iterations + polished.iterations,
                ..polished
            });
        }
        out.copy_from(&self.relaxed);
        Ok(result)
    }
}

impl TensionMinimizer {
    /// Splits the goals into groups that share no moving joint (one group when the root
    /// translates: that moves every goal), ordered by group in `group_goals`.
    fn group_goals(&mut self, rig: &Rig) {
        const NONE: usize = usize::MAX;
        let count = self.ws.goals.len();
        self.leader.clear();
        self.leader.extend(0..count);
        self.claimed.clear();
        self.claimed.resize(rig.len(), NONE);
        fn find(leader: &mut [usize], mut g: usize) -> usize {
            while leader[g] != g {
                leader[g] = leader[leader[g]];
                g = leader[g];
            }
            g
        }
        for g in 0..count {
            if self.params.iteration.move_root {
                self.leader[g] = 0;
                continue;
            }
            // Every moving bone above the effector moves it: goals that share one interact.
            let mut bone = Some(self.ws.goals[g].goal.bone);
            while let Some(b) = bone {
                if self.ws.moving[b] {
                    match self.claimed[b] {
                        NONE => self.claimed[b] = g,
                        other => {
                            let (a, c) = (find(&mut self.leader, g), find(&mut self.leader, other));
                            self.leader[a.max(c)] = a.min(c);
                        }
                    }
                }
                bone = rig.parent(b);
            }
        }
        for g in 0..count {
            let root = find(&mut self.leader, g);
            self.leader[g] = root;
        }
        self.group_goals.clear();
        self.group_goals.extend(0..count);
        let leader = &self.leader;
        self.group_goals.sort_by_key(|&g| (leader[g], g));
    }

    /// The groups of goals ([`Group`]), and for each the degrees of freedom of every joint
    /// its goals may move, their start values, the simplex's initial steps (a quarter of a
    /// range, half a radian when free) and the bones an evaluation refreshes.
    fn collect_dofs(&mut self, rig: &Rig) {
        self.dofs.clear();
        self.joints.clear();
        self.x.clear();
        self.steps.clear();
        self.refresh.clear();
        self.groups.clear();
        self.group_goals(rig);
        let move_root = self.params.iteration.move_root;
        let mut first = 0;
        while first < self.group_goals.len() {
            let leader = self.leader[self.group_goals[first]];
            let end = (first..self.group_goals.len())
                .find(|&k| self.leader[self.group_goals[k]] != leader)
                .unwrap_or(self.group_goals.len());
            let (dofs, joints, refresh) = (self.dofs.len(), self.joints.len(), self.refresh.len());
            for k in first..end {
                let g = self.group_goals[k];
                self.collect_goal(rig, g, joints);
            }
            // The root moves only for goals beyond reach where it stands (it drifted a
            // millimetre or two with every target within reach; found by a helper review).
            if move_root && self.ws.any_beyond_reach() {
                self.collect_root(rig);
            }
            self.refresh[refresh..].sort_unstable();
            let kept = dedup_in_place(&mut self.refresh[refresh..]);
            self.refresh.truncate(refresh + kept);
            self.groups.push(Group {
                goals: first..end,
                dofs: dofs..self.dofs.len(),
                joints: joints..self.joints.len(),
                refresh: refresh..self.refresh.len(),
            });
            first = end;
        }
    }

    /// Goal `g`'s bones to refresh and its joints' degrees of freedom (joints from
    /// `group_joints` on belong to its group: one already there is not added again).
    fn collect_goal(&mut self, rig: &Rig, g: usize, group_joints: usize) {
        let goal = self.ws.goals[g].goal;
        let effector = goal.bone;
        let top = match self.params.iteration.move_root {
            // The root's translation moves every goal: refresh from the root.
            true => self.ws.root_of_goals(rig),
            false => self.ws.joints(g).last().copied().unwrap_or(effector),
        };
        // From the effector up to the chain's top: all the goal's error depends on.
        let mut bone = effector;
        loop {
            self.refresh.push(bone);
            if bone == top {
                break;
            }
            match rig.parent(bone) {
                Some(parent) => bone = parent,
                None => break,
            }
        }
        // A head goal without a rotation target cannot feel its own bone's rotation.
        let idle =
            (goal.point == EffectorPoint::Head && goal.rotation.is_none()).then_some(goal.bone);
        for k in 0..self.ws.joints(g).len() {
            let bone = self.ws.joints(g)[k];
            if Some(bone) == idle || self.joints[group_joints..].iter().any(|(b, _)| *b == bone) {
                continue;
            }
            let limits = rig.limits(bone);
            if limits.is_fully_locked() {
                // No freedom: left as it starts (posing it from its angles would put it at
                // rest).
                continue;
            }
            let angles = limits.angles_of(self.ws.pose.rotations[bone], self.ws.euler[bone]);
            let slot = self.joints.len();
            self.joints.push((bone, [0.0; 3]));
            for (axis, limit) in limits.axes().into_iter().enumerate() {
                let range = match limit {
                    AxisLimit::Locked => continue,
                    AxisLimit::Free => None,
                    AxisLimit::Range { min, max } if max - min >= std::f32::consts::TAU => None,
                    AxisLimit::Range { min, max } => Some((min, max)),
                };
                let value = range.map_or(angles[axis], |(lo, hi)| angles[axis].clamp(lo, hi));
                self.joints[slot].1[axis] = value;
                self.dofs.push(Dof {
                    bone: slot,
                    axis,
                    range,
                    translation: false,
                });
                self.x.push(value);
                self.steps
                    .push(range.map_or(0.5, |(lo, hi)| (0.25 * (hi - lo)).max(0.02)));
            }
        }
    }

    /// The root's translation as three more degrees of freedom (`move_root`).
    fn collect_root(&mut self, rig: &Rig) {
        if self.ws.goals.is_empty() {
            return;
        }
        let root = self.ws.root_of_goals(rig);
        let scale = self
            .ws
            .goals
            .iter()
            .map(|g| g.length_scale)
            .fold(0.0, f32::max);
        for axis in 0..3 {
            self.dofs.push(Dof {
                bone: root,
                axis,
                range: None,
                translation: true,
            });
            self.x.push(self.ws.pose.translations[root][axis]);
            self.steps.push(0.1 * scale);
        }
    }
}

/// Removes consecutive duplicates of the sorted `values` in place; returns how many remain.
fn dedup_in_place(values: &mut [usize]) -> usize {
    let mut kept = 0;
    for i in 0..values.len() {
        if kept == 0 || values[i] != values[kept - 1] {
            values[kept] = values[i];
            kept += 1;
        }
    }
    kept
}

/// The simplex's objective at `x`: poses the joints, runs forward kinematics and adds the
/// weighted reach error, the tension and the penalty for leaving a range.
#[allow(clippy::too_many_arguments)]
fn objective(
    ws: &mut Workspace,
    rig: &Rig,
    dofs: &[Dof],
    joints: &mut [(usize, [f32; 3])],
    joint_range: std::ops::Range<usize>,
    references: &[Reference],
    refresh: &[usize],
    goals: &[usize],
    x: &[f32],
    reach_weight: f64,
    comfort: f32,
) -> f32 {
    let mut outside = 0.0f64;
    for (dof, &value) in dofs.iter().zip(x) {
        if dof.translation {
            ws.pose.translations[dof.bone][dof.axis] = value;
            ws.fixed_local[dof.bone] = *rig.rest_matrix(dof.bone)
                * glam::Affine3A::from_translation(ws.pose.translations[dof.bone]);
            continue;
        }
        let clamped = match dof.range {
            Some((lo, hi)) => value.clamp(lo, hi),
            None => value,
        };
        outside += ((value - clamped) as f64).powi(2);
        joints[dof.bone].1[dof.axis] = clamped;
    }
    let mut tension = 0.0f64;
    for (&(bone, angles), inverse) in joints[joint_range.clone()]
        .iter()
        .zip(&references[joint_range])
    {
        let rotation = rig.limits(bone).rotation_of(angles);
        ws.pose.rotations[bone] = rotation;
        tension += joint_tension(rig, bone, angles, rotation, inverse, comfort) as f64;
    }
    for &bone in refresh {
        ws.update_bone(rig, bone);
    }
    let score = ws.score_of(goals);
    (reach_weight * score + tension + 1e3 * outside) as f32
}

/// The tension of joint `bone` at Euler angles `angles` (relative to rest), measured from
/// the reference rotation whose inverse and Euler angles are `reference` (rest when None).
/// A joint with ranges turns by the change of each Euler angle: flexion, twist and side
/// bend each as itself. (Measured as one rotation vector in the bone's own axes, a further
/// bend of a twisted elbow had a side-bend part, and the stiff side bend priced it above
/// twisting the forearm 60 degrees as well: TENSION with Human Limits twisted forearms
/// 40-75 degrees on a Daz-named clip.) A joint without ranges turns by its rotation vector,
/// which has no axis singularity.
fn joint_tension(
    rig: &Rig,
    bone: usize,
    angles: [f32; 3],
    rotation: Quat,
    reference: &Reference,
    comfort: f32,
) -> f32 {
    let limits = rig.limits(bone);
    match reference {
        None => limits.tension_of(angles),
        Some((inverse, reference_angles)) => {
            let turn = if limits
                .axes()
                .iter()
                .any(|a| matches!(a, AxisLimit::Range { .. }))
            {
                let mut turn = [0.0f32; 3];
                for ((t, a), r) in turn.iter_mut().zip(angles).zip(reference_angles) {
                    let d = a - r;
                    *t = d - std::f32::consts::TAU * (d / std::f32::consts::TAU).round();
                }
                turn
            } else {
                limits.turn_angles(*inverse * rotation)
            };
            limits.tension_from(angles, turn, *reference_angles, comfort)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::EulerOrder;
    use crate::rig::{AxisTension, BoneDesc, JointLimits, RigDesc, SideTension, Transform};

    fn side(threshold: f32, rigidity: f32) -> SideTension {
        SideTension {
            threshold,
            rigidity,
        }
    }

    /// An elbow as Human Limits makes it: a one-way hinge (x), the forearm's twist (y,
    /// applied first), a stiff side bend of 5 degrees (z).
    fn elbow() -> Rig {
        let limits = JointLimits {
            order: EulerOrder::YZX,
            x: AxisLimit::Range { min: 0.0, max: 2.6 },
            y: AxisLimit::Range {
                min: -1.4,
                max: 1.4,
            },
            z: AxisLimit::Range {
                min: -0.087,
                max: 0.087,
            },
            tension: [
                AxisTension {
                    negative: side(0.05, 5.0),
                    positive: side(2.6, 0.3),
                },
                AxisTension {
                    negative: side(1.4, 1.0),
                    positive: side(1.4, 1.0),
                },
                AxisTension {
                    negative: side(0.087, 5.0),
                    positive: side(0.087, 5.0),
                },
            ],
            ..JointLimits::FREE
        };
        RigDesc {
            bones: vec![BoneDesc {
                limits,
                ..BoneDesc::new("forearm", None, Transform::IDENTITY, 0.3)
            }],
        }
        .build()
        .unwrap()
    }

    #[test]
    fn a_limited_joint_pays_for_each_angle_it_changes() {
        // From a twisted, bent elbow, bending it further is a change of flexion alone. As a
        // rotation vector in the twisted bone's axes it had a side-bend part that the stiff
        // side bend priced above twisting the forearm 60 degrees as well.
        let rig = elbow();
        let limits = rig.limits(0);
        let reference_angles = [2.0, 0.3, 0.087];
        let reference = limits.rotation_of(reference_angles);
        let from_reference = Some((reference.conjugate(), reference_angles));
        let cost = |angles: [f32; 3]| {
            joint_tension(
                &rig,
                0,
                angles,
                limits.rotation_of(angles),
                &from_reference,
                0.5,
            )
        };
        let bent = cost([1.7, 0.3, 0.087]);
        let bent_and_twisted = cost([1.7, -0.75, 0.0]);
        assert!(
            bent < bent_and_twisted,
            "bending {bent} vs bending and twisting {bent_and_twisted}"
        );
    }
}
