//! Degenerate and hostile input: a sane pose or a clear error, never a panic or NaN.

mod common;

use common::*;
use glam::{Quat, Vec3};
use tendon_core::*;

fn assert_sane(name: &str, rig: &Rig, pose: &Pose, report: &SolveReport) {
    assert!(
        pose.rotations
            .iter()
            .all(|q| q.is_finite() && (q.length() - 1.0).abs() < 1e-4),
        "{name}: {pose:?}"
    );
    assert!(
        rig.world_matrices(pose).iter().all(|m| m.is_finite()),
        "{name}"
    );
    assert!(
        !report.residual.is_nan() && !report.rotation_residual.is_nan(),
        "{name}: {report:?}"
    );
}

/// A straight chain of `n` bones along +Y with no bend at all.
fn straight_chain(n: usize) -> Rig {
    let bones = (0..n)
        .map(|i| {
            let rest = Transform {
                translation: Vec3::new(0.0, if i == 0 { 0.0 } else { 1.0 }, 0.0),
                ..Transform::IDENTITY
            };
            let parent = (i > 0).then(|| format!("b{}", i - 1));
            BoneDesc::new(format!("b{i}"), parent.as_deref(), rest, 1.0)
        })
        .collect();
    RigDesc { bones }.build().unwrap()
}

#[test]
fn straight_chain_with_target_on_its_line() {
    // No rotation of a straight chain's joints shortens it: the shared driver bends it.
    for n in [2, 3, 6] {
        let rig = straight_chain(n);
        for along in [0.3, 0.6, 0.95] {
            let target = Vec3::new(0.0, n as f32 * along, 0.0);
            for (name, mut solver) in all_solvers() {
                let (pose, report) = solver
                    .solve(&rig, &Pose::rest(n), &[Goal::new(n - 1, target)])
                    .unwrap();
                assert_sane(name, &rig, &pose, &report);
                if matches!(name, "fabrik" | "jacobian_dls" | "two_bone")
                    && (name != "two_bone" || n == 2)
                {
                    assert!(
                        report.reached,
                        "{name} on a straight {n}-bone chain, target at {along}: {report:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn zero_length_bones() {
    let mut desc = bent_chain(6, 1).to_desc();
    for i in [1, 2, 5] {
        desc.bones[i].length = 0.0;
    }
    // Bone 2 sits on bone 1's head, and bone 3 on bone 2's.
    desc.bones[2].rest.translation = Vec3::ZERO;
    desc.bones[3].rest.translation = Vec3::ZERO;
    let rig = desc.build().unwrap();
    for target in [
        Vec3::new(0.5, 2.0, 0.3),
        Vec3::ZERO,
        Vec3::new(0.0, 100.0, 0.0),
    ] {
        for (name, mut solver) in all_solvers() {
            for bone in [5, 4, 2] {
                let (pose, report) = solver
                    .solve(&rig, &Pose::rest(6), &[Goal::new(bone, target)])
                    .unwrap();
                assert_sane(name, &rig, &pose, &report);
            }
        }
    }
    // A rig of nothing but zero-length bones.
    let mut desc = straight_chain(4).to_desc();
    for b in &mut desc.bones {
        b.length = 0.0;
        b.rest.translation = Vec3::ZERO;
    }
    let rig = desc.build().unwrap();
    for (name, mut solver) in all_solvers() {
        let (pose, report) = solver
            .solve(&rig, &Pose::rest(4), &[Goal::new(3, Vec3::X)])
            .unwrap();
        assert_sane(name, &rig, &pose, &report);
        assert!(!report.reached);
    }
}

#[test]
fn targets_on_the_root_coincident_and_far() {
    let rig = bent_chain(5, 2);
    let tip = tail(&rig, &Pose::rest(5), 4);
    let cases = [
        Vec3::ZERO,
        tip,
        Vec3::new(1e30, -1e30, 1e30),
        Vec3::new(1e-30, 0.0, 0.0),
        Vec3::splat(f32::MAX),
    ];
    for target in cases {
        for (name, mut solver) in all_solvers() {
            let (pose, report) = solver
                .solve(&rig, &Pose::rest(5), &[Goal::new(4, target)])
                .unwrap();
            assert_sane(name, &rig, &pose, &report);
            if target == tip {
                assert!(
                    report.reached && report.iterations <= 1,
                    "{name}: already there: {report:?}"
                );
            }
        }
    }
    // Goals on the root bone and chain lengths beyond the root.
    for (name, mut solver) in all_solvers() {
        let goals = [
            Goal::new(0, Vec3::new(1.0, 1.0, 0.0)),
            Goal::new(4, Vec3::new(2.0, 2.0, 0.0)).with_chain_length(50),
        ];
        let (pose, report) = solver.solve(&rig, &Pose::rest(5), &goals).unwrap();
        assert_sane(name, &rig, &pose, &report);
        let (pose, report) = solver
            .solve(&rig, &Pose::rest(5), &[Goal::new(0, Vec3::ONE).at_head()])
            .unwrap();
        assert_sane(name, &rig, &pose, &report);
        assert_eq!(
            pose,
            Pose::rest(5),
            "{name}: nothing can move a root's head"
        );
    }
}

#[test]
fn extreme_scales_stay_finite() {
    let mut desc = bent_chain(5, 4).to_desc();
    desc.bones[1].rest.scale = Vec3::new(1e-20, 1.0, 1.0);
    desc.bones[3].rest.scale = Vec3::splat(1e15);
    let rig = desc.build().unwrap();
    let mut pose = Pose::rest(5);
    pose.scales[2] = Vec3::ZERO;
    for (name, mut solver) in all_solvers() {
        let (out, report) = solver
            .solve(&rig, &pose, &[Goal::new(4, Vec3::new(1.0, 2.0, 3.0))])
            .unwrap();
        assert!(out.rotations.iter().all(|q| q.is_finite()), "{name}");
        assert!(!report.residual.is_nan(), "{name}");
    }
}

#[test]
fn non_finite_input_is_an_error_naming_the_culprit() {
    let rig = bent_chain(4, 3);
    let nan = f32::NAN;
    let cases: Vec<(Goal, &str)> = vec![
        (
            Goal::new(3, Vec3::new(nan, 0.0, 0.0)),
            "target of goal 0 (bone 'b3')",
        ),
        (
            Goal::new(3, Vec3::ONE).with_weight(f32::INFINITY),
            "weight of goal 0",
        ),
        (Goal::new(3, Vec3::ONE).with_weight(-1.0), "negative"),
        (
            Goal::new(3, Vec3::ONE).with_pole(Vec3::new(0.0, nan, 0.0)),
            "pole of goal 0",
        ),
        (
            Goal::new(3, Vec3::ONE).with_rotation(Quat::from_xyzw(nan, 0.0, 0.0, 1.0), 1.0),
            "rotation of goal 0",
        ),
        (
            Goal::new(3, Vec3::ONE).with_rotation(Quat::from_xyzw(0.0, 0.0, 0.0, 0.0), 1.0),
            "zero quaternion",
        ),
        (Goal::new(9, Vec3::ONE), "bone index 9 is out of range"),
    ];
    for (name, mut solver) in all_solvers() {
        for (goal, needle) in &cases {
            let err = solver
                .solve(&rig, &Pose::rest(4), &[*goal])
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(needle),
                "{name}: '{err}' should mention '{needle}'"
            );
        }
        let mut pose = Pose::rest(4);
        pose.translations[2].y = f32::INFINITY;
        let err = solver
            .solve(&rig, &pose, &[Goal::new(3, Vec3::ONE)])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("pose translation of bone 'b2'"),
            "{name}: {err}"
        );
        let err = solver
            .solve(&rig, &Pose::rest(2), &[Goal::new(3, Vec3::ONE)])
            .unwrap_err()
            .to_string();
        assert!(err.contains("expected 4"), "{name}: {err}");
        // An unnormalised start rotation is accepted and normalised.
        let mut pose = Pose::rest(4);
        pose.rotations[1] = Quat::from_xyzw(0.0, 0.0, 0.0, 3.0);
        let (out, report) = solver
            .solve(&rig, &pose, &[Goal::new(3, Vec3::new(0.5, 2.0, 0.0))])
            .unwrap();
        assert_sane(name, &rig, &out, &report);
    }
    let mut dls = JacobianDls::new(JacobianDlsParams {
        damping: f32::NAN,
        ..Default::default()
    });
    assert!(dls
        .solve(&rig, &Pose::rest(4), &[])
        .unwrap_err()
        .to_string()
        .contains("damping"));
    let mut fabrik = Fabrik::new(FabrikParams {
        iteration: IterationParams {
            tolerance: -1.0,
            ..Default::default()
        },
    });
    assert!(fabrik
        .solve(&rig, &Pose::rest(4), &[])
        .unwrap_err()
        .to_string()
        .contains("tolerance"));
}

#[test]
fn no_goals_returns_the_start_pose() {
    let rig = bent_chain(3, 5);
    let mut r = rng(5);
    let start = random_pose(&rig, &mut r, 1.0);
    for (name, mut solver) in all_solvers() {
        let (pose, report) = solver.solve(&rig, &start, &[]).unwrap();
        assert_eq!(pose, start, "{name}");
        assert!(report.reached);
    }
}

#[test]
fn fuzzer_findings_stay_fixed() {
    // Inputs the fuzzer (`scripts/fuzz`) once crashed on, kept as regression tests: a
    // quaternion whose length overflowed to a zero rotation, huge and vanishing scales.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/fuzz");
    let mut replayed = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        let (desc, goals, config) = tendon_core::fixtures::fuzz_case(&data);
        replayed += 1;
        let Ok(rig) = desc.build() else { continue };
        if let Ok((pose, report)) = config.build().solve(&rig, &Pose::rest(rig.len()), &goals) {
            assert!(pose.rotations.iter().all(|q| q.is_finite()));
            // Rotations, not just numbers (a zero quaternion once came out of a fuzzed case).
            assert!(pose
                .rotations
                .iter()
                .all(|q| (q.length_squared() - 1.0).abs() < 1e-3));
            assert!(!report.residual.is_nan());
        }
    }
    assert!(replayed >= 3);
}

#[test]
fn a_start_pose_is_checked_after_solves_of_independent_groups() {
    // Solving independent goals one group at a time skips checking the start of every
    // group after the first (it is the last group's answer): that must not carry over to
    // the next solve, whatever it is, nor to a solve after one that failed.
    let rig = tendon_core::fixtures::humanoid();
    let ends: Vec<usize> = ["hand.L", "hand.R", "shin.L"]
        .iter()
        .map(|name| rig.index_of(name).unwrap())
        .collect();
    for (name, mut solver) in all_solvers() {
        let goals: Vec<Goal> = ends
            .iter()
            .map(|&b| Goal::new(b, Vec3::new(0.3, 0.5, 0.2)).with_chain_length(2))
            .collect();
        solver.solve(&rig, &Pose::rest(rig.len()), &goals).unwrap();
        let mut bad = goals.clone();
        bad[1].target.x = f32::NAN;
        assert!(solver.solve(&rig, &Pose::rest(rig.len()), &bad).is_err());
        let mut pose = Pose::rest(rig.len());
        pose.rotations[ends[1]] = Quat::from_xyzw(f32::NAN, 0.0, 0.0, 1.0);
        let err = solver.solve(&rig, &pose, &goals).unwrap_err().to_string();
        assert!(err.contains("pose rotation of bone"), "{name}: {err}");
    }
}

#[test]
fn tension_keeps_to_its_evaluation_budget_on_a_very_long_chain() {
    let bones = 400;
    let rig = bent_chain(bones, 3);
    let start = Pose::rest(bones);
    let world = rig.world_matrices(&start);
    let (_, tail) = rig.head_tail(&world[bones - 1], bones - 1);
    let mut goal = Goal::new(bones - 1, tail + Vec3::new(0.3, -0.2, 0.1));
    goal.chain_length = bones;
    let mut solver = TensionMinimizer::new(TensionParams {
        max_evaluations: 10,
        ..TensionParams::default()
    });
    let (pose, report) = solver.solve(&rig, &start, &[goal]).unwrap();
    assert_sane("tension", &rig, &pose, &report);
    // A first simplex (one evaluation per degree of freedom, and one) is beyond such a
    // budget: the chain keeps the start solve's pose (before, 2401 evaluations here: that
    // first simplex, then one per degree of freedom returning unfelt ones to reference).
    assert!(report.reached, "{report:?}");
    assert!(report.iterations <= 10, "{report:?}");
}

/// Lengths, offsets and scales beyond 1e15 are refused, naming the bone: squared on the
/// way to every distance they overflowed, and a bone 1e20 long was reported reached with
/// an infinite residual, pose scales of 1e30 gave NaN frames (QA helper). A target 1e20
/// away (allowed: the solve points the chain at it) is reported at its distance, not at
/// infinity.
#[test]
fn magnitudes_that_overflow_are_refused_and_far_targets_measured() {
    let mut desc = bent_chain(3, 5).to_desc();
    desc.bones[1].rest.translation.y = 1e20;
    let error = desc.build().unwrap_err().to_string();
    assert!(error.contains("rest translation of bone 'b1'"), "{error}");
    let mut desc = bent_chain(3, 5).to_desc();
    desc.bones[2].length = 1e20;
    let error = desc.build().unwrap_err().to_string();
    assert!(error.contains("length of bone 'b2'"), "{error}");
    let rig = bent_chain(3, 5);
    let mut pose = Pose::rest(3);
    pose.scales[1] = Vec3::splat(1e30);
    for (name, mut solver) in all_solvers() {
        let error = solver
            .solve(&rig, &pose, &[Goal::new(2, Vec3::ONE)])
            .unwrap_err()
            .to_string();
        assert!(error.contains("pose scale of bone 'b1'"), "{name}: {error}");
        let far = Vec3::new(1e20, 0.0, 0.0);
        let (_, report) = solver
            .solve(&rig, &Pose::rest(3), &[Goal::new(2, far)])
            .unwrap();
        assert!(!report.reached, "{name}");
        assert!(
            (report.residual / 1e20 - 1.0).abs() < 1e-3,
            "{name}: residual {}",
            report.residual
        );
    }
}

#[test]
fn reports_describe_the_pose_returned() {
    // A head goal met at rest on a bone whose parent a rotation target turns: the two
    // cannot both be met (FABRIK, CCD and two-bone said reached, residual 0, with the head
    // 1.41 off; QA helper).
    let rig = straight_chain(2);
    let turned = [
        Goal::new(1, Vec3::new(0.0, 1.0, 0.0))
            .at_head()
            .with_chain_length(1),
        Goal::new(0, Vec3::new(0.0, 0.0, 1.0))
            .with_rotation(Quat::from_rotation_x(std::f32::consts::FRAC_PI_2), 1.0),
    ];
    // Two legs pulled apart beyond reach, the root moving, chains exclusive (the residual
    // was measured before the root moved: 5.11 reported, 6.01 in the pose; QA helper).
    let z = Quat::from_rotation_z;
    let leg = |name: &str, parent: &str, turn: Quat, y: f32| {
        let rest = Transform {
            translation: Vec3::new(0.0, y, 0.0),
            rotation: turn * Quat::from_rotation_x(0.2),
            ..Transform::IDENTITY
        };
        BoneDesc::new(name, Some(parent), rest, 1.0)
    };
    let hips = RigDesc {
        bones: vec![
            BoneDesc::new("hip", None, Transform::IDENTITY, 0.5),
            leg("l1", "hip", z(0.8), 0.5),
            leg("l2", "l1", Quat::IDENTITY, 1.0),
            leg("r1", "hip", z(-0.8), 0.5),
            leg("r2", "r1", Quat::IDENTITY, 1.0),
        ],
    }
    .build()
    .unwrap();
    let apart = [
        vec![
            Goal::new(2, Vec3::new(-5.0, 1.0, 0.0)),
            Goal::new(4, Vec3::new(5.0, 1.0, 0.0)),
        ],
        vec![
            Goal::new(2, Vec3::new(-3.0, 1.0, 1.0)).with_chain_length(2),
            Goal::new(4, Vec3::new(3.0, 1.0, 0.0)),
            Goal::new(0, Vec3::new(0.0, 2.0, 0.0)),
        ],
        vec![
            Goal::new(0, Vec3::new(3.0, 2.0, 0.0)),
            Goal::new(4, Vec3::new(-3.0, -1.0, 0.0)),
        ],
    ];
    let mut cases: Vec<(&Rig, Vec<Goal>, bool)> = vec![(&rig, turned.to_vec(), false)];
    for goals in apart {
        for move_root in [false, true] {
            cases.push((&hips, goals.clone(), move_root));
        }
    }
    for (k, (rig, goals, move_root)) in cases.iter().enumerate() {
        for exclusive in [false, true] {
            for mut config in SolverConfig::all() {
                config.iteration_mut().move_root = *move_root;
                config.iteration_mut().exclusive_chains = exclusive;
                let name = config.name();
                let (pose, report) = config
                    .build()
                    .solve(rig, &Pose::rest(rig.len()), goals)
                    .unwrap();
                let measured = measured_residual(rig, &pose, goals);
                assert!(
                    (measured - report.residual).abs() <= 1e-4 * measured.max(1.0),
                    "case {k} {name} move_root {move_root} exclusive {exclusive}: reported {} measured {measured}",
                    report.residual
                );
                if report.reached {
                    assert!(measured < 1e-3, "case {k} {name}: reached, {measured} off");
                }
            }
        }
    }
}

#[test]
fn mismatched_sizes_are_errors_not_panics() {
    // Each of these panicked on an index or a copy (QA helper).
    let rig = straight_chain(3);
    let small = straight_chain(1);
    let chain = SpringChain::new(&rig, 2, 2).unwrap();
    let mut simulation =
        SpringSimulation::new(&rig, vec![chain], vec![], SpringParams::default()).unwrap();
    let mut out = Pose::rest(1);
    let error = simulation
        .advance(&small, &Pose::rest(1), 1.0 / 24.0, &mut out)
        .unwrap_err();
    assert!(error.to_string().contains("another rig"), "{error}");
    assert!(simulation.reset(&small, &Pose::rest(1)).is_err());

    let mut ragged = Pose::rest(3);
    ragged.translations.pop();
    let error = Pose::from_caller_order(&rig, &ragged).unwrap_err();
    assert!(error.to_string().contains("pose translations"), "{error}");
    assert!(Pose::rest(2).to_caller_order(&rig).is_err());

    struct WrongSize;
    impl tendon_core::batch::FrameInput for WrongSize {
        fn frame_count(&self) -> usize {
            3
        }
        fn set_goals(&self, _frame: usize, goals: &mut [Goal]) {
            goals[0].target = Vec3::new(0.5, 1.5, 0.5);
        }
        fn has_frame_poses(&self) -> bool {
            true
        }
        fn frame_pose(&self, _rig: &Rig, _frame: usize, pose: &mut Pose) {
            *pose = Pose::rest(1);
        }
    }
    for warm in [false, true] {
        for (name, mut solver) in all_solvers() {
            let mut goals = [Goal::new(2, Vec3::ZERO)];
            let error = tendon_core::batch::solve_frames(
                &mut solver,
                &rig,
                &Pose::rest(3),
                &mut goals,
                &WrongSize,
                warm,
                |_, _, _| {},
            )
            .unwrap_err();
            assert!(
                error.to_string().contains("frame pose at frame index 0"),
                "{name} warm {warm}: {error}"
            );
        }
    }
}

#[test]
fn huge_quaternions_are_normalised_not_zeroed() {
    // Normalised directly, components of 1e20 overflowed to the zero quaternion: a start
    // pose came back with one, a goal's rotation was "met" 2.9 rad off (QA helper).
    let rig = straight_chain(3);
    let mut start = Pose::rest(3);
    start.rotations[0] = Quat::from_xyzw(1e20, 0.0, 0.0, 1e20);
    let turn = Quat::from_xyzw(1e20, 1e20, 0.0, 0.0);
    for (name, mut solver) in all_solvers() {
        let goals = [Goal::new(2, Vec3::new(0.5, 2.0, 0.5)).with_rotation(turn, 1.0)];
        let (pose, report) = solver.solve(&rig, &start, &goals).unwrap();
        assert_sane(name, &rig, &pose, &report);
        let world = rig.world_matrices(&pose);
        let (_, turned, _) = world[2].to_scale_rotation_translation();
        let wanted = Quat::from_xyzw(1.0, 1.0, 0.0, 0.0).normalize();
        let angle = turned.angle_between(wanted);
        assert!(
            (angle - report.rotation_residual).abs() < 1e-3,
            "{name}: {angle} off, reported {}",
            report.rotation_residual
        );
    }
}

#[test]
fn scales_that_multiply_past_the_largest_magnitude_are_refused() {
    // Each under 1e15, their products are not (three pose scales of 1e15: reached with a
    // residual of 3.4e38 and the tail at NaN; two of 1e10: reached, residual 1.5e20; QA
    // helper).
    let rig = straight_chain(3);
    let target = [Goal::new(2, Vec3::new(0.5, 1.5, 0.5))];
    for (scales, bone) in [
        (vec![1e15, 1e15, 1e15], "b1"),
        (vec![1e10, 1e10, 1.0], "b1"),
    ] {
        let mut start = Pose::rest(3);
        for (i, &s) in scales.iter().enumerate() {
            start.scales[i] = Vec3::splat(s);
        }
        for (name, mut solver) in all_solvers() {
            let error = solver.solve(&rig, &start, &target).unwrap_err().to_string();
            assert!(
                error.contains(&format!("scale of bone '{bone}' with its parents'")),
                "{name} {scales:?}: {error}"
            );
        }
    }
    let mut desc = rig.to_desc();
    for bone in &mut desc.bones {
        bone.rest.scale = Vec3::splat(1e13);
    }
    // Rest scales alone: the rig is refused when built.
    let error = desc.build().unwrap_err().to_string();
    assert!(
        error.contains("scale of bone 'b1' with its parents'"),
        "{error}"
    );
}
