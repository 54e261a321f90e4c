//! A chain's segment lengths restored all at once (SHAKE), for the spring chains.
//!
//! Length passes one segment at a time never quite agree: each pass undoes part of its
//! neighbours', and a last pass that makes the lengths exact along the joining lines takes
//! motion away. Undamped chains of several short bones lost most of their swing within
//! seconds that way (three 5 cm bones kept 14% of their energy over 8 s with four passes).
//! Solving every segment's correction together, each along its direction at the start of
//! the step (as a rod's tension acts), is the integrator that keeps a chain's energy:
//! SHAKE on Verlet. The corrections' sizes are found by Newton's method; each segment's
//! length depends on its own and its two neighbours' corrections, so every iteration is one
//! tridiagonal solve.

use glam::{DVec3, Vec3A};

/// Scratch memory of [`RodSolve::solve`] (kept between steps: solving allocates nothing).
#[derive(Debug, Clone, Default)]
pub(crate) struct RodSolve {
    /// Each segment's unit direction at the start of the step.
    direction: Vec<DVec3>,
    /// Each segment before correction, then as corrected so far.
    unconstrained: Vec<DVec3>,
    segment: Vec<DVec3>,
    /// The corrections' sizes (one per segment) and the Newton system.
    size: Vec<f64>,
    error: Vec<f64>,
    lower: Vec<f64>,
    diagonal: Vec<f64>,
    upper: Vec<f64>,
}

/// Newton iterations before giving up (they converge in two to four from a time step's
/// small stretch).
const MAX_ITERATIONS: usize = 12;

impl RodSolve {
    /// Moves `points` (the first fixed: inverse mass 0) so that segment `k` from point `k`
    /// to `k + 1` is `lengths[k]` long, every correction along that segment's direction in
    /// `before` and shared by the two ends' inverse masses. Returns false, with `points`
    /// unchanged, when the solve fails (a segment of no length at the start of the step,
    /// a correction that cannot restore a length, no convergence); the caller falls back to
    /// passes.
    pub(crate) fn solve(
        &mut self,
        points: &mut [Vec3A],
        before: &[Vec3A],
        lengths: &[f32],
        inverse_mass: &[f32],
    ) -> bool {
        let segments = points.len().saturating_sub(1);
        if segments == 0 {
            return true;
        }
        self.direction.clear();
        self.unconstrained.clear();
        for k in 0..segments {
            let Some(direction) = (before[k + 1] - before[k]).as_dvec3().try_normalize() else {
                return false;
            };
            self.direction.push(direction);
            self.unconstrained
                .push(points[k + 1].as_dvec3() - points[k].as_dvec3());
        }
        let mass = |k: usize| f64::from(inverse_mass[k]);
        self.size.clear();
        self.size.resize(segments, 0.0);
        self.segment.resize(segments, DVec3::ZERO);
        self.error.resize(segments, 0.0);
        self.lower.resize(segments, 0.0);
        self.diagonal.resize(segments, 0.0);
        self.upper.resize(segments, 0.0);
        let mut converged = false;
        for _ in 0..MAX_ITERATIONS {
            // Segment k moves with its own correction (both ends) and its neighbours' (the
            // end it shares with each).
            let mut worst: f64 = 0.0;
            for (k, &length) in lengths.iter().enumerate().take(segments) {
                let own = -(mass(k) + mass(k + 1)) * self.direction[k];
                let mut segment = self.unconstrained[k] + own * self.size[k];
                let below = (k > 0).then(|| mass(k) * self.direction[k - 1]);
                let above = (k + 1 < segments).then(|| mass(k + 1) * self.direction[k + 1]);
                if let Some(below) = below {
                    segment += below * self.size[k - 1];
                }
                if let Some(above) = above {
                    segment += above * self.size[k + 1];
                }
                let length = f64::from(length);
                self.error[k] = segment.length_squared() - length * length;
                worst = worst.max(self.error[k].abs() / (length * length).max(1e-30));
                self.diagonal[k] = 2.0 * segment.dot(own);
                self.lower[k] = below.map_or(0.0, |b| 2.0 * segment.dot(b));
                self.upper[k] = above.map_or(0.0, |a| 2.0 * segment.dot(a));
                self.segment[k] = segment;
            }
            if !worst.is_finite() {
                return false;
            }
            if worst < 1e-10 {
                converged = true;
                break;
            }
            // Thomas algorithm on (lower, diagonal, upper) step = -error.
            for k in 0..segments {
                let pivot = self.diagonal[k]
                    - if k > 0 {
                        self.lower[k] * self.upper[k - 1]
                    } else {
                        0.0
                    };
                // (Not finite is a failure too.)
                if pivot.is_nan() || pivot.abs() <= 1e-300 {
                    return false;
                }
                let carried = if k > 0 {
                    self.lower[k] * self.error[k - 1]
                } else {
                    0.0
                };
                self.upper[k] /= pivot;
                self.error[k] = (-self.error[k] - carried) / pivot;
            }
            for k in (0..segments).rev() {
                let after = if k + 1 < segments {
                    self.upper[k] * self.error[k + 1]
                } else {
                    0.0
                };
                self.error[k] -= after;
                self.size[k] += self.error[k];
            }
        }
        if !converged {
            return false;
        }
        // Each point moves with the corrections of the segments it ends: it starts
        // segment k (+) and ends segment k - 1 (-).
        for (k, point) in points.iter_mut().enumerate().skip(1) {
            let mut moved = -self.direction[k - 1] * self.size[k - 1];
            if k < segments {
                moved += self.direction[k] * self.size[k];
            }
            let moved = (point.as_dvec3() + moved * mass(k)).as_vec3a();
            if !moved.is_finite() {
                return false;
            }
            *point = moved;
        }
        true
    }
}
