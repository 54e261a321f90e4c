//! What the solvers are asked to reach.

use crate::error::{ensure_finite, Result, TendonError};
use glam::{Quat, Vec3};
use serde::{Deserialize, Serialize};

/// Which point of the effector bone should reach the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectorPoint {
    /// The bone's tail (head + rotation * (0, length, 0)), like Blender's IK `use_tail`.
    #[default]
    Tail,
    /// The bone's head; the bone's own rotation then only matters for a rotation target.
    Head,
}

/// One IK goal: a bone's head or tail should reach a position, optionally with a rotation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Goal {
    /// The effector bone, as a depth-first index ([`Rig::index_of`](crate::Rig::index_of)).
    pub bone: usize,
    /// Which point of the bone reaches for the target.
    pub point: EffectorPoint,
    /// Target position in armature space.
    pub target: Vec3,
    /// Optional armature-space target rotation of the effector bone.
    pub rotation: Option<Quat>,
    /// How much the rotation target counts, 0 (ignored) to 1 (fully).
    pub rotation_weight: f32,
    /// How much this goal counts against the others (0 disables it: it is neither solved
    /// nor counted in the report).
    pub weight: f32,
    /// How many bones, counting the effector bone, the goal may move; 0 means every bone
    /// up to the rig's root.
    pub chain_length: usize,
    /// Optional armature-space pole position: the chain bends towards it.
    pub pole: Option<Vec3>,
    /// How the pole is aimed at. `None`: after every step the chain turns about the line
    /// root-effector so its bend (the mean offset of its inner joints from that line)
    /// points at the pole. `Some(angle)`: Blender's IK convention, so imported constraints
    /// pose alike: before solving, the chain turns as a whole so its root bone's X axis,
    /// turned by `angle` radians about its Y axis towards Z, points at the pole; the solve
    /// bends it from there.
    pub pole_angle: Option<f32>,
}

impl Default for Goal {
    fn default() -> Self {
        Goal {
            bone: 0,
            point: EffectorPoint::Tail,
            target: Vec3::ZERO,
            rotation: None,
            rotation_weight: 1.0,
            weight: 1.0,
            chain_length: 0,
            pole: None,
            pole_angle: None,
        }
    }
}

impl Goal {
    /// A goal for the tail of `bone` with default settings.
    pub fn new(bone: usize, target: Vec3) -> Self {
        Goal {
            bone,
            target,
            ..Goal::default()
        }
    }

    /// Limits the goal to `chain_length` bones (0 = up to the root).
    pub fn with_chain_length(mut self, chain_length: usize) -> Self {
        self.chain_length = chain_length;
        self
    }

    /// Adds a rotation target with its weight.
    pub fn with_rotation(mut self, rotation: Quat, weight: f32) -> Self {
        self.rotation = Some(rotation);
        self.rotation_weight = weight;
        self
    }

    /// Adds a pole position.
    pub fn with_pole(mut self, pole: Vec3) -> Self {
        self.pole = Some(pole);
        self
    }

    /// Adds a pole aimed at the Blender way (see [`Goal::pole_angle`]).
    pub fn with_blender_pole(mut self, pole: Vec3, angle: f32) -> Self {
        self.pole = Some(pole);
        self.pole_angle = Some(angle);
        self
    }

    /// Sets the goal's weight.
    pub fn with_weight(mut self, weight: f32) -> Self {
        self.weight = weight;
        self
    }

    /// Uses the bone's head instead of its tail.
    pub fn at_head(mut self) -> Self {
        self.point = EffectorPoint::Head;
        self
    }

    /// The goal with its rotation normalised, after checking the values that need no rig:
    /// the target, weights, pole, pole angle and rotation finite, the weights not negative
    /// and the rotation not zero. `what` names a field for the error (solvers name the goal
    /// and its bone; the Python binding the goal as it is made).
    pub fn checked(&self, what: impl Fn(&str) -> String) -> Result<Goal> {
        let mut goal = *self;
        ensure_finite(&goal.target.to_array(), || what("target"))?;
        ensure_finite(&[goal.weight], || what("weight"))?;
        ensure_finite(&[goal.rotation_weight], || what("rotation weight"))?;
        for (field, value) in [
            ("weight", goal.weight),
            ("rotation weight", goal.rotation_weight),
        ] {
            if value < 0.0 {
                return Err(TendonError::InvalidValue {
                    what: what(field),
                    reason: format!("{value} is negative"),
                });
            }
        }
        if let Some(angle) = goal.pole_angle {
            ensure_finite(&[angle], || what("pole angle"))?;
        }
        if let Some(pole) = goal.pole {
            ensure_finite(&pole.to_array(), || what("pole"))?;
        }
        if let Some(rotation) = goal.rotation {
            ensure_finite(&rotation.to_array(), || what("rotation"))?;
            let Some(unit) = crate::math::unit_quaternion(rotation) else {
                return Err(TendonError::InvalidValue {
                    what: what("rotation"),
                    reason: "a zero quaternion is not a rotation".into(),
                });
            };
            goal.rotation = Some(unit);
        }
        Ok(goal)
    }
}
