//! batch/v1: Jobs and CronJobs.

use super::Strategy;

/// The group's kinds, in discovery order.
pub fn kinds() -> Vec<&'static dyn Strategy> {
    Vec::new()
}
