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
