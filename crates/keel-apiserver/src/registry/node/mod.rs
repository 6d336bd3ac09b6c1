//! node.k8s.io/v1: RuntimeClasses.

mod runtime_class;

use super::Strategy;

pub use runtime_class::RuntimeClasses;

/// The group's kinds, in discovery order.
pub fn kinds() -> Vec<&'static dyn Strategy> {
    vec![&RuntimeClasses]
}
