//! FABRIK (Aristidou and Lasenby 2011) on chains and on trees with several effectors.
//!
//! Points are moved as in the paper, but each forward step turns a *bone* rather than
//! placing a point: the bone's handles (the heads of its moving children and the effector
//! points it carries) are rotated onto their backward-pass positions with the smallest
//! rotation (one handle) or the best-fitting one (a sub-base with several). Rotations are
//! applied to the local pose and forward kinematics is rerun, so lengths never drift, the
//! bone's twist is kept, and limits are applied per iteration through the shared limits.

use super::driver::{GoalMode, Workspace};
use super::two_bone::place;
use super::{IterationParams, SolveReport, Solver};
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
            let chain = ws.joints(g);
            let Some(&first) = chain.first() else {
                continue;
            };
            let weight = goal.goal.weight;
            self.handles.push(Handle {
                owner: first,
                kind: HandleKind::Goal(g),
                local: goal.local_point,
                weight,
            });
            for pair in chain.windows(2) {
                let (child, owner) = (pair[0], pair[1]);
                self.handles.push(Handle {
                    owner,
                    kind: HandleKind::Child(child),
                    local: rig.local_matrix(&ws.pose, child).translation.into(),
                    weight,
                });
            }
        }
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
    }

    /// Backward pass: from the effectors towards the roots, each moving bone's head is
    /// placed at its handles' length from their targets (averaged at sub-bases).
    fn backward(&mut self, ws: &Workspace) {
        self.goal_straight.clear();
        for (g, goal) in ws.goals.iter().enumerate() {
            // Out of reach: the whole chain will aim straight at the target.
            let out_of_reach = ws
                .joints(g)
                .last()
                .is_some_and(|&top| ws.head(top).distance(goal.target) >= goal.reach);
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
        for i in ws.first_active..rig.len() {
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
        let lower_joint = self.joints.iter().find(|j| j.bone == lower)?;
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
        let head = ws.head(upper);
        let lower_world = ws.world[upper] * rig.local_matrix(&ws.pose, lower);
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
        let (new_knee, _) = place(head, l_ab, l_bc, reached_knee, foot, target, None);
        // The smallest turn, so the bone's twist is kept.
        Some(from_to(knee - head, new_knee - head))
    }
}

impl Solver for Fabrik {
    fn solve_into(
        &mut self,
        rig: &Rig,
        start: &Pose,
        goals: &[Goal],
        out: &mut Pose,
    ) -> Result<SolveReport> {
        let params = self.params.iteration;
        self.ws
            .prepare(rig, start, goals, GoalMode::Positional, &params)?;
        self.scratch.build_handles(&self.ws, rig);
        let scratch = &mut self.scratch;
        let report = self.ws.iterate(rig, &params, |ws, rig| {
            scratch.backward(ws);
            scratch.forward(ws, rig, params.max_step_angle);
        });
        self.ws.write_pose(out);
        Ok(report)
    }
}
