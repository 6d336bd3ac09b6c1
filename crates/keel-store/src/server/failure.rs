//! A storage failure that stops the member: once its Raft core stopped on a storage error,
//! the member refuses requests with `etcdserver: server stopped`, reports itself unhealthy
//! and, after [`FAILURE_GRACE`], exits (see [`crate::serve::StoreHandle::wait`]).

use std::time::Duration;

use super::Store;
use crate::error::EtcdError;

/// How long a member whose storage failed keeps answering (unhealthy, refusing requests with
/// `etcdserver: server stopped`) before it exits, so the answers to the writes in flight go
/// out.
pub(crate) const FAILURE_GRACE: Duration = Duration::from_secs(1);

impl Store {
    /// Why this member cannot write any more, if its Raft core stopped on a storage error (a
    /// failed WAL, backend or snapshot write, e.g. a full disk). The member then refuses
    /// requests, reports itself unhealthy and exits.
    pub fn failure(&self) -> Option<String> {
        self.failure.borrow().clone()
    }

    /// Records the first storage failure, with one log line saying what happens next.
    pub(super) fn fail(&self, reason: String) {
        self.failure.send_if_modified(|failure| {
            if failure.is_some() {
                return false;
            }
            tracing::error!(
                error = %reason,
                data_dir = %self.config.data_dir().display(),
                "cannot write to the data directory (is the disk full?); as etcd treats a failed \
                 WAL write, this member stops: restart it once the disk is writable again"
            );
            *failure = Some(reason);
            true
        });
    }

    /// Waits for a storage failure; its reason.
    pub(crate) async fn failed(&self) -> String {
        let mut rx = self.failure.subscribe();
        match rx.wait_for(Option::is_some).await {
            Ok(reason) => reason.clone().unwrap_or_default(),
            Err(_) => std::future::pending().await,
        }
    }

    /// `etcdserver: server stopped` once the storage failed.
    pub(super) fn check_writable(&self) -> Result<(), EtcdError> {
        if self.failure.borrow().is_some() {
            Err(EtcdError::Stopped)
        } else {
            Ok(())
        }
    }
}
