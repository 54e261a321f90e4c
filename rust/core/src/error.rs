//! The one error type of the core. Every variant names the bone, goal or array at fault.

/// Result alias used throughout `tendon-core`.
pub type Result<T> = std::result::Result<T, TendonError>;

/// Invalid input. Non-convergence is not an error: it is reported by
/// [`SolveReport::reached`](crate::SolveReport::reached).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TendonError {
    /// The rig description has no bones.
    #[error("the rig has no bones")]
    EmptyRig,
    /// Two bones share a name.
    #[error("bone name '{0}' is used more than once")]
    DuplicateBone(String),
    /// A bone names a parent that does not exist.
    #[error("bone '{bone}' has parent '{parent}', which is not a bone of the rig")]
    UnknownParent {
        /// The bone whose parent is unknown.
        bone: String,
        /// The parent name it gave.
        parent: String,
    },
    /// Following parents from this bone never reaches a root.
    #[error("bone '{bone}' is its own ancestor (its parent chain loops)")]
    Cycle {
        /// A bone on the loop.
        bone: String,
    },
    /// A number that must be finite is NaN or infinite.
    #[error("{what} is not finite")]
    NonFinite {
        /// What holds the value, e.g. "rest translation of bone 'shin'".
        what: String,
    },
    /// A joint limit is malformed.
    #[error("invalid {} on bone '{bone}': {reason}", limit_label(*.axis))]
    InvalidLimit {
        /// The bone whose limit is wrong.
        bone: String,
        /// The axis, 'x', 'y' or 'z', or ' ' for a setting of the whole joint (the roll
        /// of its limit axes, its neutral rotation).
        axis: char,
        /// Why it is refused.
        reason: String,
    },
    /// A value is out of its allowed range.
    #[error("invalid {what}: {reason}")]
    InvalidValue {
        /// What holds the value.
        what: String,
        /// Why it is refused.
        reason: String,
    },
    /// A bone index does not exist in the rig.
    #[error("{what}: bone index {index} is out of range for a rig of {count} bones")]
    BoneIndex {
        /// Where the index came from, e.g. "goal 2".
        what: String,
        /// The index given.
        index: usize,
        /// The number of bones.
        count: usize,
    },
    /// An array has the wrong number of entries.
    #[error("{what} has {got} entries, expected {expected}")]
    Size {
        /// The array.
        what: String,
        /// The length required.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// A JSON document could not be read.
    #[error("invalid JSON: {0}")]
    Json(String),
}

/// Checks that every component is finite, naming `what` otherwise.
pub(crate) fn ensure_finite(values: &[f32], what: impl FnOnce() -> String) -> Result<()> {
    if values.iter().all(|v| v.is_finite()) {
        Ok(())
    } else {
        Err(TendonError::NonFinite { what: what() })
    }
}

/// What an [`TendonError::InvalidLimit`] is about: an axis's limit, or the joint's.
fn limit_label(axis: char) -> String {
    match axis {
        ' ' => "joint limits".into(),
        axis => format!("{axis} limit"),
    }
}

/// The largest magnitude a rig's or pose's lengths, offsets and scales may have: squared
/// (every distance is), a larger one overflows `f32` on the way (a bone 1e20 long was
/// reported reached with an infinite residual).
pub const MAX_MAGNITUDE: f32 = 1e15;

/// Checks that every component is finite and at most [`MAX_MAGNITUDE`] in size, naming
/// `what` otherwise.
pub(crate) fn ensure_sized(values: &[f32], what: impl Fn() -> String) -> Result<()> {
    ensure_finite(values, &what)?;
    match values.iter().find(|v| v.abs() > MAX_MAGNITUDE) {
        Some(v) => Err(TendonError::InvalidValue {
            what: what(),
            reason: format!("{v} is larger than {MAX_MAGNITUDE:e} in size"),
        }),
        None => Ok(()),
    }
}

impl TendonError {
    /// The error with `place` (e.g. "at frame 3") added to what it names, for errors met
    /// while solving one of many frames.
    pub fn at(self, place: &str) -> Self {
        match self {
            TendonError::NonFinite { what } => TendonError::NonFinite {
                what: format!("{what} {place}"),
            },
            TendonError::InvalidValue { what, reason } => TendonError::InvalidValue {
                what: format!("{what} {place}"),
                reason,
            },
            TendonError::BoneIndex { what, index, count } => TendonError::BoneIndex {
                what: format!("{what} {place}"),
                index,
                count,
            },
            TendonError::Size {
                what,
                expected,
                got,
            } => TendonError::Size {
                what: format!("{what} {place}"),
                expected,
                got,
            },
            other => other,
        }
    }
}
