//! The system priority classes (`system-node-critical`, `system-cluster-critical`) exist
//! after start, as kube-apiserver's `scheduling/bootstrap-system-priority-classes` post-start
//! hook makes them (pkg/registry/scheduling/rest/storage_scheduling.go): each one missing is
//! created, once, at start; one that exists is left as it is. Upstream polls every second
//! and stops the apiserver after 30 seconds of failures; keel keeps trying and says so.

use std::sync::Arc;
use std::time::Duration;

use crate::apimachinery::time::Time;
use crate::fieldmanager::FieldManager;
use crate::registry::scheduling::SYSTEM_PRIORITY_CLASSES;
use crate::registry::store::Registry;

/// How often a failed attempt is tried again (upstream's poll interval).
const RETRY: Duration = Duration::from_secs(1);

/// Creates whichever system priority classes are missing; Ok once all exist.
pub async fn ensure(registry: &Registry) -> Result<(), String> {
    let kind = registry
        .kind("scheduling.k8s.io", "v1", "priorityclasses")
        .ok_or("scheduling.k8s.io/v1 priorityclasses are not served")?;
    for class in SYSTEM_PRIORITY_CLASSES {
        match registry.get(kind, None, class.name, "").await {
            Ok(_) => continue,
            Err(status) if status.code == 404 => {}
            Err(status) => return Err(status.message),
        }
        let mut obj = class.object();
        // kube-apiserver writes them through its loopback client, as `kube-apiserver`.
        FieldManager::new(kind, None, Time::now()).update(None, &mut obj, "kube-apiserver");
        match registry.create(kind, None, obj, false).await {
            Ok(_) | Err(crate::storage::Status { code: 409, .. }) => tracing::info!(
                name = class.name,
                value = class.value,
                "created PriorityClass"
            ),
            Err(status) => return Err(status.message),
        }
    }
    Ok(())
}

/// Makes them at start: tried every second until they all exist, then `done` is called.
pub async fn run(registry: Arc<Registry>, done: impl FnOnce()) {
    while let Err(e) = ensure(&registry).await {
        tracing::warn!(error = %e, "unable to add the system priority classes yet; retrying");
        tokio::time::sleep(RETRY).await;
    }
    tracing::info!("all system priority classes are created successfully or already exist");
    done();
}
