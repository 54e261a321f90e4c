mod common;
use common::*;
use tendon_core::*;

#[test]
#[ignore = "exploration: prints rates"]
fn rates() {
    for n in [2usize, 3, 4, 8, 16, 32, 64] {
        let rig = bent_chain(n, n as u64);
        let end = rig.len() - 1;
        let mut r = rng(99 + n as u64);
        let mut solvers: Vec<(&str, AnySolver)> = vec![
            ("fabrik", SolverConfig::Fabrik(Default::default()).build()),
            ("ccd", SolverConfig::Ccd(Default::default()).build()),
            ("dls", SolverConfig::JacobianDls(Default::default()).build()),
            (
                "jt",
                SolverConfig::JacobianTranspose(Default::default()).build(),
            ),
            ("two", SolverConfig::TwoBone(Default::default()).build()),
        ];
        let trials = 200;
        let targets: Vec<_> = (0..trials)
            .map(|_| tail(&rig, &random_pose(&rig, &mut r, 0.8), end))
            .collect();
        let len = chain_length(&rig, end);
        for (name, s) in solvers.iter_mut() {
            if *name == "two" && n != 2 {
                continue;
            }
            let mut ok = 0;
            let mut its = 0;
            let mut worst: f32 = 0.0;
            let t0 = std::time::Instant::now();
            for t in &targets {
                let (pose, rep) = s
                    .solve(&rig, &Pose::rest(rig.len()), &[Goal::new(end, *t)])
                    .unwrap();
                let err = tail(&rig, &pose, end).distance(*t) / len;
                if err <= 1e-4 {
                    ok += 1;
                }
                worst = worst.max(err);
                its += rep.iterations;
            }
            println!(
                "n={n:3} {name:7} ok {ok}/{trials} mean its {:.1} worst {:.2e} {:.1}us/solve",
                its as f32 / trials as f32,
                worst,
                t0.elapsed().as_secs_f64() * 1e6 / trials as f64
            );
        }
    }
}

#[test]
#[ignore = "exploration: trace"]
fn trace_fabrik() {
    let n: usize = std::env::var("N").map(|v| v.parse().unwrap()).unwrap_or(3);
    let rig = bent_chain(n, n as u64);
    let end = n - 1;
    let mut r = rng(99 + n as u64);
    let len = chain_length(&rig, end);
    for k in 0..200 {
        let t = tail(&rig, &random_pose(&rig, &mut r, 0.8), end);
        let mut s = Fabrik::new(Default::default());
        let (pose, rep) = s
            .solve(&rig, &Pose::rest(rig.len()), &[Goal::new(end, t)])
            .unwrap();
        let err = tail(&rig, &pose, end).distance(t) / len;
        if err > 1e-4 {
            let root_dist = t.length();
            println!(
                "case {k}: err {err:.2e} its {} dist/reach {:.4} target {t:?}",
                rep.iterations,
                root_dist / len
            );
            for cap in [1u32, 2, 5, 10, 20, 50, 100, 300, 1000] {
                let mut p = FabrikParams::default();
                p.iteration.max_iterations = cap;
                let (pose, _) = Fabrik::new(p)
                    .solve(&rig, &Pose::rest(rig.len()), &[Goal::new(end, t)])
                    .unwrap();
                print!(" {cap}:{:.2e}", tail(&rig, &pose, end).distance(t) / len);
            }
            println!();
            if k > 60 {
                break;
            }
        }
    }
}
