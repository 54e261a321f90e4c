//! Machinery shared by every solver: goal preparation, the working pose and its forward
//! kinematics, rotation updates through the joint limits, residuals, and the iteration
//! driver (iteration cap, tolerance, stall exit, colinear bump, pole twist).

use super::{IterationParams, SolveReport};
use crate::error::{ensure_finite, Result, TendonError};
use crate::goal::{EffectorPoint, Goal};
use crate::math::{angle_between, from_to};
use crate::rig::{Pose, Rig};
use glam::{Affine3A, Mat3A, Quat, Vec3};

/// An iteration that lowers the score by less than this fraction made no progress.
const STALL_RATIO: f64 = 1e-4;
/// Iterations without progress tolerated before giving up.
const STALL_PATIENCE: u32 = 2;
/// How often a solve may bend a colinear joint to escape the straight-chain dead end.
const MAX_BUMPS: u32 = 4;
/// Smallest length errors are measured against (a chain of zero-length bones).
const MIN_LENGTH_SCALE: f32 = 1e-12;
/// The bend applied to a colinear joint (radians).
const BUMP_ANGLE: f32 = 0.05;
/// Joints whose incoming and outgoing segments are closer than this angle are colinear.
const COLINEAR_ANGLE: f32 = 1e-3;

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
}

/// The working state of one solver, reused from solve to solve.
#[derive(Debug, Clone)]
pub(crate) struct Workspace {
    pub pose: Pose,
    pub world: Vec<Affine3A>,
    /// Each bone's rest transform times its (fixed) pose translation: the part of its local
    /// matrix a solve never changes.
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
            moving: Vec::new(),
            exclusive_pose: Pose::rest(0),
            exclusive_reached: Vec::new(),
            exclusive_score: 0.0,
            shared_start: Pose::rest(0),
            second_phase: true,
        }
    }
}

impl Workspace {
    /// Copies and validates the start pose, runs forward kinematics and prepares `goals`.
    pub fn prepare(
        &mut self,
        rig: &Rig,
        start: &Pose,
        goals: &[Goal],
        mode: GoalMode,
        params: &IterationParams,
    ) -> Result<()> {
        params.validate()?;
        self.mode = mode;
        self.pose.copy_from(start);
        self.pose.validate(rig)?;
        self.start_rotations.clear();
        self.start_rotations.extend_from_slice(&self.pose.rotations);
        self.start_translations.clear();
        self.start_translations
            .extend_from_slice(&self.pose.translations);
        let n = rig.len();
        self.world.resize(n, Affine3A::IDENTITY);
        self.world_rot.resize(n, Quat::IDENTITY);
        self.fixed_local.clear();
        self.fixed_local.extend(
            (0..n).map(|i| {
                *rig.rest_matrix(i) * Affine3A::from_translation(self.pose.translations[i])
            }),
        );
        self.euler.clear();
        for i in 0..n {
            let limits = rig.limits(i);
            self.euler.push(match limits.is_free() {
                true => [0.0; 3],
                false => limits.euler_of(self.pose.rotations[i]),
            });
        }
        self.first_active = 0;
        self.forward_kinematics(rig);

        self.goals.clear();
        self.goal_joints.clear();
        for (index, goal) in goals.iter().enumerate() {
            let goal = validate_goal(rig, index, goal)?;
            if goal.weight > 0.0 {
                let prepared = self.prepare_goal(rig, goal, params);
                self.goals.push(PreparedGoal { index, ..prepared });
            }
        }
        // Effectors in depth-first order, as the guide advises: earlier chains (the spine)
        // settle before the limbs hanging from them.
        self.goals.sort_by_key(|g| g.goal.bone);
        self.exclusive = params.exclusive_chains;
        if params.exclusive_chains {
            self.make_chains_exclusive(rig);
        }
        self.first_active = self
            .goals
            .iter()
            .filter(|g| g.joints.0 < g.joints.1)
            .map(|g| self.goal_joints[g.joints.1 - 1])
            .min()
            .unwrap_or(n);
        if params.move_root {
            // The root's translation moves everything below it.
            self.first_active = self.first_active.min(self.root_of_goals(rig));
        }
        self.find_carriers(rig);
        self.aim_blender_poles(rig);
        Ok(())
    }

    /// Orders the goals by their chains' top bones (depth-first) and cuts each chain where
    /// it meets a bone an earlier goal's chain moves.
    fn make_chains_exclusive(&mut self, rig: &Rig) {
        let joints = &self.goal_joints;
        let top = |g: &PreparedGoal| match g.joints.0 < g.joints.1 {
            true => joints[g.joints.1 - 1],
            false => usize::MAX,
        };
        self.goals.sort_by_key(|g| (top(g), g.goal.bone));
        self.claimed.clear();
        self.claimed.resize(rig.len(), false);
        for g in 0..self.goals.len() {
            let (start, end) = self.goals[g].joints;
            let kept = (start..end)
                .find(|&k| self.claimed[self.goal_joints[k]])
                .unwrap_or(end);
            for k in start..kept {
                self.claimed[self.goal_joints[k]] = true;
            }
            if kept < end {
                let goal = self.goals[g];
                let reach = match kept > start {
                    true => self.chain_reach(
                        rig,
                        goal.owner,
                        goal.local_point,
                        self.goal_joints[kept - 1],
                    ),
                    false => 0.0,
                };
                let cut = &mut self.goals[g];
                cut.joints.1 = kept;
                cut.reach = reach;
                if kept == start {
                    cut.owner = None;
                }
            }
        }
    }

    /// The root bone above the goals (the first goal's, for rigs with several roots).
    pub fn root_of_goals(&self, rig: &Rig) -> usize {
        let mut bone = self.goals.first().map_or(0, |g| g.goal.bone);
        while let Some(parent) = rig.parent(bone) {
            bone = parent;
        }
        bone
    }

    /// Moves the root by half the goals' weighted mean remaining error (goals below it).
    pub fn shift_root(&mut self, rig: &Rig) {
        let root = self.root_of_goals(rig);
        let (mut sum, mut weights) = (Vec3::ZERO, 0.0f32);
        for g in 0..self.goals.len() {
            let goal = &self.goals[g];
            if rig.subtree(root).contains(&goal.goal.bone) {
                sum += (goal.goal.target - self.effector(g)) * goal.goal.weight;
                weights += goal.goal.weight;
            }
        }
        if weights <= 0.0 || !sum.is_finite() {
            return;
        }
        let delta = 0.5 * sum / weights;
        // The pose translation applies in the root's rest frame.
        let rest = rig.rest(root);
        let local = rest.rotation.conjugate() * delta / rest.scale;
        if local.is_finite() {
            self.pose.translations[root] += local;
            self.fixed_local[root] =
                *rig.rest_matrix(root) * Affine3A::from_translation(self.pose.translations[root]);
            self.first_active = self.first_active.min(root);
            self.forward_kinematics(rig);
        }
    }

    /// Blender's pole convention (goals with a `pole_angle`), applied once before solving
    /// as Blender's IK does: the chain turns as a whole so the line from its root to its
    /// effector points at the target and the root bone's reference axis (X turned by the
    /// pole angle about Y) lies in the plane of root, target and pole, on the pole's side.
    /// The solve then bends the chain from there.
    fn aim_blender_poles(&mut self, rig: &Rig) {
        let mut turned = false;
        for g in 0..self.goals.len() {
            let goal = self.goals[g].goal;
            let (Some(pole), Some(angle)) = (goal.pole, goal.pole_angle) else {
                continue;
            };
            let Some(&top) = self.joints(g).last() else {
                continue;
            };
            if turned {
                self.forward_kinematics(rig);
            }
            let root = self.head(top);
            let (sin, cos) = angle.sin_cos();
            let up = Vec3::from(self.world[top].matrix3 * glam::Vec3A::new(cos, 0.0, sin));
            // Orthonormal frames from a direction and an up vector; None when degenerate.
            let frame = |dir: Vec3, up: Vec3| {
                let dir = dir.try_normalize()?;
                let side = dir.cross(up).try_normalize()?;
                Some(glam::Mat3::from_cols(side, side.cross(dir), -dir))
            };
            let now = frame(self.effector(g) - root, up);
            let wanted = frame(goal.target - root, pole - root);
            if let (Some(now), Some(wanted)) = (now, wanted) {
                let delta = Quat::from_mat3(&(wanted * now.transpose())).normalize();
                self.rotate_bone(rig, top, delta);
                turned = true;
            }
        }
        if turned {
            self.forward_kinematics(rig);
        }
    }

    fn prepare_goal(&mut self, rig: &Rig, goal: Goal, params: &IterationParams) -> PreparedGoal {
        let bone = goal.bone;
        let chain_root = chain_root(rig, bone, goal.chain_length);
        let mut orientation = None;
        let mut target = goal.target;
        let (mut owner, mut local_point) = match goal.point {
            EffectorPoint::Tail => (Some(bone), Vec3::new(0.0, rig.length(bone), 0.0)),
            EffectorPoint::Head => (rig.parent(bone), self.head_in_parent(bone)),
        };
        // The original chain's length sets the tolerance, whatever the solver positions.
        let length_scale = self
            .chain_reach(rig, owner, local_point, chain_root)
            .max(MIN_LENGTH_SCALE);
        let tolerance = params.tolerance * length_scale;
        if self.mode == GoalMode::Positional {
            if let Some(rotation) = goal.rotation.filter(|_| goal.rotation_weight > 0.0) {
                let current = self.world_rot[bone];
                let blended = current.slerp(rotation, goal.rotation_weight.min(1.0));
                if goal.point == EffectorPoint::Tail {
                    let (head, tail) = rig.head_tail(&self.world[bone], bone);
                    target -= (blended * current.conjugate()) * (tail - head);
                }
                orientation = Some(blended);
                owner = rig.parent(bone);
                local_point = self.head_in_parent(bone);
            }
        }
        // In full mode the effector bone itself turns for a rotation target even when the
        // positioned point is its head.
        let lowest = match self.mode {
            GoalMode::Full => Some(bone),
            GoalMode::Positional => owner,
        };
        let start = self.goal_joints.len();
        if let Some(mut j) = lowest {
            // `lowest` is the bone or its parent; it is in the chain unless it lies above the root.
            let in_chain = j == bone || rig.subtree(chain_root).contains(&j);
            if in_chain {
                loop {
                    self.goal_joints.push(j);
                    if j == chain_root {
                        break;
                    }
                    match rig.parent(j) {
                        Some(p) => j = p,
                        None => break,
                    }
                }
            }
        }
        let joints = (start, self.goal_joints.len());
        let has_joints = joints.0 < joints.1;
        let reach = if has_joints {
            self.chain_reach(rig, owner, local_point, chain_root)
        } else {
            0.0
        };
        let effector_local = match goal.point {
            EffectorPoint::Tail => Vec3::new(0.0, rig.length(bone), 0.0),
            EffectorPoint::Head => Vec3::ZERO,
        };
        PreparedGoal {
            index: 0,
            goal,
            effector_local,
            owner: owner.filter(|_| has_joints),
            local_point,
            target,
            orientation,
            joints,
            reach,
            length_scale,
            tolerance,
            carrier: None,
            base: self
                .goal_joints
                .get(joints.1.wrapping_sub(1))
                .copied()
                .filter(|_| has_joints)
                .unwrap_or(bone),
            base_reach: reach,
        }
    }

    /// Finds each goal's carrier and base (see [`PreparedGoal::carrier`]). Without
    /// exclusive chains a goal is served by every moving bone above its point, as the
    /// Jacobian solvers' columns are; chain-based solvers learn it from here.
    fn find_carriers(&mut self, rig: &Rig) {
        self.moving.clear();
        self.moving.resize(rig.len(), false);
        for &j in &self.goal_joints {
            self.moving[j] = true;
        }
        if self.exclusive {
            return;
        }
        for g in 0..self.goals.len() {
            let Some(&top) = self.joints(g).last() else {
                continue;
            };
            let (mut bone, mut reach, mut carrier) = (top, self.goals[g].reach, None);
            loop {
                let mut above = rig.parent(bone);
                while let Some(p) = above.filter(|&p| !self.moving[p]) {
                    above = rig.parent(p);
                }
                let Some(next) = above else { break };
                carrier.get_or_insert(next);
                reach += self.head(next).distance(self.head(bone));
                bone = next;
            }
            let goal = &mut self.goals[g];
            (goal.carrier, goal.base, goal.base_reach) = (carrier, bone, reach);
        }
    }

    /// Sum of the segments from the chain root's head, through each joint's head, to the
    /// point carried by `owner`.
    fn chain_reach(
        &self,
        rig: &Rig,
        owner: Option<usize>,
        local_point: Vec3,
        chain_root: usize,
    ) -> f32 {
        let Some(mut j) = owner else { return 0.0 };
        if !rig.subtree(chain_root).contains(&j) {
            return 0.0;
        }
        let mut reach = 0.0;
        let mut point = self.world[j].transform_point3(local_point);
        loop {
            let head = Vec3::from(self.world[j].translation);
            reach += point.distance(head);
            point = head;
            if j == chain_root {
                return reach;
            }
            match rig.parent(j) {
                Some(p) => j = p,
                None => return reach,
            }
        }
    }

    /// The joints goal `g` may turn, nearest the effector first.
    pub fn joints(&self, g: usize) -> &[usize] {
        let (a, b) = self.goals[g].joints;
        &self.goal_joints[a..b]
    }

    /// Forward kinematics from `first_active` on.
    pub fn forward_kinematics(&mut self, rig: &Rig) {
        for i in self.first_active..rig.len() {
            self.update_bone(rig, i);
        }
    }

    /// Recomputes bone `i`'s frame from its parent's (which must be current).
    #[inline]
    pub fn update_bone(&mut self, rig: &Rig, i: usize) {
        let local = self.local_matrix(i);
        let q = self.pose.rotations[i];
        let rot = rig.rest(i).rotation * q;
        match rig.parent(i) {
            Some(p) => {
                self.world[i] = self.world[p] * local;
                self.world_rot[i] = self.world_rot[p] * rot;
            }
            None => {
                self.world[i] = local;
                self.world_rot[i] = rot;
            }
        }
    }

    /// Bone `i`'s local matrix in the working pose: its fixed part, then rotation and scale.
    #[inline]
    pub fn local_matrix(&self, i: usize) -> Affine3A {
        let mut basis = Mat3A::from_quat(self.pose.rotations[i]);
        let scale = self.pose.scales[i];
        if scale != Vec3::ONE {
            basis *= Mat3A::from_diagonal(scale);
        }
        let fixed = &self.fixed_local[i];
        Affine3A {
            matrix3: fixed.matrix3 * basis,
            translation: fixed.translation,
        }
    }

    /// The head of bone `i` in its parent's frame (its fixed local translation).
    #[inline]
    pub fn head_in_parent(&self, i: usize) -> Vec3 {
        self.fixed_local[i].translation.into()
    }

    /// Armature-space rotation of bone `i`'s frame before its pose rotation.
    #[inline]
    pub fn frame_before_basis(&self, rig: &Rig, i: usize) -> Quat {
        match rig.parent(i) {
            Some(p) => self.world_rot[p] * rig.rest(i).rotation,
            None => rig.rest(i).rotation,
        }
    }

    /// Head of bone `i`.
    #[inline]
    pub fn head(&self, i: usize) -> Vec3 {
        Vec3::from(self.world[i].translation)
    }

    /// Current position of the point goal `g`'s solver positions.
    #[inline]
    pub fn point(&self, g: usize) -> Vec3 {
        let goal = &self.goals[g];
        match goal.owner {
            Some(o) => self.world[o].transform_point3(goal.local_point),
            None => self.effector(g),
        }
    }

    /// The point the joint at `goal_joints[k]` of goal `g` aims: the goal's point for its
    /// first joint, the head of the joint below for the others.
    pub fn chain_handle(&self, g: usize, k: usize) -> Vec3 {
        let goal = &self.goals[g];
        let local = if k == goal.joints.0 {
            goal.local_point
        } else {
            self.head_in_parent(self.goal_joints[k - 1])
        };
        self.world[self.goal_joints[k]].transform_point3(local)
    }

    /// Current position of goal `g`'s effector point (head or tail of its bone).
    #[inline]
    pub fn effector(&self, g: usize) -> Vec3 {
        let goal = &self.goals[g];
        self.world[goal.goal.bone].transform_point3(goal.effector_local)
    }

    /// Turns bone `i` by the armature-space rotation `delta` about its head, through the
    /// joint limits, and refreshes its own frame (children are left stale).
    pub fn rotate_bone(&mut self, rig: &Rig, i: usize, delta: Quat) {
        let frame = self.frame_before_basis(rig, i);
        let local = (frame.conjugate() * delta * self.world_rot[i]).normalize();
        self.set_local_rotation(rig, i, local);
    }

    /// Turns a bone without limits by `delta` about its head, updating its frame in place
    /// (cheaper than recomputing it; children are left stale). With the world rotation
    /// `W = F q`, the new local rotation is `q (W^-1 delta W)`.
    pub fn turn_free_bone(&mut self, i: usize, delta: Quat) {
        let world = self.world_rot[i];
        let previous = self.pose.rotations[i];
        let local = (previous * (world.conjugate() * delta * world)).normalize();
        self.pose.rotations[i] = if local.dot(previous) < 0.0 {
            -local
        } else {
            local
        };
        self.world_rot[i] = (delta * world).normalize();
        self.world[i].matrix3 = Mat3A::from_quat(delta) * self.world[i].matrix3;
    }

    /// Sets bone `i`'s pose rotation through the joint limits and refreshes its frame.
    pub fn set_local_rotation(&mut self, rig: &Rig, i: usize, local: Quat) {
        self.store_local_rotation(rig, i, local);
        self.update_bone(rig, i);
    }

    /// Sets bone `i`'s pose rotation through the joint limits without touching any frame
    /// (for simultaneous updates followed by forward kinematics).
    pub fn store_local_rotation(&mut self, rig: &Rig, i: usize, local: Quat) {
        let limits = rig.limits(i);
        let limited = limits.clamp_rotation(local);
        if !limited.is_finite() {
            // Never let a degenerate update poison the pose: keep the previous rotation.
            return;
        }
        // Stay in the hemisphere of the previous value so keys interpolate the short way.
        let previous = self.pose.rotations[i];
        self.pose.rotations[i] = if limited.dot(previous) < 0.0 {
            -limited
        } else {
            limited
        };
        if !limits.is_free() {
            self.euler[i] = limits.angles_of(self.pose.rotations[i], self.euler[i]);
        }
    }

    /// Residuals of the current pose against the goals as given.
    pub fn evaluate(&self, params: &IterationParams) -> Evaluation {
        let mut eval = Evaluation {
            residual: 0.0,
            rotation_residual: 0.0,
            reached: true,
            score: 0.0,
        };
        for (g, prepared) in self.goals.iter().enumerate() {
            let goal = &prepared.goal;
            let error = self.effector(g).distance(goal.target);
            eval.residual = eval.residual.max(error);
            eval.reached &= error <= prepared.tolerance;
            // (`goal_reached` repeats this test for one goal.)
            let relative = (error / prepared.length_scale) as f64;
            eval.score += goal.weight as f64 * relative * relative;
            if let Some(rotation) = goal.rotation.filter(|_| goal.rotation_weight > 0.0) {
                let angle = angle_between(self.world_rot[goal.bone], rotation);
                eval.rotation_residual = eval.rotation_residual.max(angle);
                if goal.rotation_weight >= 1.0 {
                    eval.reached &= angle <= params.rotation_tolerance;
                }
                if self.mode == GoalMode::Full {
                    eval.score +=
                        (goal.weight * goal.rotation_weight) as f64 * (angle as f64).powi(2);
                }
            }
        }
        eval
    }

    /// Imposes the orientations of rotation goals (positional mode) and turns chains
    /// towards their poles. Steps leave forward kinematics current; this pass refreshes it
    /// only after changing something.
    pub fn after_step(&mut self, rig: &Rig) {
        let mut stale = false;
        for g in 0..self.goals.len() {
            let goal = self.goals[g];
            if let Some(orientation) = goal.orientation {
                if stale {
                    self.forward_kinematics(rig);
                }
                let bone = goal.goal.bone;
                let frame = self.frame_before_basis(rig, bone);
                self.set_local_rotation(rig, bone, frame.conjugate() * orientation);
                stale = true;
            }
            if let (Some(pole), None) = (goal.goal.pole, goal.goal.pole_angle) {
                if stale {
                    self.forward_kinematics(rig);
                }
                self.twist_towards_pole(rig, g, pole);
                stale = true;
            }
        }
        if stale {
            self.forward_kinematics(rig);
        }
    }

    /// Turns goal `g`'s whole chain about the line from its root's head to its effector
    /// so the chain's bend points at `pole`. The effector does not move.
    pub fn twist_towards_pole(&mut self, rig: &Rig, g: usize, pole: Vec3) {
        let joints = self.joints(g);
        if joints.len() < 2 {
            return;
        }
        let top = joints[joints.len() - 1];
        let root = self.head(top);
        let axis = self.point(g) - root;
        if axis.length_squared() < 1e-20 {
            return;
        }
        let axis = axis.normalize();
        // The bend: mean offset of the inner joints from the root-effector line.
        let inner = &joints[..joints.len() - 1];
        let mean = inner.iter().map(|&j| self.head(j)).sum::<Vec3>() / inner.len() as f32;
        let bend = reject(mean - root, axis);
        let tiny = 1e-6 * (mean - root).length().max(f32::MIN_POSITIVE);
        let wanted = reject(pole - root, axis);
        if bend.length() < tiny || wanted.length_squared() < 1e-20 {
            return;
        }
        let delta = from_to(bend, wanted);
        self.rotate_bone(rig, top, delta);
    }

    /// Bends joints that sit straight in a chain whose target lies within reach but is not
    /// reached: no rotation of a straight chain's joints can shorten it, a dead end for
    /// every iterative solver. Returns whether anything was bent.
    pub fn bump_colinear(&mut self, rig: &Rig) -> bool {
        let mut bumped = false;
        for g in 0..self.goals.len() {
            let goal = self.goals[g];
            let joints = goal.joints;
            if joints.1 - joints.0 < 2 {
                continue;
            }
            let top = self.goal_joints[joints.1 - 1];
            let point = self.point(g);
            if point.distance(goal.target) <= goal.tolerance
                || self.head(top).distance(goal.target) >= goal.reach * (1.0 - 1e-3)
            {
                continue;
            }
            let mut next = point;
            for k in joints.0..joints.1 - 1 {
                let j = self.goal_joints[k];
                let above = self.goal_joints[k + 1];
                let head = self.head(j);
                let incoming = head - self.head(above);
                let outgoing = next - head;
                next = head;
                if incoming.length_squared() < 1e-20 || outgoing.length_squared() < 1e-20 {
                    continue;
                }
                if incoming.angle_between(outgoing) < COLINEAR_ANGLE {
                    let before = self.pose.rotations[j];
                    for axis in [Vec3::X, Vec3::Z] {
                        let bent = before * Quat::from_axis_angle(axis, BUMP_ANGLE);
                        self.set_local_rotation(rig, j, bent);
                        if angle_between(self.pose.rotations[j], before) > 0.5 * BUMP_ANGLE {
                            bumped = true;
                            break;
                        }
                    }
                }
            }
        }
        if bumped {
            self.forward_kinematics(rig);
        }
        bumped
    }

    /// Straightens each chain whose target is out of reach and that no other goal shares:
    /// from its top joint down, every segment is aimed at the target (the FABRIK paper's
    /// reachability test), which is where every solver would converge, only slowly.
    fn straighten_unreachable(&mut self, rig: &Rig) {
        let mut changed = false;
        for g in 0..self.goals.len() {
            let goal = self.goals[g];
            let joints = self.joints(g);
            let Some(&top) = joints.last() else { continue };
            if self.head(top).distance(goal.target) < goal.reach {
                continue;
            }
            // A shared or carried chain's reach depends on the other goals' bones.
            let shared = (0..self.goals.len())
                .filter(|&other| other != g)
                .any(|other| self.joints(other).iter().any(|j| joints.contains(j)));
            if shared || goal.carrier.is_some() {
                continue;
            }
            for k in (goal.joints.0..goal.joints.1).rev() {
                let j = self.goal_joints[k];
                if k + 1 < goal.joints.1 {
                    self.update_bone(rig, j);
                }
                let head = self.head(j);
                let handle = self.chain_handle(g, k);
                self.rotate_bone(rig, j, from_to(handle - head, goal.target - head));
            }
            changed = true;
        }
        if changed {
            self.after_step(rig);
        }
    }

    /// Whether goal `g` is within its tolerances (as [`Workspace::evaluate`] judges).
    fn goal_reached(&self, g: usize, params: &IterationParams) -> bool {
        let goal = &self.goals[g].goal;
        let close = self.effector(g).distance(goal.target) <= self.goals[g].tolerance;
        let turned = match goal.rotation.filter(|_| goal.rotation_weight >= 1.0) {
            Some(rotation) => {
                angle_between(self.world_rot[goal.bone], rotation) <= params.rotation_tolerance
            }
            None => true,
        };
        close && turned
    }

    /// Full-body solving's second phase. With exclusive chains, goals take their chains in
    /// priority order (depth-first); when some goal could not reach on its own chain, this
    /// keeps that pose and re-prepares `goals` from the start pose with shared chains, so a
    /// later goal may also turn bones an earlier one uses (the joint solve reaches every
    /// goal where the targets allow it; [`Workspace::keep_priority`] keeps the first
    /// phase's pose when the joint one is no better for the goals in priority order).
    /// From the start rather than the first phase's pose: there the later chains lie
    /// stretched towards what they could not reach, a singular pose that stalls the joint
    /// solve.
    /// Returns false, changing nothing, when there is no second phase to run.
    pub fn share_chains(
        &mut self,
        rig: &Rig,
        goals: &[Goal],
        params: &IterationParams,
    ) -> Result<bool> {
        if !self.exclusive || !self.second_phase || self.evaluate(params).reached {
            return Ok(false);
        }
        self.exclusive_reached.clear();
        self.exclusive_reached.resize(goals.len(), false);
        for g in 0..self.goals.len() {
            self.exclusive_reached[self.goals[g].index] = self.goal_reached(g, params);
        }
        self.exclusive_score = self.evaluate(params).score;
        self.exclusive_pose.copy_from(&self.pose);
        let mut start = std::mem::replace(&mut self.shared_start, Pose::rest(0));
        start.copy_from(&self.pose);
        start.rotations.copy_from_slice(&self.start_rotations);
        start.translations.copy_from_slice(&self.start_translations);
        let shared = IterationParams {
            exclusive_chains: false,
            ..*params
        };
        let prepared = self.prepare(rig, &start, goals, self.mode, &shared);
        self.shared_start = start;
        prepared.map(|()| true)
    }

    /// Ends the second phase ([`Workspace::share_chains`]): if sharing lost a goal the
    /// exclusive chains had reached, or came no closer overall, the exclusive pose stands.
    pub fn keep_priority(&mut self, rig: &Rig, params: &IterationParams) {
        let lost = (0..self.goals.len())
            .any(|g| self.exclusive_reached[self.goals[g].index] && !self.goal_reached(g, params));
        if lost || self.evaluate(params).score >= self.exclusive_score {
            self.pose.copy_from(&self.exclusive_pose);
            self.forward_kinematics(rig);
        }
    }

    /// [`Workspace::iterate`] with `step` on the solver's `scratch`, then for full-body
    /// solving the second phase with shared chains ([`Workspace::share_chains`], with an
    /// iteration cap of its own; `prepare` readies the scratch for the re-prepared goals).
    /// `used`: iterations an earlier pass of the first phase already ran. Returns the
    /// iterations run, `used` included.
    #[allow(clippy::too_many_arguments)]
    pub fn iterate_full_body<S>(
        &mut self,
        rig: &Rig,
        goals: &[Goal],
        params: &IterationParams,
        used: u32,
        scratch: &mut S,
        prepare: impl Fn(&mut S, &Workspace, &Rig),
        mut step: impl FnMut(&mut S, &mut Workspace, &Rig),
    ) -> Result<u32> {
        let rest = IterationParams {
            max_iterations: params.max_iterations.saturating_sub(used),
            ..*params
        };
        let first = used
            + self
                .iterate(rig, &rest, |ws, rig| step(scratch, ws, rig))
                .iterations;
        if !self.share_chains(rig, goals, params)? {
            return Ok(first);
        }
        prepare(scratch, self, rig);
        let second = self
            .iterate(rig, params, |ws, rig| step(scratch, ws, rig))
            .iterations;
        self.keep_priority(rig, params);
        Ok(first + second)
    }

    /// Runs `step` until the goals are reached, the iteration cap is hit, or progress
    /// stops. Every step is followed by the orientation and pole passes.
    pub fn iterate(
        &mut self,
        rig: &Rig,
        params: &IterationParams,
        mut step: impl FnMut(&mut Workspace, &Rig),
    ) -> SolveReport {
        self.straighten_unreachable(rig);
        let mut eval = self.evaluate(params);
        let mut iterations = 0;
        let (mut stalls, mut bumps) = (0, 0);
        while !eval.reached && iterations < params.max_iterations {
            step(self, rig);
            if params.move_root {
                self.shift_root(rig);
            }
            self.after_step(rig);
            iterations += 1;
            let next = self.evaluate(params);
            let progressed = next.score < eval.score * (1.0 - STALL_RATIO);
            eval = next;
            if progressed || eval.reached {
                stalls = 0;
                continue;
            }
            if bumps < MAX_BUMPS && self.bump_colinear(rig) {
                bumps += 1;
                eval = self.evaluate(params);
                continue;
            }
            stalls += 1;
            if stalls >= STALL_PATIENCE {
                break;
            }
        }
        self.report(eval, iterations)
    }

    /// Runs the orientation and pole passes once and reports (for one-shot solvers).
    pub fn finish_one_shot(
        &mut self,
        rig: &Rig,
        params: &IterationParams,
        out: &mut Pose,
    ) -> SolveReport {
        self.after_step(rig);
        self.finish(rig, params, 1, out)
    }

    /// Reports on the current pose after `iterations`.
    pub fn report_now(&self, params: &IterationParams, iterations: u32) -> SolveReport {
        self.report(self.evaluate(params), iterations)
    }

    fn report(&self, eval: Evaluation, iterations: u32) -> SolveReport {
        SolveReport {
            iterations,
            residual: eval.residual,
            rotation_residual: eval.rotation_residual,
            reached: eval.reached,
        }
    }

    /// Hands the working pose back in `out` and reports on that pose as returned: any
    /// rotation or translation that degenerate geometry (bones of almost no length,
    /// vanishing scales) left non-finite is replaced by its start value, so no solver ever
    /// hands back NaN; then forward kinematics runs again over every bone a goal may move
    /// and the residuals are measured there. Steps refresh frames incrementally and may
    /// leave some stale; measuring after a full pass means a report never claims more than
    /// the returned pose achieves.
    pub fn finish(
        &mut self,
        rig: &Rig,
        params: &IterationParams,
        iterations: u32,
        out: &mut Pose,
    ) -> SolveReport {
        for (rotation, start) in self.pose.rotations.iter_mut().zip(&self.start_rotations) {
            if !rotation.is_finite() {
                *rotation = *start;
            }
        }
        let translations = self.pose.translations.iter_mut();
        for (translation, start) in translations.zip(&self.start_translations) {
            if !translation.is_finite() {
                *translation = *start;
            }
        }
        self.forward_kinematics(rig);
        out.copy_from(&self.pose);
        self.report_now(params, iterations)
    }

    /// Refreshes the frames from the topmost moving bone down to `bone` along its parent
    /// path (`bone` included), for a step about to read them after other chains moved.
    pub fn refresh_path(&mut self, rig: &Rig, bone: usize) {
        let mut top = bone;
        while let Some(parent) = rig.parent(top).filter(|&p| p >= self.first_active) {
            top = parent;
        }
        // Depth-first order: the path from `top` to `bone` lies inside `top`'s subtree, and
        // each bone on it is the parent of the next bone on it that comes later.
        let mut i = bone;
        self.path.clear();
        loop {
            self.path.push(i);
            if i == top {
                break;
            }
            match rig.parent(i) {
                Some(p) => i = p,
                None => break,
            }
        }
        while let Some(i) = self.path.pop() {
            self.update_bone(rig, i);
        }
    }
}

/// The component of `v` perpendicular to the unit vector `axis`.
#[inline]
pub(crate) fn reject(v: Vec3, axis: Vec3) -> Vec3 {
    v - axis * v.dot(axis)
}

/// The topmost bone a goal on `bone` with `chain_length` may move.
fn chain_root(rig: &Rig, bone: usize, chain_length: usize) -> usize {
    let mut root = bone;
    let mut count = 1;
    while chain_length == 0 || count < chain_length {
        match rig.parent(root) {
            Some(p) => root = p,
            None => break,
        }
        count += 1;
    }
    root
}

fn validate_goal(rig: &Rig, index: usize, goal: &Goal) -> Result<Goal> {
    let mut goal = *goal;
    if goal.bone >= rig.len() {
        return Err(TendonError::BoneIndex {
            what: format!("goal {index}"),
            index: goal.bone,
            count: rig.len(),
        });
    }
    let name = rig.name(goal.bone);
    let what = |field: &str| format!("{field} of goal {index} (bone '{name}')");
    ensure_finite(&goal.target.to_array(), || what("target"))?;
    ensure_finite(&[goal.weight], || what("weight"))?;
    ensure_finite(&[goal.rotation_weight], || what("rotation weight"))?;
    for (field, value) in [
        ("weight", goal.weight),
        ("rotation weight", goal.rotation_weight),
    ] {
        if value < 0.0 {
            return Err(TendonError::InvalidValue {
                what: what(field),
                reason: format!("{value} is negative"),
            });
        }
    }
    if let Some(angle) = goal.pole_angle {
        ensure_finite(&[angle], || what("pole angle"))?;
    }
    if let Some(pole) = goal.pole {
        ensure_finite(&pole.to_array(), || what("pole"))?;
    }
    if let Some(rotation) = goal.rotation {
        ensure_finite(&rotation.to_array(), || what("rotation"))?;
        if rotation.length_squared() < 1e-12 {
            return Err(TendonError::InvalidValue {
                what: what("rotation"),
                reason: "a zero quaternion is not a rotation".into(),
            });
        }
        goal.rotation = Some(rotation.normalize());
    }
    Ok(goal)
}
