//! The etcd `Lease` service: grants and revokes go through the log; keepalives and TimeToLive
//! are answered by the leader's lessor without touching the log (forwarded there by a
//! follower, see [`crate::lease::forward`]) and Leases by this member's, as etcd does.
//!
//! Wire contract (etcd 3.5: `server/etcdserver/api/v3rpc/lease.go`, `v3_server.go`,
//! `server/lease/lessor.go`): a grant without an ID gets a server-chosen positive ID (etcd's
//! request-ID generator: member bits, a millisecond timestamp and a counter), decided before
//! proposing; a TTL under the minimum is raised to it; a TTL above 9,000,000,000 s is
//! `OutOfRange "etcdserver: too large lease TTL"`; an ID in use is `FailedPrecondition
//! "etcdserver: lease already exists"`; revoking an unknown lease is `NotFound "etcdserver:
//! requested lease not found"`; a keepalive of an unknown lease answers TTL 0 and TimeToLive of
//! one answers TTL -1, both without error.

use keel_process::faults::{self, Fault};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use futures::{Stream, StreamExt};
use keel_proto::etcdserverpb::lease_server::Lease;
use keel_proto::etcdserverpb::{
    LeaseGrantRequest, LeaseGrantResponse, LeaseKeepAliveRequest, LeaseKeepAliveResponse,
    LeaseLeasesRequest, LeaseLeasesResponse, LeaseRevokeRequest, LeaseRevokeResponse, LeaseStatus,
    LeaseTimeToLiveRequest, LeaseTimeToLiveResponse,
};
use tonic::{Request, Response, Status, Streaming};

use super::require_leader::{requires_leader, until_leader_lost};
use super::unary;
use crate::error::EtcdError;
use crate::lease::{LeaseOp, LeaseProposal, MAX_LEASE_TTL, forward};
use crate::raft::{Applied, ProposalOp};
use crate::server::Store;

const SERVICE: &str = "etcdserverpb.Lease";

/// What a LeaseGrant costs against the backend quota (one small lease record).
const GRANT_COST: usize = 32;

/// etcd's `idutil.Generator`: 16 member bits, then a 40-bit millisecond timestamp and an 8-bit
/// counter that carries into the timestamp.
struct IdGenerator {
    prefix: u64,
    suffix: AtomicU64,
}

impl IdGenerator {
    const SUFFIX_BITS: u32 = 48;

    fn new(member_id: u64) -> IdGenerator {
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        IdGenerator {
            prefix: (member_id & 0xffff) << Self::SUFFIX_BITS,
            suffix: AtomicU64::new((millis & ((1 << 40) - 1)) << 8),
        }
    }

    /// The next ID, positive as etcd's lease IDs are.
    fn next(&self) -> i64 {
        let suffix = self.suffix.fetch_add(1, Ordering::Relaxed) + 1;
        let id = self.prefix | (suffix & ((1 << Self::SUFFIX_BITS) - 1));
        (id & (i64::MAX as u64)) as i64
    }
}

/// The Lease service of one member.
pub struct LeaseService {
    store: Arc<Store>,
    ids: IdGenerator,
}

/// The stream of keepalive responses.
pub type KeepAliveStream =
    Pin<Box<dyn Stream<Item = Result<LeaseKeepAliveResponse, Status>> + Send + 'static>>;

impl LeaseService {
    /// Serves Lease requests on `store`.
    pub fn new(store: Arc<Store>) -> Self {
        let ids = IdGenerator::new(store.member_id());
        LeaseService { store, ids }
    }

    async fn grant(&self, mut req: LeaseGrantRequest) -> Result<LeaseGrantResponse, EtcdError> {
        if req.ttl > MAX_LEASE_TTL {
            return Err(EtcdError::LeaseTtlTooLarge);
        }
        self.store.check_quota(GRANT_COST).await?;
        if req.id == 0 {
            req.id = loop {
                let id = self.ids.next();
                if id != 0 && !self.store.lessor(|l| l.contains(id)) {
                    break id;
                }
            };
        }
        match self.propose(LeaseOp::Grant(req)).await? {
            Applied::LeaseGrant(mut resp) => {
                self.store.fill(&mut resp.header);
                Ok(resp)
            }
            other => Err(unexpected(other)),
        }
    }

    async fn revoke(&self, req: LeaseRevokeRequest) -> Result<LeaseRevokeResponse, EtcdError> {
        match self.propose(LeaseOp::Revoke(req)).await? {
            Applied::LeaseRevoke(mut resp) => {
                self.store.fill(&mut resp.header);
                Ok(resp)
            }
            other => Err(unexpected(other)),
        }
    }

    async fn time_to_live(
        &self,
        req: LeaseTimeToLiveRequest,
    ) -> Result<LeaseTimeToLiveResponse, EtcdError> {
        let found = forward::time_to_live(&self.store, req.id, req.keys).await;
        let header = Some(self.store.header(self.store.mvcc().current_revision()));
        match found {
            Ok(found) => Ok(LeaseTimeToLiveResponse { header, ..found }),
            Err(EtcdError::LeaseNotFound) => Ok(LeaseTimeToLiveResponse {
                header,
                id: req.id,
                ttl: -1,
                ..Default::default()
            }),
            Err(e) => Err(e),
        }
    }

    async fn leases(&self) -> Result<LeaseLeasesResponse, EtcdError> {
        let ids = self.store.lessor(|l| l.ids());
        Ok(LeaseLeasesResponse {
            header: Some(self.store.header(self.store.mvcc().current_revision())),
            leases: ids.into_iter().map(|id| LeaseStatus { id }).collect(),
        })
    }

    async fn propose(&self, op: LeaseOp) -> Result<Applied, EtcdError> {
        self.store
            .propose(ProposalOp::Lease(LeaseProposal { op: Some(op) }))
            .await
    }
}

/// Answers one keepalive: the header is taken before the renewal, as etcd does, so a lease
/// revoked at some revision is never reported renewed at a later one.
async fn keep_alive(
    store: &Store,
    req: LeaseKeepAliveRequest,
) -> Result<LeaseKeepAliveResponse, EtcdError> {
    faults::process().pause(Fault::LeaseKeepaliveDelay).await;
    let header = Some(store.header(store.mvcc().current_revision()));
    let ttl = match forward::renew(store, req.id).await {
        Ok(ttl) => ttl,
        Err(EtcdError::LeaseNotFound) => 0,
        Err(e) => return Err(e),
    };
    Ok(LeaseKeepAliveResponse {
        header,
        id: req.id,
        ttl,
    })
}

fn unexpected(applied: Applied) -> EtcdError {
    EtcdError::Internal(format!("unexpected apply result {applied:?}"))
}

#[tonic::async_trait]
impl Lease for LeaseService {
    async fn lease_grant(
        &self,
        request: Request<LeaseGrantRequest>,
    ) -> Result<Response<LeaseGrantResponse>, Status> {
        unary(
            &self.store,
            SERVICE,
            "LeaseGrant",
            self.grant(request.into_inner()),
        )
        .await
    }

    async fn lease_revoke(
        &self,
        request: Request<LeaseRevokeRequest>,
    ) -> Result<Response<LeaseRevokeResponse>, Status> {
        unary(
            &self.store,
            SERVICE,
            "LeaseRevoke",
            self.revoke(request.into_inner()),
        )
        .await
    }

    type LeaseKeepAliveStream = KeepAliveStream;

    async fn lease_keep_alive(
        &self,
        request: Request<Streaming<LeaseKeepAliveRequest>>,
    ) -> Result<Response<Self::LeaseKeepAliveStream>, Status> {
        let store = self.store.clone();
        let require_leader = requires_leader(request.metadata());
        // One request at a time, in order, as etcd's keepalive loop answers them.
        let responses = request.into_inner().then(move |req| {
            let store = store.clone();
            async move { keep_alive(&store, req?).await.map_err(Status::from) }
        });
        Ok(Response::new(if require_leader {
            Box::pin(until_leader_lost(self.store.clone(), responses))
        } else {
            Box::pin(responses)
        }))
    }

    async fn lease_time_to_live(
        &self,
        request: Request<LeaseTimeToLiveRequest>,
    ) -> Result<Response<LeaseTimeToLiveResponse>, Status> {
        unary(
            &self.store,
            SERVICE,
            "LeaseTimeToLive",
            self.time_to_live(request.into_inner()),
        )
        .await
    }

    async fn lease_leases(
        &self,
        _request: Request<LeaseLeasesRequest>,
    ) -> Result<Response<LeaseLeasesResponse>, Status> {
        unary(&self.store, SERVICE, "LeaseLeases", self.leases()).await
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use clap::Parser;
    use keel_proto::etcdserverpb::kv_server::Kv;
    use keel_proto::etcdserverpb::{PutRequest, RangeRequest, RequestOp, TxnRequest, request_op};

    use super::*;
    use crate::api::kv::KvService;
    use crate::config::Config;
    use crate::lease::{CHECKPOINT_INTERVAL, LeaseClock, checkpoint_allowance};

    /// How long a test waits for a condition before it fails: far more than any needs.
    const PATIENCE: Duration = Duration::from_secs(60);

    #[test]
    fn generated_ids_are_positive_unique_and_carry_the_member() {
        let g = IdGenerator::new(0xabcd_1234_5678_9a7b);
        let a = g.next();
        let b = g.next();
        assert!(a > 0 && b > 0 && a != b);
        // The member's low 16 bits, without the sign bit.
        assert_eq!((a as u64) >> 48, 0x1a7b);
    }

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        config: Config,
    }

    /// Opens the store in `dir` with its leases timed by a manual clock reading `start`: lease
    /// time moves only when a test moves it ([`advance`]).
    async fn open(dir: &std::path::Path, start: Instant) -> Arc<Store> {
        let config = Cli::try_parse_from([
            "keel",
            "--data-dir",
            dir.to_str().unwrap(),
            "--snapshot-count",
            "100000",
            // Tests run side by side: no fixed peer port.
            "--listen-peer-urls",
            "http://127.0.0.1:0",
        ])
        .unwrap()
        .config;
        Store::open_with_lease_clock(config, LeaseClock::manual(start))
            .await
            .unwrap_or_else(|e| panic!("opening the store: {e}"))
    }

    /// Moves lease time forward by `by`, then waits until the lease loop has made its pass at
    /// the new time (every expiry and checkpoint due by then applied).
    async fn advance(store: &Store, by: Duration) {
        let clock = store.lease_clock();
        clock.advance(by);
        let at = clock.now();
        tokio::time::timeout(PATIENCE, clock.pass_at(at))
            .await
            .unwrap_or_else(|_| panic!("no lease loop pass {by:?} later within {PATIENCE:?}"));
    }

    /// Shuts `store` (its last handle) down and waits until its backend is released, so its
    /// data directory can be opened again.
    async fn close(store: Arc<Store>) {
        let released = store.backend_released();
        store.shutdown().await;
        drop(store);
        tokio::time::timeout(PATIENCE, released)
            .await
            .unwrap_or_else(|_| panic!("the backend was still held {PATIENCE:?} after shutdown"));
    }

    fn put(key: &str, lease: i64) -> PutRequest {
        PutRequest {
            key: key.into(),
            value: b"v".to_vec(),
            lease,
            ..Default::default()
        }
    }

    async fn keys(kv: &KvService) -> Vec<(String, i64)> {
        let r = kv
            .range(Request::new(RangeRequest {
                key: vec![0],
                range_end: vec![0],
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_inner();
        r.kvs
            .into_iter()
            .map(|kv| (String::from_utf8(kv.key).unwrap(), kv.lease))
            .collect()
    }

    async fn ttl(svc: &LeaseService, id: i64, keys: bool) -> LeaseTimeToLiveResponse {
        svc.lease_time_to_live(Request::new(LeaseTimeToLiveRequest { id, keys }))
            .await
            .unwrap()
            .into_inner()
    }

    fn grant(id: i64, ttl: i64) -> Request<LeaseGrantRequest> {
        Request::new(LeaseGrantRequest { id, ttl })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lease_service_as_etcd() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), Instant::now()).await;
        let svc = LeaseService::new(store.clone());
        let kv = KvService::new(store.clone());

        let g = svc.lease_grant(grant(0, 1)).await.unwrap().into_inner();
        assert!(g.id > 0);
        assert_eq!(g.ttl, 2, "etcd's minimum TTL with default flags");
        let g = svc.lease_grant(grant(42, 100)).await.unwrap().into_inner();
        assert_eq!((g.id, g.ttl), (42, 100));
        let e = svc.lease_grant(grant(42, 100)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::FailedPrecondition);
        assert_eq!(e.message(), "etcdserver: lease already exists");
        let e = svc
            .lease_grant(grant(7, MAX_LEASE_TTL + 1))
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::OutOfRange);
        assert_eq!(e.message(), "etcdserver: too large lease TTL");

        for k in ["k1", "k2"] {
            kv.put(Request::new(put(k, 42))).await.unwrap();
        }
        let txn_put = |key: &str, lease| TxnRequest {
            success: vec![RequestOp {
                request: Some(request_op::Request::RequestPut(put(key, lease))),
            }],
            ..Default::default()
        };
        kv.txn(Request::new(txn_put("k3", 42))).await.unwrap();
        let e = kv.txn(Request::new(txn_put("k4", 999))).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::NotFound);
        assert_eq!(e.message(), "etcdserver: requested lease not found");
        let e = kv.put(Request::new(put("k4", 999))).await.unwrap_err();
        assert_eq!(e.message(), "etcdserver: requested lease not found");
        // Overwriting without a lease detaches; ignore_lease keeps the lease.
        kv.put(Request::new(put("k2", 0))).await.unwrap();
        kv.put(Request::new(PutRequest {
            ignore_lease: true,
            ..put("k1", 0)
        }))
        .await
        .unwrap();
        // No lease time passed since the grant.
        let t = ttl(&svc, 42, true).await;
        assert_eq!((t.granted_ttl, t.ttl), (100, 100));
        assert_eq!(t.keys, vec![b"k1".to_vec(), b"k3".to_vec()]);
        assert!(ttl(&svc, 42, false).await.keys.is_empty());
        // etcd truncates the remaining seconds.
        advance(&store, Duration::from_millis(1500)).await;
        assert_eq!(ttl(&svc, 42, false).await.ttl, 98);
        let t = ttl(&svc, 5, true).await;
        assert_eq!((t.id, t.ttl, t.granted_ttl), (5, -1, 0));

        let leases = svc
            .lease_leases(Request::new(LeaseLeasesRequest {}))
            .await
            .unwrap()
            .into_inner();
        let mut ids: Vec<i64> = leases.leases.iter().map(|l| l.id).collect();
        ids.sort();
        assert_eq!(ids, vec![42, g_id(&store, 42)]);

        let before = store.mvcc().current_revision();
        let r = svc
            .lease_revoke(Request::new(LeaseRevokeRequest { id: 42 }))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.header.unwrap().revision, before + 1, "one revision");
        assert_eq!(keys(&kv).await, vec![("k2".to_string(), 0)]);
        let e = svc
            .lease_revoke(Request::new(LeaseRevokeRequest { id: 42 }))
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::NotFound);
        assert_eq!(e.message(), "etcdserver: requested lease not found");
        assert_eq!(ttl(&svc, 42, true).await.ttl, -1);
        assert_eq!(store.metrics().lease_granted.get(), 2);
        assert_eq!(store.metrics().lease_revoked.get(), 1);
        assert_eq!(store.metrics().lease_count.get(), 1);
        store.shutdown().await;
    }

    /// The ID of the one lease that is not `other`.
    fn g_id(store: &Store, other: i64) -> i64 {
        store.lessor(|l| l.ids().into_iter().find(|&id| id != other).unwrap())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn keepalive_stream_answers_ttl_or_zero() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), Instant::now()).await;
        let svc = LeaseService::new(store.clone());
        svc.lease_grant(grant(9, 30)).await.unwrap();
        let rev = store.mvcc().current_revision();
        let out = keep_alive(&store, LeaseKeepAliveRequest { id: 9 })
            .await
            .unwrap();
        assert_eq!((out.id, out.ttl), (9, 30));
        assert_eq!(out.header.unwrap().revision, rev);
        let out = keep_alive(&store, LeaseKeepAliveRequest { id: 10 })
            .await
            .unwrap();
        assert_eq!((out.id, out.ttl), (10, 0));
        assert_eq!(store.metrics().lease_renewed.get(), 1);
        store.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn idle_leases_add_no_log_entries_and_a_renewal_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path(), Instant::now()).await;
        let svc = LeaseService::new(store.clone());
        for id in 1..=500 {
            svc.lease_grant(grant(id, 600)).await.unwrap();
        }
        // Three checkpoint passes; no lease's checkpoint is off by its allowance (60 s) yet.
        let before = store.last_log_index();
        for _ in 0..3 {
            advance(&store, CHECKPOINT_INTERVAL).await;
        }
        assert_eq!(store.last_log_index(), before, "entries with idle leases");
        // A renewed lease is checkpointed at the next pass, in one entry.
        keep_alive(&store, LeaseKeepAliveRequest { id: 7 })
            .await
            .unwrap();
        advance(&store, CHECKPOINT_INTERVAL).await;
        assert_eq!(
            store.last_log_index(),
            before + 1,
            "entries after a renewal"
        );
        store.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn expiry_deletes_keys_and_remaining_ttl_survives_restart() {
        let dir = tempfile::tempdir().unwrap();
        let granted = Instant::now();
        let store = open(dir.path(), granted).await;
        let svc = LeaseService::new(store.clone());
        let kv = KvService::new(store.clone());
        svc.lease_grant(grant(1, 2)).await.unwrap();
        svc.lease_grant(grant(2, 30)).await.unwrap();
        kv.put(Request::new(put("a", 1))).await.unwrap();
        kv.put(Request::new(put("b", 1))).await.unwrap();
        kv.put(Request::new(put("c", 2))).await.unwrap();
        let before = store.mvcc().current_revision();
        // Not a moment before its TTL is up, and at once when it is.
        advance(&store, Duration::from_millis(1999)).await;
        assert!(store.lessor(|l| l.contains(1)), "lease 1 expired early");
        advance(&store, Duration::from_millis(1)).await;
        assert!(!store.lessor(|l| l.contains(1)), "lease 1 never expired");
        assert_eq!(store.mvcc().current_revision(), before + 1, "one revision");
        assert_eq!(keys(&kv).await, vec![("c".to_string(), 2)]);
        assert_eq!(store.metrics().lease_revoked.get(), 1);
        // Lease 2 is checkpointed once its last checkpoint (the grant) is off by its allowance
        // (3 s), then lives on 1.5 s past it before the stop.
        let allowance = checkpoint_allowance(30);
        advance(&store, allowance - Duration::from_secs(2)).await;
        advance(&store, Duration::from_millis(1500)).await;
        let lived = store.lease_clock().now() - granted;
        let stopped = store.lease_clock().now();
        drop((svc, kv));
        close(store).await;

        // An hour of downtime, which is not counted.
        let store = open(dir.path(), stopped + Duration::from_secs(3600)).await;
        let svc = LeaseService::new(store.clone());
        let kv = KvService::new(store.clone());
        let t = ttl(&svc, 2, true).await;
        assert_eq!(t.granted_ttl, 30);
        assert_eq!(t.keys, vec![b"c".to_vec()]);
        // Resumed from the checkpoint at 3 s: 27 s. The rule: never less than at the stop, at
        // most one allowance and one pass (~1.25 s) more.
        assert_eq!(t.ttl, 27, "after {lived:?}");
        let left = 30.0 - lived.as_secs_f64();
        let got = t.ttl as f64;
        assert!(
            (left..=left + allowance.as_secs_f64() + 1.25).contains(&got),
            "ttl {got} after {lived:?}"
        );
        assert_eq!(ttl(&svc, 1, false).await.ttl, -1);
        assert_eq!(keys(&kv).await, vec![("c".to_string(), 2)]);
        // It expires when those 27 s are up.
        advance(&store, Duration::from_millis(26_999)).await;
        assert!(store.lessor(|l| l.contains(2)), "lease 2 expired early");
        advance(&store, Duration::from_millis(1)).await;
        assert!(keys(&kv).await.is_empty(), "lease 2 never expired");
        store.shutdown().await;
    }
}
