//! Keeping each chain's bends on the side the start pose has them (FABRIK, CCD).
//!
//! A chain of free joints reaches a target with its middle joints on either side of the
//! line to it. Damped least squares moves the joints a little at a time and keeps the
//! start's side; FABRIK's backward pass puts each joint on the line from the joint below
//! to where it was, and CCD turns one joint at a time, so for a target forwards and up a
//! knee bent slightly forwards at the start ended folded backwards (the metarig's knee up
//! to 0.3 m behind the hip-ankle line, on 9 of 40 random targets). Reflecting such a
//! joint across the line through its neighbours restores the side and moves nothing
//! else: both neighbours stay, and every bone keeps its length.

use super::*;

/// Below this, a bend's normal (the cross product of its two segments, relative to their
/// lengths' product) counts as no bend: a straight chain has no side to keep.
const STRAIGHT: f32 = 1e-3;

impl Workspace {
    /// Records the goals' bends in the pose as it is (the start, right after `prepare`),
    /// for [`Workspace::keep_bend_sides`].
    pub fn record_bends(&mut self) {
        if self.bends_frozen {
            return;
        }
        self.bend_start.clear();
        self.bend_slots.clear();
        let slots = self.goals.iter().map(|g| g.index + 1).max().unwrap_or(0);
        self.bend_slots.resize(slots, (0, 0));
        let mut points = std::mem::take(&mut self.bend_points);
        for g in 0..self.goals.len() {
            let from = self.bend_start.len();
            self.chain_points(g, &mut points);
            for k in 1..points.len().saturating_sub(1) {
                let bend = self.local_bend(g, &points, k);
                self.bend_start.push(bend);
            }
            self.bend_slots[self.goals[g].index] = (from, self.bend_start.len());
        }
        self.bend_points = points;
    }

    /// Goal `g`'s chain points now: its joints' heads, top first, then its point.
    fn chain_points(&self, g: usize, points: &mut Vec<Vec3>) {
        let (first, end) = self.goals[g].joints;
        points.clear();
        points.extend((first..end).rev().map(|k| self.head(self.goal_joints[k])));
        points.push(self.point(g));
    }

    /// The bend at chain point `k` (a joint below the chain's top): its normal in the
    /// frame of the bone above it (so a thigh that turns about its own axis turns the
    /// knee's side with it), or none where the chain is straight there.
    fn local_bend(&self, g: usize, points: &[Vec3], k: usize) -> Option<Vec3> {
        let (a, b) = (points[k] - points[k - 1], points[k + 1] - points[k]);
        let normal = a.cross(b);
        if normal.length() <= STRAIGHT * a.length() * b.length() {
            return None;
        }
        let (_, end) = self.goals[g].joints;
        let above = self.goal_joints[end - k];
        Some(self.world_rot[above].conjugate() * normal)
    }

    /// Puts back on the start's side every bend of a chain of free joints that the solve
    /// turned over (see the module documentation). Chains with a pole (the pole chooses
    /// the side) or a rotation target (the turn would move it), joints with limits (the
    /// limits do), chains carried by another goal's and chains another goal's effector
    /// hangs from are left as they are.
    pub fn keep_bend_sides(&mut self, rig: &Rig) {
        let mut points = std::mem::take(&mut self.bend_points);
        let mut any_turned = false;
        for g in 0..self.goals.len() {
            let goal = self.goals[g];
            let (first, end) = goal.joints;
            let chain = &self.goal_joints[first..end];
            // Limbs: a thigh and shin, an upper arm, forearm and hand. (A longer chain, a
            // tail or a tentacle, curls either way; turning its bones over would roll them.)
            if !(2..=3).contains(&chain.len())
                || goal.goal.pole.is_some()
                // The turn would move the effector bone off its rotation target.
                || (goal.goal.rotation.is_some() && goal.goal.rotation_weight > 0.0)
                || goal.owner.is_none()
                || goal.carrier.is_some()
                || chain.iter().any(|&j| !rig.limits(j).is_free())
                || (0..self.goals.len())
                    .filter(|&other| other != g)
                    .any(|other| self.hangs_from(rig, other, chain))
            {
                continue;
            }
            let Some(&(from, to)) = self.bend_slots.get(goal.index) else {
                continue;
            };
            if to - from != chain.len() - 1 || self.bend_start[from..to].iter().all(Option::is_none)
            {
                continue;
            }
            self.refresh_path(rig, self.goal_joints[first]);
            let was = self.point(g).distance(goal.goal.target);
            let saved: [Quat; 3] = std::array::from_fn(|k| {
                self.pose.rotations[self.goal_joints[(first + k).min(end - 1)]]
            });
            self.chain_points(g, &mut points);
            let mut turned = false;
            // Turning one joint over changes its neighbours' bends: again until none is
            // turned over (a few passes at most on a limb).
            let interior = points.len() - 2;
            for k in (0..3 * interior).map(|pass| 1 + pass % interior) {
                let Some(before) = self.bend_start[from + k - 1] else {
                    continue;
                };
                let Some(now) = self.local_bend(g, &points, k) else {
                    continue;
                };
                if before.dot(now) < 0.0 {
                    let (a, c) = (points[k - 1], points[k + 1]);
                    let Some(axis) = (c - a).try_normalize() else {
                        continue;
                    };
                    let on_line = a + axis * (points[k] - a).dot(axis);
                    points[k] = 2.0 * on_line - points[k];
                    // The bones follow, so the next bend is read in their new frames.
                    self.turn_chain_onto_points(rig, g, &points);
                    turned = true;
                }
            }
            if !turned {
                continue;
            }
            self.forward_kinematics(rig);
            // The turns keep the point where it was up to rounding: never at the price of
            // a target that was reached.
            if was <= goal.tolerance && self.point(g).distance(goal.goal.target) > goal.tolerance {
                for k in first..end {
                    self.pose.rotations[self.goal_joints[k]] = saved[k - first];
                }
                self.forward_kinematics(rig);
            } else {
                any_turned = true;
            }
        }
        self.bend_points = points;
        if any_turned {
            // Effectors with rotation targets take their orientation again.
            self.after_step(rig);
        }
    }

    /// Whether goal `other`'s chain or effector hangs from (or shares) a bone of `chain`:
    /// turning that chain's bones over would carry it off.
    fn hangs_from(&self, rig: &Rig, other: usize, chain: &[usize]) -> bool {
        let mut bone = Some(self.goals[other].goal.bone);
        while let Some(b) = bone {
            if chain.contains(&b) {
                return true;
            }
            bone = rig.parent(b);
        }
        false
    }

    /// Turns goal `g`'s joints, top first, so each one's handle points at `points` (its
    /// chain's points, top joint's head first): one smallest rotation per joint, so
    /// twist is kept. The joints must be free.
    pub fn turn_chain_onto_points(&mut self, rig: &Rig, g: usize, points: &[Vec3]) {
        let (start, end) = self.goals[g].joints;
        for k in (start..end).rev() {
            let joint = self.goal_joints[k];
            if k + 1 < end {
                self.update_bone(rig, joint);
            }
            let head = self.head(joint);
            let handle = self.chain_handle(g, k);
            let wanted = points[end - k];
            self.turn_free_bone(joint, from_to(handle - head, wanted - head));
        }
    }
}
