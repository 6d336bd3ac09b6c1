//! networking.k8s.io/v1: Ingresses, IngressClasses and NetworkPolicies.

use super::Strategy;

/// The group's kinds, in discovery order.
pub fn kinds() -> Vec<&'static dyn Strategy> {
    Vec::new()
}
