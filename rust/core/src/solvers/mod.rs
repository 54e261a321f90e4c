//! The IK solvers. Each takes a rig, a start pose and goals, and returns a pose (local
//! rotations; translations and scales are kept) and a [`SolveReport`].
//!
//! Every solver owns reusable scratch memory: after the first solve on a rig, solving
//! again allocates nothing. On limited joints, FABRIK's and CCD's damped least squares
//! finish and the Jacobian solvers' retries from a stalled pose size their
//! own memory the first time they run (tests/allocation.rs checks both). Any solver can
//! start from another's output (for example CCD for a rough pose, then damped least
//! squares to refine it).

mod ccd;
mod driver;
pub(crate) use driver::{chain_root, validate_goal, MIN_LENGTH_SCALE};
mod apart;
pub(crate) use apart::Apart;
mod fabrik;
mod finish;
mod jacobian;
mod rods;
mod scale;
mod spring;
mod tension;
mod two_bone;

pub use ccd::{Ccd, CcdParams};
pub use fabrik::{Fabrik, FabrikParams};
pub use jacobian::{JacobianDls, JacobianDlsParams, JacobianTranspose, JacobianTransposeParams};
pub use scale::{distribute_scale, ScaleLimits};
pub use spring::{SphereCollider, SpringChain, SpringParams, SpringSimulation};
pub use tension::{TensionMinimizer, TensionParams, TensionReference, TensionStart};
pub use two_bone::{two_bone_limb, LimbSolution, TwoBone, TwoBoneParams};

use crate::error::{Result, TendonError};
use crate::goal::Goal;
use crate::rig::{Pose, Rig};
use serde::{Deserialize, Serialize};

/// Settings every iterative solver shares, with the shared driver that applies them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct IterationParams {
    /// Most iterations per pass of a solve. A solve may run more than one pass: full-body
    /// solving's second phase, and the Jacobian solvers' retries from a stalled pose
    /// (joints moved off their bounds, missed chains at their neutral: at most three),
    /// each with this cap; the report counts them all.
    pub max_iterations: u32,
    /// A goal is reached when its effector is within `tolerance` times its chain's length
    /// of the target (scale-free: the same value suits a finger and a crane).
    pub tolerance: f32,
    /// A full-weight rotation target is reached within this angle (radians).
    pub rotation_tolerance: f32,
    /// Largest turn of one joint in one iteration (radians); keeps steps stable. The
    /// iterations that turn joints keep to it; two-bone's closed form and FABRIK's pass
    /// over points (chains without limits) move by whole steps, damped least squares'
    /// finishing passes and a bake's jump-guard solve take its own 0.5, and the CCD sweeps
    /// of the Jacobian solvers' retry from limits CCD's own.
    pub max_step_angle: f32,
    /// Full-body solving: goals take their chains in depth-first order of the chains'
    /// top bones, and a goal does not move bones an earlier goal's chain moves (so a head
    /// looking bends the spine, and the arms reach from wherever it leaves the chest) —
    /// unless it cannot reach otherwise: then a second phase (its own `max_iterations`)
    /// solves with shared chains from the start, kept if it loses no goal the first
    /// reached and comes closer.
    pub exclusive_chains: bool,
    /// Let the rig's root translate to help the effectors (iterative solvers): when a
    /// target lies beyond its chain's reach from where the root is, the root moves by the
    /// least translation that brings the goals within reach together (goals none brings
    /// within reach with the others are left out), then follows by half the weighted mean
    /// remaining error of the goals within reach.
    pub move_root: bool,
}

impl Default for IterationParams {
    fn default() -> Self {
        IterationParams {
            max_iterations: 100,
            tolerance: 1e-5,
            rotation_tolerance: 1e-4,
            max_step_angle: std::f32::consts::PI,
            exclusive_chains: false,
            move_root: false,
        }
    }
}

impl IterationParams {
    /// Checks the settings are finite and positive.
    pub fn validate(&self) -> Result<()> {
        for (what, value) in [
            ("tolerance", self.tolerance),
            ("rotation tolerance", self.rotation_tolerance),
            ("max step angle", self.max_step_angle),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(TendonError::InvalidValue {
                    what: what.into(),
                    reason: format!("{value} must be a positive finite number"),
                });
            }
        }
        Ok(())
    }
}

/// What a solve achieved. Not reaching a target is a result, not an error.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct SolveReport {
    /// Iterations run.
    pub iterations: u32,
    /// Largest distance from an effector to its target (goals of weight 0 are disabled and
    /// not counted, here or below).
    pub residual: f32,
    /// Largest angle (radians) between an effector bone and its rotation target.
    pub rotation_residual: f32,
    /// Whether every goal is within tolerance.
    pub reached: bool,
}

/// How much closer (a share of the best residual) a try must come to replace the best.
const CLOSER: f32 = 1e-3;

/// The best of several tries at one solve (FABRIK's and CCD's finish, the Jacobian
/// solvers' retries): every try's iterations count, and a try that reaches, or else comes
/// closer, replaces the best.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Closest {
    best: SolveReport,
    iterations: u32,
}

impl Closest {
    /// Starts from the first try's report.
    pub(crate) fn new(first: SolveReport) -> Self {
        Closest {
            best: first,
            iterations: first.iterations,
        }
    }

    /// Counts `tried`; true when it is the new best (its pose is the one to keep): one that
    /// reaches, or (neither reaching) comes closer by more than a thousandth. Tries that
    /// tie keep the first, the nearest the caller's start: a later retry from the joints'
    /// neutral, missing a target beyond reach by as much, had turned a hand 33 degrees that
    /// could not move its own goal, and bakes popped (QA helper).
    pub(crate) fn offer(&mut self, tried: SolveReport) -> bool {
        self.iterations += tried.iterations;
        let better = (tried.reached && !self.best.reached)
            || (tried.reached == self.best.reached
                && tried.residual < self.best.residual * (1.0 - CLOSER));
        if better {
            self.best = tried;
        }
        better
    }

    /// Whether the best try reached.
    pub(crate) fn reached(&self) -> bool {
        self.best.reached
    }

    /// The best try's report, with every try's iterations.
    pub(crate) fn report(&self) -> SolveReport {
        SolveReport {
            iterations: self.iterations,
            ..self.best
        }
    }
}

/// An IK solver with its own scratch memory.
pub trait Solver {
    /// Solves `goals` from `start`, writing the result into `out` (resized as needed).
    fn solve_into(
        &mut self,
        rig: &Rig,
        start: &Pose,
        goals: &[Goal],
        out: &mut Pose,
    ) -> Result<SolveReport>;

    /// Whether [`Solver::solve_near`] reads its `near` pose (a caller may then skip making
    /// one).
    fn uses_near(&self) -> bool {
        false
    }

    /// Solves `goals` from `start` like [`Solver::solve_into`], with `near` as the pose
    /// "the pose before the solve" means where it is not `start`: when baking from the
    /// previous frame's answer, `near` is the frame's animated pose. Only the tension
    /// minimiser's [`TensionReference::Start`] uses it; the other solvers ignore it.
    fn solve_near(
        &mut self,
        rig: &Rig,
        start: &Pose,
        near: &Pose,
        goals: &[Goal],
        out: &mut Pose,
    ) -> Result<SolveReport> {
        let _ = near;
        self.solve_into(rig, start, goals, out)
    }

    /// Whether the solver solves goals in separate groups
    /// ([`crate::batch::independent_groups`]) one group at a time, each as if alone: FABRIK,
    /// CCD and damped least squares do (not when the root moves, which carries every goal),
    /// so a limb's answer does not depend on the other limbs in the solve, and frame ranges
    /// spread the groups over threads ([`crate::batch::solve_frames_threaded`]).
    fn solves_groups_apart(&self) -> bool {
        false
    }

    /// Whether a warm frame range re-solves, by damped least squares, the frames where this
    /// solver's answer jumps from where the frame started ([`crate::batch`]): the
    /// iterative solvers, whose start chooses among the answers. A closed form's answer is
    /// the same from any start (two-bone's chain of three ignores a pole damped least
    /// squares follows: re-solved frames left the elbow 7 cm from Solve IK's; QA helper).
    fn guards_warm_frames(&self) -> bool {
        true
    }

    /// The iteration cap, tolerances and step clamp the solver works to (a custom solver
    /// without them: the defaults). The frame driver's jump guard solves again with these.
    fn iteration_params(&self) -> IterationParams {
        IterationParams::default()
    }

    /// Solves `goals` from `start` and returns the new pose.
    fn solve(&mut self, rig: &Rig, start: &Pose, goals: &[Goal]) -> Result<(Pose, SolveReport)> {
        let mut out = Pose::rest(0);
        let report = self.solve_into(rig, start, goals, &mut out)?;
        Ok((out, report))
    }
}

/// Any solver with its parameters, as configuration files and the Python layer name them:
/// `{"solver": "fabrik", "max_iterations": 50}`. Settings left out take that solver's own
/// defaults ([`SolverConfig::by_name`]; read field by field they took the generic ones: a
/// transpose given in JSON stopped after 100 iterations instead of 5000; QA helper); a
/// setting the solver does not have is an error naming it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "solver", rename_all = "snake_case")]
pub enum SolverConfig {
    /// [`Fabrik`].
    Fabrik(FabrikParams),
    /// [`Ccd`].
    Ccd(CcdParams),
    /// [`JacobianTranspose`].
    JacobianTranspose(JacobianTransposeParams),
    /// [`JacobianDls`].
    JacobianDls(JacobianDlsParams),
    /// [`TwoBone`].
    TwoBone(TwoBoneParams),
    /// [`TensionMinimizer`].
    Tension(TensionParams),
}

/// [`SolverConfig`]'s fields as serde reads them, once the solver's defaults fill the gaps.
#[derive(Deserialize)]
#[serde(tag = "solver", rename_all = "snake_case")]
enum SolverConfigFields {
    Fabrik(FabrikParams),
    Ccd(CcdParams),
    JacobianTranspose(JacobianTransposeParams),
    JacobianDls(JacobianDlsParams),
    TwoBone(TwoBoneParams),
    Tension(TensionParams),
}

impl<'de> Deserialize<'de> for SolverConfig {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        use serde::de::Error;
        let given = serde_json::Map::<String, serde_json::Value>::deserialize(deserializer)?;
        let name = match given.get("solver") {
            None => return Err(D::Error::missing_field("solver")),
            Some(serde_json::Value::String(name)) => name.as_str(),
            Some(other) => {
                return Err(D::Error::custom(format!(
                    "'solver' must be a solver's name ({}), not {other}",
                    SolverConfig::NAMES.join(", ")
                )))
            }
        };
        let defaults = SolverConfig::by_name(name).map_err(D::Error::custom)?;
        let mut merged = match serde_json::to_value(defaults).map_err(D::Error::custom)? {
            serde_json::Value::Object(map) => map,
            _ => return Err(D::Error::custom("a solver's settings are an object")),
        };
        // A misspelt setting is named (serde's flattening would pass it by unread).
        if let Some(unknown) = given.keys().find(|key| !merged.contains_key(*key)) {
            let mut known: Vec<&str> = merged
                .keys()
                .map(String::as_str)
                .filter(|k| *k != "solver")
                .collect();
            known.sort_unstable();
            return Err(D::Error::custom(format!(
                "{name} has no setting '{unknown}'; its settings are {}",
                known.join(", ")
            )));
        }
        let defaults = merged.clone();
        merged.extend(given.clone());
        let fields: SolverConfigFields = serde_json::from_value(serde_json::Value::Object(merged))
            .map_err(|error| {
                // serde_json names no field here: find the setting that fails alone over
                // the defaults ("damping": "high" said only "expected f32"; QA helper).
                let culprit = given.iter().find(|(key, value)| {
                    let mut one = defaults.clone();
                    one.insert((*key).clone(), (*value).clone());
                    serde_json::from_value::<SolverConfigFields>(serde_json::Value::Object(one))
                        .is_err()
                });
                match culprit {
                    Some((key, value)) => D::Error::custom(format!(
                        "{name} setting '{key}' cannot be {value}: {error}"
                    )),
                    None => D::Error::custom(error),
                }
            })?;
        Ok(match fields {
            SolverConfigFields::Fabrik(p) => SolverConfig::Fabrik(p),
            SolverConfigFields::Ccd(p) => SolverConfig::Ccd(p),
            SolverConfigFields::JacobianTranspose(p) => SolverConfig::JacobianTranspose(p),
            SolverConfigFields::JacobianDls(p) => SolverConfig::JacobianDls(p),
            SolverConfigFields::TwoBone(p) => SolverConfig::TwoBone(p),
            SolverConfigFields::Tension(p) => SolverConfig::Tension(p),
        })
    }
}

impl SolverConfig {
    /// Every solver with its default parameters, in the order of [`SolverConfig::NAMES`].
    pub fn all() -> [SolverConfig; 6] {
        [
            SolverConfig::Fabrik(FabrikParams::default()),
            SolverConfig::Ccd(CcdParams::default()),
            SolverConfig::JacobianTranspose(JacobianTransposeParams::default()),
            SolverConfig::JacobianDls(JacobianDlsParams::default()),
            SolverConfig::TwoBone(TwoBoneParams::default()),
            SolverConfig::Tension(TensionParams::default()),
        ]
    }

    /// The solvers' names, as the `"solver"` tag of the JSON form spells them.
    pub const NAMES: [&'static str; 6] = [
        "fabrik",
        "ccd",
        "jacobian_transpose",
        "jacobian_dls",
        "two_bone",
        "tension",
    ];

    /// The solver called `name` with its default parameters.
    pub fn by_name(name: &str) -> Result<SolverConfig> {
        match Self::NAMES.iter().position(|n| *n == name) {
            Some(i) => Ok(Self::all()[i]),
            None => Err(TendonError::InvalidValue {
                what: "solver name".into(),
                reason: format!("'{name}' is not one of {}", Self::NAMES.join(", ")),
            }),
        }
    }

    /// This solver's name.
    pub fn name(&self) -> &'static str {
        Self::NAMES[match self {
            SolverConfig::Fabrik(_) => 0,
            SolverConfig::Ccd(_) => 1,
            SolverConfig::JacobianTranspose(_) => 2,
            SolverConfig::JacobianDls(_) => 3,
            SolverConfig::TwoBone(_) => 4,
            SolverConfig::Tension(_) => 5,
        }]
    }

    /// The settings every solver shares.
    pub fn iteration_mut(&mut self) -> &mut IterationParams {
        match self {
            SolverConfig::Fabrik(p) => &mut p.iteration,
            SolverConfig::Ccd(p) => &mut p.iteration,
            SolverConfig::JacobianTranspose(p) => &mut p.iteration,
            SolverConfig::JacobianDls(p) => &mut p.iteration,
            SolverConfig::TwoBone(p) => &mut p.iteration,
            SolverConfig::Tension(p) => &mut p.iteration,
        }
    }

    /// Checks the settings a solve would refuse (tolerances and step clamp positive, damping
    /// and weights in range), so a bad one is named when the solver is made rather than at
    /// its first solve.
    pub fn validate(&self) -> Result<()> {
        let mut config = *self;
        config.iteration_mut().validate()?;
        let in_range = |what: &str, value: f32, low: f32, high: f32| {
            if value.is_finite() && (low..=high).contains(&value) {
                Ok(())
            } else {
                let reason = match high == f32::MAX {
                    true => format!("{value} must be a number from {low} up"),
                    false => format!("{value} must be a number from {low} to {high}"),
                };
                Err(TendonError::InvalidValue {
                    what: what.into(),
                    reason,
                })
            }
        };
        match self {
            SolverConfig::JacobianDls(p) => {
                in_range("damping", p.damping, 0.0, f32::MAX)?;
                in_range("world_turn_weight", p.world_turn_weight, 0.0, 1.0)
            }
            SolverConfig::Tension(p) => {
                in_range("reach_weight", p.reach_weight, 0.0, f32::MAX)?;
                in_range("comfort", p.comfort, 0.0, f32::MAX)
            }
            _ => Ok(()),
        }
    }

    /// The same solver with another tolerance.
    pub fn with_tolerance(mut self, tolerance: f32) -> Self {
        self.iteration_mut().tolerance = tolerance;
        self
    }

    /// Builds the configured solver.
    pub fn build(&self) -> AnySolver {
        match *self {
            SolverConfig::Fabrik(p) => AnySolver::Fabrik(Fabrik::new(p)),
            SolverConfig::Ccd(p) => AnySolver::Ccd(Ccd::new(p)),
            SolverConfig::JacobianTranspose(p) => {
                AnySolver::JacobianTranspose(JacobianTranspose::new(p))
            }
            SolverConfig::JacobianDls(p) => AnySolver::JacobianDls(JacobianDls::new(p)),
            SolverConfig::TwoBone(p) => AnySolver::TwoBone(TwoBone::new(p)),
            SolverConfig::Tension(p) => AnySolver::Tension(Box::new(TensionMinimizer::new(p))),
        }
    }
}

/// A solver chosen at run time.
#[derive(Debug, Clone)]
pub enum AnySolver {
    /// FABRIK.
    Fabrik(Fabrik),
    /// Cyclic coordinate descent.
    Ccd(Ccd),
    /// Jacobian transpose.
    JacobianTranspose(JacobianTranspose),
    /// Damped least squares.
    JacobianDls(JacobianDls),
    /// Closed-form two-bone IK.
    TwoBone(TwoBone),
    /// The tension minimiser (boxed: it carries two other solvers for its start and polish).
    Tension(Box<TensionMinimizer>),
}

impl Solver for AnySolver {
    fn solve_into(
        &mut self,
        rig: &Rig,
        start: &Pose,
        goals: &[Goal],
        out: &mut Pose,
    ) -> Result<SolveReport> {
        match self {
            AnySolver::Fabrik(s) => s.solve_into(rig, start, goals, out),
            AnySolver::Ccd(s) => s.solve_into(rig, start, goals, out),
            AnySolver::JacobianTranspose(s) => s.solve_into(rig, start, goals, out),
            AnySolver::JacobianDls(s) => s.solve_into(rig, start, goals, out),
            AnySolver::TwoBone(s) => s.solve_into(rig, start, goals, out),
            AnySolver::Tension(s) => s.solve_into(rig, start, goals, out),
        }
    }

    fn uses_near(&self) -> bool {
        match self {
            AnySolver::Tension(s) => s.uses_near(),
            _ => false,
        }
    }

    fn solves_groups_apart(&self) -> bool {
        match self {
            AnySolver::Fabrik(s) => s.solves_groups_apart(),
            AnySolver::Ccd(s) => s.solves_groups_apart(),
            AnySolver::JacobianDls(s) => s.solves_groups_apart(),
            // The transpose's step length is one for all goals; two-bone finishes coupled
            // chains together; the tension minimiser's simplex and evaluation budget span
            // every group.
            AnySolver::JacobianTranspose(_) | AnySolver::TwoBone(_) | AnySolver::Tension(_) => {
                false
            }
        }
    }

    fn guards_warm_frames(&self) -> bool {
        !matches!(self, AnySolver::TwoBone(_))
    }

    fn iteration_params(&self) -> IterationParams {
        match self {
            AnySolver::Fabrik(s) => s.iteration_params(),
            AnySolver::Ccd(s) => s.iteration_params(),
            AnySolver::JacobianTranspose(s) => s.iteration_params(),
            AnySolver::JacobianDls(s) => s.iteration_params(),
            AnySolver::TwoBone(s) => s.iteration_params(),
            AnySolver::Tension(s) => s.iteration_params(),
        }
    }

    fn solve_near(
        &mut self,
        rig: &Rig,
        start: &Pose,
        near: &Pose,
        goals: &[Goal],
        out: &mut Pose,
    ) -> Result<SolveReport> {
        match self {
            AnySolver::Tension(s) => s.solve_near(rig, start, near, goals, out),
            other => other.solve_into(rig, start, goals, out),
        }
    }
}
