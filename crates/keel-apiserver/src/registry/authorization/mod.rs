//! authorization.k8s.io/v1: SelfSubjectAccessReviews, SelfSubjectRulesReviews, SubjectAccessReviews and LocalSubjectAccessReviews.

use super::Strategy;

/// The group's kinds, in discovery order.
pub fn kinds() -> Vec<&'static dyn Strategy> {
    Vec::new()
}
