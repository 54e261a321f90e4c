//! Scale-target distribution: a goal scale for a chain's end, spread over its bones so the
//! product of their scales (per axis) is the goal. Solve it before position goals, as the
//! guide advises: the positions then reach with the bones' new lengths.

use crate::error::{Result, TendonError};
use glam::Vec3;

/// Per-bone scale limits, per axis, inclusive; both positive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaleLimits {
    /// Smallest scale per axis.
    pub min: Vec3,
    /// Largest scale per axis.
    pub max: Vec3,
}

/// Spreads `goal` over `out.len()` bones (root-most first), per axis.
///
/// - Without limits: a positive goal is shared equally (each bone gets the N-th root); a
///   negative goal shares its magnitude equally and the bone nearest the effector takes
///   the sign; a zero goal puts the zero on that bone too, the others staying at 1.
/// - With limits (one per bone): the product equals the goal whenever some choice within
///   the limits reaches it, and is the closest reachable product otherwise. Bones from the
///   root take equal shares of what remains, clamped so the bones after them can still
///   make up the rest; what a clamped bone cannot take moves towards the effector.
pub fn distribute_scale(
    goal: Vec3,
    limits: Option<&[ScaleLimits]>,
    out: &mut [Vec3],
) -> Result<()> {
    let n = out.len();
    if n == 0 {
        return Ok(());
    }
    if !goal.is_finite() {
        return Err(TendonError::NonFinite {
            what: format!("scale goal {goal}"),
        });
    }
    if let Some(limits) = limits {
        if limits.len() != n {
            return Err(TendonError::Size {
                what: "scale limits".into(),
                expected: n,
                got: limits.len(),
            });
        }
        for (i, limit) in limits.iter().enumerate() {
            let ok = limit.min.is_finite()
                && limit.max.is_finite()
                && limit.min.cmpgt(Vec3::ZERO).all()
                && limit.min.cmple(limit.max).all();
            if !ok {
                return Err(TendonError::InvalidValue {
                    what: format!("scale limits of chain bone {i}"),
                    reason: format!(
                        "min {} and max {} must be positive with min <= max",
                        limit.min, limit.max
                    ),
                });
            }
        }
    }
    for axis in 0..3 {
        let g = goal[axis];
        match limits {
            None => distribute_free(g, n, |i, v| out[i][axis] = v),
            Some(limits) => {
                let low: Vec<f32> = limits.iter().map(|l| l.min[axis]).collect();
                let high: Vec<f32> = limits.iter().map(|l| l.max[axis]).collect();
                distribute_limited(g, &low, &high, |i, v| out[i][axis] = v);
            }
        }
    }
    Ok(())
}

fn distribute_free(goal: f32, n: usize, mut set: impl FnMut(usize, f32)) {
    if goal > 0.0 {
        let share = goal.powf(1.0 / n as f32);
        (0..n).for_each(|i| set(i, share));
        return;
    }
    let share = goal.abs().powf(1.0 / n as f32);
    for i in 0..n - 1 {
        set(i, if goal == 0.0 { 1.0 } else { share });
    }
    set(n - 1, if goal == 0.0 { 0.0 } else { -share });
}

fn distribute_limited(goal: f32, low: &[f32], high: &[f32], mut set: impl FnMut(usize, f32)) {
    let n = low.len();
    // Products are positive: the closest to a non-positive goal is the smallest one.
    let smallest: f64 = low.iter().map(|&v| v as f64).product();
    let largest: f64 = high.iter().map(|&v| v as f64).product();
    let mut remaining = (goal as f64).clamp(smallest, largest);
    for i in 0..n {
        let left = (n - i) as f64;
        // What the bones after this one can still make up, at their least and most.
        let rest_low: f64 = low[i + 1..].iter().map(|&v| v as f64).product();
        let rest_high: f64 = high[i + 1..].iter().map(|&v| v as f64).product();
        let share = remaining.powf(1.0 / left);
        let lower = (remaining / rest_high).max(low[i] as f64);
        let upper = (remaining / rest_low).min(high[i] as f64);
        let value = share.clamp(lower.min(upper), upper.max(lower));
        set(i, value as f32);
        remaining /= value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn product(scales: &[Vec3]) -> Vec3 {
        scales.iter().fold(Vec3::ONE, |a, &b| a * b)
    }

    #[test]
    fn free_goals_are_shared_and_their_product_is_the_goal() {
        let mut out = [Vec3::ZERO; 4];
        for goal in [
            Vec3::new(2.0, 0.5, 1.0),
            Vec3::new(-8.0, 0.0, 3.0),
            Vec3::new(-0.1, -2.0, 1e-3),
        ] {
            distribute_scale(goal, None, &mut out).unwrap();
            assert!(
                (product(&out) - goal).abs().max_element()
                    < 1e-5 * goal.abs().max_element().max(1.0)
            );
        }
        distribute_scale(Vec3::splat(16.0), None, &mut out).unwrap();
        assert!(out
            .iter()
            .all(|s| (*s - Vec3::splat(2.0)).abs().max_element() < 1e-6));
        // Negative: the effector-most bone takes the sign.
        distribute_scale(Vec3::new(-16.0, 1.0, 1.0), None, &mut out).unwrap();
        assert_eq!(out.map(|s| s.x.signum()), [1.0, 1.0, 1.0, -1.0]);
    }

    #[test]
    fn limited_goals_are_exact_when_reachable_and_closest_otherwise() {
        let limits = [
            ScaleLimits {
                min: Vec3::splat(0.9),
                max: Vec3::splat(1.1),
            },
            ScaleLimits {
                min: Vec3::splat(0.5),
                max: Vec3::splat(3.0),
            },
            ScaleLimits {
                min: Vec3::splat(1.0),
                max: Vec3::splat(1.0),
            },
        ];
        let mut out = [Vec3::ZERO; 3];
        // Reachable: 0.45 to 3.3 per axis.
        for goal in [Vec3::new(2.0, 0.5, 3.2), Vec3::new(0.46, 1.0, 3.29)] {
            distribute_scale(goal, Some(&limits), &mut out).unwrap();
            assert!((product(&out) - goal).abs().max_element() < 1e-5, "{out:?}");
            for (s, l) in out.iter().zip(&limits) {
                assert!(s.cmpge(l.min - 1e-6).all() && s.cmple(l.max + 1e-6).all());
            }
        }
        // Out of reach: the closest product (all at the bound).
        distribute_scale(Vec3::new(10.0, 0.1, -2.0), Some(&limits), &mut out).unwrap();
        let p = product(&out);
        assert!(
            (p - Vec3::new(3.3, 0.45, 0.45)).abs().max_element() < 1e-5,
            "{p}"
        );
        // Bad limits are named.
        let bad = [ScaleLimits {
            min: Vec3::splat(2.0),
            max: Vec3::splat(1.0),
        }];
        assert!(distribute_scale(Vec3::ONE, Some(&bad), &mut out[..1]).is_err());
        assert!(distribute_scale(Vec3::NAN, None, &mut out).is_err());
    }
}
