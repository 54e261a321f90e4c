//! Tendon core demo: solves random reachable targets on chains and five effectors on the
//! humanoid fixture with every solver, and prints what each reached and how fast.
//!
//! Run with `scripts/demo` (or `cargo run --release --example demo`).

use glam::Vec3;
use std::time::Instant;
use tendon_core::fixtures::{bent_chain, humanoid, reachable_targets};
use tendon_core::*;

const TARGETS: usize = 200;

/// Every solver with its defaults, to the tolerance of the performance targets.
fn solvers() -> impl Iterator<Item = (&'static str, SolverConfig)> {
    SolverConfig::all()
        .into_iter()
        .map(|c| (c.name(), c.with_tolerance(1e-4)))
}

fn chains() {
    println!(
        "Random reachable targets from the rest pose of gently bent chains ({TARGETS} per row),"
    );
    println!("reached = effector within 1e-4 of the chain length.\n");
    println!(
        "{:<20} {:>5} {:>9} {:>11} {:>10}",
        "solver", "bones", "reached", "iterations", "us/solve"
    );
    for (name, config) in solvers() {
        let lengths: &[usize] = if name == "two_bone" {
            &[2]
        } else {
            &[2, 4, 8, 16, 32, 64]
        };
        for &n in lengths {
            let rig = bent_chain(n, n as u64);
            let end = n - 1;
            let targets = reachable_targets(&rig, end, TARGETS, 500 + n as u64);
            let mut solver = config.build();
            let rest = Pose::rest(n);
            let mut out = Pose::rest(n);
            let (mut reached, mut iterations) = (0, 0);
            let start = Instant::now();
            for target in &targets {
                let report = solver
                    .solve_into(&rig, &rest, &[Goal::new(end, *target)], &mut out)
                    .unwrap();
                reached += report.reached as usize;
                iterations += report.iterations;
            }
            let micros = start.elapsed().as_secs_f64() * 1e6 / TARGETS as f64;
            println!(
                "{name:<20} {n:>5} {:>8.1}% {:>11.1} {micros:>10.2}",
                100.0 * reached as f64 / TARGETS as f64,
                iterations as f64 / TARGETS as f64
            );
        }
    }
}

fn humanoid_effectors() {
    let rig = humanoid();
    let bone = |name: &str| rig.index_of(name).expect("bone of the fixture");
    let world = rig.world_matrices(&Pose::rest(rig.len()));
    let tail = |name: &str| rig.head_tail(&world[bone(name)], bone(name)).1;
    // Reach forward with the left hand, out to the side with the right, step forward with
    // the left foot, lift the right, and lean the head: wrists and ankles with two-bone
    // chains, the head with head, neck and chest.
    let goals = [
        Goal::new(
            bone("forearm.L"),
            tail("forearm.L") + Vec3::new(-0.15, -0.3, 0.15),
        )
        .with_chain_length(2),
        Goal::new(
            bone("forearm.R"),
            tail("forearm.R") + Vec3::new(0.1, -0.1, 0.1),
        )
        .with_chain_length(2),
        Goal::new(bone("shin.L"), tail("shin.L") + Vec3::new(0.0, -0.2, 0.1)).with_chain_length(2),
        Goal::new(bone("shin.R"), tail("shin.R") + Vec3::new(0.0, 0.05, 0.2)).with_chain_length(2),
        Goal::new(bone("head"), tail("head") + Vec3::new(0.05, -0.08, -0.03)).with_chain_length(3),
    ];
    println!(
        "\nHumanoid fixture ({} bones): both wrists, both ankles and the head at once.\n",
        rig.len()
    );
    println!(
        "{:<20} {:>9} {:>16} {:>11} {:>10}",
        "solver", "reached", "worst error mm", "iterations", "us/solve"
    );
    for (name, config) in solvers() {
        let mut solver = config.build();
        let rest = Pose::rest(rig.len());
        let mut out = Pose::rest(rig.len());
        let repeats = 200;
        let start = Instant::now();
        let mut report = SolveReport::default();
        for _ in 0..repeats {
            report = solver.solve_into(&rig, &rest, &goals, &mut out).unwrap();
        }
        let micros = start.elapsed().as_secs_f64() * 1e6 / repeats as f64;
        println!(
            "{name:<20} {:>9} {:>16.4} {:>11} {micros:>10.2}",
            if report.reached { "yes" } else { "no" },
            report.residual * 1000.0,
            report.iterations
        );
    }
}

fn main() {
    println!("Tendon core demo\n");
    chains();
    humanoid_effectors();
}
