//! The etcd `Lease` service: grants and revokes go through the log; keepalives, TimeToLive and
//! Leases are answered by the leader's lessor without touching the log, as etcd does.
//!
//! Wire contract (etcd 3.5: `server/etcdserver/api/v3rpc/lease.go`, `v3_server.go`,
//! `server/lease/lessor.go`): a grant without an ID gets a server-chosen positive ID (etcd's
//! request-ID generator: member bits, a millisecond timestamp and a counter), decided before
//! proposing; a TTL under the minimum is raised to it; a TTL above 9,000,000,000 s is
//! `OutOfRange "etcdserver: too large lease TTL"`; an ID in use is `FailedPrecondition
//! "etcdserver: lease already exists"`; revoking an unknown lease is `NotFound "etcdserver:
//! requested lease not found"`; a keepalive of an unknown lease answers TTL 0 and TimeToLive of
//! one answers TTL -1, both without error.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use futures::{Stream, StreamExt};
use keel_proto::etcdserverpb::lease_server::Lease;
use keel_proto::etcdserverpb::{
    LeaseGrantRequest, LeaseGrantResponse, LeaseKeepAliveRequest, LeaseKeepAliveResponse,
    LeaseLeasesRequest, LeaseLeasesResponse, LeaseRevokeRequest, LeaseRevokeResponse, LeaseStatus,
    LeaseTimeToLiveRequest, LeaseTimeToLiveResponse,
};
use tonic::{Request, Response, Status, Streaming};

use super::error::EtcdError;
use super::unary;
use crate::lease::{LeaseError, LeaseOp, LeaseProposal, MAX_LEASE_TTL};
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
        self.store.read_barrier().await?;
        let status = self
            .store
            .lessor(|l| l.time_to_live(req.id, Instant::now()));
        let header = Some(self.store.header(self.store.mvcc().current_revision()));
        Ok(match status {
            Some(s) => LeaseTimeToLiveResponse {
                header,
                id: req.id,
                ttl: s.ttl,
                granted_ttl: s.granted_ttl,
                keys: if req.keys { s.keys } else { Vec::new() },
            },
            None => LeaseTimeToLiveResponse {
                header,
                id: req.id,
                ttl: -1,
                ..Default::default()
            },
        })
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
fn keep_alive(
    store: &Store,
    req: LeaseKeepAliveRequest,
) -> Result<LeaseKeepAliveResponse, EtcdError> {
    let header = Some(store.header(store.mvcc().current_revision()));
    let ttl = match store.lessor(|l| l.renew(req.id, Instant::now())) {
        Ok(ttl) => {
            store.metrics().lease_renewed.inc();
            ttl
        }
        Err(LeaseError::NotFound) => 0,
        Err(e) => return Err(e.into()),
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
        let responses = request
            .into_inner()
            .map(move |req| keep_alive(&store, req?).map_err(Status::from));
        Ok(Response::new(Box::pin(responses)))
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
    use super::*;

    #[test]
    fn generated_ids_are_positive_unique_and_carry_the_member() {
        let g = IdGenerator::new(0xabcd_1234_5678_9a7b);
        let a = g.next();
        let b = g.next();
        assert!(a > 0 && b > 0 && a != b);
        // The member's low 16 bits, without the sign bit.
        assert_eq!((a as u64) >> 48, 0x1a7b);
    }
}
