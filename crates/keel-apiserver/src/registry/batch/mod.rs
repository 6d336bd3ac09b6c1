//! batch/v1: Jobs and CronJobs, with upstream's defaults (`pkg/apis/batch/v1/defaults.go`),
//! strategies (`pkg/registry/batch/job/strategy.go`, `pkg/registry/batch/cronjob/strategy.go`),
//! validation (`pkg/apis/batch/validation/validation.go`) and printers
//! (`pkg/printers/internalversion/printers.go`). The kinds are [`jobs`] and [`cronjobs`];
//! [`job_spec`] is what both validate of a JobSpec, [`job_status`] and [`job_indexes`] what a
//! Job's status update is checked against, [`cron`] reads schedules and [`zones`]
//! names the time zones; the cells and error values several kinds print are in
//! [`crate::registry::printing`].

pub mod cron;
pub mod cronjobs;
pub mod job_indexes;
pub mod job_spec;
pub mod job_status;
pub mod jobs;
pub mod zones;

use super::Strategy;

/// The group's kinds, in discovery order.
pub fn kinds() -> Vec<&'static dyn Strategy> {
    vec![&jobs::Jobs, &cronjobs::CronJobs]
}
