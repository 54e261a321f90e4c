//! The `SpringSimulation` class: secondary motion (mass-spring chains) over the core's
//! simulation, one frame at a time or a frame range in one call.

use crate::arrays::{new_array, read_f32, read_pose, write_rotations, ANY};
use crate::errors::{guarded, non_negative, to_py, BoneIndexError, SolverError, TendonError};
use crate::frames::{read_frame_vectors, FrameArrays, FrameData};
use crate::rig::{bone_index, Rig};
use glam::{Affine3A, Mat4, Vec3};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tendon_core::batch::FrameInput;
use tendon_core::{
    Pose, Rig as CoreRig, SphereCollider, SpringChain, SpringParams,
    SpringSimulation as CoreSpringSimulation,
};

/// A collider as Python gives it: (bone, centre in the bone's frame, radius).
type ColliderArgs<'py> = (Bound<'py, PyAny>, (f32, f32, f32), f32);

/// Secondary motion: mass-spring (Verlet) chains simulated frame by frame.
///
/// `chains` lists `(tip bone, chain length)` pairs (0: up to the root), optionally with a
/// third item, the masses of the chain's bones root-most first; `colliders` lists
/// `(bone, centre in the bone's frame, radius)` spheres. Settings are keywords (see
/// `SpringSimulation.defaults()`). Poses are given and returned in the rig's bone order.
#[pyclass(module = "tendon._native", name = "SpringSimulation")]
pub(crate) struct SpringSimulation {
    rig: CoreRig,
    sim: CoreSpringSimulation,
    pose: Pose,
    out: Pose,
    scratch: Vec<f32>,
    /// The armature object's world matrix at the last simulated frame, when given.
    last_object: Option<Affine3A>,
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
            let length = non_negative(&parts[1], &format!("{what}: its chain length"))?;
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
                // JSON has no NaN or infinity (it would read as null): name it here.
                let finite = |values: &[f32]| {
                    if values.iter().all(|v| v.is_finite()) {
                        Ok(())
                    } else {
                        Err(SolverError::new_err(format!(
                            "spring setting '{key}' is {values:?}: it must be finite"
                        )))
                    }
                };
                let value = if key == "gravity" {
                    // Any sequence of three numbers: a tuple, a list (as `defaults()` gives it),
                    // an array.
                    let g: Vec<f32> = value.extract().map_err(|_| {
                        SolverError::new_err("spring setting 'gravity' must be three numbers")
                    })?;
                    if g.len() != 3 {
                        return Err(SolverError::new_err(format!(
                            "spring setting 'gravity' must be three numbers, not {}",
                            g.len()
                        )));
                    }
                    finite(&g)?;
                    serde_json::json!([g[0], g[1], g[2]])
                } else if key == "iterations" {
                    serde_json::json!(value.extract::<u32>()?)
                } else {
                    let v = value.extract::<f32>()?;
                    finite(&[v])?;
                    serde_json::json!(v)
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
            last_object: None,
        })
    }

    /// The default settings.
    #[staticmethod]
    fn defaults<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let text = serde_json::to_string(&SpringParams::default()).expect("settings serialise");
        py.import("json")?.call_method1("loads", (text,))
    }

    /// Restarts at rest (no motion) from the pose given: rotations (n, 4) w-first, and
    /// optional translations and scales (n, 3). `object_matrix` (4, 4), the armature
    /// object's world matrix at that frame, is where the object's motion is measured from
    /// by the next `advance` (without it, from that advance's own: the first frame's
    /// motion was lost, and a range advanced frame by frame parted from `simulate` by up
    /// to 0.15 in a quaternion component).
    #[pyo3(signature = (rotations, translations = None, scales = None, object_matrix = None))]
    fn reset(
        &mut self,
        rotations: &Bound<'_, PyAny>,
        translations: Option<&Bound<'_, PyAny>>,
        scales: Option<&Bound<'_, PyAny>>,
        object_matrix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let start_object = match object_matrix {
            Some(matrix) => object_matrices(matrix, None)?.first().copied(),
            None => None,
        };
        read_pose(
            &self.rig,
            rotations,
            translations,
            scales,
            &mut self.pose,
            &mut self.scratch,
        )?;
        let (sim, rig, pose) = (&mut self.sim, &self.rig, &self.pose);
        self.last_object = start_object;
        guarded(|| sim.reset(rig, pose))
    }

    /// Advances `dt` seconds to the animated pose given; returns the pose's rotations with
    /// the chains' bones turned, (n, 4) w-first. `object_matrix` (4, 4), the armature
    /// object's world matrix at this frame: given at each frame, the chains lag behind the
    /// object's own motion.
    #[pyo3(signature = (dt, rotations, translations = None, scales = None, object_matrix = None))]
    fn advance<'py>(
        &mut self,
        py: Python<'py>,
        dt: f32,
        rotations: &Bound<'py, PyAny>,
        translations: Option<&Bound<'py, PyAny>>,
        scales: Option<&Bound<'py, PyAny>>,
        object_matrix: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let now = match object_matrix {
            Some(matrix) => object_matrices(matrix, None)?.first().copied(),
            None => None,
        };
        if let (Some(before), Some(now)) = (self.last_object, now) {
            guarded(|| self.sim.carry(now.inverse() * before))?;
        }
        self.last_object = now;
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
    /// optional (frames, n, 3) translations and scales, `dt` seconds apart (or, as
    /// (frames - 1,) seconds, each frame's gap from the one before: a bake whose step does
    /// not divide its range ends on a shorter gap; with `reset` false, (frames,): the first
    /// frame's gap from the last one simulated). Restarts at
    /// the first frame unless `reset` is false. `gravity` (frames, 3), armature space,
    /// replaces the setting frame by frame (an armature that turns over the range turns
    /// the world's down with it). Returns (frames, n, 4) rotations.
    #[pyo3(signature = (rotations, dt, translations = None, scales = None, reset = true, gravity = None, object_matrices = None))]
    #[allow(clippy::too_many_arguments)]
    fn simulate<'py>(
        &mut self,
        py: Python<'py>,
        rotations: &Bound<'py, PyAny>,
        dt: &Bound<'py, PyAny>,
        translations: Option<&Bound<'py, PyAny>>,
        scales: Option<&Bound<'py, PyAny>>,
        reset: bool,
        gravity: Option<&Bound<'py, PyAny>>,
        object_matrices: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let n = self.rig.len();
        let mut data = FrameData::default();
        let frames = read_f32(rotations, "rotations", &[ANY, n, 4], &mut data.rotations)?[0];
        // Gaps before each frame: none before the first when the simulation restarts there,
        // else that one too (a continued call lost a frame's time at each chunk's start).
        let count = if reset {
            frames.saturating_sub(1)
        } else {
            frames
        };
        let gaps = match dt.extract::<f32>() {
            Ok(uniform) => vec![uniform; count],
            Err(_) => {
                let mut gaps = Vec::new();
                read_f32(dt, "dt", &[count], &mut gaps)?;
                gaps
            }
        };
        if let Some(bad) = gaps.iter().find(|g| !(g.is_finite() && **g >= 0.0)) {
            return Err(SolverError::new_err(format!(
                "dt must be a finite number of seconds of 0 or more, not {bad}"
            )));
        }
        read_frame_vectors(
            translations,
            "translations",
            [frames, n],
            0.0,
            &mut data.translations,
        )?;
        read_frame_vectors(scales, "scales", [frames, n], 1.0, &mut data.scales)?;
        let mut gravities = Vec::new();
        if let Some(gravity) = gravity {
            read_f32(gravity, "gravity", &[frames, 3], &mut gravities)?;
            if !gravities.iter().all(|g| g.is_finite()) {
                return Err(SolverError::new_err("gravity holds a non-finite value"));
            }
        }
        // The armature object's world matrix per frame (row-major, as Blender's
        // `matrix_world`): the chains then lag behind its own motion.
        let objects = match object_matrices {
            Some(matrices) => self::object_matrices(matrices, Some(frames))?,
            None => Vec::new(),
        };
        let last_object = &mut self.last_object;
        let mut result = vec![0.0f32; frames * n * 4];
        let (sim, rig, pose, out) = (&mut self.sim, &self.rig, &mut self.pose, &mut self.out);
        let setting = sim.params.gravity;
        let done = py.detach(|| {
            guarded(|| {
                let input = FrameArrays {
                    data: &data,
                    frames,
                };
                for frame in 0..frames {
                    input.frame_pose(rig, frame, pose);
                    if frame == 0 && reset {
                        sim.reset(rig, pose)?;
                    } else if let (Some(before), Some(now)) = (
                        if frame == 0 {
                            *last_object
                        } else {
                            objects.get(frame - 1).copied()
                        },
                        objects.get(frame),
                    ) {
                        sim.carry(now.inverse() * before)?;
                    }
                    if !gravities.is_empty() {
                        sim.params.gravity = Vec3::from_slice(&gravities[3 * frame..3 * frame + 3]);
                    }
                    let gap = match (reset, frame) {
                        (true, 0) => 0.0,
                        (true, f) => gaps[f - 1],
                        (false, f) => gaps[f],
                    };
                    sim.advance(rig, pose, gap, out)?;
                    write_rotations(rig, out, &mut result[frame * n * 4..(frame + 1) * n * 4]);
                }
                Ok(())
            })
        });
        self.sim.params.gravity = setting;
        let () = done?;
        // A continued call (reset=False) carries on from this call's last place.
        self.last_object = objects.last().copied();
        new_array(py, &[frames, n, 4], &result)
    }

    /// The simulated joint positions (armature space) of chain `chain`: its root bone's
    /// head, then each bone's far end, (k + 1, 3).
    fn points<'py>(
        &self,
        py: Python<'py>,
        chain: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let chain = non_negative(chain, "chain")?;
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

/// World matrices of the armature object, row-major as Blender's `matrix_world`: one
/// (4, 4) with `frames` None, else (frames, 4, 4); each must be invertible numbers.
fn object_matrices(array: &Bound<'_, PyAny>, frames: Option<usize>) -> PyResult<Vec<Affine3A>> {
    let (what, shape) = match frames {
        Some(frames) => ("object_matrices", vec![frames, 4, 4]),
        None => ("object_matrix", vec![4, 4]),
    };
    let mut flat = Vec::new();
    read_f32(array, what, &shape, &mut flat)?;
    flat.chunks_exact(16)
        .enumerate()
        .map(|(frame, m)| {
            let mut columns = [0.0f32; 16];
            columns.copy_from_slice(m);
            let affine = Affine3A::from_mat4(Mat4::from_cols_array(&columns).transpose());
            // Relative to the axes' lengths: an armature scaled to 1e-4 (determinant 1e-12)
            // is a matrix like any other.
            let m = affine.matrix3;
            let size = m.x_axis.length() * m.y_axis.length() * m.z_axis.length();
            if affine.is_finite() && size > 0.0 && m.determinant().abs() > 1e-6 * size {
                Ok(affine)
            } else {
                let which = frames.map_or(String::new(), |_| format!("[{frame}]"));
                Err(SolverError::new_err(format!(
                    "{what}{which} is not an invertible matrix of numbers"
                )))
            }
        })
        .collect()
}
