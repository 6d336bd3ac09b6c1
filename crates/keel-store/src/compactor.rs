//! Auto compaction (`--auto-compaction-mode` / `--auto-compaction-retention`), as etcd does it.
//!
//! Periodic mode samples the revision at a fixed pace and compacts to the revision seen one
//! retention window ago (checking every hour for windows of an hour or more, else every
//! window); revision mode compacts to `current - retention` every five minutes.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use keel_proto::etcdserverpb::CompactionRequest;

use crate::config::Retention;
use crate::raft::ProposalOp;
use crate::server::Store;

/// Runs the compactor until the process ends (returns at once when compaction is off).
pub async fn run(store: Arc<Store>) {
    let Ok(Some(retention)) = store.config().retention() else {
        return;
    };
    match retention {
        Retention::Revisions(keep) => {
            let mut tick = tokio::time::interval(Duration::from_secs(300));
            loop {
                tick.tick().await;
                let target = store.mvcc().current_revision() - keep;
                compact(&store, target).await;
            }
        }
        Retention::Period(window) => {
            // Sample ten times per window; compact to the oldest sample once it is a window old.
            let pace = window / 10;
            let check_every = window.min(Duration::from_secs(3600));
            let mut samples: VecDeque<i64> = VecDeque::new();
            let mut tick = tokio::time::interval(pace.max(Duration::from_millis(100)));
            let mut since_check = Duration::ZERO;
            loop {
                tick.tick().await;
                samples.push_back(store.mvcc().current_revision());
                if samples.len() > 11 {
                    samples.pop_front();
                }
                since_check += pace;
                if samples.len() == 11 && since_check >= check_every {
                    since_check = Duration::ZERO;
                    compact(&store, samples[0]).await;
                }
            }
        }
    }
}

/// Compacts up to `revision` if this member leads (only the leader compacts, as in etcd).
async fn compact(store: &Store, revision: i64) {
    if store.leader() != store.member_id() || revision <= store.mvcc().compact_revision().max(0) {
        return;
    }
    let req = CompactionRequest {
        revision,
        physical: false,
    };
    match store.propose(ProposalOp::Compaction(req)).await {
        Ok(_) => tracing::info!(revision, "auto compaction finished"),
        Err(e) => tracing::warn!(revision, error = %e, "auto compaction failed"),
    }
}
