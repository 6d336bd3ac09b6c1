//! An etcd database read into a new keel backend file.
//!
//! The `key` bucket becomes the backend's `key` table row for row (the layout is the same),
//! leaving out rows of an empty key (etcd 3.6's mark of a bumped revision); the auth
//! buckets become the auth store, the `lease` bucket the lease records (each granted afresh
//! with its TTL, as etcd restores leases), the `alarm` bucket the alarms; the compaction
//! revisions of `meta` and the bump give the backend's revisions. Members, the Raft
//! configuration and the applied index are not carried over: the member started on the new
//! data directory bootstraps its cluster from its flags.

use std::path::Path;

use keel_mvcc::{BackendRevisions, SnapshotRow, SnapshotTable, SnapshotWriter};
use keel_proto::authpb::{Role, User};
use keel_proto::etcdserverpb::AlarmMember;
use keel_proto::mvccpb::KeyValue;
use prost::Message;

use super::error::RestoreError;
use super::schema::{self, LeasePb};
use super::source::{Source, SourceRevisions};
use crate::auth::AuthStore;
use crate::lease::LeaseRecord;
use crate::raft::records::Records;

/// Bytes of rows handed to the backend writer at a time.
const CHUNK_BYTES: usize = 1 << 20;

/// What [`import`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Imported {
    /// The backend's revisions.
    pub revisions: BackendRevisions,
    /// Rows of the `key` table.
    pub rows: u64,
    /// Leases.
    pub leases: u64,
}

/// Writes the etcd database of `source` as a new keel backend at `backend`, its revision
/// bumped by `bump_revision` and compacted up to the new revision when `bump_revision > 0`.
pub(super) fn import(
    source: &Source,
    backend: &Path,
    bump_revision: u64,
) -> Result<Imported, RestoreError> {
    let meta = source.bucket(schema::META)?;
    let scheduled = source.compact_rev(&meta, schema::SCHEDULED_COMPACT_REV)?;
    let finished = source.compact_rev(&meta, schema::FINISHED_COMPACT_REV)?;
    let auth = auth_store(source)?;
    let leases = leases(source)?;
    let alarms = source
        .bucket(schema::ALARM)?
        .into_keys()
        .map(|k| AlarmMember::decode(k.as_slice()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| source.schema_error(format!("an alarm entry: {e}")))?;

    let mut out = SnapshotWriter::create(backend)?;
    let mut chunk = Vec::new();
    let mut bytes = 0;
    let mut rows = 0u64;
    let last_row = source.for_each_row(|rev, key, value| {
        let kv = KeyValue::decode(value.as_slice()).map_err(|e| {
            source.schema_error(format!("the key row of revision {}: {e}", rev.main))
        })?;
        if kv.key.is_empty() {
            return Ok(());
        }
        bytes += key.len() + value.len();
        rows += 1;
        chunk.push(SnapshotRow {
            table: SnapshotTable::Key.id(),
            key,
            value,
        });
        if bytes >= CHUNK_BYTES {
            out.write(&std::mem::take(&mut chunk))?;
            bytes = 0;
        }
        Ok(())
    })?;
    out.write(&chunk)?;

    let found = SourceRevisions {
        last_row,
        scheduled,
        finished,
    };
    let revisions = match bump_revision {
        0 => BackendRevisions {
            current: found.latest(),
            compact: found.compact(),
            finished_compact: finished.unwrap_or(-1),
        },
        bump => {
            let current = found.latest().saturating_add(bump as i64);
            BackendRevisions {
                current,
                compact: current,
                finished_compact: finished.unwrap_or(-1),
            }
        }
    };
    out.set_revisions(revisions)?;
    let records: Vec<SnapshotRow> = Records::rows(alarms, &auth, &leases)
        .into_iter()
        .map(|(name, value)| SnapshotRow {
            table: SnapshotTable::AppMeta.id(),
            key: name.into_bytes(),
            value,
        })
        .collect();
    out.write(&records)?;
    out.finish()?;
    Ok(Imported {
        revisions,
        rows,
        leases: leases.len() as u64,
    })
}

/// The auth store of the auth buckets; refuses one with authentication enabled.
fn auth_store(source: &Source) -> Result<AuthStore, RestoreError> {
    let flags = source.bucket(schema::AUTH)?;
    if flags.get(schema::AUTH_ENABLED).map(Vec::as_slice) == Some(&[1]) {
        return Err(RestoreError::AuthEnabled);
    }
    let revision = match flags.get(schema::AUTH_REVISION) {
        Some(v) => schema::read_be64(v)
            .ok_or_else(|| source.schema_error("auth authRevision is not 8 bytes"))?,
        None => AuthStore::new().revision,
    };
    let decode = |what: &str, name: &[u8], e: prost::DecodeError| {
        source.schema_error(format!("{what} {}: {e}", String::from_utf8_lossy(name)))
    };
    let mut users = Vec::new();
    for (name, value) in source.bucket(schema::AUTH_USERS)? {
        users.push(User::decode(value.as_slice()).map_err(|e| decode("user", &name, e))?);
    }
    let mut roles = Vec::new();
    for (name, value) in source.bucket(schema::AUTH_ROLES)? {
        roles.push(Role::decode(value.as_slice()).map_err(|e| decode("role", &name, e))?);
    }
    // The auth store keeps both sorted by name, as the buckets are.
    users.sort_by(|a, b| a.name.cmp(&b.name));
    roles.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(AuthStore {
        users,
        roles,
        revision,
    })
}

/// The leases of the `lease` bucket, each with its full TTL to go.
fn leases(source: &Source) -> Result<Vec<LeaseRecord>, RestoreError> {
    source
        .bucket(schema::LEASE)?
        .into_iter()
        .map(|(key, value)| {
            let lease = LeasePb::decode(value.as_slice())
                .map_err(|e| source.schema_error(format!("the lease entry {key:02x?}: {e}")))?;
            Ok(LeaseRecord {
                id: lease.id,
                ttl: lease.ttl,
                remaining_ms: lease.ttl.saturating_mul(1000),
            })
        })
        .collect()
}
