//! Bytes as a rig, goals and a solver (`tendon_core::fixtures::fuzz_case`): every solver
//! returns an error for invalid input or a finite pose, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tendon_core::fixtures::fuzz_case;
use tendon_core::{Pose, Solver};

fuzz_target!(|data: &[u8]| {
    let (desc, goals, config) = fuzz_case(data);
    let Ok(rig) = desc.build() else {
        return;
    };
    if let Ok((pose, report)) = config.build().solve(&rig, &Pose::rest(rig.len()), &goals) {
        assert!(
            pose.rotations.iter().all(|q| q.is_finite()),
            "non-finite rotation"
        );
        assert!(
            pose.rotations
                .iter()
                .all(|q| (q.length_squared() - 1.0).abs() < 1e-3),
            "a rotation not of unit length"
        );
        assert!(
            pose.translations.iter().all(|t| t.is_finite()),
            "non-finite translation"
        );
        assert!(!report.residual.is_nan(), "NaN residual");
    }
});
