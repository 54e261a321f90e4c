//! The rig: an editable description, the validated depth-first [`Rig`], poses and
//! forward kinematics.

mod limits;
mod pose;

pub use limits::{AxisLimit, AxisTension, JointLimits, SideTension};
pub use pose::Pose;

use crate::error::{ensure_finite, ensure_sized, Result, TendonError};
use glam::{Affine3A, Mat4, Quat, Vec3};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::ops::Range;

/// A translation, rotation and scale, applied scale first (`T * R * S`).
///
/// In JSON the rotation is `[x, y, z, w]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Transform {
    /// Translation.
    pub translation: Vec3,
    /// Rotation, a unit quaternion.
    pub rotation: Quat,
    /// Scale along each local axis.
    pub scale: Vec3,
}

impl Default for Transform {
    fn default() -> Self {
        Transform::IDENTITY
    }
}

impl Transform {
    /// No translation, rotation or scale.
    pub const IDENTITY: Transform = Transform {
        translation: Vec3::ZERO,
        rotation: Quat::IDENTITY,
        scale: Vec3::ONE,
    };

    /// The same transform as a matrix.
    pub fn to_affine(&self) -> Affine3A {
        Affine3A::from_scale_rotation_translation(self.scale, self.rotation, self.translation)
    }
}

/// One bone of a [`RigDesc`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoneDesc {
    /// Unique name.
    pub name: String,
    /// Name of the parent bone, `None` for a root.
    #[serde(default)]
    pub parent: Option<String>,
    /// Rest transform relative to the parent's frame (the parent's head is its origin), or
    /// to armature space for a root. The bone's head is this frame's origin.
    #[serde(default)]
    pub rest: Transform,
    /// Distance from head to tail along the bone's local +Y axis (Blender's convention).
    #[serde(default)]
    pub length: f32,
    /// The joint's limits.
    #[serde(default)]
    pub limits: JointLimits,
}

impl BoneDesc {
    /// A bone with the given name, parent, rest transform and length, and no limits.
    pub fn new(
        name: impl Into<String>,
        parent: Option<&str>,
        rest: Transform,
        length: f32,
    ) -> Self {
        BoneDesc {
            name: name.into(),
            parent: parent.map(str::to_owned),
            rest,
            length,
            limits: JointLimits::default(),
        }
    }
}

/// The editable, serde-friendly description of a rig. [`RigDesc::build`] validates it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RigDesc {
    /// The bones, in any order (this is the "caller order" of [`Rig::to_caller`]).
    pub bones: Vec<BoneDesc>,
}

impl RigDesc {
    /// Reads a description from JSON.
    pub fn from_json(json: &str) -> Result<Self> {
        serde_json::from_str(json).map_err(|e| TendonError::Json(e.to_string()))
    }

    /// Writes the description as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a rig description always serialises")
    }

    /// A description from armature-space rest matrices, as Blender's `Bone.matrix_local`
    /// gives them (the head at the origin, the bone along +Y), with each bone's parent as
    /// an index into the same arrays. Each rest transform becomes relative to its parent.
    /// Errors name the bone whose matrix is not finite, not invertible or sheared, or the
    /// array of the wrong size.
    pub fn from_armature_matrices(
        names: &[String],
        parents: &[Option<usize>],
        matrices: &[Mat4],
        lengths: &[f32],
    ) -> Result<RigDesc> {
        let n = names.len();
        for (what, got) in [
            ("parents", parents.len()),
            ("matrices", matrices.len()),
            ("lengths", lengths.len()),
        ] {
            if got != n {
                return Err(TendonError::Size {
                    what: what.into(),
                    expected: n,
                    got,
                });
            }
        }
        for (i, name) in names.iter().enumerate() {
            let what = || format!("rest matrix of bone '{name}'");
            ensure_finite(&matrices[i].to_cols_array(), what)?;
            if matrices[i].determinant().abs() < 1e-12 {
                return Err(TendonError::InvalidValue {
                    what: what(),
                    reason: "it is not invertible".into(),
                });
            }
            if let Some(p) = parents[i].filter(|&p| p >= n) {
                return Err(TendonError::BoneIndex {
                    what: format!("parent of bone '{name}'"),
                    index: p,
                    count: n,
                });
            }
        }
        let mut bones = Vec::with_capacity(n);
        for (i, name) in names.iter().enumerate() {
            let local = match parents[i] {
                None => matrices[i],
                Some(p) => matrices[p].inverse() * matrices[i],
            };
            let (scale, rotation, translation) = local.to_scale_rotation_translation();
            let rebuilt = Mat4::from_scale_rotation_translation(scale, rotation, translation);
            let size = local
                .to_cols_array()
                .iter()
                .fold(1.0f32, |m, v| m.max(v.abs()));
            if !rebuilt.abs_diff_eq(local, 1e-4 * size) || !rotation.is_finite() {
                return Err(TendonError::InvalidValue {
                    what: format!("rest matrix of bone '{name}'"),
                    reason: "relative to its parent it is sheared or projective, not translation, rotation and scale".into(),
                });
            }
            bones.push(BoneDesc {
                name: name.clone(),
                parent: parents[i].map(|p| names[p].clone()),
                rest: Transform {
                    translation,
                    rotation: rotation.normalize(),
                    scale,
                },
                length: lengths[i],
                limits: JointLimits::default(),
            });
        }
        Ok(RigDesc { bones })
    }

    /// Validates the description and builds the immutable, depth-first [`Rig`].
    pub fn build(&self) -> Result<Rig> {
        Rig::new(self)
    }
}

/// An immutable, validated rig stored as arrays in depth-first order: every parent comes
/// before its children (`parent(i) < i`) and each bone's subtree is the contiguous range
/// [`Rig::subtree`]. Among siblings, the one with the larger subtree comes first, so the
/// spine (which carries the arms and head) is the first chain of a humanoid.
#[derive(Debug, Clone)]
pub struct Rig {
    names: Vec<String>,
    parents: Vec<Option<usize>>,
    subtree_end: Vec<usize>,
    rest: Vec<Transform>,
    rest_affine: Vec<Affine3A>,
    lengths: Vec<f32>,
    limits: Vec<JointLimits>,
    dfs_from_caller: Vec<usize>,
    caller_from_dfs: Vec<usize>,
    by_name: HashMap<String, usize>,
}

impl Rig {
    /// Validates `desc` and builds the rig. Errors name the bone at fault.
    pub fn new(desc: &RigDesc) -> Result<Rig> {
        let n = desc.bones.len();
        if n == 0 {
            return Err(TendonError::EmptyRig);
        }
        let mut caller_index = HashMap::with_capacity(n);
        for (i, bone) in desc.bones.iter().enumerate() {
            validate_bone(bone)?;
            if caller_index.insert(bone.name.as_str(), i).is_some() {
                return Err(TendonError::DuplicateBone(bone.name.clone()));
            }
        }
        let mut caller_parent = Vec::with_capacity(n);
        for bone in &desc.bones {
            caller_parent.push(match &bone.parent {
                None => None,
                Some(p) => Some(*caller_index.get(p.as_str()).ok_or_else(|| {
                    TendonError::UnknownParent {
                        bone: bone.name.clone(),
                        parent: p.clone(),
                    }
                })?),
            });
        }
        let order = depth_first_order(&caller_parent, |i| &desc.bones[i].name)?;

        let mut dfs_from_caller = vec![0; n];
        for (dfs, &caller) in order.iter().enumerate() {
            dfs_from_caller[caller] = dfs;
        }
        let parents: Vec<Option<usize>> = order
            .iter()
            .map(|&c| caller_parent[c].map(|p| dfs_from_caller[p]))
            .collect();
        let mut subtree_end: Vec<usize> = (1..=n).collect();
        for i in (0..n).rev() {
            if let Some(p) = parents[i] {
                subtree_end[p] = subtree_end[p].max(subtree_end[i]);
            }
        }
        let rest: Vec<Transform> = order
            .iter()
            .map(|&c| {
                let mut t = desc.bones[c].rest;
                t.rotation = crate::math::unit_quaternion(t.rotation).expect("validated");
                t
            })
            .collect();
        let rig = Rig {
            rest_affine: rest.iter().map(Transform::to_affine).collect(),
            names: order.iter().map(|&c| desc.bones[c].name.clone()).collect(),
            lengths: order.iter().map(|&c| desc.bones[c].length).collect(),
            limits: order.iter().map(|&c| desc.bones[c].limits).collect(),
            by_name: order
                .iter()
                .enumerate()
                .map(|(dfs, &c)| (desc.bones[c].name.clone(), dfs))
                .collect(),
            parents,
            subtree_end,
            rest,
            dfs_from_caller,
            caller_from_dfs: order,
        };
        // Rest scales and offsets that multiply past the largest magnitude down a chain
        // (so a pose that scales and moves nothing needs no second look).
        Pose::rest(rig.len()).check_world_magnitudes(&rig)?;
        Ok(rig)
    }

    /// Reads a [`RigDesc`] from JSON and builds it.
    pub fn from_json(json: &str) -> Result<Rig> {
        RigDesc::from_json(json)?.build()
    }

    /// The description this rig was built from, bones in the caller's order.
    pub fn to_desc(&self) -> RigDesc {
        RigDesc {
            bones: (0..self.len())
                .map(|caller| {
                    let i = self.dfs_from_caller[caller];
                    BoneDesc {
                        name: self.names[i].clone(),
                        parent: self.parents[i].map(|p| self.names[p].clone()),
                        rest: self.rest[i],
                        length: self.lengths[i],
                        limits: self.limits[i],
                    }
                })
                .collect(),
        }
    }

    /// Number of bones.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Always false: a rig has at least one bone.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Name of bone `i` (depth-first index).
    pub fn name(&self, i: usize) -> &str {
        &self.names[i]
    }

    /// Depth-first index of the bone called `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// Parent of bone `i`, always a smaller index.
    pub fn parent(&self, i: usize) -> Option<usize> {
        self.parents[i]
    }

    /// All parents, in depth-first order.
    pub fn parents(&self) -> &[Option<usize>] {
        &self.parents
    }

    /// The bones of `i`'s subtree, `i` included: a contiguous range starting at `i`.
    pub fn subtree(&self, i: usize) -> Range<usize> {
        i..self.subtree_end[i]
    }

    /// Rest transform of bone `i` relative to its parent.
    pub fn rest(&self, i: usize) -> &Transform {
        &self.rest[i]
    }

    /// Rest transform of bone `i` relative to its parent, as a matrix.
    pub fn rest_matrix(&self, i: usize) -> &Affine3A {
        &self.rest_affine[i]
    }

    /// Length of bone `i`.
    pub fn length(&self, i: usize) -> f32 {
        self.lengths[i]
    }

    /// Limits of bone `i`.
    pub fn limits(&self, i: usize) -> &JointLimits {
        &self.limits[i]
    }

    /// Depth-first index of the bone at `caller_index` in the description.
    pub fn to_dfs(&self, caller_index: usize) -> usize {
        self.dfs_from_caller[caller_index]
    }

    /// Index in the description of depth-first bone `dfs_index`.
    pub fn to_caller(&self, dfs_index: usize) -> usize {
        self.caller_from_dfs[dfs_index]
    }

    /// For each description index, the depth-first index.
    pub fn dfs_from_caller(&self) -> &[usize] {
        &self.dfs_from_caller
    }

    /// For each depth-first index, the description index.
    pub fn caller_from_dfs(&self) -> &[usize] {
        &self.caller_from_dfs
    }

    /// The pose-space local matrix of bone `i`: rest transform, then the pose's basis.
    #[inline]
    pub fn local_matrix(&self, pose: &Pose, i: usize) -> Affine3A {
        self.rest_affine[i]
            * Affine3A::from_scale_rotation_translation(
                pose.scales[i],
                pose.rotations[i],
                pose.translations[i],
            )
    }

    /// Forward kinematics: every bone's armature-space matrix (head at the origin, bone
    /// along +Y), in one pass over the depth-first arrays. `world` is resized to fit.
    pub fn forward_kinematics(&self, pose: &Pose, world: &mut Vec<Affine3A>) {
        world.resize(self.len(), Affine3A::IDENTITY);
        self.forward_kinematics_from(pose, world, 0);
    }

    /// Forward kinematics for bones `start..` only; earlier entries of `world` are trusted.
    pub(crate) fn forward_kinematics_from(
        &self,
        pose: &Pose,
        world: &mut [Affine3A],
        start: usize,
    ) {
        for i in start..self.len() {
            let local = self.local_matrix(pose, i);
            world[i] = match self.parents[i] {
                Some(p) => world[p] * local,
                None => local,
            };
        }
    }

    /// The pose that puts every bone at the armature-space matrices `world` (depth-first
    /// order) under this rig's forward kinematics: each bone's transform relative to its
    /// rest frame on its parent's given matrix. Blender poses bones through constraints,
    /// drivers and inheritance options the rig does not model; read back this way, the pose
    /// Blender shows is where solvers start, so a chain hangs where the user sees it. A bone
    /// whose frame cannot be inverted (a parent scaled to zero), or any non-finite value,
    /// keeps the rest transform.
    pub fn pose_from_world(&self, world: &[Affine3A], pose: &mut Pose) {
        pose.reset(self.len());
        for i in 0..self.len().min(world.len()) {
            self.bone_pose_from_world(world, i, pose);
        }
    }

    /// [`pose_from_world`](Self::pose_from_world) for `bones` (depth-first indices) alone:
    /// each needs its own and its parent's matrix in `world`; every other bone of `pose`
    /// keeps its transform. What a solve needs of a large rig: its chains and the bones
    /// above them.
    pub fn pose_from_world_of(&self, world: &[Affine3A], bones: &[usize], pose: &mut Pose) {
        for &i in bones {
            self.bone_pose_from_world(world, i, pose);
        }
    }

    fn bone_pose_from_world(&self, world: &[Affine3A], i: usize, pose: &mut Pose) {
        let frame = match self.parents[i] {
            Some(p) => world[p] * self.rest_affine[i],
            None => self.rest_affine[i],
        };
        // Also catches a NaN determinant.
        let determinant = frame.matrix3.determinant().abs();
        if determinant.is_nan() || determinant <= f32::MIN_POSITIVE {
            pose.scales[i] = Vec3::ONE;
            pose.rotations[i] = Quat::IDENTITY;
            pose.translations[i] = Vec3::ZERO;
            return;
        }
        let (scale, rotation, translation) =
            (frame.inverse() * world[i]).to_scale_rotation_translation();
        if scale.is_finite() && rotation.is_finite() && translation.is_finite() {
            pose.scales[i] = scale;
            pose.rotations[i] = rotation.normalize();
            pose.translations[i] = translation;
        } else {
            pose.scales[i] = Vec3::ONE;
            pose.rotations[i] = Quat::IDENTITY;
            pose.translations[i] = Vec3::ZERO;
        }
    }

    /// Armature-space matrices of every bone for `pose` (allocating convenience).
    pub fn world_matrices(&self, pose: &Pose) -> Vec<Affine3A> {
        let mut world = Vec::new();
        self.forward_kinematics(pose, &mut world);
        world
    }

    /// Head and tail of bone `i` given its armature-space matrix.
    pub fn head_tail(&self, world: &Affine3A, i: usize) -> (Vec3, Vec3) {
        (
            Vec3::from(world.translation),
            world.transform_point3(Vec3::new(0.0, self.lengths[i], 0.0)),
        )
    }
}

fn validate_bone(bone: &BoneDesc) -> Result<()> {
    if bone.name.is_empty() {
        return Err(TendonError::InvalidValue {
            what: "bone name".into(),
            reason: "a bone name must not be empty".into(),
        });
    }
    let name = &bone.name;
    let r = &bone.rest;
    ensure_sized(&r.translation.to_array(), || {
        format!("rest translation of bone '{name}'")
    })?;
    ensure_finite(&r.rotation.to_array(), || {
        format!("rest rotation of bone '{name}'")
    })?;
    ensure_sized(&r.scale.to_array(), || {
        format!("rest scale of bone '{name}'")
    })?;
    ensure_sized(&[bone.length], || format!("length of bone '{name}'"))?;
    if crate::math::unit_quaternion(r.rotation).is_none() {
        return Err(TendonError::InvalidValue {
            what: format!("rest rotation of bone '{name}'"),
            reason: "a zero quaternion is not a rotation".into(),
        });
    }
    if bone.length < 0.0 {
        return Err(TendonError::InvalidValue {
            what: format!("length of bone '{name}'"),
            reason: format!("{} is negative", bone.length),
        });
    }
    bone.limits.validate(name)
}

/// Depth-first order of a forest given by parent indices; among siblings the larger
/// subtree first (ties keep the caller's order). Bones never reached sit on a cycle.
fn depth_first_order<'a>(
    parent: &[Option<usize>],
    name: impl Fn(usize) -> &'a String,
) -> Result<Vec<usize>> {
    let n = parent.len();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut roots = Vec::new();
    for (i, p) in parent.iter().enumerate() {
        match p {
            Some(p) => children[*p].push(i),
            None => roots.push(i),
        }
    }
    // Subtree sizes by an explicit post-order walk (no recursion: chains can be long).
    let mut size = vec![0usize; n];
    let mut visited = vec![false; n];
    let mut stack: Vec<(usize, bool)> = roots.iter().map(|&r| (r, false)).collect();
    while let Some((i, done)) = stack.pop() {
        if done {
            size[i] = 1 + children[i].iter().map(|&c| size[c]).sum::<usize>();
        } else {
            visited[i] = true;
            stack.push((i, true));
            stack.extend(children[i].iter().map(|&c| (c, false)));
        }
    }
    if let Some(i) = (0..n).find(|&i| !visited[i]) {
        return Err(TendonError::Cycle {
            bone: name(i).clone(),
        });
    }
    let by_size =
        |list: &mut Vec<usize>| list.sort_by(|&a, &b| size[b].cmp(&size[a]).then(a.cmp(&b)));
    by_size(&mut roots);
    for list in &mut children {
        by_size(list);
    }
    let mut order = Vec::with_capacity(n);
    let mut stack: Vec<usize> = roots.into_iter().rev().collect();
    while let Some(i) = stack.pop() {
        order.push(i);
        stack.extend(children[i].iter().rev());
    }
    Ok(order)
}
