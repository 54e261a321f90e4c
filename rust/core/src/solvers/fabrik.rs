//! FABRIK (Aristidou and Lasenby 2011) on chains and on trees with several effectors.
//!
//! Points are moved as in the paper, but each forward step turns a *bone* rather than
//! placing a point: the bone's handles (the heads of its moving children and the effector
//! points it carries) are rotated onto their backward-pass positions with the smallest
//! rotation (one handle) or the best-fitting one (a sub-base with several). Rotations are
//! applied to the local pose and forward kinematics is rerun, so lengths never drift, the
//! bone's twist is kept, and limits are applied per iteration through the shared limits.
//! A sweep that stalls unreached on limited joints is finished by damped least squares
//! (`finish.rs`).

use super::apart::{solve_by_groups, SolvesApart};
use super::driver::{GoalMode, Workspace};
use super::finish::FinishWithinLimits;
use super::two_bone::place;
use super::{Apart, IterationParams, SolveReport, Solver};
use crate::error::Result;
use crate::goal::Goal;
use crate::math::{best_fit_rotation, clamp_angle, from_to};
use crate::rig::{Pose, Rig};
use glam::Vec3;
use serde::{Deserialize, Serialize};

/// FABRIK settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FabrikParams {
    /// Iteration cap, tolerance and step clamp.
    #[serde(flatten)]
    pub iteration: IterationParams,
}

impl Default for FabrikParams {
    fn default() -> Self {
        FabrikParams {
            // Targets near full extension converge linearly until the last two joints can
            // take over in closed form; iterations are cheap and a stall still ends early.
            iteration: IterationParams {
                max_iterations: 500,
                ..IterationParams::default()
            },
        }
    }
}

/// A point rigidly attached to a moving bone that the bone turns towards its target.
#[derive(Debug, Clone, Copy)]
struct Handle {
    owner: usize,
    kind: HandleKind,
    /// The point in the owner's frame.
    local: Vec3,
    /// Sum of the weights of the goals pulling through this handle.
    weight: f32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum HandleKind {
    /// The head of a moving child bone, aimed at that child's backward-pass position.
    Child(usize),
    /// A goal's point, aimed at the goal's target.
    Goal(usize),
}

/// A moving bone and its handles `handles[start..end]`.
#[derive(Debug, Clone, Copy)]
struct Joint {
    bone: usize,
    start: usize,
    end: usize,
}

/// The FABRIK solver.
#[derive(Debug, Clone, Default)]
pub struct Fabrik {
    /// Settings.
    pub params: FabrikParams,
    ws: Workspace,
    scratch: Scratch,
    finish: FinishWithinLimits,
    apart: Apart,
}

/// FABRIK's own reusable memory.
#[derive(Debug, Clone, Default)]
struct Scratch {
    handles: Vec<Handle>,
    joints: Vec<Joint>,
    /// Backward-pass head positions, by bone.
    reached_head: Vec<Vec3>,
    /// Whether a bone's backward position comes only from out-of-reach goals.
    straight: Vec<bool>,
    goal_straight: Vec<bool>,
    /// Index into `joints` by bone (`usize::MAX` for bones that do not move).
    joint_of_bone: Vec<usize>,
    /// Point chains: joint heads from the top joint down, then the effector point.
    points: Vec<Vec3>,
    segments: Vec<f32>,
    /// Goals in the order point chains are solved.
    order: Vec<usize>,
}

impl Fabrik {
    /// A solver with these settings.
    pub fn new(params: FabrikParams) -> Self {
        Fabrik {
            params,
            ..Fabrik::default()
        }
    }
}

impl Scratch {
    fn build_handles(&mut self, ws: &Workspace, rig: &Rig) {
        self.handles.clear();
        for (g, goal) in ws.goals.iter().enumerate() {
            if ws.left_out(g) {
                continue;
            }
            let chain = ws.joints(g);
            let Some(&first) = chain.first() else {
                continue;
            };
            let weight = goal.goal.weight;
            // Top of the chain first, so a single chain is already sorted.
            for pair in chain.windows(2).rev() {
                let (child, owner) = (pair[0], pair[1]);
                self.handles.push(Handle {
                    owner,
                    kind: HandleKind::Child(child),
                    local: ws.head_in_parent(child),
                    weight,
                });
            }
            self.handles.push(Handle {
                owner: first,
                kind: HandleKind::Goal(g),
                local: goal.local_point,
                weight,
            });
            if let Some(carrier) = goal.carrier {
                // The chain hangs from another goal's bone (an arm from the spine): that
                // bone turns the chain's head towards where this goal needs it too.
                let top = *chain.last().unwrap_or(&first);
                self.handles.push(Handle {
                    owner: carrier,
                    kind: HandleKind::Child(top),
                    local: ws.world[carrier].inverse().transform_point3(ws.head(top)),
                    weight,
                });
            }
        }
        // A knuckle's handles ride on its parent, which aims them; nothing aims its head.
        let knuckles = &ws.knuckles;
        for h in &mut self.handles {
            while let Some(parent) = rig.parent(h.owner).filter(|_| knuckles[h.owner]) {
                let point = ws.world[h.owner].transform_point3(h.local);
                h.local = ws.world[parent].inverse().transform_point3(point);
                h.owner = parent;
            }
        }
        self.handles
            .retain(|h| !matches!(h.kind, HandleKind::Child(c) if knuckles[c]));
        // Group by owner; a child shared by several goals becomes one handle.
        self.handles.sort_unstable_by_key(|h| (h.owner, h.kind));
        self.handles.dedup_by(|later, kept| {
            let same = later.owner == kept.owner && later.kind == kept.kind;
            if same {
                kept.weight += later.weight;
            }
            same
        });
        self.joints.clear();
        for (k, h) in self.handles.iter().enumerate() {
            match self.joints.last_mut() {
                Some(j) if j.bone == h.owner => j.end = k + 1,
                _ => self.joints.push(Joint {
                    bone: h.owner,
                    start: k,
                    end: k + 1,
                }),
            }
        }
        let n = rig.len();
        self.reached_head.resize(n, Vec3::ZERO);
        self.straight.resize(n, false);
        self.joint_of_bone.clear();
        self.joint_of_bone.resize(n, usize::MAX);
        for (k, joint) in self.joints.iter().enumerate() {
            self.joint_of_bone[joint.bone] = k;
        }
    }

    /// Backward pass: from the effectors towards the roots, each moving bone's head is
    /// placed at its handles' length from their targets (averaged at sub-bases).
    fn backward(&mut self, ws: &Workspace) {
        self.goal_straight.clear();
        for (g, goal) in ws.goals.iter().enumerate() {
            // Out of reach: the whole chain will aim straight at the target.
            let out_of_reach = !ws.joints(g).is_empty()
                && ws.head(goal.base).distance(goal.target) >= goal.base_reach;
            self.goal_straight.push(out_of_reach);
        }
        for joint in self.joints.iter().rev() {
            let bone = joint.bone;
            let head = ws.head(bone);
            let (mut sum, mut total, mut all_straight) = (Vec3::ZERO, 0.0, true);
            for h in &self.handles[joint.start..joint.end] {
                let (target, straight) = match h.kind {
                    HandleKind::Goal(g) => (ws.goals[g].target, self.goal_straight[g]),
                    HandleKind::Child(c) => (self.reached_head[c], self.straight[c]),
                };
                let candidate = if straight {
                    target
                } else {
                    let length = ws.world[bone].transform_point3(h.local).distance(head);
                    target + (head - target).normalize_or_zero() * length
                };
                sum += candidate * h.weight;
                total += h.weight;
                all_straight &= straight;
            }
            self.reached_head[bone] = if total > 0.0 { sum / total } else { head };
            self.straight[bone] = all_straight;
        }
    }

    /// Forward pass: from the roots outwards, each moving bone turns its handles towards
    /// their backward-pass positions; forward kinematics follows in the same sweep.
    fn forward(&mut self, ws: &mut Workspace, rig: &Rig, max_step: f32) {
        let mut next = 0;
        // Every joint hangs on a goal's path: the other bones' frames need not follow.
        let first = ws.goal_paths.partition_point(|&i| i < ws.first_active);
        for k in first..ws.goal_paths.len() {
            let i = ws.goal_paths[k];
            ws.update_bone(rig, i);
            let Some(joint) = self.joints.get(next).filter(|j| j.bone == i) else {
                continue;
            };
            next += 1;
            let head = ws.head(i);
            let aim = |h: &Handle| {
                let target = match h.kind {
                    HandleKind::Goal(g) => ws.goals[g].target,
                    HandleKind::Child(c) => self.reached_head[c],
                };
                (
                    ws.world[i].transform_point3(h.local) - head,
                    target - head,
                    h.weight,
                )
            };
            let handles = &self.handles[joint.start..joint.end];
            if let Some(delta) = self.end_pair(ws, rig, joint) {
                ws.rotate_bone(rig, i, clamp_angle(delta, max_step));
                continue;
            }
            let delta = if let [single] = handles {
                let (from, to, _) = aim(single);
                from_to(from, to)
            } else {
                best_fit_rotation(handles.iter().map(aim))
            };
            ws.rotate_bone(rig, i, clamp_angle(delta, max_step));
        }
    }
}

impl Scratch {
    /// The closed-form turn of the upper bone of a chain's last two joints, when `joint`
    /// is such an upper bone: its one handle is the head of a child whose one handle is a
    /// goal within reach. The knee goes where the spheres about this head and the target
    /// meet, on the side of its backward-pass position (the FABRIK paper's sphere
    /// intersection); the child then reaches the target exactly. Plain FABRIK crawls when
    /// targets lie near full extension; this pair converges at once.
    fn end_pair(&self, ws: &Workspace, rig: &Rig, joint: &Joint) -> Option<glam::Quat> {
        let [upper_handle] = &self.handles[joint.start..joint.end] else {
            return None;
        };
        let HandleKind::Child(lower) = upper_handle.kind else {
            return None;
        };
        let lower_joint = self.joints.get(self.joint_of_bone[lower])?;
        let [lower_handle] = &self.handles[lower_joint.start..lower_joint.end] else {
            return None;
        };
        let HandleKind::Goal(g) = lower_handle.kind else {
            return None;
        };
        if self.goal_straight[g] {
            return None;
        }
        let upper = joint.bone;
        // Across a knuckle the pair is no longer parent and child: the plain step serves.
        if rig.parent(lower) != Some(upper) {
            return None;
        }
        let head = ws.head(upper);
        let lower_world = ws.world[upper] * ws.local_matrix(lower);
        let knee = Vec3::from(lower_world.translation);
        let foot = lower_world.transform_point3(lower_handle.local);
        let target = ws.goals[g].target;
        let (l_ab, l_bc, l_at) = (
            head.distance(knee),
            knee.distance(foot),
            head.distance(target),
        );
        // Outside the pair's annulus the closed form would fold or stretch the pair against
        // the rest of the chain; the plain step lets the joints above bring it within reach.
        if !(l_at < l_ab + l_bc && l_at > (l_ab - l_bc).abs()) {
            return None;
        }
        let reached_knee = self.reached_head[lower];
        let (new_knee, _) = place(head, l_ab, l_bc, reached_knee - head, foot, target, None);
        // The smallest turn, so the bone's twist is kept.
        Some(from_to(knee - head, new_knee - head))
    }
}

impl Scratch {
    /// Whether every goal owns a chain of free joints no other goal moves: then FABRIK can
    /// run on joint positions alone, as published, and turn bones once at the end.
    fn point_chains_apply(&self, ws: &Workspace, rig: &Rig) -> bool {
        self.joints
            .iter()
            .all(|j| j.end - j.start == 1 && rig.limits(j.bone).is_free())
            && ws
                .goals
                .iter()
                .all(|g| g.owner.is_some() && g.carrier.is_none())
            && !(0..ws.goals.len()).any(|g| ws.left_out(g))
    }

    /// Classic FABRIK on each goal's joint positions until every goal is within tolerance,
    /// progress stops, or the iteration cap; the last two joints are placed in closed form
    /// once the target is within their reach. Returns the iterations run.
    fn solve_point_chains(
        &mut self,
        ws: &mut Workspace,
        rig: &Rig,
        params: &IterationParams,
    ) -> u32 {
        let mut most = 0;
        // Chains in depth-first order of their top joints: a chain hanging below another
        // (an arm below the spine) starts from where the chain above has left it.
        self.order.clear();
        self.order.extend(0..ws.goals.len());
        self.order.sort_by_key(|&g| ws.joints(g).last().copied());
        for k in 0..self.order.len() {
            let g = self.order[k];
            let goal = ws.goals[g];
            if let Some(&first) = ws.joints(g).first() {
                // Another chain may have moved this one's ancestors since the frames were
                // computed: refresh them, and the chain, before reading its joints.
                ws.refresh_path(rig, first);
            }
            self.points.clear();
            for &j in ws.joints(g).iter().rev() {
                if !ws.knuckles[j] {
                    self.points.push(ws.head(j));
                }
            }
            self.points.push(ws.point(g));
            self.segments.clear();
            self.segments
                .extend(self.points.windows(2).map(|p| p[0].distance(p[1])));
            let iterations = fabrik_points(
                &mut self.points,
                &self.segments,
                goal.target,
                goal.tolerance,
                params.max_iterations,
            );
            most = most.max(iterations);
            self.turn_onto_points(ws, rig, g);
        }
        ws.forward_kinematics(rig);
        most
    }

    /// Turns goal `g`'s joints, top first, so each one's handle points at its place in
    /// `points`: one smallest rotation per joint, so twist is kept; knuckles turn with
    /// their parents. The joints must be free, with one handle each.
    fn turn_onto_points(&self, ws: &mut Workspace, rig: &Rig, g: usize) {
        let (start, end) = ws.goals[g].joints;
        let mut next = 1;
        for k in (start..end).rev() {
            let bone = ws.goal_joints[k];
            if k + 1 < end {
                ws.update_bone(rig, bone);
            }
            let Some(joint) = self.joints.get(self.joint_of_bone[bone]) else {
                continue;
            };
            let head = ws.head(bone);
            let handle = ws.world[bone].transform_point3(self.handles[joint.start].local);
            ws.turn_free_bone(bone, from_to(handle - head, self.points[next] - head));
            next += 1;
        }
    }
}

/// FABRIK on a chain of points (`points[0]` is fixed) with segment lengths `segments`.
fn fabrik_points(
    points: &mut [Vec3],
    segments: &[f32],
    target: Vec3,
    tolerance: f32,
    max_iterations: u32,
) -> u32 {
    let m = segments.len();
    let root = points[0];
    let reach: f32 = segments.iter().sum();
    let to_target = target - root;
    if to_target.length() >= reach {
        let dir = to_target.normalize_or_zero();
        for k in 0..m {
            points[k + 1] = points[k] + dir * segments[k];
        }
        return 1;
    }
    let mut error = points[m].distance(target);
    let (mut iterations, mut stalls) = (0, 0);
    while error > tolerance && iterations < max_iterations {
        iterations += 1;
        points[m] = target;
        for k in (0..m).rev() {
            let dir = (points[k] - points[k + 1])
                .try_normalize()
                .unwrap_or(Vec3::ZERO);
            points[k] = points[k + 1] + dir * segments[k];
        }
        points[0] = root;
        let free = m.saturating_sub(2);
        for k in 0..free {
            let dir = (points[k + 1] - points[k])
                .try_normalize()
                .unwrap_or(Vec3::ZERO);
            points[k + 1] = points[k] + dir * segments[k];
        }
        // The last pair: the sphere-intersection placement when the target is within its
        // reach (exact), the plain step otherwise.
        let a = points[free];
        let (l_ab, l_bc) = (
            segments[free],
            segments.get(free + 1).copied().unwrap_or(0.0),
        );
        let l_at = a.distance(target);
        if m >= 2 && l_at < l_ab + l_bc && l_at > (l_ab - l_bc).abs() {
            let (knee, foot) = place(a, l_ab, l_bc, points[m - 1] - a, points[m], target, None);
            points[m - 1] = knee;
            points[m] = foot;
        } else {
            for k in free..m {
                let dir = (points[k + 1] - points[k])
                    .try_normalize()
                    .unwrap_or(Vec3::ZERO);
                points[k + 1] = points[k] + dir * segments[k];
            }
        }
        let next = points[m].distance(target);
        stalls = if next < error * (1.0 - 1e-4) {
            0
        } else {
            stalls + 1
        };
        error = next;
        if stalls >= 2 {
            break;
        }
    }
    iterations
}

impl Solver for Fabrik {
    fn iteration_params(&self) -> IterationParams {
        self.params.iteration
    }

    /// Groups are solved apart unless the root moves (it carries every goal).
    fn solves_groups_apart(&self) -> bool {
        !self.params.iteration.move_root
    }

    /// Independent groups of goals are solved one after another, each as if alone
    /// (`solvers::apart`).
    fn solve_into(
        &mut self,
        rig: &Rig,
        start: &Pose,
        goals: &[Goal],
        out: &mut Pose,
    ) -> Result<SolveReport> {
        solve_by_groups(self, rig, start, goals, out, Self::solve_whole)
    }
}

impl SolvesApart for Fabrik {
    fn apart(&mut self) -> &mut Apart {
        &mut self.apart
    }

    fn workspace(&mut self) -> &mut Workspace {
        &mut self.ws
    }
}

impl Fabrik {
    /// One solve of every goal together.
    fn solve_whole(
        &mut self,
        rig: &Rig,
        start: &Pose,
        goals: &[Goal],
        out: &mut Pose,
    ) -> Result<SolveReport> {
        let params = self.params.iteration;
        self.ws
            .prepare(rig, start, goals, GoalMode::Positional, &params)?;
        self.ws.record_bends();
        self.scratch.build_handles(&self.ws, rig);
        let scratch = &mut self.scratch;
        let mut used = 0;
        // The point pass moves points, not joints: no step clamp holds it (bone-turning
        // FABRIK under a small clamp stalled short of reachable targets; regression pass).
        if scratch.point_chains_apply(&self.ws, rig) {
            used = scratch.solve_point_chains(&mut self.ws, rig, &params);
            self.ws.after_step(rig);
            let report = self.ws.report_now(&params, used);
            // Full-body solving's second phase follows even when the first used its cap.
            if report.reached || (used >= params.max_iterations && !params.exclusive_chains) {
                self.ws.keep_bend_sides(rig);
                let report = self.ws.finish(rig, &params, used, out);
                // A target folded back near the root that only turning a knuckle reaches
                // (the fused chain's inner reach is larger): the finish turns it (the point
                // pass used its cap and the target was missed by 5.7 cm; QA helper).
                if report.reached || !self.ws.knuckles_could_reach() {
                    return Ok(report);
                }
                return self.finish.apply(rig, start, goals, &params, report, out);
            }
        }
        // Trees, limits, or a chain the point pass could not finish (a straight chain with
        // the target on its line): bone-turning FABRIK with the shared driver's remedies.
        let iterations = self.ws.iterate_full_body(
            rig,
            goals,
            &params,
            used,
            scratch,
            |scratch, ws, rig| scratch.build_handles(ws, rig),
            |scratch, ws, rig| {
                scratch.backward(ws);
                scratch.forward(ws, rig, params.max_step_angle);
            },
        )?;
        self.ws.keep_bend_sides(rig);
        let report = self.ws.finish(rig, &params, iterations, out);
        // Knuckles held rigid may leave a target near full extension a few millimetres
        // short; the finish turns them by the little that needs.
        let knuckled = || self.ws.knuckles_could_reach();
        if report.reached || !(self.ws.moves_limited_joint(rig) || knuckled()) {
            return Ok(report);
        }
        self.finish.apply(rig, start, goals, &params, report, out)
    }
}
