//! Events the controllers record, as client-go's event recorder writes them: a core/v1 Event
//! named `<object>.<nanoseconds in hex>` in the object's namespace (`default` for a
//! cluster-scoped object), count 1, first and last timestamps now, the controller as source
//! and reporting component. A failed write is logged and dropped, as the recorder drops it.

use serde_json::{Value, json};

use crate::registry::managed_fields::FieldManager;
use crate::registry::store::Registry;
use crate::registry::time::Time;

/// Records an event of `kind` (`Normal`, `Warning`) about `involved` (an ObjectReference)
/// from `component`.
pub async fn record(
    registry: &Registry,
    component: &str,
    involved: Value,
    kind: &str,
    reason: &str,
    message: &str,
) {
    let events = registry.core("events");
    let namespace = match involved["namespace"].as_str() {
        Some(ns) if !ns.is_empty() => ns.to_string(),
        _ => "default".to_string(),
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let now = Time::now().rfc3339();
    let mut event = json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": format!("{}.{nanos:x}", involved["name"].as_str().unwrap_or_default())},
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "source": {"component": component},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "type": kind,
        "reportingComponent": component,
        "reportingInstance": "",
    });
    FieldManager::new(events, None, Time::now()).update(
        None,
        &mut event,
        "kube-controller-manager",
    );
    if let Err(status) = registry
        .create(events, Some(&namespace), event, false)
        .await
    {
        tracing::debug!(reason, error = %status.message, "recording an event");
    }
}
