//! apiregistration.k8s.io/v1: APIServices (stored; no aggregation yet).

use super::Strategy;

/// The group's kinds, in discovery order.
pub fn kinds() -> Vec<&'static dyn Strategy> {
    Vec::new()
}
