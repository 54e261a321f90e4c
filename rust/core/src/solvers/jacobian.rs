//! Jacobian solvers with an analytic Jacobian: the column of a joint's degree of freedom
//! is `axis x (effector - joint head)` for positions and `axis` for rotations, so a joint
//! resting on a limit still sees which way it could move (finite differences would not).
//!
//! A free joint has three degrees of freedom about the armature axes; a limited joint has
//! one per unlocked Euler axis, so locks remove columns and ranges clamp exact angles.
//! Goals are stacked: three position rows each (scaled by the square root of the weight
//! over the chain length, so errors are relative) and three rotation rows for rotation
//! targets (scaled by the square root of weight times rotation weight).

use super::apart::{solve_by_groups, SolvesApart};
use super::driver::{GoalMode, Workspace};
use super::finish::FinishWithinLimits;
use super::{Apart, Ccd, CcdParams, Closest, IterationParams, SolveReport, Solver};
use crate::error::{Result, TendonError};
use crate::goal::Goal;
use crate::math::angle_between;
use crate::math::dense::DampedSystem;
use crate::rig::{Pose, Rig};
use glam::{Quat, Vec3};
use serde::{Deserialize, Serialize};

/// Damped least squares settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct JacobianDlsParams {
    /// Iteration cap, tolerance and step clamp.
    #[serde(flatten)]
    pub iteration: IterationParams,
    /// Damping (lambda) on the relative-error scale; larger is steadier and slower. With
    /// `adaptive`, the damping of the first step.
    pub damping: f32,
    /// Adapt the damping each iteration (Levenberg-Marquardt): lower it after a step that
    /// helped, raise it and retry after one that did not.
    pub adaptive: bool,
    /// How a step shares a turn between a chain's joints, from 0 to 1: the weight, in the
    /// cost each step minimises, of how far every moving bone turns in armature space
    /// (a joint's turn counted once for each moving bone it carries) against how far each
    /// joint turns relative to its parent. 0 turns the joints as little as possible; higher
    /// keeps the bones pointing closer to where they were, so a spine shared by the head and
    /// the arms bends less for a hand's goal (on motion capture, closer to what actors do).
    /// Used when every joint of the solve is free (no limits) and moves a goal, and not
    /// with exclusive chains (each goal keeps to its own joints there).
    pub world_turn_weight: f32,
}

impl Default for JacobianDlsParams {
    fn default() -> Self {
        JacobianDlsParams {
            iteration: IterationParams {
                max_iterations: 100,
                max_step_angle: 0.5,
                ..IterationParams::default()
            },
            damping: 0.1,
            adaptive: true,
            // 0.5 on bench_mocap's tuning clips: full body from a cold start 18.5 -> 13.4
            // degrees from the actor, limbs 12.9 -> 13.1; but held out, limbs came out worse
            // (15.2 -> 15.5, warm 16.2 -> 17.1) and bakes took 1.5x as long: not yet the default.
            world_turn_weight: 0.0,
        }
    }
}

/// Jacobian transpose settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct JacobianTransposeParams {
    /// Iteration cap, tolerance and step clamp.
    #[serde(flatten)]
    pub iteration: IterationParams,
}

impl Default for JacobianTransposeParams {
    fn default() -> Self {
        JacobianTransposeParams {
            // A first-order method, if with conjugate directions: tens of iterations for a
            // limb, hundreds on limited coupled chains (arms on a turning spine); the
            // stall exit ends easy solves early.
            iteration: IterationParams {
                max_iterations: 5000,
                max_step_angle: 0.2,
                ..IterationParams::default()
            },
        }
    }
}

/// Damping bounds of the adaptive scheme.
const MIN_DAMPING: f64 = 1e-6;
const MAX_DAMPING: f64 = 1e4;
/// The relative error below which a solve's first damping is scaled down with it.
const SCALED_START_ERROR: f64 = 0.05;
/// Retries with more damping (or shorter steps) before an iteration gives up.
const RETRIES: usize = 6;

/// One degree of freedom: a turn of `bone` about an armature axis, or one of its Euler angles.
#[derive(Debug, Clone, Copy)]
struct Dof {
    bone: usize,
    axis: usize,
    euler: bool,
}

/// Memory shared by both Jacobian solvers.
#[derive(Debug, Clone, Default)]
struct Scratch {
    dofs: Vec<Dof>,
    /// Each degree of freedom's armature-space axis at the current pose.
    axes: Vec<Vec3>,
    bones: Vec<usize>,
    rows: usize,
    /// Jacobian, column-major: `jac[dof * rows + row]`.
    jac: Vec<f64>,
    error: Vec<f64>,
    step: Vec<f64>,
    /// The bound at which a degree of freedom is held during this step.
    held: Vec<Option<f32>>,
    image: Vec<f64>,
    /// The normal equations `(J J^T + damping^2 I) y = e` of the unheld degrees of freedom.
    normal: DampedSystem,
    /// Per goal (workspace order), the degrees of freedom that move it
    /// (`goal_dofs[goal_dof_start[g]..goal_dof_start[g + 1]]`); per degree of freedom, the
    /// rows of the goals it moves, ascending (`dof_rows[dof_row_start[d]..]`): the
    /// Jacobian's structure, fixed for a solve (a joint moves only the goals below it, so
    /// on a body with several limbs most of each column is zero).
    goal_dofs: Vec<usize>,
    goal_dof_start: Vec<usize>,
    dof_rows: Vec<usize>,
    dof_row_start: Vec<usize>,
    /// Scratch for filling `dof_rows`.
    filled: Vec<usize>,
    /// The blocks of `J J^T` on or below the diagonal that are not zero: per pair of goals
    /// (the first at or after the second, in workspace order) that share degrees of
    /// freedom, their first rows, row counts, and the shared degrees of freedom
    /// (`pair_dofs[block.dofs.0..block.dofs.1]`).
    pair_blocks: Vec<PairBlock>,
    pair_dofs: Vec<usize>,
    /// Per degree of freedom, 1 unless held this step (then 0).
    unheld: Vec<f64>,
    saved: Vec<Quat>,
    saved_euler: Vec<[f32; 3]>,
    /// `W^-1 J^T` of a weighted step (`gain[dof * rows + row]`), and one row of `J` being
    /// turned into it.
    gain: Vec<f64>,
    row: Vec<f64>,
    /// The moving bones' tree, for the weighted step of free joints.
    tree: BoneTree,
    /// The transpose's conjugate-gradient state: this step's `J^T e`, the last one's, the
    /// last direction (empty: start afresh) and how many steps it has been bent.
    gradient: Vec<f64>,
    last_gradient: Vec<f64>,
    direction: Vec<f64>,
    conjugate_steps: usize,
    /// Whether the last `clamp_step` shortened the step.
    clamped: bool,
    /// Whether goals are scaled and steps limited per component (damped least squares;
    /// the transpose keeps one scale per goal and one limit, see `Scratch::components`).
    by_component: bool,
    /// Per goal (workspace order), the factor on its rows: its chain's length over its
    /// component's length times its goal count (1 without `by_component`).
    goal_factor: Vec<f64>,
    /// Per row, its goal's factor (the score is measured without it).
    row_factor: Vec<f64>,
    /// Per degree of freedom, its component (the goals it moves), or `usize::MAX`.
    dof_component: Vec<usize>,
    /// Scratch: union-find over the goals, the goal that first claimed each moving bone,
    /// bones already measured, each component's goal count, length and largest turn.
    leader: Vec<usize>,
    owner: Vec<usize>,
    measured: Vec<bool>,
    component_goals: Vec<usize>,
    component_length: Vec<f64>,
    component_turn: Vec<f64>,
}

/// One block of `J J^T` (see `Scratch::pair_blocks`).
#[derive(Debug, Clone, Copy)]
struct PairBlock {
    rows: (usize, usize),
    columns: (usize, usize),
    dofs: (usize, usize),
}

/// Whether degree of freedom `dof` moves goal `g` at first order: it is above the
/// effector, and the goal may recruit it (with exclusive chains, or for a target beyond
/// reach, only its own chain's joints).
fn moves_goal(ws: &Workspace, rig: &Rig, dof: Dof, g: usize) -> bool {
    let prepared = &ws.goals[g];
    rig.subtree(dof.bone).contains(&prepared.goal.bone)
        && !((ws.exclusive || prepared.beyond_reach) && !ws.joints(g).contains(&dof.bone))
}

impl Scratch {
    fn prepare(&mut self, ws: &Workspace, rig: &Rig) {
        self.bones.clear();
        self.bones.extend_from_slice(&ws.goal_joints);
        self.bones.sort_unstable();
        self.bones.dedup();
        self.dofs.clear();
        for &bone in &self.bones {
            let limits = rig.limits(bone);
            if limits.is_free() {
                self.dofs.extend((0..3).map(|axis| Dof {
                    bone,
                    axis,
                    euler: false,
                }));
            } else {
                let unlocked = (0..3).filter(|&a| !limits.axes()[a].is_locked());
                self.dofs.extend(unlocked.map(|axis| Dof {
                    bone,
                    axis,
                    euler: true,
                }));
            }
        }
        self.rows = ws
            .goals
            .iter()
            .map(|g| if has_rotation(&g.goal) { 6 } else { 3 })
            .sum();
        let (m, n) = (self.rows, self.dofs.len());
        self.jac.resize(m * n, 0.0);
        self.error.resize(m, 0.0);
        self.image.resize(m, 0.0);
        self.step.resize(n, 0.0);
        self.held.resize(n, None);
        self.normal.resize(m);
        self.saved.resize(rig.len(), Quat::IDENTITY);
        self.saved_euler.resize(rig.len(), [0.0; 3]);
        // Built at the first weighted step, if any (unweighted solves never need it).
        self.tree.ready = false;
        self.forget_direction();
        self.components(ws, rig);
        self.structure(ws, rig);
    }

    /// Which degrees of freedom move which goals (see `goal_dofs`); the Jacobian zeroed
    /// once, since `linearise` writes only those entries.
    fn structure(&mut self, ws: &Workspace, rig: &Rig) {
        let (goals, dofs) = (ws.goals.len(), self.dofs.len());
        self.goal_dofs.clear();
        self.goal_dof_start.clear();
        for g in 0..goals {
            self.goal_dof_start.push(self.goal_dofs.len());
            self.goal_dofs
                .extend((0..dofs).filter(|&d| moves_goal(ws, rig, self.dofs[d], g)));
        }
        self.goal_dof_start.push(self.goal_dofs.len());
        self.dof_rows.clear();
        self.dof_row_start.clear();
        self.dof_row_start.resize(dofs + 1, 0);
        // Count each column's rows, then fill them goal by goal (rows ascending).
        let rows_of = |g: usize| {
            if has_rotation(&ws.goals[g].goal) {
                6
            } else {
                3
            }
        };
        for g in 0..goals {
            for &d in &self.goal_dofs[self.goal_dof_start[g]..self.goal_dof_start[g + 1]] {
                self.dof_row_start[d + 1] += rows_of(g);
            }
        }
        for d in 0..dofs {
            self.dof_row_start[d + 1] += self.dof_row_start[d];
        }
        self.dof_rows.resize(self.dof_row_start[dofs], 0);
        self.filled.clear();
        self.filled.extend_from_slice(&self.dof_row_start);
        let mut row = 0;
        for g in 0..goals {
            for &d in &self.goal_dofs[self.goal_dof_start[g]..self.goal_dof_start[g + 1]] {
                for r in row..row + rows_of(g) {
                    self.dof_rows[self.filled[d]] = r;
                    self.filled[d] += 1;
                }
            }
            row += rows_of(g);
        }
        self.pair_blocks.clear();
        self.pair_dofs.clear();
        let mut first_row = 0;
        for g in 0..goals {
            let mine = &self.goal_dofs[self.goal_dof_start[g]..self.goal_dof_start[g + 1]];
            let mut other_row = 0;
            for h in 0..=g {
                let theirs = &self.goal_dofs[self.goal_dof_start[h]..self.goal_dof_start[h + 1]];
                let start = self.pair_dofs.len();
                // Both lists ascend: merge them.
                let (mut i, mut j) = (0, 0);
                while i < mine.len() && j < theirs.len() {
                    match mine[i].cmp(&theirs[j]) {
                        std::cmp::Ordering::Less => i += 1,
                        std::cmp::Ordering::Greater => j += 1,
                        std::cmp::Ordering::Equal => {
                            self.pair_dofs.push(mine[i]);
                            i += 1;
                            j += 1;
                        }
                    }
                }
                if self.pair_dofs.len() > start {
                    self.pair_blocks.push(PairBlock {
                        rows: (first_row, first_row + rows_of(g)),
                        columns: (other_row, other_row + rows_of(h)),
                        dofs: (start, self.pair_dofs.len()),
                    });
                }
                other_row += rows_of(h);
            }
            first_row += rows_of(g);
        }
        self.unheld.clear();
        self.unheld.resize(dofs, 1.0);
        self.jac.fill(0.0);
    }

    /// Groups the goals into components, those that share a degree of freedom (directly
    /// or through others), as Blender's IK merges chains into trees. With `by_component`,
    /// each goal's rows are measured against its component's length (every moving bone's
    /// segment once) and shared by its goals (their weights summing to one), where alone
    /// they are measured against the goal's own chain: the damping then weighs a shared
    /// spine as much as a lone limb, and the spine bends less for each of the goals on it
    /// (bench_mocap's tuning clips, full body from a cold start: 18.5 -> 17.1 degrees from
    /// the actor, Blender's IK 17.6). A lone chain keeps its own scale.
    fn components(&mut self, ws: &Workspace, rig: &Rig) {
        let goals = ws.goals.len();
        self.goal_factor.clear();
        self.goal_factor.resize(goals, 1.0);
        self.dof_component.clear();
        self.dof_component.resize(self.dofs.len(), usize::MAX);
        self.row_factor.clear();
        self.row_factor.resize(self.rows, 1.0);
        if !self.by_component {
            return;
        }
        if goals == 1 {
            // One goal is one component on its own chain's scale (factor 1): only which
            // degrees of freedom it claims is needed, as below, without the union-find
            // over the whole rig (a group of a bake solved apart is one goal, every frame).
            let prepared = &ws.goals[0];
            for (dof, component) in self.dofs.iter().zip(&mut self.dof_component) {
                let claimed = if ws.exclusive || prepared.beyond_reach {
                    ws.joints(0).contains(&dof.bone)
                } else {
                    ws.moving[dof.bone] && rig.subtree(dof.bone).contains(&prepared.goal.bone)
                };
                if claimed {
                    *component = 0;
                }
            }
            return;
        }
        fn find(leader: &mut [usize], mut g: usize) -> usize {
            while leader[g] != g {
                leader[g] = leader[leader[g]];
                g = leader[g];
            }
            g
        }
        self.leader.clear();
        self.leader.extend(0..goals);
        // Each moving bone claimed by the first goal it moves; a second joins the first's
        // component (a walk up from each effector, not a test of every degree of freedom).
        self.owner.clear();
        self.owner.resize(rig.len(), usize::MAX);
        for g in 0..goals {
            let claim = |owner: &mut Vec<usize>, leader: &mut Vec<usize>, bone: usize| {
                if owner[bone] == usize::MAX {
                    owner[bone] = g;
                } else {
                    let (a, b) = (find(leader, owner[bone]), find(leader, g));
                    if a != b {
                        leader[b] = a;
                    }
                }
            };
            if ws.exclusive || ws.goals[g].beyond_reach {
                for &bone in ws.joints(g) {
                    claim(&mut self.owner, &mut self.leader, bone);
                }
            } else {
                let mut above = Some(ws.goals[g].goal.bone);
                while let Some(bone) = above {
                    if ws.moving[bone] {
                        claim(&mut self.owner, &mut self.leader, bone);
                    }
                    above = rig.parent(bone);
                }
            }
        }
        self.component_goals.clear();
        self.component_goals.resize(goals, 0);
        for g in 0..goals {
            let c = find(&mut self.leader, g);
            self.component_goals[c] += 1;
        }
        self.component_length.clear();
        self.component_length.resize(goals, 0.0);
        self.measured.clear();
        self.measured.resize(rig.len(), false);
        for g in 0..goals {
            let c = find(&mut self.leader, g);
            if self.component_goals[c] < 2 {
                continue;
            }
            // The goal's segments, effector first: each bone's from its head to the next
            // point down the chain, counted once however many goals it serves.
            let mut below = ws.effector(g);
            for &bone in ws.joints(g) {
                let head = ws.head(bone);
                if !self.measured[bone] {
                    self.measured[bone] = true;
                    self.component_length[c] += below.distance(head) as f64;
                }
                below = head;
            }
        }
        let mut row = 0;
        for g in 0..goals {
            let c = find(&mut self.leader, g);
            let rows = if has_rotation(&ws.goals[g].goal) {
                6
            } else {
                3
            };
            if self.component_goals[c] >= 2 {
                // A lone chain keeps its own scale (factor 1).
                let own = ws.goals[g].length_scale as f64;
                let size = self.component_length[c].max(own) * self.component_goals[c] as f64;
                let factor = own / size;
                self.goal_factor[g] = factor;
                self.row_factor[row..row + rows].fill(factor);
            }
            row += rows;
        }
        for d in 0..self.dofs.len() {
            let owner = self.owner[self.dofs[d].bone];
            if owner != usize::MAX {
                self.dof_component[d] = find(&mut self.leader, owner);
            }
        }
    }

    /// The armature-space axis of a degree of freedom at the current pose.
    fn axis(ws: &Workspace, rig: &Rig, dof: Dof) -> Vec3 {
        if !dof.euler {
            return [Vec3::X, Vec3::Y, Vec3::Z][dof.axis];
        }
        let local = rig.limits(dof.bone).rate_axes(ws.euler[dof.bone])[dof.axis];
        (ws.frame_before_basis(rig, dof.bone) * local).normalize()
    }

    /// Fills the Jacobian and the scaled error at the current pose; returns the squared
    /// error norm (the driver's score).
    fn linearise(&mut self, ws: &Workspace, rig: &Rig) -> f64 {
        self.axes.clear();
        self.axes
            .extend(self.dofs.iter().map(|&dof| Self::axis(ws, rig, dof)));
        let m = self.rows;
        let mut row = 0;
        for (g, prepared) in ws.goals.iter().enumerate() {
            let goal = prepared.goal;
            let effector = ws.effector(g);
            let factor = self.goal_factor[g];
            let position_scale =
                (goal.weight as f64).sqrt() / prepared.length_scale as f64 * factor;
            // A target beyond reach pulls on nothing (its chain is stretched towards it).
            let position_scale = if prepared.beyond_reach {
                0.0
            } else {
                position_scale
            };
            let e = (goal.target - effector).as_dvec3() * position_scale;
            self.error[row..row + 3].copy_from_slice(&e.to_array());
            let rotation_scale = has_rotation(&goal).then(|| {
                let target = goal.rotation.unwrap_or(Quat::IDENTITY);
                let mut turn = target * ws.world_rot[goal.bone].conjugate();
                if turn.w < 0.0 {
                    turn = -turn;
                }
                let s = ((goal.weight * goal.rotation_weight) as f64).sqrt() * factor;
                let r = turn.to_scaled_axis().as_dvec3() * s;
                self.error[row + 3..row + 6].copy_from_slice(&r.to_array());
                s
            });
            // Every degree of freedom above the effector moves it, including those another
            // goal recruits (a head goal turning the chest carries the arms): a goal's chain
            // length limits which joints it may recruit, not what moves it. With exclusive
            // chains a goal drives its own joints only; the others carry it between steps.
            for &d in &self.goal_dofs[self.goal_dof_start[g]..self.goal_dof_start[g + 1]] {
                let (axis, dof) = (self.axes[d], self.dofs[d]);
                let column = &mut self.jac[d * m..(d + 1) * m];
                let dp = axis.cross(effector - ws.head(dof.bone)).as_dvec3() * position_scale;
                column[row..row + 3].copy_from_slice(&dp.to_array());
                if let Some(s) = rotation_scale {
                    column[row + 3..row + 6].copy_from_slice(&(axis.as_dvec3() * s).to_array());
                }
            }
            row += if rotation_scale.is_some() { 6 } else { 3 };
        }
        // The score as the driver measures it: without the components' factors.
        self.error
            .iter()
            .zip(&self.row_factor)
            .map(|(e, f)| (e / f) * (e / f))
            .sum()
    }

    fn column(&self, d: usize) -> &[f64] {
        &self.jac[d * self.rows..(d + 1) * self.rows]
    }

    /// Damped least squares step `J^T (J J^T + lambda^2 I)^-1 e`. Degrees of freedom the
    /// step would push past a limit are held at their bound and the system is solved again
    /// for the error they leave, so other joints take it up instead of it being lost.
    fn dls_step(&mut self, ws: &Workspace, rig: &Rig, damping: f64, world_weight: f64) -> bool {
        self.held.iter_mut().for_each(|h| *h = None);
        // Only free joints that each move a goal: a joint that moves none (the bone of a
        // goal at its head) would turn back against its parents' turns; on limited joints
        // the weighting made motion capture less like the actor (tuning clips, Human
        // Limits: limbs warm 17.8 -> 20.4 degrees) and took 4x longer. (Free joints are
        // never held, so a weighted step is solved once.)
        let weighted = world_weight > 0.0
            && self.dofs.len() == 3 * self.bones.len()
            && self.dofs.iter().all(|d| !d.euler)
            && (0..self.dofs.len()).all(|d| self.moves_a_goal(d));
        for _ in 0..4 {
            let solved = if weighted {
                self.solve_free_weighted(rig, damping, world_weight)
            } else {
                self.solve_unheld(ws, damping)
            };
            if !solved {
                return false;
            }
            let mut newly_held = false;
            for d in 0..self.dofs.len() {
                let dof = self.dofs[d];
                if !dof.euler || self.held[d].is_some() {
                    continue;
                }
                let wanted = ws.euler[dof.bone][dof.axis] + self.step[d] as f32;
                let allowed = rig.limits(dof.bone).clamp_axis(dof.axis, wanted);
                if allowed != wanted {
                    self.held[d] = Some(allowed);
                    newly_held = true;
                }
            }
            if !newly_held {
                break;
            }
        }
        true
    }

    /// Whether degree of freedom `d` moves any goal at first order.
    fn moves_a_goal(&self, d: usize) -> bool {
        self.column(d).iter().any(|&j| j != 0.0)
    }

    /// Subtracts what the held degrees of freedom do from the error, and sets their steps.
    fn hold(&mut self, ws: &Workspace) {
        let m = self.rows;
        for d in 0..self.dofs.len() {
            if let Some(bound) = self.held[d] {
                let dof = self.dofs[d];
                let step = (bound - ws.euler[dof.bone][dof.axis]) as f64;
                self.step[d] = step;
                let column = &self.jac[d * m..(d + 1) * m];
                for (rhs, j) in self.normal.rhs_mut().iter_mut().zip(column) {
                    *rhs -= j * step;
                }
            }
        }
    }

    /// The damped least squares step of least cost `x^T W x`:
    /// `W^-1 J^T (J W^-1 J^T + lambda^2 I)^-1 e`, with `W = (1 - w) I + w M^T M`, where `M`
    /// maps the joints' turns to every moving bone's turn in armature space (a bone turns
    /// by its own and its moving ancestors' turns). For free joints (three turns about the
    /// armature axes each) `W` is the bones' tree matrix times the 3x3 identity, solved in
    /// time linear in the bones ([`BoneTree`]).
    fn solve_free_weighted(&mut self, rig: &Rig, damping: f64, world_weight: f64) -> bool {
        let m = self.rows;
        let n = self.dofs.len();
        self.normal.reset(&self.error);
        if !self.tree.ready {
            self.tree.prepare(rig, &self.bones);
        }
        self.tree.weigh(world_weight);
        self.gain.resize(n * m, 0.0);
        let bones = self.bones.len();
        self.row.resize(bones, 0.0);
        for r in 0..m {
            for axis in 0..3 {
                for j in 0..bones {
                    self.row[j] = self.jac[(3 * j + axis) * m + r];
                }
                self.tree.solve(&mut self.row);
                for j in 0..bones {
                    self.gain[(3 * j + axis) * m + r] = self.row[j];
                }
            }
        }
        for d in 0..n {
            let (column, gain) = (
                &self.jac[d * m..(d + 1) * m],
                &self.gain[d * m..(d + 1) * m],
            );
            // A joint moves only the goals below it: its column's other rows are zero.
            for (r, &j) in column.iter().enumerate().filter(|(_, j)| **j != 0.0) {
                for (c, &g) in gain.iter().enumerate() {
                    self.normal.add(r, c, j * g);
                }
            }
        }
        if !self.normal.solve(damping * damping) {
            return false;
        }
        let y = self.normal.solution();
        for d in 0..n {
            self.step[d] = self.gain[d * m..(d + 1) * m]
                .iter()
                .zip(y)
                .map(|(g, y)| g * y)
                .sum();
        }
        true
    }

    fn solve_unheld(&mut self, ws: &Workspace, damping: f64) -> bool {
        let m = self.rows;
        self.normal.reset(&self.error);
        self.hold(ws);
        for (unheld, held) in self.unheld.iter_mut().zip(&self.held) {
            *unheld = if held.is_some() { 0.0 } else { 1.0 };
        }
        // The lower triangle of `J J^T` (all the factorisation reads), entry by entry over
        // the degrees of freedom both rows' goals share (a joint moves only the goals below
        // it), summed in a register.
        let (jac, unheld) = (&self.jac, &self.unheld);
        for block in &self.pair_blocks {
            let dofs = &self.pair_dofs[block.dofs.0..block.dofs.1];
            for r in block.rows.0..block.rows.1 {
                let last = if block.rows == block.columns {
                    r + 1
                } else {
                    block.columns.1
                };
                for c in block.columns.0..last {
                    let sum: f64 = dofs
                        .iter()
                        .map(|&d| unheld[d] * jac[d * m + r] * jac[d * m + c])
                        .sum();
                    self.normal.add(r, c, sum);
                }
            }
        }
        if !self.normal.solve(damping * damping) {
            return false;
        }
        let solution = self.normal.solution();
        for d in 0..self.dofs.len() {
            if self.held[d].is_none() {
                let column = &self.jac[d * m..(d + 1) * m];
                let rows = &self.dof_rows[self.dof_row_start[d]..self.dof_row_start[d + 1]];
                self.step[d] = rows.iter().map(|&r| column[r] * solution[r]).sum();
            }
        }
        true
    }

    /// Jacobian transpose step along `d = J^T e + beta d_prev` (nonlinear conjugate
    /// gradients, Polak-Ribiere with restarts: the transpose's own direction `J^T e`, bent
    /// by the last direction so successive steps stop undoing each other), with the step
    /// length that is optimal for the linearised problem: `alpha = (e . J d) / |J d|^2`.
    /// Steepest descent alone zig-zagged where position and rotation rows pull unlike
    /// amounts: an arm of three bones given a reachable position and rotation reached 7 of
    /// 60 in 5000 iterations. The direction restarts as `J^T e` after a step that was
    /// shortened (`forget_direction`), every as many steps as there are degrees of
    /// freedom, and whenever the bent direction would not descend.
    fn transpose_step(&mut self, ws: &Workspace, rig: &Rig) -> bool {
        let (m, n) = (self.rows, self.dofs.len());
        self.gradient.resize(n, 0.0);
        for d in 0..n {
            let pull: f64 = self.jac[d * m..(d + 1) * m]
                .iter()
                .zip(&self.error)
                .map(|(j, e)| j * e)
                .sum();
            // A joint on its bound pulled further out cannot follow (as damped least
            // squares holds it): counted, its share bent the direction and the step length
            // towards a move the limits then took back, and the conjugate directions built
            // on steps that were not taken (the limited humanoid's five goals: a median
            // of 437 iterations, 150 without).
            self.gradient[d] = if self.pushes_past_bound(ws, rig, d, pull) {
                0.0
            } else {
                pull
            };
        }
        let restart = self.direction.len() != n || self.conjugate_steps >= n;
        let beta = if restart {
            0.0
        } else {
            let previous: f64 = self.last_gradient.iter().map(|g| g * g).sum();
            let change: f64 = self
                .gradient
                .iter()
                .zip(&self.last_gradient)
                .map(|(g, p)| g * (g - p))
                .sum();
            if previous > 0.0 {
                (change / previous).max(0.0)
            } else {
                0.0
            }
        };
        self.direction.resize(n, 0.0);
        for d in 0..n {
            let bent = self.gradient[d] + beta * self.direction[d];
            self.direction[d] = if self.pushes_past_bound(ws, rig, d, bent) {
                0.0
            } else {
                bent
            };
        }
        let mut along = self.project_direction();
        self.conjugate_steps = if beta > 0.0 {
            self.conjugate_steps + 1
        } else {
            1
        };
        if beta > 0.0 && along <= 0.0 {
            // Bent too far to descend: the transpose's own direction, a fresh start.
            self.direction.copy_from_slice(&self.gradient);
            along = self.project_direction();
            self.conjugate_steps = 1;
        }
        self.last_gradient.clear();
        self.last_gradient.extend_from_slice(&self.gradient);
        let norm: f64 = self.image.iter().map(|a| a * a).sum();
        if norm.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
            return false;
        }
        let alpha = along / norm;
        for (step, direction) in self.step.iter_mut().zip(&self.direction) {
            *step = alpha * direction;
        }
        true
    }

    /// Whether moving degree of freedom `d` by `amount` (any positive scale of it) pushes an
    /// Euler angle sitting on its bound further out.
    fn pushes_past_bound(&self, ws: &Workspace, rig: &Rig, d: usize, amount: f64) -> bool {
        let dof = self.dofs[d];
        if !dof.euler {
            return false;
        }
        if amount == 0.0 {
            return false;
        }
        // A nudge outwards that the limits take back entirely (within rounding).
        let angle = ws.euler[dof.bone][dof.axis];
        let nudged = angle + if amount > 0.0 { 1e-5 } else { -1e-5 };
        (rig.limits(dof.bone).clamp_axis(dof.axis, nudged) - angle).abs() < 1e-6
    }

    /// `J d` of the current direction into `image`; returns `e . J d`.
    fn project_direction(&mut self) -> f64 {
        let m = self.rows;
        self.image.iter_mut().for_each(|v| *v = 0.0);
        for (d, &s) in self.direction.iter().enumerate() {
            for r in 0..m {
                self.image[r] += self.jac[d * m + r] * s;
            }
        }
        self.image.iter().zip(&self.error).map(|(a, e)| a * e).sum()
    }

    /// The next transpose step starts afresh from `J^T e` (after a step that had to be
    /// shortened, or a new solve).
    fn forget_direction(&mut self) {
        self.direction.clear();
    }

    /// Scales the step so no joint turns more than `max_angle`; false if it is not finite.
    /// With `by_component`, each component's step is scaled on its own: a limb reaching far
    /// no longer slows the others (one hand's chain stretched towards a target beyond reach
    /// held every other limb to a fraction of its step for a hundred iterations).
    fn clamp_step(&mut self, max_angle: f32) -> bool {
        if !self.step.iter().all(|s| s.is_finite()) {
            return false;
        }
        let components = if self.by_component {
            self.goal_factor.len() + 1
        } else {
            1
        };
        let component = |d: usize, dofs: &[usize]| match dofs.get(d) {
            Some(&c) if c != usize::MAX => c,
            _ => components - 1,
        };
        let dofs = if self.by_component {
            &self.dof_component[..]
        } else {
            &[][..]
        };
        self.component_turn.clear();
        self.component_turn.resize(components, 0.0);
        let mut d = 0;
        while d < self.dofs.len() {
            let c = component(d, dofs);
            if self.dofs[d].euler {
                self.component_turn[c] = self.component_turn[c].max(self.step[d].abs());
                d += 1;
            } else {
                let turn = self.step[d..d + 3]
                    .iter()
                    .map(|s| s * s)
                    .sum::<f64>()
                    .sqrt();
                self.component_turn[c] = self.component_turn[c].max(turn);
                d += 3;
            }
        }
        self.clamped = false;
        for d in 0..self.dofs.len() {
            let largest = self.component_turn[component(d, dofs)];
            if largest > max_angle as f64 {
                self.step[d] *= max_angle as f64 / largest;
                self.clamped = true;
            }
        }
        true
    }

    /// Applies `scale` times the step to every joint at once (linearised at the current
    /// pose), through the limits, then reruns forward kinematics.
    fn apply_step(&self, ws: &mut Workspace, rig: &Rig, scale: f64) {
        let mut d = 0;
        while d < self.dofs.len() {
            let bone = self.dofs[d].bone;
            if self.dofs[d].euler {
                let limits = *rig.limits(bone);
                let mut angles = ws.euler[bone];
                while d < self.dofs.len() && self.dofs[d].bone == bone {
                    let axis = self.dofs[d].axis;
                    angles[axis] =
                        limits.clamp_axis(axis, angles[axis] + (scale * self.step[d]) as f32);
                    d += 1;
                }
                ws.euler[bone] = angles;
                ws.store_local_rotation(rig, bone, limits.rotation_of(angles));
            } else {
                let turn = Vec3::new(
                    self.step[d] as f32,
                    self.step[d + 1] as f32,
                    self.step[d + 2] as f32,
                ) * scale as f32;
                let frame = ws.frame_before_basis(rig, bone);
                let local = frame.conjugate()
                    * Quat::from_scaled_axis(turn)
                    * frame
                    * ws.pose.rotations[bone];
                ws.store_local_rotation(rig, bone, local.normalize());
                d += 3;
            }
        }
        ws.forward_kinematics(rig);
    }

    fn save(&mut self, ws: &Workspace) {
        for &bone in &self.bones {
            self.saved[bone] = ws.pose.rotations[bone];
            self.saved_euler[bone] = ws.euler[bone];
        }
    }

    fn restore(&self, ws: &mut Workspace, rig: &Rig) {
        for &bone in &self.bones {
            ws.pose.rotations[bone] = self.saved[bone];
            ws.euler[bone] = self.saved_euler[bone];
        }
        ws.forward_kinematics(rig);
    }
}

fn has_rotation(goal: &Goal) -> bool {
    goal.rotation.is_some() && goal.rotation_weight > 0.0
}

/// The moving bones as a tree (each one's parent: its nearest moving ancestor), to solve
/// `W x = b` for `W = (1 - w) I + w C^T C` in time linear in the bones, where `C` sums each
/// bone's and its moving ancestors' turns (`C[k][j] = 1` when `j` is `k` or above it).
///
/// `C` is inverted by `D`, which takes each bone's value minus its parent's, so
/// `W = C^T T C` with `T = (1 - w) D^T D + w I`: `x = D T^-1 D^T b`. `T` is zero outside its
/// diagonal and the parent-child pairs, so eliminating children before their parents
/// factorises it with no fill.
#[derive(Debug, Clone, Default)]
struct BoneTree {
    /// Each moving bone's parent among the moving bones (their indices are sorted, so a
    /// parent always comes before its children).
    parent: Vec<Option<usize>>,
    children: Vec<f64>,
    /// Whether `parent` and `children` describe the current solve's moving bones.
    ready: bool,
    /// The weight `w` the pivots were computed for, and the pivots.
    weight: f64,
    pivot: Vec<f64>,
    sums: Vec<f64>,
}

impl BoneTree {
    fn prepare(&mut self, rig: &Rig, bones: &[usize]) {
        self.parent.clear();
        self.parent
            .extend(bones.iter().enumerate().map(|(k, &bone)| {
                // The nearest moving bone above: the last earlier one whose subtree holds it.
                (0..k)
                    .rev()
                    .find(|&j| rig.subtree(bones[j]).contains(&bone))
            }));
        self.children.clear();
        self.children.resize(bones.len(), 0.0);
        for p in self.parent.iter().flatten() {
            self.children[*p] += 1.0;
        }
        self.weight = f64::NAN;
        self.ready = true;
    }

    /// Computes the pivots of `T` for the weight `w` (once per weight).
    fn weigh(&mut self, w: f64) {
        if self.weight == w {
            return;
        }
        let a = 1.0 - w;
        self.weight = w;
        self.pivot.clear();
        self.pivot
            .extend(self.children.iter().map(|c| w + a * (1.0 + c)));
        for k in (0..self.parent.len()).rev() {
            if let Some(p) = self.parent[k] {
                self.pivot[p] -= a * a / self.pivot[k];
            }
        }
    }

    /// Replaces `b` (one value per moving bone) by `W^-1 b`.
    fn solve(&mut self, b: &mut [f64]) {
        let a = 1.0 - self.weight;
        let n = b.len();
        // D^T b: each bone's value minus its children's.
        self.sums.clear();
        self.sums.extend_from_slice(b);
        for (value, parent) in b.iter().zip(&self.parent) {
            if let Some(p) = *parent {
                self.sums[p] -= value;
            }
        }
        // T y = D^T b: children eliminated into their parents, then parents first.
        for k in (0..n).rev() {
            if let Some(p) = self.parent[k] {
                self.sums[p] += a * self.sums[k] / self.pivot[k];
            }
        }
        for k in 0..n {
            let above = self.parent[k].map_or(0.0, |p| a * self.sums[p]);
            self.sums[k] = (self.sums[k] + above) / self.pivot[k];
        }
        // x = D y.
        for (k, value) in b.iter_mut().enumerate() {
            *value = self.sums[k] - self.parent[k].map_or(0.0, |p| self.sums[p]);
        }
    }
}

/// Damped least squares (Levenberg-Marquardt when adaptive), solved by a Cholesky
/// factorisation of the small `rows x rows` system (`math::dense`).
#[derive(Debug, Clone, Default)]
pub struct JacobianDls {
    /// Settings.
    pub params: JacobianDlsParams,
    ws: Workspace,
    scratch: Scratch,
    unpin: Unpin,
    apart: Apart,
    /// Whether each solve's first damping stays the setting's, not scaled to how far the
    /// goals are (the tension minimiser's and FABRIK's and CCD's finishing passes).
    plain_start: bool,
}

/// Where a retry starts from the stalled pose.
#[derive(Debug, Clone, Copy)]
enum Retry {
    /// The goals' joints pinned on a bound moved back inside: by this step, or to the
    /// middle of the range with `None` ([`JointLimits::unpinned`]).
    ///
    /// [`JointLimits::unpinned`]: crate::rig::JointLimits::unpinned
    Unpin(Option<f32>),
    /// The joints of the goals still missed within reach at their limits' neutral
    /// ([`JointLimits::neutral_within`]).
    ///
    /// [`JointLimits::neutral_within`]: crate::rig::JointLimits::neutral_within
    Neutral,
}

/// The most CCD sweeps the last retry takes (see [`solve_unpinning`]): the cases that
/// needed them reached within 10; at 200, solves whose targets the limits forbid took 7
/// times as long as before the retry (0.76 against 0.10 ms, limbs of the limited humanoid;
/// QA helper), at 20 under 3 times.
const SWEEPS: u32 = 20;

/// The retries in order, each only while none has reached: pinned joints a small step
/// in (the pose stays close to the stalled one), then to the middle of their ranges; last
/// the missed chains from their neutral, for a stall no move off a bound undoes (and
/// after these, CCD's sweeps: see [`solve_unpinning`]).
const RETRIES_FROM_STALL: [Retry; 3] =
    [Retry::Unpin(Some(0.26)), Retry::Unpin(None), Retry::Neutral];

/// The poses of a solve retried from its stalled pose (sized the first time a solve
/// stalls on limits, then reused).
#[derive(Debug, Clone)]
struct Unpin {
    /// No retries (see [`JacobianDls::allow_unpin`]).
    disabled: bool,
    /// Which bones the goals turn (by index).
    bones: Vec<bool>,
    /// Which bones the goals missed within reach turn (by index).
    missed: Vec<bool>,
    stalled: Pose,
    start: Pose,
    best: Pose,
    /// The last retry's sweeps (made the first time every other retry misses).
    sweeper: Option<Box<Ccd>>,
}

/// A Jacobian solver's single solve and the parts [`solve_unpinning`] reads.
trait SolveOnce {
    /// The workspace as the last solve left it (after a retry, the last retry's pose,
    /// not necessarily the one returned: no caller reads it afterwards), the iteration
    /// settings, the retry's poses.
    fn parts(&mut self) -> (&Workspace, &IterationParams, &mut Unpin);

    /// Whether the next solves keep the bends recorded by the last (retries).
    fn freeze_bends(&mut self, frozen: bool);

    /// Whether the next solves start with the goals' poles aimed already
    /// ([`Workspace::poles_aimed`]), and whether they do now.
    fn keep_poles_aimed(&mut self, aimed: bool);
    fn poles_aimed(&self) -> bool;

    /// One solve from `start`.
    fn solve_once(
        &mut self,
        rig: &Rig,
        start: &Pose,
        goals: &[Goal],
        out: &mut Pose,
    ) -> Result<SolveReport>;
}

/// Solves from `start`; when that stalls short of a target within its chain's reach, on
/// a chain with limits, solves again from the stalled pose with the joints pinned on a
/// bound moved back inside ([`JointLimits::unpinned`]: a small step, then the middle of
/// the range), then with the missed chains at their limits' neutral
/// ([`JointLimits::neutral_within`]), and keeps the closest pose.
///
/// A joint on a bound has no first-order way back: on motion capture with human limits,
/// a warm start left an elbow held straight on its stop while the target came nearer
/// (the hand 37-200 mm short on 13% of the full-body frames of a tuning clip); moving
/// off the bound reaches them. Frame after frame a warm start can also wind a joint far
/// round its range: an upper arm at the ends of its swing ranges with its z angle turned
/// to near -170 degrees, where the target lay on the far side of a 2.6 rad unwinding
/// that moves the hand away first. Moving the pinned axes leaves the winding, so those
/// retries fell back into it (the hand up to 40 mm short on limbs, tuning clips); the
/// neutral unwinds it.
///
/// [`JointLimits::unpinned`]: crate::rig::JointLimits::unpinned
/// [`JointLimits::neutral_within`]: crate::rig::JointLimits::neutral_within
fn solve_unpinning<S: SolveOnce>(
    solver: &mut S,
    rig: &Rig,
    start: &Pose,
    goals: &[Goal],
    out: &mut Pose,
) -> Result<SolveReport> {
    let report = solver.solve_once(rig, start, goals, out)?;
    let (ws, params, unpin) = solver.parts();
    if report.reached
        || unpin.disabled
        || !ws.moves_limited_joint(rig)
        || ws.misses_only_out_of_reach(params)
    {
        return Ok(report);
    }
    let mut unpin = std::mem::take(unpin);
    // A mask over the rig's bones, not a list: its size is the rig's whatever the goals,
    // so a later solve with longer chains does not allocate.
    unpin.bones.clear();
    unpin.bones.resize(rig.len(), false);
    for &bone in &ws.goal_joints {
        unpin.bones[bone] = true;
    }
    // The chains the neutral retry moves: those of the goals missed within reach that
    // hold the solve back. The stall exit stops while the others are still converging,
    // under a hundredth of the worst's score (their relative error under a tenth of its):
    // they keep their stalled pose.
    let missed = || (0..ws.goals.len()).filter(|&g| ws.misses_within_reach(g, params));
    let worst = missed().map(|g| ws.score_of(&[g])).fold(0.0, f64::max);
    unpin.missed.clear();
    unpin.missed.resize(rig.len(), false);
    for g in missed().filter(|&g| ws.score_of(&[g]) >= 0.01 * worst) {
        for &bone in ws.joints(g) {
            unpin.missed[bone] = true;
        }
    }
    unpin.stalled.copy_from(out);
    unpin.best.copy_from(out);
    let mut closest = Closest::new(report);
    // Retries keep the bends of the caller's start (see `Workspace::keep_bend_sides`), and
    // those from the stalled pose its poles' aim; from the joints' neutral they aim again.
    solver.freeze_bends(true);
    let aimed = solver.poles_aimed();
    for retry in RETRIES_FROM_STALL {
        if !unpin.prepare(rig, retry) {
            continue;
        }
        solver.keep_poles_aimed(matches!(retry, Retry::Unpin(_)));
        let solved = solver.solve_once(rig, &unpin.start, goals, out);
        solver.keep_poles_aimed(aimed);
        let again = match solved {
            Ok(again) => again,
            Err(error) => {
                // Keep the sized memory for the next solve.
                *solver.parts().2 = unpin;
                solver.freeze_bends(false);
                return Err(error);
            }
        };
        if closest.offer(again) {
            unpin.best.copy_from(out);
        }
        if closest.reached() {
            break;
        }
    }
    if !closest.reached() {
        // Last: CCD's sweeps from the caller's start, one joint at a time within its
        // limits, find ways round a fold every local step and retry above falls back into
        // (a hand behind and below the shoulder with Human Limits: every solver stopped
        // 3.4 mm short where CCD reached; QA helper), and the solve goes on from there.
        let params = *solver.parts().1;
        let sweeper = unpin
            .sweeper
            .get_or_insert_with(|| Box::new(Ccd::sweeps_only(CcdParams { iteration: params })));
        // CCD's own step (a whole turn): held to the Jacobian step's 0.5 rad, the sweeps
        // stalled 27 cm short of a target CCD reached (QA helper).
        sweeper.params.iteration = IterationParams {
            max_iterations: params.max_iterations.min(SWEEPS),
            max_step_angle: CcdParams::default().iteration.max_step_angle,
            ..params
        };
        let swept = sweeper.solve_into(rig, start, goals, &mut unpin.start);
        let solved = swept.and_then(|swept| {
            if swept.reached {
                out.copy_from(&unpin.start);
                return Ok(swept);
            }
            solver.keep_poles_aimed(true);
            let again = solver.solve_once(rig, &unpin.start, goals, out);
            solver.keep_poles_aimed(aimed);
            again
        });
        match solved {
            Ok(again) => {
                if closest.offer(again) {
                    unpin.best.copy_from(out);
                }
            }
            Err(error) => {
                *solver.parts().2 = unpin;
                solver.freeze_bends(false);
                return Err(error);
            }
        }
    }
    out.copy_from(&unpin.best);
    *solver.parts().2 = unpin;
    solver.freeze_bends(false);
    Ok(closest.report())
}

impl Default for Unpin {
    fn default() -> Self {
        Unpin {
            disabled: false,
            bones: Vec::new(),
            missed: Vec::new(),
            stalled: Pose::rest(0),
            start: Pose::rest(0),
            best: Pose::rest(0),
            sweeper: None,
        }
    }
}

impl Unpin {
    /// Copies `stalled` into the retry's start with the joints `retry` names moved;
    /// false when it moves none (nothing pinned, the missed chains already at neutral).
    fn prepare(&mut self, rig: &Rig, retry: Retry) -> bool {
        self.start.copy_from(&self.stalled);
        let mask = match retry {
            Retry::Unpin(_) => &self.bones,
            Retry::Neutral => &self.missed,
        };
        let mut moved = false;
        for bone in (0..mask.len()).filter(|&b| mask[b]) {
            let limits = rig.limits(bone);
            // A joint with no freedom stays as it starts (retried from its neutral, a fully
            // locked bone went back to rest).
            if limits.is_free() || limits.is_fully_locked() {
                continue;
            }
            let now = self.start.rotations[bone];
            let rotation = match retry {
                Retry::Unpin(step) => limits.unpinned(now, step),
                Retry::Neutral => Some(limits.neutral_within())
                    .filter(|neutral| angle_between(*neutral, now) > 1e-4),
            };
            if let Some(rotation) = rotation {
                self.start.rotations[bone] = rotation;
                moved = true;
            }
        }
        moved
    }
}

impl JacobianDls {
    /// A solver with these settings.
    pub fn new(params: JacobianDlsParams) -> Self {
        JacobianDls {
            params,
            ..JacobianDls::default()
        }
    }
}

impl JacobianDls {
    /// Whether full-body solving may share chains when exclusive ones fall short (on by
    /// default; the tension minimiser's polish, which has a reaching pose to fall back on,
    /// turns it off).
    pub(crate) fn allow_second_phase(&mut self, allow: bool) {
        self.ws.second_phase = allow;
    }

    /// Whether a solve that stalls on limits is retried with pinned joints moved off
    /// their bounds (on by default; FABRIK's and CCD's finish turns it off for its first
    /// try, from the sweep's pose, and has the start pose to try next).
    pub(crate) fn allow_unpin(&mut self, allow: bool) {
        self.unpin.disabled = !allow;
    }

    /// Whether a solve's first damping may be scaled to how far the goals are (on by
    /// default; the tension minimiser and FABRIK's and CCD's finish keep the setting's,
    /// the paths their own tuning was measured on).
    pub(crate) fn allow_scaled_start(&mut self, allow: bool) {
        self.plain_start = !allow;
    }

    /// Whether the next solves start from a pose whose poles a solve aimed already (a
    /// finish from a sweep's pose, the tension minimiser's polish), see
    /// [`Workspace::poles_aimed`].
    pub(crate) fn start_poles_aimed(&mut self, aimed: bool) {
        self.ws.poles_aimed = aimed;
    }
}

impl Solver for JacobianDls {
    fn iteration_params(&self) -> IterationParams {
        self.params.iteration
    }

    /// Groups are solved apart unless the root moves (it carries every goal) or the
    /// world-turn weighting is on: it is chosen for the whole solve (only when every moving
    /// joint is free), so a group alone could be weighted where together it is not.
    fn solves_groups_apart(&self) -> bool {
        !self.params.iteration.move_root && self.params.world_turn_weight == 0.0
    }

    /// Solves from `start`, retrying from the stalled pose with joints moved off their
    /// bounds when that stops short on limits (see `solve_unpinning` in this module);
    /// independent groups of goals one after another, each as if alone
    /// (`solvers::apart`).
    fn solve_into(
        &mut self,
        rig: &Rig,
        start: &Pose,
        goals: &[Goal],
        out: &mut Pose,
    ) -> Result<SolveReport> {
        solve_by_groups(self, rig, start, goals, out, solve_unpinning)
    }
}

impl SolvesApart for JacobianDls {
    fn apart(&mut self) -> &mut Apart {
        &mut self.apart
    }

    fn workspace(&mut self) -> &mut Workspace {
        &mut self.ws
    }
}

impl SolveOnce for JacobianDls {
    fn freeze_bends(&mut self, frozen: bool) {
        self.ws.bends_frozen = frozen;
    }

    fn keep_poles_aimed(&mut self, aimed: bool) {
        self.ws.poles_aimed = aimed;
    }

    fn poles_aimed(&self) -> bool {
        self.ws.poles_aimed
    }

    fn parts(&mut self) -> (&Workspace, &IterationParams, &mut Unpin) {
        (&self.ws, &self.params.iteration, &mut self.unpin)
    }

    fn solve_once(
        &mut self,
        rig: &Rig,
        start: &Pose,
        goals: &[Goal],
        out: &mut Pose,
    ) -> Result<SolveReport> {
        let params = self.params;
        if !(params.damping.is_finite() && params.damping >= 0.0) {
            return Err(TendonError::InvalidValue {
                what: "damping".into(),
                reason: format!("{} must be a finite number >= 0", params.damping),
            });
        }
        self.ws
            .prepare(rig, start, goals, GoalMode::Full, &params.iteration)?;
        self.ws.record_bends();
        self.scratch.by_component = true;
        self.scratch.prepare(&self.ws, rig);
        if !(0.0..=1.0).contains(&params.world_turn_weight) {
            return Err(TendonError::InvalidValue {
                what: "world_turn_weight".into(),
                reason: format!("{} must be a number from 0 to 1", params.world_turn_weight),
            });
        }
        // A weight of exactly 1 leaves no joint term; a little keeps W positive definite.
        // Exclusive chains keep each goal's joints to it: a weighted step would also turn a
        // chain's joints for the goal below them, to spare the bones' world turns.
        let world_weight = if params.iteration.exclusive_chains {
            0.0
        } else {
            (params.world_turn_weight as f64).min(1.0 - 1e-6)
        };
        let initial = (params.damping as f64).max(if params.adaptive { MIN_DAMPING } else { 0.0 });
        // Shared by the step and the second phase's preparation, which starts it afresh.
        let damping = std::cell::Cell::new(initial);
        let fresh = std::cell::Cell::new(true);
        // Not with the root moving: its shift follows the goals' errors, and a first step
        // at full strength with it stalled a solve short of targets below reach.
        let scaled_start = params.adaptive && !self.plain_start && !params.iteration.move_root;
        let step = |scratch: &mut Scratch, ws: &mut Workspace, rig: &Rig| {
            let before = scratch.linearise(ws, rig);
            scratch.save(ws);
            if scaled_start && fresh.replace(false) {
                // Goals already close (a warm frame of a bake: a centimetre on a 60 cm
                // limb) need no more than Gauss-Newton's step: the damping starts in
                // proportion to the relative error below 5% (still raised at once by a
                // step that does not help). 3.4 -> 2.7 iterations per frame on the
                // humanoid's 1000-frame bake.
                let scale = (before.sqrt() / SCALED_START_ERROR).min(1.0);
                damping.set((initial * scale).max(MIN_DAMPING));
            }
            for _ in 0..RETRIES {
                let solved = scratch.dls_step(ws, rig, damping.get(), world_weight);
                if solved && scratch.step.iter().all(|s| s.abs() < 1e-12) {
                    // No direction helps at first order (a straight chain): more damping
                    // cannot change that; the driver's colinear bump will.
                    return;
                }
                if solved && scratch.clamp_step(params.iteration.max_step_angle) {
                    scratch.apply_step(ws, rig, 1.0);
                    if !params.adaptive {
                        return;
                    }
                    if ws.evaluate(&params.iteration).score < before {
                        damping.set((damping.get() * 0.3).max(MIN_DAMPING));
                        return;
                    }
                    scratch.restore(ws, rig);
                }
                if !params.adaptive {
                    return;
                }
                damping.set((damping.get() * 10.0).min(MAX_DAMPING));
            }
        };
        let iterations = self.ws.iterate_full_body(
            rig,
            goals,
            &params.iteration,
            0,
            &mut self.scratch,
            |scratch, ws, rig| {
                scratch.prepare(ws, rig);
                damping.set(initial);
                fresh.set(true);
            },
            step,
        )?;
        self.ws.keep_bend_sides(rig);
        Ok(self.ws.finish(rig, &params.iteration, iterations, out))
    }
}

/// Jacobian transpose with the optimal step length of the linearised problem, shortened
/// while it makes things worse.
#[derive(Debug, Clone, Default)]
pub struct JacobianTranspose {
    /// Settings.
    pub params: JacobianTransposeParams,
    ws: Workspace,
    scratch: Scratch,
    unpin: Unpin,
    /// Boxed: the solvers' enum keeps its variants of a size.
    finish: Box<FinishWithinLimits>,
}

impl JacobianTranspose {
    /// A solver with these settings.
    pub fn new(params: JacobianTransposeParams) -> Self {
        JacobianTranspose {
            params,
            ..JacobianTranspose::default()
        }
    }
}

impl Solver for JacobianTranspose {
    fn iteration_params(&self) -> IterationParams {
        self.params.iteration
    }

    /// Solves from `start`, retrying from the stalled pose with joints moved off their
    /// bounds when that stops short on limits (see `solve_unpinning` in this module); a
    /// target within reach still missed is finished by damped least squares, as CCD's and
    /// FABRIK's are (on a motion-capture arm with Human Limits, a hand above the shoulder
    /// was missed by 17.7 cm where every other solver reached; QA helper).
    fn solve_into(
        &mut self,
        rig: &Rig,
        start: &Pose,
        goals: &[Goal],
        out: &mut Pose,
    ) -> Result<SolveReport> {
        let report = solve_unpinning(self, rig, start, goals, out)?;
        if report.reached || self.ws.misses_only_out_of_reach(&self.params.iteration) {
            return Ok(report);
        }
        let params = self.params.iteration;
        self.finish.apply(rig, start, goals, &params, report, out)
    }
}

impl SolveOnce for JacobianTranspose {
    fn freeze_bends(&mut self, frozen: bool) {
        self.ws.bends_frozen = frozen;
    }

    fn keep_poles_aimed(&mut self, aimed: bool) {
        self.ws.poles_aimed = aimed;
    }

    fn poles_aimed(&self) -> bool {
        self.ws.poles_aimed
    }

    fn parts(&mut self) -> (&Workspace, &IterationParams, &mut Unpin) {
        (&self.ws, &self.params.iteration, &mut self.unpin)
    }

    fn solve_once(
        &mut self,
        rig: &Rig,
        start: &Pose,
        goals: &[Goal],
        out: &mut Pose,
    ) -> Result<SolveReport> {
        let params = self.params.iteration;
        self.ws
            .prepare(rig, start, goals, GoalMode::Full, &params)?;
        self.ws.record_bends();
        self.scratch.prepare(&self.ws, rig);
        let step = |scratch: &mut Scratch, ws: &mut Workspace, rig: &Rig| {
            let before = scratch.linearise(ws, rig);
            if !scratch.transpose_step(ws, rig) {
                scratch.forget_direction();
                return;
            }
            if !scratch.clamp_step(params.max_step_angle) {
                scratch.forget_direction();
                return;
            }
            if scratch.clamped {
                scratch.forget_direction();
            }
            scratch.save(ws);
            let mut scale = 1.0;
            for _ in 0..RETRIES {
                scratch.apply_step(ws, rig, scale);
                if ws.evaluate(&params).score < before {
                    if scale < 1.0 {
                        scratch.forget_direction();
                    }
                    return;
                }
                scratch.restore(ws, rig);
                scale *= 0.5;
            }
            scratch.forget_direction();
        };
        let iterations = self.ws.iterate_full_body(
            rig,
            goals,
            &params,
            0,
            &mut self.scratch,
            |scratch, ws, rig| scratch.prepare(ws, rig),
            step,
        )?;
        self.ws.keep_bend_sides(rig);
        Ok(self.ws.finish(rig, &params, iterations, out))
    }
}

#[cfg(test)]
mod tests {
    use super::BoneTree;

    /// `W x` for `W = (1 - w) I + w C^T C` on the tree `parent`, the slow way: `C x` sums
    /// each bone's and its ancestors' values, `C^T y` each bone's and its descendants'.
    fn apply(parent: &[Option<usize>], w: f64, x: &[f64]) -> Vec<f64> {
        let n = x.len();
        let above = |k: usize, j: usize| {
            let mut at = Some(k);
            while let Some(i) = at {
                if i == j {
                    return true;
                }
                at = parent[i];
            }
            false
        };
        let cx: Vec<f64> = (0..n)
            .map(|k| (0..n).filter(|&j| above(k, j)).map(|j| x[j]).sum())
            .collect();
        (0..n)
            .map(|j| {
                let ct: f64 = (0..n).filter(|&k| above(k, j)).map(|k| cx[k]).sum();
                (1.0 - w) * x[j] + w * ct
            })
            .collect()
    }

    #[test]
    fn bone_tree_solves_its_weighted_system() {
        // Two roots; a spine (0-1-2) with two arms (3-4, 5) and a head (6); a lone leg (7-8).
        let parent = vec![
            None,
            Some(0),
            Some(1),
            Some(2),
            Some(3),
            Some(2),
            Some(2),
            None,
            Some(7),
        ];
        let mut tree = BoneTree {
            children: (0..parent.len())
                .map(|k| parent.iter().filter(|p| **p == Some(k)).count() as f64)
                .collect(),
            parent: parent.clone(),
            weight: f64::NAN,
            ..BoneTree::default()
        };
        let b: Vec<f64> = (0..parent.len())
            .map(|k| (k as f64 * 1.7).sin() + 0.3)
            .collect();
        for w in [0.0, 0.25, 0.5, 0.999_999] {
            tree.weigh(w);
            let mut x = b.clone();
            tree.solve(&mut x);
            for (got, want) in apply(&parent, w, &x).iter().zip(&b) {
                assert!((got - want).abs() < 1e-6, "w {w}: {got} vs {want}");
            }
        }
    }
}
