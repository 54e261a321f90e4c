//! Any bytes as a rig description: an error or a rig, never a panic; a rig built from it
//! runs forward kinematics on its rest pose.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tendon_core::{Pose, Rig};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(rig) = Rig::from_json(text) {
            let _ = rig.world_matrices(&Pose::rest(rig.len()));
        }
    }
});
