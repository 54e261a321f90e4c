//! Animation curves as Blender evaluates them (keyframes with constant, linear or Bezier
//! interpolation and constant extrapolation), so a whole frame range of a target's motion
//! is sampled in one native call.

use glam::Vec2;

/// How the curve runs from a key to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyInterpolation {
    /// The key's value until the next key.
    Constant,
    /// A straight line to the next key.
    Linear,
    /// A cubic Bezier through the key's right handle and the next key's left handle.
    Bezier,
}

impl KeyInterpolation {
    /// From Blender's `Keyframe.interpolation` values (0, 1, 2); None for the easing
    /// types this module does not evaluate.
    pub fn from_blender(value: i32) -> Option<KeyInterpolation> {
        match value {
            0 => Some(KeyInterpolation::Constant),
            1 => Some(KeyInterpolation::Linear),
            2 => Some(KeyInterpolation::Bezier),
            _ => None,
        }
    }
}

/// One key: its point (frame, value), its handles, and how it runs to the next key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Keyframe {
    /// (frame, value).
    pub co: Vec2,
    /// The left handle (frame, value).
    pub left: Vec2,
    /// The right handle (frame, value).
    pub right: Vec2,
    /// Interpolation towards the next key.
    pub interpolation: KeyInterpolation,
}

/// The curve's value at `frame`. `keys` are sorted by frame; outside them the curve holds
/// the first or last value (constant extrapolation). No keys: 0.
pub fn evaluate(keys: &[Keyframe], frame: f32) -> f32 {
    let (Some(first), Some(last)) = (keys.first(), keys.last()) else {
        return 0.0;
    };
    if frame <= first.co.x {
        return first.co.y;
    }
    if frame >= last.co.x {
        return last.co.y;
    }
    // The segment [k, k + 1] holding the frame.
    let k = keys.partition_point(|key| key.co.x <= frame) - 1;
    let (a, b) = (&keys[k], &keys[k + 1]);
    match a.interpolation {
        KeyInterpolation::Constant => a.co.y,
        KeyInterpolation::Linear => {
            let span = b.co.x - a.co.x;
            if span <= 0.0 {
                return a.co.y;
            }
            a.co.y + (b.co.y - a.co.y) * ((frame - a.co.x) / span)
        }
        KeyInterpolation::Bezier => bezier_segment(a.co, a.right, b.left, b.co, frame),
    }
}

/// The value of the Bezier segment v1..v4 at `frame`. As in Blender, a handle reaching
/// further in time than the segment is shortened (keeping its direction) to the segment's
/// length, so the curve stays a function of the frame.
fn bezier_segment(v1: Vec2, mut v2: Vec2, mut v3: Vec2, v4: Vec2, frame: f32) -> f32 {
    let (h1, h2) = (v1 - v2, v4 - v3);
    let span = v4.x - v1.x;
    if h1.x.abs() > span {
        v2 = v1 - h1 * (span / h1.x.abs());
    }
    if h2.x.abs() > span {
        v3 = v4 - h2 * (span / h2.x.abs());
    }
    let cubic = |p0: f32, p1: f32, p2: f32, p3: f32, t: f32| {
        let s = 1.0 - t;
        s * s * s * p0 + 3.0 * s * s * t * p1 + 3.0 * s * t * t * p2 + t * t * t * p3
    };
    // x(t) rises from v1.x to v4.x: bisection, sped up by Newton steps that stay inside.
    let (mut low, mut high) = (0.0f32, 1.0f32);
    let mut t = ((frame - v1.x) / span.max(f32::MIN_POSITIVE)).clamp(0.0, 1.0);
    for _ in 0..40 {
        let x = cubic(v1.x, v2.x, v3.x, v4.x, t) - frame;
        if x.abs() < 1e-6 * span.max(1.0) {
            break;
        }
        if x > 0.0 {
            high = t;
        } else {
            low = t;
        }
        let s = 1.0 - t;
        let slope =
            3.0 * (s * s * (v2.x - v1.x) + 2.0 * s * t * (v3.x - v2.x) + t * t * (v4.x - v3.x));
        let newton = t - x / slope;
        t = if slope > 0.0 && newton > low && newton < high {
            newton
        } else {
            0.5 * (low + high)
        };
    }
    cubic(v1.y, v2.y, v3.y, v4.y, t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(x: f32, y: f32, interpolation: KeyInterpolation) -> Keyframe {
        Keyframe {
            co: Vec2::new(x, y),
            left: Vec2::new(x - 1.0, y),
            right: Vec2::new(x + 1.0, y),
            interpolation,
        }
    }

    #[test]
    fn constant_linear_and_held_ends() {
        let keys = [
            key(1.0, 2.0, KeyInterpolation::Linear),
            key(5.0, 4.0, KeyInterpolation::Constant),
            key(9.0, -1.0, KeyInterpolation::Linear),
        ];
        assert_eq!(evaluate(&keys, 0.0), 2.0);
        assert_eq!(evaluate(&keys, 3.0), 3.0);
        assert_eq!(evaluate(&keys, 7.0), 4.0);
        assert_eq!(evaluate(&keys, 9.0), -1.0);
        assert_eq!(evaluate(&keys, 20.0), -1.0);
        assert_eq!(evaluate(&[], 3.0), 0.0);
    }

    #[test]
    fn bezier_with_flat_handles_eases_in_and_out() {
        let keys = [
            key(0.0, 0.0, KeyInterpolation::Bezier),
            key(3.0, 1.0, KeyInterpolation::Bezier),
        ];
        // Symmetric flat handles: halfway in time is halfway in value; slow at the ends.
        assert!((evaluate(&keys, 1.5) - 0.5).abs() < 1e-5);
        assert!(evaluate(&keys, 0.3) < 0.1);
        assert!(evaluate(&keys, 2.7) > 0.9);
    }
}
