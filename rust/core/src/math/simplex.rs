//! The downhill simplex (Nelder-Mead) minimiser over `FnMut(&[f32]) -> f32`. It needs no
//! derivatives, which suits objectives with clamped angles and power-law tensions.

/// When the minimiser stops.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimplexParams {
    /// Most objective evaluations in all.
    pub max_evaluations: u32,
    /// Converged when every vertex lies within this fraction of its initial step of the
    /// best one...
    pub size_tolerance: f32,
    /// ...and the values differ by less than this times (1 + the best value's size):
    /// relative for large values, absolute near zero.
    pub value_tolerance: f32,
    /// Fresh simplices built around the best point after converging, to escape a collapse
    /// onto a false minimum; one that no longer improves ends the search.
    pub restarts: u32,
}

impl Default for SimplexParams {
    fn default() -> Self {
        SimplexParams {
            max_evaluations: 4000,
            size_tolerance: 1e-3,
            value_tolerance: 1e-6,
            restarts: 2,
        }
    }
}

/// What a minimisation did.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SimplexReport {
    /// The objective at the point returned.
    pub value: f32,
    /// Objective evaluations used.
    pub evaluations: u32,
    /// Restarts made.
    pub restarts: u32,
    /// Whether the simplex converged (rather than running out of evaluations).
    pub converged: bool,
}

/// Reusable memory for [`Simplex::minimize`] (nothing is allocated once it has grown).
#[derive(Debug, Clone, Default)]
pub struct Simplex {
    vertices: Vec<f32>,
    values: Vec<f32>,
    /// Sum of the vertices per coordinate, kept up to date as vertices change (in f64, so
    /// a thousand updates do not drift), so each centroid costs O(n), not O(n^2).
    sum: Vec<f64>,
    centroid: Vec<f32>,
    trial: Vec<f32>,
    second: Vec<f32>,
}

impl Simplex {
    /// Minimises `f` from `x` (overwritten with the best point found), with an initial
    /// simplex stepping `steps[i]` along each coordinate.
    pub fn minimize(
        &mut self,
        mut f: impl FnMut(&[f32]) -> f32,
        x: &mut [f32],
        steps: &[f32],
        params: &SimplexParams,
    ) -> SimplexReport {
        let n = x.len();
        let mut report = SimplexReport {
            value: f(x),
            evaluations: 1,
            ..SimplexReport::default()
        };
        if n == 0 {
            report.converged = true;
            return report;
        }
        self.vertices.resize((n + 1) * n, 0.0);
        self.values.resize(n + 1, 0.0);
        self.sum.resize(n, 0.0);
        self.centroid.resize(n, 0.0);
        self.trial.resize(n, 0.0);
        self.second.resize(n, 0.0);
        let mut best_before = report.value;
        loop {
            self.build(&mut f, x, report.value, steps, &mut report.evaluations);
            let converged = self.run(&mut f, steps, params, &mut report.evaluations);
            let best = self.best();
            x.copy_from_slice(self.vertex(best));
            report.value = self.values[best];
            report.converged = converged;
            let improved =
                best_before - report.value > params.value_tolerance * (report.value.abs() + 1.0);
            if !converged || report.restarts >= params.restarts || !improved {
                return report;
            }
            best_before = report.value;
            report.restarts += 1;
        }
    }

    fn vertex(&self, i: usize) -> &[f32] {
        let n = self.centroid.len();
        &self.vertices[i * n..(i + 1) * n]
    }

    fn best(&self) -> usize {
        (0..self.values.len())
            .min_by(|&a, &b| self.values[a].total_cmp(&self.values[b]))
            .unwrap_or(0)
    }

    /// A simplex of `x` and `x + steps[i] * e_i`.
    fn build(
        &mut self,
        f: &mut impl FnMut(&[f32]) -> f32,
        x: &[f32],
        value: f32,
        steps: &[f32],
        evaluations: &mut u32,
    ) {
        let n = x.len();
        for i in 0..=n {
            let v = &mut self.vertices[i * n..(i + 1) * n];
            v.copy_from_slice(x);
            if i > 0 {
                v[i - 1] += steps[i - 1];
            }
        }
        self.values[0] = value;
        for i in 1..=n {
            self.values[i] = f(&self.vertices[i * n..(i + 1) * n]);
            *evaluations += 1;
        }
    }

    /// Reflect, expand, contract and shrink until converged (true) or out of evaluations.
    fn run(
        &mut self,
        f: &mut impl FnMut(&[f32]) -> f32,
        steps: &[f32],
        params: &SimplexParams,
        evaluations: &mut u32,
    ) -> bool {
        let n = self.centroid.len();
        self.sum_vertices();
        loop {
            // Order: best, worst, second worst.
            let best = self.best();
            let (mut worst, mut second) = (0, 0);
            for i in 0..=n {
                if self.values[i] > self.values[worst] {
                    worst = i;
                }
            }
            for i in 0..=n {
                if i != worst && (second == worst || self.values[i] > self.values[second]) {
                    second = i;
                }
            }
            if self.converged(best, steps, params) {
                return true;
            }
            if *evaluations >= params.max_evaluations {
                return false;
            }
            // Centroid of all but the worst.
            for k in 0..n {
                let others = self.sum[k] - self.vertices[worst * n + k] as f64;
                self.centroid[k] = (others / n as f64) as f32;
            }
            let worst_value = self.values[worst];
            let reflected = self.probe(f, worst, 1.0, evaluations);
            if reflected < self.values[best] {
                std::mem::swap(&mut self.trial, &mut self.second);
                let expanded = self.probe(f, worst, 2.0, evaluations);
                if expanded < reflected {
                    self.accept(worst, expanded);
                } else {
                    std::mem::swap(&mut self.trial, &mut self.second);
                    self.accept(worst, reflected);
                }
            } else if reflected < self.values[second] {
                self.accept(worst, reflected);
            } else {
                // Contract towards the better of the worst and its reflection.
                let (coefficient, bar) = if reflected < worst_value {
                    (0.5, reflected)
                } else {
                    (-0.5, worst_value)
                };
                let contracted = self.probe(f, worst, coefficient, evaluations);
                if contracted < bar {
                    self.accept(worst, contracted);
                } else {
                    self.shrink(f, best, evaluations);
                }
            }
        }
    }

    /// Evaluates `centroid + coefficient * (centroid - worst)` into `trial`.
    fn probe(
        &mut self,
        f: &mut impl FnMut(&[f32]) -> f32,
        worst: usize,
        coefficient: f32,
        evaluations: &mut u32,
    ) -> f32 {
        let n = self.centroid.len();
        for k in 0..n {
            let c = self.centroid[k];
            self.trial[k] = c + coefficient * (c - self.vertices[worst * n + k]);
        }
        *evaluations += 1;
        f(&self.trial)
    }

    fn accept(&mut self, i: usize, value: f32) {
        let n = self.centroid.len();
        let vertex = &mut self.vertices[i * n..(i + 1) * n];
        for ((sum, old), new) in self.sum.iter_mut().zip(vertex.iter()).zip(&self.trial) {
            *sum += *new as f64 - *old as f64;
        }
        vertex.copy_from_slice(&self.trial);
        self.values[i] = value;
    }

    fn sum_vertices(&mut self) {
        let n = self.centroid.len();
        self.sum.iter_mut().for_each(|s| *s = 0.0);
        for vertex in self.vertices.chunks_exact(n) {
            for (sum, v) in self.sum.iter_mut().zip(vertex) {
                *sum += *v as f64;
            }
        }
    }

    fn shrink(&mut self, f: &mut impl FnMut(&[f32]) -> f32, best: usize, evaluations: &mut u32) {
        let n = self.centroid.len();
        for i in (0..=n).filter(|&i| i != best) {
            for k in 0..n {
                let b = self.vertices[best * n + k];
                self.vertices[i * n + k] = b + 0.5 * (self.vertices[i * n + k] - b);
            }
            self.values[i] = f(&self.vertices[i * n..(i + 1) * n]);
            *evaluations += 1;
        }
        self.sum_vertices();
    }

    fn converged(&self, best: usize, steps: &[f32], params: &SimplexParams) -> bool {
        let n = self.centroid.len();
        let spread = self
            .values
            .iter()
            .fold(0.0f32, |m, &v| m.max(v - self.values[best]));
        let allowed = params.value_tolerance * (self.values[best].abs() + 1.0);
        if spread.is_nan() || spread > allowed {
            return false;
        }
        (0..=n).all(|i| {
            (0..n).all(|k| {
                let d = (self.vertices[i * n + k] - self.vertices[best * n + k]).abs();
                d <= params.size_tolerance * steps[k].abs().max(f32::MIN_POSITIVE)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_minimum_of_rosenbrock_and_a_shifted_bowl() {
        let mut simplex = Simplex::default();
        let mut x = [-1.2f32, 1.0];
        let params = SimplexParams {
            max_evaluations: 5000,
            value_tolerance: 1e-10,
            size_tolerance: 1e-5,
            ..SimplexParams::default()
        };
        let report = simplex.minimize(
            |p| (1.0 - p[0]).powi(2) + 100.0 * (p[1] - p[0] * p[0]).powi(2),
            &mut x,
            &[0.5, 0.5],
            &params,
        );
        assert!(
            (x[0] - 1.0).abs() < 1e-2 && (x[1] - 1.0).abs() < 2e-2,
            "{x:?} {report:?}"
        );
        let target = [0.3f32, -2.0, 1.5, 0.7, -0.1];
        let mut y = [0.0f32; 5];
        let report = simplex.minimize(
            |p| p.iter().zip(target).map(|(a, b)| (a - b).powi(2)).sum(),
            &mut y,
            &[1.0; 5],
            &params,
        );
        assert!(report.converged, "{report:?}");
        for (a, b) in y.iter().zip(target) {
            assert!((a - b).abs() < 1e-3, "{y:?}");
        }
    }

    #[test]
    fn respects_the_evaluation_cap_and_empty_problems() {
        let mut simplex = Simplex::default();
        let mut x = [5.0f32; 6];
        let params = SimplexParams {
            max_evaluations: 50,
            ..SimplexParams::default()
        };
        let report = simplex.minimize(
            |p| p.iter().map(|v| v * v).sum(),
            &mut x,
            &[1.0; 6],
            &params,
        );
        assert!(report.evaluations <= 50 + 7 && !report.converged);
        let report = simplex.minimize(|_| 3.0, &mut [], &[], &params);
        assert_eq!((report.value, report.converged), (3.0, true));
    }
}
