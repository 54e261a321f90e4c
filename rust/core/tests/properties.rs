//! Property-based tests: arbitrary rigs (random trees, zero-length and huge bones, scaled
//! frames, any limits), arbitrary goals (far, coincident, on the root, non-finite, on bones
//! that do not exist) and every solver. Nothing panics, nothing non-finite comes out, and
//! an error comes exactly when the input is invalid; each report describes the pose
//! returned.

mod common;

use common::measured_residual;
use glam::{Quat, Vec3};
use proptest::prelude::*;
use tendon_core::*;

/// One bone's description, before the names and parents are attached.
#[derive(Debug, Clone)]
struct BoneSpec {
    parent: Option<usize>,
    offset: Vec3,
    rotation: Quat,
    scale: f32,
    length: f32,
    limits: [Option<(f32, f32)>; 3],
    locked: [bool; 3],
}

fn length() -> impl Strategy<Value = f32> {
    prop_oneof![Just(0.0f32), Just(1e-7f32), 0.01f32..3.0, Just(1e4f32)]
}

fn axis_limit() -> impl Strategy<Value = Option<(f32, f32)>> {
    // Ranges from empty (a point) to wider than a turn; `rig_specs` reverses one sometimes.
    prop_oneof![
        Just(None),
        (-4.0f32..4.0, prop_oneof![Just(0.0f32), 0.0f32..7.0])
            .prop_map(|(min, width)| Some((min, min + width)))
    ]
}

fn bone(index: usize) -> impl Strategy<Value = BoneSpec> {
    let parent = if index == 0 {
        Just(None).boxed()
    } else {
        prop_oneof![1 => Just(None), 12 => (0..index).prop_map(Some)].boxed()
    };
    (
        parent,
        (-2.0f32..2.0, -2.0f32..2.0, -2.0f32..2.0),
        (-3.2f32..3.2, -3.2f32..3.2, -3.2f32..3.2),
        prop_oneof![Just(1.0f32), 0.5f32..2.0, Just(1e-3f32)],
        length(),
        [axis_limit(), axis_limit(), axis_limit()],
        [any::<bool>(), any::<bool>(), any::<bool>()],
    )
        .prop_map(
            |(parent, offset, euler, scale, length, limits, locked)| BoneSpec {
                parent,
                offset: Vec3::new(offset.0, offset.1, offset.2),
                rotation: Quat::from_euler(glam::EulerRot::XYZ, euler.0, euler.1, euler.2),
                scale,
                length,
                limits,
                locked,
            },
        )
}

fn rig_specs() -> impl Strategy<Value = Vec<BoneSpec>> {
    (1usize..24)
        .prop_flat_map(|n| {
            (
                (0..n).map(bone).collect::<Vec<_>>(),
                0..n,
                prop::bool::weighted(0.15),
            )
        })
        .prop_map(|(mut specs, victim, corrupt)| {
            // Now and then a hand-edited file: one reversed range.
            if corrupt {
                specs[victim].limits[0] = Some((1.0, -1.0));
                specs[victim].locked[0] = false;
            }
            specs
        })
}

/// The rig description, and the name of the bone whose x range is reversed (if any).
fn describe(specs: &[BoneSpec]) -> (RigDesc, Option<String>) {
    let mut invalid = None;
    let bones = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let parent = spec.parent.map(|p| format!("b{p}"));
            let mut bone = BoneDesc::new(
                format!("b{i}"),
                parent.as_deref(),
                Transform {
                    translation: spec.offset,
                    rotation: spec.rotation,
                    scale: Vec3::splat(spec.scale),
                },
                spec.length,
            );
            let axes = [&mut bone.limits.x, &mut bone.limits.y, &mut bone.limits.z];
            for ((limit, range), locked) in axes.into_iter().zip(spec.limits).zip(spec.locked) {
                *limit = match (locked, range) {
                    (true, _) => AxisLimit::Locked,
                    (false, None) => AxisLimit::Free,
                    (false, Some((min, max))) => {
                        if min > max {
                            invalid.get_or_insert_with(|| format!("b{i}"));
                        }
                        AxisLimit::Range { min, max }
                    }
                };
            }
            bone
        })
        .collect();
    (RigDesc { bones }, invalid)
}

#[derive(Debug, Clone)]
enum TargetKind {
    Near(Vec3),
    Far,
    OnRoot,
    NonFinite,
}

fn goal_specs() -> impl Strategy<Value = Vec<(f32, TargetKind, usize, bool, bool)>> {
    let target = prop_oneof![
        12 => (-3.0f32..3.0, -3.0f32..3.0, -3.0f32..3.0).prop_map(|(x, y, z)| TargetKind::Near(Vec3::new(x, y, z))),
        2 => Just(TargetKind::Far),
        2 => Just(TargetKind::OnRoot),
        1 => Just(TargetKind::NonFinite),
    ];
    // Bones are drawn as a share of the rig (mapped in the test); 1.5 lies past the last.
    let bone = prop_oneof![12 => 0.0f32..1.0, 1 => Just(1.5f32)];
    prop::collection::vec(
        (bone, target, 0usize..30, any::<bool>(), any::<bool>()),
        1..4,
    )
}

fn solvers() -> Vec<(&'static str, AnySolver)> {
    SolverConfig::all()
        .into_iter()
        .map(|mut config| {
            if let SolverConfig::Tension(p) = &mut config {
                // Keep the simplex short: this checks safety, not quality.
                p.max_evaluations = 300;
            }
            config.iteration_mut().max_iterations = config.iteration_mut().max_iterations.min(60);
            (config.name(), config.build())
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn rigs_and_goals_never_panic_or_produce_non_finite_poses(specs in rig_specs(), goals in goal_specs()) {
        let (desc, invalid_limits) = describe(&specs);
        let rig = match desc.build() {
            Ok(rig) => rig,
            Err(error) => {
                // Only a reversed range makes this description invalid; the error names its
                // bone and axis.
                let Some(victim) = &invalid_limits else {
                    return Err(TestCaseError::fail(format!("valid rig refused: {error}")));
                };
                prop_assert!(
                    matches!(&error, TendonError::InvalidLimit { bone, axis: 'x', .. } if bone == victim),
                    "{error}"
                );
                let named = format!("invalid x limit on bone '{victim}': min 1 is greater than max -1");
                prop_assert_eq!(error.to_string(), named);
                return Ok(());
            }
        };
        prop_assert!(invalid_limits.is_none(), "reversed limits accepted");
        let n = rig.len();
        let world = rig.world_matrices(&Pose::rest(n));
        let mut bad_goal = false;
        let goals: Vec<Goal> = goals
            .iter()
            .map(|(share, kind, chain, rotation, pole)| {
                let bone = (share * n as f32) as usize;
                bad_goal |= bone >= n || matches!(kind, TargetKind::NonFinite);
                let target = match kind {
                    TargetKind::Near(v) => *v,
                    TargetKind::Far => Vec3::new(1e6, -1e6, 1e6),
                    TargetKind::OnRoot => Vec3::from(world[0].translation),
                    TargetKind::NonFinite => Vec3::new(f32::NAN, 0.0, f32::INFINITY),
                };
                let mut goal = Goal::new(bone, target).with_chain_length(*chain);
                if *rotation {
                    goal = goal.with_rotation(Quat::from_rotation_y(0.7), 0.5);
                }
                if *pole {
                    goal = goal.with_pole(target + Vec3::X);
                }
                goal
            })
            .collect();
        for (name, mut solver) in solvers() {
            match solver.solve(&rig, &Pose::rest(n), &goals) {
                Ok((pose, report)) => {
                    prop_assert!(!bad_goal, "{name} accepted an invalid goal");
                    prop_assert!(pose.rotations.iter().all(|q| q.is_finite()), "{name}: non-finite rotation");
                    prop_assert!(pose.translations.iter().all(|t| t.is_finite()), "{name}: non-finite translation");
                    prop_assert!(!report.residual.is_nan(), "{name}: NaN residual");
                    // The report describes the pose returned (a residual measured before a
                    // last turn said reached with an effector 1.4 off; QA helper).
                    let measured = measured_residual(&rig, &pose, &goals);
                    prop_assert!(
                        (measured - report.residual).abs() <= 1e-4 * measured.max(1.0),
                        "{name}: reported {} measured {measured}", report.residual
                    );
                }
                Err(error) => prop_assert!(bad_goal, "{name} refused valid input: {error}"),
            }
        }
    }
}

#[test]
fn a_thousand_bone_rig_solves() {
    // One long spine with branches every ten bones: every solver (the simplex shortened)
    // returns a finite pose for goals at both ends of the tree.
    let bones = (0..1000)
        .map(|i| {
            let parent = match i {
                0 => None,
                i if i % 10 == 0 => Some(format!("b{}", i - 5)),
                i => Some(format!("b{}", i - 1)),
            };
            BoneDesc::new(
                format!("b{i}"),
                parent.as_deref(),
                Transform {
                    translation: Vec3::new(0.0, 0.1, 0.0),
                    rotation: Quat::from_rotation_x(0.01),
                    scale: Vec3::ONE,
                },
                0.1,
            )
        })
        .collect();
    let rig = RigDesc { bones }.build().unwrap();
    let goals = [
        Goal::new(rig.index_of("b999").unwrap(), Vec3::new(5.0, 20.0, 3.0)).with_chain_length(50),
        Goal::new(rig.index_of("b500").unwrap(), Vec3::new(-2.0, 10.0, 1.0)).with_chain_length(20),
    ];
    for (name, mut solver) in solvers() {
        let (pose, _) = solver.solve(&rig, &Pose::rest(1000), &goals).unwrap();
        assert!(pose.rotations.iter().all(|q| q.is_finite()), "{name}");
    }
}
