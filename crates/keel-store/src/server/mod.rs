//! The store's core: request -> proposal -> apply -> response, and its life cycle.
//!
//! [`Store`] owns the Raft node, the WAL-backed log and the applied MVCC state, and offers the
//! API layer three things: [`Store::propose`] for writes, [`Store::read_barrier`] before
//! linearizable reads, and [`Store::header`] for response headers. [`Store::open`] opens
//! everything and returns once a leader is known and the member has replayed its log; the
//! serving around it is in [`crate::serve`].
//!
//! This module holds the type and what it answers from its own state; each concept of its
//! behaviour lives in a child module, as `impl Store` blocks:
//!
//! - `open`: start-up, from the data directory to a member that serves;
//! - `propose`: the write path, locally or through the leader, with its admission checks;
//! - `read`: the linearizable read barrier (ReadIndex);
//! - `leader`: finding the leader's peer, and moving leadership (MoveLeader);
//! - `members`: this member's attributes, the member list and membership changes;
//! - `raft_metrics`: term, leader, voters and commit index mirrored from openraft's metrics;
//! - `failure`: a storage failure that stops the member.

mod failure;
mod leader;
mod members;
mod open;
mod propose;
mod raft_metrics;
mod read;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use keel_mvcc::Mvcc;
use keel_proto::etcdserverpb::ResponseHeader;

use crate::config::Config;
use crate::data_dir::DataDir;
use crate::error::EtcdError;
use crate::metrics::Metrics;
use crate::raft::RaftNode;
use crate::raft::apply::Applier;
use crate::raft::forward::LeaderLink;
use crate::raft::leadership::Leadership;
use crate::raft::log_store::LogStore;
use crate::raft::membership::{PeerUrls, Removal, Roster};

pub(crate) use failure::FAILURE_GRACE;
pub use open::StartError;
pub use propose::MAX_APPLY_GAP;

/// One member of a keel store: consensus, log and applied state.
pub struct Store {
    raft: RaftNode,
    applier: Arc<Applier>,
    log: LogStore,
    link: LeaderLink,
    /// Serves the other members on `--listen-peer-urls` while the store lives.
    peer_server: tokio::task::JoinHandle<()>,
    metrics: Arc<Metrics>,
    config: Config,
    data: DataDir,
    member_id: u64,
    cluster_id: u64,
    term: AtomicU64,
    /// The leader as etcd reports it (0: none); see [`Leadership`].
    leader: AtomicU64,
    leadership: Arc<Leadership>,
    /// Voting members in the current membership.
    voters: AtomicU64,
    /// Whether this member is a learner.
    learner: AtomicBool,
    roster: Arc<Roster>,
    removal: Arc<Removal>,
    peer_urls: Arc<PeerUrls>,
    /// Why this member can no longer write, once its Raft core stopped on a storage error.
    failure: tokio::sync::watch::Sender<Option<String>>,
}

impl Store {
    /// The configuration this member runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The member's data folder.
    pub fn data_dir(&self) -> &DataDir {
        &self.data
    }

    /// The MVCC store.
    pub fn mvcc(&self) -> &Mvcc {
        &self.applier.mvcc
    }

    /// The metrics of this member.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// This member's id.
    pub fn member_id(&self) -> u64 {
        self.member_id
    }

    /// The cluster's id.
    pub fn cluster_id(&self) -> u64 {
        self.cluster_id
    }

    /// The current Raft term.
    pub fn term(&self) -> u64 {
        self.term.load(Ordering::Relaxed)
    }

    /// The leader's member id, 0 when there is none.
    pub fn leader(&self) -> u64 {
        self.leader.load(Ordering::Relaxed)
    }

    /// The index of the last entry in the log.
    pub fn last_log_index(&self) -> u64 {
        self.log.last_index()
    }

    /// The index of the last applied entry.
    pub fn applied_index(&self) -> u64 {
        self.applier.applied_index()
    }

    /// Waits up to `within` until this member has applied log `index` (`what`, for openraft's
    /// log), or fails with etcd's timeout.
    async fn wait_applied(
        &self,
        index: u64,
        within: Duration,
        what: &'static str,
    ) -> Result<(), EtcdError> {
        self.raft
            .wait(Some(within))
            .applied_index_at_least(Some(index), what)
            .await
            .map(drop)
            .map_err(|_| EtcdError::Timeout)
    }

    /// The alarms currently raised in the cluster.
    pub fn alarms(&self) -> Vec<keel_proto::etcdserverpb::AlarmMember> {
        self.applier.alarms()
    }

    /// The watchers of this member.
    pub fn watch_hub(&self) -> &Arc<crate::watch::WatchHub> {
        &self.applier.watch
    }

    /// Reads the auth store.
    pub fn auth<T>(&self, read: impl FnOnce(&crate::auth::AuthStore) -> T) -> T {
        self.applier.auth(read)
    }

    /// Runs `f` on the lessor (keepalives and lease lookups are leader-local).
    pub fn lessor<T>(&self, f: impl FnOnce(&mut crate::lease::Lessor) -> T) -> T {
        self.applier.lessor(f)
    }

    /// Runs `f` on the lessor with the lease clock's current time (read under the lessor's
    /// lock).
    pub fn lessor_at<T>(
        &self,
        f: impl FnOnce(&mut crate::lease::Lessor, std::time::Instant) -> T,
    ) -> T {
        self.applier.lessor_at(f)
    }

    /// The clock this member's leases are timed by.
    pub fn lease_clock(&self) -> &crate::lease::LeaseClock {
        self.applier.lease_clock()
    }

    /// A response header for `revision`.
    pub fn header(&self, revision: i64) -> ResponseHeader {
        ResponseHeader {
            cluster_id: self.cluster_id,
            member_id: self.member_id,
            revision,
            raft_term: self.term(),
        }
    }

    /// Fills the member fields of a header the MVCC layer produced.
    pub fn fill(&self, header: &mut Option<ResponseHeader>) {
        let revision = header
            .as_ref()
            .map_or_else(|| self.mvcc().current_revision(), |h| h.revision);
        *header = Some(self.header(revision));
    }

    /// Stops the Raft node and makes the backend durable.
    pub async fn shutdown(&self) {
        self.peer_server.abort();
        let _ = self.raft.shutdown().await;
        if let Err(e) = self.mvcc().sync() {
            tracing::error!(error = %e, "backend sync at shutdown failed");
        }
    }

    /// Resolves once this member's backend is closed, its file lock released, so that its
    /// data directory can be opened again in this process (a restart in place).
    ///
    /// The backend closes when its last holder goes: after [`Store::shutdown`], once every
    /// handle on the store and the tasks that still hold one (the peer server being aborted,
    /// openraft's state machine worker, the lease and metrics loops, watch streams) have
    /// ended. The future holds none of them. The watch hub is the backend's last holder (the
    /// applier that owns the backend owns the hub too, and lets go of the backend first), so
    /// this waits for the hub to be dropped; a snapshot being sent to a peer also holds the
    /// backend's file, for as long as it is sent.
    pub fn backend_released(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        self.applier.watch.dropped()
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.peer_server.abort();
    }
}
