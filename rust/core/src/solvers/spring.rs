//! Mass-spring (Verlet) chains for secondary motion: tails, ears, hair, antennae.
//!
//! Each chain's joints are point masses joined by rigid segments (the bones). Every fixed
//! internal time step the points move by Verlet integration (velocity from the last two
//! positions, damped, plus gravity), are pulled towards where the animation puts them
//! (stiffness), and are put back at their segment lengths, every segment at once, each
//! correction along the segment's direction at the start of the step and shared by the
//! inverse masses of its two ends (SHAKE, which keeps an undamped chain's energy; see
//! `rods.rs`); sphere colliders push points out, and the lengths are restored again after. The chain's root follows the
//! animation exactly. Bone rotations are then recovered in local frames, one smallest turn
//! per bone from its animated rotation (so twist is kept), through the joint's limits.
//!
//! A fixed time step with sub-stepping makes the motion independent of the frame rate and
//! stable for any step: one call simulates at most [`SpringParams::max_step`] seconds.

use super::rods::RodSolve;
use crate::error::{Result, TendonError};
use crate::math::from_to;
use crate::rig::{Pose, Rig};
use glam::{Affine3A, Quat, Vec3, Vec3A};
use serde::{Deserialize, Serialize};

/// The most gravity may move a point in one internal step, as a share of the shortest
/// segment (`SpringSimulation::substeps`).
const MAX_GRAVITY_STRETCH: f32 = 0.25;
/// The most parts a time step is split into for short segments (a chain of bones a
/// thousandth of a unit long under Earth's gravity in metres needs 2).
const MAX_SUBSTEPS: u32 = 64;

/// Settings of a [`SpringSimulation`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SpringParams {
    /// Gravity in armature space, units per second squared (default 9.81 down Z, as in
    /// Blender's Z-up scenes with metre units).
    pub gravity: Vec3,
    /// How fast free motion dies out, per second: velocity shrinks by `exp(-damping * t)`.
    pub damping: f32,
    /// How strongly each point is pulled towards its animated position: the natural
    /// frequency, radians per second, of the spring between them (acceleration
    /// `stiffness^2 * gap`; 0: the chain only hangs and swings). Values above half the
    /// time step's rate (120 at 1/240 s) act as that, which keeps the integration stable.
    pub stiffness: f32,
    /// Rounds per time step of pushing points out of colliders and restoring the lengths
    /// after (and the length passes, one segment at a time, wherever solving every length
    /// at once fails).
    pub iterations: u32,
    /// The fixed internal time step, seconds (1/120: whole steps per frame at 24, 30, 60
    /// and 120 frames per second; other rates carry the remainder to the next frame).
    pub time_step: f32,
    /// Most seconds one call simulates; a longer step is shortened to this, so a jump in
    /// time cannot stall or explode the simulation.
    pub max_step: f32,
}

impl Default for SpringParams {
    fn default() -> Self {
        SpringParams {
            gravity: Vec3::new(0.0, 0.0, -9.81),
            damping: 2.0,
            stiffness: 6.0,
            iterations: 2,
            time_step: 1.0 / 120.0,
            max_step: 1.0,
        }
    }
}

impl SpringParams {
    /// Checks every setting is finite and in range.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: &str, reason: String| {
            Err(TendonError::InvalidValue {
                what: format!("spring {what}"),
                reason,
            })
        };
        if !self.gravity.is_finite() {
            return bad("gravity", format!("{} is not finite", self.gravity));
        }
        for (what, value) in [("damping", self.damping), ("stiffness", self.stiffness)] {
            if !(value.is_finite() && value >= 0.0) {
                return bad(what, format!("{value} must be finite and not negative"));
            }
        }
        if !(self.time_step.is_finite() && self.time_step >= 1e-5 && self.time_step <= 1.0) {
            return bad(
                "time_step",
                format!("{} must lie in [1e-5, 1] seconds", self.time_step),
            );
        }
        if !(self.max_step.is_finite() && self.max_step > 0.0 && self.max_step <= 60.0) {
            return bad(
                "max_step",
                format!("{} must lie in (0, 60] seconds", self.max_step),
            );
        }
        if self.max_step / self.time_step > 100_000.0 {
            return bad("max_step", "needs more than 100000 time steps".into());
        }
        if !(1..=1000).contains(&self.iterations) {
            return bad(
                "iterations",
                format!("{} must lie in [1, 1000]", self.iterations),
            );
        }
        Ok(())
    }
}

/// One simulated chain: bones from the one nearest the root to the tip, each the child of
/// the one before, with the mass carried by each bone's far end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpringChain {
    /// Depth-first bone indices, root-most first.
    pub bones: Vec<usize>,
    /// Mass at the far end (child head or tail) of each bone; positive.
    pub masses: Vec<f32>,
}

impl SpringChain {
    /// The chain ending at `tip` and reaching `chain_length` bones up (0: to the root), all
    /// of unit mass.
    pub fn new(rig: &Rig, tip: usize, chain_length: usize) -> Result<SpringChain> {
        if tip >= rig.len() {
            return Err(TendonError::BoneIndex {
                what: "spring chain tip".into(),
                index: tip,
                count: rig.len(),
            });
        }
        let mut bones = vec![tip];
        while chain_length == 0 || bones.len() < chain_length {
            match rig.parent(*bones.last().expect("never empty")) {
                Some(parent) => bones.push(parent),
                None => break,
            }
        }
        bones.reverse();
        let masses = vec![1.0; bones.len()];
        Ok(SpringChain { bones, masses })
    }

    /// Sets every bone's mass (a heavier end swings more slowly against the rest).
    pub fn with_masses(mut self, masses: Vec<f32>) -> Self {
        self.masses = masses;
        self
    }
}

/// A sphere attached to a bone that simulated points cannot enter.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SphereCollider {
    /// The depth-first index of the bone carrying the sphere.
    pub bone: usize,
    /// The centre in the bone's frame (head at the origin, bone along +Y).
    pub center: Vec3,
    /// Radius, in armature units.
    pub radius: f32,
}

/// The state of a set of spring chains over time. Create it once, [`reset`] it at the
/// first frame (or let the first [`advance`] do it), then advance frame by frame.
///
/// [`reset`]: SpringSimulation::reset
/// [`advance`]: SpringSimulation::advance
#[derive(Debug, Clone)]
pub struct SpringSimulation {
    /// Settings, read at every step.
    pub params: SpringParams,
    chains: Vec<SpringChain>,
    colliders: Vec<SphereCollider>,
    /// First point of each chain in the flat arrays (a chain of k bones has k + 1 points).
    first_point: Vec<usize>,
    points: Vec<Vec3A>,
    previous: Vec<Vec3A>,
    /// The points at the frame's exact time: the last step moved on by the time left over
    /// (less than one step), so frame rates that do not divide the step agree.
    shown: Vec<Vec3A>,
    inverse_mass: Vec<f32>,
    /// Rest length of the segment from each point to the next (last point of a chain: 0).
    lengths: Vec<f32>,
    animated_before: Vec<Vec3A>,
    animated_now: Vec<Vec3A>,
    spheres_before: Vec<Vec3A>,
    spheres_now: Vec<Vec3A>,
    accumulator: f32,
    started: bool,
    /// The number of bones of the rig the simulation was made for.
    rig_bones: usize,
    world: Vec<Affine3A>,
    world_rot: Vec<Quat>,
    rods: RodSolve,
}

impl SpringSimulation {
    /// A simulation of `chains` (no bone in two chains) with `colliders` on `rig`.
    pub fn new(
        rig: &Rig,
        chains: Vec<SpringChain>,
        colliders: Vec<SphereCollider>,
        params: SpringParams,
    ) -> Result<SpringSimulation> {
        params.validate()?;
        let mut used = vec![false; rig.len()];
        let (mut first_point, mut inverse_mass, mut lengths) = (Vec::new(), Vec::new(), Vec::new());
        for (c, chain) in chains.iter().enumerate() {
            let what = |field: &str| format!("spring chain {c} {field}");
            if chain.bones.is_empty() {
                return Err(TendonError::InvalidValue {
                    what: what("bones"),
                    reason: "a chain needs at least one bone".into(),
                });
            }
            if chain.masses.len() != chain.bones.len() {
                return Err(TendonError::Size {
                    what: what("masses"),
                    expected: chain.bones.len(),
                    got: chain.masses.len(),
                });
            }
            for (k, &bone) in chain.bones.iter().enumerate() {
                if bone >= rig.len() {
                    return Err(TendonError::BoneIndex {
                        what: what("bones"),
                        index: bone,
                        count: rig.len(),
                    });
                }
                if std::mem::replace(&mut used[bone], true) {
                    return Err(TendonError::InvalidValue {
                        what: what("bones"),
                        reason: format!("bone '{}' is already in a spring chain", rig.name(bone)),
                    });
                }
                if k > 0 && rig.parent(bone) != Some(chain.bones[k - 1]) {
                    return Err(TendonError::InvalidValue {
                        what: what("bones"),
                        reason: format!(
                            "bone '{}' is not the child of '{}'",
                            rig.name(bone),
                            rig.name(chain.bones[k - 1])
                        ),
                    });
                }
                let mass = chain.masses[k];
                if !(mass.is_finite() && mass > 0.0) {
                    return Err(TendonError::InvalidValue {
                        what: format!("mass of bone '{}'", rig.name(bone)),
                        reason: format!("{mass} must be finite and positive"),
                    });
                }
            }
            first_point.push(inverse_mass.len());
            // The root point follows the animation: infinite mass.
            inverse_mass.push(0.0);
            inverse_mass.extend(chain.masses.iter().map(|m| 1.0 / m));
            lengths.resize(lengths.len() + chain.bones.len() + 1, 0.0);
        }
        for (k, collider) in colliders.iter().enumerate() {
            if collider.bone >= rig.len() {
                return Err(TendonError::BoneIndex {
                    what: format!("collider {k} bone"),
                    index: collider.bone,
                    count: rig.len(),
                });
            }
            if !(collider.center.is_finite()
                && collider.radius.is_finite()
                && collider.radius >= 0.0)
            {
                return Err(TendonError::InvalidValue {
                    what: format!("collider {k} (bone '{}')", rig.name(collider.bone)),
                    reason: "centre and radius must be finite, the radius not negative".into(),
                });
            }
        }
        let points = inverse_mass.len();
        let spheres = colliders.len();
        Ok(SpringSimulation {
            params,
            chains,
            colliders,
            first_point,
            points: vec![Vec3A::ZERO; points],
            previous: vec![Vec3A::ZERO; points],
            shown: vec![Vec3A::ZERO; points],
            inverse_mass,
            lengths,
            animated_before: vec![Vec3A::ZERO; points],
            animated_now: vec![Vec3A::ZERO; points],
            spheres_before: vec![Vec3A::ZERO; spheres],
            spheres_now: vec![Vec3A::ZERO; spheres],
            accumulator: 0.0,
            started: false,
            rig_bones: rig.len(),
            world: Vec::new(),
            world_rot: Vec::new(),
            rods: RodSolve::default(),
        })
    }

    /// The chains simulated.
    pub fn chains(&self) -> &[SpringChain] {
        &self.chains
    }

    /// The simulated joint positions of chain `c` (armature space) at the last frame: the
    /// root bone's head, then each bone's far end.
    pub fn points(&self, c: usize) -> &[Vec3A] {
        let start = self.first_point[c];
        &self.shown[start..start + self.chains[c].bones.len() + 1]
    }

    /// Restarts from `animated`, at rest (no velocity).
    pub fn reset(&mut self, rig: &Rig, animated: &Pose) -> Result<()> {
        let mut pose = animated.clone();
        self.read_animation(rig, &mut pose)?;
        self.restart();
        Ok(())
    }

    fn restart(&mut self) {
        self.points.copy_from_slice(&self.animated_now);
        self.previous.copy_from_slice(&self.animated_now);
        self.shown.copy_from_slice(&self.animated_now);
        self.animated_before.copy_from_slice(&self.animated_now);
        self.spheres_before.copy_from_slice(&self.spheres_now);
        self.accumulator = 0.0;
        self.started = true;
    }

    /// Carries the simulation through a move of the armature in the world since the last
    /// frame: `delta` takes the last frame's armature space to this frame's (this frame's
    /// world-to-armature matrix times the last frame's armature-to-world). The simulated
    /// points keep their places in the world, so a chain lags behind the armature object's
    /// own motion and swings after it, as it does behind a moving root bone; the last
    /// frame's animated points and colliders move with it, so the chain's root and the
    /// colliders travel between their two frames' places in the world. Call it before
    /// [`advance`](SpringSimulation::advance); before the first frame it changes nothing.
    pub fn carry(&mut self, delta: Affine3A) -> Result<()> {
        let m = delta.matrix3;
        let size = m.x_axis.length() * m.y_axis.length() * m.z_axis.length();
        if !(m.is_finite() && delta.translation.is_finite())
            || size <= 0.0
            || m.determinant().abs() <= 1e-6 * size
        {
            return Err(TendonError::InvalidValue {
                what: "armature move".into(),
                reason: "the armature's world matrix must be finite and invertible".into(),
            });
        }
        if !self.started {
            return Ok(());
        }
        for points in [
            &mut self.points,
            &mut self.previous,
            &mut self.shown,
            &mut self.animated_before,
            &mut self.spheres_before,
        ] {
            for point in points.iter_mut() {
                *point = delta.transform_point3a(*point);
            }
        }
        Ok(())
    }

    /// Advances `dt` seconds towards the animated pose `animated` (this frame's pose; the
    /// last call's is remembered and the animation is interpolated in between), writing
    /// `animated` with the chains' bones turned into `out`.
    pub fn advance(&mut self, rig: &Rig, animated: &Pose, dt: f32, out: &mut Pose) -> Result<()> {
        if !(dt.is_finite() && dt >= 0.0) {
            return Err(TendonError::InvalidValue {
                what: "spring time step".into(),
                reason: format!("{dt} seconds must be finite and not negative"),
            });
        }
        self.params.validate()?;
        out.copy_from(animated);
        self.read_animation(rig, out)?;
        if !self.started {
            self.restart();
        }
        let h = self.params.time_step;
        let span = dt.min(self.params.max_step);
        let carried = self.accumulator;
        self.accumulator += span;
        let steps = (self.accumulator / h + 1e-4).floor() as u32;
        self.accumulator = (self.accumulator - steps as f32 * h).max(0.0);
        let split = self.substeps(h);
        let sub = h / split as f32;
        for s in 0..steps {
            for q in 1..=split {
                // Where in this call's span the step ends: the animation is interpolated
                // there.
                let end = s as f32 * h + q as f32 * sub;
                let t = if span > 0.0 {
                    ((end - carried) / span).clamp(0.0, 1.0)
                } else {
                    1.0
                };
                self.step(sub, t);
            }
        }
        self.animated_before.copy_from_slice(&self.animated_now);
        self.spheres_before.copy_from_slice(&self.spheres_now);
        self.show(self.accumulator / h);
        self.write_rotations(rig, out);
        Ok(())
    }

    /// How many parts each time step `h` is solved in: enough that gravity moves a point by
    /// at most [`MAX_GRAVITY_STRETCH`] of the shortest segment in one. A step of gravity
    /// near a segment's length or more stretches it past what the rods' correction along
    /// its direction can restore: chains of 1 mm bones (a centimetre-scale import) hanging
    /// still jittered by a third of a bone length per frame and never settled.
    fn substeps(&self, h: f32) -> u32 {
        let shortest = self
            .lengths
            .iter()
            .copied()
            .filter(|&l| l > 0.0)
            .fold(f32::INFINITY, f32::min);
        let pull = self.params.gravity.length();
        let needed = h * (pull / (MAX_GRAVITY_STRETCH * shortest)).sqrt();
        if needed.is_finite() && needed > 1.0 {
            (needed.ceil() as u32).min(MAX_SUBSTEPS)
        } else {
            1
        }
    }

    /// The points `ahead` of a step (0 to 1) past the last one, lengths made exact.
    fn show(&mut self, ahead: f32) {
        for c in 0..self.chains.len() {
            let first = self.first_point[c];
            let count = self.chains[c].bones.len() + 1;
            self.shown[first] = self.animated_now[first];
            for i in first + 1..first + count {
                let moved = self.points[i] + (self.points[i] - self.previous[i]) * ahead;
                let direction = (moved - self.shown[i - 1])
                    .try_normalize()
                    .unwrap_or(Vec3A::Y);
                self.shown[i] = self.shown[i - 1] + direction * self.lengths[i - 1];
            }
        }
    }

    /// Validates the animated pose, runs its forward kinematics and reads the chains' and
    /// colliders' animated positions.
    fn read_animation(&mut self, rig: &Rig, pose: &mut Pose) -> Result<()> {
        // Another rig than the simulation's: its chains' bones mean nothing there (a
        // smaller one panicked on an index; QA helper).
        if rig.len() != self.rig_bones {
            return Err(TendonError::Size {
                what: "rig bones (the spring simulation was made for another rig)".into(),
                expected: self.rig_bones,
                got: rig.len(),
            });
        }
        pose.validate(rig)?;
        rig.forward_kinematics(pose, &mut self.world);
        for (c, chain) in self.chains.iter().enumerate() {
            let first = self.first_point[c];
            let bones = &chain.bones;
            for (k, &bone) in bones.iter().enumerate() {
                let head = self.world[bone].translation;
                self.animated_now[first + k] = head;
                let end = match bones.get(k + 1) {
                    Some(&child) => self.world[child].translation,
                    None => {
                        self.world[bone].transform_point3a(Vec3A::new(0.0, rig.length(bone), 0.0))
                    }
                };
                self.animated_now[first + k + 1] = end;
                self.lengths[first + k] = (end - head).length();
            }
        }
        for (k, collider) in self.colliders.iter().enumerate() {
            self.spheres_now[k] =
                self.world[collider.bone].transform_point3a(collider.center.into());
        }
        Ok(())
    }

    /// One fixed time step `h` ending at fraction `t` of the current frame's span.
    fn step(&mut self, h: f32, t: f32) {
        let params = self.params;
        let decay = (-params.damping * h).exp();
        let omega = params.stiffness.min(0.5 / h);
        let spring = omega * omega * h * h;
        let gravity = Vec3A::from(params.gravity) * (h * h);
        for c in 0..self.chains.len() {
            let first = self.first_point[c];
            let range = first..first + self.chains[c].bones.len() + 1;
            let points = &mut self.points[range.clone()];
            let previous = &mut self.previous[range.clone()];
            let inverse_mass = &self.inverse_mass[range.clone()];
            let lengths = &self.lengths[range.clone()];
            let (before, now) = (
                &self.animated_before[range.clone()],
                &self.animated_now[range],
            );
            // The root follows the animation.
            points[0] = before[0].lerp(now[0], t);
            previous[0] = points[0];
            for i in 1..points.len() {
                let animated = before[i].lerp(now[i], t);
                let here = points[i];
                let velocity = (here - previous[i]) * decay;
                previous[i] = here;
                points[i] = here + velocity + gravity + (animated - here) * spring;
            }
            // All lengths at once (passes one segment at a time where that fails); then,
            // while a sphere pushes points out, the lengths again. A chain no sphere touches
            // moves as if there were none (with passes around every collider, as before,
            // one far away took a swing's energy).
            if !self.rods.solve(points, previous, lengths, inverse_mass) {
                pull_passes(points, previous, lengths, inverse_mass, params.iterations);
            }
            if !self.colliders.is_empty() {
                for _ in 0..params.iterations {
                    let pushed = collide(
                        &self.colliders,
                        &self.spheres_before,
                        &self.spheres_now,
                        points,
                        t,
                    );
                    if !pushed {
                        break;
                    }
                    if !self.rods.solve(points, previous, lengths, inverse_mass) {
                        pull_passes(points, previous, lengths, inverse_mass, 1);
                    }
                }
            }
            // A last pass from the root makes every length exact (after the solve above,
            // to rounding).
            for i in 0..points.len() - 1 {
                let direction = (points[i + 1] - points[i])
                    .try_normalize()
                    .unwrap_or(Vec3A::Y);
                points[i + 1] = points[i] + direction * lengths[i];
            }
        }
    }

    /// Turns each chain bone, root-most first, by the smallest rotation that points it at
    /// its simulated far end, through the joint's limits.
    fn write_rotations(&mut self, rig: &Rig, out: &mut Pose) {
        self.world_rot.resize(rig.len(), Quat::IDENTITY);
        for i in 0..rig.len() {
            let local = rig.rest(i).rotation * out.rotations[i];
            self.world_rot[i] = match rig.parent(i) {
                Some(p) => self.world_rot[p] * local,
                None => local,
            };
        }
        for (c, chain) in self.chains.iter().enumerate() {
            let first = self.first_point[c];
            for (k, &bone) in chain.bones.iter().enumerate() {
                let parent_world = rig.parent(bone).map(|p| self.world[p]);
                let parent_rot = rig
                    .parent(bone)
                    .map_or(Quat::IDENTITY, |p| self.world_rot[p]);
                // The segment's direction under the current rotation: parent, rest, pose.
                let frame_linear = parent_world.map_or(rig.rest_matrix(bone).matrix3, |p| {
                    p.matrix3 * rig.rest_matrix(bone).matrix3
                });
                let segment = rest_segment(rig, out, &chain.bones, k) * out.scales[bone];
                let current = frame_linear * (out.rotations[bone] * segment);
                let wanted = Vec3::from(self.shown[first + k + 1] - self.shown[first + k]);
                if current.length_squared() < 1e-20 || wanted.length_squared() < 1e-20 {
                    let local = rig.local_matrix(out, bone);
                    self.world[bone] = parent_world.map_or(local, |p| p * local);
                    continue;
                }
                let delta = from_to(current.normalize(), wanted.normalize());
                let frame = parent_rot * rig.rest(bone).rotation;
                let turned = (frame.conjugate() * delta * frame * out.rotations[bone]).normalize();
                let limited = rig.limits(bone).clamp_rotation(turned);
                // Degenerate geometry (vanishing bones) keeps the animated rotation.
                if limited.is_finite() {
                    out.rotations[bone] = limited;
                }
                self.world_rot[bone] = frame * out.rotations[bone];
                let local = rig.local_matrix(out, bone);
                self.world[bone] = parent_world.map_or(local, |p| p * local);
            }
        }
    }
}

/// Moves points `i` and `i + 1` so they are `length` apart: along the segment's direction
/// at the start of the step (`before`), as the rod's tension acts, when that can restore
/// the length; else along the line joining them. Point `i` takes share `a` of the
/// correction, point `i + 1` the rest. With each point's share its inverse mass over the
/// pair's sum, the pair's mass-weighted centre stays put.
///
/// Corrected along the joining line alone, the outward pull of gravity lengthened a
/// segment and the correction then shortened its sideways motion with it: a swing lost
/// energy every step, the faster the shorter the bone (with no damping, a 5 cm bone's
/// swing of 0.15 rad was gone within 8 s, a 1 m bone's down to 0.11). Along the start
/// direction the sideways motion is kept whole (no loss at any length).
#[inline]
fn pull_to_length(points: &mut [Vec3A], before: &[Vec3A], i: usize, length: f32, a: f32) {
    let delta = points[i + 1] - points[i];
    let distance_sq = delta.length_squared();
    if distance_sq < 1e-24 {
        return;
    }
    let correction = match (before[i + 1] - before[i]).try_normalize() {
        Some(direction) => {
            // |delta + s direction| = length, the root of least |s|.
            let along = delta.dot(direction);
            let room = along * along - distance_sq + length * length;
            if room >= 0.0 {
                let s = if along >= 0.0 {
                    -along + room.sqrt()
                } else {
                    -along - room.sqrt()
                };
                Some(-direction * s)
            } else {
                None
            }
        }
        None => None,
    };
    let correction = correction.unwrap_or_else(|| {
        let distance = distance_sq.sqrt();
        delta * ((distance - length) / distance)
    });
    points[i] += correction * a;
    points[i + 1] -= correction * (1.0 - a);
}

/// `passes` length passes one segment at a time (the root of the first segment does not
/// move; the others share by inverse mass).
fn pull_passes(
    points: &mut [Vec3A],
    previous: &[Vec3A],
    lengths: &[f32],
    inverse_mass: &[f32],
    passes: u32,
) {
    for _ in 0..passes {
        pull_to_length(points, previous, 0, lengths[0], 0.0);
        for i in 1..points.len() - 1 {
            let (wa, wb) = (inverse_mass[i], inverse_mass[i + 1]);
            pull_to_length(points, previous, i, lengths[i], wa / (wa + wb));
        }
    }
}

/// Pushes the points (not the root) out of the spheres, placed at fraction `t` between
/// their last and current positions; returns whether any point was inside.
fn collide(
    colliders: &[SphereCollider],
    before: &[Vec3A],
    now: &[Vec3A],
    points: &mut [Vec3A],
    t: f32,
) -> bool {
    let mut pushed = false;
    for (k, collider) in colliders.iter().enumerate() {
        let centre = before[k].lerp(now[k], t);
        for point in &mut points[1..] {
            let offset = *point - centre;
            if offset.length_squared() < collider.radius * collider.radius {
                *point = centre + offset.try_normalize().unwrap_or(Vec3A::Z) * collider.radius;
                pushed = true;
            }
        }
    }
    pushed
}

/// The segment from bone `bones[k]`'s head to its far end (the next bone's head, or its
/// tail), in the bone's own frame.
fn rest_segment(rig: &Rig, pose: &Pose, bones: &[usize], k: usize) -> Vec3 {
    let bone = bones[k];
    match bones.get(k + 1) {
        Some(&child) => rig.local_matrix(pose, child).translation.into(),
        None => Vec3::new(0.0, rig.length(bone), 0.0),
    }
}
