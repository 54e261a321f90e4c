//! The rig model: validation, depth-first order, remaps, JSON and forward kinematics.

mod common;

use common::*;
use glam::{Quat, Vec3};
use tendon_core::*;

fn bone(name: &str, parent: Option<&str>, y: f32, length: f32) -> BoneDesc {
    BoneDesc::new(
        name,
        parent,
        Transform {
            translation: Vec3::new(0.0, y, 0.0),
            ..Transform::IDENTITY
        },
        length,
    )
}

/// A small humanoid given in a scrambled order: hips, spine (chest carrying arms and head),
/// two legs.
fn humanoid_desc() -> RigDesc {
    let bones = vec![
        bone("shin.L", Some("thigh.L"), 0.45, 0.45),
        bone("hand.R", Some("forearm.R"), 0.25, 0.1),
        bone("hips", None, 1.0, 0.1),
        bone("thigh.L", Some("hips"), 0.0, 0.45),
        bone("spine", Some("hips"), 0.1, 0.2),
        bone("chest", Some("spine"), 0.2, 0.2),
        bone("neck", Some("chest"), 0.2, 0.1),
        bone("head", Some("neck"), 0.1, 0.2),
        bone("upper_arm.R", Some("chest"), 0.2, 0.3),
        bone("forearm.R", Some("upper_arm.R"), 0.3, 0.25),
        bone("thigh.R", Some("hips"), 0.0, 0.45),
        bone("shin.R", Some("thigh.R"), 0.45, 0.45),
    ];
    RigDesc { bones }
}

#[test]
fn depth_first_order_with_contiguous_subtrees_and_spine_first() {
    let desc = humanoid_desc();
    let rig = desc.build().unwrap();
    assert_eq!(rig.len(), desc.bones.len());
    for i in 0..rig.len() {
        if let Some(p) = rig.parent(i) {
            assert!(p < i, "parent {p} of {i} comes after it");
            let range = rig.subtree(p);
            assert!(range.contains(&i));
        }
        // A subtree holds exactly the bones whose ancestry passes through it.
        for j in 0..rig.len() {
            let mut a = Some(j);
            let mut inside = false;
            while let Some(k) = a {
                inside |= k == i;
                a = rig.parent(k);
            }
            assert_eq!(
                rig.subtree(i).contains(&j),
                inside,
                "bone {j} vs subtree of {i}"
            );
        }
    }
    let names: Vec<&str> = (0..rig.len()).map(|i| rig.name(i)).collect();
    assert_eq!(
        &names[..3],
        &["hips", "spine", "chest"],
        "spine first: {names:?}"
    );
    // The remap goes both ways.
    for caller in 0..rig.len() {
        let dfs = rig.to_dfs(caller);
        assert_eq!(rig.to_caller(dfs), caller);
        assert_eq!(rig.name(dfs), desc.bones[caller].name);
        assert_eq!(rig.index_of(&desc.bones[caller].name), Some(dfs));
    }
}

#[test]
fn builder_names_the_bone_at_fault() {
    let check = |desc: RigDesc, needle: &str| {
        let err = desc.build().unwrap_err().to_string();
        assert!(err.contains(needle), "'{err}' should mention '{needle}'");
    };
    check(RigDesc::default(), "no bones");
    let mut d = humanoid_desc();
    d.bones.push(bone("neck", Some("chest"), 0.0, 0.1));
    check(d, "'neck' is used more than once");
    let mut d = humanoid_desc();
    d.bones[0].parent = Some("femur".into());
    check(d, "'shin.L' has parent 'femur'");
    let mut d = humanoid_desc();
    d.bones[2].parent = Some("head".into());
    check(d, "own ancestor");
    let mut d = humanoid_desc();
    d.bones[4].rest.translation.x = f32::NAN;
    check(d, "rest translation of bone 'spine'");
    let mut d = humanoid_desc();
    d.bones[5].length = f32::INFINITY;
    check(d, "length of bone 'chest'");
    let mut d = humanoid_desc();
    d.bones[5].length = -1.0;
    check(d, "negative");
    let mut d = humanoid_desc();
    d.bones[6].rest.rotation = Quat::from_xyzw(0.0, 0.0, 0.0, 0.0);
    check(d, "rest rotation of bone 'neck'");
    let mut d = humanoid_desc();
    d.bones[7].limits.x = AxisLimit::Range { min: 1.0, max: 0.0 };
    check(d, "limit on bone 'head'");
}

#[test]
fn json_round_trip_keeps_the_caller_order() {
    let desc = humanoid_desc();
    let json = desc.to_json();
    let rig = Rig::from_json(&json).unwrap();
    assert_eq!(rig.to_desc(), desc);
    let minimal = r#"{"bones":[{"name":"root","length":1.0},{"name":"tip","parent":"root",
        "rest":{"translation":[0,1,0],"rotation":[0,0,0.3826834,0.9238795]},"length":0.5,
        "limits":{"order":"ZXY","x":{"mode":"locked"}}}]}"#;
    let rig = Rig::from_json(minimal).unwrap();
    assert_eq!(rig.limits(1).order, EulerOrder::ZXY);
    assert!(Rig::from_json("{\"bones\": 3}")
        .unwrap_err()
        .to_string()
        .contains("invalid JSON"));
}

#[test]
fn forward_kinematics_follows_blender_conventions() {
    // Root at (0, 0, 1) turned 90 degrees about Z: its +Y points along -X.
    let root = BoneDesc::new(
        "root",
        None,
        Transform {
            translation: Vec3::new(0.0, 0.0, 1.0),
            rotation: Quat::from_rotation_z(std::f32::consts::FRAC_PI_2),
            scale: Vec3::ONE,
        },
        2.0,
    );
    let child = bone("child", Some("root"), 2.0, 1.0);
    let rig = RigDesc {
        bones: vec![root, child],
    }
    .build()
    .unwrap();
    let mut pose = Pose::rest(2);
    let world = rig.world_matrices(&pose);
    let (head, tail) = rig.head_tail(&world[0], 0);
    assert!(head.distance(Vec3::new(0.0, 0.0, 1.0)) < 1e-6);
    assert!(tail.distance(Vec3::new(-2.0, 0.0, 1.0)) < 1e-6);
    let (head, tail) = rig.head_tail(&world[1], 1);
    assert!(head.distance(Vec3::new(-2.0, 0.0, 1.0)) < 1e-6);
    assert!(tail.distance(Vec3::new(-3.0, 0.0, 1.0)) < 1e-6);
    // A pose rotation is applied in the bone's own frame, after its rest.
    pose.rotations[1] = Quat::from_rotation_x(std::f32::consts::FRAC_PI_2);
    pose.scales[0] = Vec3::splat(2.0);
    let world = rig.world_matrices(&pose);
    let (head, tail) = rig.head_tail(&world[1], 1);
    assert!(head.distance(Vec3::new(-4.0, 0.0, 1.0)) < 1e-5, "{head}");
    assert!(tail.distance(Vec3::new(-4.0, 0.0, 3.0)) < 1e-5, "{tail}");
}

#[test]
fn pose_order_conversion_and_validation() {
    let rig = humanoid_desc().build().unwrap();
    let mut r = rng(3);
    let pose = random_pose(&rig, &mut r, 1.0);
    let caller = pose.to_caller_order(&rig).unwrap();
    assert_eq!(Pose::from_caller_order(&rig, &caller).unwrap(), pose);
    let head = rig.index_of("head").unwrap();
    assert_eq!(caller.rotations[rig.to_caller(head)], pose.rotations[head]);
    let mut bad = pose.clone();
    bad.rotations[head] = Quat::from_xyzw(f32::NAN, 0.0, 0.0, 1.0);
    let err = bad.validate(&rig).unwrap_err().to_string();
    assert!(err.contains("pose rotation of bone 'head'"), "{err}");
    let mut short = Pose::rest(3);
    assert!(short
        .validate(&rig)
        .unwrap_err()
        .to_string()
        .contains("expected 12"));
    assert!(Pose::from_caller_order(&rig, &short).is_err());
}

#[test]
fn from_armature_space_matrices() {
    // Blender gives each bone's rest matrix in armature space; the rig rebuilt from them
    // puts every head and tail where they were.
    let rig = tendon_core::fixtures::humanoid();
    let desc = rig.to_desc();
    let world = rig.world_matrices(&Pose::rest(rig.len()));
    let caller = |name: &str| desc.bones.iter().position(|b| b.name == name);
    let names: Vec<String> = desc.bones.iter().map(|b| b.name.clone()).collect();
    let parents: Vec<Option<usize>> = desc
        .bones
        .iter()
        .map(|b| b.parent.as_deref().and_then(caller))
        .collect();
    let matrices: Vec<glam::Mat4> = (0..rig.len())
        .map(|c| glam::Mat4::from(world[rig.to_dfs(c)]))
        .collect();
    let lengths: Vec<f32> = desc.bones.iter().map(|b| b.length).collect();
    let rebuilt = RigDesc::from_armature_matrices(&names, &parents, &matrices, &lengths)
        .unwrap()
        .build()
        .unwrap();
    let again = rebuilt.world_matrices(&Pose::rest(rebuilt.len()));
    for (i, matrix) in world.iter().enumerate() {
        let j = rebuilt.index_of(rig.name(i)).unwrap();
        let (a, b) = (rig.head_tail(matrix, i), rebuilt.head_tail(&again[j], j));
        assert!(
            a.0.distance(b.0) < 1e-5 && a.1.distance(b.1) < 1e-5,
            "{}",
            rig.name(i)
        );
    }
    // Errors name the bone or the array.
    let err = |m: &[glam::Mat4], p: &[Option<usize>], l: &[f32]| {
        RigDesc::from_armature_matrices(&names, p, m, l)
            .unwrap_err()
            .to_string()
    };
    assert!(
        err(&matrices[1..], &parents, &lengths).contains("matrices has 49 entries, expected 50")
    );
    let mut bad = matrices.clone();
    bad[3].x_axis.y = f32::NAN;
    assert!(err(&bad, &parents, &lengths).contains(&format!("rest matrix of bone '{}'", names[3])));
    let mut sheared = matrices.clone();
    sheared[5].y_axis += glam::Vec4::new(0.5, 0.0, 0.0, 0.0);
    assert!(err(&sheared, &parents, &lengths).contains("sheared"));
    let mut flat = matrices.clone();
    let hips = caller("hips").unwrap();
    flat[hips] = glam::Mat4::ZERO;
    assert!(err(&flat, &parents, &lengths).contains("not invertible"));
    let mut orphan = parents.clone();
    orphan[2] = Some(99);
    assert!(err(&matrices, &orphan, &lengths).contains("bone index 99"));
}

#[test]
fn reset_gives_the_rest_pose() {
    let rig = tendon_core::fixtures::humanoid();
    let mut pose = random_pose(&rig, &mut rng(9), 1.0);
    pose.translations[3] = Vec3::ONE;
    pose.scales[4] = Vec3::splat(2.0);
    pose.reset(rig.len());
    assert_eq!(pose, Pose::rest(rig.len()));
    pose.reset(3);
    assert_eq!(pose, Pose::rest(3));
}

#[test]
fn pose_from_world_of_some_bones_matches_the_whole_rig_on_them() {
    let rig = humanoid_desc().build().unwrap();
    let mut pose = Pose::rest(rig.len());
    for (i, rotation) in pose.rotations.iter_mut().enumerate() {
        *rotation = Quat::from_axis_angle(Vec3::new(1.0, 0.5, -0.3).normalize(), 0.1 * i as f32);
    }
    pose.translations[0] = Vec3::new(0.2, -0.1, 0.3);
    pose.scales[3] = Vec3::new(1.2, 0.9, 1.1);
    let world = rig.world_matrices(&pose);
    let mut whole = Pose::rest(rig.len());
    rig.pose_from_world(&world, &mut whole);
    // The right arm and everything above it, parents first.
    let hand = rig.index_of("hand.R").unwrap();
    let mut bones = vec![hand];
    while let Some(parent) = rig.parent(*bones.last().unwrap()) {
        bones.push(parent);
    }
    bones.reverse();
    let mut some = Pose::rest(rig.len());
    let marker = Quat::from_rotation_z(2.0);
    some.rotations.fill(marker);
    rig.pose_from_world_of(&world, &bones, &mut some);
    for i in 0..rig.len() {
        if bones.contains(&i) {
            assert!(
                some.rotations[i].angle_between(pose.rotations[i]) < 1e-5,
                "bone {i}"
            );
            assert!(
                some.translations[i].distance(whole.translations[i]) < 1e-6,
                "bone {i}"
            );
            assert!(some.scales[i].distance(whole.scales[i]) < 1e-6, "bone {i}");
        } else {
            assert_eq!(
                some.rotations[i], marker,
                "bone {i} is not among those asked for"
            );
        }
    }
}
