//! Closed-form two-bone IK (hip, knee, foot): exact in one step.
//!
//! The knee lands on the circle where the spheres about the hip and the target meet, on
//! the side of its current position or in the plane of the pole. Too close, the longer
//! bone points at the target and the other folds back; too far, both point at it. The
//! upper bone turns so the limb's plane maps onto the new one (the knee keeps bending
//! about the same local axis), then the lower bone turns within that plane.

use super::driver::{reject, GoalMode, Workspace, KNUCKLE_RATIO};
use super::finish::FinishWithinLimits;
use super::{IterationParams, SolveReport, Solver};
use crate::error::Result;
use crate::goal::{EffectorPoint, Goal};
use crate::math::{from_to, turn_about};
use crate::rig::{Pose, Rig};
use glam::{Quat, Vec3};
use serde::{Deserialize, Serialize};

/// Two-bone settings.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct TwoBoneParams {
    /// Tolerances for `reached`; the iteration cap bounds the passes that goals whose
    /// chains carry one another take (independent limbs are exact in one).
    #[serde(flatten)]
    pub iteration: IterationParams,
}

/// The two-bone solver. Each goal moves the two joints nearest its effector (one if the
/// rig has no grandparent there or its chain has one joint); goals are solved in
/// depth-first order of their chains' top joints, in passes repeated while goals whose
/// chains carry one another still improve.
#[derive(Debug, Clone, Default)]
pub struct TwoBone {
    /// Settings.
    pub params: TwoBoneParams,
    ws: Workspace,
    /// The goals with their chains cut to the two joints this solver moves.
    limb_goals: Vec<Goal>,
    /// Goal indices in the order they are solved.
    order: Vec<usize>,
    /// Damped least squares for goals whose chains carry one another and stalled.
    finish: FinishWithinLimits,
}

impl TwoBone {
    /// A solver with these settings.
    pub fn new(params: TwoBoneParams) -> Self {
        TwoBone {
            params,
            ..TwoBone::default()
        }
    }
}

/// New knee and foot positions for a hip at `a`, thigh and shin lengths `l_ab` and
/// `l_bc`, target `t`: the foot as close to `t` as the lengths allow, the knee towards the
/// pole or else towards `bend` (a direction from the hip), seen across the hip-target line.
/// `foot_hint` gives the reach direction when the target sits on the hip.
pub(crate) fn place(
    a: Vec3,
    l_ab: f32,
    l_bc: f32,
    bend: Vec3,
    foot_hint: Vec3,
    t: Vec3,
    pole: Option<Vec3>,
) -> (Vec3, Vec3) {
    let to_target = t - a;
    let l_at = to_target.length();
    // Unit vector from the hip towards the target (the seed's -n); with the target on the
    // hip, keep the current foot direction.
    let dir = if l_at > 1e-6 * (l_ab + l_bc) {
        to_target / l_at
    } else {
        (foot_hint - a)
            .try_normalize()
            .or(bend.try_normalize())
            .unwrap_or(Vec3::Y)
    };
    if l_at >= l_ab + l_bc {
        let knee = a + dir * l_ab;
        return (knee, knee + dir * l_bc);
    }
    if l_at <= (l_ab - l_bc).abs() {
        let sign = if l_ab >= l_bc { 1.0 } else { -1.0 };
        let knee = a + dir * (sign * l_ab);
        return (knee, knee - dir * (sign * l_bc));
    }
    let cos = ((l_ab * l_ab + l_at * l_at - l_bc * l_bc) / (2.0 * l_ab * l_at)).clamp(-1.0, 1.0);
    let sin = (1.0 - cos * cos).max(0.0).sqrt();
    let centre = a + dir * (l_ab * cos);
    let side = pole
        .map(|p| reject(p - centre, dir))
        .filter(|s| s.length_squared() > 1e-20)
        .or_else(|| Some(reject(bend, dir)).filter(|s| s.length_squared() > 1e-20))
        .unwrap_or_else(|| dir.any_orthonormal_vector());
    (centre + side.normalize() * (l_ab * sin), t)
}

/// The rotation taking direction `u` onto `v` and the plane of (u, w) onto the plane of
/// (v, z): the smallest turn of u onto v, then a turn about v bringing the plane's normal
/// round. When either plane is undefined (a straight limb), just the smallest turn.
fn align_planes(u: Vec3, w: Vec3, v: Vec3, z: Vec3) -> Quat {
    let onto = from_to(u, v);
    let (old_normal, new_normal) = (u.cross(w), v.cross(z));
    // Nearly parallel segments span no plane (rounding leaves a tiny, random normal).
    let planar = |n: Vec3, a: Vec3, b: Vec3| {
        n.length_squared() > 1e-8 * a.length_squared() * b.length_squared()
    };
    match v.try_normalize() {
        Some(axis) if planar(old_normal, u, w) && planar(new_normal, v, z) => {
            turn_about(axis, onto * old_normal, new_normal) * onto
        }
        _ => onto,
    }
}

/// Which way the knee should point from the hip. The knee's offset from the current
/// hip-foot line, swung with the limb onto the hip-target line: the knee keeps its bend
/// direction as the target moves, even across a nearly straight limb (the seed's rule,
/// the knee's side of the hip-target line, flips there). The knee itself when the limb is
/// straight.
fn knee_bend(hip: Vec3, knee: Vec3, foot: Vec3, target: Vec3) -> Vec3 {
    let limb = foot - hip;
    let Some(axis) = limb.try_normalize() else {
        return knee - hip;
    };
    let offset = reject(knee - hip, axis);
    if offset.length_squared() <= 1e-12 * (knee - hip).length_squared() {
        return knee - hip;
    }
    from_to(limb, target - hip) * offset
}

/// The closed-form answer for one limb, in armature space.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LimbSolution {
    /// Turn of the upper bone about the hip.
    pub upper: Quat,
    /// Turn of the lower bone about the knee, after the upper bone's turn.
    pub lower: Quat,
    /// New knee position.
    pub knee: Vec3,
    /// New foot position.
    pub foot: Vec3,
    /// Whether the foot lands on the target.
    pub reached: bool,
}

/// Two-bone IK on positions alone: the hip stays, the knee and foot move so the foot
/// reaches `target` (or comes as close as the lengths allow), the knee on its current side
/// or in the plane of `pole`. The rig solver uses this for each goal.
pub fn two_bone_limb(
    hip: Vec3,
    knee: Vec3,
    foot: Vec3,
    target: Vec3,
    pole: Option<Vec3>,
) -> LimbSolution {
    let (l_ab, l_bc) = (hip.distance(knee), knee.distance(foot));
    let (new_knee, new_foot) = place(
        hip,
        l_ab,
        l_bc,
        knee_bend(hip, knee, foot, target),
        foot,
        target,
        pole,
    );
    let upper = align_planes(knee - hip, foot - knee, new_knee - hip, new_foot - new_knee);
    let lower = from_to(upper * (foot - knee), new_foot - new_knee);
    LimbSolution {
        upper,
        lower,
        knee: new_knee,
        foot: new_foot,
        reached: new_foot.distance(target) <= 1e-5 * (l_ab + l_bc),
    }
}

/// The chain length of `goal` that holds its two joints (the bone and its parent; above
/// its bone when `fixed`: a head goal, or one with a rotation target), never beyond the
/// goal's own chain. A bone locked on every axis is no joint (a Rigify leg's MCH bone
/// between foot and shin, a BVH wrist bone Human Limits holds): the chain reaches past it
/// to the next joint (two-bone turned the held bone's child alone and missed every target,
/// 0.2-0.9 m off; found by a QA helper). Nor is a knuckle (`Workspace::find_knuckles`,
/// here by the rest lengths): the closed form bent the BVH importer's 6 mm wrist node by up
/// to 170 degrees to shorten the limb by millimetres.
fn two_joint_chain(rig: &Rig, goal: &Goal, fixed: bool) -> usize {
    let given = match goal.chain_length {
        0 => usize::MAX,
        given => given,
    };
    if goal.bone >= rig.len() {
        // Named by the solve.
        return given.min(if fixed { 3 } else { 2 });
    }
    let mut length = usize::from(fixed);
    let mut joints = 0;
    // The head's distance from its parent's head, at rest.
    let offset = |b: usize| Vec3::from(rig.rest_matrix(b).translation).length();
    // Each bone's lever: from its head to the point it aims.
    let (mut bone, mut lever) = match fixed {
        true => (rig.parent(goal.bone), offset(goal.bone)),
        false if goal.point == EffectorPoint::Tail => (Some(goal.bone), rig.length(goal.bone)),
        false => (Some(goal.bone), 0.0),
    };
    while let Some(b) = bone.filter(|_| joints < 2 && length < given) {
        length += 1;
        let knuckle =
            rig.parent(b).is_some() && length < given && lever < KNUCKLE_RATIO * offset(b);
        joints += usize::from(!rig.limits(b).is_fully_locked() && !knuckle);
        lever = offset(b);
        bone = rig.parent(b);
    }
    length.max(1)
}

fn solve_goal(ws: &mut Workspace, rig: &Rig, g: usize) {
    let target = ws.goals[g].target;
    // Bones locked on every axis and knuckles are no joints (see `two_joint_chain`).
    let mut joints = ws
        .joints(g)
        .iter()
        .copied()
        .filter(|&j| !rig.limits(j).is_fully_locked() && !ws.knuckles[j]);
    let (lower, upper) = match (joints.next(), joints.next()) {
        (None, _) => return,
        (Some(only), None) => {
            let head = ws.head(only);
            ws.rotate_bone(rig, only, from_to(ws.point(g) - head, target - head));
            refresh_subtree(ws, rig, only);
            return;
        }
        (Some(lower), Some(upper)) => (lower, upper),
    };
    let limb = two_bone_limb(
        ws.head(upper),
        ws.head(lower),
        ws.point(g),
        target,
        // A Blender-style pole is applied by the driver's twist pass instead: it aims
        // the root bone's axis, not the knee.
        ws.goals[g]
            .goal
            .pole
            .filter(|_| ws.goals[g].goal.pole_angle.is_none()),
    );
    ws.rotate_bone(rig, upper, limb.upper);
    // The lower joint's frame, through any held bones between the two, and the point's,
    // through any knuckles below.
    ws.refresh_path(rig, ws.goals[g].owner.unwrap_or(lower));
    // Measured again after the upper turn, so limits or scale on the upper bone are
    // honoured rather than assumed away.
    let (knee, foot) = (ws.head(lower), ws.point(g));
    ws.rotate_bone(rig, lower, from_to(foot - knee, limb.foot - knee));
    refresh_subtree(ws, rig, upper);
}

/// Forward kinematics for the bones below `bone` (a contiguous range in depth-first order).
fn refresh_subtree(ws: &mut Workspace, rig: &Rig, bone: usize) {
    for i in rig.subtree(bone).skip(1) {
        ws.update_bone(rig, i);
    }
}

impl Solver for TwoBone {
    fn iteration_params(&self) -> IterationParams {
        self.params.iteration
    }

    /// A closed form: the start does not choose its answer.
    fn guards_warm_frames(&self) -> bool {
        false
    }

    fn solve_into(
        &mut self,
        rig: &Rig,
        start: &Pose,
        goals: &[Goal],
        out: &mut Pose,
    ) -> Result<SolveReport> {
        let params = self.params.iteration;
        self.limb_goals.clear();
        self.limb_goals.extend(goals.iter().map(|goal| {
            // Two joints above the positioned point: when that point is the bone's head (or
            // a rotation target fixes the bone), the bone itself is not one of them.
            let fixed = goal.point == EffectorPoint::Head
                || (goal.rotation.is_some() && goal.rotation_weight > 0.0);
            // Never beyond the goal's own chain: a caller that writes back only the chain's
            // bones (the add-on) lost the third joint's turn, and the effector missed.
            Goal {
                chain_length: two_joint_chain(rig, goal, fixed),
                ..*goal
            }
        }));
        self.ws
            .prepare(rig, start, &self.limb_goals, GoalMode::Positional, &params)?;
        // Chains higher in the tree first: solving a head's chain that turns the chest
        // after the arm would carry the reached hand away.
        let ws = &self.ws;
        self.order.clear();
        self.order.extend(0..ws.goals.len());
        self.order
            .sort_by_key(|&g| ws.joints(g).iter().min().copied());
        let order = &self.order;
        // One pass is exact for independent limbs; chains that share or carry one another
        // take a few passes, ended by the driver's stall rule like any iterative solve.
        let report = self.ws.iterate(rig, &params, |ws, rig| {
            for &g in order {
                solve_goal(ws, rig, g);
            }
        });
        let report = self.ws.finish(rig, &params, report.iterations, out);
        let knuckled = self.ws.knuckles_could_reach();
        if report.reached
            || !(self.chains_carry_one_another(rig) || self.ws.moves_limited_joint(rig) || knuckled)
        {
            return Ok(report);
        }
        // Each goal solved alone leaves a shared joint's free turn (the chest's about the
        // neck's line, with the head held by a rotation target) unchosen for the others:
        // passes stalled on 13 of 15 reachable poses of a CMU skeleton. And the closed
        // form knows no limits: a knee whose hinge does not lie in the plane it chose is
        // clamped off it (Human Limits on the generated Rigify rig: no target reached, 4
        // cm off). Damped least squares over the same two-joint chains moves them together
        // within the limits. A knuckle held rigid leaves a target near full extension a
        // few millimetres short: the finish turns it by the little that needs.
        let limb_goals = std::mem::take(&mut self.limb_goals);
        let finished = self
            .finish
            .apply(rig, start, &limb_goals, &params, report, out);
        self.limb_goals = limb_goals;
        finished
    }
}

impl TwoBone {
    /// Whether a goal's joints carry (or are) another goal's: only then do goals solved
    /// one at a time undo or constrain one another.
    fn chains_carry_one_another(&self, rig: &Rig) -> bool {
        let ws = &self.ws;
        (0..ws.goals.len()).any(|g| {
            let Some(&top) = ws.joints(g).iter().min() else {
                return false;
            };
            (0..ws.goals.len())
                .filter(|&h| h != g)
                .any(|h| ws.joints(h).iter().any(|&j| rig.subtree(j).contains(&top)))
        })
    }
}
