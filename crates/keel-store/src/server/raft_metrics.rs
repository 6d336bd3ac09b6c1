//! The store's view of Raft, mirrored from openraft's metrics: term, leader (with etcd's
//! check-quorum rules, see [`crate::raft::leadership`]), voters, whether this member is a
//! learner or was removed, the peers' URLs, the commit index and a stopped Raft core, with
//! the matching gauges; refreshed on every change and every heartbeat interval.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use openraft::async_runtime::WatchReceiver;
use openraft::errors::Fatal;

use super::Store;
use crate::raft::leadership::RaftView;

impl Store {
    /// Copies openraft's view of term and leader (with etcd's check-quorum rules, see
    /// [`crate::raft::leadership`]) into the store and its gauges.
    pub(super) fn mirror_raft_metrics(&self, m: &openraft::RaftMetrics<crate::raft::KeelRaft>) {
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
}

/// Keeps the store's term/leader and Prometheus gauges in step with openraft's metrics, and
/// re-checks the leader every heartbeat interval (a lost quorum changes no metric).
pub(super) async fn track_raft_metrics(store: Arc<Store>) {
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
