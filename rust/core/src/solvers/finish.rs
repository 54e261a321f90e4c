//! Finishing a one-bone-at-a-time sweep (FABRIK on limited joints, CCD on any), and
//! two-bone goals whose chains carry one another.
//!
//! Those solvers turn one bone at a time and clamp each turn to the bone's limits, so on a
//! limited chain the clamp can take back what the next bone needed and the sweep stalls
//! short of a target the limits allow (on motion capture with human limits, FABRIK left
//! half the frames more than 2 cm short where damped least squares reached). CCD also
//! crawls on free chains near full extension and on arms hanging from a turning spine
//! (84% of the solver table's two-bone targets, 90-100% of real rigs' jointly reachable
//! ones within a thousand sweeps). Damped least squares moves every joint at once inside
//! its limits: when a sweep stops unreached, it goes on from the sweep's pose, and when
//! that does not reach either (the sweep can leave the joints pinned in a fold no local
//! step undoes), it starts over from the start pose. The closest pose is kept, the
//! sweep's when none comes closer.

use super::{Closest, IterationParams, JacobianDls, JacobianDlsParams, SolveReport, Solver};
use crate::error::Result;
use crate::goal::Goal;
use crate::rig::{Pose, Rig};

/// The damped least squares finish, the sweep's pose and the closest pose so far.
#[derive(Debug, Clone)]
pub(crate) struct FinishWithinLimits {
    dls: JacobianDls,
    swept: Pose,
    best: Pose,
}

impl Default for FinishWithinLimits {
    fn default() -> Self {
        FinishWithinLimits {
            dls: {
                let mut dls = JacobianDls::default();
                dls.allow_scaled_start(false);
                dls
            },
            swept: Pose::rest(0),
            best: Pose::rest(0),
        }
    }
}

impl FinishWithinLimits {
    /// `report` and `out` are the sweep's from `start`, unreached; both are replaced when a
    /// finish comes closer. The finish keeps the caller's tolerance and full-body settings,
    /// with damped least squares' own step, and its own iteration cap or the caller's if
    /// smaller (each pass keeps to it, as every pass of a solve does).
    pub(crate) fn apply(
        &mut self,
        rig: &Rig,
        start: &Pose,
        goals: &[Goal],
        params: &IterationParams,
        report: SolveReport,
        out: &mut Pose,
    ) -> Result<SolveReport> {
        self.swept.copy_from(out);
        self.best.copy_from(out);
        let own = JacobianDlsParams::default();
        self.dls.params = JacobianDlsParams {
            iteration: IterationParams {
                max_iterations: own.iteration.max_iterations.min(params.max_iterations),
                max_step_angle: own.iteration.max_step_angle,
                ..*params
            },
            ..own
        };
        let mut closest = Closest::new(report);
        for from in [&self.swept, start] {
            // From the sweep's pose without the retry from unpinned joints: where that
            // stalls, the start pose gives more natural poses (on motion capture with
            // human limits, tuning clips: 18.5 against 20.3 deg from the actor's, limbs, cold).
            self.dls.allow_unpin(!std::ptr::eq(from, &self.swept));
            // The sweep aimed the poles from the start; from the start they are aimed anew.
            self.dls.start_poles_aimed(std::ptr::eq(from, &self.swept));
            let finished = self.dls.solve_into(rig, from, goals, out);
            self.dls.start_poles_aimed(false);
            let finished = finished?;
            if closest.offer(finished) {
                self.best.copy_from(out);
            }
            if closest.reached() {
                break;
            }
        }
        out.copy_from(&self.best);
        Ok(closest.report())
    }
}
