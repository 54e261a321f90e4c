//! The `Solver` class: a solver chosen by name with its settings parsed from keywords, its
//! own reusable memory, `solve` for one pose and `solve_frames` for a frame range (through
//! the core's frame driver, `tendon_core::batch`); and the results they return.

use crate::arrays::{
    ndim, new_array, new_typed, read_f32, read_pose, write_rotations, write_translations, ANY,
};
use crate::errors::{guarded, ShapeError, SolverError};
use crate::frames::{read_frame_vectors, run_frames, FrameData, FrameInputs};
use crate::goal::Goal;
use crate::rig::Rig;
use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::Duration;
use tendon_core::{
    AnySolver, Goal as CoreGoal, Pose, Rig as CoreRig, SolveReport, Solver as _, SolverConfig,
};

/// What a solve reached: local rotations (n, 4) w-first in the caller's order, and the
/// report: `residual`, the largest distance from an effector to its target, and
/// `reached`, whether every goal is within tolerance (goals of weight 0 are disabled and
/// counted in neither).
#[pyclass(module = "tendon._native", name = "Result", frozen)]
pub(crate) struct SolveResult {
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
    /// Pickling: the fields, back through `_unpickle`.
    #[allow(clippy::type_complexity)]
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(
        Bound<'py, PyAny>,
        (Py<PyAny>, Py<PyAny>, u32, f32, f32, bool),
    )> {
        let py = slf.py();
        let r = slf.get();
        Ok((
            slf.get_type().getattr("_unpickle")?,
            (
                r.rotations.clone_ref(py),
                r.translations.clone_ref(py),
                r.iterations,
                r.residual,
                r.rotation_residual,
                r.reached,
            ),
        ))
    }

    #[staticmethod]
    fn _unpickle(
        rotations: Py<PyAny>,
        translations: Py<PyAny>,
        iterations: u32,
        residual: f32,
        rotation_residual: f32,
        reached: bool,
    ) -> SolveResult {
        SolveResult {
            rotations,
            translations,
            iterations,
            residual,
            rotation_residual,
            reached,
        }
    }

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
pub(crate) struct FramesResult {
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

#[pymethods]
impl FramesResult {
    /// Pickling: the arrays, back through `_unpickle`.
    #[allow(clippy::type_complexity)]
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(
        Bound<'py, PyAny>,
        (Py<PyAny>, Py<PyAny>, Py<PyAny>, Py<PyAny>, Py<PyAny>),
    )> {
        let py = slf.py();
        let r = slf.get();
        Ok((
            slf.get_type().getattr("_unpickle")?,
            (
                r.rotations.clone_ref(py),
                r.translations.clone_ref(py),
                r.iterations.clone_ref(py),
                r.residual.clone_ref(py),
                r.reached.clone_ref(py),
            ),
        ))
    }

    #[staticmethod]
    fn _unpickle(
        rotations: Py<PyAny>,
        translations: Py<PyAny>,
        iterations: Py<PyAny>,
        residual: Py<PyAny>,
        reached: Py<PyAny>,
    ) -> FramesResult {
        FramesResult {
            rotations,
            translations,
            iterations,
            residual,
            reached,
        }
    }
}

/// A solver with its settings and its own memory (reuse it: solving again allocates
/// nothing in the core). `Solver("fabrik", max_iterations=50)`; names are
/// `Solver.names()`, defaults `Solver.defaults(name)`.
///
/// One solver may be shared by threads: its memory is behind a lock, taken with the GIL
/// released, so solves from several threads run one after another (before, a second
/// thread got pyo3's "Already borrowed").
#[pyclass(module = "tendon._native", frozen)]
pub(crate) struct Solver {
    config: SolverConfig,
    state: Mutex<SolverState>,
}

/// A solver's working memory.
pub(crate) struct SolverState {
    pub(crate) solver: AnySolver,
    pub(crate) goals: Vec<CoreGoal>,
    pub(crate) start: Pose,
    pub(crate) out: Pose,
    scratch: Vec<f32>,
    pub(crate) frames: FrameData,
}

fn config_json(config: &SolverConfig) -> serde_json::Value {
    serde_json::to_value(config).expect("solver settings always serialise")
}

/// The settings of the solver called `name`: its defaults with the keywords given laid
/// over them, each keyword checked on its own so an unknown or invalid one is named.
fn parse_settings(name: &str, params: Option<&Bound<'_, PyDict>>) -> PyResult<SolverConfig> {
    let defaults = SolverConfig::by_name(name).map_err(|e| SolverError::new_err(e.to_string()))?;
    let mut json = config_json(&defaults);
    if let Some(params) = params {
        let object = json.as_object_mut().expect("a tagged object");
        for (key, value) in params.iter() {
            let key: String = key.extract()?;
            if key == "solver" || !object.contains_key(&key) {
                let mut known: Vec<&String> = object.keys().filter(|k| *k != "solver").collect();
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
                // JSON has no NaN or infinity (serde_json would make it null): name it here.
                if !f.is_finite() {
                    return Err(SolverError::new_err(format!(
                        "{name} setting '{key}' is {f}: it must be a finite number"
                    )));
                }
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
    serde_json::from_value(json)
        .map_err(|e| SolverError::new_err(format!("invalid settings for {name}: {e}")))
}

/// A solver's settings as a dict (without the `solver` tag).
fn settings_dict<'py>(py: Python<'py>, config: &SolverConfig) -> PyResult<Bound<'py, PyAny>> {
    // Straight from the f32 settings (through a JSON value they would gain f64 noise).
    let text = serde_json::to_string(config).expect("settings serialise");
    let dict = py.import("json")?.call_method1("loads", (text,))?;
    dict.del_item("solver")?;
    Ok(dict)
}

#[pymethods]
impl Solver {
    #[new]
    #[pyo3(signature = (name = "fabrik", **params))]
    fn new(name: &str, params: Option<&Bound<'_, PyDict>>) -> PyResult<Solver> {
        let config = parse_settings(name, params)?;
        config
            .validate()
            .map_err(|e| SolverError::new_err(format!("{name} settings: {e}")))?;
        Ok(Solver {
            config,
            state: Mutex::new(SolverState {
                solver: config.build(),
                goals: Vec::new(),
                start: Pose::rest(0),
                out: Pose::rest(0),
                scratch: Vec::new(),
                frames: FrameData::default(),
            }),
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

    /// Pickling: the name and settings (a new solver's memory is its own)...
    fn __getnewargs_ex__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<((&'static str,), Bound<'py, PyAny>)> {
        Ok(((self.config.name(),), settings_dict(py, &self.config)?))
    }

    /// ... and a tension solver's stored reference pose: (rotations, translations, scales)
    /// as flat lists in the core's bone order, or None.
    #[allow(clippy::type_complexity)]
    fn __getstate__(&self, py: Python<'_>) -> Option<(Vec<f32>, Vec<f32>, Vec<f32>)> {
        let state = self.lock(py);
        let AnySolver::Tension(tension) = &state.solver else {
            return None;
        };
        tension.reference_pose().map(|pose| {
            (
                pose.rotations.iter().flat_map(|q| q.to_array()).collect(),
                pose.translations
                    .iter()
                    .flat_map(|v| v.to_array())
                    .collect(),
                pose.scales.iter().flat_map(|v| v.to_array()).collect(),
            )
        })
    }

    #[allow(clippy::type_complexity)]
    fn __setstate__(
        &self,
        py: Python<'_>,
        state: Option<(Vec<f32>, Vec<f32>, Vec<f32>)>,
    ) -> PyResult<()> {
        let mut guard = self.lock(py);
        let AnySolver::Tension(tension) = &mut guard.solver else {
            return Ok(());
        };
        let pose = match state {
            None => None,
            Some((rotations, translations, scales)) => {
                let n = rotations.len() / 4;
                if rotations.len() != 4 * n || translations.len() != 3 * n || scales.len() != 3 * n
                {
                    return Err(ShapeError::new_err(
                        "a pickled reference pose has arrays of different bone counts",
                    ));
                }
                let mut pose = Pose::rest(n);
                for i in 0..n {
                    let q = &rotations[4 * i..4 * i + 4];
                    pose.rotations[i] = glam::Quat::from_xyzw(q[0], q[1], q[2], q[3]);
                    pose.translations[i] = glam::Vec3::from_slice(&translations[3 * i..3 * i + 3]);
                    pose.scales[i] = glam::Vec3::from_slice(&scales[3 * i..3 * i + 3]);
                }
                Some(pose)
            }
        };
        tension.set_reference_pose(pose);
        Ok(())
    }

    /// Stores the pose the tension solver's `reference="pose"` relaxes towards: local
    /// `rotations` (n, 4) w-first in the caller's bone order of `rig`; None forgets it.
    #[pyo3(signature = (rig, rotations = None))]
    fn set_reference_pose(
        &self,
        py: Python<'_>,
        rig: &Rig,
        rotations: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let mut guard = self.lock(py);
        let state = &mut *guard;
        let AnySolver::Tension(tension) = &mut state.solver else {
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
                    &mut state.scratch,
                )?;
                // Refused here, naming the bone, rather than at the next solve (a NaN or zero
                // rotation was taken, and the solve called it the start's "pose rotation").
                guarded(|| {
                    pose.validate(&rig.rig)
                        .map_err(|e| e.at("in the reference pose"))
                })?;
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
        &self,
        py: Python<'py>,
        rig: &Rig,
        goals: Vec<PyRef<'py, Goal>>,
        rotations: Option<&Bound<'py, PyAny>>,
        translations: Option<&Bound<'py, PyAny>>,
        scales: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<SolveResult> {
        let rig = &rig.rig;
        let mut guard = self.lock(py);
        let state = &mut *guard;
        state.prepare(rig, &goals, rotations, translations, scales)?;
        let (solver, start, out, goals) = (
            &mut state.solver,
            &state.start,
            &mut state.out,
            &state.goals,
        );
        let report = py.detach(|| guarded(|| solver.solve_into(rig, start, goals, out)))?;
        let mut data = std::mem::take(&mut state.scratch);
        data.resize(rig.len() * 4, 0.0);
        write_rotations(rig, &state.out, &mut data);
        let rotations = new_array(py, &[rig.len(), 4], &data)?;
        data.resize(rig.len() * 3, 0.0);
        write_translations(rig, &state.out, &mut data);
        let translations = new_array(py, &[rig.len(), 3], &data)?;
        state.scratch = data;
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
    /// animated pose). With `warm`, the bones a solve has turned (on the previous frame or
    /// any before) start from the previous solution (path-dependent, fast) and the others
    /// from the frame's pose; otherwise every frame starts from its pose. `rotation_targets` (frames, goals, 4) and `poles`
    /// (frames, goals, 3) move the rotation targets and poles of the goals that have them
    /// (given when no goal has one, they are an error).
    #[pyo3(signature = (rig, goals, targets, rotations = None, translations = None, scales = None, warm = true, *, rotation_targets = None, poles = None))]
    #[allow(clippy::too_many_arguments)]
    fn solve_frames<'py>(
        &self,
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
        // Per-frame values no goal reads are a mistake, not a no-op (a rotation array for
        // goals made without `rotation=` left every hand 132 degrees off it, each frame
        // "reached"; QA helper).
        for (given, used, what, made) in [
            (
                rotation_targets.is_some(),
                goals.iter().any(|g| g.has_rotation()),
                "rotation_targets",
                "rotation=",
            ),
            (
                poles.is_some(),
                goals.iter().any(|g| g.has_pole()),
                "poles",
                "pole=",
            ),
        ] {
            if given && !used {
                return Err(ShapeError::new_err(format!(
                    "{what} given, but no goal has one to move: make the goals with {made}"
                )));
            }
        }
        let rig = &rig.rig;
        let mut guard = self.lock(py);
        let state = &mut *guard;
        let frames = state.prepare_frames(
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
        let (solver, start, goals, data) = (
            &mut state.solver,
            &state.start,
            &mut state.goals,
            &state.frames,
        );
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
    #[cfg(feature = "hooks")]
    #[pyo3(signature = (rig, goals, repeats, rotations = None))]
    fn _time_native<'py>(
        &self,
        py: Python<'py>,
        rig: &Rig,
        goals: Vec<PyRef<'py, Goal>>,
        repeats: u32,
        rotations: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<f64> {
        crate::hooks::time_native(&mut self.lock(py), py, rig, &goals, repeats, rotations)
    }

    /// Mean seconds of the native part of `solve_frames` (see `_time_native`).
    #[cfg(feature = "hooks")]
    #[pyo3(signature = (rig, goals, targets, repeats, warm = true))]
    fn _time_native_frames<'py>(
        &self,
        py: Python<'py>,
        rig: &Rig,
        goals: Vec<PyRef<'py, Goal>>,
        targets: &Bound<'py, PyAny>,
        repeats: u32,
        warm: bool,
    ) -> PyResult<f64> {
        crate::hooks::time_native_frames(
            &mut self.lock(py),
            py,
            rig,
            &goals,
            targets,
            repeats,
            warm,
        )
    }
}

impl Solver {
    /// This solver's memory, waited for with the GIL released when another thread holds
    /// it (holding the GIL while waiting would stop that thread from finishing).
    pub(crate) fn lock(&self, py: Python<'_>) -> MutexGuard<'_, SolverState> {
        loop {
            match self.state.try_lock() {
                Ok(guard) => return guard,
                // A panic is caught inside the solve (`guarded`); the memory is reset by
                // the next solve's preparation either way.
                Err(TryLockError::Poisoned(poisoned)) => return poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => {
                    py.detach(|| std::thread::sleep(Duration::from_micros(20)))
                }
            }
        }
    }
}

impl SolverState {
    /// Reads a frame range's inputs into `self.frames` (and the start pose and goals);
    /// returns the number of frames.
    pub(crate) fn prepare_frames(
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
    pub(crate) fn prepare(
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

/// One field of every frame's report.
fn column<T>(reports: &[SolveReport], field: impl Fn(&SolveReport) -> T) -> Vec<T> {
    reports.iter().map(field).collect()
}
