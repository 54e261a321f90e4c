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

/// Solves `(A + damping^2 I) x = b` in place for a symmetric positive semi-definite `A`,
/// reusing the storage of `a` (no allocation). Returns false if the system is singular,
/// leaving `b` unspecified.
pub(crate) fn solve_damped_spd(
    a: &mut DMatrix<f64>,
    damping_sq: f64,
    b: &mut DVector<f64>,
) -> bool {
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
}
