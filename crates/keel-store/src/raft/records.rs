//! What the applier records in the backend besides keys: one `app_meta` value each for the
//! applied log id, the Raft membership, the alarms, the members' published attributes, the
//! removed members and the auth store, and one `lease/<id>` value per lease. They are
//! written in the same transaction as the entries that changed them (see `apply`), read
//! back at start and after a snapshot install, and read from a [`BackendView`] when the
//! backend is exported in etcd's snapshot format (`crate::exchange`), which also writes the
//! alarms, auth store and leases of a restored backend through [`Records::rows`].
//!
//! Encodings: the applied log id and membership as `codec` writes them (the membership
//! record is its log id, then the membership); alarms as an `AlarmResponse`, attributes as
//! a `MemberListResponse`, both protobuf; removed members as 8-byte big-endian ids back to
//! back; the auth store and each lease as their protobuf messages ([`AuthStore`],
//! [`LeaseRecord`]).

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use keel_mvcc::{BackendView, Mvcc};
use keel_proto::etcdserverpb::{AlarmMember, AlarmResponse, Member, MemberListResponse};
use prost::Message;

use super::codec::{self, LogId};
use super::membership;
use crate::auth::AuthStore;
use crate::lease::{self, LeaseRecord};

/// openraft's membership as it was applied, with the log id of its entry.
pub(crate) type StoredMembership = openraft::alias::StoredMembershipOf<super::KeelRaft>;

/// The record of the last applied log id.
pub(crate) const META_APPLIED: &str = "raft_applied_log_id";
/// The record of the last applied membership.
pub(crate) const META_MEMBERSHIP: &str = "raft_membership";
/// The record of the raised alarms.
pub(super) const META_ALARMS: &str = "alarms";
/// The record of the auth store.
pub(super) const META_AUTH: &str = "auth";
/// The record of the members' published attributes.
pub(super) const META_MEMBERS: &str = "members";
/// The record of the removed members.
pub(super) const META_REMOVED: &str = "members_removed";

/// Everything the applier records besides keys, decoded.
pub(crate) struct Records {
    /// The last applied log id (none for a backend no entry was applied to).
    pub applied: Option<LogId>,
    /// The last applied membership.
    pub membership: StoredMembership,
    /// The raised alarms.
    pub alarms: Vec<AlarmMember>,
    /// The attributes each member published, by id.
    pub members: BTreeMap<u64, Member>,
    /// The members removed from the cluster.
    pub removed: BTreeSet<u64>,
    /// The auth store.
    pub auth: AuthStore,
    /// The leases, in id order of their record names.
    pub leases: Vec<LeaseRecord>,
}

impl Records {
    /// The records of the live backend.
    pub(crate) fn of_mvcc(mvcc: &Mvcc) -> io::Result<Records> {
        Records::read(
            |name| mvcc.meta(name),
            mvcc.meta_with_prefix(lease::META_PREFIX),
        )
    }

    /// The records as of `view`.
    pub(crate) fn of_view(view: &BackendView) -> io::Result<Records> {
        Records::read(
            |name| view.meta(name),
            view.meta_with_prefix(lease::META_PREFIX),
        )
    }

    fn read(
        meta: impl Fn(&str) -> Result<Option<Vec<u8>>, keel_mvcc::MvccError>,
        leases: Result<Vec<(String, Vec<u8>)>, keel_mvcc::MvccError>,
    ) -> io::Result<Records> {
        let meta = |name| meta(name).map_err(io::Error::other);
        let applied = codec::decode_log_id(&meta(META_APPLIED)?.unwrap_or_default())?;
        let membership = decode_membership(meta(META_MEMBERSHIP)?)?;
        let alarms = match meta(META_ALARMS)? {
            Some(bytes) => {
                AlarmResponse::decode(bytes.as_slice())
                    .map_err(io::Error::other)?
                    .alarms
            }
            None => Vec::new(),
        };
        let members = match meta(META_MEMBERS)? {
            Some(bytes) => MemberListResponse::decode(bytes.as_slice())
                .map_err(io::Error::other)?
                .members
                .into_iter()
                .map(|m| (m.id, m))
                .collect(),
            None => BTreeMap::new(),
        };
        let removed = meta(META_REMOVED)?.unwrap_or_default();
        if removed.len() % 8 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the removed-members record is not a list of 8-byte ids",
            ));
        }
        let removed = removed
            .chunks_exact(8)
            .map(|id| u64::from_be_bytes(id.try_into().expect("8 bytes")))
            .collect();
        let auth = match meta(META_AUTH)? {
            Some(bytes) => AuthStore::decode(bytes.as_slice()).map_err(io::Error::other)?,
            None => AuthStore::new(),
        };
        let leases = leases
            .map_err(io::Error::other)?
            .into_iter()
            .map(|(_, bytes)| LeaseRecord::decode(bytes.as_slice()).map_err(io::Error::other))
            .collect::<io::Result<_>>()?;
        Ok(Records {
            applied,
            membership,
            alarms,
            members,
            removed,
            auth,
            leases,
        })
    }

    /// The cluster's members as the membership lists them, with what each published.
    pub(crate) fn member_list(&self) -> Vec<Member> {
        membership::list(self.membership.membership(), |id| {
            self.members.get(&id).cloned()
        })
    }

    /// The `app_meta` rows of a new backend holding `alarms`, `auth` and `leases` (and no
    /// applied log id, membership or members: a member started on it bootstraps them).
    pub(crate) fn rows(
        alarms: Vec<AlarmMember>,
        auth: &AuthStore,
        leases: &[LeaseRecord],
    ) -> Vec<(String, Vec<u8>)> {
        let mut rows = vec![(META_AUTH.to_string(), auth.encode_to_vec())];
        if !alarms.is_empty() {
            let alarms = AlarmResponse {
                alarms,
                ..Default::default()
            };
            rows.push((META_ALARMS.to_string(), alarms.encode_to_vec()));
        }
        rows.extend(
            leases
                .iter()
                .map(|l| (lease::meta_name(l.id), l.encode_to_vec())),
        );
        rows
    }
}

/// The membership record (`raft_membership`): its log id, then the membership.
pub(crate) fn decode_membership(bytes: Option<Vec<u8>>) -> io::Result<StoredMembership> {
    match bytes {
        Some(bytes) if bytes.len() >= 16 => {
            let (log_id, membership) = bytes.split_at(16);
            let log_id = codec::decode_log_id(log_id)?;
            Ok(StoredMembership::new(
                log_id,
                codec::decode_membership(&mut codec::Reader(membership))?,
            ))
        }
        Some(_) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "truncated membership record",
        )),
        None => Ok(StoredMembership::default()),
    }
}
