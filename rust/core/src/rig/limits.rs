//! Per-joint limits, the one place where every solver's rotations are constrained.
//!
//! A joint's rotation relative to rest is decomposed into Euler angles in the joint's
//! order; each axis is free, locked at zero, or limited to an inclusive range. The axes are
//! the bone's own, optionally turned about the bone (its Y axis) by `roll`, so a hinge can
//! be limited about its true axis whatever roll the rig's bones have, and before that by a
//! `frame` turn, for bones that do not point along their limb (an FBX import's bones
//! pointing sideways, whose Y axis is no twist axis). The angles may be
//! measured from a `neutral` rotation instead of rest (an anatomical standing pose on a rig
//! whose rest is a T-pose or stranger), so the ranges stay the body's own numbers.

use crate::error::{Result, TendonError};
use crate::math::{wrap_angle, EulerOrder};
use glam::{Quat, Vec3};
use serde::{Deserialize, Serialize};
use std::f32::consts::TAU;

/// What one Euler axis of a joint may do.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum AxisLimit {
    /// Any angle.
    #[default]
    Free,
    /// Held at zero (the rest angle) and removed from the solvers' degrees of freedom. A
    /// joint locked on every axis is no joint at all: solvers leave it as it starts.
    Locked,
    /// Limited to `[min, max]` radians, both inclusive.
    Range {
        /// Smallest angle allowed.
        min: f32,
        /// Largest angle allowed.
        max: f32,
    },
}

impl AxisLimit {
    /// Whether the axis can move at all.
    pub fn is_locked(self) -> bool {
        matches!(self, AxisLimit::Locked)
    }

    /// The allowed interval, `None` when free.
    fn interval(self) -> Option<(f32, f32)> {
        match self {
            AxisLimit::Free => None,
            AxisLimit::Locked => Some((0.0, 0.0)),
            AxisLimit::Range { min, max } => Some((min, max)),
        }
    }

    /// The 2*pi-equivalent of `angle` nearest the interval, and how far it lies outside.
    fn wrapped(self, angle: f32) -> (f32, f32) {
        match self.interval() {
            Some((min, max)) if max - min < TAU => {
                let centre = 0.5 * (min + max);
                let a = centre + wrap_angle(angle - centre);
                (a, (a - a.clamp(min, max)).abs())
            }
            Some((min, max)) => (Self::inside_full_turn(min, max, angle), 0.0),
            None => (angle, 0.0),
        }
    }

    /// For an interval of a full turn or more, which holds an equivalent of every angle:
    /// `angle` itself if inside, else its equivalent inside. (Stepping from an angle outside
    /// it, a solver's clamp would jump the joint round to a bound.)
    fn inside_full_turn(min: f32, max: f32, angle: f32) -> f32 {
        if (min..=max).contains(&angle) {
            angle
        } else {
            (min + (angle - min).rem_euclid(TAU)).min(max)
        }
    }

    /// How far `angle` (or an equivalent angle 2*pi away) lies outside the interval, and
    /// that equivalent angle clamped into it.
    fn clamp_wrapped(self, angle: f32) -> (f32, f32) {
        let Some((min, max)) = self.interval() else {
            return (0.0, angle);
        };
        if max - min >= TAU {
            return (0.0, Self::inside_full_turn(min, max, angle));
        }
        // Of the 2*pi-equivalents of the angle, take the one nearest the interval.
        let centre = 0.5 * (min + max);
        let a = centre + wrap_angle(angle - centre);
        let clamped = a.clamp(min, max);
        ((a - clamped).abs(), clamped)
    }
}

/// How one side (negative or positive angles) of an axis resists rotation, for the
/// tension minimiser: `T = rigidity * (a / threshold)^1.25 + (a / threshold)^16`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SideTension {
    /// The angle (radians, positive) where the resistance turns into a wall.
    pub threshold: f32,
    /// How strongly the joint resists below the threshold (0: freely).
    pub rigidity: f32,
}

impl Default for SideTension {
    fn default() -> Self {
        SideTension {
            threshold: std::f32::consts::FRAC_PI_2,
            rigidity: 1.0,
        }
    }
}

/// Tension settings of one axis: negative and positive angles separately.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AxisTension {
    /// For negative angles.
    pub negative: SideTension,
    /// For positive angles.
    pub positive: SideTension,
}

impl AxisTension {
    /// The tension of `angle`: smooth, zero at zero, growing like `a^1.25` below the
    /// threshold and like `a^16` past it.
    pub fn of(&self, angle: f32) -> f32 {
        let side = self.side(angle);
        let x = angle.abs() / side.threshold;
        side.rigidity * x * x.sqrt().sqrt() + wall(x)
    }

    /// The wall part of [`AxisTension::of`] alone: `(a / P)^16`.
    pub fn wall(&self, angle: f32) -> f32 {
        wall(angle.abs() / self.side(angle).threshold)
    }

    fn side(&self, angle: f32) -> SideTension {
        if angle < 0.0 {
            self.negative
        } else {
            self.positive
        }
    }
}

/// Checks that `q`, `what` of `bone`'s limits, is a finite unit quaternion.
fn unit_quaternion(bone: &str, what: &str, q: Quat) -> Result<()> {
    if q.is_finite() && (q.length() - 1.0).abs() < 1e-3 {
        return Ok(());
    }
    Err(TendonError::InvalidLimit {
        bone: bone.to_owned(),
        axis: ' ',
        reason: format!(
            "{what} must be a unit quaternion [w, x, y, z], not [{}, {}, {}, {}]",
            q.w, q.x, q.y, q.z
        ),
    })
}

/// `x^16`, the tension's wall past the threshold (`x` the angle over the threshold).
fn wall(x: f32) -> f32 {
    let x2 = x * x;
    let x4 = x2 * x2;
    let x8 = x4 * x4;
    x8 * x8
}

/// The limits of one joint.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JointLimits {
    /// The Euler order the joint's rotation is decomposed in.
    pub order: EulerOrder,
    /// Rotation about the bone's local X axis.
    pub x: AxisLimit,
    /// Rotation about the bone's local Y axis (along the bone: twist).
    pub y: AxisLimit,
    /// Rotation about the bone's local Z axis.
    pub z: AxisLimit,
    /// Tension per axis `[x, y, z]`, for the tension minimiser.
    pub tension: [AxisTension; 3],
    /// Turn (radians) about the bone's Y axis from the bone's axes to the limit axes: the
    /// Euler angles are those of `N^-1 R^-1 q R`, `R` this turn about Y (after `frame`),
    /// `q` the rotation.
    pub roll: f32,
    /// The turn from the bone's axes to the axes `roll` turns about (`R` above is `frame`
    /// then the roll): identity for a bone along its limb; for one that points elsewhere
    /// (Blender's FBX importer gives bones of rigs made with X along the bone pointing
    /// sideways), the turn that takes its Y axis along the limb, so Y is the twist. In
    /// JSON `[w, x, y, z]`.
    #[serde(with = "quat_wxyz")]
    pub frame: Quat,
    /// The rotation (relative to rest, in the limit axes) the Euler angles are measured
    /// from: `N` above. Identity measures from rest. In JSON `[w, x, y, z]`.
    #[serde(with = "quat_wxyz")]
    pub neutral: Quat,
}

/// Quaternions as `[w, x, y, z]` in JSON, Blender's order (glam's own is `[x, y, z, w]`).
mod quat_wxyz {
    use glam::Quat;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(q: &Quat, serializer: S) -> Result<S::Ok, S::Error> {
        [q.w, q.x, q.y, q.z].serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Quat, D::Error> {
        let [w, x, y, z] = <[f32; 4]>::deserialize(deserializer)?;
        Ok(Quat::from_xyzw(x, y, z, w))
    }
}

impl JointLimits {
    /// No limit at all.
    pub const FREE: JointLimits = JointLimits {
        order: EulerOrder::XYZ,
        x: AxisLimit::Free,
        y: AxisLimit::Free,
        z: AxisLimit::Free,
        tension: [AxisTension {
            negative: SideTension {
                threshold: std::f32::consts::FRAC_PI_2,
                rigidity: 1.0,
            },
            positive: SideTension {
                threshold: std::f32::consts::FRAC_PI_2,
                rigidity: 1.0,
            },
        }; 3],
        roll: 0.0,
        frame: Quat::IDENTITY,
        neutral: Quat::IDENTITY,
    };

    /// The limits of axes `[x, y, z]`.
    pub fn axes(&self) -> [AxisLimit; 3] {
        [self.x, self.y, self.z]
    }

    /// True when no axis is locked or limited.
    pub fn is_free(&self) -> bool {
        self.axes().iter().all(|a| matches!(a, AxisLimit::Free))
    }

    /// True when every axis is locked.
    pub fn is_fully_locked(&self) -> bool {
        self.axes().iter().all(|a| a.is_locked())
    }

    /// The summed tension of Euler angles `[x, y, z]` (locked axes count nothing).
    pub fn tension_of(&self, angles: [f32; 3]) -> f32 {
        let mut total = 0.0;
        for ((a, limit), tension) in angles.iter().zip(self.axes()).zip(&self.tension) {
            if !limit.is_locked() {
                total += tension.of(*a);
            }
        }
        total
    }

    /// The summed tension of Euler angles `[x, y, z]` (relative to rest) measured from a
    /// reference pose whose angles are `reference`, where `turn` is the turn from the
    /// reference to the joint's rotation about each limit axis ([`JointLimits::turn_angles`];
    /// zero at the reference). The wall
    /// (`a^16`, limited axes only) stays anatomical, at each side's threshold from rest; the soft part
    /// (`a^1.25`) grows with the turn alike both ways, over the mean of the two sides'
    /// thresholds and rigidities. Thresholds and rigidities describe turns from rest (often
    /// a range's bound, so a hinge's is tiny on its closed side): applied per side to turns
    /// from a reference that moves along, as when each frame starts from the previous
    /// answer, they made one way cheaper than the way back and joints ratcheted away.
    /// `comfort` adds, on limited axes, that soft part measured from the neutral (the
    /// angles themselves, zero at the pose the limits measure from: for Human Limits a
    /// relaxed standing pose, knees and elbows straight) times `comfort`: a pull towards
    /// that pose beside the pull towards the reference, so frames solved each from the
    /// last do not wander off.
    pub fn tension_from(
        &self,
        angles: [f32; 3],
        turn: [f32; 3],
        reference: [f32; 3],
        comfort: f32,
    ) -> f32 {
        let mut total = 0.0;
        for (((a, d), r), (limit, tension)) in angles
            .iter()
            .zip(turn)
            .zip(reference)
            .zip(self.axes().into_iter().zip(&self.tension))
        {
            if limit.is_locked() {
                continue;
            }
            // Only a limited axis has an anatomical wall; a free axis's angle from rest means
            // nothing to it (a rig posed far from its rest would be pulled back to rest).
            let walled = matches!(limit, AxisLimit::Range { .. });
            let wall_at = |angle: f32| if walled { tension.wall(angle) } else { 0.0 };
            let scale = 0.5 * (tension.negative.threshold + tension.positive.threshold);
            let rigidity = 0.5 * (tension.negative.rigidity + tension.positive.rigidity);
            let soft = |a: f32| {
                let y = a.abs() / scale;
                y * y.sqrt().sqrt()
            };
            // Less the wall's share at the reference itself, so the reference costs nothing
            // but its comfort term.
            // A reference past its wall (rest far outside the ranges of a neutral) is not
            // taken off: its wall, huge, would swamp the rest of the sum in f32.
            let wall_at_reference = wall_at(r);
            let taken_off = if wall_at_reference <= 1.0 {
                wall_at_reference
            } else {
                0.0
            };
            // Like the wall, only a limited axis has a neutral to be comfortable at.
            let comfort = if walled && comfort > 0.0 {
                comfort * soft(*a)
            } else {
                0.0
            };
            total += rigidity * (soft(d) + comfort) + wall_at(*a) - taken_off;
        }
        total
    }

    /// Checks that ranges are finite and ordered and tension settings finite and positive,
    /// naming `bone` otherwise.
    pub fn validate(&self, bone: &str) -> Result<()> {
        if !self.roll.is_finite() {
            return Err(TendonError::InvalidLimit {
                bone: bone.to_owned(),
                axis: ' ',
                reason: format!("the limit axes' roll must be finite, not {}", self.roll),
            });
        }
        unit_quaternion(bone, "the limit axes' frame", self.frame)?;
        unit_quaternion(bone, "the neutral rotation", self.neutral)?;
        for (axis, tension) in ['x', 'y', 'z'].into_iter().zip(&self.tension) {
            for (side, s) in [
                ("negative", tension.negative),
                ("positive", tension.positive),
            ] {
                if !(s.threshold.is_finite()
                    && s.threshold > 0.0
                    && s.rigidity.is_finite()
                    && s.rigidity >= 0.0)
                {
                    return Err(TendonError::InvalidLimit {
                        bone: bone.to_owned(),
                        axis,
                        reason: format!(
                            "{side} tension needs a positive threshold and a rigidity of at least 0, not {} and {}",
                            s.threshold, s.rigidity
                        ),
                    });
                }
            }
        }
        for (axis, limit) in ['x', 'y', 'z'].into_iter().zip(self.axes()) {
            if let AxisLimit::Range { min, max } = limit {
                let bad = |reason: String| TendonError::InvalidLimit {
                    bone: bone.to_owned(),
                    axis,
                    reason,
                };
                if !(min.is_finite() && max.is_finite()) {
                    return Err(bad(format!("min {min} and max {max} must be finite")));
                }
                if min > max {
                    return Err(bad(format!("min {min} is greater than max {max}")));
                }
            }
        }
        Ok(())
    }

    /// Clamps Euler angles `[x, y, z]` into the limits (locked axes become zero).
    pub fn clamp_angles(&self, angles: &mut [f32; 3]) {
        for (axis, a) in angles.iter_mut().enumerate() {
            *a = self.clamp_axis(axis, *a);
        }
    }

    /// Clamps the angle of one axis (0 = x) into its limit. A range of a full turn or more
    /// holds every rotation about its axis, so it clamps nothing: clamping there would put
    /// a wall where the joint turns past its bounds' shared end (a hinge limited to
    /// -180..180 degrees, folded back, stuck at 180 instead of turning on to -179).
    pub fn clamp_axis(&self, axis: usize, angle: f32) -> f32 {
        match self.axes()[axis].interval() {
            Some((min, max)) if max - min < TAU => angle.clamp(min, max),
            _ => angle,
        }
    }

    /// Whether the limit axes are the bone's own and angles measure from rest (the fast path).
    fn plain(&self) -> bool {
        self.own_axes() && self.neutral == Quat::IDENTITY
    }

    /// Whether the limit axes are the bone's own (no `frame`, no `roll`).
    fn own_axes(&self) -> bool {
        self.roll == 0.0 && self.frame == Quat::IDENTITY
    }

    /// The turn from the bone's axes to the limit axes: `frame`, then `roll` about Y.
    fn limit_axes(&self) -> Quat {
        self.frame * Quat::from_rotation_y(self.roll)
    }

    /// `rotation` (in the bone's axes) as the Euler angles' rotation: in the limit axes,
    /// from the neutral.
    fn in_limit_axes(&self, rotation: Quat) -> Quat {
        if self.plain() {
            return rotation;
        }
        let frame = self.limit_axes();
        self.neutral.conjugate() * frame.conjugate() * rotation * frame
    }

    /// The rotation (relative to rest, in the bone's axes) of Euler angles `[x, y, z]`
    /// about the limit axes, from the neutral.
    pub fn rotation_of(&self, angles: [f32; 3]) -> Quat {
        let rotation = self.order.to_quat(angles);
        if self.plain() {
            return rotation;
        }
        let frame = self.limit_axes();
        frame * self.neutral * rotation * frame.conjugate()
    }

    /// How far `turn`, the rotation from one pose of the joint to another as seen from the
    /// first (`first⁻¹ · second`, in the bone's own axes as it stands there), turns about
    /// each limit axis: the components of its rotation vector (the shorter way round) about
    /// the bone's axes turned by `roll`, `[x, y, z]` radians. Zero for no turn; for small
    /// turns from the neutral the Euler angles of the turn, at the cost of one arc tangent
    /// (the tension minimiser measures every joint's turn at every evaluation). The
    /// neutral does not enter: such a turn already stands in the posed bone's axes. (It was
    /// once turned through the neutral as well, which on a shoulder whose neutral hangs the
    /// arm down from a T-pose swapped twist and flexion, each priced as the other.)
    pub fn turn_angles(&self, turn: Quat) -> [f32; 3] {
        let local = if self.own_axes() {
            turn
        } else {
            let frame = self.limit_axes();
            frame.conjugate() * turn * frame
        };
        let local = if local.w < 0.0 { -local } else { local };
        let v = Vec3::new(local.x, local.y, local.z);
        let s = v.length();
        // 2 atan2(s, w) / s, which tends to 2 as the turn vanishes.
        let scale = if s < 1e-6 {
            2.0
        } else {
            2.0 * s.atan2(local.w) / s
        };
        (v * scale).to_array()
    }

    /// Decomposes `rotation` (relative to rest) into Euler angles about the limit axes.
    pub fn euler_of(&self, rotation: Quat) -> [f32; 3] {
        self.order.from_quat(self.in_limit_axes(rotation))
    }

    /// Decomposes `rotation` (relative to rest) into Euler angles about the limit axes in
    /// the representation that lies within the ranges (of the two, each angle taken 2*pi
    /// towards its range), or else the one furthest inside: what a solver should step from,
    /// since stepping from angles outside a range jumps to its bound.
    pub fn angles_within(&self, rotation: Quat) -> [f32; 3] {
        let first = self.euler_of(rotation);
        let axes = self.axes();
        let place = |angles: [f32; 3]| {
            let mut excess = 0.0;
            let mut out = angles;
            for ((a, limit), o) in angles.iter().zip(axes).zip(out.iter_mut()) {
                let (wrapped, outside) = limit.wrapped(*a);
                *o = wrapped;
                excess += outside;
            }
            (excess, out)
        };
        let (a, first) = place(first);
        let (b, second) = place(self.order.alternate(first));
        if b < a {
            second
        } else {
            first
        }
    }

    /// Decomposes `rotation` (relative to rest) into angles in this joint's order about
    /// the limit axes, picking the representation closest to `near`.
    pub fn angles_of(&self, rotation: Quat, near: [f32; 3]) -> [f32; 3] {
        self.order
            .from_quat_near(self.in_limit_axes(rotation), near)
    }

    /// The bone-space axes each Euler angle turns about at `angles` (the rate axes of
    /// [`EulerOrder::rate_axes`], in the bone's axes).
    pub fn rate_axes(&self, angles: [f32; 3]) -> [Vec3; 3] {
        let axes = self.order.rate_axes(angles);
        if self.plain() {
            return axes;
        }
        let turn = self.limit_axes() * self.neutral;
        axes.map(|axis| turn * axis)
    }

    /// The nearest rotation inside the limits. Of the two Euler representations of the
    /// rotation, the one needing the smaller correction is clamped.
    pub fn clamp_rotation(&self, rotation: Quat) -> Quat {
        if self.is_free() {
            return rotation;
        }
        let first = self.euler_of(rotation);
        let second = self.order.alternate(first);
        let (cost_a, a) = self.clamp_representation(first);
        let (cost_b, b) = self.clamp_representation(second);
        if cost_a == 0.0 && cost_b == 0.0 {
            return rotation;
        }
        self.rotation_of(if cost_b < cost_a { b } else { a })
    }

    fn clamp_representation(&self, angles: [f32; 3]) -> (f32, [f32; 3]) {
        let mut out = angles;
        let mut cost = 0.0;
        for ((a, limit), o) in angles.iter().zip(self.axes()).zip(out.iter_mut()) {
            let (excess, clamped) = limit.clamp_wrapped(*a);
            cost += excess;
            *o = clamped;
        }
        (cost, out)
    }

    /// `rotation` with every axis that sits on a bound of its range moved back inside:
    /// by `step` radians (at most a quarter of the range), or with `None` to the middle of
    /// the range. `None` when no axis sits on a bound. A joint pinned on a bound (a knee
    /// or elbow held straight at its stop, a spine bent to its end) has no first-order
    /// way back for a gradient solver; moving it off the bound lets a stalled solve go on.
    pub fn unpinned(&self, rotation: Quat, step: Option<f32>) -> Option<Quat> {
        const ON_BOUND: f32 = 1e-4;
        let mut angles = self.angles_within(rotation);
        let mut moved = false;
        for (a, limit) in angles.iter_mut().zip(self.axes()) {
            let AxisLimit::Range { min, max } = limit else {
                continue;
            };
            if max - min >= TAU || max - min <= ON_BOUND {
                continue;
            }
            let inward = step.map_or(0.5 * (max - min), |s| s.min(0.25 * (max - min)));
            if *a <= min + ON_BOUND {
                *a = min + inward;
                moved = true;
            } else if *a >= max - ON_BOUND {
                *a = max - inward;
                moved = true;
            }
        }
        moved.then(|| self.rotation_of(angles))
    }

    /// The rotation of the neutral (every Euler angle 0), each angle clamped into its
    /// range: the joint's most relaxed rotation within the limits (for Human Limits, a
    /// standing pose). A stalled solve can start over from it when its own pose has wound
    /// a joint far round, where neither a local step nor moving off a bound finds the way.
    pub fn neutral_within(&self) -> Quat {
        let mut angles = [0.0; 3];
        self.clamp_angles(&mut angles);
        self.rotation_of(angles)
    }

    /// Whether `rotation` lies within the limits, allowing `slack` radians per axis.
    pub fn contains(&self, rotation: Quat, slack: f32) -> bool {
        let first = self.euler_of(rotation);
        [first, self.order.alternate(first)]
            .into_iter()
            .any(|angles| {
                angles
                    .iter()
                    .zip(self.axes())
                    .all(|(a, limit)| limit.clamp_wrapped(*a).0 <= slack)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::angle_between;

    /// The rate axes are the derivatives of `rotation_of`, in the bone's axes.
    fn assert_rate_axes_are_derivatives(limits: &JointLimits, angles: [f32; 3]) {
        let h = 1e-3;
        for (axis, rate) in limits.rate_axes(angles).into_iter().enumerate() {
            let mut moved = angles;
            moved[axis] += h;
            let turn = limits.rotation_of(moved) * limits.rotation_of(angles).conjugate();
            let numeric = turn.to_scaled_axis() / h;
            assert!(
                (numeric - rate).length() < 1e-2,
                "{axis}: {numeric} vs {rate}"
            );
        }
    }

    fn knee() -> JointLimits {
        JointLimits {
            order: EulerOrder::XYZ,
            x: AxisLimit::Range { min: 0.0, max: 2.5 },
            y: AxisLimit::Locked,
            z: AxisLimit::Locked,
            ..JointLimits::FREE
        }
    }

    #[test]
    fn unpinning_moves_only_axes_on_a_bound_inward() {
        let k = knee();
        let x_of = |q: Quat| k.euler_of(q)[0];
        // Straight on its 0 stop: a step in, or to the middle of the range.
        let straight = Quat::IDENTITY;
        assert!((x_of(k.unpinned(straight, Some(0.26)).unwrap()) - 0.26).abs() < 1e-5);
        assert!((x_of(k.unpinned(straight, None).unwrap()) - 1.25).abs() < 1e-5);
        // Folded on its 2.5 stop: back in, the step at most a quarter of the range.
        let folded = Quat::from_rotation_x(2.5);
        assert!((x_of(k.unpinned(folded, Some(0.26)).unwrap()) - 2.24).abs() < 1e-5);
        assert!((x_of(k.unpinned(folded, Some(2.0)).unwrap()) - 1.875).abs() < 1e-5);
        // Inside the range, or free: nothing to move (locked axes are not bounds).
        assert!(k.unpinned(Quat::from_rotation_x(1.0), Some(0.26)).is_none());
        assert!(JointLimits::FREE.unpinned(straight, None).is_none());
    }

    #[test]
    fn the_neutral_within_is_the_zero_angles_clamped() {
        // Zero lies inside: the neutral itself, measured through roll and neutral.
        let k = JointLimits {
            roll: 0.3,
            neutral: Quat::from_rotation_x(0.2),
            ..knee()
        };
        let e = k.euler_of(k.neutral_within());
        assert!(e.iter().all(|a| a.abs() < 1e-5), "{e:?}");
        // Zero outside a range: its nearest bound.
        let bent = JointLimits {
            x: AxisLimit::Range { min: 0.5, max: 2.5 },
            ..knee()
        };
        assert!((bent.euler_of(bent.neutral_within())[0] - 0.5).abs() < 1e-5);
        assert_eq!(JointLimits::FREE.neutral_within(), Quat::IDENTITY);
    }

    #[test]
    fn clamps_into_the_range_inclusively() {
        let k = knee();
        let inside = Quat::from_rotation_x(2.5);
        assert!(angle_between(k.clamp_rotation(inside), inside) < 1e-5);
        let outside = Quat::from_rotation_x(-0.4);
        assert!(angle_between(k.clamp_rotation(outside), Quat::IDENTITY) < 1e-5);
        let twisted = Quat::from_rotation_y(0.7) * Quat::from_rotation_x(1.0);
        let c = k.clamp_rotation(twisted);
        assert!(k.contains(c, 1e-4));
        assert!(!k.contains(twisted, 1e-4));
    }

    #[test]
    fn refuses_reversed_or_non_finite_ranges() {
        let mut k = knee();
        k.x = AxisLimit::Range {
            min: 1.0,
            max: -1.0,
        };
        let err = k.validate("shin").unwrap_err().to_string();
        assert!(err.contains("shin") && err.contains("min 1"), "{err}");
        k.x = AxisLimit::Range {
            min: f32::NAN,
            max: 1.0,
        };
        assert!(k.validate("shin").is_err());
    }

    #[test]
    fn roll_turns_the_limit_axes_about_the_bone() {
        // A hinge about the bone's X axis turned 40 degrees about Y (a rolled knee).
        let roll = 40f32.to_radians();
        let k = JointLimits { roll, ..knee() };
        let hinge = Quat::from_rotation_y(roll) * Vec3::X;
        let bent = Quat::from_axis_angle(hinge, 1.2);
        assert!(k.contains(bent, 1e-4));
        let e = k.euler_of(bent);
        assert!((e[0] - 1.2).abs() < 1e-5 && e[1].abs() < 1e-5 && e[2].abs() < 1e-5);
        assert!(angle_between(k.rotation_of(e), bent) < 1e-5);
        // About the bone's own X it leaves the hinge: clamped back onto it.
        let off = Quat::from_rotation_x(1.2);
        assert!(!k.contains(off, 1e-3));
        let clamped = k.clamp_rotation(off);
        assert!(k.contains(clamped, 1e-4));
        let (axis, _) = clamped.to_axis_angle();
        assert!(axis.cross(hinge).length() < 1e-3, "{axis} vs {hinge}");
        // The rate axes are the derivatives of rotation_of, in the bone's axes.
        let angles = [0.3, -0.2, 0.5];
        let free = JointLimits {
            roll,
            order: EulerOrder::ZXY,
            ..JointLimits::FREE
        };
        assert_rate_axes_are_derivatives(&free, angles);
        let bad = JointLimits {
            roll: f32::INFINITY,
            ..knee()
        };
        let err = bad.validate("shin.L").unwrap_err().to_string();
        assert!(err.contains("shin.L") && err.contains("roll"), "{err}");
    }

    #[test]
    fn a_frame_turns_the_twist_axis_onto_a_bone_pointing_elsewhere() {
        // A bone whose limb runs along its own X (an FBX import's sideways bone): the frame
        // takes Y onto X, so the locked twist is about the limb, and the roll turns the
        // hinge (the limit X) about it.
        let frame = Quat::from_rotation_arc(Vec3::Y, Vec3::X);
        let roll = 25f32.to_radians();
        let k = JointLimits {
            frame,
            roll,
            ..knee()
        };
        let limb = Vec3::X;
        let hinge = frame * Quat::from_rotation_y(roll) * Vec3::X;
        assert!(hinge.dot(limb).abs() < 1e-6);
        // Bending about the hinge is within the limits, twisting about the limb is not.
        let bent = Quat::from_axis_angle(hinge, 1.2);
        assert!(k.contains(bent, 1e-4));
        let e = k.euler_of(bent);
        assert!((e[0] - 1.2).abs() < 1e-5 && e[1].abs() < 1e-5 && e[2].abs() < 1e-5);
        assert!(angle_between(k.rotation_of(e), bent) < 1e-5);
        let twisted = Quat::from_axis_angle(limb, 0.5);
        assert!(!k.contains(twisted, 1e-3));
        assert!(angle_between(k.clamp_rotation(twisted), Quat::IDENTITY) < 1e-4);
        // About the bone's own Y (across the limb here) the twist lock does not apply: a
        // turn off the hinge, clamped into the limits.
        let clamped = k.clamp_rotation(Quat::from_rotation_y(0.8));
        assert!(k.contains(clamped, 1e-4), "{clamped}");
        let free = JointLimits {
            frame,
            roll,
            order: EulerOrder::ZXY,
            ..JointLimits::FREE
        };
        assert_rate_axes_are_derivatives(&free, [0.3, -0.2, 0.5]);
        let turn = Quat::from_axis_angle(limb, 0.1);
        let [_, y, _] = free.turn_angles(turn);
        assert!((y - 0.1).abs() < 1e-5, "{y}");
        // In JSON as [w, x, y, z]; a frame that is no unit quaternion names the bone.
        let json = r#"{"order":"XYZ","frame":[0.0,0.0,0.0,2.0]}"#;
        let bad: JointLimits = serde_json::from_str(json).unwrap();
        let err = bad.validate("upper_arm.L").unwrap_err().to_string();
        assert!(
            err.contains("upper_arm.L") && err.contains("frame"),
            "{err}"
        );
    }

    /// Limits measured from a neutral rotation (a standing pose on a rig resting far from
    /// it): the ranges are the body's numbers about the axes as they stand at the neutral.
    #[test]
    fn angles_measure_from_the_neutral_about_its_axes() {
        let roll = 30f32.to_radians();
        let neutral = Quat::from_rotation_z(std::f32::consts::PI); // legs down from legs up
        let k = JointLimits {
            roll,
            neutral,
            ..knee()
        };
        let frame = Quat::from_rotation_y(roll);
        let at_neutral = frame * neutral * frame.conjugate();
        let e = k.euler_of(at_neutral);
        assert!(e.iter().all(|a| a.abs() < 1e-5), "{e:?}");
        // A bend of 1.2 about the hinge as it stands at the neutral is inside, at 1.2.
        let bent = at_neutral * Quat::from_axis_angle(frame * Vec3::X, 1.2);
        let e = k.euler_of(bent);
        assert!((e[0] - 1.2).abs() < 1e-5 && e[1].abs() < 1e-5 && e[2].abs() < 1e-5);
        assert!(k.contains(bent, 1e-4));
        assert!(angle_between(k.rotation_of(e), bent) < 1e-5);
        // Rest itself is half a turn from the neutral: outside, and clamped to the neutral.
        assert!(!k.contains(Quat::IDENTITY, 1e-3));
        assert!(angle_between(k.clamp_rotation(Quat::IDENTITY), at_neutral) < 1e-4);
        // Turns between poses do not see the neutral.
        assert!(k.turn_angles(Quat::IDENTITY).iter().all(|a| a.abs() < 1e-6));
        // A twist from the neutral, measured from there, is a twist (the neutral, half a
        // turn about Z, would have made it a twist the other way round).
        let twisted = k.rotation_of([0.0, 0.2, 0.0]);
        let turn = k.turn_angles(at_neutral.conjugate() * twisted);
        assert!(
            turn[0].abs() < 1e-5 && (turn[1] - 0.2).abs() < 1e-5 && turn[2].abs() < 1e-5,
            "{turn:?}"
        );
        // Rate axes stay the derivatives of rotation_of.
        let free = JointLimits {
            roll,
            neutral: Quat::from_euler(glam::EulerRot::XYZ, 0.4, -1.1, 2.0),
            order: EulerOrder::ZXY,
            ..JointLimits::FREE
        };
        let angles = [0.3, -0.2, 0.5];
        assert_rate_axes_are_derivatives(&free, angles);
        // Tension from a reference at rest, far past the knee's wall: the soft part still
        // tells a small turn from a larger one (the wall at the reference, huge, is not
        // taken off to swamp it).
        let at_rest = k.euler_of(Quat::IDENTITY);
        let tension_after = |turn: Quat| {
            let angles = k.euler_of(turn);
            k.tension_from(angles, k.turn_angles(turn), at_rest, 0.0)
        };
        let (small, large) = (
            tension_after(Quat::from_rotation_z(0.1)),
            tension_after(Quat::from_rotation_z(0.3)),
        );
        assert!(small.is_finite() && large > small, "{small} {large}");
    }

    #[test]
    fn comfort_pulls_towards_the_neutral_as_well_as_the_reference() {
        let hinge = JointLimits {
            order: EulerOrder::XYZ,
            x: AxisLimit::Range {
                min: -1.0,
                max: 1.0,
            },
            ..JointLimits::FREE
        };
        let reference = [0.5, 0.0, 0.0];
        // The same turn of 0.1 from the reference, towards the neutral (0) and away.
        let cost = |x: f32, comfort: f32| {
            hinge.tension_from([x, 0.0, 0.0], [x - 0.5, 0.0, 0.0], reference, comfort)
        };
        let gap = |comfort: f32| cost(0.6, comfort) - cost(0.4, comfort);
        // Without comfort only the far wall tells them apart, barely.
        assert!(gap(0.0) > 0.0 && gap(0.0) < 1e-3, "{}", gap(0.0));
        // With it, turning back towards the neutral is clearly cheaper.
        assert!(gap(0.5) > 0.05, "{}", gap(0.5));
        assert_eq!(cost(0.5, 0.0), 0.0);
    }

    #[test]
    fn the_neutral_reads_and_writes_as_w_x_y_z_and_must_be_a_unit_quaternion() {
        let text = r#"{"order": "XYZ", "neutral": [0.0, 0.0, 0.0, 1.0]}"#;
        let k: JointLimits = serde_json::from_str(text).unwrap();
        assert!(angle_between(k.neutral, Quat::from_rotation_z(std::f32::consts::PI)) < 1e-6);
        let back = serde_json::to_value(k).unwrap();
        assert_eq!(back["neutral"], serde_json::json!([0.0, 0.0, 0.0, 1.0]));
        let plain: JointLimits = serde_json::from_str(r#"{"order": "XYZ"}"#).unwrap();
        assert_eq!(plain.neutral, Quat::IDENTITY);
        let bad = JointLimits {
            neutral: Quat::from_xyzw(0.0, 0.0, 0.0, 2.0),
            ..knee()
        };
        let err = bad.validate("thigh.L").unwrap_err().to_string();
        assert!(err.contains("thigh.L") && err.contains("neutral"), "{err}");
    }

    /// A range of more than a full turn (as limits read from a pose far from rest can give)
    /// holds every angle, but only its own representation of it: angles are taken there, so
    /// a solver stepping from them never clamps the joint round to a bound.
    #[test]
    fn ranges_of_a_full_turn_or_more_hold_every_angle_in_their_own_representation() {
        let wide = JointLimits {
            x: AxisLimit::Range {
                min: -0.2,
                max: 7.6,
            },
            ..JointLimits::FREE
        };
        // Principal angle -3.13: outside the numbers, its twin 3.153 inside.
        let q = Quat::from_rotation_x(-3.13);
        let within = wide.angles_within(q)[0];
        assert!(
            (within - (-3.13 + std::f32::consts::TAU)).abs() < 1e-4,
            "{within}"
        );
        assert!(wide.contains(q, 0.0));
        assert!(wide.clamp_rotation(q).abs_diff_eq(q, 1e-6));
        assert_eq!(wide.clamp_axis(0, within + 0.1), within + 0.1);
    }

    #[test]
    fn angles_within_pick_the_representation_inside_the_ranges() {
        // A range across pi: the principal angle (-3.0) lies outside, its 2*pi twin inside.
        let across = JointLimits {
            x: AxisLimit::Range { min: 2.8, max: 3.4 },
            ..JointLimits::FREE
        };
        let q = Quat::from_rotation_x(3.28);
        assert!((across.euler_of(q)[0] - (3.28 - std::f32::consts::TAU)).abs() < 1e-4);
        assert!((across.angles_within(q)[0] - 3.28).abs() < 1e-4);
        // Of the two Euler representations, the one the ranges hold.
        let k = knee();
        let bent = Quat::from_rotation_x(2.0);
        let alternate = k.order.alternate(k.euler_of(bent));
        let from_alternate = k.rotation_of(alternate);
        assert!((k.angles_within(from_alternate)[0] - 2.0).abs() < 1e-4);
    }

    #[test]
    fn json_form() {
        let json =
            r#"{"order":"ZXY","x":{"mode":"range","min":-1.0,"max":0.5},"y":{"mode":"locked"}}"#;
        let limits: JointLimits = serde_json::from_str(json).unwrap();
        assert_eq!(limits.order, EulerOrder::ZXY);
        assert_eq!(limits.y, AxisLimit::Locked);
        assert_eq!(limits.z, AxisLimit::Free);
    }
}

#[cfg(test)]
mod tension_tests {
    use super::*;

    #[test]
    fn tension_is_smooth_at_zero_and_a_wall_past_the_threshold() {
        let axis = AxisTension {
            negative: SideTension {
                threshold: 1.0,
                rigidity: 1.0,
            },
            positive: SideTension {
                threshold: 1.5,
                rigidity: 0.1,
            },
        };
        assert_eq!(axis.of(0.0), 0.0);
        // The seed's example: backwards stiff up to one radian, forwards freer to 1.5.
        assert!((axis.of(-0.5) - (0.5f32.powf(1.25) + 0.5f32.powi(16))).abs() < 1e-6);
        assert!(axis.of(0.5) < 0.05 && axis.of(-0.5) > 0.4);
        assert!(axis.of(-1.2) > 18.0 && axis.of(1.8) > 18.0);
        // Slope at zero is zero from both sides: (a^1.25)' = 1.25 a^0.25 -> 0.
        let h = 1e-4;
        assert!(axis.of(h) / h < 0.2 && axis.of(-h) / h < 0.2);
        let mut limits = JointLimits::FREE;
        limits.y = AxisLimit::Locked;
        assert!((limits.tension_of([0.3, 5.0, 0.0]) - limits.tension[0].of(0.3)).abs() < 1e-6);
        limits.tension[2].positive.threshold = 0.0;
        assert!(limits
            .validate("knee")
            .unwrap_err()
            .to_string()
            .contains("knee"));
    }
}
