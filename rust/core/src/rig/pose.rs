//! Poses: local transforms relative to rest, in depth-first order.

use super::Rig;
use crate::error::{ensure_finite, ensure_sized, Result, TendonError};
use glam::{Quat, Vec3};

/// Each bone's local rotation, translation and scale relative to its rest transform
/// (what Blender calls `matrix_basis`), indexed in the rig's depth-first order.
#[derive(Debug, Clone, PartialEq)]
pub struct Pose {
    /// Local rotations (unit quaternions).
    pub rotations: Vec<Quat>,
    /// Local translations.
    pub translations: Vec<Vec3>,
    /// Local scales.
    pub scales: Vec<Vec3>,
}

impl Pose {
    /// The rest pose of a rig with `bones` bones.
    pub fn rest(bones: usize) -> Pose {
        Pose {
            rotations: vec![Quat::IDENTITY; bones],
            translations: vec![Vec3::ZERO; bones],
            scales: vec![Vec3::ONE; bones],
        }
    }

    /// Makes this the rest pose of `bones` bones, reusing its storage.
    pub fn reset(&mut self, bones: usize) {
        for (v, value) in [
            (&mut self.translations, Vec3::ZERO),
            (&mut self.scales, Vec3::ONE),
        ] {
            v.clear();
            v.resize(bones, value);
        }
        self.rotations.clear();
        self.rotations.resize(bones, Quat::IDENTITY);
    }

    /// Number of bones.
    pub fn len(&self) -> usize {
        self.rotations.len()
    }

    /// True when the pose has no bones.
    pub fn is_empty(&self) -> bool {
        self.rotations.is_empty()
    }

    /// Makes this pose a copy of `other`, reusing its storage.
    pub fn copy_from(&mut self, other: &Pose) {
        self.rotations.clone_from(&other.rotations);
        self.translations.clone_from(&other.translations);
        self.scales.clone_from(&other.scales);
    }

    /// Checks the pose fits `rig` and holds only finite numbers and non-zero rotations,
    /// naming the bone at fault; then normalises the rotations.
    pub fn validate(&mut self, rig: &Rig) -> Result<()> {
        let n = rig.len();
        self.check_size(n)?;
        for i in 0..n {
            let name = rig.name(i);
            ensure_finite(&self.rotations[i].to_array(), || {
                format!("pose rotation of bone '{name}'")
            })?;
            ensure_sized(&self.translations[i].to_array(), || {
                format!("pose translation of bone '{name}'")
            })?;
            ensure_sized(&self.scales[i].to_array(), || {
                format!("pose scale of bone '{name}'")
            })?;
            let len_sq = self.rotations[i].length_squared();
            if (len_sq - 1.0).abs() > 1e-6 {
                // Huge components too (normalised directly, they overflowed to zero).
                let Some(unit) = crate::math::unit_quaternion(self.rotations[i]) else {
                    return Err(TendonError::InvalidValue {
                        what: format!("pose rotation of bone '{name}'"),
                        reason: "a zero quaternion is not a rotation".into(),
                    });
                };
                self.rotations[i] = unit;
            }
        }
        Ok(())
    }

    /// Checks the pose has `n` rotations, translations and scales, naming what differs.
    pub fn check_size(&self, n: usize) -> Result<()> {
        for (what, got) in [
            ("pose rotations", self.rotations.len()),
            ("pose translations", self.translations.len()),
            ("pose scales", self.scales.len()),
        ] {
            if got != n {
                return Err(TendonError::Size {
                    what: what.into(),
                    expected: n,
                    got,
                });
            }
        }
        Ok(())
    }

    /// The same pose with bones in the description's (caller's) order.
    pub fn to_caller_order(&self, rig: &Rig) -> Result<Pose> {
        self.check_size(rig.len())?;
        Ok(self.reordered(rig.dfs_from_caller()))
    }

    /// Converts a pose given in the description's (caller's) order to depth-first order.
    pub fn from_caller_order(rig: &Rig, caller: &Pose) -> Result<Pose> {
        caller.check_size(rig.len())?;
        Ok(caller.reordered(rig.caller_from_dfs()))
    }

    /// Entry `k` of the result is entry `source[k]` of `self`.
    fn reordered(&self, source: &[usize]) -> Pose {
        Pose {
            rotations: source.iter().map(|&i| self.rotations[i]).collect(),
            translations: source.iter().map(|&i| self.translations[i]).collect(),
            scales: source.iter().map(|&i| self.scales[i]).collect(),
        }
    }
}
