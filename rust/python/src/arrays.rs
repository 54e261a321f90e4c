//! numpy arrays in and out: float32 arrays read with their shapes checked, new arrays
//! written, and the remap between the caller's bone order (every array at this interface,
//! quaternions w-first as Blender has them) and the core's depth-first order, written once
//! ([`scatter`], [`gather`]).

use crate::errors::{NonFiniteError, ShapeError};
use glam::{Quat, Vec3};
use pyo3::buffer::{Element, PyBuffer};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use tendon_core::{Pose, Rig as CoreRig};

/// Shape pattern entry matching any length.
pub(crate) const ANY: usize = usize::MAX;

/// Reads a float32 array of the given shape (`ANY` matches any length) into `out` and
/// returns its shape. Contiguous float32 buffers are read directly; anything else numpy
/// can turn into float32 (float64, lists, strided views) is converted first.
pub(crate) fn read_f32(
    obj: &Bound<'_, PyAny>,
    what: &str,
    shape: &[usize],
    out: &mut Vec<f32>,
) -> PyResult<Vec<usize>> {
    let py = obj.py();
    // A buffer of float32 in the other byte order passes pyo3's format check but would be
    // copied as is (a big-endian target read as -6e-23, -4e8, 3e23): such arrays, and ones
    // a plain copy cannot read (unaligned), go through numpy's conversion like any other.
    let native = |buffer: &PyBuffer<f32>| {
        let format = buffer.format().to_bytes();
        let big = matches!(format.first(), Some(b'>') | Some(b'!'));
        let little = format.first() == Some(&b'<');
        !(big && cfg!(target_endian = "little") || little && cfg!(target_endian = "big"))
    };
    let direct = PyBuffer::<f32>::get(obj).ok().filter(native);
    if let Some(buffer) = &direct {
        let got = buffer.shape().to_vec();
        if fits_shape(&got, shape) {
            out.resize(buffer.item_count(), 0.0);
            if buffer.copy_to_slice(py, out).is_ok() {
                return Ok(got);
            }
        }
    }
    let buffer = match direct.filter(|b| !fits_shape(b.shape(), shape)) {
        Some(buffer) => buffer,
        None => {
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
            // A fresh array (numpy.array copies): aligned, contiguous, native float32.
            let converted = numpy.call_method1("array", (obj, "float32")).map_err(|e| {
                ShapeError::new_err(format!(
                    "{what} must be an array of numbers with shape {}: {e}",
                    pattern(shape)
                ))
            })?;
            PyBuffer::<f32>::get(&converted)?
        }
    };
    let got = buffer.shape().to_vec();
    if !fits_shape(&got, shape) {
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

/// Whether an array's shape matches `shape` (`ANY` matching any length).
fn fits_shape(got: &[usize], shape: &[usize]) -> bool {
    got.len() == shape.len() && got.iter().zip(shape).all(|(g, s)| *s == ANY || g == s)
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

/// The number of dimensions of an array (or of nested lists, as numpy reads them).
pub(crate) fn ndim(array: &Bound<'_, PyAny>) -> PyResult<usize> {
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

/// Refuses NaN and infinities in `values`, naming the array and the flat index.
pub(crate) fn ensure_finite_array(values: &[f32], what: &str) -> PyResult<()> {
    match values.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(i) => Err(NonFiniteError::new_err(format!(
            "{what} holds a non-finite value ({}) at flat index {i}",
            values[i]
        ))),
    }
}

/// A new float32 numpy array of `shape` holding `data`.
pub(crate) fn new_array<'py>(
    py: Python<'py>,
    shape: &[usize],
    data: &[f32],
) -> PyResult<Bound<'py, PyAny>> {
    new_typed(py, shape, "float32", data)
}

/// A new numpy array of `shape` and `dtype` (matching `T`) holding `data`.
pub(crate) fn new_typed<'py, T: Element + Copy>(
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

/// Three floats as a vector.
pub(crate) fn vec3(values: &[f32]) -> Vec3 {
    Vec3::new(values[0], values[1], values[2])
}

/// Blender's (w, x, y, z) to glam.
pub(crate) fn quat_wxyz(v: &[f32]) -> Quat {
    Quat::from_xyzw(v[1], v[2], v[3], v[0])
}

/// A rotation as Blender's (w, x, y, z) into `out`.
pub(crate) fn put_quat_wxyz(q: &Quat, out: &mut [f32]) {
    out.copy_from_slice(&[q.w, q.x, q.y, q.z]);
}

/// A vector's three floats into `out`.
pub(crate) fn put_vec3(v: &Vec3, out: &mut [f32]) {
    out.copy_from_slice(&v.to_array());
}

/// Rows of `width` floats, one a bone in the caller's order, converted into `out` in
/// depth-first order: the caller-to-core half of the remap.
pub(crate) fn scatter<T>(
    rig: &CoreRig,
    rows: &[f32],
    width: usize,
    out: &mut [T],
    convert: impl Fn(&[f32]) -> T,
) {
    for (row, &dfs) in rows.chunks_exact(width).zip(rig.dfs_from_caller()) {
        out[dfs] = convert(row);
    }
}

/// `values` in depth-first order written as rows of `width` floats in the caller's order:
/// the core-to-caller half of the remap.
pub(crate) fn gather<T>(
    rig: &CoreRig,
    values: &[T],
    width: usize,
    out: &mut [f32],
    convert: impl Fn(&T, &mut [f32]),
) {
    for (row, &dfs) in out.chunks_exact_mut(width).zip(rig.dfs_from_caller()) {
        convert(&values[dfs], row);
    }
}

/// Reads a pose in the caller's order into `pose` (depth-first order): rotations (n, 4)
/// w-first, optional translations and scales (n, 3); what is not given stays at rest.
pub(crate) fn read_pose(
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
    scatter(rig, scratch, 4, &mut pose.rotations, quat_wxyz);
    if let Some(t) = translations {
        read_f32(t, "translations", &[n, 3], scratch)?;
        scatter(rig, scratch, 3, &mut pose.translations, vec3);
    }
    if let Some(s) = scales {
        read_f32(s, "scales", &[n, 3], scratch)?;
        scatter(rig, scratch, 3, &mut pose.scales, vec3);
    }
    Ok(())
}

/// A pose's rotations, w-first, in the caller's order, into `out` (4 floats a bone).
pub(crate) fn write_rotations(rig: &CoreRig, pose: &Pose, out: &mut [f32]) {
    gather(rig, &pose.rotations, 4, out, put_quat_wxyz);
}

/// A pose's translations in the caller's order into `out` (3 floats a bone).
pub(crate) fn write_translations(rig: &CoreRig, pose: &Pose, out: &mut [f32]) {
    gather(rig, &pose.translations, 3, out, put_vec3);
}

/// A pose's scales in the caller's order into `out` (3 floats a bone).
pub(crate) fn write_scales(rig: &CoreRig, pose: &Pose, out: &mut [f32]) {
    gather(rig, &pose.scales, 3, out, put_vec3);
}
