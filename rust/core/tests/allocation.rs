//! After the first solve on a rig, solving again allocates nothing. This test binary holds
//! this one test, so the counting allocator sees no other test's allocations.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use tendon_core::fixtures::{humanoid, humanoid_limited, reachable_targets};
use tendon_core::*;

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn solving_again_allocates_nothing() {
    solving_again_allocates_nothing_on(&humanoid(), 1);
    // With human limits the solvers also run their finishes and retries (FABRIK and CCD
    // finish with damped least squares; the Jacobian solvers retry with joints moved off
    // their bounds), which size their memory the first time they run: a first pass over
    // every problem, then none may allocate.
    solving_again_allocates_nothing_on(&humanoid_limited(), 8);
}

/// Solves problems `0..first` once (sizing memory), then every problem of 8: none of
/// those after the first pass may allocate.
fn solving_again_allocates_nothing_on(rig: &Rig, first: usize) {
    let bone = |name: &str| rig.index_of(name).unwrap();
    let targets = |name: &str, seed| reachable_targets(rig, bone(name), 8, seed);
    let (left, right, head) = (
        targets("hand.L", 1),
        targets("foot.R", 2),
        targets("head", 3),
    );
    let mut rotated = targets("forearm.R", 4);
    rotated.truncate(8);
    let rest = Pose::rest(rig.len());
    for config in SolverConfig::all() {
        let mut solver = config.build();
        let mut out = Pose::rest(0);
        let goals = |k: usize| {
            [
                Goal::new(bone("hand.L"), left[k]).with_chain_length(4),
                Goal::new(bone("foot.R"), right[k])
                    .with_chain_length(3)
                    .with_pole(glam::Vec3::new(0.0, -1.0, 0.5)),
                Goal::new(bone("head"), head[k]).with_weight(0.5),
                Goal::new(bone("forearm.R"), rotated[k])
                    .with_rotation(glam::Quat::from_rotation_z(0.3), 0.5),
            ]
        };
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        for k in 0..first {
            solver.solve_into(rig, &rest, &goals(k), &mut out).unwrap();
        }
        // The first solves size the scratch memory: proof the counter sees allocations.
        assert!(
            ALLOCATIONS.load(Ordering::Relaxed) > before,
            "{}",
            config.name()
        );
        for k in (first % 8)..8 {
            let goals = goals(k);
            let before = ALLOCATIONS.load(Ordering::Relaxed);
            solver.solve_into(rig, &rest, &goals, &mut out).unwrap();
            let during = ALLOCATIONS.load(Ordering::Relaxed) - before;
            assert_eq!(
                during,
                0,
                "{} allocated {during} times on solve {k}",
                config.name()
            );
        }
    }
}
