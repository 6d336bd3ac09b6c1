//! networking.k8s.io/v1: Ingresses, IngressClasses and NetworkPolicies, and [`shared`]
//! validation steps the other groups added beside it use too.

mod ingress;
mod ingress_class;
mod network_policy;
pub mod shared;

use super::Strategy;

pub use ingress::Ingresses;
pub use ingress_class::IngressClasses;
pub use network_policy::NetworkPolicies;

/// The group's kinds, in discovery order (kube-apiserver's: networkpolicies, ingresses,
/// ingressclasses, then the IP address kinds keel does not serve).
pub fn kinds() -> Vec<&'static dyn Strategy> {
    vec![&NetworkPolicies, &Ingresses, &IngressClasses]
}
