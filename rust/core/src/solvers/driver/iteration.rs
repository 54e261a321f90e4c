//! The iteration loop and what it measures and reports.

use super::*;
use glam::Mat3;

/// An iteration that lowers the score by less than this fraction made no progress.
const STALL_RATIO: f64 = 1e-4;

/// Iterations without progress tolerated before giving up.
const STALL_PATIENCE: u32 = 2;

/// With `move_root`, a goal beyond reach brings the root this fraction of its reach near.
const ROOT_REACH_MARGIN: f32 = 0.98;

/// Gauss-Newton steps (and halvings of each) in finding that root translation.
const ROOT_SHIFT_STEPS: u32 = 8;

/// How often a solve may bend a colinear joint to escape the straight-chain dead end.
const MAX_BUMPS: u32 = 4;

/// The bend applied to a colinear joint (radians).
const BUMP_ANGLE: f32 = 0.05;

/// Joints whose incoming and outgoing segments are closer than this angle count as
/// straight when a solve stalls. A chain bent less than this barely shortens for a
/// gradient step: the Jacobian transpose, from a straight hinge chain pointing away from a
/// target behind its root, bent it 0.3 degrees and stalled there (with 1e-3 radians).
const COLINEAR_ANGLE: f32 = 0.5 * BUMP_ANGLE;

impl Workspace {
    /// Moves the root (`move_root`). While some goals lie beyond their chains' reach from
    /// where the root is, by the least translation that brings them just within reach
    /// ([`Self::reach_shift`]); otherwise, once that has happened in this solve, by half
    /// the goals' weighted mean remaining error (the Jacobian solvers' straight chains
    /// need that nudge to bend), and not at all in a solve where every goal was within
    /// reach: the root stays where the start has it (a bake from the previous frame's
    /// answer kept the hips 1-2 cm off the animation long after the targets beyond reach).
    /// The mean alone stalled when two hands were pulled below reach: their errors, left
    /// pointing inwards once each arm had stretched towards its target, cancelled out, and
    /// the hips came down 1.6 mm where 12 cm were needed (8 mm short).
    pub fn shift_root(&mut self, rig: &Rig) {
        let root = self.root_of_goals(rig);
        let (mut sum, mut weights, mut beyond) = (Vec3::ZERO, 0.0f32, false);
        for g in 0..self.goals.len() {
            let goal = &self.goals[g];
            if goal.beyond_reach || !rig.subtree(root).contains(&goal.goal.bone) {
                continue;
            }
            if self.beyond_now(g) {
                beyond = true;
            } else {
                // The nudge follows the goals within reach only: a target left out (ten
                // metres off) would drag the root after it.
                sum += (goal.goal.target - self.effector(g)) * goal.goal.weight;
                weights += goal.goal.weight;
            }
        }
        if !(beyond || self.root_needed) {
            return;
        }
        let delta = if beyond {
            let mut active = std::mem::take(&mut self.root_goals);
            let mut trial = std::mem::take(&mut self.root_trial);
            let shift = self.reach_shift(rig, root, &mut active, &mut trial);
            self.root_trial = trial;
            // Goals no translation brings within reach with the others are left out from
            // here on, as without `move_root` (their chains stretched towards them, pulling
            // on nothing): the Jacobian solvers' steps, judged with a hand five metres off,
            // left reachable feet 10 mm short.
            for g in 0..self.goals.len() {
                if rig.subtree(root).contains(&self.goals[g].goal.bone)
                    && !active.contains(&g)
                    && !self.chain_shared(g)
                {
                    self.goals[g].beyond_reach = true;
                }
            }
            self.root_goals = active;
            // The nudge below follows only in a solve whose root had to move.
            self.root_needed |= shift != Vec3::ZERO;
            shift
        } else if weights > 0.0 && sum.is_finite() {
            0.5 * sum / weights
        } else {
            return;
        };
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

    /// Whether some goal lies beyond the reach of its chain and the bones above it, from
    /// where the root is: only then does `move_root` move it.
    pub fn any_beyond_reach(&self) -> bool {
        (0..self.goals.len()).any(|g| self.beyond_now(g))
    }

    /// Whether goal `g`'s target lies beyond its reach from where the root is now (a chain
    /// at full stretch on its target, as at rest, is not).
    fn beyond_now(&self, g: usize) -> bool {
        let goal = &self.goals[g];
        self.head(goal.base).distance(goal.goal.target) > goal.base_reach * (1.0 + 1e-4)
    }

    /// Whether goal `g` is beyond reach on a chain it shares with goals within reach: it
    /// turns no bone (see `leave_out_shared_beyond_reach`); chain-based solvers leave it out.
    pub fn left_out(&self, g: usize) -> bool {
        self.goals[g].beyond_reach && self.chain_shared(g)
    }

    /// Whether another goal turns a joint of goal `g`'s chain.
    pub(super) fn chain_shared(&self, g: usize) -> bool {
        let own = self.joints(g);
        (0..self.goals.len())
            .filter(|&other| other != g)
            .any(|other| self.joints(other).iter().any(|j| own.contains(j)))
    }

    /// The root translation for the goals below `root` beyond their chains' reach: the
    /// least that brings them within reach, with a little bend to spare when that costs
    /// little more (held exactly straight, the Jacobian solvers' steps vanish: within 98%
    /// of the reach, else 99%, 99.5%, whichever moves the root at most 2% of the mean
    /// reach further than bringing them just within it). A goal no translation brings
    /// within reach together with the others (a target ten metres off, the other hand
    /// where it is) is left out, as without `move_root`: the least squares between the two
    /// had moved the root halfway, both hands five metres off.
    fn reach_shift(
        &self,
        rig: &Rig,
        root: usize,
        active: &mut Vec<usize>,
        trial: &mut Vec<usize>,
    ) -> Vec3 {
        active.clear();
        active.extend(
            (0..self.goals.len()).filter(|&g| rig.subtree(root).contains(&self.goals[g].goal.bone)),
        );
        let beyond_after = |shift: Vec3, g: usize, margin: f32| {
            let goal = &self.goals[g];
            let margin = if self.beyond_now(g) { margin } else { 1.0 };
            (goal.goal.target - self.head(goal.base) - shift).length()
                > margin * goal.base_reach * (1.0 + 1e-4)
        };
        // While no one translation brings every goal within reach, one goal is given up at
        // a time: the one without which the others are left least beyond reach; of those
        // (within a tenth), the one that lies furthest beyond reach from where the
        // root is, and then the one without which the root moves least (a hand ten metres
        // off, not the other hand on its target). Giving up at once every goal still
        // beyond the compromise gave up all of them when two sets conflicted (hands far
        // forward, feet below reach), and the root did not move for the feet either;
        // without the second rule, hands metres ahead tied with the feet and float noise
        // chose, frame by frame (a bake's hips jumped 0.7 m between frames).
        let excess_after = |shift: Vec3, goals: &[usize]| -> f32 {
            goals
                .iter()
                .map(|&g| {
                    let goal = &self.goals[g];
                    let distance = (goal.goal.target - self.head(goal.base) - shift).length();
                    (distance - goal.base_reach * (1.0 + 1e-4)).max(0.0)
                })
                .sum()
        };
        let demand = |g: usize| {
            let goal = &self.goals[g];
            (goal.goal.target - self.head(goal.base)).length() - goal.base_reach
        };
        let mut least = self.reach_shift_within(active, 1.0);
        while active.iter().any(|&g| beyond_after(least, g, 1.0)) {
            let mut best: Option<(usize, f32, f32, Vec3)> = None;
            for &left_out in active.iter() {
                trial.clear();
                trial.extend(active.iter().copied().filter(|&g| g != left_out));
                let shift = self.reach_shift_within(trial, 1.0);
                let excess = excess_after(shift, trial);
                let asks = demand(left_out);
                let better = match best {
                    None => true,
                    Some((_, best_excess, best_asks, best_shift)) => {
                        // Symmetric sets tie exactly in a linear model (two hands and
                        // two feet: 4d/3 whichever goes) and nearly in the rig's.
                        let tie = 1e-6 + 0.1 * excess.max(best_excess);
                        excess < best_excess - tie
                            || (excess <= best_excess + tie
                                && (asks > best_asks + tie
                                    || (asks >= best_asks - tie
                                        && shift.length() < best_shift.length())))
                    }
                };
                if better {
                    best = Some((left_out, excess, asks, shift));
                }
            }
            let Some((left_out, _, _, shift)) = best else {
                break;
            };
            active.retain(|&g| g != left_out);
            least = shift;
        }
        // Only the goals beyond reach where the root is need it; the others only must not
        // leave their reach (a solve that could not reach the hands moved the hips 16 mm
        // to give the feet, already on their targets, room to bend).
        if !active.iter().any(|&g| self.beyond_now(g)) {
            return Vec3::ZERO;
        }
        let spare = 0.02
            * active
                .iter()
                .map(|&g| self.goals[g].base_reach)
                .sum::<f32>()
            / active.len() as f32;
        for margin in [ROOT_REACH_MARGIN, 0.99, 0.995] {
            let shift = self.reach_shift_within(active, margin);
            let inside = active.iter().all(|&g| !beyond_after(shift, g, margin));
            if inside && shift.length() <= least.length() + spare {
                return shift;
            }
        }
        least
    }

    /// The root translation that brings goals `active` (all below the root) within
    /// `margin` of their reach, or as near as one translation can: the least squares of
    /// the excess distances (Gauss-Newton, damped, each step halved until it lowers them).
    /// The chains' bases move rigidly with the root, so no forward kinematics is needed.
    fn reach_shift_within(&self, active: &[usize], margin: f32) -> Vec3 {
        // The spare bend is for the goals that need the root; the others only stay within.
        let margin_of = |g: usize| if self.beyond_now(g) { margin } else { 1.0 };
        let excess_at = |shift: Vec3| -> f32 {
            active
                .iter()
                .map(|&g| {
                    let goal = &self.goals[g];
                    let distance = (goal.goal.target - self.head(goal.base) - shift).length();
                    let margin = margin_of(g);
                    goal.goal.weight * (distance - margin * goal.base_reach).max(0.0).powi(2)
                })
                .sum()
        };
        let mut shift = Vec3::ZERO;
        let mut cost = excess_at(shift);
        for _ in 0..ROOT_SHIFT_STEPS {
            // Normal equations of the rows direction . step = excess.
            let (mut normal, mut rhs, mut weights) = (Mat3::ZERO, Vec3::ZERO, 0.0f32);
            for &g in active {
                let goal = &self.goals[g];
                let from_base = goal.goal.target - self.head(goal.base) - shift;
                let distance = from_base.length();
                let excess = distance - margin_of(g) * goal.base_reach;
                if excess <= 0.0 || distance <= 0.0 {
                    continue;
                }
                let direction = from_base / distance;
                let weight = goal.goal.weight;
                normal += Mat3::from_cols(
                    direction * direction.x,
                    direction * direction.y,
                    direction * direction.z,
                ) * weight;
                rhs += direction * (excess * weight);
                weights += weight;
            }
            if weights <= 0.0 {
                break;
            }
            // The damping keeps the directions no row constrains still.
            let mut step =
                (normal + Mat3::from_diagonal(Vec3::splat(1e-3 * weights))).inverse() * rhs;
            let mut next = excess_at(shift + step);
            let mut halvings = 0;
            // (Written so that NaN counts as no improvement.)
            let lower = |next: f32| next < cost;
            while !lower(next) && halvings < ROOT_SHIFT_STEPS {
                step *= 0.5;
                next = excess_at(shift + step);
                halvings += 1;
            }
            if !lower(next) || !step.is_finite() {
                break;
            }
            shift += step;
            cost = next;
        }
        shift
    }

    /// Residuals of the current pose against the goals as given.
    pub fn evaluate(&self, params: &IterationParams) -> Evaluation {
        let mut eval = Evaluation {
            residual: 0.0,
            rotation_residual: 0.0,
            reached: true,
            score: 0.0,
            within_reach_score: 0.0,
            within_reach_reached: true,
            settled: true,
        };
        for (g, prepared) in self.goals.iter().enumerate() {
            let goal = &prepared.goal;
            let error = crate::math::distance(self.effector(g), goal.target);
            eval.residual = eval.residual.max(error);
            let mut reached = error <= prepared.tolerance;
            // (`goal_reached` repeats this test for one goal.)
            // A target beyond reach counts in no score (see `PreparedGoal::beyond_reach`).
            let scored = if prepared.beyond_reach { 0.0 } else { error };
            let mut settled = scored <= prepared.tolerance;
            let relative = (scored / prepared.length_scale) as f64;
            let mut score = goal.weight as f64 * relative * relative;
            if let Some(rotation) = goal.rotation.filter(|_| goal.rotation_weight > 0.0) {
                let angle = angle_between(self.world_rot[goal.bone], rotation);
                eval.rotation_residual = eval.rotation_residual.max(angle);
                if goal.rotation_weight >= 1.0 {
                    // A rotation target is settled only when met, beyond reach or not.
                    reached &= angle <= params.rotation_tolerance;
                    settled &= angle <= params.rotation_tolerance;
                }
                if self.mode == GoalMode::Full {
                    score += (goal.weight * goal.rotation_weight) as f64 * (angle as f64).powi(2);
                }
            }
            eval.reached &= reached;
            eval.settled &= settled;
            eval.score += score;
            if self.head(prepared.base).distance(goal.target) < prepared.base_reach {
                eval.within_reach_score += score;
                eval.within_reach_reached &= reached;
            }
        }
        eval
    }

    /// The score ([`Evaluation::score`]) of goals `goals` alone.
    pub fn score_of(&self, goals: &[usize]) -> f64 {
        let mut score = 0.0;
        for &g in goals {
            let prepared = &self.goals[g];
            let goal = &prepared.goal;
            let error = match prepared.beyond_reach {
                true => 0.0,
                false => self.effector(g).distance(goal.target),
            };
            let relative = (error / prepared.length_scale) as f64;
            score += goal.weight as f64 * relative * relative;
            if let Some(rotation) = goal.rotation.filter(|_| goal.rotation_weight > 0.0) {
                if self.mode == GoalMode::Full {
                    let angle = angle_between(self.world_rot[goal.bone], rotation) as f64;
                    score += (goal.weight * goal.rotation_weight) as f64 * angle * angle;
                }
            }
        }
        score
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
        // A pole on (or within a thousandth of the chain's length of) the line from the
        // root to the target sets no side: measured from the line to the effector, which
        // swings about that line as the solve closes in, it turned the chain to and fro
        // and a reachable target was missed by up to 2.6 m, reported only as not reached.
        let goal = &self.goals[g];
        if let Some(line) = (goal.target - root).try_normalize() {
            if reject(pole - root, line).length() < 1e-3 * goal.reach {
                return;
            }
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
                    bumped |= self.bump_joint(rig, j);
                }
            }
        }
        if bumped {
            self.forward_kinematics(rig);
        }
        bumped
    }

    /// Bends joint `j` by the bump angle, the first way its limits allow: about each unlocked
    /// limit axis (a straight knee bends about its hinge, in the direction it flexes), both
    /// ways; free joints about their X and Z axes. Returns whether it bent.
    fn bump_joint(&mut self, rig: &Rig, j: usize) -> bool {
        let before = self.pose.rotations[j];
        let limits = *rig.limits(j);
        if limits.is_free() {
            for (axis, sign) in [
                (Vec3::X, 1.0),
                (Vec3::Z, 1.0),
                (Vec3::X, -1.0),
                (Vec3::Z, -1.0),
            ] {
                let bent = before * Quat::from_axis_angle(axis, sign * BUMP_ANGLE);
                self.set_local_rotation(rig, j, bent);
                if angle_between(self.pose.rotations[j], before) > 0.5 * BUMP_ANGLE {
                    return true;
                }
            }
            return false;
        }
        let angles = self.euler[j];
        for axis in [0, 2, 1] {
            if limits.axes()[axis].is_locked() {
                continue;
            }
            for sign in [1.0, -1.0] {
                let mut bent = angles;
                bent[axis] += sign * BUMP_ANGLE;
                if limits.clamp_axis(axis, bent[axis]) != bent[axis] {
                    continue;
                }
                self.set_local_rotation(rig, j, limits.rotation_of(bent));
                if angle_between(self.pose.rotations[j], before) > 0.5 * BUMP_ANGLE {
                    return true;
                }
            }
        }
        false
    }

    /// Straightens each chain whose target is out of reach and that no other goal shares:
    /// from its top joint down, every segment is aimed at the target (the FABRIK paper's
    /// reachability test), which is where every solver would converge, only slowly.
    fn straighten_unreachable(&mut self, rig: &Rig) -> bool {
        let mut changed = false;
        for g in 0..self.goals.len() {
            let goal = self.goals[g];
            let joints = self.joints(g);
            let Some(&top) = joints.last() else { continue };
            if self.head(top).distance(goal.target) < goal.reach {
                continue;
            }
            // A shared or carried chain's reach depends on the other goals' bones; one
            // left out beyond reach (`leave_out_shared_beyond_reach`) stretches the bones
            // only it turns.
            let shared = |j: &usize| {
                (0..self.goals.len())
                    .filter(|&other| other != g)
                    .any(|other| self.joints(other).contains(j))
            };
            let end = match joints.iter().any(shared) || goal.carrier.is_some() {
                false => goal.joints.1,
                true if goal.beyond_reach => {
                    goal.joints.0 + joints.iter().position(shared).unwrap_or(joints.len())
                }
                true => continue,
            };
            for k in (goal.joints.0..end).rev() {
                let j = self.goal_joints[k];
                if k + 1 < goal.joints.1 {
                    self.update_bone(rig, j);
                }
                // A goal on its bone's head: that bone's turn cannot move the point (aimed by
                // its tail, a hand turned 33 degrees towards a target beyond reach and baked
                // frames popped; QA helper).
                if self.knuckles[j]
                    || (j == goal.goal.bone && goal.goal.point == EffectorPoint::Head)
                {
                    continue;
                }
                // A knuckle below turns with this joint: the point beyond it is aimed (aimed
                // itself, a wrist node flipped 180 degrees to add its 6 mm of reach).
                let mut below = k;
                while below > goal.joints.0 && self.knuckles[self.goal_joints[below - 1]] {
                    below -= 1;
                    self.update_bone(rig, self.goal_joints[below]);
                }
                let head = self.head(j);
                let handle = self.chain_handle(g, below);
                self.rotate_bone(rig, j, from_to(handle - head, goal.target - head));
            }
            changed = true;
        }
        if changed {
            self.after_step(rig);
        }
        changed
    }

    /// Whether goal `g` is within its tolerances (as [`Workspace::evaluate`] judges).
    pub fn goal_reached(&self, g: usize, params: &IterationParams) -> bool {
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
            self.refresh_fixed_local(rig);
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
        if eval.reached || eval.settled {
            // Reached already: a pole still turns its chain towards it (the effector does
            // not move), as every step would have (an arm reached from the start kept its
            // bend away from its pole, unless another limb in the same solve needed a step).
            let twisted = self
                .goals
                .iter()
                .any(|g| g.goal.pole.is_some() && g.goal.pole_angle.is_none());
            if twisted {
                self.after_step(rig);
                eval = self.evaluate(params);
            }
        }
        let mut iterations = 0;
        let (mut stalls, mut bumps) = (0, 0);
        while !(eval.reached || eval.settled) && iterations < params.max_iterations {
            step(self, rig);
            if params.move_root {
                self.shift_root(rig);
            }
            self.after_step(rig);
            iterations += 1;
            let next = self.evaluate(params);
            // A target out of reach keeps its error whatever the others do: while a goal
            // within reach is still missed, its progress counts even if the whole sum,
            // swamped by that error, barely moves (one hand dragged far away no longer
            // stops the solve before the feet and head have reached).
            let progressed = next.score < eval.score * (1.0 - STALL_RATIO)
                || (!next.within_reach_reached
                    && next.within_reach_score < eval.within_reach_score * (1.0 - STALL_RATIO));
            eval = next;
            if progressed || eval.reached || eval.settled {
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
        // The other goals' steps may have turned the bones that carry a chain stretched
        // towards a target beyond reach: stretch it again.
        if self.goals.iter().any(|g| g.beyond_reach) && self.straighten_unreachable(rig) {
            eval = self.evaluate(params);
        }
        self.report(eval, iterations)
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
        // Only the bones on the goals' paths are ever changed (the root's translation with
        // `move_root` among them).
        for &i in &self.goal_paths {
            // Of unit length as `Pose::validate` has it, so a later solve from this answer
            // (the next group of goals, the next frame) starts from it exactly; not a
            // rotation at all (not finite, or of no length: a fuzzed rotation target whose
            // length overflowed), the start's.
            let length_sq = self.pose.rotations[i].length_squared();
            if !(length_sq.is_finite() && length_sq > 1e-12) {
                self.pose.rotations[i] = self.start_rotations[i];
            } else if (length_sq - 1.0).abs() > 1e-6 {
                self.pose.rotations[i] = self.pose.rotations[i].normalize();
            }
            if !self.pose.translations[i].is_finite() {
                self.pose.translations[i] = self.start_translations[i];
            }
        }
        self.refresh_fixed_local(rig);
        self.forward_kinematics(rig);
        out.copy_from(&self.pose);
        self.report_now(params, iterations)
    }
}
