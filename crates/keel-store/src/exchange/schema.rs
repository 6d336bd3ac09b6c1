//! etcd 3.5's backend schema: bucket names, `meta` keys and the encoding of each value, as
//! etcd's `mvcc/buckets`, `cindex`, `mvcc/kvstore.go`, `lease/lessor.go`,
//! `membership/store.go`, `membership/confstate.go`, `auth/store.go` and `v3alarm` write
//! them. Only this file knows those bytes.
//!
//! | bucket | key | value |
//! |---|---|---|
//! | `alarm` | an `AlarmMember` (protobuf) | empty |
//! | `auth` | `authEnabled` / `authRevision` | `[1]` or `[0]` / 8 bytes big-endian |
//! | `authRoles` / `authUsers` | the name | an `authpb.Role` / `authpb.User` (protobuf) |
//! | `cluster` | `clusterVersion` | `major.minor.0` |
//! | `key` | a revision: 8 bytes main, `_`, 8 bytes sub, `t` if a tombstone | an `mvccpb.KeyValue` |
//! | `lease` | the id, 8 bytes big-endian | a `leasepb.Lease`: `ID`, `TTL`, `RemainingTTL` (s) |
//! | `members` | the id in lower-case hex | JSON `{"id", "peerURLs", "isLearner"?, "name"?}` |
//! | `members_removed` | the id in lower-case hex | `removed` |
//! | `meta` | `consistent_index` / `term` | 8 bytes big-endian |
//! | `meta` | `scheduledCompactRev` / `finishedCompactRev` | a revision (17 bytes, sub 0) |
//! | `meta` | `confState` | JSON `{"voters":[..],"learners"?:[..],"auto_leave":false}` |
//!
//! A member's JSON has the fields etcd's `AddMember` stores: a member's client URLs are never
//! in it (etcd publishes them to a member already stored, which `unsafeSaveMemberToBackend`
//! does not overwrite), and its name only when known when it was added.

use keel_mvcc::{MARKED_REV_BYTES_LEN, REV_BYTES_LEN, Rev};
use keel_proto::etcdserverpb::Member;

/// The bucket of raised alarms.
pub const ALARM: &[u8] = b"alarm";
/// The bucket of the auth flags.
pub const AUTH: &[u8] = b"auth";
/// The bucket of roles.
pub const AUTH_ROLES: &[u8] = b"authRoles";
/// The bucket of users.
pub const AUTH_USERS: &[u8] = b"authUsers";
/// The bucket of the cluster version.
pub const CLUSTER: &[u8] = b"cluster";
/// The bucket of revisions.
pub const KEY: &[u8] = b"key";
/// The bucket of leases.
pub const LEASE: &[u8] = b"lease";
/// The bucket of members.
pub const MEMBERS: &[u8] = b"members";
/// The bucket of removed members.
pub const MEMBERS_REMOVED: &[u8] = b"members_removed";
/// The bucket of the backend's bookkeeping.
pub const META: &[u8] = b"meta";

/// `auth`: whether authentication is enabled (absent until first enabled or disabled).
pub const AUTH_ENABLED: &[u8] = b"authEnabled";
/// `auth`: the auth revision.
pub const AUTH_REVISION: &[u8] = b"authRevision";
/// `cluster`: the cluster version.
pub const CLUSTER_VERSION: &[u8] = b"clusterVersion";
/// `meta`: the Raft index of the last applied entry.
pub const CONSISTENT_INDEX: &[u8] = b"consistent_index";
/// `meta`: the term of that entry.
pub const TERM: &[u8] = b"term";
/// `meta`: the revision of the newest compaction.
pub const SCHEDULED_COMPACT_REV: &[u8] = b"scheduledCompactRev";
/// `meta`: the revision of the newest compaction whose removals are done.
pub const FINISHED_COMPACT_REV: &[u8] = b"finishedCompactRev";
/// `meta`: the Raft configuration.
pub const CONF_STATE: &[u8] = b"confState";
/// `members_removed`: the value of every entry.
pub const REMOVED: &[u8] = b"removed";

/// etcd's `leasepb.Lease`: one entry of the `lease` bucket.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct LeasePb {
    /// The lease id.
    #[prost(int64, tag = "1")]
    pub id: i64,
    /// The granted TTL in seconds.
    #[prost(int64, tag = "2")]
    pub ttl: i64,
    /// The checkpointed remaining TTL in seconds; 0 when never checkpointed.
    #[prost(int64, tag = "3")]
    pub remaining_ttl: i64,
}

/// An 8-byte big-endian value (`consistent_index`, `term`, `authRevision`, a lease id).
pub fn be64(v: u64) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

/// The value of an 8-byte big-endian entry; `None` if it is not 8 bytes.
pub fn read_be64(v: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(v.try_into().ok()?))
}

/// A `meta` compaction revision: the revision key of `(main, 0)`.
pub fn compact_rev(main: i64) -> Vec<u8> {
    Rev::new(main, 0).to_key(false).as_bytes().to_vec()
}

/// The main revision of a `meta` compaction revision (etcd reads the first 17 bytes).
pub fn read_compact_rev(v: &[u8]) -> Option<i64> {
    (v.len() >= REV_BYTES_LEN).then(|| Rev::from_key(v).map(|r| r.main))?
}

/// The revision of a `key` bucket key, if it is one: 17 bytes with `_` after the main
/// revision, or 18 with a trailing `t`.
pub fn revision_of(key: &[u8]) -> Option<Rev> {
    let shaped = match key.len() {
        REV_BYTES_LEN => true,
        MARKED_REV_BYTES_LEN => key[REV_BYTES_LEN] == b't',
        _ => false,
    };
    if !shaped || key[8] != b'_' {
        return None;
    }
    Rev::from_key(key)
}

/// The `members` (and `members_removed`) key of member `id`: Go's `types.ID.String()`.
pub fn member_key(id: u64) -> Vec<u8> {
    format!("{id:x}").into_bytes()
}

/// The `members` value of `member`, with Go's field order and omissions (see the module
/// docs).
pub fn member_json(member: &Member) -> Vec<u8> {
    let mut out = format!(
        r#"{{"id":{},"peerURLs":{}"#,
        member.id,
        serde_json::to_string(&member.peer_ur_ls).expect("strings serialize")
    );
    if member.is_learner {
        out.push_str(r#","isLearner":true"#);
    }
    if !member.name.is_empty() {
        out.push_str(r#","name":"#);
        out.push_str(&serde_json::to_string(&member.name).expect("a string serializes"));
    }
    out.push('}');
    out.into_bytes()
}

/// The `confState` value of a configuration with these voters and learners.
pub fn conf_state_json(voters: &[u64], learners: &[u64]) -> Vec<u8> {
    let list = |ids: &[u64]| serde_json::to_string(ids).expect("numbers serialize");
    let mut out = String::from("{");
    if !voters.is_empty() {
        out.push_str(&format!(r#""voters":{},"#, list(voters)));
    }
    if !learners.is_empty() {
        out.push_str(&format!(r#""learners":{},"#, list(learners)));
    }
    out.push_str(r#""auto_leave":false}"#);
    out.into_bytes()
}

/// The `clusterVersion` of a member that reports `version`: its major and minor, patch 0.
pub fn cluster_version(version: &str) -> String {
    let mut parts = version.split('.');
    let major = parts.next().unwrap_or("3");
    let minor = parts.next().unwrap_or("5");
    format!("{major}.{minor}.0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_what_etcd_3_5_1_wrote() {
        // From a snapshot etcd 3.5.1 saved.
        let member = Member {
            id: 3319814642761637952,
            name: "default".into(),
            peer_ur_ls: vec!["http://127.0.0.1:23800".into()],
            client_ur_ls: vec!["http://127.0.0.1:23790".into()],
            is_learner: false,
        };
        assert_eq!(member_key(member.id), b"2e1259d415f2a040");
        assert_eq!(
            String::from_utf8(member_json(&member)).unwrap(),
            r#"{"id":3319814642761637952,"peerURLs":["http://127.0.0.1:23800"],"name":"default"}"#
        );
        assert_eq!(
            String::from_utf8(conf_state_json(&[3319814642761637952], &[])).unwrap(),
            r#"{"voters":[3319814642761637952],"auto_leave":false}"#
        );
        assert_eq!(
            compact_rev(3),
            b"\0\0\0\0\0\0\0\x03_\0\0\0\0\0\0\0\0".to_vec()
        );
        assert_eq!(read_compact_rev(&compact_rev(3)), Some(3));
        let lease = LeasePb {
            id: 0x2040_a24c_0a71_5109,
            ttl: 600,
            remaining_ttl: 0,
        };
        assert_eq!(
            prost::Message::encode_to_vec(&lease),
            [
                0x08, 0x89, 0xa2, 0xc5, 0xd3, 0xc0, 0xc9, 0xa8, 0xa0, 0x20, 0x10, 0xd8, 0x04
            ]
        );
        assert_eq!(cluster_version("3.5.13"), "3.5.0");
    }

    #[test]
    fn revision_keys_are_checked_for_shape() {
        let put = Rev::new(5, 1).to_key(false);
        let tomb = Rev::new(5, 1).to_key(true);
        assert_eq!(revision_of(put.as_bytes()), Some(Rev::new(5, 1)));
        assert_eq!(revision_of(tomb.as_bytes()), Some(Rev::new(5, 1)));
        let mut bad = tomb.as_bytes().to_vec();
        bad[17] = b'x';
        assert_eq!(revision_of(&bad), None);
        assert_eq!(revision_of(b"short"), None);
        let mut no_sep = put.as_bytes().to_vec();
        no_sep[8] = b'-';
        assert_eq!(revision_of(&no_sep), None);
    }
}
