//! The store's health as the apiserver sees it: whether a linearizable read answers within
//! two seconds. A store without a leader, or one the apiserver cannot reach, fails it. It
//! is the one signal behind `/readyz`'s (and `/healthz`'s, `/livez`'s) `etcd` check and the
//! node lifecycle controller's pause: no grace period runs while it fails.

use std::time::Duration;

use super::Etcd3;

/// How long the check waits for the store.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// The key the check reads (it need not exist).
const CHECK_KEY: &str = "/health-check";

impl Etcd3 {
    /// Whether the store answers a linearizable read within [`CHECK_TIMEOUT`].
    pub async fn healthy(&self) -> bool {
        tokio::time::timeout(CHECK_TIMEOUT, self.get(CHECK_KEY, ""))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}
