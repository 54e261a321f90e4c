//! The working pose: forward kinematics and rotation updates.

use super::*;

impl Workspace {
    /// Forward kinematics of the bones the goals hang from (from `first_active` on): all
    /// that solving and reporting read. Other bones' frames (fingers below a hand goal, a
    /// tail) are left as they are: a solve's answer is the pose, not the frames.
    pub fn forward_kinematics(&mut self, rig: &Rig) {
        let first = self.goal_paths.partition_point(|&i| i < self.first_active);
        for k in first..self.goal_paths.len() {
            self.update_bone(rig, self.goal_paths[k]);
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
        if limits.is_fully_locked() {
            // No freedom at all: the bone keeps the rotation it starts with (held at one
            // value, a BVH wrist bone held by Human Limits lost its animation to that value
            // on every baked frame).
            return;
        }
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
