//! Python bindings of `tendon-core`: the `tendon._native` module.
//!
//! Thin by design: shape and dtype checks, conversion between numpy float32 arrays (in the
//! caller's bone order, quaternions w-first as Blender has them) and the core's types, the
//! GIL released around every solve, and one mapping from core errors (and panics) to the
//! `tendon.TendonError` family. Defaults come from the core's `Default` impls.
//!
//! - `errors`: the exceptions and the one mapping to them;
//! - `arrays`: reading and writing float32 arrays, and the caller-order remap;
//! - `rig`, `goal`, `solver`, `spring`: the classes; `plan`: goals planned once and solved
//!   again and again from the matrices Blender's pose bones give; `frames`: a frame range's inputs for
//!   the core's frame driver (`tendon_core::batch`);
//! - `blender`: helpers in Blender's conventions for the add-on;
//! - `hooks` (feature `hooks`): what only the tests and benchmarks call.

mod arrays;
mod blender;
mod errors;
mod frames;
mod goal;
#[cfg(feature = "hooks")]
mod hooks;
mod plan;
mod rig;
mod solver;
mod spring;

use pyo3::prelude::*;

/// Tendon's native module: rigs, goals and solvers (see the `tendon` package).
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<rig::Rig>()?;
    m.add_class::<goal::Goal>()?;
    m.add_class::<solver::Solver>()?;
    m.add_class::<solver::SolveResult>()?;
    m.add_class::<solver::FramesResult>()?;
    m.add_class::<spring::SpringSimulation>()?;
    m.add_class::<plan::PosePlan>()?;
    errors::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    #[cfg(feature = "hooks")]
    m.add_function(wrap_pyfunction!(hooks::_test_panic, m)?)?;
    m.add_function(wrap_pyfunction!(blender::rotation_channels, m)?)?;
    m.add_function(wrap_pyfunction!(blender::matrices_to_transforms, m)?)?;
    m.add_function(wrap_pyfunction!(blender::distribute_scale, m)?)?;
    m.add_function(wrap_pyfunction!(blender::evaluate_fcurve, m)?)?;
    m.add_function(wrap_pyfunction!(blender::auto_clamped_handles, m)?)?;
    m.add_function(wrap_pyfunction!(blender::euler_orders, m)?)?;
    m.add_function(wrap_pyfunction!(blender::default_limits, m)?)?;
    Ok(())
}
