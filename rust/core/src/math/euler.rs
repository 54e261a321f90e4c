//! Euler angles in Blender's six rotation orders.
//!
//! An order names the axes in the order they are applied: `XYZ` turns about X first,
//! then Y, then Z, so its matrix is `Rz * Ry * Rx` (Blender's 'XYZ' rotation mode).
//! Angles are always stored by axis, `[x, y, z]`, like Blender's `rotation_euler`.

use glam::{Mat3, Quat, Vec3};
use serde::{Deserialize, Serialize};
use std::f32::consts::{PI, TAU};

/// One of Blender's six Euler rotation orders (first-applied axis first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum EulerOrder {
    /// X, then Y, then Z (Blender's default).
    #[default]
    XYZ,
    /// X, then Z, then Y.
    XZY,
    /// Y, then X, then Z.
    YXZ,
    /// Y, then Z, then X.
    YZX,
    /// Z, then X, then Y.
    ZXY,
    /// Z, then Y, then X.
    ZYX,
}

const AXES: [Vec3; 3] = [Vec3::X, Vec3::Y, Vec3::Z];

impl EulerOrder {
    /// All six orders.
    pub const ALL: [EulerOrder; 6] = [
        EulerOrder::XYZ,
        EulerOrder::XZY,
        EulerOrder::YXZ,
        EulerOrder::YZX,
        EulerOrder::ZXY,
        EulerOrder::ZYX,
    ];

    /// Axis indices (0 = x, 1 = y, 2 = z) in the order they are applied.
    pub const fn axes(self) -> [usize; 3] {
        match self {
            EulerOrder::XYZ => [0, 1, 2],
            EulerOrder::XZY => [0, 2, 1],
            EulerOrder::YXZ => [1, 0, 2],
            EulerOrder::YZX => [1, 2, 0],
            EulerOrder::ZXY => [2, 0, 1],
            EulerOrder::ZYX => [2, 1, 0],
        }
    }

    /// +1 for cyclic orders (XYZ, YZX, ZXY), -1 for the others.
    fn parity(self) -> f32 {
        match self {
            EulerOrder::XYZ | EulerOrder::YZX | EulerOrder::ZXY => 1.0,
            _ => -1.0,
        }
    }

    /// The rotation for angles `[x, y, z]` (radians) in this order.
    pub fn to_quat(self, angles: [f32; 3]) -> Quat {
        let [i, j, k] = self.axes();
        Quat::from_axis_angle(AXES[k], angles[k])
            * Quat::from_axis_angle(AXES[j], angles[j])
            * Quat::from_axis_angle(AXES[i], angles[i])
    }

    /// Decomposes `q` into angles `[x, y, z]`, the middle axis in [-pi/2, pi/2] and the
    /// others in [-pi, pi]. At gimbal lock the last-applied angle is set to zero.
    pub fn from_quat(self, q: Quat) -> [f32; 3] {
        let [i, j, k] = self.axes();
        let s = self.parity();
        let m = Mat3::from_quat(q.normalize());
        let at = |r: usize, c: usize| m.col(c)[r];
        let cos_b = (at(i, i) * at(i, i) + at(j, i) * at(j, i)).sqrt();
        let mut out = [0.0f32; 3];
        out[j] = (-s * at(k, i)).atan2(cos_b);
        if cos_b > 1e-6 {
            out[i] = (s * at(k, j)).atan2(at(k, k));
            out[k] = (s * at(j, i)).atan2(at(i, i));
        } else {
            out[i] = (-s * at(j, k)).atan2(at(j, j));
            out[k] = 0.0;
        }
        out
    }

    /// The other decomposition of the same rotation: first and last angles turned by pi,
    /// the middle one mirrored.
    pub fn alternate(self, angles: [f32; 3]) -> [f32; 3] {
        let [i, j, k] = self.axes();
        let mut out = angles;
        out[i] = super::wrap_angle(angles[i] + PI);
        out[j] = super::wrap_angle(PI - angles[j]);
        out[k] = super::wrap_angle(angles[k] + PI);
        out
    }

    /// Decomposes `q` choosing, of its two representations and their 2*pi shifts, the one
    /// closest to `near`, so angles do not jump from one evaluation to the next.
    pub fn from_quat_near(self, q: Quat, near: [f32; 3]) -> [f32; 3] {
        let first = self.from_quat(q);
        let mut best = shift_near(first, near);
        let other = shift_near(self.alternate(first), near);
        if distance_sq(other, near) < distance_sq(best, near) {
            best = other;
        }
        best
    }

    /// For each axis (indexed by axis), the direction in the joint's frame about which a
    /// change of that one angle turns the joint, at the given angles. Turning angle `a` by
    /// `d` is exactly a turn by `d` about this direction (applied after the current rotation).
    pub fn rate_axes(self, angles: [f32; 3]) -> [Vec3; 3] {
        let [i, j, k] = self.axes();
        let rk = Quat::from_axis_angle(AXES[k], angles[k]);
        let rj = Quat::from_axis_angle(AXES[j], angles[j]);
        let mut out = [Vec3::ZERO; 3];
        out[k] = AXES[k];
        out[j] = rk * AXES[j];
        out[i] = rk * (rj * AXES[i]);
        out
    }
}

fn shift_near(mut angles: [f32; 3], near: [f32; 3]) -> [f32; 3] {
    for (a, n) in angles.iter_mut().zip(near) {
        *a += TAU * ((n - *a) / TAU).round();
    }
    angles
}

fn distance_sq(a: [f32; 3], b: [f32; 3]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

#[cfg(test)]
mod tests {
    use super::super::rotation::angle_between;
    use super::*;

    #[test]
    fn xyz_is_x_first() {
        let q = EulerOrder::XYZ.to_quat([0.3, 0.0, 0.0]) * Quat::IDENTITY;
        let expected =
            Quat::from_rotation_z(0.5) * Quat::from_rotation_y(0.4) * Quat::from_rotation_x(0.3);
        let got = EulerOrder::XYZ.to_quat([0.3, 0.4, 0.5]);
        assert!(angle_between(got, expected) < 1e-6);
        assert!(angle_between(q, Quat::from_rotation_x(0.3)) < 1e-6);
    }

    #[test]
    fn round_trip_all_orders() {
        let samples = [
            [0.3, -0.7, 1.2],
            [-2.9, 1.4, 0.1],
            [1.0, -1.5, -3.0],
            [0.0, 0.0, 0.0],
        ];
        for order in EulerOrder::ALL {
            for angles in samples {
                let q = order.to_quat(angles);
                let back = order.from_quat(q);
                assert!(
                    angle_between(order.to_quat(back), q) < 1e-5,
                    "{order:?} {angles:?} -> {back:?}"
                );
                let alt = order.alternate(back);
                assert!(
                    angle_between(order.to_quat(alt), q) < 1e-5,
                    "{order:?} alternate"
                );
                let near = order.from_quat_near(q, angles);
                for a in 0..3 {
                    assert!(
                        (near[a] - angles[a]).abs() < 1e-4,
                        "{order:?} {angles:?} near {near:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn gimbal_lock_still_round_trips() {
        for order in EulerOrder::ALL {
            let mut angles = [0.4, 0.4, 0.4];
            angles[order.axes()[1]] = std::f32::consts::FRAC_PI_2;
            let q = order.to_quat(angles);
            assert!(
                angle_between(order.to_quat(order.from_quat(q)), q) < 1e-3,
                "{order:?}"
            );
        }
    }

    #[test]
    fn rate_axes_match_finite_differences() {
        let h = 1e-3;
        for order in EulerOrder::ALL {
            let angles = [0.3, -0.5, 0.8];
            let q = order.to_quat(angles);
            let axes = order.rate_axes(angles);
            for (a, axis) in axes.iter().enumerate() {
                let mut moved = angles;
                moved[a] += h;
                let expected = Quat::from_axis_angle(*axis, h) * q;
                assert!(
                    angle_between(order.to_quat(moved), expected) < 1e-5,
                    "{order:?} axis {a}"
                );
            }
        }
    }
}
