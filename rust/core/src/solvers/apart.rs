//! Goals in independent groups solved one group at a time (FABRIK, CCD, damped least
//! squares).
//!
//! Two limbs whose chains share no bone, neither hanging from the other's, do not
//! interact, yet one iteration loop over both let each hold the other back: a hand that
//! could not reach stopped the loop (its stall rule) with the feet still 1.5-2.3 cm from
//! targets they reach alone, and a solve that iterated for one limb gave the other a
//! pole twist it did not get alone. Solved group by group, a limb's answer no longer
//! depends on which other limbs are in the solve, and a frame range can solve the groups
//! at once on separate threads with the same answer ([`crate::batch`]).

use super::driver::Workspace;
use super::{chain_root, validate_goal, SolveReport, Solver};
use crate::error::Result;
use crate::goal::Goal;
use crate::rig::{Pose, Rig};

/// The groups of a set of goals and the memory to solve them apart (kept between solves,
/// so solving again allocates nothing).
#[derive(Debug, Clone)]
pub(crate) struct Apart {
    /// Per goal, its group (0-based, in order of first appearance).
    group_of: Vec<usize>,
    groups: usize,
    leader: Vec<usize>,
    turned_by: Vec<usize>,
    sub: Vec<Goal>,
    current: Pose,
}

impl Default for Apart {
    fn default() -> Self {
        Apart {
            group_of: Vec::new(),
            groups: 0,
            leader: Vec::new(),
            turned_by: Vec::new(),
            sub: Vec::new(),
            current: Pose::rest(0),
        }
    }
}

fn find(leader: &mut [usize], mut g: usize) -> usize {
    while leader[g] != g {
        leader[g] = leader[leader[g]];
        g = leader[g];
    }
    g
}

impl Apart {
    /// Groups `goals` so that no bone a group's chains turn is one that another group's
    /// effectors hang from; returns the number of groups. A goal on a bone the rig does
    /// not have joins the first goal's group (the solve names it).
    pub(crate) fn split(&mut self, rig: &Rig, goals: &[Goal]) -> usize {
        let n = rig.len();
        self.leader.clear();
        self.leader.extend(0..goals.len());
        self.turned_by.clear();
        self.turned_by.resize(n, usize::MAX);
        let leader = &mut self.leader;
        let join = |leader: &mut Vec<usize>, a: usize, b: usize| {
            let (a, b) = (find(leader, a), find(leader, b));
            leader[a.max(b)] = a.min(b);
        };
        for (k, goal) in goals.iter().enumerate() {
            if goal.bone >= n {
                join(leader, 0, k);
                continue;
            }
            let top = chain_root(rig, goal.bone, goal.chain_length);
            let mut bone = goal.bone;
            loop {
                match self.turned_by[bone] {
                    usize::MAX => self.turned_by[bone] = k,
                    other => join(leader, other, k),
                }
                if bone == top {
                    break;
                }
                match rig.parent(bone) {
                    Some(p) => bone = p,
                    None => break,
                }
            }
        }
        // A chain turning a bone above another goal's chain carries that goal.
        for (k, goal) in goals.iter().enumerate().filter(|(_, g)| g.bone < n) {
            let mut above = rig.parent(chain_root(rig, goal.bone, goal.chain_length));
            while let Some(bone) = above {
                if self.turned_by[bone] != usize::MAX {
                    join(leader, self.turned_by[bone], k);
                }
                above = rig.parent(bone);
            }
        }
        // Number the groups in order of their first goal.
        self.group_of.clear();
        self.group_of.resize(goals.len(), usize::MAX);
        self.groups = 0;
        for k in 0..goals.len() {
            let l = find(leader, k);
            if self.group_of[l] == usize::MAX {
                self.group_of[l] = self.groups;
                self.groups += 1;
            }
            self.group_of[k] = self.group_of[l];
        }
        self.groups
    }

    /// Goal `k`'s group (after [`Apart::split`]).
    pub(crate) fn group_of(&self, k: usize) -> usize {
        self.group_of[k]
    }

    /// Solves `goals` group by group with `once`, each from the pose the groups before it
    /// left (their bones are not this group's, nor above them), into `out`. Goals are
    /// validated first, so an error names the goal by its place in `goals`. The report's
    /// iterations are the slowest group's; its residuals the largest; reached when every
    /// group is.
    pub(crate) fn solve<S: SolvesApart>(
        &mut self,
        solver: &mut S,
        rig: &Rig,
        start: &Pose,
        goals: &[Goal],
        out: &mut Pose,
        mut once: impl FnMut(&mut S, &Rig, &Pose, &[Goal], &mut Pose) -> Result<SolveReport>,
    ) -> Result<SolveReport> {
        for (index, goal) in goals.iter().enumerate() {
            validate_goal(rig, index, goal)?;
        }
        let mut report = SolveReport {
            iterations: 0,
            residual: 0.0,
            rotation_residual: 0.0,
            reached: true,
        };
        self.current.copy_from(start);
        for group in 0..self.groups {
            if group > 0 {
                // The last group's answer is the next one's start (swapped, not copied:
                // the solve writes the whole of `out`).
                std::mem::swap(&mut self.current, out);
            }
            self.sub.clear();
            self.sub.extend(
                goals
                    .iter()
                    .zip(&self.group_of)
                    .filter(|(_, &g)| g == group)
                    .map(|(goal, _)| *goal),
            );
            // After the first group the start is the last group's answer: validated
            // already (a tenth of a small solve's work, per group).
            solver.workspace().trusted_start = group > 0;
            let solved = once(solver, rig, &self.current, &self.sub, out);
            solver.workspace().trusted_start = false;
            let r = solved?;
            report.iterations = report.iterations.max(r.iterations);
            report.residual = report.residual.max(r.residual);
            report.rotation_residual = report.rotation_residual.max(r.rotation_residual);
            report.reached &= r.reached;
        }
        Ok(report)
    }
}

/// A solver that keeps [`Apart`] memory (FABRIK, CCD, damped least squares).
pub(crate) trait SolvesApart: Solver {
    /// The solver's memory for solving groups apart.
    fn apart(&mut self) -> &mut Apart;

    /// The workspace the solver prepares each solve in.
    fn workspace(&mut self) -> &mut Workspace;
}

/// Solves `goals` with `whole`, group by group when the solver solves groups apart
/// ([`Solver::solves_groups_apart`]) and there are several.
pub(crate) fn solve_by_groups<S: SolvesApart>(
    solver: &mut S,
    rig: &Rig,
    start: &Pose,
    goals: &[Goal],
    out: &mut Pose,
    mut whole: impl FnMut(&mut S, &Rig, &Pose, &[Goal], &mut Pose) -> Result<SolveReport>,
) -> Result<SolveReport> {
    if !solver.solves_groups_apart() {
        return whole(solver, rig, start, goals, out);
    }
    // Taken out while the groups are solved (the solver is borrowed by each), then put back.
    let mut apart = std::mem::take(solver.apart());
    let solved = match apart.split(rig, goals) {
        0 | 1 => whole(solver, rig, start, goals, out),
        _ => apart.solve(solver, rig, start, goals, out, &mut whole),
    };
    *solver.apart() = apart;
    solved
}
