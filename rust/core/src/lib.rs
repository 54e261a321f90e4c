//! Tendon's inverse-kinematics core.
//!
//! A [`Rig`] is built from a serde-friendly [`RigDesc`] and stored in depth-first order as
//! arrays. A [`Pose`] holds each bone's local rotation, translation and scale relative to
//! rest (Blender's `matrix_basis`). Solvers take a rig, a start pose and [`Goal`]s and
//! return a pose and a [`SolveReport`].
//!
//! ```
//! use glam::{Quat, Vec3};
//! use tendon_core::{BoneDesc, Fabrik, Goal, Pose, RigDesc, Solver, Transform};
//!
//! // Three bones along +Y, each bent a little at its head (a bent rest pose helps IK).
//! let bent = |y: f32| Transform {
//!     translation: Vec3::new(0.0, y, 0.0),
//!     rotation: Quat::from_rotation_x(0.2),
//!     scale: Vec3::ONE,
//! };
//! let rig = RigDesc {
//!     bones: vec![
//!         BoneDesc::new("upper", None, Transform::IDENTITY, 1.0),
//!         BoneDesc::new("lower", Some("upper"), bent(1.0), 1.0),
//!         BoneDesc::new("hand", Some("lower"), bent(1.0), 0.5),
//!     ],
//! }
//! .build()?;
//!
//! let hand = rig.index_of("hand").unwrap();
//! let goal = Goal::new(hand, Vec3::new(0.5, 1.5, 0.8));
//! let (pose, report) = Fabrik::default().solve(&rig, &Pose::rest(rig.len()), &[goal])?;
//! assert!(report.reached);
//!
//! // The hand's tail is on the target; `pose.rotations` are the local rotations to key.
//! let world = rig.world_matrices(&pose);
//! let (_, tail) = rig.head_tail(&world[hand], hand);
//! assert!(tail.distance(goal.target) < 1e-4);
//! # Ok::<(), tendon_core::TendonError>(())
//! ```

#![warn(missing_docs)]

pub mod batch;
pub mod error;
#[cfg(feature = "fixtures")]
pub mod fixtures;
pub mod math;
pub mod rig;

pub use error::{Result, TendonError};
pub mod goal;
pub mod solvers;

pub use goal::{EffectorPoint, Goal};

pub use math::{EulerOrder, RotationMode};
pub use rig::{
    AxisLimit, AxisTension, BoneDesc, JointLimits, Pose, Rig, RigDesc, SideTension, Transform,
};
pub use solvers::{
    distribute_scale, two_bone_limb, AnySolver, Ccd, CcdParams, Fabrik, FabrikParams,
    IterationParams, JacobianDls, JacobianDlsParams, JacobianTranspose, JacobianTransposeParams,
    LimbSolution, ScaleLimits, SolveReport, Solver, SolverConfig, SphereCollider, SpringChain,
    SpringParams, SpringSimulation, TensionMinimizer, TensionParams, TensionReference,
    TensionStart, TwoBone, TwoBoneParams,
};

/// How many threads this machine runs at once, asked once: the standard library reads the
/// process's CPU quota from files each time (30 microseconds here, more than a small call's
/// whole work).
pub fn machine_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(1, |t| t.get()))
}
