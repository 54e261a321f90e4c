//! The `PosePlan` class: one armature's goals planned once, solved again and again straight
//! from the matrices Blender's pose bones give in bulk (the add-on's repeated solves and
//! live mode), so a solve is one native call between one bulk read and one bulk write.

use crate::arrays::{ensure_finite_array, quat_wxyz, read_f32, vec3};
use crate::errors::{guarded, BoneIndexError, NonFiniteError, ShapeError};
use crate::goal::Goal;
use crate::rig::Rig;
use crate::solver::Solver;
use glam::{Affine3A, Mat4, Quat, Vec3, Vec4};
use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use std::collections::HashMap;
use tendon_core::{Goal as CoreGoal, RotationMode, Solver as _};

/// One armature's goals planned for repeated solves from Blender's pose: `goals` (their
/// targets are replaced on every solve), the bones they may turn (`moving`, caller indices
/// of `rig`), `pose_rows` (for each caller index, its row in the armature's pose bones, as
/// `foreach_get` orders them) and, per goal, its chain (caller indices, effector first) and
/// whether its tail counts, to measure how far each chain reaches in the pose Blender
/// shows; `modes` maps the integers `foreach_get("rotation_mode")` gives to Blender's
/// names of the rotation modes. Build it once for a set of goals; `solve` then does the
/// rest.
#[pyclass(module = "tendon._native")]
pub(crate) struct PosePlan {
    rig: Py<Rig>,
    goals: Vec<CoreGoal>,
    /// Caller indices of the bones the goals may turn.
    moving: Vec<usize>,
    /// Caller index -> row in Blender's pose bones.
    pose_rows: Vec<usize>,
    /// Per goal: its chain (caller indices, effector first) and whether its tail counts.
    chains: Vec<(Vec<usize>, bool)>,
    /// `foreach_get("rotation_mode")`'s integers and the modes they stand for.
    modes: Vec<(i32, RotationMode)>,
    basis: Vec<f32>,
    evaluated: Vec<f32>,
    world: Vec<Affine3A>,
    scratch: Vec<f32>,
}

#[pymethods]
impl PosePlan {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        rig: Py<Rig>,
        goals: Vec<PyRef<'_, Goal>>,
        moving: Vec<usize>,
        pose_rows: Vec<usize>,
        chains: Vec<Vec<usize>>,
        use_tail: Vec<bool>,
        modes: HashMap<i32, String>,
    ) -> PyResult<PosePlan> {
        let modes = modes
            .into_iter()
            .map(|(code, name)| {
                RotationMode::from_blender(&name)
                    .map(|mode| (code, mode))
                    .ok_or_else(|| {
                        ShapeError::new_err(format!("modes: '{name}' is not a rotation mode"))
                    })
            })
            .collect::<PyResult<_>>()?;
        let (n, resolved) = {
            let core = &rig.borrow(py).rig;
            let mut resolved = Vec::with_capacity(goals.len());
            for (k, goal) in goals.iter().enumerate() {
                resolved.push(goal.resolve(core, k)?);
            }
            (core.len(), resolved)
        };
        if chains.len() != goals.len() || use_tail.len() != goals.len() {
            return Err(ShapeError::new_err(format!(
                "chains and use_tail need one entry per goal ({}), not {} and {}",
                goals.len(),
                chains.len(),
                use_tail.len()
            )));
        }
        if pose_rows.len() != n {
            return Err(ShapeError::new_err(format!(
                "pose_rows needs one row per bone ({n}), not {}",
                pose_rows.len()
            )));
        }
        let mut seen = vec![false; n];
        for &row in &pose_rows {
            if row >= n || std::mem::replace(&mut seen[row], true) {
                return Err(BoneIndexError::new_err(format!(
                    "pose_rows: row {row} is out of range or repeated (a permutation of 0..{n} is needed)"
                )));
            }
        }
        let out_of_range = |what: &str, bone: usize| {
            BoneIndexError::new_err(format!(
                "{what}: index {bone} is out of range for a rig of {n} bones"
            ))
        };
        if let Some(&bad) = moving.iter().find(|&&bone| bone >= n) {
            return Err(out_of_range("moving", bad));
        }
        if let Some(&bad) = chains.iter().flatten().find(|&&bone| bone >= n) {
            return Err(out_of_range("chains", bad));
        }
        Ok(PosePlan {
            rig,
            goals: resolved,
            moving,
            pose_rows,
            chains: chains.into_iter().zip(use_tail).collect(),
            modes,
            basis: Vec::new(),
            evaluated: Vec::new(),
            world: Vec::new(),
            scratch: Vec::new(),
        })
    }

    /// Solves the planned goals with `solver` towards `targets` ((goals, 3), armature
    /// space; `rotation_targets` (goals, 4) w-first and `poles` (goals, 3) replace those
    /// of the goals that have them), from the pose Blender shows: `basis` and `evaluated`
    /// are every pose bone's `matrix_basis` and `matrix`, (n, 16) column-major in pose-bone
    /// order, as `foreach_get` gives them. The moving bones start from their channels
    /// (`basis`), every other bone where Blender shows it.
    ///
    /// Returns None, solving nothing, when the start needs a closer look: a moving bone not
    /// where its channels put it (rotations apart by more than `mismatch`, a quaternion
    /// component) or some bone's channel scale at most `collapsed` on an axis. Otherwise
    /// `(changed, reached, residual, iterations, tolerances)`: the moving bones whose
    /// rotation changed by more than `unchanged` (caller indices), the solver's report,
    /// and per goal the distance
    /// within which its effector counts as reached in Blender's pose: `relative` times the
    /// length of its chain in the evaluated pose.
    ///
    /// The changed rotations are written as channels of each bone's rotation mode
    /// (`rotation_modes`: every pose bone's, as `foreach_get` gives them) nearest the
    /// channels there, into the rows of the pose bones' channel arrays given: `quaternions`
    /// ((n, 4) `rotation_quaternion`), `eulers` ((n, 3) `rotation_euler`), `axis_angles`
    /// ((n, 4) `rotation_axis_angle`), ready for `foreach_set`. The arrays the changed
    /// bones' modes need must be given.
    #[pyo3(signature = (solver, basis, evaluated, targets, *, rotation_targets = None, poles = None, relative, mismatch, collapsed, unchanged, rotation_modes, quaternions = None, eulers = None, axis_angles = None))]
    #[allow(clippy::too_many_arguments)]
    fn solve<'py>(
        &mut self,
        py: Python<'py>,
        solver: &mut Solver,
        basis: &Bound<'py, PyAny>,
        evaluated: &Bound<'py, PyAny>,
        targets: &Bound<'py, PyAny>,
        rotation_targets: Option<&Bound<'py, PyAny>>,
        poles: Option<&Bound<'py, PyAny>>,
        relative: f32,
        mismatch: f32,
        collapsed: f32,
        unchanged: f32,
        rotation_modes: &Bound<'py, PyAny>,
        quaternions: Option<&Bound<'py, PyAny>>,
        eulers: Option<&Bound<'py, PyAny>>,
        axis_angles: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let rig_ref = self.rig.borrow(py);
        let rig = &rig_ref.rig;
        let n = rig.len();
        let k = self.goals.len();
        read_f32(basis, "basis", &[n, 16], &mut self.basis)?;
        read_f32(evaluated, "evaluated", &[n, 16], &mut self.evaluated)?;
        ensure_finite_array(&self.basis, "basis")?;
        ensure_finite_array(&self.evaluated, "evaluated")?;
        let row = |flat: &[f32], caller: usize| {
            let at = self.pose_rows[caller] * 16;
            Mat4::from_cols_slice(&flat[at..at + 16])
        };
        // Any channel scale flattening a bone: the checked path names the bones it affects.
        for caller in 0..n {
            let basis = row(&self.basis, caller);
            let shortest = [basis.x_axis, basis.y_axis, basis.z_axis]
                .map(|axis| axis.truncate().length())
                .into_iter()
                .fold(f32::INFINITY, f32::min);
            if shortest <= collapsed {
                return Ok(None);
            }
        }
        self.world.clear();
        self.world.resize(n, Affine3A::IDENTITY);
        for caller in 0..n {
            self.world[rig.to_dfs(caller)] = Affine3A::from_mat4(row(&self.evaluated, caller));
        }
        let start = &mut solver.start;
        rig.pose_from_world(&self.world, start);
        for &caller in &self.moving {
            let (scale, rotation, translation) =
                row(&self.basis, caller).to_scale_rotation_translation();
            let dfs = rig.to_dfs(caller);
            let shown = start.rotations[dfs];
            let apart = largest_difference(shown, rotation);
            let opposite = largest_difference(shown, -rotation);
            if apart.min(opposite) > mismatch {
                return Ok(None);
            }
            start.rotations[dfs] = rotation;
            start.translations[dfs] = translation;
            start.scales[dfs] = scale;
        }
        read_f32(targets, "targets", &[k, 3], &mut self.scratch)?;
        ensure_finite_array(&self.scratch, "targets")?;
        solver.goals.clear();
        for (goal, point) in self.goals.iter().zip(self.scratch.chunks_exact(3)) {
            solver.goals.push(CoreGoal {
                target: vec3(point),
                ..*goal
            });
        }
        if let Some(r) = rotation_targets {
            read_f32(r, "rotation_targets", &[k, 4], &mut self.scratch)?;
            ensure_finite_array(&self.scratch, "rotation_targets")?;
            for (goal, q) in solver.goals.iter_mut().zip(self.scratch.chunks_exact(4)) {
                if goal.rotation.is_some() {
                    goal.rotation = Some(quat_wxyz(q));
                }
            }
        }
        if let Some(p) = poles {
            read_f32(p, "poles", &[k, 3], &mut self.scratch)?;
            ensure_finite_array(&self.scratch, "poles")?;
            for (goal, point) in solver.goals.iter_mut().zip(self.scratch.chunks_exact(3)) {
                if goal.pole.is_some() {
                    goal.pole = Some(vec3(point));
                }
            }
        }
        let (core, start, out, goals) = (
            &mut solver.solver,
            &solver.start,
            &mut solver.out,
            &solver.goals,
        );
        let report = py.detach(|| guarded(|| core.solve_into(rig, start, goals, out)))?;
        let (mut changed, mut rotations) = (Vec::new(), Vec::new());
        for &caller in &self.moving {
            let dfs = rig.to_dfs(caller);
            let (before, after) = (solver.start.rotations[dfs], solver.out.rotations[dfs]);
            if !after.is_finite() {
                return Err(NonFiniteError::new_err(format!(
                    "the solver produced a non-finite rotation for bone '{}'",
                    rig.name(dfs)
                )));
            }
            if largest_difference(after, before) > unchanged {
                changed.push(caller as i64);
                rotations.extend_from_slice(&[after.w, after.x, after.y, after.z]);
            }
        }
        if !changed.is_empty() {
            self.write_channels(
                py,
                &changed,
                &rotations,
                rotation_modes,
                [quaternions, eulers, axis_angles],
            )?;
        }
        let tolerances: Vec<f64> = self
            .chains
            .iter()
            .map(|(chain, use_tail)| {
                let head = |caller: usize| {
                    let at = self.pose_rows[caller] * 16;
                    Vec3::from_slice(&self.evaluated[at + 12..at + 15])
                };
                let mut reach: f32 = chain
                    .windows(2)
                    .map(|pair| head(pair[0]).distance(head(pair[1])))
                    .sum();
                if *use_tail {
                    let effector = chain[0];
                    let at = self.pose_rows[effector] * 16;
                    let axis = Vec3::from_slice(&self.evaluated[at + 4..at + 7]);
                    reach += axis.length() * rig.length(rig.to_dfs(effector));
                }
                f64::from(relative) * f64::from(reach).max(1e-9)
            })
            .collect();
        // Lists, not arrays: a handful of values each, which Python reads faster this way.
        let result = (
            changed,
            report.reached,
            report.residual,
            report.iterations,
            tolerances,
        );
        Ok(Some(result.into_pyobject(py)?.into_any()))
    }
}

impl PosePlan {
    /// Writes `rotations` ((k, 4) w-first) of the `changed` bones (caller indices) into the
    /// channel arrays of their modes (`arrays`: quaternions, eulers, axis angles).
    fn write_channels(
        &self,
        py: Python<'_>,
        changed: &[i64],
        rotations: &[f32],
        rotation_modes: &Bound<'_, PyAny>,
        arrays: [Option<&Bound<'_, PyAny>>; 3],
    ) -> PyResult<()> {
        let n = self.pose_rows.len();
        let codes = PyBuffer::<i32>::get(rotation_modes)
            .map_err(|e| ShapeError::new_err(format!("rotation_modes must be int32: {e}")))?;
        if codes.item_count() != n {
            return Err(ShapeError::new_err(format!(
                "rotation_modes has {} values, expected {n}",
                codes.item_count()
            )));
        }
        let codes = codes.to_vec(py)?;
        const NAMES: [&str; 3] = ["quaternions", "eulers", "axis_angles"];
        let mut channels: [Vec<f32>; 3] = Default::default();
        let mut touched = [false; 3];
        for (k, &caller) in changed.iter().enumerate() {
            let row = self.pose_rows[caller as usize];
            let code = codes[row];
            let mode = self
                .modes
                .iter()
                .find(|(c, _)| *c == code)
                .map(|&(_, mode)| mode)
                .ok_or_else(|| {
                    ShapeError::new_err(format!("rotation_modes: {code} is not a known mode"))
                })?;
            let (kind, width) = match mode {
                RotationMode::Quaternion => (0, 4),
                RotationMode::Euler(_) => (1, 3),
                RotationMode::AxisAngle => (2, 4),
            };
            let array = arrays[kind].ok_or_else(|| {
                ShapeError::new_err(format!(
                    "{}: needed for a bone in {mode:?} mode",
                    NAMES[kind]
                ))
            })?;
            if !touched[kind] {
                read_f32(array, NAMES[kind], &[n, width], &mut channels[kind])?;
                touched[kind] = true;
            }
            let values = &mut channels[kind][row * width..row * width + width];
            let mut previous = [0.0f32; 4];
            previous[..width].copy_from_slice(values);
            let written = mode.channels(
                quat_wxyz(&rotations[k * 4..k * 4 + 4]),
                previous.iter().all(|v| v.is_finite()).then_some(previous),
            );
            values.copy_from_slice(&written[..width]);
        }
        for kind in 0..3 {
            if let (true, Some(array)) = (touched[kind], arrays[kind]) {
                PyBuffer::<f32>::get(array)?.copy_from_slice(py, &channels[kind])?;
            }
        }
        Ok(())
    }
}

/// The largest difference between two quaternions' components.
fn largest_difference(a: Quat, b: Quat) -> f32 {
    (Vec4::from(a) - Vec4::from(b)).abs().max_element()
}
