//! Iteration counts and time per solve for random reachable targets on a 16-bone chain.
use glam::{Quat, Vec3};
use rand::{Rng, SeedableRng};
use tendon_core::*;

fn main() {
    let n = 16;
    let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let mut parent_len = 0.0;
    let bones = (0..n)
        .map(|i| {
            let length = r.gen_range(0.5..1.5);
            let rest = Transform {
                translation: Vec3::new(0.0, parent_len, 0.0),
                rotation: if i == 0 {
                    Quat::IDENTITY
                } else {
                    Quat::from_rotation_x(r.gen_range(0.05..0.25))
                },
                scale: Vec3::ONE,
            };
            parent_len = length;
            let parent = (i > 0).then(|| format!("b{}", i - 1));
            BoneDesc::new(format!("b{i}"), parent.as_deref(), rest, length)
        })
        .collect();
    let rig = RigDesc { bones }.build().unwrap();
    let targets: Vec<Vec3> = (0..2000)
        .map(|_| {
            let mut pose = Pose::rest(n);
            for q in &mut pose.rotations {
                let axis = Vec3::new(
                    r.gen_range(-1.0..1.0),
                    r.gen_range(-1.0..1.0),
                    r.gen_range(-1.0..1.0),
                );
                *q = Quat::from_axis_angle(axis.normalize_or(Vec3::X), r.gen_range(0.0..0.8));
            }
            rig.head_tail(&rig.world_matrices(&pose)[n - 1], n - 1).1
        })
        .collect();
    let mut solver = Fabrik::new(FabrikParams {
        iteration: IterationParams {
            tolerance: 1e-4,
            max_iterations: 500,
            ..Default::default()
        },
    });
    let rest = Pose::rest(n);
    let mut out = Pose::rest(n);
    let mut histogram = [0usize; 6];
    let mut total = 0;
    let start = std::time::Instant::now();
    for t in &targets {
        let it = solver
            .solve_into(&rig, &rest, &[Goal::new(n - 1, *t)], &mut out)
            .unwrap()
            .iterations;
        total += it;
        histogram[match it {
            0..=2 => 0,
            3..=5 => 1,
            6..=10 => 2,
            11..=30 => 3,
            31..=100 => 4,
            _ => 5,
        }] += 1;
    }
    println!(
        "{:.2} us/solve, mean iterations {}, histogram <=2,<=5,<=10,<=30,<=100,>100: {histogram:?}",
        start.elapsed().as_secs_f64() * 1e6 / 2000.0,
        total as f32 / 2000.0
    );
}
