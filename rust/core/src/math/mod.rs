//! Rotation maths shared by the rig model and the solvers. Knows nothing of rigs.

pub mod channels;
pub mod dense;
pub mod euler;
pub mod fcurve;
pub mod handles;
pub mod rotation;
pub mod simplex;

pub use channels::RotationMode;
pub use euler::EulerOrder;
pub use rotation::{
    angle_between, best_fit_rotation, clamp_angle, from_to, rotation_angle, turn_about, wrap_angle,
};

/// `q` as a unit quaternion, robust to huge or tiny components (a quaternion of 1e20s,
/// normalised directly, overflowed to the zero quaternion); None for (near) zero.
pub fn unit_quaternion(q: glam::Quat) -> Option<glam::Quat> {
    let length_squared = q.length_squared();
    if (1e-12..1e12).contains(&length_squared) {
        // The usual case, as before (so rigs round-trip through JSON bit for bit).
        return Some(q.normalize());
    }
    let largest = q.to_array().iter().fold(0.0f32, |m, v| m.max(v.abs()));
    if largest <= 1e-30 {
        return None;
    }
    let scaled = q * (1.0 / largest);
    (scaled.length_squared() >= 1e-12).then(|| scaled.normalize())
}

/// The distance between two points, finite for any finite points: the straight sum of
/// squares overflows `f32` beyond about 1.8e19 (a target 1e20 away was reported at an
/// infinite distance).
pub fn distance(a: glam::Vec3, b: glam::Vec3) -> f32 {
    let d = a - b;
    let largest = d.abs().max_element();
    if largest < 1e18 {
        return d.length();
    }
    let scaled = ((d / largest).as_dvec3().length() * largest as f64) as f32;
    // Beyond f32's range (points near f32::MAX apart): the largest finite distance.
    scaled.min(f32::MAX)
}
