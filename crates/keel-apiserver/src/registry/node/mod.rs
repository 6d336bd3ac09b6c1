//! node.k8s.io/v1: RuntimeClasses.

use super::Strategy;

/// The group's kinds, in discovery order.
pub fn kinds() -> Vec<&'static dyn Strategy> {
    Vec::new()
}
