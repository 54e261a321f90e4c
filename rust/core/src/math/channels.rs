//! Rotations written as animation channels in one of Blender's rotation modes, each chosen
//! near the previous value so keys and poses do not jump (Euler angles by 2*pi or to their
//! alternate form, quaternions to the other hemisphere, axis-angle to the flipped axis).

use super::{wrap_angle, EulerOrder};
use glam::{Quat, Vec3};
use std::f32::consts::TAU;

/// How a bone stores its rotation (Blender's `rotation_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RotationMode {
    /// Four channels `(w, x, y, z)`.
    Quaternion,
    /// Four channels `(angle, x, y, z)`: radians about a unit axis.
    AxisAngle,
    /// Three channels `(x, y, z)` in radians, applied in this order.
    Euler(EulerOrder),
}

impl RotationMode {
    /// Parses Blender's names: `QUATERNION`, `AXIS_ANGLE`, `XYZ`, `XZY`, `YXZ`, `YZX`,
    /// `ZXY`, `ZYX`.
    pub fn from_blender(name: &str) -> Option<RotationMode> {
        Some(match name {
            "QUATERNION" => RotationMode::Quaternion,
            "AXIS_ANGLE" => RotationMode::AxisAngle,
            other => RotationMode::Euler(EulerOrder::ALL.into_iter().find(|o| {
                let axes = o.axes().map(|a| [b'X', b'Y', b'Z'][a]);
                other.as_bytes() == axes
            })?),
        })
    }

    /// How many channels the mode has (3 or 4).
    pub fn channel_count(self) -> usize {
        match self {
            RotationMode::Euler(_) => 3,
            _ => 4,
        }
    }

    /// The channels of `q`, nearest to `previous` (the same mode's channels) when given.
    /// Only the first [`channel_count`](Self::channel_count) values are meaningful.
    pub fn channels(self, q: Quat, previous: Option<[f32; 4]>) -> [f32; 4] {
        let q = q.normalize();
        match self {
            RotationMode::Quaternion => {
                let mut c = [q.w, q.x, q.y, q.z];
                if let Some(p) = previous {
                    if c.iter().zip(p).map(|(a, b)| a * b).sum::<f32>() < 0.0 {
                        c = c.map(|v| -v);
                    }
                }
                c
            }
            RotationMode::AxisAngle => {
                let (mut axis, mut angle) = q.to_axis_angle();
                if !axis.is_finite() || axis.length_squared() < 0.5 {
                    axis = Vec3::Y;
                }
                if let Some(p) = previous {
                    let before = Vec3::new(p[1], p[2], p[3]);
                    // (angle, axis) and (-angle, -axis) are the same turn.
                    if axis.dot(before) < 0.0 {
                        axis = -axis;
                        angle = -angle;
                    }
                    // Whole turns about the same axis change nothing.
                    angle = p[0] + wrap_angle(angle - p[0]);
                }
                [angle, axis.x, axis.y, axis.z]
            }
            RotationMode::Euler(order) => {
                let angles = match previous {
                    Some(p) => order.from_quat_near(q, [p[0], p[1], p[2]]),
                    None => order.from_quat(q),
                };
                [angles[0], angles[1], angles[2], 0.0]
            }
        }
    }

    /// The rotation the channels describe (inverse of [`channels`](Self::channels)).
    pub fn to_quat(self, c: [f32; 4]) -> Quat {
        match self {
            RotationMode::Quaternion => Quat::from_xyzw(c[1], c[2], c[3], c[0]).normalize(),
            RotationMode::AxisAngle => {
                let axis = Vec3::new(c[1], c[2], c[3]);
                if axis.length_squared() < 1e-20 {
                    Quat::IDENTITY
                } else {
                    Quat::from_axis_angle(axis.normalize(), c[0] % TAU)
                }
            }
            RotationMode::Euler(order) => order.to_quat([c[0], c[1], c[2]]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blender_names_round_trip() {
        for (name, count) in [("QUATERNION", 4), ("AXIS_ANGLE", 4), ("XYZ", 3), ("ZYX", 3)] {
            let mode = RotationMode::from_blender(name).unwrap();
            assert_eq!(mode.channel_count(), count);
        }
        assert_eq!(
            RotationMode::from_blender("YZX"),
            Some(RotationMode::Euler(EulerOrder::YZX))
        );
        assert!(RotationMode::from_blender("xyz").is_none());
    }

    #[test]
    fn channels_describe_the_rotation_and_stay_near_the_previous_value() {
        let q = Quat::from_euler(glam::EulerRot::ZYX, 2.9, -0.4, 1.2);
        let modes = [
            "QUATERNION",
            "AXIS_ANGLE",
            "XYZ",
            "XZY",
            "YXZ",
            "YZX",
            "ZXY",
            "ZYX",
        ];
        for name in modes {
            let mode = RotationMode::from_blender(name).unwrap();
            let plain = mode.channels(q, None);
            assert!(mode.to_quat(plain).angle_between(q) < 1e-5, "{name}");
            // A previous value a small turn away: the new channels stay close to it.
            let nearby = q * Quat::from_rotation_y(0.01);
            let mut previous = mode.channels(nearby, None);
            if let RotationMode::Euler(order) = mode {
                let alt = order.alternate([previous[0], previous[1], previous[2]]);
                previous = [alt[0] + TAU, alt[1], alt[2] - TAU, 0.0];
            } else {
                previous = previous.map(|v| -v);
            }
            let near = mode.channels(q, Some(previous));
            assert!(mode.to_quat(near).angle_between(q) < 1e-5, "{name}");
            let gap = near
                .iter()
                .zip(previous)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f32::max);
            assert!(gap < 0.05, "{name}: {near:?} vs {previous:?}");
        }
    }
}
