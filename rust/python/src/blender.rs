//! Helpers in Blender's conventions, for the add-on: rotations as the channels of a
//! rotation mode, matrices split into transforms, animation curves evaluated as Blender
//! does, a scale spread over a chain, and the Euler orders and joint-limit defaults the
//! add-on's settings offer.

use crate::arrays::{ensure_finite_array, new_array, quat_wxyz, read_f32, vec3, ANY};
use crate::errors::{guarded, non_negative, NonFiniteError, ShapeError, TendonError};
use glam::{Mat4, Vec3};
use pyo3::prelude::*;
use tendon_core::{
    distribute_scale as core_distribute_scale, EulerOrder, JointLimits, RotationMode, ScaleLimits,
};

/// Rotations `(n, 4)` (w, x, y, z) as Blender channels of `mode` ("QUATERNION",
/// "AXIS_ANGLE" or an Euler order such as "XYZ"): `(n, 4)` or `(n, 3)` float32. Each row is
/// chosen nearest `previous` (same shape) when given; with `series`, each row is nearest
/// the row before it (the first nearest `previous[0]`), as keys along a timeline need.
#[pyfunction]
#[pyo3(signature = (rotations, mode, previous = None, series = false))]
pub(crate) fn rotation_channels<'py>(
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
pub(crate) fn matrices_to_transforms<'py>(
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
        // A matrix scaled to zero on an axis holds no rotation (glam's is NaN then): the
        // identity, which the caller can tell from the zero scale beside it.
        let rotation = if rotation.is_finite() {
            rotation
        } else {
            glam::Quat::IDENTITY
        };
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

/// Spreads a goal scale (3,) over `count` bones, root-most first: per axis the product of
/// the returned scales (count, 3) is the goal, or the closest the optional per-bone limits
/// `min` and `max` (count, 3; positive) allow.
#[pyfunction]
#[pyo3(signature = (goal, count, min = None, max = None))]
pub(crate) fn distribute_scale<'py>(
    py: Python<'py>,
    goal: &Bound<'py, PyAny>,
    count: &Bound<'py, PyAny>,
    min: Option<&Bound<'py, PyAny>>,
    max: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let count = non_negative(count, "count")?;
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
pub(crate) fn evaluate_fcurve<'py>(
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

/// The handles Blender gives "Auto Clamped" keys on curves that extend constantly and have
/// no cycles: `values` (k, m) holds k curves keyed on the same `frames` (m,), in frame order;
/// `smooth` is the curves' "Continuous Acceleration" smoothing. Returns (left, right), each
/// (k, m, 2), and per curve whether they were computed: not where this computation is not
/// Blender's (fewer than two keys, two on one frame, values that are not numbers; those
/// curves' handles are zero): ask Blender then. The curves are shared among threads.
#[pyfunction]
pub(crate) fn auto_clamped_handles<'py>(
    py: Python<'py>,
    frames: &Bound<'py, PyAny>,
    values: &Bound<'py, PyAny>,
    smooth: bool,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>, Vec<bool>)> {
    let (mut times, mut curves) = (Vec::new(), Vec::new());
    let m = read_f32(frames, "frames", &[ANY], &mut times)?[0];
    let k = read_f32(values, "values", &[ANY, m], &mut curves)?[0];
    let handles = py.detach(|| {
        guarded(|| {
            Ok(tendon_core::math::handles::auto_clamped_handles_of_curves(
                &times, &curves, smooth, 0,
            ))
        })
    })?;
    let (mut left, mut right) = (vec![0.0f32; k * m * 2], vec![0.0f32; k * m * 2]);
    let mut computed = vec![false; k];
    for (curve, handles) in handles.iter().enumerate() {
        if let Some((lefts, rights)) = handles {
            for (key, (l, r)) in lefts.iter().zip(rights).enumerate() {
                let at = (curve * m + key) * 2;
                left[at..at + 2].copy_from_slice(&l.to_array());
                right[at..at + 2].copy_from_slice(&r.to_array());
            }
            computed[curve] = true;
        }
    }
    Ok((
        new_array(py, &[k, m, 2], &left)?,
        new_array(py, &[k, m, 2], &right)?,
        computed,
    ))
}

/// Blender's six Euler rotation orders ("XYZ", ...), as joint limits and rotation channels
/// name them, the default first.
#[pyfunction]
pub(crate) fn euler_orders() -> Vec<String> {
    EulerOrder::ALL
        .iter()
        .map(|order| {
            let name = serde_json::to_value(order).expect("an Euler order serialises");
            name.as_str().expect("as its name").to_owned()
        })
        .collect()
}

/// The limits of a joint nobody limited, as a dict shaped like one bone's entry in the
/// limits JSON: Euler order, free axes, tension per axis and side, roll, neutral.
#[pyfunction]
pub(crate) fn default_limits(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let text = serde_json::to_string(&JointLimits::default()).expect("limits serialise");
    py.import("json")?.call_method1("loads", (text,))
}
