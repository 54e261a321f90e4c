//! The handles Blender gives keys of type "Auto Clamped", computed here so a bake can write
//! them with its keys: Blender's own recalculation of a 1000-frame bake's curves took
//! 3.4 ms (three quarters of it the "Continuous Acceleration" smoothing), a third of the
//! whole bake. The arithmetic follows Blender's order of operations in single precision
//! (the smoothing's linear solve in double precision, as Blender's), so the handles come
//! out as Blender's; the add-on's tests compare them with Blender's in every supported
//! version.

use glam::Vec2;

/// Blender's handle length factor for automatic handles.
const HANDLE_FACTOR: f32 = 2.5614;

/// The left and right handles Blender computes for keys at `co` (sorted by frame), all of
/// handle type "Auto Clamped" on both sides, on a curve that is not cyclic and extends
/// constantly; `smooth` is the curve's "Continuous Acceleration" smoothing (false: "None").
/// None where Blender's computation is not the one followed here: fewer than two keys, two
/// keys on one frame or out of order, values that are not finite numbers, or a smoothing
/// solve that fails; the caller then asks Blender.
pub fn auto_clamped_handles(co: &[Vec2], smooth: bool) -> Option<(Vec<Vec2>, Vec<Vec2>)> {
    let count = co.len();
    if count < 2
        || co.iter().any(|point| !point.is_finite())
        || co.windows(2).any(|pair| pair[1].x <= pair[0].x)
    {
        return None;
    }
    let mut left = vec![Vec2::ZERO; count];
    let mut right = vec![Vec2::ZERO; count];
    // Keys whose handles the smoothing leaves alone: the ends and the extremes.
    let mut held = vec![false; count];
    for i in 0..count {
        held[i] = first_pass(co, i, smooth, &mut left[i], &mut right[i])?;
    }
    if smooth {
        // Each run of free keys between two held ones is smoothed on its own.
        let mut scratch = Scratch::default();
        let mut start = 0;
        for (i, _) in held.iter().enumerate().skip(1).filter(|(_, &held)| held) {
            smooth_run(
                co,
                &mut left,
                &mut right,
                start,
                i - start + 1,
                &mut scratch,
            )?;
            start = i;
        }
    }
    Some((left, right))
}

/// Handles for many curves keyed on the same `frames`: `values` holds the curves one after
/// another (`curves x frames.len()`); each entry as [`auto_clamped_handles`] gives it. The
/// curves are shared among up to `threads` threads (0: as many as the machine has).
pub fn auto_clamped_handles_of_curves(
    frames: &[f32],
    values: &[f32],
    smooth: bool,
    threads: usize,
) -> Vec<Option<(Vec<Vec2>, Vec<Vec2>)>> {
    let count = frames.len();
    if count == 0 {
        return Vec::new();
    }
    let curve = |values: &[f32]| {
        let co: Vec<Vec2> = frames
            .iter()
            .zip(values)
            .map(|(&x, &y)| Vec2::new(x, y))
            .collect();
        auto_clamped_handles(&co, smooth)
    };
    let curves = values.len() / count;
    let threads = match threads {
        0 => crate::machine_threads(),
        t => t,
    }
    .min(curves)
    // Each thread at least 2000 keys (some 80 us of work here; starting a thread costs
    // tens of microseconds).
    .min(values.len() / 2000)
    .max(1);
    if threads == 1 {
        return values.chunks_exact(count).map(curve).collect();
    }
    let per_thread = curves.div_ceil(threads) * count;
    std::thread::scope(|scope| {
        let mut shares = values.chunks(per_thread);
        // The first share on this thread, which would only wait.
        let first = shares.next().unwrap_or_default();
        let others: Vec<_> = shares
            .map(|share| {
                (
                    share.len() / count,
                    scope.spawn(move || share.chunks_exact(count).map(curve).collect::<Vec<_>>()),
                )
            })
            .collect();
        let mut all: Vec<_> = first.chunks_exact(count).map(curve).collect();
        for (size, other) in others {
            // A share whose thread failed leaves its curves to Blender.
            all.extend(other.join().unwrap_or_else(|_| vec![None; size]));
        }
        all
    })
}

/// Key `i`'s handles from its neighbours alone; true when the key is held (an end, or an
/// extreme whose handles are flat). None where Blender would leave the handles as they were.
fn first_pass(
    co: &[Vec2],
    i: usize,
    smooth: bool,
    left: &mut Vec2,
    right: &mut Vec2,
) -> Option<bool> {
    let count = co.len();
    let point = co[i];
    // A missing neighbour is mirrored through the key.
    let before = if i > 0 {
        co[i - 1]
    } else {
        mirrored(point, co[i + 1])
    };
    let after = if i + 1 < count {
        co[i + 1]
    } else {
        mirrored(point, before)
    };
    let (along_a, along_b) = (point - before, after - point);
    let mut len_a = if along_a.x == 0.0 { 1.0 } else { along_a.x };
    let mut len_b = if along_b.x == 0.0 { 1.0 } else { along_b.x };
    let direction = Vec2::new(
        along_b.x / len_b + along_a.x / len_a,
        along_b.y / len_b + along_a.y / len_a,
    );
    // Smoothing keeps each handle a third of its interval long in time.
    let mut len = if smooth {
        6.0 / HANDLE_FACTOR
    } else {
        direction.x
    };
    len *= HANDLE_FACTOR;
    if len == 0.0 {
        return None;
    }
    if !smooth {
        len_a = len_a.min(5.0 * len_b);
        len_b = len_b.min(5.0 * len_a);
    }
    let interior = i > 0 && i + 1 < count;
    let (rise_before, rise_after) = (before.y - point.y, after.y - point.y);
    let extreme =
        (rise_before <= 0.0 && rise_after <= 0.0) || (rise_before >= 0.0 && rise_after >= 0.0);
    let (mut left_clamped, mut right_clamped) = (false, false);

    len_a /= len;
    *left = Vec2::new(
        point.x + direction.x * -len_a,
        point.y + direction.y * -len_a,
    );
    if interior {
        if extreme {
            left.y = point.y;
        } else if (rise_before <= 0.0 && before.y > left.y)
            || (rise_before > 0.0 && before.y < left.y)
        {
            // Clamped: no handle beyond the neighbour's value.
            left.y = before.y;
            left_clamped = true;
        }
    }
    len_b /= len;
    *right = Vec2::new(point.x + direction.x * len_b, point.y + direction.y * len_b);
    if interior {
        if extreme {
            right.y = point.y;
        } else if (rise_before <= 0.0 && after.y < right.y)
            || (rise_before > 0.0 && after.y > right.y)
        {
            right.y = after.y;
            right_clamped = true;
        }
    }
    if left_clamped || right_clamped {
        // The other handle keeps the clamped one's slope.
        let (left_x, right_x) = (left.x - point.x, point.x - right.x);
        if left_clamped {
            right.y = point.y + ((point.y - left.y) / left_x) * right_x;
        } else {
            left.y = point.y + ((point.y - right.y) / right_x) * left_x;
        }
    }
    // With constant extension the ends ease in and out.
    let end = !interior;
    if end {
        left.y = point.y;
        right.y = point.y;
    }
    Some(end || (interior && extreme))
}

fn mirrored(point: Vec2, other: Vec2) -> Vec2 {
    Vec2::new(2.0 * point.x - other.x, 2.0 * point.y - other.y)
}

/// Buffers for the smoothing, sized to the longest run so far (a run between two extremes
/// is often a few keys long: allocating per run cost more than the arithmetic).
#[derive(Default)]
struct Scratch {
    dx: Vec<f32>,
    dy: Vec<f32>,
    ratio: Vec<f32>,
    highest: Vec<f32>,
    lowest: Vec<f32>,
    system: System,
    original: System,
    fixed: Vec<bool>,
    freed: Vec<u8>,
    x: Vec<f32>,
    forward_c: Vec<f64>,
    forward_d: Vec<f64>,
}

/// A tridiagonal system: `a` below the diagonal, `b` on it, `c` above it, `d` the right side.
#[derive(Default, Clone)]
struct System {
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
    d: Vec<f32>,
}

impl System {
    fn resize(&mut self, count: usize) {
        for column in [&mut self.a, &mut self.b, &mut self.c, &mut self.d] {
            column.clear();
            column.resize(count, 0.0);
        }
    }

    /// Fixes unknown `i` at `value`.
    fn lock(&mut self, i: usize, value: f32) {
        self.a[i] = 0.0;
        self.c[i] = 0.0;
        self.b[i] = 1.0;
        self.d[i] = value;
    }

    fn copy_row(&mut self, from: &System, i: usize) {
        (self.a[i], self.b[i], self.c[i], self.d[i]) = (from.a[i], from.b[i], from.c[i], from.d[i]);
    }
}

fn refill<T: Copy>(buffer: &mut Vec<T>, count: usize, value: T) {
    buffer.clear();
    buffer.resize(count, value);
}

/// "Continuous Acceleration": the handles of the free keys `start + 1 .. start + count - 1`
/// chosen so the curve's second derivative is continuous at every key, each handle kept
/// between its neighbours' values, the held keys at both ends left as they are.
fn smooth_run(
    co: &[Vec2],
    left: &mut [Vec2],
    right: &mut [Vec2],
    start: usize,
    count: usize,
    scratch: &mut Scratch,
) -> Option<()> {
    if count <= 2 {
        return Some(());
    }
    let last = start + count - 1;
    let Scratch {
        dx,
        dy,
        ratio,
        highest,
        lowest,
        system,
        ..
    } = scratch;
    // dx[i], dy[i]: the interval from key i - 1 to key i of the run (index 0 unused).
    refill(dx, count, f32::NAN);
    refill(dy, count, f32::NAN);
    for i in 1..count {
        dx[i] = co[start + i].x - co[start + i - 1].x;
        dy[i] = co[start + i].y - co[start + i - 1].y;
    }
    // The ratio of each key's intervals, which ties its handles' lengths.
    refill(ratio, count, 1.0);
    for i in 1..count - 1 {
        ratio[i] = dx[i + 1] / dx[i];
    }
    refill(highest, count, f32::MAX);
    refill(lowest, count, -f32::MAX);
    for i in 1..count {
        clamp_range(highest, lowest, i - 1, dy[i]);
        clamp_range(highest, lowest, i, dy[i] * ratio[i]);
    }
    system.resize(count);
    // The held ends: their handles are fixed unknowns.
    let mut handle = right[start] - co[start];
    let first_adjust = handle_adjustment(&mut handle, dx[1]);
    system.lock(0, handle.y);
    let mut handle = co[last] - left[last];
    let last_adjust = handle_adjustment(&mut handle, dx[count - 1]);
    system.lock(count - 1, handle.y);
    for i in 1..count - 1 {
        system.a[i] = ratio[i] * ratio[i];
        system.b[i] = 2.0 * (ratio[i] + 1.0);
        system.c[i] = 1.0 / ratio[i + 1];
        system.d[i] = dy[i] * ratio[i] * ratio[i] + dy[i + 1];
    }
    system.b[1] += ratio[1] * first_adjust;
    system.b[count - 2] += last_adjust;
    solve_within(scratch)?;
    for i in 1..count - 1 {
        let key = start + i;
        left[key].y = co[key].y + -scratch.x[i] / scratch.ratio[i];
        right[key].y = co[key].y + scratch.x[i];
    }
    Some(())
}

/// Auto Clamped: a key's handle may neither reverse the key's rise nor overshoot the
/// neighbour (`rise`: the value's change over the handle's interval).
fn clamp_range(highest: &mut [f32], lowest: &mut [f32], i: usize, rise: f32) {
    if rise > 0.0 {
        highest[i] = highest[i].min(rise);
        lowest[i] = 0.0;
    } else if rise < 0.0 {
        highest[i] = 0.0;
        lowest[i] = lowest[i].max(rise);
    } else {
        highest[i] = 0.0;
        lowest[i] = 0.0;
    }
}

/// Scales a held handle (`handle`, from its key) back inside its interval if it reaches
/// past it; how far its length in time differs from a third of the interval.
fn handle_adjustment(handle: &mut Vec2, interval: f32) -> f32 {
    let factor = interval / (handle.x + interval / 3.0);
    if factor < 1.0 {
        handle.x *= factor;
        handle.y *= factor;
    }
    1.0 - 3.0 * handle.x / interval
}

/// The scratch's system solved into `scratch.x` with each unknown kept in
/// `lowest..=highest`: an unknown out of range is fixed at its bound and the system solved
/// again; a fixed one whose equation would pull it back inside is freed (twice at most).
/// None if a solve fails or the search does not settle.
fn solve_within(scratch: &mut Scratch) -> Option<()> {
    let Scratch {
        highest,
        lowest,
        system,
        original,
        fixed,
        freed,
        x,
        forward_c,
        forward_d,
        ..
    } = scratch;
    let count = system.a.len();
    // Only the first and last equations could link the ends; they are fixed here.
    if system.a[0] != 0.0 || system.c[count - 1] != 0.0 {
        return None;
    }
    original.clone_from(system);
    refill(fixed, count, false);
    refill(freed, count, 0);
    refill(x, count, 0.0);
    // Each round fixes or frees an unknown; an end is never either, and each other is fixed
    // three times and freed twice at most.
    for _ in 0..5 * count + 1 {
        if !solve_tridiagonal(system, x, forward_c, forward_d) {
            return None;
        }
        let (mut overshoot, mut any_fixed, mut every) = (false, false, false);
        loop {
            for i in 0..count {
                if x[i] >= lowest[i] && x[i] <= highest[i] {
                    continue;
                }
                overshoot = true;
                let bound = if x[i] > highest[i] {
                    highest[i]
                } else {
                    lowest[i]
                };
                // First only the unknowns whose bound is not zero, if there are any.
                if bound != 0.0 || every {
                    fixed[i] = true;
                    system.lock(i, bound);
                    any_fixed = true;
                }
            }
            every = true;
            if !overshoot || any_fixed {
                break;
            }
        }
        let mut any_freed = false;
        if !any_fixed {
            for i in 0..count {
                if !fixed[i] || freed[i] >= 2 {
                    continue;
                }
                let previous = x[(i + count - 1) % count];
                let next = x[(i + 1) % count];
                let residual =
                    original.a[i] * previous + original.b[i] * x[i] + original.c[i] * next
                        - original.d[i];
                let pull = -residual * original.b[i];
                if (pull > 0.0 && x[i] < highest[i]) || (pull < 0.0 && x[i] > lowest[i]) {
                    system.copy_row(original, i);
                    fixed[i] = false;
                    freed[i] += 1;
                    any_freed = true;
                }
            }
        }
        if !(overshoot || any_freed) {
            return Some(());
        }
    }
    None
}

/// Thomas's algorithm in double precision; false if the answer is not finite.
fn solve_tridiagonal(
    system: &System,
    x: &mut [f32],
    forward_c: &mut Vec<f64>,
    forward_d: &mut Vec<f64>,
) -> bool {
    let System { a, b, c, d } = system;
    let count = a.len();
    refill(forward_c, count, 0.0);
    refill(forward_d, count, 0.0);
    let (mut c_prev, mut d_prev) = (
        f64::from(c[0]) / f64::from(b[0]),
        f64::from(d[0]) / f64::from(b[0]),
    );
    forward_c[0] = c_prev;
    forward_d[0] = d_prev;
    for i in 1..count {
        let denominator = f64::from(b[i]) - f64::from(a[i]) * c_prev;
        c_prev = f64::from(c[i]) / denominator;
        d_prev = (f64::from(d[i]) - f64::from(a[i]) * d_prev) / denominator;
        forward_c[i] = c_prev;
        forward_d[i] = d_prev;
    }
    let mut value = d_prev;
    x[count - 1] = value as f32;
    for i in (0..count - 1).rev() {
        value = forward_d[i] - forward_c[i] * value;
        x[i] = value as f32;
    }
    value.is_finite()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(values: &[f32]) -> Vec<Vec2> {
        values
            .iter()
            .enumerate()
            .map(|(i, &value)| Vec2::new(i as f32 + 1.0, value))
            .collect()
    }

    #[test]
    fn a_straight_rise_keeps_its_handles_on_the_line() {
        let co = keys(&[0.0, 1.0, 2.0, 3.0, 4.0]);
        let (left, right) = auto_clamped_handles(&co, false).unwrap();
        for i in 1..4 {
            let slope_left = (co[i].y - left[i].y) / (co[i].x - left[i].x);
            let slope_right = (right[i].y - co[i].y) / (right[i].x - co[i].x);
            assert!(
                (slope_left - 1.0).abs() < 1e-5 && (slope_right - 1.0).abs() < 1e-5,
                "{i}"
            );
        }
        // The ends ease in and out.
        assert_eq!((left[0].y, right[0].y), (0.0, 0.0));
        assert_eq!((left[4].y, right[4].y), (4.0, 4.0));
    }

    #[test]
    fn smoothing_makes_the_acceleration_continuous() {
        let co = keys(&[0.0, 1.0, 3.0, 6.0, 10.0, 15.0, 21.0]);
        let (left, right) = auto_clamped_handles(&co, true).unwrap();
        for i in 1..co.len() - 1 {
            // Handles a third of an interval away in time.
            assert!((co[i].x - left[i].x - 1.0 / 3.0).abs() < 1e-5, "{i}");
            assert!((right[i].x - co[i].x - 1.0 / 3.0).abs() < 1e-5, "{i}");
            // The second derivative arriving at key i and leaving it.
            let arriving = co[i].y - 2.0 * left[i].y + right[i - 1].y;
            let leaving = left[i + 1].y - 2.0 * right[i].y + co[i].y;
            assert!(
                (arriving - leaving).abs() < 1e-4,
                "{i}: {arriving} {leaving}"
            );
        }
    }

    #[test]
    fn extremes_are_flat_and_no_handle_overshoots_a_neighbour() {
        let values = [0.0, 2.0, 2.1, 5.0, 4.0, -3.0, -2.9, 0.0, 0.0, 1.0];
        let co = keys(&values);
        for smooth in [false, true] {
            let (left, right) = auto_clamped_handles(&co, smooth).unwrap();
            for i in 1..values.len() - 1 {
                let (low, high) = (
                    values[i - 1].min(values[i + 1]),
                    values[i - 1].max(values[i + 1]),
                );
                let extreme = values[i] >= high || values[i] <= low;
                if extreme {
                    assert_eq!(
                        (left[i].y, right[i].y),
                        (values[i], values[i]),
                        "{smooth} {i}"
                    );
                } else {
                    for handle in [left[i].y, right[i].y] {
                        assert!(
                            handle >= low - 1e-6 && handle <= high + 1e-6,
                            "{smooth} {i} {handle}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn curves_shared_among_threads_get_the_handles_each_gets_alone() {
        // Nine curves of 700 keys: three shares are allowed (2000 keys each at least).
        let frames: Vec<f32> = (0..700).map(|i| i as f32 * 0.5).collect();
        let values: Vec<f32> = (0..700 * 9)
            .map(|i| ((i * 7919) % 1000) as f32 * 0.01 + (i as f32 * 0.01).sin())
            .collect();
        for threads in [1, 2, 3, 0] {
            let all = auto_clamped_handles_of_curves(&frames, &values, true, threads);
            assert_eq!(all.len(), 9, "{threads}");
            for (k, handles) in all.iter().enumerate() {
                let co: Vec<Vec2> = frames
                    .iter()
                    .zip(&values[k * 700..(k + 1) * 700])
                    .map(|(&x, &y)| Vec2::new(x, y))
                    .collect();
                assert_eq!(handles, &auto_clamped_handles(&co, true), "{threads} {k}");
            }
        }
        assert!(auto_clamped_handles_of_curves(&[], &[], true, 2).is_empty());
    }

    #[test]
    fn keys_out_of_order_or_not_numbers_are_left_to_blender() {
        assert!(auto_clamped_handles(&[Vec2::new(1.0, 0.0)], true).is_none());
        assert!(auto_clamped_handles(&[Vec2::new(1.0, 0.0), Vec2::new(1.0, 2.0)], true).is_none());
        assert!(auto_clamped_handles(&[Vec2::new(2.0, 0.0), Vec2::new(1.0, 2.0)], false).is_none());
        assert!(
            auto_clamped_handles(&[Vec2::new(1.0, f32::NAN), Vec2::new(2.0, 2.0)], true).is_none()
        );
        assert!(auto_clamped_handles(&[Vec2::new(1.0, 0.0), Vec2::new(2.0, 2.0)], true).is_some());
    }
}
