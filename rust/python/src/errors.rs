//! The `tendon.TendonError` family, and the one place core errors (and panics) become
//! Python exceptions.

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};
use tendon_core::TendonError as CoreError;

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
pub(crate) fn to_py(err: CoreError) -> PyErr {
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
pub(crate) fn guarded<T>(f: impl FnOnce() -> Result<T, CoreError>) -> PyResult<T> {
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

/// Adds the exception types to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
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
    Ok(())
}

/// A count or index given as a Python int: negative ones, ones too large for any rig and
/// anything not a whole number are refused naming `what` (pyo3's own conversion raised a
/// bare OverflowError or TypeError that named nothing).
pub(crate) fn non_negative(value: &Bound<'_, PyAny>, what: &str) -> PyResult<usize> {
    let refuse = || {
        let shown = value
            .repr()
            .map_or_else(|_| "that value".to_owned(), |r| r.to_string());
        TendonError::new_err(format!(
            "{what} must be a whole number from 0 to {}, not {shown}",
            u32::MAX
        ))
    };
    let whole: i64 = value.extract().map_err(|_| refuse())?;
    u32::try_from(whole)
        .map(|v| v as usize)
        .map_err(|_| refuse())
}
