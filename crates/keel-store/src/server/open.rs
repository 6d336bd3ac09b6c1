//! Start-up: from a data directory and flags to a member that serves.
//!
//! [`Store::open`] checks the flags, opens the data directory (backend, WAL, identity), starts
//! the Raft node (bootstrapping a new cluster when the flags say so and the directory holds
//! nothing), serves the peers, and waits until a leader is known and the log is replayed
//! before it publishes this member's attributes and starts the lease loop.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use keel_mvcc::Mvcc;
use openraft::impls::BasicNode;
use openraft::{Config as RaftConfig, SnapshotPolicy};

use super::Store;
use super::raft_metrics::track_raft_metrics;
use crate::config::{Config, ConfigError};
use crate::data_dir::DataDir;
use crate::identity::{Identity, IdentityError};
use crate::lease::LeaseClock;
use crate::metrics::Metrics;
use crate::raft::RaftNode;
use crate::raft::apply::Applier;
use crate::raft::codec::LogId;
use crate::raft::forward::LeaderLink;
use crate::raft::leadership::Leadership;
use crate::raft::log_store::LogStore;
use crate::raft::membership::{self, PeerUrls, Removal, Roster};
use crate::raft::network::PeerNetwork;
use crate::raft::peer_service::PeerService;
use crate::raft::state_machine::StateMachine;
use crate::serve::{bind, serve_peers};

/// A failure to start the store.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A bad flag.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A data directory, WAL or backend problem.
    #[error("cannot open the data directory {path}")]
    Storage {
        /// The directory.
        path: String,
        /// What failed.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A client or peer URL that cannot be bound.
    #[error("cannot listen on {addr}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// What failed.
        source: std::io::Error,
    },
    /// The Raft node failed to start or to elect itself.
    #[error("raft: {0}")]
    Raft(String),
    /// The member cannot establish its member and cluster ids.
    #[error(transparent)]
    Identity(#[from] IdentityError),
}

impl Store {
    /// Checks the flags, opens the member's data directory, starts its Raft node and serves
    /// its peers; returns once a leader is known and this member has replayed its log (see
    /// `Store::wait_until_caught_up`), so it never serves an older revision than one it
    /// served before a restart. A data directory that holds a log or a vote is restarted as
    /// it is: the `--initial-cluster*` flags count only when bootstrapping.
    ///
    /// The flags are checked here, where every start comes through ([`crate::StoreHandle::start`]
    /// checks them once more before it binds the client ports).
    pub async fn open(config: Config) -> Result<Arc<Store>, StartError> {
        Store::open_with_lease_clock(config, LeaseClock::system()).await
    }

    /// [`Store::open`], with leases timed by `lease_clock` instead of the monotonic clock:
    /// the injection point for tests that move lease time themselves (see
    /// [`crate::lease::clock`]).
    pub async fn open_with_lease_clock(
        config: Config,
        lease_clock: LeaseClock,
    ) -> Result<Arc<Store>, StartError> {
        config.validate()?;
        config.warn_replaced_values();
        let storage = |source: Box<dyn std::error::Error + Send + Sync>| StartError::Storage {
            path: config.data_dir().display().to_string(),
            source,
        };
        let data = DataDir::create(config.data_dir()).map_err(|e| storage(e.into()))?;
        let dir = data.member();
        let metrics = Arc::new(Metrics::new());
        let mvcc = Arc::new(Mvcc::open(&data.backend()).map_err(|e| storage(e.into()))?);
        // The identity is written only once the WAL exists durably: with an identity but no
        // WAL, the log was lost, and starting an empty one would forget acknowledged writes
        // and this member's vote.
        let wal_exists = keel_wal::Wal::exists(&data.wal()).map_err(|e| storage(e.into()))?;
        if data.identity().exists() && !wal_exists {
            return Err(storage(
                format!(
                    "{} exists but the WAL in {} is gone: this member's log is lost, refusing                      to start with an empty one; restore the data directory from a backup, or                      remove the member from its cluster and add it again with a new one",
                    data.identity().display(),
                    data.wal().display()
                )
                .into(),
            ));
        }
        let log = LogStore::open(&data.wal(), config.wal_segment_bytes, metrics.clone())
            .map_err(|e| storage(e.into()))?;
        // The backend and WAL files just created must survive a power cut.
        data.sync().map_err(|e| storage(e.into()))?;
        let min_lease_ttl =
            crate::lease::min_lease_ttl(config.heartbeat_interval, config.election_timeout);
        let applier = Arc::new(
            Applier::open(mvcc, metrics.clone(), min_lease_ttl, lease_clock)
                .map_err(|e| storage(e.into()))?,
        );
        // The log as it stands now: replayed up to its end before serving.
        let (start, started) = persisted_log(&log).await.map_err(|e| storage(e.into()))?;
        let has_data = started || applier.applied().is_some();
        if has_data {
            tracing::info!(
                "the data directory holds this member's state: --initial-cluster, \
                 --initial-cluster-state and --initial-cluster-token are ignored"
            );
        } else {
            config.validate_initial_cluster()?;
        }
        let Identity {
            member_id,
            cluster_id,
        } = Identity::establish(&config, &dir, has_data).await?;
        let initial = config.initial_members()?;
        let removal = Arc::new(Removal::default());
        let peer_urls = Arc::new(PeerUrls::default());
        let network = PeerNetwork {
            cluster_id,
            member_id,
            metrics: metrics.clone(),
            removal: removal.clone(),
            urls: peer_urls.clone(),
        };
        let peer_listeners = bind(config.peer_listen_addrs()?).await?;

        // An openraft follower campaigns once its leader lease (= election_timeout_max) and then
        // a random election timeout in [min, max) have passed since the last heartbeat: these
        // bounds make that [1, 1.2) x --election-timeout (etcd campaigns after a random
        // [1, 2) x), with a lease of 0.6 x.
        let raft_config = RaftConfig {
            cluster_name: format!("keel-{cluster_id:x}"),
            heartbeat_interval: config.heartbeat_interval,
            election_timeout_min: (config.election_timeout * 2 / 5)
                .max(config.heartbeat_interval + 1),
            election_timeout_max: (config.election_timeout * 3 / 5)
                .max(config.heartbeat_interval + 2),
            snapshot_policy: SnapshotPolicy::LogsSinceLast(config.snapshot_count.max(1)),
            max_in_snapshot_log_to_keep: 5_000.min(config.snapshot_count),
            enable_pre_vote: Some(true),
            // A leader restarted before the others noticed must not lead again at once: the
            // persisted commit index trails the real one by up to a batch (as etcd's
            // HardState), so its read index could miss writes it had acknowledged (found by
            // tests/linearizability.rs). It rejoins as a follower and
            // leads again, if at all, only after an election commits an entry of a new term.
            enable_leader_restore: Some(false),
            ..RaftConfig::default()
        };
        let raft_config = Arc::new(
            raft_config
                .validate()
                .map_err(|e| StartError::Raft(e.to_string()))?,
        );
        let peer_limit = crate::raft::peer_service::max_message_bytes(
            config.max_request_bytes,
            raft_config.max_payload_entries,
        );
        let raft = RaftNode::new(
            member_id,
            raft_config,
            network.clone(),
            log.clone(),
            StateMachine::new(applier.clone()),
        )
        .await
        .map_err(|e| StartError::Raft(e.to_string()))?;
        let leadership = Arc::new(Leadership::new(
            member_id,
            Duration::from_millis(config.election_timeout),
        ));
        // openraft's own notion of a member that has started before (a log entry or a vote):
        // a member stopped after `initialize` but before its first commit is one.
        let initialized = raft
            .is_initialized()
            .await
            .map_err(|e| StartError::Raft(e.to_string()))?;
        if !initialized && config.initial_cluster_state == "new" {
            let members: BTreeMap<u64, BasicNode> = initial
                .iter()
                .map(|(_, urls)| {
                    let id = crate::identity::member_id(urls, &config.initial_cluster_token);
                    (id, membership::node(urls))
                })
                .collect();
            // Before serving peers, so no member can vote before it knows the membership.
            raft.initialize(members)
                .await
                .map_err(|e| StartError::Raft(e.to_string()))?;
        }
        let roster = Arc::new(Roster::new(
            raft.clone(),
            applier.clone(),
            member_id,
            initial,
            config.strict_reconfig_check,
        ));
        let peer_server = tokio::spawn(serve_peers(
            peer_listeners,
            peer_limit,
            PeerService {
                raft: raft.clone(),
                cluster_id,
                member_id,
                leadership: leadership.clone(),
                metrics: metrics.clone(),
                roster: roster.clone(),
                applier: applier.clone(),
                request_timeout: config.request_timeout(),
                data: data.clone(),
            },
        ));
        let store = Arc::new(Store {
            raft,
            applier,
            log,
            link: LeaderLink::new(network),
            peer_server,
            metrics,
            config,
            data,
            member_id,
            cluster_id,
            term: AtomicU64::new(0),
            leader: AtomicU64::new(0),
            leadership,
            voters: AtomicU64::new(0),
            learner: Default::default(),
            roster,
            removal,
            peer_urls,
            failure: tokio::sync::watch::Sender::new(None),
        });
        store.wait_until_caught_up(start).await?;
        // Known now, before any request or the lease loop looks at them.
        store.mirror_raft_metrics();
        if store.leader() == member_id {
            // This member leads with its log applied: leases resume from their checkpoints.
            store.applier.lessor_at(|l, now| l.promote(now));
        }
        tokio::spawn(track_raft_metrics(store.clone()));
        // As etcd, serve clients only once this member's attributes are in the cluster.
        store.publish().await;
        let started = store.lease_clock().now();
        tokio::spawn(crate::lease::task::run(Arc::downgrade(&store), started));
        Ok(store)
    }

    /// Waits, without limit, until a leader is known and this member has applied its log up
    /// to `start` (its last entry when it started) or up to the cluster's commit index,
    /// whichever is lower (etcd's ReadyNotify after replaying the WAL). Everything this member
    /// applied, and so answered, before a restart is at or below both: it never answers with
    /// a revision lower than one it answered before. The commit index is the leader's latest
    /// (openraft restores none), so entries of the local log that the leader replaces are not
    /// waited for. Which members the flags list plays no part.
    async fn wait_until_caught_up(&self, start: Option<LogId>) -> Result<(), StartError> {
        self.raft
            .wait(None)
            .metrics(
                |m| {
                    let Some(start) = start else {
                        return m.current_leader.is_some();
                    };
                    let Some(committed) =
                        m.cluster_committed.filter(|_| m.current_leader.is_some())
                    else {
                        return false;
                    };
                    let target = start.index.min(committed.index);
                    m.last_applied.is_some_and(|a| a.index >= target)
                },
                "a leader, with the log replayed",
            )
            .await
            .map_err(|e| StartError::Raft(e.to_string()))?;
        Ok(())
    }
}

/// What the log holds at start: the id of its last entry (purged or not), and whether it
/// holds an entry or a vote (what openraft counts as a member that has started before).
async fn persisted_log(log: &LogStore) -> std::io::Result<(Option<LogId>, bool)> {
    use openraft::storage::RaftLogStorage;
    let mut log = log.clone();
    let last = log.get_log_state().await?.last_log_id;
    let vote = openraft::RaftLogReader::read_vote(&mut log).await?;
    Ok((last, last.is_some() || vote.is_some()))
}
