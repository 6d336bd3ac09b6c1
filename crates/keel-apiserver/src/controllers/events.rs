//! Events the controllers record, as client-go's event recorder writes them: a core/v1 Event
//! named `<object>.<nanoseconds in hex>` in the object's namespace (`default` for a
//! cluster-scoped object), count 1, first and last timestamps now, the controller as source
//! and reporting component. A failed write is logged and dropped, as the recorder drops it.
//!
//! As client-go's broadcaster, an [`EventRecorder`] never makes its controller wait: events
//! queue (at most [`MAX_QUEUED_EVENTS`], the broadcaster's `maxQueuedEvents`; more are
//! dropped, as its `DropIfChannelFull` drops them) and one task writes them, so a controller
//! that sees 50,000 new nodes in one pass goes on with the pass.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::apimachinery::time::Time;
use crate::fieldmanager::FieldManager;
use crate::registry::store::Registry;

/// How many events wait to be written before more are dropped.
pub const MAX_QUEUED_EVENTS: usize = 1000;

/// One event to write.
struct Queued {
    involved: Value,
    kind: &'static str,
    reason: &'static str,
    message: String,
}

/// Queues a component's events and writes them in the background (see the module docs).
#[derive(Clone)]
pub struct EventRecorder {
    queue: mpsc::Sender<Queued>,
}

impl EventRecorder {
    /// A recorder writing `component`'s events through `registry`, from a task on the
    /// current runtime.
    pub fn spawn(registry: Arc<Registry>, component: &'static str) -> EventRecorder {
        let (queue, mut queued) = mpsc::channel::<Queued>(MAX_QUEUED_EVENTS);
        tokio::spawn(async move {
            while let Some(event) = queued.recv().await {
                let Queued {
                    involved,
                    kind,
                    reason,
                    message,
                } = event;
                record(&registry, component, involved, kind, reason, &message).await;
            }
        });
        EventRecorder { queue }
    }

    /// Queues an event of `kind` (`Normal`, `Warning`) about `involved` (an
    /// ObjectReference); dropped when the queue is full.
    pub fn event(
        &self,
        involved: Value,
        kind: &'static str,
        reason: &'static str,
        message: String,
    ) {
        let queued = Queued {
            involved,
            kind,
            reason,
            message,
        };
        if let Err(mpsc::error::TrySendError::Full(dropped)) = self.queue.try_send(queued) {
            tracing::debug!(reason = dropped.reason, "event queue full: event dropped");
        }
    }
}

/// Records an event of `kind` (`Normal`, `Warning`) about `involved` (an ObjectReference)
/// from `component`, now.
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
