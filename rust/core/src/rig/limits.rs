//! Per-joint limits, the one place where every solver's rotations are constrained.
//!
//! A joint's rotation relative to rest is decomposed into Euler angles in the joint's
//! order; each axis is free, locked at zero, or limited to an inclusive range.

use crate::error::{Result, TendonError};
use crate::math::{wrap_angle, EulerOrder};
use glam::Quat;
use serde::{Deserialize, Serialize};
use std::f32::consts::TAU;

/// What one Euler axis of a joint may do.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum AxisLimit {
    /// Any angle.
    #[default]
    Free,
    /// Held at zero (the rest angle) and removed from the solvers' degrees of freedom.
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

    /// How far `angle` (or an equivalent angle 2*pi away) lies outside the interval, and
    /// that equivalent angle clamped into it.
    fn clamp_wrapped(self, angle: f32) -> (f32, f32) {
        let Some((min, max)) = self.interval() else {
            return (0.0, angle);
        };
        if max - min >= TAU {
            return (0.0, angle);
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
#[serde(default)]
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
#[serde(default)]
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
        let side = if angle < 0.0 {
            self.negative
        } else {
            self.positive
        };
        let x = angle.abs() / side.threshold;
        let x2 = x * x;
        let x4 = x2 * x2;
        let x8 = x4 * x4;
        side.rigidity * x * x.sqrt().sqrt() + x8 * x8
    }
}

/// The limits of one joint.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
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

    /// Checks that ranges are finite and ordered and tension settings finite and positive,
    /// naming `bone` otherwise.
    pub fn validate(&self, bone: &str) -> Result<()> {
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
        for (a, limit) in angles.iter_mut().zip(self.axes()) {
            if let Some((min, max)) = limit.interval() {
                *a = a.clamp(min, max);
            }
        }
    }

    /// Clamps the angle of one axis (0 = x) into its limit.
    pub fn clamp_axis(&self, axis: usize, angle: f32) -> f32 {
        match self.axes()[axis].interval() {
            None => angle,
            Some((min, max)) => angle.clamp(min, max),
        }
    }

    /// Decomposes `rotation` (relative to rest) into angles in this joint's order, picking
    /// the representation closest to `near`.
    pub fn angles_of(&self, rotation: Quat, near: [f32; 3]) -> [f32; 3] {
        self.order.from_quat_near(rotation, near)
    }

    /// The nearest rotation inside the limits. Of the two Euler representations of the
    /// rotation, the one needing the smaller correction is clamped.
    pub fn clamp_rotation(&self, rotation: Quat) -> Quat {
        if self.is_free() {
            return rotation;
        }
        let first = self.order.from_quat(rotation);
        let second = self.order.alternate(first);
        let (cost_a, a) = self.clamp_representation(first);
        let (cost_b, b) = self.clamp_representation(second);
        if cost_a == 0.0 && cost_b == 0.0 {
            return rotation;
        }
        self.order.to_quat(if cost_b < cost_a { b } else { a })
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

    /// Whether `rotation` lies within the limits, allowing `slack` radians per axis.
    pub fn contains(&self, rotation: Quat, slack: f32) -> bool {
        let first = self.order.from_quat(rotation);
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
