//! admissionregistration.k8s.io/v1: validating and mutating webhook configurations and
//! validating admission policies and their bindings (stored and validated, not called).

pub mod expressions;
pub mod policies;
pub mod rules;
pub mod webhooks;

use super::Strategy;

/// The group's kinds, in discovery order.
pub fn kinds() -> Vec<&'static dyn Strategy> {
    vec![
        &webhooks::MutatingWebhookConfigurations,
        &policies::ValidatingAdmissionPolicies,
        &policies::ValidatingAdmissionPolicyBindings,
        &webhooks::ValidatingWebhookConfigurations,
    ]
}
