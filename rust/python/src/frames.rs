//! A frame range's inputs as flat arrays in the caller's order (targets, rotation targets
//! and poles per goal, an animated pose per frame), read once and handed to the core's frame
//! driver (`tendon_core::batch`), which holds the warm-start policy; shared by
//! `Solver.solve_frames` and `SpringSimulation.simulate`.

use crate::arrays::{quat_wxyz, read_f32, scatter, vec3, write_rotations, write_translations};
use pyo3::prelude::*;
use tendon_core::batch::{self, FrameInput};
use tendon_core::{
    AnySolver, Goal as CoreGoal, Pose, Rig as CoreRig, SolveReport, TendonError as CoreError,
};

/// The optional per-frame inputs of `Solver.solve_frames`.
pub(crate) struct FrameInputs<'a, 'py> {
    pub(crate) rotations: Option<&'a Bound<'py, PyAny>>,
    pub(crate) translations: Option<&'a Bound<'py, PyAny>>,
    pub(crate) scales: Option<&'a Bound<'py, PyAny>>,
    pub(crate) rotation_targets: Option<&'a Bound<'py, PyAny>>,
    pub(crate) poles: Option<&'a Bound<'py, PyAny>>,
}

/// A frame range's inputs, flat, in the caller's order (kept to reuse the memory).
#[derive(Default)]
pub(crate) struct FrameData {
    /// frames x goals x 3.
    pub(crate) targets: Vec<f32>,
    /// Whether the start pose is given per frame (below) or once (`Solver::start`).
    pub(crate) per_frame_pose: bool,
    /// frames x bones x 4 (w first), x 3, x 3.
    pub(crate) rotations: Vec<f32>,
    pub(crate) translations: Vec<f32>,
    pub(crate) scales: Vec<f32>,
    /// frames x goals x 4 (w first) or empty.
    pub(crate) rotation_targets: Vec<f32>,
    /// frames x goals x 3 or empty.
    pub(crate) poles: Vec<f32>,
}

/// Per-frame (frames, n, 3) vectors, or `fill` everywhere when not given.
pub(crate) fn read_frame_vectors(
    array: Option<&Bound<'_, PyAny>>,
    what: &str,
    [frames, n]: [usize; 2],
    fill: f32,
    out: &mut Vec<f32>,
) -> PyResult<()> {
    match array {
        Some(a) => read_f32(a, what, &[frames, n, 3], out).map(|_| ()),
        None => {
            out.clear();
            out.resize(frames * n * 3, fill);
            Ok(())
        }
    }
}

/// A frame range's flat arrays (caller order) as the core's frame input.
pub(crate) struct FrameArrays<'a> {
    pub(crate) data: &'a FrameData,
    pub(crate) frames: usize,
}

impl FrameInput for FrameArrays<'_> {
    fn frame_count(&self) -> usize {
        self.frames
    }

    fn set_goals(&self, frame: usize, goals: &mut [CoreGoal]) {
        let data = self.data;
        let count = goals.len();
        for (k, goal) in goals.iter_mut().enumerate() {
            let at = frame * count + k;
            goal.target = vec3(&data.targets[at * 3..at * 3 + 3]);
            if goal.rotation.is_some() && !data.rotation_targets.is_empty() {
                goal.rotation = Some(quat_wxyz(&data.rotation_targets[at * 4..at * 4 + 4]));
            }
            if goal.pole.is_some() && !data.poles.is_empty() {
                goal.pole = Some(vec3(&data.poles[at * 3..at * 3 + 3]));
            }
        }
    }

    fn has_frame_poses(&self) -> bool {
        self.data.per_frame_pose
    }

    fn frame_pose(&self, rig: &CoreRig, frame: usize, pose: &mut Pose) {
        let (data, n) = (self.data, rig.len());
        let (r, v) = (
            frame * n * 4..(frame + 1) * n * 4,
            frame * n * 3..(frame + 1) * n * 3,
        );
        scatter(rig, &data.rotations[r], 4, &mut pose.rotations, quat_wxyz);
        scatter(
            rig,
            &data.translations[v.clone()],
            3,
            &mut pose.translations,
            vec3,
        );
        scatter(rig, &data.scales[v], 3, &mut pose.scales, vec3);
    }
}

/// Solves each frame of `data` through the core's frame driver, writing rotations
/// (frames x bones x 4, w-first, caller order), translations and reports.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_frames(
    solver: &mut AnySolver,
    rig: &CoreRig,
    start: &Pose,
    goals: &mut [CoreGoal],
    data: &FrameData,
    warm: bool,
    rotations: &mut [f32],
    translations: &mut [f32],
    reports: &mut [SolveReport],
) -> std::result::Result<(), CoreError> {
    let n = rig.len();
    let input = FrameArrays {
        data,
        frames: reports.len(),
    };
    batch::solve_frames_threaded(
        solver,
        rig,
        start,
        goals,
        &input,
        warm,
        0,
        |frame, pose, report| {
            write_rotations(
                rig,
                pose,
                &mut rotations[frame * n * 4..(frame + 1) * n * 4],
            );
            write_translations(
                rig,
                pose,
                &mut translations[frame * n * 3..(frame + 1) * n * 3],
            );
            reports[frame] = report;
        },
    )
}
