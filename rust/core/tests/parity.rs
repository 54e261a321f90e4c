//! The cases of `tests/fixtures/parity.json`, solved here; `tests/python` solves the same
//! cases through the Python package, and both must give the stored results. Run with
//! `TENDON_BLESS=1` to rewrite the file after an intended change of results.

use glam::{Quat, Vec3};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use tendon_core::fixtures::{humanoid, random_pose, SplitMix64};
use tendon_core::*;

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct ParityGoal {
    bone: String,
    target: [f32; 3],
    rotation: Option<[f32; 4]>,
    rotation_weight: f32,
    weight: f32,
    chain_length: usize,
    pole: Option<[f32; 3]>,
    point: String,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Expected {
    /// Local rotations, w first, in the rig description's bone order.
    rotations: Vec<[f32; 4]>,
    iterations: u32,
    residual: f32,
    reached: bool,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Case {
    name: String,
    solver: SolverConfig,
    goals: Vec<ParityGoal>,
    expected: Expected,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Parity {
    rig: String,
    cases: Vec<Case>,
}

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/parity.json")
}

/// Goals on both wrists, the right ankle (with a pole) and the head (with a rotation),
/// aimed at where a random pose puts them.
fn goals(rig: &Rig, seed: u64) -> Vec<ParityGoal> {
    let mut pose = random_pose(rig, &mut SplitMix64::new(seed), 0.4);
    // The trunk stays at rest, so every goal is reachable with its chain.
    for name in ["hips", "spine", "chest"] {
        pose.rotations[rig.index_of(name).unwrap()] = Quat::IDENTITY;
    }
    let world = rig.world_matrices(&pose);
    let tail = |name: &str| {
        let i = rig.index_of(name).unwrap();
        rig.head_tail(&world[i], i).1.to_array()
    };
    let head = rig.index_of("head").unwrap();
    let head_rotation = Quat::from_mat3a(&world[head].matrix3).normalize();
    let goal = |bone: &str, chain_length| ParityGoal {
        bone: bone.into(),
        target: tail(bone),
        rotation: None,
        rotation_weight: 1.0,
        weight: 1.0,
        chain_length,
        pole: None,
        point: "tail".into(),
    };
    vec![
        goal("forearm.L", 3),
        ParityGoal {
            weight: 0.5,
            ..goal("forearm.R", 3)
        },
        ParityGoal {
            pole: Some([-0.1, -1.0, 0.6]),
            ..goal("shin.R", 2)
        },
        ParityGoal {
            rotation: Some([
                head_rotation.w,
                head_rotation.x,
                head_rotation.y,
                head_rotation.z,
            ]),
            rotation_weight: 0.5,
            ..goal("head", 3)
        },
    ]
}

fn solve(rig: &Rig, config: &SolverConfig, goals: &[ParityGoal]) -> Expected {
    let core: Vec<Goal> = goals
        .iter()
        .map(|g| Goal {
            bone: rig.index_of(&g.bone).unwrap(),
            point: if g.point == "head" {
                EffectorPoint::Head
            } else {
                EffectorPoint::Tail
            },
            target: Vec3::from(g.target),
            rotation: g.rotation.map(|[w, x, y, z]| Quat::from_xyzw(x, y, z, w)),
            rotation_weight: g.rotation_weight,
            weight: g.weight,
            chain_length: g.chain_length,
            pole: g.pole.map(Vec3::from),
            pole_angle: None,
        })
        .collect();
    let (pose, report) = config
        .build()
        .solve(rig, &Pose::rest(rig.len()), &core)
        .unwrap();
    let caller = pose.to_caller_order(rig).unwrap();
    Expected {
        rotations: caller
            .rotations
            .iter()
            .map(|q| [q.w, q.x, q.y, q.z])
            .collect(),
        iterations: report.iterations,
        residual: report.residual,
        reached: report.reached,
    }
}

#[test]
fn parity_cases_give_the_stored_results() {
    let rig = humanoid();
    let cases: Vec<Case> = SolverConfig::all()
        .into_iter()
        .enumerate()
        .map(|(k, solver)| {
            let goals = goals(&rig, 40 + k as u64);
            let expected = solve(&rig, &solver, &goals);
            Case {
                name: format!("humanoid, four goals, {}", solver.name()),
                solver,
                goals,
                expected,
            }
        })
        .collect();
    let parity = Parity {
        rig: "humanoid.json".into(),
        cases,
    };
    if std::env::var_os("TENDON_BLESS").is_some() {
        std::fs::write(
            path(),
            serde_json::to_string_pretty(&parity).unwrap() + "\n",
        )
        .unwrap();
    }
    let stored: Parity = serde_json::from_str(
        &std::fs::read_to_string(path()).expect("tests/fixtures/parity.json exists"),
    )
    .expect("parity.json is readable");
    assert_eq!(stored.cases.len(), parity.cases.len());
    for (stored, now) in stored.cases.iter().zip(&parity.cases) {
        assert_eq!(
            stored.goals, now.goals,
            "{}: the cases changed; rerun with TENDON_BLESS=1",
            now.name
        );
        assert_eq!(
            stored.expected.reached, now.expected.reached,
            "{}",
            now.name
        );
        assert_eq!(
            stored.expected.iterations, now.expected.iterations,
            "{}",
            now.name
        );
        let (a, b) = (stored.expected.residual, now.expected.residual);
        assert!(
            (a - b).abs() <= 1e-6 * a.max(1e-3),
            "{}: {a} vs {b}",
            now.name
        );
        for (a, b) in stored
            .expected
            .rotations
            .iter()
            .zip(&now.expected.rotations)
        {
            for (x, y) in a.iter().zip(b) {
                assert!((x - y).abs() <= 1e-6, "{}: {a:?} vs {b:?}", now.name);
            }
        }
    }
}
