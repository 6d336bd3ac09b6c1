//! apps/v1: Deployments, ReplicaSets, StatefulSets, DaemonSets and ControllerRevisions, with
//! upstream's defaults (pkg/apis/apps/v1/defaults.go), strategies (pkg/registry/apps/),
//! validation (pkg/apis/apps/validation/validation.go) and printing
//! (pkg/printers/internalversion/printers.go). One file per kind; `workload` holds what the
//! four workloads share.

pub mod controllerrevisions;
pub mod daemonsets;
pub mod deployments;
pub mod replicasets;
pub mod statefulsets;
pub mod workload;

use super::{ScalePaths, Strategy};

/// The group's kinds, in discovery order.
pub fn kinds() -> Vec<&'static dyn Strategy> {
    vec![
        &deployments::Deployments,
        &replicasets::ReplicaSets,
        &statefulsets::StatefulSets,
        &daemonsets::DaemonSets,
        &controllerrevisions::ControllerRevisions,
    ]
}

/// Where Deployments, ReplicaSets and StatefulSets keep what their `scale` subresource
/// shows: `spec.replicas`, `status.replicas` and the `spec.selector` label selector.
fn scale_paths() -> ScalePaths {
    ScalePaths {
        spec_replicas: ".spec.replicas".into(),
        status_replicas: ".status.replicas".into(),
        label_selector: Some(".spec.selector".into()),
    }
}
