//! The one module that talks to nalgebra: small dense linear algebra in f64.

use glam::Quat;
use nalgebra::{DMatrix, DVector, Matrix4, SymmetricEigen};

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
#[derive(Debug, Clone)]
pub(crate) struct DampedSystem {
    a: DMatrix<f64>,
    b: DVector<f64>,
}

impl Default for DampedSystem {
    fn default() -> Self {
        DampedSystem {
            a: DMatrix::zeros(0, 0),
            b: DVector::zeros(0),
        }
    }
}

impl DampedSystem {
    /// Sizes the system for `m` unknowns (the storage is kept when `m` is unchanged).
    pub(crate) fn resize(&mut self, m: usize) {
        if self.a.nrows() != m {
            self.a = DMatrix::zeros(m, m);
        }
        if self.b.len() != m {
            self.b = DVector::zeros(m);
        }
    }

    /// Starts a new system: `A = 0` and `b = rhs` (of the size given to `resize`).
    pub(crate) fn reset(&mut self, rhs: &[f64]) {
        self.b.as_mut_slice().copy_from_slice(rhs);
        self.a.fill(0.0);
    }

    /// The right-hand side `b`, to adjust before solving.
    pub(crate) fn rhs_mut(&mut self) -> &mut [f64] {
        self.b.as_mut_slice()
    }

    /// Adds `value` to `A[(row, column)]`.
    pub(crate) fn add(&mut self, row: usize, column: usize, value: f64) {
        self.a[(row, column)] += value;
    }

    /// Solves in place (then [`DampedSystem::solution`] holds `x`). Returns false if the
    /// system is singular, leaving the solution unspecified and the size unchanged.
    pub(crate) fn solve(&mut self, damping_sq: f64) -> bool {
        let m = self.b.len();
        let solved = solve_damped_spd(&mut self.a, damping_sq, &mut self.b);
        // A failed factorisation consumed the matrix: restore its storage.
        self.resize(m);
        solved
    }

    /// The solution `x` of the last successful [`DampedSystem::solve`].
    pub(crate) fn solution(&self) -> &[f64] {
        self.b.as_slice()
    }
}

/// Solves `(A + damping^2 I) x = b` in place for a symmetric positive semi-definite `A`,
/// reusing the storage of `a` (no allocation). Returns false if the system is singular,
/// leaving `b` unspecified (and `a` empty).
fn solve_damped_spd(a: &mut DMatrix<f64>, damping_sq: f64, b: &mut DVector<f64>) -> bool {
    for i in 0..a.nrows() {
        a[(i, i)] += damping_sq;
    }
    let m = std::mem::replace(a, DMatrix::zeros(0, 0));
    match nalgebra::linalg::Cholesky::new(m) {
        Some(chol) => {
            chol.solve_mut(b);
            *a = chol.unpack();
            b.iter().all(|v| v.is_finite())
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damped_solve_matches_direct() {
        let mut a = DMatrix::from_row_slice(2, 2, &[4.0, 1.0, 1.0, 3.0]);
        let mut b = DVector::from_vec(vec![1.0, 2.0]);
        assert!(solve_damped_spd(&mut a, 0.0, &mut b));
        assert!((4.0 * b[0] + b[1] - 1.0f64).abs() < 1e-12);
        assert!((b[0] + 3.0 * b[1] - 2.0f64).abs() < 1e-12);
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
