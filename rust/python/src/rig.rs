//! The `Rig` class: an armature built from JSON or Blender-style arrays, its forward
//! kinematics and the pose that puts its bones at given matrices; and how a bone is named
//! at this interface (a name or a caller index).

use crate::arrays::{
    ensure_finite_array, gather, new_array, read_f32, read_pose, scatter, write_rotations,
    write_scales, write_translations,
};
use crate::errors::{guarded, BoneIndexError, LimitError, ShapeError};
use glam::{Affine3A, Mat4};
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;
use std::collections::HashMap;
use tendon_core::{JointLimits, Pose, Rig as CoreRig, RigDesc, TendonError as CoreError};

/// An armature: bones in depth-first order inside, in your order at this interface.
///
/// Arrays given to and returned by a rig's methods list bones in the order the rig was
/// described (the "caller order"); `dfs_order` shows the order solvers work in.
#[pyclass(module = "tendon._native", frozen)]
pub(crate) struct Rig {
    pub(crate) rig: CoreRig,
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
        let limits: Option<HashMap<String, JointLimits>> = match limits {
            None => None,
            Some(text) => {
                let by_bone: HashMap<String, serde_json::Value> = serde_json::from_str(text)
                    .map_err(|e| LimitError::new_err(limits_syntax_error(text, &e)))?;
                // Each bone's apart, so an error names the bone (a misspelt key names
                // itself: it was silently left out, and the joint free).
                let mut parsed = HashMap::with_capacity(by_bone.len());
                for (name, value) in by_bone {
                    let limit = serde_json::from_value(value).map_err(|e| {
                        LimitError::new_err(format!("limits of bone '{name}': {e}"))
                    })?;
                    parsed.insert(name, limit);
                }
                Some(parsed)
            }
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
        self.rig
            .dfs_from_caller()
            .iter()
            .map(|&dfs| self.rig.name(dfs).to_string())
            .collect()
    }

    /// Parent of each bone as a caller index, -1 for roots.
    #[getter]
    fn parents(&self) -> Vec<i64> {
        self.rig
            .dfs_from_caller()
            .iter()
            .map(|&dfs| match self.rig.parent(dfs) {
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
        let mut data = vec![0.0f32; 16 * self.rig.len()];
        // Row-major, as the rest matrices are given.
        gather(&self.rig, &world, 16, &mut data, |m, row| {
            row.copy_from_slice(&Mat4::from(*m).transpose().to_cols_array())
        });
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
        let mut world = vec![Affine3A::IDENTITY; n];
        scatter(&self.rig, &values, 16, &mut world, |m| {
            let matrix = Mat4::from_cols_slice(m);
            Affine3A::from_mat4(if column_major {
                matrix
            } else {
                matrix.transpose()
            })
        });
        let mut pose = Pose::rest(n);
        self.rig.pose_from_world(&world, &mut pose);
        let (rotations, translations, scales) = pose_arrays(&self.rig, &pose);
        Ok((
            new_array(py, &[n, 4], &rotations)?,
            new_array(py, &[n, 3], &translations)?,
            new_array(py, &[n, 3], &scales)?,
        ))
    }

    /// The pose a solve inside Blender starts from, in one call: every bone where the
    /// armature-space `evaluated` matrices (n, 4, 4) put it (as `pose_from_world`), but the
    /// rotations of the bones listed in `bones` (caller indices), which start from their
    /// own channels: the rotation of the local `basis` matrices (n, 4, 4, Blender's
    /// `matrix_basis`, as `matrices_to_transforms` splits them). Their translations and
    /// scales stay where Blender shows them: the same as their channels' for a bone posed
    /// from them, and right too where an option places the channels' location elsewhere
    /// (Local Location off). Matrices are row-major, or column-major when `column_major`
    /// (as `foreach_get` gives them).
    ///
    /// Returns the rotations (n, 4), translations and scales (n, 3); per bone of `bones`,
    /// how far its evaluated local rotation is from its channels' (the largest difference of
    /// a quaternion component, q and -q being one rotation: something other than its
    /// channels moves a bone whose difference is not tiny); and per bone the smallest
    /// absolute scale of its channels (a bone scaled to zero on an axis has lost its
    /// rotation, and its row of `bones` is then meaningless).
    #[pyo3(signature = (basis, evaluated, bones, column_major = false))]
    #[allow(clippy::type_complexity)]
    fn start_pose<'py>(
        &self,
        py: Python<'py>,
        basis: &Bound<'py, PyAny>,
        evaluated: &Bound<'py, PyAny>,
        bones: Vec<usize>,
        column_major: bool,
    ) -> PyResult<(
        Bound<'py, PyAny>,
        Bound<'py, PyAny>,
        Bound<'py, PyAny>,
        Bound<'py, PyAny>,
        Bound<'py, PyAny>,
    )> {
        let n = self.rig.len();
        let (mut local, mut world) = (Vec::new(), Vec::new());
        read_f32(basis, "basis", &[n, 4, 4], &mut local)?;
        read_f32(evaluated, "evaluated", &[n, 4, 4], &mut world)?;
        ensure_finite_array(&local, "basis")?;
        ensure_finite_array(&world, "evaluated")?;
        if let Some(&bad) = bones.iter().find(|&&bone| bone >= n) {
            return Err(BoneIndexError::new_err(format!(
                "bones: index {bad} is out of range for a rig of {n} bones"
            )));
        }
        let orient = |m: &[f32]| {
            let matrix = Mat4::from_cols_slice(m);
            if column_major {
                matrix
            } else {
                matrix.transpose()
            }
        };
        let mut frames = vec![Affine3A::IDENTITY; n];
        scatter(&self.rig, &world, 16, &mut frames, |m| {
            Affine3A::from_mat4(orient(m))
        });
        let mut pose = Pose::rest(n);
        self.rig.pose_from_world(&frames, &mut pose);
        let (mut rotations, translations, scales) = pose_arrays(&self.rig, &pose);
        let smallest: Vec<f32> = local
            .chunks_exact(16)
            .map(|m| {
                let scale = orient(m).to_scale_rotation_translation().0.abs();
                scale.min_element()
            })
            .collect();
        let mut differences = Vec::with_capacity(bones.len());
        for &bone in &bones {
            let (_, rotation, _) =
                orient(&local[bone * 16..bone * 16 + 16]).to_scale_rotation_translation();
            let own = [rotation.w, rotation.x, rotation.y, rotation.z];
            let shown = &mut rotations[bone * 4..bone * 4 + 4];
            let (mut apart, mut opposite) = (0.0f32, 0.0f32);
            for (a, b) in shown.iter().zip(own) {
                apart = apart.max((a - b).abs());
                opposite = opposite.max((a + b).abs());
            }
            differences.push(apart.min(opposite));
            shown.copy_from_slice(&own);
        }
        Ok((
            new_array(py, &[n, 4], &rotations)?,
            new_array(py, &[n, 3], &translations)?,
            new_array(py, &[n, 3], &scales)?,
            new_array(py, &[bones.len()], &differences)?,
            new_array(py, &[n], &smallest)?,
        ))
    }
}

/// A bone as this interface names it: by caller index or by name.
#[derive(Clone, Debug)]
pub(crate) enum BoneRef {
    Index(usize),
    Name(String),
}

impl BoneRef {
    /// A bone name or a non-negative index; None for anything else.
    pub(crate) fn extract(bone: &Bound<'_, PyAny>) -> Option<BoneRef> {
        if let Ok(name) = bone.extract::<String>() {
            Some(BoneRef::Name(name))
        } else if let Ok(index) = bone.extract::<usize>() {
            Some(BoneRef::Index(index))
        } else {
            None
        }
    }

    /// The bone's depth-first index in `rig`; errors start with `what` (formatted only
    /// then: goals are resolved on every solve).
    pub(crate) fn resolve(&self, rig: &CoreRig, what: std::fmt::Arguments<'_>) -> PyResult<usize> {
        match self {
            BoneRef::Name(name) => rig.index_of(name).ok_or_else(|| {
                BoneIndexError::new_err(format!("{what}: there is no bone '{name}'"))
            }),
            BoneRef::Index(i) if *i < rig.len() => Ok(rig.to_dfs(*i)),
            BoneRef::Index(i) => Err(BoneIndexError::new_err(format!(
                "{what}: bone index {i} is out of range for a rig of {} bones",
                rig.len()
            ))),
        }
    }

    /// The bone as errors name it: `bone 'name'` or `bone 3`.
    pub(crate) fn describe(&self) -> String {
        match self {
            BoneRef::Index(i) => format!("bone {i}"),
            BoneRef::Name(name) => format!("bone '{name}'"),
        }
    }

    /// The bone as given: a name or a caller index.
    pub(crate) fn to_object<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            BoneRef::Index(i) => i.into_bound_py_any(py),
            BoneRef::Name(n) => n.into_bound_py_any(py),
        }
    }
}

/// A bone given by name or caller index, as a depth-first index; errors start with `what`.
pub(crate) fn bone_index(rig: &CoreRig, bone: &Bound<'_, PyAny>, what: &str) -> PyResult<usize> {
    BoneRef::extract(bone)
        .ok_or_else(|| {
            BoneIndexError::new_err(format!("{what}: a bone is a name or a non-negative index"))
        })?
        .resolve(rig, format_args!("{what}"))
}

/// A pose's rotations (n x 4, w-first), translations and scales (n x 3), flat, in the
/// caller's order.
fn pose_arrays(rig: &CoreRig, pose: &Pose) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let n = rig.len();
    let (mut rotations, mut translations, mut scales) = (
        vec![0.0f32; n * 4],
        vec![0.0f32; n * 3],
        vec![0.0f32; n * 3],
    );
    write_rotations(rig, pose, &mut rotations);
    write_translations(rig, pose, &mut translations);
    write_scales(rig, pose, &mut scales);
    (rotations, translations, scales)
}

/// What is wrong with limits JSON that does not parse: a NaN or infinity (which Python's
/// `json.dumps` writes and JSON does not have) names the bone whose limits hold it (the
/// message named only a line and column, as if the structure were wrong; QA helper).
fn limits_syntax_error(text: &str, error: &serde_json::Error) -> String {
    let offset = text
        .lines()
        .take(error.line().saturating_sub(1))
        .map(|line| line.len() + 1)
        .sum::<usize>()
        + error.column().saturating_sub(1);
    let at = &text[offset.min(text.len())..];
    let not_a_number = ["NaN", "Infinity", "-Infinity"]
        .iter()
        .any(|word| at.trim_start().starts_with(word));
    if !not_a_number {
        return format!("limits must map bone names to limits: {error}");
    }
    // The bone: the last key at the top level before the offset.
    let (mut depth, mut in_string, mut escaped) = (0i32, false, false);
    let (mut start, mut bone) = (None, None);
    for (i, c) in text[..offset.min(text.len())].char_indices() {
        match (in_string, c) {
            (true, _) if escaped => escaped = false,
            (true, '\\') => escaped = true,
            (true, '"') => {
                in_string = false;
                if depth == 1 {
                    if let Some(from) = start {
                        bone = Some(&text[from..i]);
                    }
                }
            }
            (false, '"') => {
                in_string = true;
                start = Some(i + 1);
            }
            (false, '{') | (false, '[') => depth += 1,
            (false, '}') | (false, ']') => depth -= 1,
            _ => {}
        }
    }
    match bone {
        Some(name) => format!(
            "limits of bone '{name}': a value is NaN or infinite (JSON has neither; Python's json.dumps writes them): give it a number"
        ),
        None => format!("limits hold a NaN or infinite value: {error}"),
    }
}
