//! Cyclic coordinate descent: each joint in turn, from the effectors towards the roots,
//! turns to bring its effectors towards their targets.
//!
//! A free joint takes the best 3D rotation at once (what cycling its three axes converges
//! to); a limited joint turns about each unlocked Euler axis in its order, each angle solved
//! in closed form and clamped by the shared limits. Several effectors below a joint are
//! served together by a weighted best fit. A straight chain is bent by the shared driver.
//! A sweep that stops unreached is finished by damped least squares from where it stopped
//! (`finish.rs`): on limited joints a clamp can undo what the next joint needed, and on
//! any chain CCD crawls near full extension.

use super::apart::{solve_by_groups, SolvesApart};
use super::driver::{reject, GoalMode, Workspace};
use super::finish::FinishWithinLimits;
use super::{Apart, IterationParams, SolveReport, Solver};
use crate::error::Result;
use crate::goal::Goal;
use crate::math::{best_fit_rotation, clamp_angle, from_to};
use crate::rig::{Pose, Rig};
use glam::{Quat, Vec3};
use serde::{Deserialize, Serialize};

/// The least lever, relative to the joint's distance from the point, an axis needs to be
/// turned towards a target (see the sweep).
const MIN_LEVER: f32 = 1e-2;

/// CCD settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CcdParams {
    /// Iteration cap, tolerance and step clamp.
    #[serde(flatten)]
    pub iteration: IterationParams,
}

impl Default for CcdParams {
    fn default() -> Self {
        CcdParams {
            // CCD converges linearly; arms hanging from a turning spine (real rigs) take
            // hundreds of sweeps. The stall exit ends easy solves early.
            iteration: IterationParams {
                max_iterations: 1000,
                ..IterationParams::default()
            },
        }
    }
}

/// The CCD solver.
#[derive(Debug, Clone, Default)]
pub struct Ccd {
    /// Settings.
    pub params: CcdParams,
    ws: Workspace,
    scratch: Scratch,
    finish: FinishWithinLimits,
    apart: Apart,
    /// Sweeps only, no damped least squares finish (the Jacobian solvers' last retry).
    sweeps_only: bool,
}

#[derive(Debug, Clone, Default)]
struct Scratch {
    /// (joint, goal) pairs sorted by joint, deepest joint first.
    pairs: Vec<(usize, usize)>,
    /// Current effector positions, by goal.
    points: Vec<Vec3>,
}

impl Ccd {
    /// A solver with these settings.
    pub fn new(params: CcdParams) -> Self {
        Ccd {
            params,
            ..Ccd::default()
        }
    }

    /// A solver that only sweeps (see [`crate::solvers::JacobianDls`]'s last retry).
    pub(crate) fn sweeps_only(params: CcdParams) -> Self {
        Ccd {
            params,
            sweeps_only: true,
            ..Ccd::default()
        }
    }
}

impl Scratch {
    fn build(&mut self, ws: &Workspace, rig: &Rig) {
        self.pairs.clear();
        // Knuckles turn with their parents (`Workspace::find_knuckles`).
        let knuckles = &ws.knuckles;
        for g in (0..ws.goals.len()).filter(|&g| !ws.left_out(g)) {
            self.pairs.extend(
                ws.joints(g)
                    .iter()
                    .filter(|&&j| !knuckles[j])
                    .map(|&j| (j, g)),
            );
            // The bones above the chain that carry it (other goals' joints) serve it too.
            let mut carrier = ws.goals[g].carrier;
            while let Some(j) = carrier {
                self.pairs.push((j, g));
                carrier = rig.parent(j);
                while let Some(p) = carrier.filter(|&p| !ws.moving[p]) {
                    carrier = rig.parent(p);
                }
            }
        }
        self.pairs
            .sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    }

    fn sweep(&mut self, ws: &mut Workspace, rig: &Rig, max_step: f32) {
        self.points.clear();
        self.points.extend((0..ws.goals.len()).map(|g| ws.point(g)));
        // Turning a joint moves only its descendants, which this sweep has already visited,
        // so each joint's own frame is still current when its turn comes.
        let mut k = 0;
        while k < self.pairs.len() {
            let joint = self.pairs[k].0;
            let end = k + self.pairs[k..].iter().take_while(|p| p.0 == joint).count();
            let goals = &self.pairs[k..end];
            k = end;
            let head = ws.head(joint);
            let limits = *rig.limits(joint);
            if limits.is_free() {
                let pair = |&(_, g): &(usize, usize)| {
                    (
                        self.points[g] - head,
                        ws.goals[g].target - head,
                        ws.goals[g].goal.weight,
                    )
                };
                let delta = match goals {
                    [single] => {
                        let (from, to, _) = pair(single);
                        from_to(from, to)
                    }
                    _ => best_fit_rotation(goals.iter().map(pair)),
                };
                let delta = clamp_angle(delta, max_step);
                ws.rotate_bone(rig, joint, delta);
                carry(&mut self.points, ws, rig, joint, delta);
                continue;
            }
            let frame = ws.frame_before_basis(rig, joint);
            let mut angles = ws.euler[joint];
            for axis in limits.order.axes() {
                if limits.axes()[axis].is_locked() {
                    continue;
                }
                let a = (frame * limits.rate_axes(angles)[axis]).normalize();
                let (mut sin_sum, mut cos_sum) = (0.0, 0.0);
                for &(_, g) in goals {
                    let (point, target) = (self.points[g] - head, ws.goals[g].target - head);
                    let (u, v) = (reject(point, a), reject(target, a));
                    // Next to no lever about this axis: the point lies on it or nearly (a
                    // bone's twist, its tail on its own line, or a knuckle's just off it).
                    // Aligning the point's tiny circle with the target's turns the joint by
                    // any angle for a fraction of a millimetre: rounding's alone threw a
                    // limited twist to its bounds (7 of 10 solves), and an elbow twisted 40
                    // degrees for a target moved 2 mm and flipped 160 in a bake with Human
                    // Limits (QA helpers). The other axes reach for it.
                    if u.length() < MIN_LEVER * point.length()
                        || v.length() < MIN_LEVER * target.length()
                    {
                        continue;
                    }
                    let w = ws.goals[g].goal.weight;
                    sin_sum += w * a.dot(u.cross(v));
                    cos_sum += w * u.dot(v);
                }
                if sin_sum == 0.0 && cos_sum == 0.0 {
                    continue;
                }
                let step = sin_sum.atan2(cos_sum).clamp(-max_step, max_step);
                let turned = limits.clamp_axis(axis, angles[axis] + step);
                let applied = turned - angles[axis];
                angles[axis] = turned;
                carry(
                    &mut self.points,
                    ws,
                    rig,
                    joint,
                    Quat::from_axis_angle(a, applied),
                );
            }
            ws.euler[joint] = angles;
            ws.set_local_rotation(rig, joint, limits.rotation_of(angles));
        }
        ws.forward_kinematics(rig);
    }
}

/// Turns with `joint` the tracked point of every goal it carries: those of the goals it
/// serves, and those of goals further down the tree that other goals' joints move.
fn carry(points: &mut [Vec3], ws: &Workspace, rig: &Rig, joint: usize, turn: Quat) {
    let head = ws.head(joint);
    for (point, goal) in points.iter_mut().zip(&ws.goals) {
        if goal
            .owner
            .is_some_and(|owner| rig.subtree(joint).contains(&owner))
        {
            *point = head + turn * (*point - head);
        }
    }
}

impl Solver for Ccd {
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

impl SolvesApart for Ccd {
    fn apart(&mut self) -> &mut Apart {
        &mut self.apart
    }

    fn workspace(&mut self) -> &mut Workspace {
        &mut self.ws
    }
}

impl Ccd {
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
        self.scratch.build(&self.ws, rig);
        let iterations = self.ws.iterate_full_body(
            rig,
            goals,
            &params,
            0,
            &mut self.scratch,
            |scratch, ws, rig| scratch.build(ws, rig),
            |scratch, ws, rig| scratch.sweep(ws, rig, params.max_step_angle),
        )?;
        self.ws.keep_bend_sides(rig);
        let report = self.ws.finish(rig, &params, iterations, out);
        if report.reached || self.sweeps_only {
            return Ok(report);
        }
        self.finish.apply(rig, start, goals, &params, report, out)
    }
}
