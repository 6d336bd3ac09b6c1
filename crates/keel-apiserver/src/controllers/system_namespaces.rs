//! The system namespaces (`default`, `kube-system`, `kube-public`, `kube-node-lease`) exist
//! after start, and are made again if deleted, as kube-apiserver's
//! `start-system-namespaces-controller` does (once a minute).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::apimachinery::time::Time;
use crate::fieldmanager::FieldManager;
use crate::registry::store::Registry;

/// The namespaces every cluster has.
pub const SYSTEM_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// How often they are checked.
const INTERVAL: Duration = Duration::from_secs(60);

/// Creates whichever system namespaces are missing; Ok once all exist.
pub async fn ensure(registry: &Registry) -> Result<(), String> {
    let namespaces = registry.core("namespaces");
    for name in SYSTEM_NAMESPACES {
        match registry.get(namespaces, None, name, "").await {
            Ok(_) => continue,
            Err(status) if status.code == 404 => {}
            Err(status) => return Err(status.message),
        }
        let mut ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        // kube-apiserver writes them through its own client, as `kube-apiserver`.
        FieldManager::new(namespaces, None, Time::now()).update(None, &mut ns, "kube-apiserver");
        match registry.create(namespaces, None, ns, false).await {
            Ok(_) => tracing::info!(namespace = name, "created system namespace"),
            Err(status) if status.code == 409 => {}
            Err(status) => return Err(status.message),
        }
    }
    Ok(())
}

/// Keeps them there: first until they all exist (calling `ready` then), then once a minute.
pub async fn run(registry: Arc<Registry>, ready: impl FnOnce()) {
    let mut delay = Duration::from_millis(100);
    while let Err(e) = ensure(&registry).await {
        tracing::warn!(error = %e, "cannot create the system namespaces yet; retrying");
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(5));
    }
    ready();
    loop {
        tokio::time::sleep(INTERVAL).await;
        if let Err(e) = ensure(&registry).await {
            tracing::warn!(error = %e, "checking the system namespaces");
        }
    }
}
