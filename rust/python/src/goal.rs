//! The `Goal` class: one IK goal as Python gives it, resolved against a rig when solved.

use crate::arrays::{quat_wxyz, read_f32, vec3};
use crate::errors::{non_negative, to_py, BoneIndexError, TendonError};
use crate::rig::BoneRef;
use pyo3::prelude::*;
use tendon_core::{EffectorPoint, Goal as CoreGoal, Rig as CoreRig};

/// One IK goal. `bone` is a bone name or caller index; `target` and `pole` are
/// armature-space positions; `rotation` an armature-space (w, x, y, z) quaternion;
/// `point` is "tail" (default) or "head"; `chain_length` 0 means up to the root.
/// `weight` is how much the goal counts against the others; 0 disables it: it is neither
/// solved nor counted in the result's `residual` and `reached`.
#[pyclass(module = "tendon._native", frozen)]
#[derive(Clone)]
pub(crate) struct Goal {
    bone_ref: BoneRef,
    goal: CoreGoal,
}

#[pymethods]
impl Goal {
    /// Pickling: the bone (as given, name or index), the target and every setting.
    #[allow(clippy::type_complexity)]
    fn __getnewargs_ex__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(
        (Bound<'py, PyAny>, (f32, f32, f32)),
        Bound<'py, pyo3::types::PyDict>,
    )> {
        let py = slf.py();
        let goal = slf.borrow();
        let settings = pyo3::types::PyDict::new(py);
        settings.set_item("rotation", goal.rotation())?;
        settings.set_item("rotation_weight", goal.rotation_weight())?;
        settings.set_item("weight", goal.weight())?;
        settings.set_item("chain_length", goal.chain_length())?;
        settings.set_item("pole", goal.pole())?;
        settings.set_item("point", goal.point())?;
        settings.set_item("pole_angle", goal.pole_angle())?;
        Ok(((goal.bone(py)?, goal.target()), settings))
    }

    #[new]
    // `chain_length` taken as any object so that a bad one is refused by name (see
    // `non_negative`); `None` stands for its default 0, which the signature shows.
    #[pyo3(signature = (bone, target, *, rotation = None, rotation_weight = 1.0, weight = 1.0, chain_length = None, pole = None, point = "tail", pole_angle = None))]
    #[pyo3(
        text_signature = "(bone, target, *, rotation=None, rotation_weight=1.0, weight=1.0, chain_length=0, pole=None, point=\"tail\", pole_angle=None)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn new(
        bone: &Bound<'_, PyAny>,
        target: &Bound<'_, PyAny>,
        rotation: Option<&Bound<'_, PyAny>>,
        rotation_weight: f32,
        weight: f32,
        chain_length: Option<&Bound<'_, PyAny>>,
        pole: Option<&Bound<'_, PyAny>>,
        point: &str,
        pole_angle: Option<f32>,
    ) -> PyResult<Goal> {
        let bone_ref = BoneRef::extract(bone).ok_or_else(|| {
            BoneIndexError::new_err("bone must be a bone name or a non-negative index")
        })?;
        let mut scratch = Vec::new();
        read_f32(target, "target", &[3], &mut scratch)?;
        let mut goal = CoreGoal::new(0, vec3(&scratch));
        if let Some(r) = rotation {
            read_f32(r, "rotation", &[4], &mut scratch)?;
            goal = goal.with_rotation(quat_wxyz(&scratch), rotation_weight);
        }
        goal.rotation_weight = rotation_weight;
        goal.weight = weight;
        goal.chain_length = chain_length.map_or(Ok(0), |c| non_negative(c, "chain_length"))?;
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
        // Refused as the goal is made, naming its bone, rather than by the solve that meets it.
        let named = bone_ref.describe();
        let goal = goal
            .checked(|field| format!("{field} of the goal for {named}"))
            .map_err(to_py)?;
        Ok(Goal { bone_ref, goal })
    }

    /// The bone, as given (a name or a caller index).
    #[getter]
    fn bone<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.bone_ref.to_object(py)
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
    /// Whether per-frame rotation targets (`solve_frames`' `rotation_targets`) move this
    /// goal: it was made with a rotation.
    pub(crate) fn has_rotation(&self) -> bool {
        self.goal.rotation.is_some()
    }

    /// Whether per-frame poles move this goal: it was made with a pole.
    pub(crate) fn has_pole(&self) -> bool {
        self.goal.pole.is_some()
    }

    /// The core goal with its bone resolved to a depth-first index.
    pub(crate) fn resolve(&self, rig: &CoreRig, position: usize) -> PyResult<CoreGoal> {
        Ok(CoreGoal {
            bone: self
                .bone_ref
                .resolve(rig, format_args!("goal {position}"))?,
            ..self.goal
        })
    }
}
