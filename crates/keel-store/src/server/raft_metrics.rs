//! The store's view of Raft, mirrored from openraft's metrics: term, leader (with etcd's
//! check-quorum rules, see [`crate::raft::leadership`]), voters, whether this member is a
//! learner or was removed, the peers' URLs and a stopped Raft core, with the matching gauges
//! and etcd's log line for each change of leader; refreshed when openraft's server state
//! (term, leader, membership) changes, when its core stops, and every heartbeat interval (so a
//! member notices its own removal, once applied, within a heartbeat interval). Progress (log,
//! commit and apply indexes) changes with every write and is read where it is needed instead
//! ([`Store::committed_index`]).

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
    ///
    /// openraft publishes its data metrics, then its server metrics, then the whole: read in
    /// the other order, the data read here is at least as new as the server state.
    pub(super) fn mirror_raft_metrics(&self) {
        let whole = self.raft.metrics();
        let (running, current_term) = {
            let m = whole.borrow_watched();
            (m.running_state.clone(), m.current_term)
        };
        if let Err(fatal @ (Fatal::StorageError(_) | Fatal::Panicked)) = &running {
            self.fail(fatal.to_string());
        }
        let server = self.raft.server_metrics();
        let m = server.borrow_watched();
        let quorum_acked = self.raft.data_metrics().borrow_watched().last_quorum_acked;
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
        // The server metrics carry the flushed vote, whose term trails openraft's own by an
        // fsync after an election; the whole metrics carry that term, one round late at worst.
        let term = m.vote.leader_id.term.max(current_term);
        self.term.store(term, Ordering::Relaxed);
        let now = Instant::now();
        let view = RaftView {
            leader: m.current_leader,
            term,
            voters,
            quorum_acked: quorum_acked
                .as_ref()
                .and_then(|t| now.checked_sub(openraft::Instant::elapsed(&**t))),
        };
        drop(m);
        let leader = self.leadership.leader(view, now).unwrap_or(0);
        let before = self.leader.swap(leader, Ordering::Relaxed);
        self.link.set_leader(leader);
        if leader != 0 && leader != before {
            self.metrics.leader_changes.inc();
        }
        log_leader_change(self.member_id, before, leader, term);
        self.metrics.has_leader.set(i64::from(leader != 0));
        self.metrics
            .is_leader
            .set(i64::from(leader == self.member_id));
    }

    /// The log index a quorum has committed, as this member knows it.
    pub fn committed_index(&self) -> u64 {
        let data = self.raft.data_metrics();
        let committed = data.borrow_watched().cluster_committed.map(|c| c.index);
        committed.unwrap_or(0)
    }
}

/// Logs this member's view of the leader changing from `before` to `after` (0: none) at
/// `term`, with etcd's raft messages (`raft.node: <id> elected leader <id> at term <n>`,
/// `lost leader`, `changed leader from`), which operators grep for.
fn log_leader_change(me: u64, before: u64, after: u64, term: u64) {
    match (before, after) {
        _ if before == after => {}
        (0, leader) => tracing::info!("raft.node: {me:x} elected leader {leader:x} at term {term}"),
        (lost, 0) => tracing::info!("raft.node: {me:x} lost leader {lost:x} at term {term}"),
        (from, to) => {
            tracing::info!(
                "raft.node: {me:x} changed leader from {from:x} to {to:x} at term {term}"
            )
        }
    }
}

/// Keeps the store's term/leader and Prometheus gauges in step with openraft's metrics, and
/// re-checks the leader every heartbeat interval (a lost quorum changes no metric).
///
/// It wakes on changes of openraft's server state only, not on each write's progress (which
/// would wake it several times per write batch, for nothing it mirrors).
pub(super) async fn track_raft_metrics(store: Arc<Store>) {
    let mut server = store.raft.server_metrics();
    let mut tick = tokio::time::interval(Duration::from_millis(store.config.heartbeat_interval));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        server.borrow_and_update();
        store.mirror_raft_metrics();
        tokio::select! {
            changed = server.changed() => if changed.is_err() {
                // The Raft core stopped: its last metrics say why.
                store.mirror_raft_metrics();
                return;
            },
            _ = tick.tick() => {}
        }
    }
}
