//! Tendon's inverse-kinematics core.
//!
//! A [`Rig`] is built from a serde-friendly [`RigDesc`] and stored in depth-first order as
//! arrays. A [`Pose`] holds each bone's local rotation, translation and scale relative to
//! rest (Blender's `matrix_basis`). Solvers take a rig, a start pose and [`Goal`]s and
//! return a pose and a [`SolveReport`].

#![warn(missing_docs)]

pub mod error;
pub mod math;
pub mod rig;

pub use error::{Result, TendonError};
pub mod goal;
pub mod solvers;

pub use goal::{EffectorPoint, Goal};
pub use math::EulerOrder;
pub use rig::{AxisLimit, BoneDesc, JointLimits, Pose, Rig, RigDesc, Transform};
pub use solvers::{
    AnySolver, Ccd, CcdParams, Fabrik, FabrikParams, IterationParams, JacobianDls,
    JacobianDlsParams, JacobianTranspose, JacobianTransposeParams, SolveReport, Solver,
    SolverConfig, TwoBone, TwoBoneParams,
};
