//! rbac.authorization.k8s.io/v1: Roles, ClusterRoles, RoleBindings and ClusterRoleBindings.

use super::Strategy;

/// The group's kinds, in discovery order.
pub fn kinds() -> Vec<&'static dyn Strategy> {
    Vec::new()
}
