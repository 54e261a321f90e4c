//! The `PosePlan` class: one armature's goals planned once, solved again and again straight
//! from the matrices Blender's pose bones give in bulk (the add-on's repeated solves and
//! live mode), so a solve is one native call between one bulk read and one bulk write.

use crate::arrays::{ensure_finite_array, quat_wxyz, read_f32, vec3};
use crate::errors::{guarded, BoneIndexError, NonFiniteError, ShapeError, SolverError};
use crate::goal::Goal;
use crate::rig::Rig;
use crate::solver::Solver;
use glam::{Affine3A, Mat4, Quat, Vec3, Vec4};
use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::collections::HashMap;
use tendon_core::{Goal as CoreGoal, RotationMode, Solver as _};

/// One armature's goals planned for repeated solves from Blender's pose: `goals` (their
/// targets are replaced on every solve), the bones they may turn (`moving`, caller indices
/// of `rig`), `pose_rows` (for each caller index, its row in the armature's pose bones, as
/// `foreach_get` orders them) and, per goal, its chain (caller indices, effector first) and
/// whether its tail counts, to measure how far each chain reaches in the pose Blender
/// shows; `modes` maps the integers `foreach_get("rotation_mode")` gives to Blender's
/// names of the rotation modes; `unit_parents` (caller indices) are bones that must show
/// no scale (axes of unit length within `scale_tolerance`) for a solve, such as the parents
/// of moving bones that inherit scale in a way the rig does not model. Build it once for a
/// set of goals; `solve` then does the rest.
#[pyclass(module = "tendon._native")]
pub(crate) struct PosePlan {
    rig: Py<Rig>,
    goals: Vec<CoreGoal>,
    /// Caller indices of the bones the goals may turn.
    moving: Vec<usize>,
    /// Depth-first indices of the moving bones, the chains' bones and every bone above
    /// them, parents first: the bones whose start a solve needs.
    relevant: Vec<usize>,
    /// Caller index -> row in Blender's pose bones.
    pose_rows: Vec<usize>,
    /// Per goal: its chain (caller indices, effector first) and whether its tail counts.
    chains: Vec<(Vec<usize>, bool)>,
    /// `foreach_get("rotation_mode")`'s integers and the modes they stand for.
    modes: Vec<(i32, RotationMode)>,
    /// Caller indices of bones whose evaluated axes must be of unit length (within
    /// `scale_tolerance`) for the plan to solve: parents whose scale a moving bone inherits
    /// in a way the rig does not model.
    unit_parents: Vec<usize>,
    scale_tolerance: f32,
    evaluated: Vec<f32>,
    /// Every pose bone's rotation mode code, and the rotation channel arrays (`KINDS`).
    codes: Vec<i32>,
    channels: [Vec<f32>; 3],
    world: Vec<Affine3A>,
    scratch: Vec<f32>,
}

#[pymethods]
impl PosePlan {
    #[new]
    #[pyo3(signature = (rig, goals, moving, pose_rows, chains, use_tail, modes, *, unit_parents = Vec::new(), scale_tolerance = 1e-5))]
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
        unit_parents: Vec<usize>,
        scale_tolerance: f32,
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
        let (n, resolved, relevant) = {
            let core = &rig.borrow(py).rig;
            let mut resolved = Vec::with_capacity(goals.len());
            for (k, goal) in goals.iter().enumerate() {
                resolved.push(goal.resolve(core, k)?);
            }
            // The moving bones, every chain's bones (a head effector's own bone does not move,
            // yet places its head) and everything above them.
            let mut wanted = vec![false; core.len()];
            let seeds = moving.iter().chain(chains.iter().flatten());
            for &caller in seeds.filter(|&&bone| bone < core.len()) {
                let mut bone = Some(core.to_dfs(caller));
                while let Some(b) = bone.filter(|&b| !wanted[b]) {
                    wanted[b] = true;
                    bone = core.parent(b);
                }
            }
            let relevant = (0..core.len()).filter(|&b| wanted[b]).collect::<Vec<_>>();
            (core.len(), resolved, relevant)
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
        if let Some(empty) = chains.iter().position(Vec::is_empty) {
            return Err(ShapeError::new_err(format!(
                "chains: the chain of goal {empty} is empty (it starts with the effector bone)"
            )));
        }
        if let Some(&bad) = unit_parents.iter().find(|&&bone| bone >= n) {
            return Err(out_of_range("unit_parents", bad));
        }
        Ok(PosePlan {
            rig,
            goals: resolved,
            moving,
            relevant,
            pose_rows,
            chains: chains.into_iter().zip(use_tail).collect(),
            modes,
            unit_parents,
            scale_tolerance,
            evaluated: Vec::new(),
            codes: Vec::new(),
            channels: Default::default(),
            world: Vec::new(),
            scratch: Vec::new(),
        })
    }

    /// Solves the planned goals with `solver` towards `targets` ((goals, 3), or a flat list
    /// of 3 numbers per goal, armature space; `rotation_targets` (goals, 4) w-first and
    /// `poles` (goals, 3) replace those of the goals that have them), from the pose Blender
    /// shows, given as `foreach_get`
    /// gives it, in pose-bone order: `evaluated`, every pose bone's `matrix` ((n, 16)
    /// column-major), `rotation_modes` (n integers) and the rotation channels of the modes
    /// the moving bones are in, `quaternions` ((n, 4) `rotation_quaternion`), `eulers`
    /// ((n, 3) `rotation_euler`), `axis_angles` ((n, 4) `rotation_axis_angle`). The moving
    /// bones start from their rotation channels; they, the chains' other bones and every
    /// bone above them where Blender shows them (the others at rest: no goal sees them).
    ///
    /// Returns None, solving nothing, when the start needs a closer look: a moving bone not
    /// where its channels put it (rotations apart by more than `mismatch`, a quaternion
    /// component), a moving bone or one above them shown with an axis at most `collapsed`
    /// long, or a bone of `unit_parents` scaled. Otherwise
    /// `(changed, reached, residual, iterations, tolerances)`: the moving bones whose
    /// rotation changed by more than `unchanged` (caller indices), the solver's report,
    /// and per goal the distance within which its effector counts as reached in Blender's
    /// pose: `relative` times the length of its chain in the evaluated pose. The changed
    /// bones' new rotations are written into the rotation channel arrays, in each bone's
    /// mode and nearest its channels there, ready for `foreach_set`.
    #[pyo3(signature = (solver, evaluated, targets, *, rotation_targets = None, poles = None, relative, mismatch, collapsed, unchanged, rotation_modes, quaternions = None, eulers = None, axis_angles = None))]
    #[allow(clippy::too_many_arguments)]
    fn solve<'py>(
        &mut self,
        py: Python<'py>,
        solver: &Solver,
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
        for (name, value) in [
            ("relative", relative),
            ("mismatch", mismatch),
            ("collapsed", collapsed),
            ("unchanged", unchanged),
        ] {
            // Each is a distance or an angle: a negative or NaN one would make every check
            // pass or fail silently.
            let least = if name == "relative" {
                "above 0"
            } else {
                "of 0 or more"
            };
            let message = format!("{name} must be a finite number {least}, not {value}");
            if !value.is_finite() {
                return Err(NonFiniteError::new_err(message));
            }
            if value < 0.0 || (name == "relative" && value == 0.0) {
                return Err(SolverError::new_err(message));
            }
        }
        let mut solver_state = solver.lock(py);
        let solver = &mut *solver_state;
        let rig_handle = self.rig.clone_ref(py);
        let rig_ref = rig_handle.borrow(py);
        let rig = &rig_ref.rig;
        let n = rig.len();
        let k = self.goals.len();
        read_f32(evaluated, "evaluated", &[n, 16], &mut self.evaluated)?;
        ensure_finite_array(&self.evaluated, "evaluated")?;
        // A scaled parent whose scale a moving bone inherits other than fully: the checked
        // path looks at it.
        for &parent in &self.unit_parents {
            let at = self.pose_rows[parent] * 16;
            let axes = &self.evaluated[at..at + 12];
            if (0..3).any(|c| {
                let axis = Vec3::from_slice(&axes[c * 4..c * 4 + 3]);
                (axis.length() - 1.0).abs() > self.scale_tolerance
            }) {
                return Ok(None);
            }
        }
        self.read_modes(py, rotation_modes)?;
        // The channel arrays the moving bones' modes use are written back in place: refuse,
        // before any work, one that cannot be (a float64 array, a list, a read-only view),
        // naming it.
        let mut used = [false; 3];
        for &caller in &self.moving {
            let code = self.codes[self.pose_rows[caller]];
            if let Some(&(_, mode)) = self.modes.iter().find(|(c, _)| *c == code) {
                used[kind_of(mode)] = true;
            }
        }
        for (kind, array) in [quaternions, eulers, axis_angles].iter().enumerate() {
            if let (true, Some(array)) = (used[kind], array) {
                let name = KINDS[kind].0;
                let refused = |why: String| {
                    ShapeError::new_err(format!(
                        "{name} must be a writable float32 array (the new rotations are written into it): {why}"
                    ))
                };
                let buffer = PyBuffer::<f32>::get(array).map_err(|e| refused(e.to_string()))?;
                if buffer.readonly() {
                    return Err(refused("it is read-only".into()));
                }
            }
        }
        let arrays = [quaternions, eulers, axis_angles];
        for (kind, array) in arrays.iter().enumerate() {
            match array {
                Some(array) => {
                    read_f32(
                        array,
                        KINDS[kind].0,
                        &[n, KINDS[kind].1],
                        &mut self.channels[kind],
                    )?;
                }
                None => self.channels[kind].clear(),
            }
        }
        self.world.clear();
        self.world.resize(n, Affine3A::IDENTITY);
        for &dfs in &self.relevant {
            let at = self.pose_rows[rig.to_caller(dfs)] * 16;
            let matrix = Mat4::from_cols_slice(&self.evaluated[at..at + 16]);
            // A bone flattened (a scale of zero here or above): the checked path names it.
            if [matrix.x_axis, matrix.y_axis, matrix.z_axis]
                .iter()
                .any(|axis| axis.truncate().length() <= collapsed)
            {
                return Ok(None);
            }
            self.world[dfs] = Affine3A::from_mat4(matrix);
        }
        let start = &mut solver.start;
        start.reset(n);
        rig.pose_from_world_of(&self.world, &self.relevant, start);
        for &caller in &self.moving {
            let row = self.pose_rows[caller];
            let (mode, values) = self.channel_row(row)?;
            let rotation = mode.to_quat(values);
            let dfs = rig.to_dfs(caller);
            let shown = start.rotations[dfs];
            // A rotation the channels cannot give (a zero quaternion): the checked path.
            if !rotation.is_finite()
                || largest_difference(shown, rotation).min(largest_difference(shown, -rotation))
                    > mismatch
            {
                return Ok(None);
            }
            start.rotations[dfs] = rotation;
        }
        read_points(targets, k, &mut self.scratch)?;
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
        let mut changed = Vec::new();
        let mut touched = [false; 3];
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
                changed.push(caller);
                let row = self.pose_rows[caller];
                let (mode, previous) = self.channel_row(row)?;
                let kind = kind_of(mode);
                let width = KINDS[kind].1;
                let written = mode.channels(
                    after,
                    previous.iter().all(|v| v.is_finite()).then_some(previous),
                );
                self.channels[kind][row * width..row * width + width]
                    .copy_from_slice(&written[..width]);
                touched[kind] = true;
            }
        }
        for (kind, array) in arrays.iter().enumerate() {
            if let (true, Some(array)) = (touched[kind], array) {
                PyBuffer::<f32>::get(array)?.copy_from_slice(py, &self.channels[kind])?;
            }
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

/// The goals' target points into `out`: (goals, 3) numbers (any array or nested list), or
/// a flat list of 3 per goal (what Python builds fastest).
fn read_points(targets: &Bound<'_, PyAny>, goals: usize, out: &mut Vec<f32>) -> PyResult<()> {
    if let Ok(list) = targets.cast::<PyList>() {
        let flat = list.len() == goals * 3 && !list.is_empty();
        if flat && list.iter().all(|value| value.extract::<f32>().is_ok()) {
            out.clear();
            out.extend(
                list.iter()
                    .map(|value| value.extract::<f32>().unwrap_or(f32::NAN)),
            );
            return Ok(());
        }
    }
    read_f32(targets, "targets", &[goals, 3], out).map(|_| ())
}

/// The rotation channel arrays `PosePlan.solve` takes: argument name and width.
const KINDS: [(&str, usize); 3] = [("quaternions", 4), ("eulers", 3), ("axis_angles", 4)];

/// Which of `KINDS` holds the channels of `mode`.
fn kind_of(mode: RotationMode) -> usize {
    match mode {
        RotationMode::Quaternion => 0,
        RotationMode::Euler(_) => 1,
        RotationMode::AxisAngle => 2,
    }
}

impl PosePlan {
    /// Reads every pose bone's rotation mode code into `self.codes`.
    fn read_modes(&mut self, py: Python<'_>, rotation_modes: &Bound<'_, PyAny>) -> PyResult<()> {
        let n = self.pose_rows.len();
        // int32 arrays are read as they are; lists and other integer arrays converted.
        let converted;
        let source = match PyBuffer::<i32>::get(rotation_modes) {
            Ok(_) => rotation_modes,
            Err(_) => {
                converted = py
                    .import("numpy")?
                    .call_method1("array", (rotation_modes, "int32"))
                    .map_err(|e| {
                        ShapeError::new_err(format!("rotation_modes must be integers: {e}"))
                    })?;
                &converted
            }
        };
        let codes = PyBuffer::<i32>::get(source)
            .map_err(|e| ShapeError::new_err(format!("rotation_modes must be int32: {e}")))?;
        if codes.item_count() != n {
            return Err(ShapeError::new_err(format!(
                "rotation_modes has {} values, expected {n}",
                codes.item_count()
            )));
        }
        self.codes.resize(n, 0);
        codes.copy_to_slice(py, &mut self.codes)?;
        Ok(())
    }

    /// The rotation mode of pose row `row` and its channels (the array of its mode must
    /// have been given).
    fn channel_row(&self, row: usize) -> PyResult<(RotationMode, [f32; 4])> {
        let code = self.codes[row];
        let mode = self
            .modes
            .iter()
            .find(|(c, _)| *c == code)
            .map(|&(_, mode)| mode)
            .ok_or_else(|| {
                ShapeError::new_err(format!("rotation_modes: {code} is not a known mode"))
            })?;
        let kind = kind_of(mode);
        let (name, width) = KINDS[kind];
        let channels = &self.channels[kind];
        if channels.is_empty() {
            return Err(ShapeError::new_err(format!(
                "{name}: needed for a bone in {mode:?} mode"
            )));
        }
        let mut values = [0.0f32; 4];
        values[..width].copy_from_slice(&channels[row * width..row * width + width]);
        Ok((mode, values))
    }
}

/// The largest difference between two quaternions' components.
fn largest_difference(a: Quat, b: Quat) -> f32 {
    (Vec4::from(a) - Vec4::from(b)).abs().max_element()
}
