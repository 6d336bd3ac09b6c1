//! The async shell of the lessor: the leader's expiry and checkpoint loop.
//!
//! Every [`TICK`] the loop makes the lessor primary while this member leads (demoting it
//! otherwise), proposes the revocation of the leases whose deadline passed (at most
//! [`REVOKE_RATE`] a second, in one entry per tick, each lease deleted in its own revision),
//! and every [`CHECKPOINT_INTERVAL`] proposes the checkpoint of remaining TTLs the lessor says
//! is due. All decisions are the [`Lessor`](super::Lessor)'s; this module only moves them into
//! the log. Times are the member's [`LeaseClock`](super::LeaseClock)'s, to which each finished
//! pass is reported ([`LeaseClock::pass_at`](super::LeaseClock::pass_at)).

use std::sync::Weak;
use std::time::{Duration, Instant};

use tokio::time::MissedTickBehavior;

use super::{
    CHECKPOINT_INTERVAL, LeaseCheckpoints, LeaseExpire, LeaseOp, LeaseProposal,
    MAX_CHECKPOINT_BATCH, REVOKE_RATE,
};
use crate::raft::ProposalOp;
use crate::server::Store;

/// How often the leader looks for expired leases.
pub const TICK: Duration = Duration::from_millis(250);

/// Expired leases revoked per tick at most.
const REVOKES_PER_TICK: usize = REVOKE_RATE * TICK.as_millis() as usize / 1000;

/// Runs the loop until the store is dropped; `started` is the lease time it starts at (the
/// first checkpoint pass comes one [`CHECKPOINT_INTERVAL`] later).
pub async fn run(store: Weak<Store>, started: Instant) {
    let mut ticker = tokio::time::interval(TICK);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut last_checkpoint = started;
    loop {
        ticker.tick().await;
        let Some(store) = store.upgrade() else {
            return;
        };
        let leads = store.leader() == store.member_id();
        let (now, checkpoint_due, expired, checkpoints) = store.lessor_at(|l, now| {
            let checkpoint_due = now.duration_since(last_checkpoint) >= CHECKPOINT_INTERVAL;
            if !leads {
                if l.is_primary() {
                    l.demote();
                }
                return (now, checkpoint_due, Vec::new(), Vec::new());
            }
            l.promote(now);
            let expired = l.expired(now, REVOKES_PER_TICK);
            let checkpoints = if checkpoint_due {
                l.checkpoints(now, MAX_CHECKPOINT_BATCH)
            } else {
                Vec::new()
            };
            (now, checkpoint_due, expired, checkpoints)
        });
        if checkpoint_due {
            last_checkpoint = now;
        }
        if !expired.is_empty() {
            let count = expired.len();
            let op = LeaseOp::Expire(LeaseExpire { ids: expired });
            if let Err(e) = propose(&store, op).await {
                tracing::warn!(error = %e, leases = count, "proposing the revocation of expired leases failed");
            }
        }
        if !checkpoints.is_empty() {
            let ids: Vec<i64> = checkpoints.iter().map(|c| c.id).collect();
            let op = LeaseOp::Checkpoint(LeaseCheckpoints { checkpoints });
            if let Err(e) = propose(&store, op).await {
                tracing::warn!(error = %e, leases = ids.len(), "proposing a lease checkpoint failed");
                store.lessor(|l| l.checkpoint_failed(ids));
            }
        }
        store.lease_clock().pass_finished(now);
    }
}

async fn propose(store: &Store, op: LeaseOp) -> Result<(), crate::error::EtcdError> {
    store
        .propose(ProposalOp::Lease(LeaseProposal { op: Some(op) }))
        .await
        .map(|_| ())
}
