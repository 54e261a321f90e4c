//! The one module that talks to nalgebra: small dense linear algebra in f64.

use glam::Quat;
use nalgebra::{Matrix4, SymmetricEigen};

/// Horn's method: the unit quaternion maximising `sum w v . R u`, given the correlation
/// matrix `s[a][b] = sum w u_a v_b`.
pub(crate) fn horn_quaternion(s: &[[f64; 3]; 3]) -> Quat {
    let [[xx, xy, xz], [yx, yy, yz], [zx, zy, zz]] = *s;
    #[rustfmt::skip]
    let n = Matrix4::new(
        xx + yy + zz, yz - zy,      zx - xz,       xy - yx,
        yz - zy,      xx - yy - zz, xy + yx,       zx + xz,
        zx - xz,      xy + yx,      -xx + yy - zz, yz + zy,
        xy - yx,      zx + xz,      yz + zy,       -xx - yy + zz,
    );
    let eig = SymmetricEigen::new(n);
    let best = eig.eigenvalues.imax();
    let v = eig.eigenvectors.column(best);
    let q = Quat::from_xyzw(v[1] as f32, v[2] as f32, v[3] as f32, v[0] as f32);
    if q.is_finite() && q.length_squared() > 0.5 {
        q.normalize()
    } else {
        Quat::IDENTITY
    }
}

/// The system `(A + damping^2 I) x = b` of damped least squares, for a symmetric positive
/// semi-definite `A` of `m x m` that the caller accumulates entry by entry. The storage is
/// kept between solves, so solving again at the same size allocates nothing.
///
/// Solved by a Cholesky factorisation within the matrix's envelope (each row from its first
/// non-zero entry to the diagonal), where the factor's non-zeros all lie: goals that share
/// no joint leave `A` block-diagonal and cost a small factorisation each, not one of the
/// whole size.
#[derive(Debug, Clone, Default)]
pub(crate) struct DampedSystem {
    m: usize,
    /// `A` row-major; the factorisation overwrites its lower triangle with the factor.
    a: Vec<f64>,
    b: Vec<f64>,
    /// Per row, the column of its first non-zero entry at or below the diagonal.
    first: Vec<usize>,
}

impl DampedSystem {
    /// Sizes the system for `m` unknowns (the storage is kept when `m` is unchanged).
    pub(crate) fn resize(&mut self, m: usize) {
        self.m = m;
        self.a.resize(m * m, 0.0);
        self.b.resize(m, 0.0);
        self.first.resize(m, 0);
    }

    /// Starts a new system: `A = 0` and `b = rhs` (of the size given to `resize`).
    pub(crate) fn reset(&mut self, rhs: &[f64]) {
        self.b.copy_from_slice(rhs);
        self.a.fill(0.0);
    }

    /// The right-hand side `b`, to adjust before solving.
    pub(crate) fn rhs_mut(&mut self) -> &mut [f64] {
        &mut self.b
    }

    /// Adds `value` to `A[(row, column)]`.
    pub(crate) fn add(&mut self, row: usize, column: usize, value: f64) {
        self.a[row * self.m + column] += value;
    }

    /// Solves in place (then [`DampedSystem::solution`] holds `x`). Returns false if the
    /// system is not positive definite or the solution is not finite, leaving the solution
    /// unspecified; the system stays usable (`reset` starts afresh).
    pub(crate) fn solve(&mut self, damping_sq: f64) -> bool {
        let m = self.m;
        let a = &mut self.a;
        for i in 0..m {
            a[i * m + i] += damping_sq;
            self.first[i] = (0..i).find(|&j| a[i * m + j] != 0.0).unwrap_or(i);
        }
        let first = &self.first;
        // L L^T = A, row by row; L[i][j] is zero left of first[i].
        for i in 0..m {
            for j in first[i]..=i {
                let from = first[i].max(first[j]);
                let mut sum = a[i * m + j];
                for k in from..j {
                    sum -= a[i * m + k] * a[j * m + k];
                }
                if j == i {
                    // Not positive definite (or not a number): no factor.
                    if !sum.is_finite() || sum <= 0.0 {
                        return false;
                    }
                    a[i * m + i] = sum.sqrt();
                } else {
                    a[i * m + j] = sum / a[j * m + j];
                }
            }
        }
        let b = &mut self.b;
        // L y = b, then L^T x = y (by columns of L^T, i.e. rows of L).
        for i in 0..m {
            let mut sum = b[i];
            for k in first[i]..i {
                sum -= a[i * m + k] * b[k];
            }
            b[i] = sum / a[i * m + i];
        }
        for i in (0..m).rev() {
            b[i] /= a[i * m + i];
            let x = b[i];
            for k in first[i]..i {
                b[k] -= a[i * m + k] * x;
            }
        }
        b.iter().all(|v| v.is_finite())
    }

    /// The solution `x` of the last successful [`DampedSystem::solve`].
    pub(crate) fn solution(&self) -> &[f64] {
        &self.b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::{DMatrix, DVector};

    /// A 7 x 7 system with two coupled blocks and an independent row, against the
    /// solution nalgebra's dense LU gives.
    #[test]
    fn envelope_solve_matches_a_dense_solve() {
        let m = 7;
        let j: Vec<f64> = (0..m * 9)
            .map(|k| {
                let (row, col) = (k / 9, k % 9);
                // Rows 0-2 and 3-5 share columns 3-5; row 6 has columns of its own.
                let used = match row {
                    0..=2 => col < 6,
                    3..=5 => (3..8).contains(&col),
                    _ => col == 8,
                };
                if used {
                    ((k * 37 % 11) as f64 - 5.0) / 3.0
                } else {
                    0.0
                }
            })
            .collect();
        let rhs: Vec<f64> = (0..m).map(|i| i as f64 - 2.5).collect();
        let mut system = DampedSystem::default();
        system.resize(m);
        system.reset(&rhs);
        let mut dense = DMatrix::<f64>::zeros(m, m);
        for r in 0..m {
            for c in 0..m {
                let v: f64 = (0..9).map(|k| j[r * 9 + k] * j[c * 9 + k]).sum();
                if v != 0.0 {
                    system.add(r, c, v);
                }
                dense[(r, c)] = v + if r == c { 0.01 } else { 0.0 };
            }
        }
        assert!(system.solve(0.01));
        let expected = dense.lu().solve(&DVector::from_vec(rhs)).unwrap();
        for (x, e) in system.solution().iter().zip(expected.iter()) {
            assert!((x - e).abs() < 1e-9, "{x} vs {e}");
        }
    }

    #[test]
    fn damped_system_accumulates_solves_and_survives_a_singular_matrix() {
        let mut system = DampedSystem::default();
        system.resize(2);
        system.reset(&[1.0, 2.0]);
        for (r, c, v) in [(0, 0, 4.0), (0, 1, 1.0), (1, 0, 1.0), (1, 1, 3.0)] {
            system.add(r, c, v);
        }
        assert!(system.solve(0.0));
        let x = system.solution();
        assert!((4.0 * x[0] + x[1] - 1.0f64).abs() < 1e-12);
        assert!((x[0] + 3.0 * x[1] - 2.0f64).abs() < 1e-12);
        // A zero matrix without damping is singular; the system stays usable after.
        system.reset(&[1.0, 1.0]);
        assert!(!system.solve(0.0));
        system.reset(&[1.0, 1.0]);
        system.rhs_mut()[1] = 3.0;
        assert!(system.solve(1.0));
        assert_eq!(system.solution(), &[1.0, 3.0]);
    }
}
