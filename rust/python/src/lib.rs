//! Python bindings of `tendon-core`: the `tendon._native` module.
//!
//! Thin by design: shape and dtype checks, conversion between numpy float32 arrays (in the
//! caller's bone order, quaternions w-first as Blender has them) and the core's types, the
//! GIL released around every solve, and one mapping from core errors (and panics) to the
//! `tendon.TendonError` family. Defaults come from the core's `Default` impls.

use glam::{Mat4, Quat, Vec3};
use pyo3::buffer::{Element, PyBuffer};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use pyo3::IntoPyObjectExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use tendon_core::batch::{self, FrameInput};
use tendon_core::{
    distribute_scale as core_distribute_scale, AnySolver, EffectorPoint, EulerOrder,
    Goal as CoreGoal, JointLimits, Pose, Rig as CoreRig, RigDesc, RotationMode, ScaleLimits,
    SolveReport, Solver as _, SolverConfig, SphereCollider, SpringChain, SpringParams,
    SpringSimulation as CoreSpringSimulation, TendonError as CoreError,
};

create_exception!(
    tendon._native,
    TendonError,
    PyValueError,
    "Any error Tendon reports: a ValueError."
);
create_exception!(
    tendon._native,
    RigError,
    TendonError,
    "The rig description is invalid."
);
create_exception!(
    tendon._native,
    LimitError,
    TendonError,
    "A joint limit is invalid."
);
create_exception!(
    tendon._native,
    ShapeError,
    TendonError,
    "An array has the wrong shape, size or type."
);
create_exception!(
    tendon._native,
    NonFiniteError,
    TendonError,
    "A number is NaN or infinite."
);
create_exception!(
    tendon._native,
    BoneIndexError,
    TendonError,
    "A bone index or name does not exist."
);
create_exception!(
    tendon._native,
    SolverError,
    TendonError,
    "A solver or its settings are invalid."
);
create_exception!(
    tendon._native,
    InternalError,
    TendonError,
    "A bug in Tendon (please report it)."
);

/// The one place core errors become Python exceptions.
fn to_py(err: CoreError) -> PyErr {
    let message = err.to_string();
    match err {
        CoreError::EmptyRig
        | CoreError::DuplicateBone(_)
        | CoreError::UnknownParent { .. }
        | CoreError::Cycle { .. }
        | CoreError::Json(_) => RigError::new_err(message),
        CoreError::InvalidLimit { .. } => LimitError::new_err(message),
        CoreError::NonFinite { .. } => NonFiniteError::new_err(message),
        CoreError::BoneIndex { .. } => BoneIndexError::new_err(message),
        CoreError::Size { .. } => ShapeError::new_err(message),
        _ => TendonError::new_err(message),
    }
}

/// Runs `f`, turning a panic into `InternalError` so none crosses into Python otherwise.
fn guarded<T>(f: impl FnOnce() -> Result<T, CoreError>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result.map_err(to_py),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(InternalError::new_err(format!(
                "internal error in Tendon: {what}"
            )))
        }
    }
}

/// Shape pattern entry matching any length.
const ANY: usize = usize::MAX;

/// Reads a float32 array of the given shape (`ANY` matches any length) into `out` and
/// returns its shape. Contiguous float32 buffers are read directly; anything else numpy
/// can turn into float32 (float64, lists, strided views) is converted first.
fn read_f32(
    obj: &Bound<'_, PyAny>,
    what: &str,
    shape: &[usize],
    out: &mut Vec<f32>,
) -> PyResult<Vec<usize>> {
    let py = obj.py();
    let buffer = match PyBuffer::<f32>::get(obj) {
        Ok(buffer) => buffer,
        Err(_) => {
            // numpy would quietly drop imaginary parts and parse strings: refuse them.
            if let Ok(kind) = obj.getattr("dtype").and_then(|d| d.getattr("kind")) {
                let kind: String = kind.extract()?;
                if !matches!(kind.as_str(), "f" | "i" | "u" | "b") {
                    return Err(ShapeError::new_err(format!(
                        "{what} must hold real numbers, not numpy dtype kind '{kind}'"
                    )));
                }
            }
            let numpy = py.import("numpy")?;
            let converted = numpy
                .call_method1("ascontiguousarray", (obj, "float32"))
                .map_err(|e| {
                    ShapeError::new_err(format!(
                        "{what} must be an array of numbers with shape {}: {e}",
                        pattern(shape)
                    ))
                })?;
            PyBuffer::<f32>::get(&converted)?
        }
    };
    let got = buffer.shape().to_vec();
    let fits = got.len() == shape.len() && got.iter().zip(shape).all(|(g, s)| *s == ANY || g == s);
    if !fits {
        return Err(ShapeError::new_err(format!(
            "{what} has shape {}, expected {}",
            pattern(&got),
            pattern(shape)
        )));
    }
    out.resize(buffer.item_count(), 0.0);
    let copied = buffer.copy_to_slice(py, out);
    copied?;
    Ok(got)
}

fn pattern(shape: &[usize]) -> String {
    let parts: Vec<String> = shape
        .iter()
        .map(|&s| {
            if s == ANY {
                "n".to_string()
            } else {
                s.to_string()
            }
        })
        .collect();
    format!("({})", parts.join(", "))
}

/// A new float32 numpy array of `shape` holding `data`.
fn new_array<'py>(py: Python<'py>, shape: &[usize], data: &[f32]) -> PyResult<Bound<'py, PyAny>> {
    new_typed(py, shape, "float32", data)
}

/// A new numpy array of `shape` and `dtype` (matching `T`) holding `data`.
fn new_typed<'py, T: Element + Copy>(
    py: Python<'py>,
    shape: &[usize],
    dtype: &str,
    data: &[T],
) -> PyResult<Bound<'py, PyAny>> {
    let array = py
        .import("numpy")?
        .call_method1("empty", (PyTuple::new(py, shape)?, dtype))?;
    PyBuffer::<T>::get(&array)?.copy_from_slice(py, data)?;
    Ok(array)
}

fn vec3(values: &[f32]) -> Vec3 {
    Vec3::new(values[0], values[1], values[2])
}

/// Blender's (w, x, y, z) to glam.
fn quat_wxyz(v: &[f32]) -> Quat {
    Quat::from_xyzw(v[1], v[2], v[3], v[0])
}

/// An armature: bones in depth-first order inside, in your order at this interface.
///
/// Arrays given to and returned by a rig's methods list bones in the order the rig was
/// described (the "caller order"); `dfs_order` shows the order solvers work in.
#[pyclass(module = "tendon._native", frozen)]
struct Rig {
    rig: CoreRig,
}

#[pymethods]
impl Rig {
    /// A rig from its JSON description (the format `to_json` writes).
    #[staticmethod]
    fn from_json(text: &str) -> PyResult<Rig> {
        guarded(|| CoreRig::from_json(text)).map(|rig| Rig { rig })
    }

    /// A rig from arrays: bone names, parent indices (-1 for a root), armature-space rest
    /// matrices (n, 4, 4) as Blender's `Bone.matrix_local` gives them (row-major: the
    /// translation in the last column), and bone lengths (n,). `limits` optionally maps
    /// bone names to joint limits in the JSON form of the rig description.
    #[staticmethod]
    #[pyo3(signature = (names, parents, rest_matrices, lengths, limits = None))]
    fn from_arrays(
        names: Vec<String>,
        parents: Vec<i64>,
        rest_matrices: &Bound<'_, PyAny>,
        lengths: &Bound<'_, PyAny>,
        limits: Option<&str>,
    ) -> PyResult<Rig> {
        let n = names.len();
        let mut matrices = Vec::new();
        read_f32(rest_matrices, "rest_matrices", &[n, 4, 4], &mut matrices)?;
        let mut bone_lengths = Vec::new();
        read_f32(lengths, "lengths", &[n], &mut bone_lengths)?;
        if parents.len() != n {
            return Err(ShapeError::new_err(format!(
                "parents has {} entries, expected {n}",
                parents.len()
            )));
        }
        let mut parent_index = Vec::with_capacity(n);
        for (i, &p) in parents.iter().enumerate() {
            parent_index.push(match p {
                -1 => None,
                p if p >= 0 && (p as usize) < n => Some(p as usize),
                p => {
                    return Err(BoneIndexError::new_err(format!(
                        "parent of bone '{}' is {p}: not -1 and not an index below {n}",
                        names[i]
                    )))
                }
            });
        }
        // Row-major 4x4 to glam's column-major.
        let mats: Vec<Mat4> = matrices
            .chunks_exact(16)
            .map(|m| Mat4::from_cols_slice(m).transpose())
            .collect();
        let limits: Option<std::collections::HashMap<String, JointLimits>> = match limits {
            None => None,
            Some(text) => Some(serde_json::from_str(text).map_err(|e| {
                LimitError::new_err(format!("limits must map bone names to limits: {e}"))
            })?),
        };
        guarded(|| {
            let mut desc =
                RigDesc::from_armature_matrices(&names, &parent_index, &mats, &bone_lengths)?;
            if let Some(limits) = &limits {
                for (name, limit) in limits {
                    let bone =
                        desc.bones
                            .iter_mut()
                            .find(|b| &b.name == name)
                            .ok_or_else(|| CoreError::InvalidValue {
                                what: "limits".into(),
                                reason: format!("there is no bone '{name}'"),
                            })?;
                    bone.limits = *limit;
                }
            }
            desc.build()
        })
        .map(|rig| Rig { rig })
    }

    /// The rig's JSON description (bones in the caller's order).
    fn to_json(&self) -> String {
        self.rig.to_desc().to_json()
    }

    fn __len__(&self) -> usize {
        self.rig.len()
    }

    fn __repr__(&self) -> String {
        format!("Rig({} bones, root '{}')", self.rig.len(), self.rig.name(0))
    }

    /// Pickling goes through the JSON description.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, (String,))> {
        let from_json = slf.get_type().getattr("from_json")?;
        Ok((from_json, (slf.get().to_json(),)))
    }

    /// Bone names, in the caller's order.
    #[getter]
    fn names(&self) -> Vec<String> {
        (0..self.rig.len())
            .map(|c| self.rig.name(self.rig.to_dfs(c)).to_string())
            .collect()
    }

    /// Parent of each bone as a caller index, -1 for roots.
    #[getter]
    fn parents(&self) -> Vec<i64> {
        (0..self.rig.len())
            .map(|c| match self.rig.parent(self.rig.to_dfs(c)) {
                Some(p) => self.rig.to_caller(p) as i64,
                None => -1,
            })
            .collect()
    }

    /// The depth-first order solvers work in: the caller index of each position.
    #[getter]
    fn dfs_order(&self) -> Vec<usize> {
        self.rig.caller_from_dfs().to_vec()
    }

    /// The caller index of the bone called `name`.
    fn index(&self, name: &str) -> PyResult<usize> {
        self.rig
            .index_of(name)
            .map(|dfs| self.rig.to_caller(dfs))
            .ok_or_else(|| BoneIndexError::new_err(format!("there is no bone '{name}'")))
    }

    /// The rest pose's rotations: (n, 4) float32 identity quaternions, w first.
    fn rest_rotations<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let data: Vec<f32> = (0..self.rig.len())
            .flat_map(|_| [1.0, 0.0, 0.0, 0.0])
            .collect();
        new_array(py, &[self.rig.len(), 4], &data)
    }

    /// Armature-space matrices (n, 4, 4), row-major, of the pose given by local rotations
    /// (n, 4) w-first and optional translations and scales (n, 3), all relative to rest.
    #[pyo3(signature = (rotations, translations = None, scales = None))]
    fn forward_kinematics<'py>(
        &self,
        py: Python<'py>,
        rotations: &Bound<'py, PyAny>,
        translations: Option<&Bound<'py, PyAny>>,
        scales: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut pose = Pose::rest(self.rig.len());
        let mut scratch = Vec::new();
        read_pose(
            &self.rig,
            rotations,
            translations,
            scales,
            &mut pose,
            &mut scratch,
        )?;
        let world = guarded(|| {
            pose.validate(&self.rig)?;
            Ok(self.rig.world_matrices(&pose))
        })?;
        let mut data = Vec::with_capacity(16 * self.rig.len());
        for caller in 0..self.rig.len() {
            let m = Mat4::from(world[self.rig.to_dfs(caller)]).transpose();
            data.extend_from_slice(&m.to_cols_array());
        }
        new_array(py, &[self.rig.len(), 4, 4], &data)
    }

    /// The pose (rotations (n, 4) w first, translations and scales (n, 3), relative to
    /// rest, caller order) that puts the bones at the armature-space matrices (n, 4, 4):
    /// row-major, or column-major as Blender's `foreach_get("matrix", ...)` gives them when
    /// `column_major`. Reading the pose Blender evaluated (constraints, drivers,
    /// inheritance options) this way makes solvers start from where the bones really are.
    #[pyo3(signature = (matrices, column_major = false))]
    #[allow(clippy::type_complexity)]
    fn pose_from_world<'py>(
        &self,
        py: Python<'py>,
        matrices: &Bound<'py, PyAny>,
        column_major: bool,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let n = self.rig.len();
        let mut values = Vec::new();
        read_f32(matrices, "matrices", &[n, 4, 4], &mut values)?;
        ensure_finite_array(&values, "matrices")?;
        let mut world = vec![glam::Affine3A::IDENTITY; n];
        for (caller, m) in values.chunks_exact(16).enumerate() {
            let mut matrix = Mat4::from_cols_slice(m);
            if !column_major {
                matrix = matrix.transpose();
            }
            world[self.rig.to_dfs(caller)] = glam::Affine3A::from_mat4(matrix);
        }
        let mut pose = Pose::rest(n);
        self.rig.pose_from_world(&world, &mut pose);
        let caller = pose.to_caller_order(&self.rig);
        let rotations: Vec<f32> = caller
            .rotations
            .iter()
            .flat_map(|q| [q.w, q.x, q.y, q.z])
            .collect();
        let translations: Vec<f32> = caller
            .translations
            .iter()
            .flat_map(|v| v.to_array())
            .collect();
        let scales: Vec<f32> = caller.scales.iter().flat_map(|v| v.to_array()).collect();
        Ok((
            new_array(py, &[n, 4], &rotations)?,
            new_array(py, &[n, 3], &translations)?,
            new_array(py, &[n, 3], &scales)?,
        ))
    }
}

/// Reads a pose in the caller's order into `pose` (depth-first order).
fn read_pose(
    rig: &CoreRig,
    rotations: &Bound<'_, PyAny>,
    translations: Option<&Bound<'_, PyAny>>,
    scales: Option<&Bound<'_, PyAny>>,
    pose: &mut Pose,
    scratch: &mut Vec<f32>,
) -> PyResult<()> {
    let n = rig.len();
    pose.reset(n);
    read_f32(rotations, "rotations", &[n, 4], scratch)?;
    for (caller, q) in scratch.chunks_exact(4).enumerate() {
        pose.rotations[rig.to_dfs(caller)] = quat_wxyz(q);
    }
    if let Some(t) = translations {
        read_f32(t, "translations", &[n, 3], scratch)?;
        for (caller, v) in scratch.chunks_exact(3).enumerate() {
            pose.translations[rig.to_dfs(caller)] = vec3(v);
        }
    }
    if let Some(s) = scales {
        read_f32(s, "scales", &[n, 3], scratch)?;
        for (caller, v) in scratch.chunks_exact(3).enumerate() {
            pose.scales[rig.to_dfs(caller)] = vec3(v);
        }
    }
    Ok(())
}

/// Which bone a goal names: by caller index or by name.
#[derive(Clone, Debug)]
enum BoneRef {
    Index(usize),
    Name(String),
}

/// One IK goal. `bone` is a bone name or caller index; `target` and `pole` are
/// armature-space positions; `rotation` an armature-space (w, x, y, z) quaternion;
/// `point` is "tail" (default) or "head"; `chain_length` 0 means up to the root.
#[pyclass(module = "tendon._native", frozen)]
#[derive(Clone)]
struct Goal {
    bone_ref: BoneRef,
    goal: CoreGoal,
}

#[pymethods]
impl Goal {
    #[new]
    #[pyo3(signature = (bone, target, *, rotation = None, rotation_weight = 1.0, weight = 1.0, chain_length = 0, pole = None, point = "tail", pole_angle = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        bone: &Bound<'_, PyAny>,
        target: &Bound<'_, PyAny>,
        rotation: Option<&Bound<'_, PyAny>>,
        rotation_weight: f32,
        weight: f32,
        chain_length: usize,
        pole: Option<&Bound<'_, PyAny>>,
        point: &str,
        pole_angle: Option<f32>,
    ) -> PyResult<Goal> {
        let bone_ref = if let Ok(name) = bone.extract::<String>() {
            BoneRef::Name(name)
        } else if let Ok(index) = bone.extract::<usize>() {
            BoneRef::Index(index)
        } else {
            return Err(BoneIndexError::new_err(
                "bone must be a bone name or a non-negative index",
            ));
        };
        let mut scratch = Vec::new();
        read_f32(target, "target", &[3], &mut scratch)?;
        let mut goal = CoreGoal::new(0, vec3(&scratch));
        if let Some(r) = rotation {
            read_f32(r, "rotation", &[4], &mut scratch)?;
            goal = goal.with_rotation(quat_wxyz(&scratch), rotation_weight);
        }
        goal.rotation_weight = rotation_weight;
        goal.weight = weight;
        goal.chain_length = chain_length;
        if let Some(p) = pole {
            read_f32(p, "pole", &[3], &mut scratch)?;
            goal.pole = Some(vec3(&scratch));
        }
        goal.pole_angle = pole_angle;
        goal.point = match point {
            "tail" => EffectorPoint::Tail,
            "head" => EffectorPoint::Head,
            other => {
                return Err(TendonError::new_err(format!(
                    "point must be 'tail' or 'head', not '{other}'"
                )))
            }
        };
        Ok(Goal { bone_ref, goal })
    }

    /// The bone, as given (a name or a caller index).
    #[getter]
    fn bone<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match &self.bone_ref {
            BoneRef::Index(i) => i.into_bound_py_any(py),
            BoneRef::Name(n) => n.into_bound_py_any(py),
        }
    }

    /// The target position.
    #[getter]
    fn target(&self) -> (f32, f32, f32) {
        self.goal.target.into()
    }

    /// The target rotation (w, x, y, z), or None.
    #[getter]
    fn rotation(&self) -> Option<(f32, f32, f32, f32)> {
        self.goal.rotation.map(|q| (q.w, q.x, q.y, q.z))
    }

    /// How much the rotation counts.
    #[getter]
    fn rotation_weight(&self) -> f32 {
        self.goal.rotation_weight
    }

    /// How much the goal counts.
    #[getter]
    fn weight(&self) -> f32 {
        self.goal.weight
    }

    /// Bones the goal may move, counting its own; 0 up to the root.
    #[getter]
    fn chain_length(&self) -> usize {
        self.goal.chain_length
    }

    /// The pole position, or None.
    #[getter]
    fn pole(&self) -> Option<(f32, f32, f32)> {
        self.goal.pole.map(Into::into)
    }

    /// Blender-style pole angle in radians (the root bone's X axis turned about its Y axis
    /// aims at the pole), or None: the chain's bend aims at the pole.
    #[getter]
    fn pole_angle(&self) -> Option<f32> {
        self.goal.pole_angle
    }

    /// "tail" or "head".
    #[getter]
    fn point(&self) -> &'static str {
        match self.goal.point {
            EffectorPoint::Tail => "tail",
            EffectorPoint::Head => "head",
        }
    }

    fn __repr__(&self) -> String {
        let bone = match &self.bone_ref {
            BoneRef::Index(i) => i.to_string(),
            BoneRef::Name(n) => format!("'{n}'"),
        };
        let t = self.goal.target;
        format!("Goal({bone}, ({}, {}, {}))", t.x, t.y, t.z)
    }
}

impl Goal {
    /// The core goal with its bone resolved to a depth-first index.
    fn resolve(&self, rig: &CoreRig, position: usize) -> PyResult<CoreGoal> {
        let dfs = match &self.bone_ref {
            BoneRef::Name(name) => rig.index_of(name).ok_or_else(|| {
                BoneIndexError::new_err(format!("goal {position}: there is no bone '{name}'"))
            })?,
            BoneRef::Index(i) if *i < rig.len() => rig.to_dfs(*i),
            BoneRef::Index(i) => {
                return Err(BoneIndexError::new_err(format!(
                    "goal {position}: bone index {i} is out of range for a rig of {} bones",
                    rig.len()
                )))
            }
        };
        Ok(CoreGoal {
            bone: dfs,
            ..self.goal
        })
    }
}

/// What a solve reached: local rotations (n, 4) w-first in the caller's order, and the
/// report.
#[pyclass(module = "tendon._native", name = "Result", frozen)]
struct SolveResult {
    #[pyo3(get)]
    rotations: Py<PyAny>,
    /// (n, 3) local translations: the start pose's, except a root moved by `move_root`.
    #[pyo3(get)]
    translations: Py<PyAny>,
    #[pyo3(get)]
    iterations: u32,
    #[pyo3(get)]
    residual: f32,
    #[pyo3(get)]
    rotation_residual: f32,
    #[pyo3(get)]
    reached: bool,
}

#[pymethods]
impl SolveResult {
    fn __repr__(&self) -> String {
        format!(
            "Result(reached={}, iterations={}, residual={:e}, rotation_residual={:e})",
            if self.reached { "True" } else { "False" },
            self.iterations,
            self.residual,
            self.rotation_residual
        )
    }
}

/// What a frame range reached: rotations (frames, n, 4) and per-frame reports.
#[pyclass(module = "tendon._native", frozen)]
struct FramesResult {
    #[pyo3(get)]
    rotations: Py<PyAny>,
    /// (frames, n, 3) local translations (a root moved by `move_root` differs).
    #[pyo3(get)]
    translations: Py<PyAny>,
    #[pyo3(get)]
    iterations: Py<PyAny>,
    #[pyo3(get)]
    residual: Py<PyAny>,
    #[pyo3(get)]
    reached: Py<PyAny>,
}

/// A solver with its settings and its own memory (reuse it: solving again allocates
/// nothing in the core). `Solver("fabrik", max_iterations=50)`; names are
/// `Solver.names()`, defaults `Solver.defaults(name)`.
#[pyclass(module = "tendon._native")]
struct Solver {
    config: SolverConfig,
    solver: AnySolver,
    goals: Vec<CoreGoal>,
    start: Pose,
    out: Pose,
    scratch: Vec<f32>,
    frames: FrameData,
}

fn config_json(config: &SolverConfig) -> serde_json::Value {
    serde_json::to_value(config).expect("solver settings always serialise")
}

#[pymethods]
impl Solver {
    #[new]
    #[pyo3(signature = (name = "fabrik", **params))]
    fn new(name: &str, params: Option<&Bound<'_, PyDict>>) -> PyResult<Solver> {
        let defaults =
            SolverConfig::by_name(name).map_err(|e| SolverError::new_err(e.to_string()))?;
        let mut json = config_json(&defaults);
        if let Some(params) = params {
            let object = json.as_object_mut().expect("a tagged object");
            for (key, value) in params.iter() {
                let key: String = key.extract()?;
                if key == "solver" || !object.contains_key(&key) {
                    let mut known: Vec<&String> =
                        object.keys().filter(|k| *k != "solver").collect();
                    known.sort();
                    return Err(SolverError::new_err(format!(
                        "{name} has no setting '{key}'; its settings are {}",
                        known
                            .iter()
                            .map(|k| k.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
                let value = if let Ok(b) = value.extract::<bool>() {
                    serde_json::Value::from(b)
                } else if let Ok(i) = value.extract::<i64>() {
                    serde_json::Value::from(i)
                } else if let Ok(f) = value.extract::<f64>() {
                    serde_json::Value::from(f)
                } else if let Ok(text) = value.extract::<String>() {
                    serde_json::Value::from(text)
                } else {
                    return Err(SolverError::new_err(format!(
                        "setting '{key}' must be a number, a bool or a name"
                    )));
                };
                // Each setting on its own over the defaults, so a bad one is named.
                let mut alone = config_json(&defaults);
                alone[&key] = value.clone();
                if let Err(e) = serde_json::from_value::<SolverConfig>(alone) {
                    return Err(SolverError::new_err(format!(
                        "{name} setting '{key}' = {value}: {e}"
                    )));
                }
                object.insert(key, value);
            }
        }
        let config: SolverConfig = serde_json::from_value(json)
            .map_err(|e| SolverError::new_err(format!("invalid settings for {name}: {e}")))?;
        Ok(Solver {
            config,
            solver: config.build(),
            goals: Vec::new(),
            start: Pose::rest(0),
            out: Pose::rest(0),
            scratch: Vec::new(),
            frames: FrameData::default(),
        })
    }

    /// The solvers' names.
    #[staticmethod]
    fn names() -> Vec<&'static str> {
        SolverConfig::NAMES.to_vec()
    }

    /// The default settings of the solver called `name`.
    #[staticmethod]
    fn defaults<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let config =
            SolverConfig::by_name(name).map_err(|e| SolverError::new_err(e.to_string()))?;
        settings_dict(py, &config)
    }

    /// This solver's name.
    #[getter]
    fn name(&self) -> &'static str {
        self.config.name()
    }

    /// This solver's settings.
    #[getter]
    fn settings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        settings_dict(py, &self.config)
    }

    fn __repr__(&self) -> String {
        format!("Solver('{}')", self.config.name())
    }

    /// Stores the pose the tension solver's `reference="pose"` relaxes towards: local
    /// `rotations` (n, 4) w-first in the caller's bone order of `rig`; None forgets it.
    #[pyo3(signature = (rig, rotations = None))]
    fn set_reference_pose(
        &mut self,
        rig: &Rig,
        rotations: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let AnySolver::Tension(tension) = &mut self.solver else {
            return Err(SolverError::new_err(format!(
                "only the tension solver has a reference pose, not {}",
                self.config.name()
            )));
        };
        let pose = match rotations {
            None => None,
            Some(rotations) => {
                let mut pose = Pose::rest(0);
                read_pose(
                    &rig.rig,
                    rotations,
                    None,
                    None,
                    &mut pose,
                    &mut self.scratch,
                )?;
                Some(pose)
            }
        };
        tension.set_reference_pose(pose);
        Ok(())
    }

    /// Solves `goals` from the pose given by local `rotations` (n, 4) w-first (the rest
    /// pose when None) and optional `translations` and `scales` (n, 3), in the caller's
    /// bone order. The GIL is released while solving.
    #[pyo3(signature = (rig, goals, rotations = None, translations = None, scales = None))]
    fn solve<'py>(
        &mut self,
        py: Python<'py>,
        rig: &Rig,
        goals: Vec<PyRef<'py, Goal>>,
        rotations: Option<&Bound<'py, PyAny>>,
        translations: Option<&Bound<'py, PyAny>>,
        scales: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<SolveResult> {
        let rig = &rig.rig;
        self.prepare(rig, &goals, rotations, translations, scales)?;
        let (solver, start, out, goals) =
            (&mut self.solver, &self.start, &mut self.out, &self.goals);
        let report = py.detach(|| guarded(|| solver.solve_into(rig, start, goals, out)))?;
        let mut data = std::mem::take(&mut self.scratch);
        data.resize(rig.len() * 4, 0.0);
        write_rotations(rig, &self.out, &mut data);
        let rotations = new_array(py, &[rig.len(), 4], &data)?;
        data.resize(rig.len() * 3, 0.0);
        write_translations(rig, &self.out, &mut data);
        let translations = new_array(py, &[rig.len(), 3], &data)?;
        self.scratch = data;
        Ok(SolveResult {
            rotations: rotations.unbind(),
            translations: translations.unbind(),
            iterations: report.iterations,
            residual: report.residual,
            rotation_residual: report.rotation_residual,
            reached: report.reached,
        })
    }

    /// Solves a frame range in one call: `targets` (frames, goals, 3) replaces each goal's
    /// target frame by frame. The start pose is one pose ((n, 4) rotations, (n, 3)
    /// translations and scales) or one per frame ((frames, n, 4) and (frames, n, 3): the
    /// animated pose). With `warm`, the bones the previous frame's solve turned start from
    /// that solution (path-dependent, fast) and the others from the frame's pose; otherwise
    /// every frame starts from its pose. `rotation_targets` (frames, goals, 4) and `poles`
    /// (frames, goals, 3) move the rotation targets and poles of the goals that have them.
    #[pyo3(signature = (rig, goals, targets, rotations = None, translations = None, scales = None, warm = true, *, rotation_targets = None, poles = None))]
    #[allow(clippy::too_many_arguments)]
    fn solve_frames<'py>(
        &mut self,
        py: Python<'py>,
        rig: &Rig,
        goals: Vec<PyRef<'py, Goal>>,
        targets: &Bound<'py, PyAny>,
        rotations: Option<&Bound<'py, PyAny>>,
        translations: Option<&Bound<'py, PyAny>>,
        scales: Option<&Bound<'py, PyAny>>,
        warm: bool,
        rotation_targets: Option<&Bound<'py, PyAny>>,
        poles: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<FramesResult> {
        let rig = &rig.rig;
        let frames = self.prepare_frames(
            rig,
            &goals,
            targets,
            FrameInputs {
                rotations,
                translations,
                scales,
                rotation_targets,
                poles,
            },
        )?;
        let n = rig.len();
        let mut reports = vec![SolveReport::default(); frames];
        // The result array itself is the output buffer: no zeroed copy to fill and copy over.
        let rotations = py
            .import("numpy")?
            .call_method1("empty", ((frames, n, 4), "float32"))?;
        let buffer = PyBuffer::<f32>::get(&rotations)?;
        // SAFETY: `rotations` is a C-contiguous float32 array of frames * n * 4 items that
        // was just created here and is referenced nowhere else until it is returned;
        // `buffer` keeps its memory alive and in place while the GIL is released.
        let rotations_out = unsafe {
            std::slice::from_raw_parts_mut(buffer.buf_ptr().cast::<f32>(), frames * n * 4)
        };
        let mut translations_out = vec![0.0f32; frames * n * 3];
        let (solver, start, goals, data) =
            (&mut self.solver, &self.start, &mut self.goals, &self.frames);
        py.detach(|| {
            guarded(|| {
                run_frames(
                    solver,
                    rig,
                    start,
                    goals,
                    data,
                    warm,
                    rotations_out,
                    &mut translations_out,
                    &mut reports,
                )
            })
        })?;
        drop(buffer);
        Ok(FramesResult {
            rotations: rotations.unbind(),
            translations: new_array(py, &[frames, n, 3], &translations_out)?.unbind(),
            iterations: new_typed(
                py,
                &[frames],
                "int32",
                &column(&reports, |r| r.iterations as i32),
            )?
            .unbind(),
            residual: new_array(py, &[frames], &column(&reports, |r| r.residual))?.unbind(),
            // numpy's bool is one byte: fill it as uint8, then view it as bool.
            reached: new_typed(
                py,
                &[frames],
                "uint8",
                &column(&reports, |r| r.reached as u8),
            )?
            .call_method1("view", ("bool",))?
            .unbind(),
        })
    }

    /// Mean seconds of one native solve of `goals` from the given pose, timed inside the
    /// core over `repeats` solves (for benchmarks: Python's overhead is the difference).
    #[pyo3(signature = (rig, goals, repeats, rotations = None))]
    fn _time_native<'py>(
        &mut self,
        py: Python<'py>,
        rig: &Rig,
        goals: Vec<PyRef<'py, Goal>>,
        repeats: u32,
        rotations: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<f64> {
        let rig = &rig.rig;
        self.prepare(rig, &goals, rotations, None, None)?;
        let (solver, start, out, goals) =
            (&mut self.solver, &self.start, &mut self.out, &self.goals);
        py.detach(|| {
            guarded(|| {
                let clock = std::time::Instant::now();
                for _ in 0..repeats.max(1) {
                    solver.solve_into(rig, start, goals, out)?;
                }
                Ok(clock.elapsed().as_secs_f64() / repeats.max(1) as f64)
            })
        })
    }

    /// Mean seconds of the native part of `solve_frames` (see `_time_native`).
    #[pyo3(signature = (rig, goals, targets, repeats, warm = true))]
    fn _time_native_frames<'py>(
        &mut self,
        py: Python<'py>,
        rig: &Rig,
        goals: Vec<PyRef<'py, Goal>>,
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
        let frames = self.prepare_frames(rig, &goals, targets, inputs)?;
        let mut rotations = vec![0.0f32; frames * rig.len() * 4];
        let mut translations = vec![0.0f32; frames * rig.len() * 3];
        let mut reports = vec![SolveReport::default(); frames];
        let (solver, start, goals, data) =
            (&mut self.solver, &self.start, &mut self.goals, &self.frames);
        py.detach(|| {
            guarded(|| {
                let clock = std::time::Instant::now();
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
}

impl Solver {
    /// Reads a frame range's inputs into `self.frames` (and the start pose and goals);
    /// returns the number of frames.
    fn prepare_frames(
        &mut self,
        rig: &CoreRig,
        goals: &[PyRef<'_, Goal>],
        targets: &Bound<'_, PyAny>,
        inputs: FrameInputs<'_, '_>,
    ) -> PyResult<usize> {
        // The pose and goals first: `prepare` borrows all of `self`.
        let per_frame = match inputs.rotations {
            Some(r) => ndim(r)? == 3,
            None => false,
        };
        if per_frame {
            self.prepare(rig, goals, None, None, None)?;
        } else {
            self.prepare(
                rig,
                goals,
                inputs.rotations,
                inputs.translations,
                inputs.scales,
            )?;
        }
        let k = goals.len();
        let data = &mut self.frames;
        let frames = read_f32(targets, "targets", &[ANY, k, 3], &mut data.targets)?[0];
        data.per_frame_pose = per_frame;
        if per_frame {
            let n = rig.len();
            let rotations = inputs.rotations.expect("per-frame poses have rotations");
            read_f32(rotations, "rotations", &[frames, n, 4], &mut data.rotations)?;
            read_frame_vectors(
                inputs.translations,
                "translations",
                [frames, n],
                0.0,
                &mut data.translations,
            )?;
            read_frame_vectors(inputs.scales, "scales", [frames, n], 1.0, &mut data.scales)?;
        }
        data.rotation_targets.clear();
        if let Some(r) = inputs.rotation_targets {
            read_f32(
                r,
                "rotation_targets",
                &[frames, k, 4],
                &mut data.rotation_targets,
            )?;
        }
        data.poles.clear();
        if let Some(p) = inputs.poles {
            read_f32(p, "poles", &[frames, k, 3], &mut data.poles)?;
        }
        Ok(frames)
    }

    /// Reads the start pose and resolves the goals into this solver's reusable memory.
    fn prepare(
        &mut self,
        rig: &CoreRig,
        goals: &[PyRef<'_, Goal>],
        rotations: Option<&Bound<'_, PyAny>>,
        translations: Option<&Bound<'_, PyAny>>,
        scales: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        match rotations {
            Some(r) => read_pose(
                rig,
                r,
                translations,
                scales,
                &mut self.start,
                &mut self.scratch,
            )?,
            None => {
                self.start.reset(rig.len());
                if translations.is_some() || scales.is_some() {
                    return Err(ShapeError::new_err(
                        "translations and scales need rotations too",
                    ));
                }
            }
        }
        self.goals.clear();
        for (k, goal) in goals.iter().enumerate() {
            self.goals.push(goal.resolve(rig, k)?);
        }
        Ok(())
    }
}

/// The optional per-frame inputs of `Solver.solve_frames`.
struct FrameInputs<'a, 'py> {
    rotations: Option<&'a Bound<'py, PyAny>>,
    translations: Option<&'a Bound<'py, PyAny>>,
    scales: Option<&'a Bound<'py, PyAny>>,
    rotation_targets: Option<&'a Bound<'py, PyAny>>,
    poles: Option<&'a Bound<'py, PyAny>>,
}

/// A frame range's inputs, flat, in the caller's order (kept to reuse the memory).
#[derive(Default)]
struct FrameData {
    /// frames x goals x 3.
    targets: Vec<f32>,
    /// Whether the start pose is given per frame (below) or once (`Solver::start`).
    per_frame_pose: bool,
    /// frames x bones x 4 (w first), x 3, x 3.
    rotations: Vec<f32>,
    translations: Vec<f32>,
    scales: Vec<f32>,
    /// frames x goals x 4 (w first) or empty.
    rotation_targets: Vec<f32>,
    /// frames x goals x 3 or empty.
    poles: Vec<f32>,
}

fn ndim(array: &Bound<'_, PyAny>) -> PyResult<usize> {
    match array.getattr("ndim") {
        Ok(ndim) => ndim.extract(),
        // Nested lists: numpy tells.
        Err(_) => array
            .py()
            .import("numpy")?
            .call_method1("ndim", (array,))?
            .extract(),
    }
}

/// Per-frame (frames, n, 3) vectors, or `fill` everywhere when not given.
fn read_frame_vectors(
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
struct FrameArrays<'a> {
    data: &'a FrameData,
    frames: usize,
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
        for caller in 0..n {
            let i = rig.to_dfs(caller);
            let (r, v) = ((frame * n + caller) * 4, (frame * n + caller) * 3);
            pose.rotations[i] = quat_wxyz(&data.rotations[r..r + 4]);
            pose.translations[i] = vec3(&data.translations[v..v + 3]);
            pose.scales[i] = vec3(&data.scales[v..v + 3]);
        }
    }
}

/// Solves each frame of `data` through the core's frame driver, writing rotations
/// (frames x bones x 4, w-first, caller order), translations and reports.
#[allow(clippy::too_many_arguments)]
fn run_frames(
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
    batch::solve_frames(
        solver,
        rig,
        start,
        goals,
        &input,
        warm,
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

/// One field of every frame's report.
fn column<T>(reports: &[SolveReport], field: impl Fn(&SolveReport) -> T) -> Vec<T> {
    reports.iter().map(field).collect()
}

/// A pose's translations in the caller's order into `out` (3 floats a bone).
fn write_translations(rig: &CoreRig, pose: &Pose, out: &mut [f32]) {
    for (caller, slot) in out.chunks_exact_mut(3).enumerate() {
        slot.copy_from_slice(&pose.translations[rig.to_dfs(caller)].to_array());
    }
}

/// A pose's rotations, w-first, in the caller's order, into `out` (4 floats a bone).
fn write_rotations(rig: &CoreRig, pose: &Pose, out: &mut [f32]) {
    for (caller, slot) in out.chunks_exact_mut(4).enumerate() {
        let q = pose.rotations[rig.to_dfs(caller)];
        slot.copy_from_slice(&[q.w, q.x, q.y, q.z]);
    }
}

fn settings_dict<'py>(py: Python<'py>, config: &SolverConfig) -> PyResult<Bound<'py, PyAny>> {
    // Straight from the f32 settings (through a JSON value they would gain f64 noise).
    let text = serde_json::to_string(config).expect("settings serialise");
    let dict = py.import("json")?.call_method1("loads", (text,))?;
    dict.del_item("solver")?;
    Ok(dict)
}

/// Blender's six Euler rotation orders ("XYZ", ...), as joint limits and rotation channels
/// name them, the default first.
#[pyfunction]
fn euler_orders() -> Vec<String> {
    EulerOrder::ALL
        .iter()
        .map(|order| {
            let name = serde_json::to_value(order).expect("an Euler order serialises");
            name.as_str().expect("as its name").to_owned()
        })
        .collect()
}

/// The limits of a joint nobody limited, as a dict shaped like one bone's entry in the
/// limits JSON: Euler order, free axes, tension per axis and side, roll.
#[pyfunction]
fn default_limits(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let text = serde_json::to_string(&JointLimits::default()).expect("limits serialise");
    py.import("json")?.call_method1("loads", (text,))
}

/// Panics inside the guard, so tests can check a panic arrives as `InternalError`.
#[pyfunction]
fn _test_panic() -> PyResult<()> {
    guarded(|| -> std::result::Result<(), CoreError> { panic!("deliberate panic for the tests") })
}

/// Rotations `(n, 4)` (w, x, y, z) as Blender channels of `mode` ("QUATERNION",
/// "AXIS_ANGLE" or an Euler order such as "XYZ"): `(n, 4)` or `(n, 3)` float32. Each row is
/// chosen nearest `previous` (same shape) when given; with `series`, each row is nearest
/// the row before it (the first nearest `previous[0]`), as keys along a timeline need.
#[pyfunction]
#[pyo3(signature = (rotations, mode, previous = None, series = false))]
fn rotation_channels<'py>(
    py: Python<'py>,
    rotations: &Bound<'py, PyAny>,
    mode: &str,
    previous: Option<&Bound<'py, PyAny>>,
    series: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let mode = RotationMode::from_blender(mode).ok_or_else(|| {
        TendonError::new_err(format!(
            "mode must be QUATERNION, AXIS_ANGLE or an Euler order (XYZ, XZY, YXZ, YZX, ZXY, ZYX), not '{mode}'"
        ))
    })?;
    let mut quats = Vec::new();
    let shape = read_f32(rotations, "rotations", &[ANY, 4], &mut quats)?;
    let n = shape[0];
    let k = mode.channel_count();
    let mut before = Vec::new();
    if let Some(p) = previous {
        let rows = if series { 1 } else { n };
        let got = read_f32(p, "previous", &[ANY, k], &mut before)?;
        if got[0] != rows && !(series && got[0] == n) {
            return Err(ShapeError::new_err(format!(
                "previous has {} rows, expected {rows}",
                got[0]
            )));
        }
        ensure_finite_array(&before, "previous")?;
    }
    ensure_finite_array(&quats, "rotations")?;
    let mut out = vec![0.0f32; n * k];
    let mut last: Option<[f32; 4]> = None;
    for i in 0..n {
        let q = &quats[i * 4..i * 4 + 4];
        let rotation = quat_wxyz(q);
        if rotation.length_squared() < 1e-12 {
            return Err(NonFiniteError::new_err(format!(
                "rotation {i} is zero: not a rotation"
            )));
        }
        let from_previous = |row: usize| {
            let mut c = [0.0f32; 4];
            c[..k].copy_from_slice(&before[row * k..row * k + k]);
            c
        };
        let near = if series {
            last.or_else(|| (!before.is_empty()).then(|| from_previous(0)))
        } else {
            (!before.is_empty()).then(|| from_previous(i))
        };
        let c = mode.channels(rotation, near);
        out[i * k..i * k + k].copy_from_slice(&c[..k]);
        last = Some(c);
    }
    new_array(py, &[n, k], &out)
}

/// Splits `(n, 4, 4)` matrices (row-major, or column-major as Blender's `foreach_get`
/// gives them when `column_major`) into rotations `(n, 4)` (w first), translations
/// `(n, 3)` and scales `(n, 3)`, all float32.
#[pyfunction]
#[pyo3(signature = (matrices, column_major = false))]
#[allow(clippy::type_complexity)]
fn matrices_to_transforms<'py>(
    py: Python<'py>,
    matrices: &Bound<'py, PyAny>,
    column_major: bool,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let mut values = Vec::new();
    let shape = read_f32(matrices, "matrices", &[ANY, 4, 4], &mut values)?;
    ensure_finite_array(&values, "matrices")?;
    let n = shape[0];
    let (mut rotations, mut translations, mut scales) = (
        Vec::with_capacity(n * 4),
        Vec::with_capacity(n * 3),
        Vec::with_capacity(n * 3),
    );
    for m in values.chunks_exact(16) {
        let mut matrix = Mat4::from_cols_slice(m);
        if !column_major {
            matrix = matrix.transpose();
        }
        let (scale, rotation, translation) = matrix.to_scale_rotation_translation();
        rotations.extend([rotation.w, rotation.x, rotation.y, rotation.z]);
        translations.extend(translation.to_array());
        scales.extend(scale.to_array());
    }
    Ok((
        new_array(py, &[n, 4], &rotations)?,
        new_array(py, &[n, 3], &translations)?,
        new_array(py, &[n, 3], &scales)?,
    ))
}

fn ensure_finite_array(values: &[f32], what: &str) -> PyResult<()> {
    match values.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(i) => Err(NonFiniteError::new_err(format!(
            "{what} holds a non-finite value ({}) at flat index {i}",
            values[i]
        ))),
    }
}

/// A bone given by name or caller index, as a depth-first index.
fn bone_index(rig: &CoreRig, bone: &Bound<'_, PyAny>, what: &str) -> PyResult<usize> {
    if let Ok(name) = bone.extract::<String>() {
        return rig
            .index_of(&name)
            .ok_or_else(|| BoneIndexError::new_err(format!("{what}: there is no bone '{name}'")));
    }
    match bone.extract::<usize>() {
        Ok(i) if i < rig.len() => Ok(rig.to_dfs(i)),
        Ok(i) => Err(BoneIndexError::new_err(format!(
            "{what}: bone index {i} is out of range for a rig of {} bones",
            rig.len()
        ))),
        Err(_) => Err(BoneIndexError::new_err(format!(
            "{what}: a bone is a name or a non-negative index"
        ))),
    }
}

/// A collider as Python gives it: (bone, centre in the bone's frame, radius).
type ColliderArgs<'py> = (Bound<'py, PyAny>, (f32, f32, f32), f32);

/// Secondary motion: mass-spring (Verlet) chains simulated frame by frame.
///
/// `chains` lists `(tip bone, chain length)` pairs (0: up to the root), optionally with a
/// third item, the masses of the chain's bones root-most first; `colliders` lists
/// `(bone, centre in the bone's frame, radius)` spheres. Settings are keywords (see
/// `SpringSimulation.defaults()`). Poses are given and returned in the rig's bone order.
#[pyclass(module = "tendon._native", name = "SpringSimulation")]
struct SpringSimulation {
    rig: CoreRig,
    sim: CoreSpringSimulation,
    pose: Pose,
    out: Pose,
    scratch: Vec<f32>,
}

#[pymethods]
impl SpringSimulation {
    #[new]
    #[pyo3(signature = (rig, chains, colliders = None, **settings))]
    fn new(
        rig: &Rig,
        chains: Vec<Bound<'_, PyAny>>,
        colliders: Option<Vec<ColliderArgs<'_>>>,
        settings: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<SpringSimulation> {
        let core_rig = rig.rig.clone();
        let mut spring_chains = Vec::new();
        for (k, item) in chains.iter().enumerate() {
            let what = format!("spring chain {k}");
            let parts: Vec<Bound<'_, PyAny>> = item.extract().map_err(|_| {
                TendonError::new_err(format!("{what} must be (tip bone, chain length[, masses])"))
            })?;
            if !(2..=3).contains(&parts.len()) {
                return Err(TendonError::new_err(format!(
                    "{what} must be (tip bone, chain length[, masses])"
                )));
            }
            let tip = bone_index(&core_rig, &parts[0], &what)?;
            let length: usize = parts[1].extract()?;
            let mut chain = SpringChain::new(&core_rig, tip, length).map_err(to_py)?;
            if let Some(masses) = parts.get(2) {
                chain = chain.with_masses(masses.extract()?);
            }
            spring_chains.push(chain);
        }
        let mut spheres = Vec::new();
        for (k, (bone, centre, radius)) in colliders.unwrap_or_default().iter().enumerate() {
            spheres.push(SphereCollider {
                bone: bone_index(&core_rig, bone, &format!("collider {k}"))?,
                center: Vec3::from(*centre),
                radius: *radius,
            });
        }
        let mut params = serde_json::to_value(SpringParams::default()).expect("settings serialise");
        if let Some(settings) = settings {
            for (key, value) in settings.iter() {
                let key: String = key.extract()?;
                if params.get(&key).is_none() {
                    return Err(SolverError::new_err(format!(
                        "unknown spring setting '{key}'; known: gravity, damping, stiffness, iterations, time_step, max_step"
                    )));
                }
                let value = if key == "gravity" {
                    let g: (f32, f32, f32) = value.extract()?;
                    serde_json::json!([g.0, g.1, g.2])
                } else if key == "iterations" {
                    serde_json::json!(value.extract::<u32>()?)
                } else {
                    serde_json::json!(value.extract::<f32>()?)
                };
                params[&key] = value;
            }
        }
        let params: SpringParams = serde_json::from_value(params)
            .map_err(|e| SolverError::new_err(format!("spring settings: {e}")))?;
        let n = core_rig.len();
        let sim = guarded(|| CoreSpringSimulation::new(&core_rig, spring_chains, spheres, params))?;
        Ok(SpringSimulation {
            rig: core_rig,
            sim,
            pose: Pose::rest(n),
            out: Pose::rest(n),
            scratch: Vec::new(),
        })
    }

    /// The default settings.
    #[staticmethod]
    fn defaults<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let text = serde_json::to_string(&SpringParams::default()).expect("settings serialise");
        py.import("json")?.call_method1("loads", (text,))
    }

    /// Restarts at rest (no motion) from the pose given: rotations (n, 4) w-first, and
    /// optional translations and scales (n, 3).
    #[pyo3(signature = (rotations, translations = None, scales = None))]
    fn reset(
        &mut self,
        rotations: &Bound<'_, PyAny>,
        translations: Option<&Bound<'_, PyAny>>,
        scales: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        read_pose(
            &self.rig,
            rotations,
            translations,
            scales,
            &mut self.pose,
            &mut self.scratch,
        )?;
        let (sim, rig, pose) = (&mut self.sim, &self.rig, &self.pose);
        guarded(|| sim.reset(rig, pose))
    }

    /// Advances `dt` seconds to the animated pose given; returns the pose's rotations with
    /// the chains' bones turned, (n, 4) w-first.
    #[pyo3(signature = (dt, rotations, translations = None, scales = None))]
    fn advance<'py>(
        &mut self,
        py: Python<'py>,
        dt: f32,
        rotations: &Bound<'py, PyAny>,
        translations: Option<&Bound<'py, PyAny>>,
        scales: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        read_pose(
            &self.rig,
            rotations,
            translations,
            scales,
            &mut self.pose,
            &mut self.scratch,
        )?;
        let (sim, rig, pose, out) = (&mut self.sim, &self.rig, &self.pose, &mut self.out);
        guarded(|| sim.advance(rig, pose, dt, out))?;
        let mut data = vec![0.0f32; rig.len() * 4];
        write_rotations(rig, &self.out, &mut data);
        new_array(py, &[rig.len(), 4], &data)
    }

    /// Simulates a frame range in one call: animated poses (frames, n, 4) rotations and
    /// optional (frames, n, 3) translations and scales, `dt` seconds apart. Restarts at
    /// the first frame unless `reset` is false. Returns (frames, n, 4) rotations.
    #[pyo3(signature = (rotations, dt, translations = None, scales = None, reset = true))]
    fn simulate<'py>(
        &mut self,
        py: Python<'py>,
        rotations: &Bound<'py, PyAny>,
        dt: f32,
        translations: Option<&Bound<'py, PyAny>>,
        scales: Option<&Bound<'py, PyAny>>,
        reset: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let n = self.rig.len();
        let mut data = FrameData::default();
        let frames = read_f32(rotations, "rotations", &[ANY, n, 4], &mut data.rotations)?[0];
        read_frame_vectors(
            translations,
            "translations",
            [frames, n],
            0.0,
            &mut data.translations,
        )?;
        read_frame_vectors(scales, "scales", [frames, n], 1.0, &mut data.scales)?;
        let mut result = vec![0.0f32; frames * n * 4];
        let (sim, rig, pose, out) = (&mut self.sim, &self.rig, &mut self.pose, &mut self.out);
        py.detach(|| {
            guarded(|| {
                let input = FrameArrays {
                    data: &data,
                    frames,
                };
                for frame in 0..frames {
                    input.frame_pose(rig, frame, pose);
                    if frame == 0 && reset {
                        sim.reset(rig, pose)?;
                    }
                    sim.advance(rig, pose, if frame == 0 { 0.0 } else { dt }, out)?;
                    write_rotations(rig, out, &mut result[frame * n * 4..(frame + 1) * n * 4]);
                }
                Ok(())
            })
        })?;
        new_array(py, &[frames, n, 4], &result)
    }

    /// The simulated joint positions (armature space) of chain `chain`: its root bone's
    /// head, then each bone's far end, (k + 1, 3).
    fn points<'py>(&self, py: Python<'py>, chain: usize) -> PyResult<Bound<'py, PyAny>> {
        if chain >= self.sim.chains().len() {
            return Err(BoneIndexError::new_err(format!(
                "chain {chain} does not exist ({} chains)",
                self.sim.chains().len()
            )));
        }
        let points = self.sim.points(chain);
        let flat: Vec<f32> = points.iter().flat_map(|p| p.to_array()).collect();
        new_array(py, &[points.len(), 3], &flat)
    }
}

/// Spreads a goal scale (3,) over `count` bones, root-most first: per axis the product of
/// the returned scales (count, 3) is the goal, or the closest the optional per-bone limits
/// `min` and `max` (count, 3; positive) allow.
#[pyfunction]
#[pyo3(signature = (goal, count, min = None, max = None))]
fn distribute_scale<'py>(
    py: Python<'py>,
    goal: &Bound<'py, PyAny>,
    count: usize,
    min: Option<&Bound<'py, PyAny>>,
    max: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut scratch = Vec::new();
    read_f32(goal, "goal", &[3], &mut scratch)?;
    let goal = vec3(&scratch);
    let limits = match (min, max) {
        (None, None) => None,
        (Some(low), Some(high)) => {
            let (mut lows, mut highs) = (Vec::new(), Vec::new());
            read_f32(low, "min", &[count, 3], &mut lows)?;
            read_f32(high, "max", &[count, 3], &mut highs)?;
            Some(
                lows.chunks_exact(3)
                    .zip(highs.chunks_exact(3))
                    .map(|(l, h)| ScaleLimits {
                        min: vec3(l),
                        max: vec3(h),
                    })
                    .collect::<Vec<_>>(),
            )
        }
        _ => {
            return Err(TendonError::new_err(
                "give both min and max scale limits, or neither",
            ))
        }
    };
    let mut out = vec![Vec3::ONE; count];
    guarded(|| core_distribute_scale(goal, limits.as_deref(), &mut out))?;
    let flat: Vec<f32> = out.iter().flat_map(|v| v.to_array()).collect();
    new_array(py, &[count, 3], &flat)
}

/// An animation curve's value at each of `frames` (T,), as Blender evaluates it: keys given
/// by `co`, `handle_left`, `handle_right` (m, 2) and `interpolation` (m,) in Blender's enum
/// values (0 constant, 1 linear, 2 Bezier), sorted by frame; constant extrapolation.
#[pyfunction]
fn evaluate_fcurve<'py>(
    py: Python<'py>,
    co: &Bound<'py, PyAny>,
    handle_left: &Bound<'py, PyAny>,
    handle_right: &Bound<'py, PyAny>,
    interpolation: &Bound<'py, PyAny>,
    frames: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    use tendon_core::math::fcurve::{evaluate, KeyInterpolation, Keyframe};
    let (mut points, mut lefts, mut rights, mut kinds, mut times) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let m = read_f32(co, "co", &[ANY, 2], &mut points)?[0];
    read_f32(handle_left, "handle_left", &[m, 2], &mut lefts)?;
    read_f32(handle_right, "handle_right", &[m, 2], &mut rights)?;
    read_f32(interpolation, "interpolation", &[m], &mut kinds)?;
    read_f32(frames, "frames", &[ANY], &mut times)?;
    for (what, values) in [
        ("co", &points),
        ("handle_left", &lefts),
        ("handle_right", &rights),
        ("frames", &times),
    ] {
        ensure_finite_array(values, what)?;
    }
    let mut keys = Vec::with_capacity(m);
    for k in 0..m {
        let interpolation = KeyInterpolation::from_blender(kinds[k] as i32).ok_or_else(|| {
            TendonError::new_err(format!(
                "key {k}: interpolation {} is not constant (0), linear (1) or Bezier (2)",
                kinds[k]
            ))
        })?;
        if k > 0 && points[2 * k] < points[2 * k - 2] {
            return Err(TendonError::new_err(format!(
                "key {k} comes before key {}: sort the keys",
                k - 1
            )));
        }
        keys.push(Keyframe {
            co: glam::Vec2::new(points[2 * k], points[2 * k + 1]),
            left: glam::Vec2::new(lefts[2 * k], lefts[2 * k + 1]),
            right: glam::Vec2::new(rights[2 * k], rights[2 * k + 1]),
            interpolation,
        });
    }
    let values: Vec<f32> = times.iter().map(|&frame| evaluate(&keys, frame)).collect();
    new_array(py, &[values.len()], &values)
}

/// Tendon's native module: rigs, goals and solvers (see the `tendon` package).
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Rig>()?;
    m.add_class::<Goal>()?;
    m.add_class::<Solver>()?;
    m.add_class::<SolveResult>()?;
    m.add_class::<FramesResult>()?;
    m.add_class::<SpringSimulation>()?;
    for (name, error) in [
        ("TendonError", py.get_type::<TendonError>()),
        ("RigError", py.get_type::<RigError>()),
        ("LimitError", py.get_type::<LimitError>()),
        ("ShapeError", py.get_type::<ShapeError>()),
        ("NonFiniteError", py.get_type::<NonFiniteError>()),
        ("BoneIndexError", py.get_type::<BoneIndexError>()),
        ("SolverError", py.get_type::<SolverError>()),
        ("InternalError", py.get_type::<InternalError>()),
    ] {
        m.add(name, error)?;
    }
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(_test_panic, m)?)?;
    m.add_function(wrap_pyfunction!(rotation_channels, m)?)?;
    m.add_function(wrap_pyfunction!(matrices_to_transforms, m)?)?;
    m.add_function(wrap_pyfunction!(distribute_scale, m)?)?;
    m.add_function(wrap_pyfunction!(evaluate_fcurve, m)?)?;
    m.add_function(wrap_pyfunction!(euler_orders, m)?)?;
    m.add_function(wrap_pyfunction!(default_limits, m)?)?;
    Ok(())
}
