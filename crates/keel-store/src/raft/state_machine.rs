//! openraft's state machine on the MVCC store.
//!
//! Each `apply` call takes every committed entry openraft hands over, applies them all in one
//! MVCC batch (one backend transaction, no fsync: the WAL is the truth), records the applied log
//! id in that same transaction, and only then answers the proposers, so a write is visible to
//! reads before it is acknowledged.
//!
//! What each entry does to the applied state is the [`Applier`]'s business (`apply`).
//!
//! The snapshot of a member is its backend made durable: building one fsyncs the backend at the
//! applied log id, after which openraft may purge the WAL behind it. A restart replays the WAL
//! from the backend's applied index.

use keel_process::faults::{self, Fault};
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use futures::{Stream, TryStreamExt};
use keel_mvcc::{BackendView, SnapshotRow, SnapshotTable, SnapshotWriter};
use openraft::storage::{EntryResponder, RaftSnapshotBuilder, RaftStateMachine};
use openraft::{EntryPayload, OptionalSend};

use super::apply::Applier;
use super::codec::{self, LogId};
use super::records::{META_APPLIED, META_MEMBERSHIP, StoredMembership, decode_membership};
use super::{Applied, KeelRaft};
use crate::data_dir::DataDir;

type SnapshotMeta = openraft::alias::SnapshotMetaOf<KeelRaft>;
type Snapshot = openraft::alias::SnapshotOf<KeelRaft, SnapshotData>;

/// A snapshot's data.
pub enum SnapshotData {
    /// A point-in-time view of this member's backend, whose records name the snapshot's log
    /// id and membership: what a leader streams to a member it has purged entries for.
    View(Arc<BackendView>),
    /// A backend file received from the leader, to be swapped in.
    Received(IncomingFile),
}

/// A snapshot file being received or waiting to be installed; removed if it never is (a
/// stream cut short, or a snapshot openraft declines as stale).
pub struct IncomingFile(PathBuf);

impl Drop for IncomingFile {
    fn drop(&mut self) {
        // After an install the file was renamed into place: nothing is left to remove.
        let _ = std::fs::remove_file(&self.0);
    }
}

impl std::fmt::Debug for SnapshotData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapshotData::View(_) => f.write_str("View"),
            SnapshotData::Received(file) => write!(f, "Received({})", file.0.display()),
        }
    }
}

/// A snapshot streamed by the leader, written to a new file in the member's `snap` directory
/// as it arrives; its log id and membership are read from the backend records it carries.
pub struct SnapshotReceiver {
    // Declared before the file, so it is closed before an unfinished file is removed.
    writer: Option<SnapshotWriter>,
    file: IncomingFile,
    rows: u64,
    applied: Option<Vec<u8>>,
    membership: Option<Vec<u8>>,
}

impl SnapshotReceiver {
    /// A receiver writing into a new scratch file of `data` ([`DataDir::incoming_snapshot`]).
    pub fn create(data: &DataDir) -> io::Result<SnapshotReceiver> {
        let path = data.incoming_snapshot();
        let writer = SnapshotWriter::create(&path).map_err(io::Error::other)?;
        Ok(SnapshotReceiver {
            writer: Some(writer),
            file: IncomingFile(path),
            rows: 0,
            applied: None,
            membership: None,
        })
    }

    /// Writes the rows of one chunk.
    pub fn write(&mut self, rows: &[SnapshotRow]) -> io::Result<()> {
        for row in rows
            .iter()
            .filter(|r| r.table == SnapshotTable::AppMeta.id())
        {
            match row.key.as_slice() {
                k if k == META_APPLIED.as_bytes() => self.applied = Some(row.value.clone()),
                k if k == META_MEMBERSHIP.as_bytes() => self.membership = Some(row.value.clone()),
                _ => {}
            }
        }
        self.rows += rows.len() as u64;
        match &mut self.writer {
            Some(writer) => writer.write(rows).map_err(io::Error::other),
            None => Err(io::Error::other("the snapshot was finished")),
        }
    }

    /// Makes the file durable once it holds the `sent` rows the leader says it sent; the
    /// snapshot to hand to openraft.
    pub fn finish(mut self, sent: u64) -> io::Result<Snapshot> {
        if self.rows != sent {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the snapshot stream carried {} rows, the leader sent {sent}",
                    self.rows
                ),
            ));
        }
        if let Some(writer) = self.writer.take() {
            writer.finish().map_err(io::Error::other)?;
        }
        let last_log_id = codec::decode_log_id(&self.applied.take().unwrap_or_default())?;
        if last_log_id.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a snapshot without an applied log id",
            ));
        }
        Ok(Snapshot {
            meta: SnapshotMeta {
                last_log_id,
                last_membership: decode_membership(self.membership.take())?,
            },
            snapshot: SnapshotData::Received(self.file),
        })
    }
}

/// openraft's handle on the applier.
#[derive(Clone)]
pub struct StateMachine {
    applier: Arc<Applier>,
}

impl StateMachine {
    /// Wraps the shared applier.
    pub fn new(applier: Arc<Applier>) -> Self {
        StateMachine { applier }
    }

    /// A snapshot of the backend as it is now: its meta read from the same view as its data.
    fn view(&self) -> io::Result<Option<Snapshot>> {
        let view = self.applier.mvcc.view().map_err(io::Error::other)?;
        let meta = |name| view.meta(name).map_err(io::Error::other);
        let last_log_id = codec::decode_log_id(&meta(META_APPLIED)?.unwrap_or_default())?;
        if last_log_id.is_none() {
            return Ok(None);
        }
        let last_membership = decode_membership(meta(META_MEMBERSHIP)?)?;
        Ok(Some(Snapshot {
            meta: SnapshotMeta {
                last_log_id,
                last_membership,
            },
            snapshot: SnapshotData::View(Arc::new(view)),
        }))
    }
}

impl RaftSnapshotBuilder<KeelRaft> for StateMachine {
    type SnapshotData = SnapshotData;

    /// The backend made durable: the view is taken first, so everything it holds is durable
    /// once the fsync returns, and openraft may purge the WAL up to it.
    async fn build_snapshot(&mut self) -> io::Result<Snapshot> {
        let snapshot = self
            .view()?
            .ok_or_else(|| io::Error::other("a snapshot of a member that applied nothing"))?;
        let mvcc = self.applier.mvcc.clone();
        tokio::task::spawn_blocking(move || mvcc.sync())
            .await
            .map_err(io::Error::other)?
            .map_err(io::Error::other)?;
        Ok(snapshot)
    }
}

impl RaftStateMachine<KeelRaft> for StateMachine {
    type SnapshotData = SnapshotData;
    type SnapshotBuilder = StateMachine;

    async fn applied_state(&mut self) -> io::Result<(Option<LogId>, StoredMembership)> {
        Ok(self.applier.applied.read().clone())
    }

    async fn apply<S>(&mut self, entries: S) -> io::Result<()>
    where
        S: Stream<Item = io::Result<EntryResponder<KeelRaft>>> + Unpin + OptionalSend,
    {
        let items: Vec<EntryResponder<KeelRaft>> = entries.try_collect().await?;
        let Some(last) = items.last().map(|(entry, _)| entry.log_id) else {
            return Ok(());
        };
        let applier = &self.applier;
        let apply_started = std::time::Instant::now();
        // Injected faults wait before the batch opens (no write transaction is held across
        // an await); a commit delay is counted in the commit's duration, as a slow disk's.
        let faults = faults::process();
        faults.pause(Fault::ApplyDelay).await;
        let commit_delay = faults.pause(Fault::BackendCommitDelay).await;
        let lease_exists = |id: i64| applier.lessor.lock().contains(id);
        let mut batch = applier.mvcc.begin_apply(&lease_exists);
        // Put events carry the value they replaced only for watchers that want it; one that
        // starts wanting it meanwhile catches up from the backend (see `watch::core`).
        batch.set_events_with_prev(applier.watch.wants_prev_kv());
        let mut replies = Vec::with_capacity(items.len());
        let mut membership: Option<StoredMembership> = None;
        let mut last_membership = applier.applied.read().1.membership().clone();
        let entry_count = items.len();
        for (entry, responder) in items {
            let applied = match entry.payload {
                EntryPayload::Normal(proposal) => {
                    let before = batch.events().len();
                    let applied = applier.apply_proposal(&mut batch, proposal);
                    applier.track_leases(&batch.events()[before..]);
                    applied
                }
                EntryPayload::Membership(m) => {
                    let mut bytes = codec::encode_log_id(Some(&entry.log_id));
                    codec::encode_membership(&m, &mut bytes);
                    batch.set_meta(META_MEMBERSHIP, &bytes);
                    applier.apply_membership(&mut batch, &last_membership, &m);
                    last_membership = m.clone();
                    membership = Some(StoredMembership::new(Some(entry.log_id), m));
                    Applied::default()
                }
                EntryPayload::Blank => Applied::default(),
            };
            if let Some(responder) = responder {
                replies.push((responder, applied));
            }
        }
        batch.set_meta(META_APPLIED, &codec::encode_log_id(Some(&last)));
        let started = std::time::Instant::now();
        let events = batch.commit(last.index).map_err(io::Error::other)?;
        applier
            .metrics
            .backend_commit
            .observe((started.elapsed() + commit_delay).as_secs_f64());
        // One per slow batch: its entries are applied together, so none is slow alone.
        applier
            .metrics
            .observe_apply(apply_started.elapsed(), entry_count);
        applier
            .watch
            .notify(events, applier.mvcc.current_revision());
        applier.set_applied(Some(last), membership);
        applier.metrics.proposals_applied.set(last.index as i64);
        for (responder, applied) in replies {
            responder.send(applied);
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: SnapshotData,
    ) -> io::Result<()> {
        match snapshot {
            SnapshotData::Received(file) => {
                let applier = self.applier.clone();
                tokio::task::spawn_blocking(move || applier.install(&file.0))
                    .await
                    .map_err(io::Error::other)??;
                tracing::info!(
                    applied = %meta.last_log_id.map_or(0, |id| id.index),
                    revision = self.applier.mvcc.current_revision(),
                    "installed a snapshot from the leader"
                );
                Ok(())
            }
            // openraft re-installs the current snapshot at start only when it is ahead of the
            // applied state; a view of this backend never is.
            SnapshotData::View(_) if self.applier.applied() >= meta.last_log_id => Ok(()),
            SnapshotData::View(_) => Err(io::Error::other(
                "a view of this member's own backend is behind its snapshot",
            )),
        }
    }

    async fn get_current_snapshot(&mut self) -> io::Result<Option<Snapshot>> {
        self.view()
    }
}
