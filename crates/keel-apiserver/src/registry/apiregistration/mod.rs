//! apiregistration.k8s.io/v1: APIServices (stored and validated; not aggregated: nothing is
//! proxied to the services they name).

pub mod apiservices;

use super::Strategy;

/// The group's kinds, in discovery order.
pub fn kinds() -> Vec<&'static dyn Strategy> {
    vec![&apiservices::ApiServices]
}
