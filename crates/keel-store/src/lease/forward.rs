//! Keepalives and TimeToLive on any member: the leader's lessor answers them.
//!
//! Only the leader keeps deadlines (see the [module docs](super)), so a member that does not
//! lead forwards each keepalive (`LeaseRenew`) and each TimeToLive (`LeaseTimeToLive`) to the
//! leader, one unary call per request on the peer connection its forwarded writes use, as
//! etcd forwards them to its leader's peer URL (`/leases`, `/leases/internal`). The rules are
//! etcd's (`LeaseRenew`, `LeaseTimeToLive` of its `v3_server.go`), within the request timeout:
//!
//! - the leader answers from its lessor; a member that leads but does not keep deadlines yet
//!   (just elected, its lessor not promoted yet) refuses with "not primary", and the request
//!   is asked again after [`RETRY`];
//! - a member without a leader waits for one; none in the whole request timeout is
//!   `etcdserver: no leader`;
//! - a leader that cannot be reached (killed, partitioned or just deposed) is asked again
//!   every [`RETRY`] (each call bounded by an election timeout), the new leader as soon as this
//!   member knows it; still no answer at the request timeout is `etcdserver: request timed
//!   out`;
//! - an unknown lease is [`EtcdError::LeaseNotFound`], which the Lease service answers as
//!   etcd does (a keepalive with TTL 0, a TimeToLive with TTL -1).
//!
//! Asking again is safe: a renewal sets a deadline (twice is once), TimeToLive only reads.

use std::future::Future;
use std::time::{Duration, Instant};

use keel_proto::etcdserverpb::LeaseTimeToLiveResponse;
use keel_proto::raftpb::{self, LeaseRefusal, lease_renew_response, lease_time_to_live_response};

use super::{LeaseError, Lessor};
use crate::error::EtcdError;
use crate::metrics::Metrics;
use crate::raft::forward::LeaderClient;
use crate::server::Store;

/// How long a refused or failed lease request waits before it is asked again (etcd's
/// throttle in `LeaseRenew`).
pub const RETRY: Duration = Duration::from_millis(50);

/// Who answers a lease request.
enum Whom {
    /// This member leads: its own lessor.
    Here,
    /// The leader's lessor, over its peer connection.
    Leader(LeaderClient),
}

/// Renews lease `id` on the leader's lessor; returns its TTL.
pub async fn renew(store: &Store, id: i64) -> Result<i64, EtcdError> {
    ask_leader(store, |whom| async move {
        match whom {
            Whom::Here => store.lessor_at(|l, now| renew_here(l, store.metrics(), id, now)),
            Whom::Leader((mut client, header)) => {
                let req = raftpb::LeaseRenewRequest {
                    header: Some(header),
                    id,
                };
                let resp = store
                    .metrics()
                    .exchange(header.to, req, |r| client.lease_renew(r))
                    .await
                    .map_err(|_| LeaseError::NotPrimary)?;
                match resp.result {
                    Some(lease_renew_response::Result::Ttl(ttl)) => Ok(ttl),
                    Some(lease_renew_response::Result::Refused(r)) => Err(refusal_from(r)),
                    None => Err(LeaseError::NotPrimary),
                }
            }
        }
    })
    .await
}

/// Lease `id`'s remaining and granted TTL (and its keys when `keys`) from the leader's
/// lessor, without a header.
pub async fn time_to_live(
    store: &Store,
    id: i64,
    keys: bool,
) -> Result<LeaseTimeToLiveResponse, EtcdError> {
    ask_leader(store, |whom| async move {
        match whom {
            Whom::Here => {
                // Keys attached by every write acknowledged before the request.
                store
                    .read_barrier()
                    .await
                    .map_err(|_| LeaseError::NotPrimary)?;
                store.lessor_at(|l, now| time_to_live_here(l, id, keys, now))
            }
            Whom::Leader((mut client, header)) => {
                let req = raftpb::LeaseTimeToLiveRequest {
                    header: Some(header),
                    id,
                    keys,
                };
                let resp = store
                    .metrics()
                    .exchange(header.to, req, |r| client.lease_time_to_live(r))
                    .await
                    .map_err(|_| LeaseError::NotPrimary)?;
                match resp.result {
                    Some(lease_time_to_live_response::Result::Found(found)) => Ok(found),
                    Some(lease_time_to_live_response::Result::Refused(r)) => Err(refusal_from(r)),
                    None => Err(LeaseError::NotPrimary),
                }
            }
        }
    })
    .await
}

/// Runs `ask` on whoever leads until it answers, by the rules of the module docs.
async fn ask_leader<'a, T, F, Fut>(store: &'a Store, ask: F) -> Result<T, EtcdError>
where
    F: Fn(Whom) -> Fut,
    Fut: Future<Output = Result<T, LeaseError>> + 'a,
{
    let config = store.config();
    let deadline = tokio::time::Instant::now() + config.request_timeout();
    let per_call = Duration::from_millis(config.election_timeout);
    let mut led = false;
    loop {
        let whom = if store.leader() == store.member_id() {
            Some(Whom::Here)
        } else {
            store.leader_peer().transpose()?.map(Whom::Leader)
        };
        if let Some(whom) = whom {
            led = true;
            let call_deadline = deadline.min(tokio::time::Instant::now() + per_call);
            match tokio::time::timeout_at(call_deadline, ask(whom)).await {
                Ok(Ok(answer)) => return Ok(answer),
                Ok(Err(LeaseError::NotFound)) => return Err(EtcdError::LeaseNotFound),
                Ok(Err(_)) | Err(_) => {}
            }
        }
        let now = tokio::time::Instant::now();
        if now + RETRY >= deadline {
            return Err(if led {
                EtcdError::Timeout
            } else {
                EtcdError::NoLeader
            });
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// The leader's answer at lease time `now` to a forwarded keepalive; `leads` says whether
/// this member leads.
pub fn answer_renew(
    lessor: &mut Lessor,
    metrics: &Metrics,
    leads: bool,
    req: &raftpb::LeaseRenewRequest,
    now: Instant,
) -> raftpb::LeaseRenewResponse {
    let renewed = if leads {
        renew_here(lessor, metrics, req.id, now)
    } else {
        Err(LeaseError::NotPrimary)
    };
    let result = match renewed {
        Ok(ttl) => lease_renew_response::Result::Ttl(ttl),
        Err(e) => lease_renew_response::Result::Refused(refusal(e).into()),
    };
    raftpb::LeaseRenewResponse {
        result: Some(result),
    }
}

/// The leader's answer at lease time `now` to a forwarded TimeToLive; `leads` says whether
/// this member leads.
pub fn answer_time_to_live(
    lessor: &Lessor,
    leads: bool,
    req: &raftpb::LeaseTimeToLiveRequest,
    now: Instant,
) -> raftpb::LeaseTimeToLiveResponse {
    let found = if leads {
        time_to_live_here(lessor, req.id, req.keys, now)
    } else {
        Err(LeaseError::NotPrimary)
    };
    let result = match found {
        Ok(found) => lease_time_to_live_response::Result::Found(found),
        Err(e) => lease_time_to_live_response::Result::Refused(refusal(e).into()),
    };
    raftpb::LeaseTimeToLiveResponse {
        result: Some(result),
    }
}

/// The leader's renewal of lease `id` at lease time `now` (counted in
/// `etcd_debugging_lease_renewed_total`).
fn renew_here(
    lessor: &mut Lessor,
    metrics: &Metrics,
    id: i64,
    now: Instant,
) -> Result<i64, LeaseError> {
    let ttl = lessor.renew(id, now)?;
    metrics.lease_renewed.inc();
    Ok(ttl)
}

/// The leader's TimeToLive of lease `id` at lease time `now`, without a header.
fn time_to_live_here(
    lessor: &Lessor,
    id: i64,
    keys: bool,
    now: Instant,
) -> Result<LeaseTimeToLiveResponse, LeaseError> {
    let status = lessor.time_to_live(id, now)?;
    Ok(LeaseTimeToLiveResponse {
        header: None,
        id,
        ttl: status.ttl,
        granted_ttl: status.granted_ttl,
        keys: if keys { status.keys } else { Vec::new() },
    })
}

fn refusal(e: LeaseError) -> LeaseRefusal {
    match e {
        LeaseError::NotFound => LeaseRefusal::NotFound,
        _ => LeaseRefusal::NotPrimary,
    }
}

fn refusal_from(r: i32) -> LeaseError {
    match LeaseRefusal::try_from(r) {
        Ok(LeaseRefusal::NotFound) => LeaseError::NotFound,
        _ => LeaseError::NotPrimary,
    }
}
