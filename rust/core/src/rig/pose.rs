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
        // A pose that scales and moves nothing adds nothing to the rest, checked when the
        // rig was built (the whole check on every warm frame of a bake cost 4% of its solve).
        let scaled = self.scales.iter().any(|s| *s != Vec3::ONE);
        if scaled || self.translations.iter().any(|t| *t != Vec3::ZERO) {
            self.check_world_magnitudes(rig)?;
        }
        Ok(())
    }

    /// Checks that no bone's scale, its parents' applied, exceeds
    /// [`MAX_MAGNITUDE`](crate::error::MAX_MAGNITUDE), nor its place in the armature a
    /// thousand times that (its square still well inside `f32`): each scale is checked alone,
    /// but three of 1e15 down a chain multiply to 1e45 (the solve said reached with a
    /// residual of 3.4e38 and a tail at NaN; QA helper).
    pub(crate) fn check_world_magnitudes(&self, rig: &Rig) -> Result<()> {
        thread_local! {
            // Kept between calls: solving again allocates nothing.
            static BOUNDS: std::cell::RefCell<(Vec<f64>, Vec<f64>)> = const {
                std::cell::RefCell::new((Vec::new(), Vec::new()))
            };
        }
        BOUNDS.with_borrow_mut(|(scale, reach)| self.world_magnitudes_within(rig, scale, reach))
    }

    fn world_magnitudes_within(
        &self,
        rig: &Rig,
        scale: &mut Vec<f64>,
        reach: &mut Vec<f64>,
    ) -> Result<()> {
        let n = rig.len();
        // Per bone: its largest world scale factor and a bound on its head's distance from
        // the origin (depth-first order: parents first).
        scale.clear();
        scale.resize(n, 1.0);
        reach.clear();
        reach.resize(n, 0.0);
        for i in 0..n {
            let rest = rig.rest(i);
            let (parent_scale, parent_reach) = match rig.parent(i) {
                Some(p) => (scale[p], reach[p]),
                None => (1.0, 0.0),
            };
            let offset = (rest.translation + rest.rotation * (rest.scale * self.translations[i]))
                .abs()
                .max_element() as f64;
            let own = (rest.scale.abs().max_element() * self.scales[i].abs().max_element()) as f64;
            scale[i] = parent_scale * own;
            reach[i] = parent_reach + parent_scale * offset;
            let tail = reach[i] + scale[i] * rig.length(i) as f64;
            // A scale may reach the largest magnitude; a place a thousand times it (its
            // square still well inside f32's range).
            let limit = crate::error::MAX_MAGNITUDE as f64;
            if scale[i] > limit || tail > 1e3 * limit {
                return Err(TendonError::InvalidValue {
                    what: format!("scale of bone '{}' with its parents' (rest and pose)", rig.name(i)),
                    reason: format!(
                        "it puts the bone {:e} in size, {:e} from the armature's origin (at most {:e} and {:e})",
                        scale[i], tail, limit, 1e3 * limit
                    ),
                });
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
