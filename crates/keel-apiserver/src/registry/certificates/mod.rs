//! certificates.k8s.io/v1: CertificateSigningRequests.

pub mod csr;
pub mod pem;

use super::Strategy;

/// The group's kinds, in discovery order.
pub fn kinds() -> Vec<&'static dyn Strategy> {
    vec![&csr::CertificateSigningRequests]
}
