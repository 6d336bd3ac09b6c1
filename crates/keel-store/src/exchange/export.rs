//! A store's backend as an etcd 3.5 snapshot: the database `etcdctl snapshot save` receives
//! from etcd's Snapshot RPC, written from a [`BackendView`] (one point in time) in one pass.
//!
//! Each bucket comes from where keel keeps the same facts (`schema` has the bytes):
//!
//! - `key`: the backend's `key` table, row for row (it is etcd's layout already);
//! - `lease`: one entry per lease record, its checkpointed remaining TTL as `RemainingTTL`
//!   when below the TTL;
//! - `members`, `members_removed`, `meta`'s `confState`: the applied Raft membership, with
//!   the names members published; `consistent_index` and `term`: the applied log id;
//! - `auth`, `authUsers`, `authRoles`: the auth store (never enabled: keel cannot enforce
//!   it, so `authEnabled` is absent, as in an etcd that never enabled it);
//! - `alarm`: the raised alarms; `cluster`: the version the member reports, patch 0;
//! - `scheduledCompactRev` and `finishedCompactRev`: both the backend's compaction revision.
//!   A compaction the store has not finished removing is thereby recorded as finished: etcd
//!   3.5.1 takes its revision from the last row and `finishedCompactRev` only, so a
//!   compaction left to redo could find the revision below it and fail; its revisions are
//!   unreadable either way, and the rows it had not removed yet go with the next compaction
//!   (etcd's removal scans from the first revision).
//!
//! etcd then reads the file at the store's revision: the store's revision is its last row's
//! unless a compaction at the revision removed that row, and then it is the compaction's.

use std::collections::BTreeMap;
use std::path::Path;

use keel_bbolt::Writer;
use keel_mvcc::BackendView;
use prost::Message;

use super::error::ExportError;
use super::schema::{self, LeasePb};
use crate::raft::records::Records;

/// What [`export`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exported {
    /// The revision etcd reads the file at: the store's.
    pub revision: i64,
    /// Rows of the `key` bucket.
    pub revisions: u64,
    /// Leases.
    pub leases: u64,
    /// Entries over all buckets (what `etcdutl snapshot status` calls `totalKey`).
    pub total_keys: u64,
    /// The database's size in bytes.
    pub file_size: u64,
}

/// Sorted entries of one bucket.
type Bucket = BTreeMap<Vec<u8>, Vec<u8>>;

/// Writes the backend as of `view` to a new etcd-format database at `path` (without the
/// trailing sha256: the Snapshot RPC streams that after the file). `version` is the etcd
/// version the member reports, for the `cluster` bucket.
pub fn export(view: &BackendView, path: &Path, version: &str) -> Result<Exported, ExportError> {
    let records = Records::of_view(view).map_err(ExportError::Records)?;
    let revisions = view.revisions()?;
    let mut w = Writer::create(path)?;

    let alarms: Bucket = records
        .alarms
        .iter()
        .map(|a| (a.encode_to_vec(), Vec::new()))
        .collect();
    put_bucket(&mut w, schema::ALARM, alarms)?;
    let auth = &records.auth;
    let flags = Bucket::from([(schema::AUTH_REVISION.to_vec(), schema::be64(auth.revision))]);
    put_bucket(&mut w, schema::AUTH, flags)?;
    let roles = auth
        .roles
        .iter()
        .map(|r| (r.name.clone(), r.encode_to_vec()));
    put_bucket(&mut w, schema::AUTH_ROLES, roles.collect())?;
    let users = auth
        .users
        .iter()
        .map(|u| (u.name.clone(), u.encode_to_vec()));
    put_bucket(&mut w, schema::AUTH_USERS, users.collect())?;
    let cluster = Bucket::from([(
        schema::CLUSTER_VERSION.to_vec(),
        schema::cluster_version(version).into_bytes(),
    )]);
    put_bucket(&mut w, schema::CLUSTER, cluster)?;

    w.begin_bucket(schema::KEY)?;
    let mut rows = 0u64;
    let mut last_row = 1i64;
    view.for_each_key(|k, v| -> Result<(), ExportError> {
        w.put(k, v)?;
        rows += 1;
        last_row = schema::revision_of(k).map_or(last_row, |r| r.main);
        Ok(())
    })?;

    let leases: Bucket = records
        .leases
        .iter()
        .map(|l| {
            let remaining = (l.remaining_ms.max(0) as u64).div_ceil(1000) as i64;
            let lease = LeasePb {
                id: l.id,
                ttl: l.ttl,
                remaining_ttl: if remaining < l.ttl { remaining } else { 0 },
            };
            (schema::be64(l.id as u64), lease.encode_to_vec())
        })
        .collect();
    let lease_count = leases.len() as u64;
    put_bucket(&mut w, schema::LEASE, leases)?;

    let members = records.member_list();
    let stored = members
        .iter()
        .map(|m| (schema::member_key(m.id), schema::member_json(m)));
    put_bucket(&mut w, schema::MEMBERS, stored.collect())?;
    let removed = records
        .removed
        .iter()
        .map(|id| (schema::member_key(*id), schema::REMOVED.to_vec()));
    put_bucket(&mut w, schema::MEMBERS_REMOVED, removed.collect())?;

    let mut meta = Bucket::new();
    if let Some(applied) = records.applied {
        meta.insert(
            schema::CONSISTENT_INDEX.to_vec(),
            schema::be64(applied.index),
        );
        meta.insert(schema::TERM.to_vec(), schema::be64(applied.leader_id.term));
    }
    if !members.is_empty() {
        let ids = |learner: bool| -> Vec<u64> {
            members
                .iter()
                .filter(|m| m.is_learner == learner)
                .map(|m| m.id)
                .collect()
        };
        let conf = schema::conf_state_json(&ids(false), &ids(true));
        meta.insert(schema::CONF_STATE.to_vec(), conf);
    }
    if revisions.compact > 0 {
        let rev = schema::compact_rev(revisions.compact);
        meta.insert(schema::SCHEDULED_COMPACT_REV.to_vec(), rev.clone());
        meta.insert(schema::FINISHED_COMPACT_REV.to_vec(), rev);
    }
    put_bucket(&mut w, schema::META, meta)?;

    let written = w.finish()?;
    Ok(Exported {
        revision: last_row.max(revisions.compact).max(1),
        revisions: rows,
        leases: lease_count,
        total_keys: written.keys,
        file_size: written.file_size,
    })
}

/// Writes the bucket `name` with `entries`.
fn put_bucket(w: &mut Writer, name: &[u8], entries: Bucket) -> Result<(), keel_bbolt::Error> {
    w.begin_bucket(name)?;
    for (k, v) in &entries {
        w.put(k, v)?;
    }
    Ok(())
}
