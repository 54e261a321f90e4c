//! Hooks for the tests and benchmarks, built only with the `hooks` feature (which
//! scripts/build-wheel enables): `_test_panic`, and the bodies of `Solver._time_native` and
//! `Solver._time_native_frames`, which time the native part of a solve inside the core so
//! the benchmarks can tell Python's overhead apart.

use crate::errors::guarded;
use crate::frames::{run_frames, FrameInputs};
use crate::goal::Goal;
use crate::rig::Rig;
use crate::solver::SolverState;
use pyo3::prelude::*;
use std::time::Instant;
use tendon_core::{SolveReport, Solver as _, TendonError as CoreError};

/// Panics inside the guard, so tests can check a panic arrives as `InternalError`.
#[pyfunction]
pub(crate) fn _test_panic() -> PyResult<()> {
    guarded(|| -> Result<(), CoreError> { panic!("deliberate panic for the tests") })
}

/// Mean seconds of one native solve of `goals` from the given pose over `repeats` solves.
pub(crate) fn time_native<'py>(
    solver: &mut SolverState,
    py: Python<'py>,
    rig: &Rig,
    goals: &[PyRef<'py, Goal>],
    repeats: u32,
    rotations: Option<&Bound<'py, PyAny>>,
) -> PyResult<f64> {
    let rig = &rig.rig;
    solver.prepare(rig, goals, rotations, None, None)?;
    let SolverState {
        solver,
        start,
        out,
        goals,
        ..
    } = solver;
    py.detach(|| {
        guarded(|| {
            let clock = Instant::now();
            for _ in 0..repeats.max(1) {
                solver.solve_into(rig, start, goals, out)?;
            }
            Ok(clock.elapsed().as_secs_f64() / repeats.max(1) as f64)
        })
    })
}

/// Mean seconds of the native part of `solve_frames` over `repeats` runs.
pub(crate) fn time_native_frames<'py>(
    solver: &mut SolverState,
    py: Python<'py>,
    rig: &Rig,
    goals: &[PyRef<'py, Goal>],
    targets: &Bound<'py, PyAny>,
    repeats: u32,
    warm: bool,
) -> PyResult<f64> {
    let rig = &rig.rig;
    let inputs = FrameInputs {
        rotations: None,
        translations: None,
        scales: None,
        rotation_targets: None,
        poles: None,
    };
    let frames = solver.prepare_frames(rig, goals, targets, inputs)?;
    let mut rotations = vec![0.0f32; frames * rig.len() * 4];
    let mut translations = vec![0.0f32; frames * rig.len() * 3];
    let mut reports = vec![SolveReport::default(); frames];
    let SolverState {
        solver,
        start,
        goals,
        frames: data,
        ..
    } = solver;
    py.detach(|| {
        guarded(|| {
            let clock = Instant::now();
            for _ in 0..repeats.max(1) {
                run_frames(
                    solver,
                    rig,
                    start,
                    goals,
                    data,
                    warm,
                    &mut rotations,
                    &mut translations,
                    &mut reports,
                )?;
            }
            Ok(clock.elapsed().as_secs_f64() / repeats.max(1) as f64)
        })
    })
}
