//! Prometheus metrics of the store, under etcd's metric names so existing dashboards and alerts
//! work unchanged. Each axis updates its own metrics; `/metrics` renders them all.

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::slow_log::SlowLog;

/// Labels of `grpc_server_handled_total`, as go-grpc-prometheus names them.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GrpcLabels {
    /// The gRPC type (`unary`, `server_stream`, `bidi_stream`).
    pub grpc_type: &'static str,
    /// The service, e.g. `etcdserverpb.KV`.
    pub grpc_service: &'static str,
    /// The method, e.g. `Range`.
    pub grpc_method: &'static str,
    /// The status code name, e.g. `OK`, `OutOfRange`.
    pub grpc_code: &'static str,
}

/// The `To` label of etcd's peer metrics: the other member's id in hex.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
#[allow(non_snake_case)]
pub struct PeerTo {
    /// The member sent to.
    pub To: String,
}

/// The `From` label of etcd's peer metrics: the other member's id in hex.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
#[allow(non_snake_case)]
pub struct PeerFrom {
    /// The member received from.
    pub From: String,
}

/// Round-trip times of peer messages, with etcd's buckets (0.1 ms doubling 16 times).
pub type RttFamily = Family<PeerTo, Histogram, fn() -> Histogram>;

/// Every metric the store exports.
pub struct Metrics {
    registry: Registry,
    /// WAL fdatasync latency (`etcd_disk_wal_fsync_duration_seconds`).
    pub wal_fsync: Histogram,
    /// Backend commit latency (`etcd_disk_backend_commit_duration_seconds`).
    pub backend_commit: Histogram,
    /// Backend file size (`etcd_mvcc_db_total_size_in_bytes`).
    pub db_size: Gauge<i64>,
    /// Backend bytes in use (`etcd_mvcc_db_total_size_in_use_in_bytes`).
    pub db_size_in_use: Gauge<i64>,
    /// The backend quota, `--quota-backend-bytes` (`etcd_server_quota_backend_bytes`).
    pub quota_backend_bytes: Gauge<i64>,
    /// Log index committed (`etcd_server_proposals_committed_total`, a gauge in etcd).
    pub proposals_committed: Gauge<i64>,
    /// Log index applied (`etcd_server_proposals_applied_total`, a gauge in etcd).
    pub proposals_applied: Gauge<i64>,
    /// Failed proposals (`etcd_server_proposals_failed_total`).
    pub proposals_failed: Counter<u64, AtomicU64>,
    /// Applies (batches of entries) that took longer than [`SLOW_APPLY`]
    /// (`etcd_server_slow_apply_total`).
    pub slow_applies: Counter<u64, AtomicU64>,
    /// 1 when the member knows a leader (`etcd_server_has_leader`).
    pub has_leader: Gauge<i64>,
    /// 1 when this member leads (`etcd_server_is_leader`).
    pub is_leader: Gauge<i64>,
    /// Times this member saw a new leader (`etcd_server_leader_changes_seen_total`).
    pub leader_changes: Counter<u64, AtomicU64>,
    /// Proposals this member is waiting on (`etcd_server_proposals_pending`).
    pub proposals_pending: Gauge<i64>,
    /// Snapshots being applied (`etcd_server_snapshot_apply_in_progress_total`, a gauge in
    /// etcd; keel installs no snapshot from a leader yet, so it stays 0).
    pub snapshot_apply_in_progress: Gauge<i64>,
    /// Round trip of each Raft message to a peer (`etcd_network_peer_round_trip_time_seconds`).
    pub peer_rtt: RttFamily,
    /// Bytes sent to each peer (`etcd_network_peer_sent_bytes_total`).
    pub peer_sent: Family<PeerTo, Counter<u64, AtomicU64>>,
    /// Bytes received from each peer (`etcd_network_peer_received_bytes_total`).
    pub peer_received: Family<PeerFrom, Counter<u64, AtomicU64>>,
    /// Raft messages to each peer that failed: unanswered in time, unreachable or lost
    /// (`etcd_network_peer_sent_failures_total`).
    pub peer_sent_failures: Family<PeerTo, Counter<u64, AtomicU64>>,
    /// Puts seen by MVCC (`etcd_mvcc_put_total`).
    pub mvcc_put: Counter<u64, AtomicU64>,
    /// Ranges seen by MVCC (`etcd_mvcc_range_total`).
    pub mvcc_range: Counter<u64, AtomicU64>,
    /// Txns seen by MVCC (`etcd_mvcc_txn_total`).
    pub mvcc_txn: Counter<u64, AtomicU64>,
    /// Deletes seen by MVCC (`etcd_mvcc_delete_total`).
    pub mvcc_delete: Counter<u64, AtomicU64>,
    /// Handled gRPC calls (`grpc_server_handled_total`).
    pub grpc_handled: Family<GrpcLabels, Counter<u64, AtomicU64>>,
    /// Leases granted (`etcd_debugging_lease_granted_total`).
    pub lease_granted: Counter<u64, AtomicU64>,
    /// Leases revoked or expired (`etcd_debugging_lease_revoked_total`).
    pub lease_revoked: Counter<u64, AtomicU64>,
    /// Lease renewals (`etcd_debugging_lease_renewed_total`).
    pub lease_renewed: Counter<u64, AtomicU64>,
    /// Live leases (`keel_lease_count`; etcd has no gauge for it).
    pub lease_count: Gauge<i64>,
    /// Watchers (`etcd_debugging_mvcc_watcher_total`, a gauge in etcd).
    pub watchers: Gauge<i64>,
    /// Watchers that fell behind and catch up from history (`etcd_debugging_mvcc_slow_watcher_total`, a gauge in etcd).
    pub slow_watchers: Gauge<i64>,
    /// Events queued for watchers (`etcd_debugging_mvcc_pending_events_total`, a gauge in etcd).
    pub pending_events: Gauge<i64>,
    /// Open watch streams (`etcd_debugging_mvcc_watch_stream_total`, a gauge in etcd).
    pub watch_streams: Gauge<i64>,
    /// The warnings logged beside the slow fsyncs and applies counted here.
    slow_log: SlowLog,
}

impl Metrics {
    /// Records one WAL fsync that took `took`; one past etcd's `warnSyncDuration` is also
    /// logged (`slow fdatasync`, see [`crate::slow_log`]).
    pub fn observe_wal_fsync(&self, took: Duration) {
        self.wal_fsync.observe(took.as_secs_f64());
        self.slow_log.fsync(took);
    }

    /// Records one apply of `entries` log entries that took `took`: one longer than
    /// [`SLOW_APPLY`] is counted (`etcd_server_slow_apply_total`) and logged (`apply request
    /// took too long`, see [`crate::slow_log`]); a quicker one may close a flood's lines.
    pub fn observe_apply(&self, took: Duration, entries: usize) {
        if took > SLOW_APPLY {
            self.slow_applies.inc();
        }
        self.slow_log.apply(took, entries);
    }

    /// Counts a message of `bytes` sent to member `to`.
    pub fn sent_to(&self, to: u64, bytes: usize) {
        let label = PeerTo {
            To: format!("{to:x}"),
        };
        self.peer_sent.get_or_create(&label).inc_by(bytes as u64);
    }

    /// Counts a Raft message to member `to` that failed.
    pub fn send_failed(&self, to: u64) {
        let label = PeerTo {
            To: format!("{to:x}"),
        };
        self.peer_sent_failures.get_or_create(&label).inc();
    }

    /// Sends `req` to member `to` with `call` (a peer RPC), counting the bytes of the request
    /// and, when it is answered, of the response.
    pub async fn exchange<Req, Resp, Fut>(
        &self,
        to: u64,
        req: Req,
        call: impl FnOnce(Req) -> Fut,
    ) -> Result<Resp, tonic::Status>
    where
        Req: prost::Message,
        Resp: prost::Message,
        Fut: std::future::Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
    {
        self.sent_to(to, req.encoded_len());
        let resp = call(req).await?.into_inner();
        self.received_from(to, resp.encoded_len());
        Ok(resp)
    }

    /// Counts a message of `bytes` received from member `from`.
    pub fn received_from(&self, from: u64, bytes: usize) {
        let label = PeerFrom {
            From: format!("{from:x}"),
        };
        self.peer_received
            .get_or_create(&label)
            .inc_by(bytes as u64);
    }

    /// Records the round trip of a message to member `to`.
    pub fn round_trip(&self, to: u64, rtt: Duration) {
        let label = PeerTo {
            To: format!("{to:x}"),
        };
        self.peer_rtt
            .get_or_create(&label)
            .observe(rtt.as_secs_f64());
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// How long an apply may take before it counts as slow: etcd's default
/// `--warning-apply-duration` (100 ms), past which it logs "apply request took too long".
pub const SLOW_APPLY: Duration = Duration::from_millis(100);

impl Metrics {
    /// Creates and registers every metric.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        // etcd's buckets: 1 ms .. ~8 s doubling for fsync, 1 ms .. ~8 s for commits.
        let wal_fsync = Histogram::new(exponential_buckets(0.001, 2.0, 14));
        let backend_commit = Histogram::new(exponential_buckets(0.001, 2.0, 14));
        let m = Metrics {
            wal_fsync,
            backend_commit,
            db_size: Gauge::default(),
            db_size_in_use: Gauge::default(),
            quota_backend_bytes: Gauge::default(),
            proposals_committed: Gauge::default(),
            proposals_applied: Gauge::default(),
            proposals_failed: Counter::default(),
            slow_applies: Counter::default(),
            has_leader: Gauge::default(),
            is_leader: Gauge::default(),
            leader_changes: Counter::default(),
            proposals_pending: Gauge::default(),
            snapshot_apply_in_progress: Gauge::default(),
            peer_rtt: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.0001, 2.0, 16))
            }),
            peer_sent: Family::default(),
            peer_received: Family::default(),
            peer_sent_failures: Family::default(),
            mvcc_put: Counter::default(),
            mvcc_range: Counter::default(),
            mvcc_txn: Counter::default(),
            mvcc_delete: Counter::default(),
            grpc_handled: Family::default(),
            lease_granted: Counter::default(),
            lease_revoked: Counter::default(),
            lease_renewed: Counter::default(),
            lease_count: Gauge::default(),
            watchers: Gauge::default(),
            slow_watchers: Gauge::default(),
            pending_events: Gauge::default(),
            watch_streams: Gauge::default(),
            slow_log: SlowLog::default(),
            registry: Registry::default(),
        };
        let r = &mut registry;
        r.register(
            "etcd_disk_wal_fsync_duration_seconds",
            "The latency distributions of fsync called by WAL",
            m.wal_fsync.clone(),
        );
        r.register(
            "etcd_disk_backend_commit_duration_seconds",
            "The latency distributions of commit called by backend",
            m.backend_commit.clone(),
        );
        r.register(
            "etcd_mvcc_db_total_size_in_bytes",
            "Total size of the underlying database physically allocated in bytes",
            m.db_size.clone(),
        );
        r.register(
            "etcd_mvcc_db_total_size_in_use_in_bytes",
            "Total size of the underlying database logically in use in bytes",
            m.db_size_in_use.clone(),
        );
        r.register(
            "etcd_server_quota_backend_bytes",
            "Current backend storage quota size in bytes",
            m.quota_backend_bytes.clone(),
        );
        r.register(
            "etcd_server_proposals_committed_total",
            "The total number of consensus proposals committed",
            m.proposals_committed.clone(),
        );
        r.register(
            "etcd_server_proposals_applied_total",
            "The total number of consensus proposals applied",
            m.proposals_applied.clone(),
        );
        r.register(
            "etcd_server_proposals_failed",
            "The total number of failed proposals seen",
            m.proposals_failed.clone(),
        );
        r.register(
            "etcd_server_slow_apply",
            "The total number of slow apply requests (likely overloaded from slow disk)",
            m.slow_applies.clone(),
        );
        r.register(
            "etcd_server_has_leader",
            "Whether or not a leader exists. 1 is existence, 0 is not",
            m.has_leader.clone(),
        );
        r.register(
            "etcd_server_is_leader",
            "Whether or not this member is a leader. 1 if is, 0 otherwise",
            m.is_leader.clone(),
        );
        r.register(
            "etcd_server_leader_changes_seen",
            "The number of leader changes seen",
            m.leader_changes.clone(),
        );
        r.register(
            "etcd_server_proposals_pending",
            "The current number of pending proposals to commit",
            m.proposals_pending.clone(),
        );
        r.register(
            "etcd_network_peer_round_trip_time_seconds",
            "Round-Trip-Time histogram between peers",
            m.peer_rtt.clone(),
        );
        r.register(
            "etcd_network_peer_sent_bytes",
            "The total number of bytes sent to peers",
            m.peer_sent.clone(),
        );
        r.register(
            "etcd_network_peer_received_bytes",
            "The total number of bytes received from peers",
            m.peer_received.clone(),
        );
        r.register(
            "etcd_network_peer_sent_failures",
            "The total number of send failures from peers",
            m.peer_sent_failures.clone(),
        );
        r.register(
            "etcd_server_snapshot_apply_in_progress_total",
            "1 if the server is applying the incoming snapshot. 0 if none",
            m.snapshot_apply_in_progress.clone(),
        );
        r.register(
            "etcd_mvcc_put",
            "Total number of puts seen by this member",
            m.mvcc_put.clone(),
        );
        r.register(
            "etcd_mvcc_range",
            "Total number of ranges seen by this member",
            m.mvcc_range.clone(),
        );
        r.register(
            "etcd_mvcc_txn",
            "Total number of txns seen by this member",
            m.mvcc_txn.clone(),
        );
        r.register(
            "etcd_mvcc_delete",
            "Total number of deletes seen by this member",
            m.mvcc_delete.clone(),
        );
        r.register(
            "grpc_server_handled",
            "Total number of RPCs completed on the server, regardless of success or failure",
            m.grpc_handled.clone(),
        );
        r.register(
            "etcd_debugging_lease_granted",
            "The total number of granted leases",
            m.lease_granted.clone(),
        );
        r.register(
            "etcd_debugging_lease_revoked",
            "The total number of revoked leases",
            m.lease_revoked.clone(),
        );
        r.register(
            "etcd_debugging_lease_renewed",
            "The number of renewed leases seen by the leader",
            m.lease_renewed.clone(),
        );
        r.register(
            "keel_lease_count",
            "The number of live leases",
            m.lease_count.clone(),
        );
        r.register(
            "etcd_debugging_mvcc_watcher_total",
            "Total number of watchers",
            m.watchers.clone(),
        );
        r.register(
            "etcd_debugging_mvcc_slow_watcher_total",
            "Total number of unsynced slow watchers",
            m.slow_watchers.clone(),
        );
        r.register(
            "etcd_debugging_mvcc_pending_events_total",
            "Total number of pending events to be sent",
            m.pending_events.clone(),
        );
        r.register(
            "etcd_debugging_mvcc_watch_stream_total",
            "Total number of watch streams",
            m.watch_streams.clone(),
        );
        r.register_collector(Box::new(keel_process::ProcessCollector));
        r.register_collector(Box::new(keel_process::faults::FaultMetrics(
            keel_process::faults::process(),
        )));
        Metrics { registry, ..m }
    }

    /// Renders every metric in the Prometheus (OpenMetrics) text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}
