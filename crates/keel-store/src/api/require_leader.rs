//! etcd's `hasleader` requirement on streams (clientv3's `WithRequireLeader`).
//!
//! A stream opened with the metadata `hasleader=true` is refused while the member has no
//! leader, and ends with `etcdserver: no leader` (Unavailable) once the member has gone
//! without one at [`NO_LEADER_CHECKS`] checks in a row, one check every election timeout: 3
//! to 4 election timeouts after it lost its leader. These are etcd's rules (its stream
//! interceptor and `monitorLeader`, `maxNoLeaderCnt` 3): a partitioned member does not keep
//! clients on a stream that can no longer see new writes, and a short election does not cut
//! them off.

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use tonic::Status;

use crate::error::EtcdError;
use crate::server::Store;

/// Checks in a row without a leader after which a `hasleader` stream ends (etcd's
/// `maxNoLeaderCnt`).
pub const NO_LEADER_CHECKS: u32 = 3;

/// Whether the call carries the metadata `hasleader=true`.
pub fn requires_leader(metadata: &tonic::metadata::MetadataMap) -> bool {
    metadata
        .get("hasleader")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == "true")
}

/// `stream`, ended with `etcdserver: no leader` once `store` has lost its leader for good
/// (see the module docs).
pub fn until_leader_lost<T, S>(
    store: Arc<Store>,
    stream: S,
) -> impl Stream<Item = Result<T, Status>> + Send + 'static
where
    T: Send + 'static,
    S: Stream<Item = Result<T, Status>> + Send + 'static,
{
    let lost = Box::pin(leader_lost(store));
    futures::stream::unfold(
        (Box::pin(stream), Some(lost)),
        |(mut stream, lost)| async move {
            let mut lost = lost?;
            tokio::select! {
                item = stream.next() => item.map(|item| (item, (stream, Some(lost)))),
                () = &mut lost => Some((Err(EtcdError::NoLeader.into()), (stream, None))),
            }
        },
    )
}

/// Resolves once `store` has had no leader at [`NO_LEADER_CHECKS`] checks in a row, one
/// every election timeout.
async fn leader_lost(store: Arc<Store>) {
    let every = Duration::from_millis(store.config().election_timeout.max(1));
    let mut checks = 0;
    while checks < NO_LEADER_CHECKS {
        tokio::time::sleep(every).await;
        checks = if store.leader() == 0 { checks + 1 } else { 0 };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hasleader_metadata_is_recognised() {
        let mut md = tonic::metadata::MetadataMap::new();
        assert!(!requires_leader(&md));
        md.insert("hasleader", "true".parse().unwrap());
        assert!(requires_leader(&md));
        let status = Status::from(EtcdError::NoLeader);
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert_eq!(status.message(), "etcdserver: no leader");
    }
}
