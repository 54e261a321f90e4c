//! Preparing goals: validation, chain roots, exclusive chains and carriers, poles.

use super::*;

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
        // Taken first, so no early return leaves it set for another solve's start.
        let trusted = std::mem::take(&mut self.trusted_start);
        params.validate()?;
        self.mode = mode;
        self.pose.copy_from(start);
        if !trusted {
            self.pose.validate(rig)?;
        }
        self.start_rotations.clear();
        self.start_rotations.extend_from_slice(&self.pose.rotations);
        self.start_translations.clear();
        self.start_translations
            .extend_from_slice(&self.pose.translations);
        let n = rig.len();
        self.world.resize(n, Affine3A::IDENTITY);
        self.world_rot.resize(n, Quat::IDENTITY);
        // The goals validated first (a bad bone index fails here), then forward kinematics
        // of the bones they hang from: all that preparing and solving read.
        self.valid_goals.clear();
        self.goal_paths.clear();
        for (index, goal) in goals.iter().enumerate() {
            let goal = validate_goal(rig, index, goal)?;
            if goal.weight > 0.0 {
                self.valid_goals.push((index, goal));
                let mut bone = Some(goal.bone);
                while let Some(i) = bone {
                    self.goal_paths.push(i);
                    bone = rig.parent(i);
                }
            }
        }
        self.goal_paths.sort_unstable();
        self.goal_paths.dedup();
        // Limited joints' angles, for the bones a solve can turn (the goals' paths): a
        // solve of one limb among several (goals solved apart) need not decompose them all.
        self.euler.resize(n, [0.0; 3]);
        for &i in &self.goal_paths {
            let limits = rig.limits(i);
            self.euler[i] = match limits.is_free() {
                true => [0.0; 3],
                false => limits.angles_within(self.pose.rotations[i]),
            };
        }
        // Only the goals' paths are ever posed (forward kinematics, chains, handles): on a
        // large rig the other bones' fixed parts were most of a small solve's set-up.
        self.fixed_local.resize(n, Affine3A::IDENTITY);
        self.refresh_fixed_local(rig);
        self.first_active = 0;
        self.root_needed = false;
        self.forward_kinematics(rig);

        self.goals.clear();
        self.goal_joints.clear();
        for k in 0..self.valid_goals.len() {
            let (index, goal) = self.valid_goals[k];
            let prepared = self.prepare_goal(rig, goal, params);
            self.goals.push(PreparedGoal { index, ..prepared });
        }
        // Effectors in depth-first order, as the guide advises: earlier chains (the spine)
        // settle before the limbs hanging from them.
        self.goals.sort_by_key(|g| g.goal.bone);
        self.exclusive = params.exclusive_chains;
        if params.exclusive_chains {
            self.make_chains_exclusive(rig);
        }
        // The top joints, and the effector bones a rotation target turns in positional mode
        // (a goal on the head of a bone below such a bone, with no joint of its own, was
        // measured before the turn: reached, 1.4 off; QA helper).
        self.first_active = self
            .goals
            .iter()
            .filter(|g| g.joints.0 < g.joints.1)
            .map(|g| self.goal_joints[g.joints.1 - 1])
            .chain(
                self.goals
                    .iter()
                    .filter(|g| g.orientation.is_some())
                    .map(|g| g.goal.bone),
            )
            .min()
            .unwrap_or(n);
        if params.move_root {
            // The root's translation moves everything below it.
            self.first_active = self.first_active.min(self.root_of_goals(rig));
        }
        self.find_carriers(rig, params.move_root);
        self.find_knuckles();
        self.clamp_joints_into_limits(rig);
        if !self.poles_aimed {
            self.aim_blender_poles(rig);
        }
        Ok(())
    }

    /// The fixed part of each goal-path bone's local frame (rest, then pose translation),
    /// from the working pose's translations: after they change other than through
    /// `shift_root` (a pose put back), or forward kinematics measures another pose than
    /// the one handed back (with `move_root` and exclusive chains the residual was taken
    /// with the root where the second phase left it, 0.9 from the pose returned; QA helper).
    pub(crate) fn refresh_fixed_local(&mut self, rig: &Rig) {
        for &i in &self.goal_paths {
            self.fixed_local[i] =
                *rig.rest_matrix(i) * Affine3A::from_translation(self.pose.translations[i]);
        }
    }

    /// Marks the knuckles (by bone): joints that the position-placing solvers (FABRIK, CCD,
    /// two-bone) and the straightening of chains towards targets beyond reach hold rigid
    /// with their parent. A knuckle is a bone whose lever (from its head to the point it
    /// aims: the joint below's head or the goal's point) is under [`KNUCKLE_RATIO`] of its
    /// parent's in every chain it is in, below the chain's top. Such a bone hardly moves
    /// the point (the BVH importer's wrist node: 6 mm under an 18 cm forearm), so aiming it
    /// turns it by whatever angle the target's offset makes: baked wrists spun up to 180
    /// degrees from the clip where Blender's IK and the damped solvers turn them a degree.
    fn find_knuckles(&mut self) {
        let mut knuckles = std::mem::take(&mut self.knuckles);
        knuckles.clear();
        knuckles.resize(self.world.len(), false);
        // Set where some chain finds a knuckle, then cleared where any chain does not.
        for keep_rule in [true, false] {
            for g in 0..self.goals.len() {
                let (start, end) = self.goals[g].joints;
                for k in start..end {
                    let joint = self.goal_joints[k];
                    let knuckle = k + 1 < end && {
                        let parent = self.goal_joints[k + 1];
                        let lever = self.chain_handle(g, k).distance(self.head(joint));
                        let parent_lever = self.head(joint).distance(self.head(parent));
                        lever < KNUCKLE_RATIO * parent_lever
                    };
                    if knuckle == keep_rule {
                        knuckles[joint] = knuckle;
                    }
                }
            }
        }
        self.knuckles = knuckles;
    }

    /// Whether turning the knuckles (`find_knuckles`) could bring some unreached goal onto
    /// its target: it lies within twice their levers (the most they can move its point).
    /// A target farther off is missed either way, and a finish turning them towards it
    /// spun them as the knuckles are held to avoid.
    pub fn knuckles_could_reach(&self) -> bool {
        (0..self.goals.len()).any(|g| {
            let goal = &self.goals[g];
            let (start, end) = goal.joints;
            let slack: f32 = (start..end)
                .filter(|&k| self.knuckles[self.goal_joints[k]])
                .map(|k| {
                    2.0 * self
                        .chain_handle(g, k)
                        .distance(self.head(self.goal_joints[k]))
                })
                .sum();
            let distance = self.point(g).distance(goal.target);
            distance > goal.tolerance && distance <= slack
        })
    }

    /// Puts every joint a goal may turn inside its limits, the nearest rotation inside: a
    /// start pose outside them (an animation made without them, limits just set) would
    /// otherwise hold the solvers at its first step, every step jumping to a bound and
    /// every retry finding that worse.
    fn clamp_joints_into_limits(&mut self, rig: &Rig) {
        let mut changed = false;
        for k in 0..self.goal_joints.len() {
            let bone = self.goal_joints[k];
            let limits = rig.limits(bone);
            if !limits.is_free() && !limits.contains(self.pose.rotations[bone], 0.0) {
                self.store_local_rotation(rig, bone, self.pose.rotations[bone]);
                changed = true;
            }
        }
        if changed {
            self.forward_kinematics(rig);
        }
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
        // The original chain's length sets the tolerance, whatever the solver positions; a
        // point no joint moves (a root's head, placed by `move_root` alone) goes by its
        // bone's length (on a chain of no length the tolerance was 1e-17: never reached).
        let reach = self.chain_reach(rig, owner, local_point, chain_root);
        let length_scale = if reach > MIN_LENGTH_SCALE {
            reach
        } else {
            rig.length(bone).max(MIN_LENGTH_SCALE)
        };
        let tolerance = params.tolerance * length_scale;
        if self.mode == GoalMode::Positional {
            if let Some(rotation) = goal.rotation.filter(|_| goal.rotation_weight > 0.0) {
                // The whole target rotation, whatever the weight: the weight trades the
                // rotation against the position only where both cannot be met (the
                // Jacobian solvers' least squares), and a bone posed first and then
                // positioned by its head meets both wherever they can be. (Blended from
                // the start by the weight, a solve stopped short of a rotation it could
                // meet, 0.22 rad at weight 0.5, and solving again from there crept on.)
                if goal.point == EffectorPoint::Tail {
                    let (head, tail) = rig.head_tail(&self.world[bone], bone);
                    target -= (rotation * self.world_rot[bone].conjugate()) * (tail - head);
                }
                orientation = Some(rotation);
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
            beyond_reach: false,
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
    ///
    /// A goal whose target lies beyond even that reach (the base's head does not move
    /// unless `move_root`), on a chain no other goal turns, is beyond reach
    /// ([`PreparedGoal::beyond_reach`]): no pose reaches it; its chain is stretched towards
    /// it, and it pulls on nothing (one hand's target dragged far away bent the spine, and
    /// the head and the other hand missed by 5-31 cm on Rigify's metarig).
    fn find_carriers(&mut self, rig: &Rig, move_root: bool) {
        self.moving.clear();
        self.moving.resize(rig.len(), false);
        for &j in &self.goal_joints {
            self.moving[j] = true;
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
            let beyond = !move_root && self.head(bone).distance(self.goals[g].target) >= reach;
            // A chain another goal also turns serves both: its goals are solved together
            // (but see `leave_out_shared_beyond_reach`).
            if beyond && !self.chain_shared(g) {
                let own_reach = self.goals[g].reach;
                let goal = &mut self.goals[g];
                (goal.carrier, goal.base, goal.base_reach) = (None, top, own_reach);
                goal.beyond_reach = true;
                continue;
            }
            let goal = &mut self.goals[g];
            // Marked for now; kept only if a goal within reach shares the chain.
            goal.beyond_reach = beyond;
            if !self.exclusive {
                (goal.carrier, goal.base, goal.base_reach) = (carrier, bone, reach);
            }
        }
        self.leave_out_shared_beyond_reach();
    }

    /// A goal beyond reach whose chain shares bones with a goal within reach pulls on
    /// nothing either: the shared bones serve the goals they can bring home, and the bones
    /// only it turns are stretched towards its target (`straighten_unreachable`). Pulling,
    /// its error, which no pose can undo, outweighed the reachable goal's: two hands on
    /// chains of 5 sharing the chest, one target 100 m off, left the other hand 50 cm
    /// short with damped least squares, 80 cm with the transpose. Goals sharing bones that
    /// are all beyond reach still pull together (the body leans after both hands).
    fn leave_out_shared_beyond_reach(&mut self) {
        // Its memory taken on the first solve, so a later one allocates nothing.
        self.kept_beyond.reserve(self.goals.len());
        // The usual solve: every target within reach, nothing to decide.
        if !self.goals.iter().any(|g| g.beyond_reach) {
            return;
        }
        let mut kept = std::mem::take(&mut self.kept_beyond);
        kept.clear();
        kept.extend((0..self.goals.len()).map(|g| {
            let own = self.joints(g);
            self.goals[g].beyond_reach
                && (0..self.goals.len()).any(|other| {
                    other != g
                        && !self.goals[other].beyond_reach
                        && self.joints(other).iter().any(|j| own.contains(j))
                })
        }));
        for (g, &kept) in kept.iter().enumerate() {
            if self.chain_shared(g) {
                self.goals[g].beyond_reach = kept;
            }
        }
        self.kept_beyond = kept;
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

    /// Whether any goal may turn a joint with limits.
    pub fn moves_limited_joint(&self, rig: &Rig) -> bool {
        self.goal_joints
            .iter()
            .any(|&bone| !rig.limits(bone).is_free())
    }

    /// Whether every goal the current pose misses lies beyond its chain's reach (measured
    /// from the topmost moving bone above it): no other pose of the chain would reach it.
    pub fn misses_only_out_of_reach(&self, params: &IterationParams) -> bool {
        !(0..self.goals.len()).any(|g| self.misses_within_reach(g, params))
    }

    /// Whether the current pose misses goal `g` though its target lies within its chain's
    /// reach (see [`Workspace::misses_only_out_of_reach`]).
    pub fn misses_within_reach(&self, g: usize, params: &IterationParams) -> bool {
        let goal = &self.goals[g];
        !self.goal_reached(g, params)
            && self.head(goal.base).distance(goal.goal.target) < goal.base_reach
    }
}

/// The topmost bone a goal on `bone` with `chain_length` may move.
pub(crate) fn chain_root(rig: &Rig, bone: usize, chain_length: usize) -> usize {
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

pub(crate) fn validate_goal(rig: &Rig, index: usize, goal: &Goal) -> Result<Goal> {
    if goal.bone >= rig.len() {
        return Err(TendonError::BoneIndex {
            what: format!("goal {index}"),
            index: goal.bone,
            count: rig.len(),
        });
    }
    let name = rig.name(goal.bone);
    goal.checked(|field| format!("{field} of goal {index} (bone '{name}')"))
}
