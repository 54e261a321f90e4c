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
