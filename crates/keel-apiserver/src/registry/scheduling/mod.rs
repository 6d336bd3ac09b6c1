//! scheduling.k8s.io/v1: PriorityClasses, and the system classes kube-apiserver makes at
//! start ([`SYSTEM_PRIORITY_CLASSES`]).

mod priority_class;

use super::Strategy;

pub use priority_class::{PriorityClasses, SYSTEM_PRIORITY_CLASSES, SystemPriorityClass};

/// The group's kinds, in discovery order.
pub fn kinds() -> Vec<&'static dyn Strategy> {
    vec![&PriorityClasses]
}
