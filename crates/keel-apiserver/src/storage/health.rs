//! The store's health as the apiserver sees it: whether a linearizable read answers within
//! two seconds. A store without a leader, or one the apiserver cannot reach, fails it. It
//! is the one signal behind `/readyz`'s (and `/healthz`'s, `/livez`'s) `etcd` check and the
//! node lifecycle controller's pause: no grace period runs while it fails.

use std::time::Duration;

use super::{Etcd3, StoreChannel};

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

/// One store member's health, as `componentstatuses` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberHealth {
    /// The member's first client URL.
    pub url: String,
    /// None when it answered a linearizable read within [`CHECK_TIMEOUT`], else why not.
    pub error: Option<String>,
}

impl Etcd3 {
    /// The health of every member of the store (in the store's member order), each checked
    /// on its own client URL.
    pub async fn member_health(&self) -> Result<Vec<MemberHealth>, String> {
        use keel_proto::etcdserverpb::MemberListRequest;
        use keel_proto::etcdserverpb::cluster_client::ClusterClient;
        let members = tokio::time::timeout(
            CHECK_TIMEOUT,
            ClusterClient::new(self.channel()).member_list(MemberListRequest {
                linearizable: false,
            }),
        )
        .await
        .map_err(|_| "context deadline exceeded".to_string())?
        .map_err(|e| e.message().to_string())?
        .into_inner()
        .members;
        let mut health = Vec::new();
        for member in members {
            let Some(url) = member.client_ur_ls.first().cloned() else {
                continue;
            };
            let error = match tonic::transport::Endpoint::from_shared(url.clone()) {
                Ok(endpoint) => {
                    let endpoint = endpoint.connect_timeout(CHECK_TIMEOUT);
                    match endpoint.connect().await {
                        Ok(channel) => (!Etcd3::new(StoreChannel::new(channel)).healthy().await)
                            .then(|| "context deadline exceeded".to_string()),
                        Err(e) => Some(e.to_string()),
                    }
                }
                Err(e) => Some(e.to_string()),
            };
            health.push(MemberHealth { url, error });
        }
        Ok(health)
    }
}
