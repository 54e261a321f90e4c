//! Quaternion helpers: minimal arc rotations, best-fit rotations and angle clamping.

use glam::{Quat, Vec3};

/// Below this squared length a direction is treated as undefined.
const TINY_SQ: f32 = 1e-24;

/// The smallest rotation that turns the direction of `from` into the direction of `to`.
///
/// Neither input needs to be normalised. If either is (nearly) zero the rotation is
/// undefined and the identity is returned; if they are opposite, a half turn about an
/// axis perpendicular to `from` is returned.
pub fn from_to(from: Vec3, to: Vec3) -> Quat {
    let (lf, lt) = (from.length_squared(), to.length_squared());
    if !(lf > TINY_SQ && lt > TINY_SQ) {
        return Quat::IDENTITY;
    }
    // (a x b, |a||b| + a.b) is twice the half-way rotation scaled by |a||b|: no need to
    // normalise the inputs first.
    let norms = (lf * lt).sqrt();
    if !norms.is_finite() {
        // Squared lengths beyond f32's range: rescale (a rotation ignores length).
        return from_to(from / from.abs().max_element(), to / to.abs().max_element());
    }
    let d = from.dot(to);
    if d < -0.999_999 * norms {
        let axis = (from / lf.sqrt()).any_orthonormal_vector();
        return Quat::from_axis_angle(axis, std::f32::consts::PI);
    }
    let c = from.cross(to);
    Quat::from_xyzw(c.x, c.y, c.z, norms + d).normalize()
}

/// The rotation about the unit vector `axis` that turns the direction of `from` onto the
/// direction of `to` (both meant perpendicular to the axis); a half turn when they are
/// opposite, the identity when either is zero.
pub fn turn_about(axis: Vec3, from: Vec3, to: Vec3) -> Quat {
    let sin = axis.dot(from.cross(to));
    let cos = from.dot(to);
    let r = (sin * sin + cos * cos).sqrt();
    if !(r > 0.0 && r.is_finite()) {
        return Quat::IDENTITY;
    }
    if r + cos <= 1e-7 * r {
        return Quat::from_xyzw(axis.x, axis.y, axis.z, 0.0);
    }
    // (k sin t, 1 + cos t) is the half-angle quaternion, scaled.
    Quat::from_xyzw(axis.x * sin, axis.y * sin, axis.z * sin, r + cos).normalize()
}

/// The rotation angle of `q` in [0, pi], accurate near zero (unlike `2 acos w`).
pub fn rotation_angle(q: Quat) -> f32 {
    2.0 * q.xyz().length().atan2(q.w.abs())
}

/// The angle in [0, pi] of the rotation taking `a` to `b`, accurate for tiny angles.
pub fn angle_between(a: Quat, b: Quat) -> f32 {
    rotation_angle(a.conjugate() * b)
}

/// Shrinks `q` to at most `max_angle` radians about the same axis.
pub fn clamp_angle(q: Quat, max_angle: f32) -> Quat {
    let angle = rotation_angle(q);
    if angle <= max_angle || angle == 0.0 {
        return q;
    }
    // Same axis, shorter turn; keep the shortest-arc sign.
    let q = if q.w < 0.0 { -q } else { q };
    Quat::IDENTITY.slerp(q, max_angle / angle)
}

/// Wraps an angle into [-pi, pi].
pub fn wrap_angle(a: f32) -> f32 {
    use std::f32::consts::{PI, TAU};
    if (-PI..=PI).contains(&a) {
        a
    } else {
        a - TAU * ((a + PI) / TAU).floor()
    }
}

/// The rotation R that best maps each direction `u` onto its paired direction `v`
/// (maximising the weighted sum of `v . R u`), biased slightly towards the identity so
/// that an undetermined twist stays where it was.
///
/// `pairs` yields `(u, v, weight)`; directions need not be normalised (longer ones count
/// more). Uses Horn's quaternion method.
pub fn best_fit_rotation(pairs: impl Iterator<Item = (Vec3, Vec3, f32)>) -> Quat {
    let mut s = [[0.0f64; 3]; 3];
    let mut scale = 0.0f64;
    for (u, v, w) in pairs {
        let (u, v, w) = (u.as_dvec3(), v.as_dvec3(), w as f64);
        let (ua, va) = (u.to_array(), v.to_array());
        for (a, row) in s.iter_mut().enumerate() {
            for (b, cell) in row.iter_mut().enumerate() {
                *cell += w * ua[a] * va[b];
            }
        }
        scale += w * u.length() * v.length();
    }
    if !(scale > 0.0 && scale.is_finite()) {
        return Quat::IDENTITY;
    }
    let bias = 1e-4 * scale;
    for (a, row) in s.iter_mut().enumerate() {
        row[a] += bias;
    }
    super::dense::horn_quaternion(&s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_to_maps_directions_and_handles_degenerate_input() {
        let a = Vec3::new(1.0, 2.0, 3.0);
        let b = Vec3::new(-2.0, 0.5, 1.0);
        let q = from_to(a, b);
        assert!((q * a.normalize() - b.normalize()).length() < 1e-6);
        let opposite = from_to(a, -a);
        assert!((opposite * a.normalize() + a.normalize()).length() < 1e-5);
        assert_eq!(from_to(Vec3::ZERO, b), Quat::IDENTITY);
        assert_eq!(from_to(a, Vec3::ZERO), Quat::IDENTITY);
    }

    #[test]
    fn turn_about_stays_on_its_axis() {
        let q = turn_about(Vec3::Z, Vec3::X, Vec3::Y);
        assert!(angle_between(q, Quat::from_rotation_z(std::f32::consts::FRAC_PI_2)) < 1e-6);
        let half = turn_about(Vec3::Z, Vec3::X, -Vec3::X * 3.0);
        assert!(
            (half * Vec3::Y + Vec3::Y).length() < 1e-6,
            "a half turn about Z"
        );
        assert_eq!(turn_about(Vec3::Z, Vec3::ZERO, Vec3::X), Quat::IDENTITY);
        let far = from_to(Vec3::new(1e30, 0.0, 0.0), Vec3::new(0.0, 1e30, 0.0));
        assert!(angle_between(far, Quat::from_rotation_z(std::f32::consts::FRAC_PI_2)) < 1e-5);
    }

    #[test]
    fn best_fit_recovers_a_rotation() {
        let r = Quat::from_euler(glam::EulerRot::XYZ, 0.3, -1.1, 2.0);
        let dirs = [
            Vec3::X,
            Vec3::new(0.2, 1.0, -0.4),
            Vec3::new(-0.3, 0.1, 0.9),
        ];
        let q = best_fit_rotation(dirs.iter().map(|&u| (u, r * u, 1.0)));
        assert!(angle_between(q, r) < 1e-3, "{q:?} vs {r:?}");
    }

    #[test]
    fn best_fit_with_one_pair_keeps_twist_small() {
        let q = best_fit_rotation([(Vec3::Y, Vec3::X, 1.0)].into_iter());
        assert!((q * Vec3::Y - Vec3::X).length() < 1e-3);
        assert!(angle_between(q, from_to(Vec3::Y, Vec3::X)) < 1e-3);
    }

    #[test]
    fn wrap_and_clamp() {
        assert!((wrap_angle(3.0 * std::f32::consts::PI).abs() - std::f32::consts::PI).abs() < 1e-5);
        assert!((wrap_angle(-7.0) - (-7.0 + std::f32::consts::TAU)).abs() < 1e-5);
        let q = Quat::from_rotation_z(1.0);
        assert!((rotation_angle(clamp_angle(q, 0.25)) - 0.25).abs() < 1e-6);
    }
}
