//! discovery.k8s.io/v1: EndpointSlices.

mod endpoint_slice;

use super::Strategy;

pub use endpoint_slice::EndpointSlices;

/// The group's kinds, in discovery order.
pub fn kinds() -> Vec<&'static dyn Strategy> {
    vec![&EndpointSlices]
}
