//! The store's core: request -> proposal -> apply -> response, and its life cycle.
//!
//! [`Store`] owns the Raft node, the WAL-backed log and the applied MVCC state, and offers the
//! API layer three things: [`Store::propose`] for writes, [`Store::read_barrier`] before
//! linearizable reads, and [`Store::header`] for response headers. [`Store::open`] opens
//! everything and returns once a leader is known and the member has replayed its log; the
//! serving around it is in [`crate::serve`].

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use keel_mvcc::Mvcc;
use keel_proto::etcdserverpb::{
    AlarmRequest, AlarmType, Member, ResponseHeader, alarm_request::AlarmAction,
};
use openraft::async_runtime::WatchReceiver;
use openraft::errors::{ClientWriteError, Fatal, RaftError};
use openraft::impls::BasicNode;
use openraft::{Config as RaftConfig, ReadPolicy, SnapshotPolicy};
use prost::Message;
use tokio::net::TcpListener;

use crate::config::{Config, ConfigError};
use crate::data_dir::DataDir;
use crate::error::EtcdError;
use crate::identity::{Identity, IdentityError};
use crate::metrics::Metrics;
use crate::raft::apply::Applier;
use crate::raft::codec::LogId;
use crate::raft::forward::{FORWARD_TIMEOUT, LeaderLink, Unsent};
use crate::raft::leadership::{Leadership, RaftView};
use crate::raft::log_store::LogStore;
use crate::raft::membership::{self, Change, PeerUrls, Removal, Roster};
use crate::raft::network::PeerNetwork;
use crate::raft::peer_service::PeerService;
use crate::raft::state_machine::StateMachine;
use crate::raft::{Applied, Proposal, ProposalOp, RaftNode};
use crate::serve::serve_peers;

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
    /// A client URL that cannot be bound.
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
    /// The commit index as openraft last reported it.
    committed: AtomicU64,
    /// The leader as etcd reports it (0: none); see [`Leadership`].
    leader: AtomicU64,
    leadership: Arc<Leadership>,
    /// Voting members in the current membership.
    voters: AtomicU64,
    /// Whether this member is a learner.
    learner: std::sync::atomic::AtomicBool,
    roster: Arc<Roster>,
    removal: Arc<Removal>,
    peer_urls: Arc<PeerUrls>,
    /// Why this member can no longer write, once its Raft core stopped on a storage error.
    failure: tokio::sync::watch::Sender<Option<String>>,
}

/// How far the applied index may trail the commit index before writes are refused with
/// `etcdserver: too many requests` (etcd's `maxGapBetweenApplyAndCommitIndex`), so a member
/// whose apply falls behind does not queue proposals without bound.
pub const MAX_APPLY_GAP: u64 = 5000;

/// How long a member whose storage failed keeps answering (unhealthy, refusing requests with
/// `etcdserver: server stopped`) before it exits, so the answers to the writes in flight go
/// out.
pub(crate) const FAILURE_GRACE: Duration = Duration::from_secs(1);

impl Store {
    /// Opens the member's data directory, starts its Raft node and serves its peers; returns
    /// once a leader is known and this member has replayed its log (see
    /// `Store::wait_until_caught_up`), so it never serves an older revision than one it
    /// served before a restart. A data directory that holds a log or a vote is restarted as
    /// it is: the `--initial-cluster*` flags count only when bootstrapping.
    pub async fn open(config: Config) -> Result<Arc<Store>, StartError> {
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
        let log = LogStore::open(&data.wal(), config.wal_segment_bytes, metrics.clone())
            .map_err(|e| storage(e.into()))?;
        // The backend and WAL files just created must survive a power cut.
        data.sync().map_err(|e| storage(e.into()))?;
        let min_lease_ttl =
            crate::lease::min_lease_ttl(config.heartbeat_interval, config.election_timeout);
        let applier = Arc::new(
            Applier::open(mvcc, metrics.clone(), min_lease_ttl).map_err(|e| storage(e.into()))?,
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
        let mut peer_listeners = Vec::new();
        for addr in config.peer_listen_addrs()? {
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|source| StartError::Listen { addr, source })?;
            peer_listeners.push(listener);
        }

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
            committed: AtomicU64::new(0),
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
        store.mirror_raft_metrics(&store.raft.metrics().borrow_and_update());
        if store.leader() == member_id {
            // This member leads with its log applied: leases resume from their checkpoints.
            store
                .applier
                .lessor(|l| l.promote(std::time::Instant::now()));
        }
        tokio::spawn(track_raft_metrics(store.clone()));
        // As etcd, serve clients only once this member's attributes are in the cluster.
        store.publish().await;
        tokio::spawn(crate::lease::task::run(Arc::downgrade(&store)));
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
        self.applier.applied().map_or(0, |id| id.index)
    }

    /// Publishes this member's attributes through the log (etcd's `publish`), retrying until
    /// they are applied; proposes nothing when they are already recorded.
    async fn publish(&self) {
        let attributes = self.attributes();
        while self.applier.published(self.member_id).as_ref() != Some(&attributes) {
            match self.propose(ProposalOp::Member(attributes.clone())).await {
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "publishing this member's attributes; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }

    /// This member's attributes, as it publishes them to the cluster.
    fn attributes(&self) -> Member {
        Member {
            id: self.member_id,
            name: self.config.name.clone(),
            peer_ur_ls: self.config.advertised_peer_urls(),
            client_ur_ls: self.config.advertised_client_urls(),
            is_learner: false,
        }
    }

    /// The cluster's members as etcd lists them (see [`Roster::members`]).
    pub fn members(&self) -> Vec<Member> {
        self.roster.members()
    }

    /// Whether this member is a learner (which serves only Status, serializable reads and
    /// snapshots, as in etcd).
    pub fn is_learner(&self) -> bool {
        self.learner.load(Ordering::Relaxed)
    }

    /// Makes a membership change through the leader; returns once this member has applied it.
    pub async fn reconfigure(&self, change: &Change) -> Result<(), EtcdError> {
        let timeout = self.config.request_timeout();
        let index = match self.remote_leader() {
            None if self.leader() == 0 => return Err(EtcdError::NoLeader),
            None => self.roster.reconfigure(change, timeout).await?,
            Some((leader, addr)) => {
                self.link
                    .reconfigure(leader, &addr, change, timeout)
                    .await?
            }
        };
        // The leader stops replicating to a member as soon as it removes it: a member asked
        // to remove itself never applies its removal, so the leader's word is the answer.
        if *change == Change::Remove(self.member_id) {
            return Ok(());
        }
        self.raft
            .wait(Some(timeout))
            .applied_index_at_least(Some(index), "the membership change")
            .await
            .map(drop)
            .map_err(|_| EtcdError::Timeout)
    }

    /// Resolves once this member has been removed from the cluster.
    pub async fn removed(&self) {
        self.removal.wait().await
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

    /// Replicates and applies one write, returning the applied result; a follower has the
    /// leader propose it.
    pub async fn propose(&self, op: ProposalOp) -> Result<Applied, EtcdError> {
        self.check_writable()?;
        let proposal = Proposal { op: Some(op) };
        if proposal.encoded_len() > self.config.max_request_bytes as usize {
            return Err(EtcdError::RequestTooLarge);
        }
        if self.leader() == 0 {
            self.metrics.proposals_failed.inc();
            return Err(EtcdError::NoLeader);
        }
        if self.committed.load(Ordering::Relaxed) > self.applied_index() + MAX_APPLY_GAP {
            return Err(EtcdError::TooManyRequests);
        }
        let _pending = Pending::new(&self.metrics.proposals_pending);
        let deadline = tokio::time::Instant::now() + self.config.request_timeout();
        let pause = Duration::from_millis(self.config.heartbeat_interval);
        // While some member leads, a write that was certainly not applied is tried again: one
        // handed back unsent because another member took over while it was queued goes to the
        // new leader (or is proposed here, if this member took over), and one a leader refused
        // (just elected, its quorum not heard yet; or not reached at all) after a pause.
        while let Some((leader, addr)) = self.remote_leader() {
            let wait = match self.link.propose(leader, &addr, &proposal, deadline).await {
                // etcd's answer when a new leader was elected while the write waited.
                Ok((Applied::Rejected(EtcdError::Timeout), _))
                    if ![0, leader].contains(&self.leader()) =>
                {
                    self.metrics.proposals_failed.inc();
                    return Err(EtcdError::TimeoutDueToLeaderFail);
                }
                Ok((Applied::Rejected(EtcdError::NoLeader), _)) if self.leader() != 0 => pause,
                // Not carried out (rather than applied and refused, e.g. for a compacted revision).
                Ok((Applied::Rejected(e @ (EtcdError::NoLeader | EtcdError::Timeout)), _)) => {
                    self.metrics.proposals_failed.inc();
                    return Err(e);
                }
                Ok((applied, index)) => {
                    // As etcd, a write is answered once this member has applied it too, so its
                    // client reads it here next (a refusal at apply time is applied as well).
                    self.applied_by(index, deadline).await?;
                    return match applied {
                        Applied::Rejected(e) => Err(e),
                        applied => Ok(applied),
                    };
                }
                Err(Unsent) => Duration::ZERO,
            };
            if tokio::time::Instant::now() + wait >= deadline {
                self.metrics.proposals_failed.inc();
                return Err(EtcdError::Timeout);
            }
            tokio::time::sleep(wait).await;
        }
        let written = loop {
            let written = self.raft.client_write(proposal.clone());
            let Ok(written) = tokio::time::timeout_at(deadline, written).await else {
                // etcd's ErrTimeout: the entry may still commit once a quorum answers.
                self.metrics.proposals_failed.inc();
                return Err(EtcdError::Timeout);
            };
            // A leader whose quorum has not acknowledged it yet (just elected, or a late
            // heartbeat) refuses writes without naming another leader: retry while it leads.
            if let Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) = &written
                && f.leader_id.is_none()
                && self.leader() == self.member_id
            {
                tokio::time::sleep(pause.min(deadline - tokio::time::Instant::now())).await;
                continue;
            }
            break written;
        };
        match written {
            Ok(resp) => match resp.data {
                Applied::Rejected(e) => Err(e),
                applied => Ok(applied),
            },
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_))) => {
                self.metrics.proposals_failed.inc();
                Err(EtcdError::NoLeader)
            }
            // The Raft core stopped (a storage failure, see `failure`): etcd's answer while
            // it stops, never openraft's own description.
            Err(RaftError::Fatal(_)) => {
                self.metrics.proposals_failed.inc();
                Err(EtcdError::Stopped)
            }
            Err(e) => {
                self.metrics.proposals_failed.inc();
                Err(EtcdError::Internal(e.to_string()))
            }
        }
    }

    /// Waits until this member has applied log `index`, or fails with etcd's timeout at
    /// `deadline`.
    async fn applied_by(
        &self,
        index: u64,
        deadline: tokio::time::Instant,
    ) -> Result<(), EtcdError> {
        if self.applied_index() >= index {
            return Ok(());
        }
        let within = deadline.saturating_duration_since(tokio::time::Instant::now());
        self.raft
            .wait(Some(within))
            .applied_index_at_least(Some(index), "a forwarded write")
            .await
            .map(drop)
            .map_err(|_| EtcdError::Timeout)
    }

    /// The leader, with its peer URL, when it is another member.
    fn remote_leader(&self) -> Option<(u64, String)> {
        let leader = Some(self.leader()).filter(|l| *l != 0 && *l != self.member_id)?;
        let metrics = self.raft.metrics();
        let m = metrics.borrow_watched();
        let node = m.membership_config.membership().get_node(&leader)?;
        Some((leader, membership::peer_url(node).to_string()))
    }

    /// The client of the leader's peer service and the header of messages to it, when
    /// another member leads.
    pub fn leader_peer(&self) -> Option<Result<crate::raft::forward::LeaderClient, EtcdError>> {
        let (leader, addr) = self.remote_leader()?;
        Some(self.link.leader_client(leader, &addr))
    }

    /// Waits until a linearizable read may be served locally (Raft's ReadIndex).
    ///
    /// With this member as the only voter, every acknowledged write was applied before it was
    /// acknowledged, so the applied state already reflects every write that completed before
    /// the read began: the leader check is the whole barrier. Otherwise the leader confirms
    /// its leadership with a quorum and names a read index, and the read waits until this
    /// member has applied it.
    pub async fn read_barrier(&self) -> Result<(), EtcdError> {
        self.check_writable()?;
        let leader = self.leader();
        if leader == self.member_id && self.voters.load(Ordering::Relaxed) <= 1 {
            return Ok(());
        }
        if leader == self.member_id {
            let confirmed = self.raft.ensure_linearizable(ReadPolicy::ReadIndex);
            return match tokio::time::timeout(self.config.request_timeout(), confirmed).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(_)) => Err(EtcdError::NoLeader),
                Err(_) => Err(EtcdError::Timeout),
            };
        }
        let Some((leader, addr)) = self.remote_leader() else {
            return Err(EtcdError::NoLeader);
        };
        let index = self.link.read_index(leader, &addr).await?;
        self.raft
            .wait(Some(FORWARD_TIMEOUT))
            .applied_index_at_least(Some(index), "the read index")
            .await
            .map(drop)
            .map_err(|_| EtcdError::Timeout)
    }

    /// Refuses a write that adds data when the NOSPACE alarm is raised, and raises it when the
    /// backend has grown past the quota (etcd's quota check before proposing).
    pub async fn check_quota(&self, cost: usize) -> Result<(), EtcdError> {
        let nospace = AlarmType::Nospace as i32;
        if self.alarms().iter().any(|a| a.alarm == nospace) {
            return Err(EtcdError::NoSpace);
        }
        if self.mvcc().db_size() + cost as u64 <= self.config.quota_bytes() {
            return Ok(());
        }
        let raise = AlarmRequest {
            action: AlarmAction::Activate as i32,
            member_id: self.member_id,
            alarm: nospace,
        };
        tracing::warn!(
            quota = self.config.quota_bytes(),
            "backend quota exceeded: raising the NOSPACE alarm"
        );
        self.propose(ProposalOp::Alarm(raise)).await?;
        Err(EtcdError::NoSpace)
    }

    /// Moves leadership to the voter `transferee` (etcd's MoveLeader, served by the leader):
    /// returns once it leads, or fails after etcd's request timeout.
    ///
    /// A transferee the leader has not heard from within an election timeout is refused at
    /// once with the error etcd gives after its timeout (etcd's Raft aborts such a transfer
    /// after an election timeout and keeps its leader); handing leadership to it would only
    /// cost an election.
    pub async fn move_leader(&self, transferee: u64) -> Result<(), EtcdError> {
        if self.leader() != self.member_id {
            return Err(EtcdError::NotLeader);
        }
        if transferee == self.member_id {
            return Ok(());
        }
        let (is_voter, reachable) = {
            let metrics = self.raft.metrics();
            let m = metrics.borrow_watched();
            let election_timeout = Duration::from_millis(self.config.election_timeout);
            (
                m.membership_config
                    .membership()
                    .voter_ids()
                    .any(|id| id == transferee),
                membership::heard_within(&m, transferee, election_timeout),
            )
        };
        if !is_voter {
            return Err(EtcdError::BadLeaderTransferee);
        }
        if !reachable {
            return Err(EtcdError::LeaderTransferTimeout);
        }
        self.raft
            .trigger()
            .transfer_leader(transferee)
            .await
            .map_err(|e| EtcdError::Internal(e.to_string()))?;
        self.raft
            .wait(Some(self.config.request_timeout()))
            .metrics(
                |m| m.current_leader == Some(transferee),
                "the transferee to lead",
            )
            .await
            .map(drop)
            .map_err(|_| EtcdError::LeaderTransferTimeout)
    }

    /// Copies openraft's view of term and leader (with etcd's check-quorum rules, see
    /// [`Leadership`]) into the store and its gauges.
    fn mirror_raft_metrics(&self, m: &openraft::RaftMetrics<crate::raft::KeelRaft>) {
        if let Err(fatal @ (Fatal::StorageError(_) | Fatal::Panicked)) = &m.running_state {
            self.fail(fatal.to_string());
        }
        self.peer_urls.update(&m.membership_config);
        let membership = m.membership_config.membership();
        let voters = membership.voter_ids().count();
        self.voters.store(voters as u64, Ordering::Relaxed);
        let learner = membership.get_node(&self.member_id).is_some()
            && !membership.voter_ids().any(|id| id == self.member_id);
        self.learner.store(learner, Ordering::Relaxed);
        if self.applier.is_removed(self.member_id) {
            self.removal.signal();
        }
        self.term.store(m.current_term, Ordering::Relaxed);
        let now = Instant::now();
        let view = RaftView {
            leader: m.current_leader,
            term: m.current_term,
            voters,
            quorum_acked: m
                .last_quorum_acked
                .as_ref()
                .and_then(|t| now.checked_sub(openraft::Instant::elapsed(&**t))),
        };
        let leader = self.leadership.leader(view, now).unwrap_or(0);
        let before = self.leader.swap(leader, Ordering::Relaxed);
        self.link.set_leader(leader);
        if leader != 0 && leader != before {
            self.metrics.leader_changes.inc();
        }
        self.metrics.has_leader.set(i64::from(leader != 0));
        self.metrics
            .is_leader
            .set(i64::from(leader == self.member_id));
        if let Some(committed) = m.cluster_committed {
            self.committed.store(committed.index, Ordering::Relaxed);
            self.metrics.proposals_committed.set(committed.index as i64);
        }
    }

    /// Why this member cannot write any more, if its Raft core stopped on a storage error (a
    /// failed WAL, backend or snapshot write, e.g. a full disk). The member then refuses
    /// requests, reports itself unhealthy and exits.
    pub fn failure(&self) -> Option<String> {
        self.failure.borrow().clone()
    }

    /// Records the first storage failure, with one log line saying what happens next.
    fn fail(&self, reason: String) {
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
    fn check_writable(&self) -> Result<(), EtcdError> {
        if self.failure.borrow().is_some() {
            Err(EtcdError::Stopped)
        } else {
            Ok(())
        }
    }

    /// Stops the Raft node and makes the backend durable.
    pub async fn shutdown(&self) {
        self.peer_server.abort();
        let _ = self.raft.shutdown().await;
        if let Err(e) = self.mvcc().sync() {
            tracing::error!(error = %e, "backend sync at shutdown failed");
        }
    }
}

/// Keeps the store's term/leader and Prometheus gauges in step with openraft's metrics, and
/// re-checks the leader every heartbeat interval (a lost quorum changes no metric).
async fn track_raft_metrics(store: Arc<Store>) {
    let mut rx = store.raft.metrics();
    let mut tick = tokio::time::interval(Duration::from_millis(store.config.heartbeat_interval));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        store.mirror_raft_metrics(&rx.borrow_and_update());
        tokio::select! {
            changed = rx.changed() => if changed.is_err() { return },
            _ = tick.tick() => {}
        }
    }
}

/// Counts one proposal in `etcd_server_proposals_pending` while it lives.
struct Pending<'a>(&'a prometheus_client::metrics::gauge::Gauge<i64>);

impl<'a> Pending<'a> {
    fn new(gauge: &'a prometheus_client::metrics::gauge::Gauge<i64>) -> Self {
        gauge.inc();
        Pending(gauge)
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.peer_server.abort();
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
