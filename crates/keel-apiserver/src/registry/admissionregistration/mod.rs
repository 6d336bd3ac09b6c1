//! admissionregistration.k8s.io/v1: validating and mutating webhook configurations (stored and validated).

use super::Strategy;

/// The group's kinds, in discovery order.
pub fn kinds() -> Vec<&'static dyn Strategy> {
    Vec::new()
}
