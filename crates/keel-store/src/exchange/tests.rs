//! Round trips through the etcd format without servers: a backend exported, restored and
//! rewritten, and every refusal leaving nothing behind. The end-to-end tests against a real
//! etcd 3.5.1 are in the keel crate (`tests/snapshot_interchange.rs`).

use std::path::{Path, PathBuf};

use keel_mvcc::{Mvcc, MvccError};
use keel_proto::authpb::User;
use keel_proto::etcdserverpb::{
    AlarmMember, AlarmType, CompactionRequest, DeleteRangeRequest, PutRequest, RangeRequest,
    RangeResponse,
};

use super::*;
use crate::auth::AuthStore;
use crate::data_dir::DataDir;
use crate::lease::LeaseRecord;
use crate::raft::records::Records;

const LEASE: i64 = 0x1234;

/// A backend with overwrites, a delete, a compaction, a leased key, a 100 KiB value, an
/// alarm, a user and a lease.
fn source_store(dir: &Path) -> Mvcc {
    let m = Mvcc::open(&dir.join("src.db")).unwrap();
    let any_lease = |_: i64| true;
    let put = |key: &str, value: Vec<u8>, lease: i64| PutRequest {
        key: key.into(),
        value,
        lease,
        ..Default::default()
    };
    let mut b = m.begin_apply(&any_lease);
    b.put(&put("a", b"1".to_vec(), 0)).unwrap();
    b.put(&put("b", b"1".to_vec(), LEASE)).unwrap();
    b.put(&put("c", b"1".to_vec(), 0)).unwrap();
    let auth = AuthStore {
        users: vec![User {
            name: b"u1".to_vec(),
            ..Default::default()
        }],
        roles: Vec::new(),
        revision: 2,
    };
    let alarms = vec![AlarmMember {
        member_id: 9,
        alarm: AlarmType::Corrupt as i32,
    }];
    let lease = LeaseRecord {
        id: LEASE,
        ttl: 60,
        remaining_ms: 30_000,
    };
    for (name, value) in Records::rows(alarms, &auth, &[lease]) {
        b.set_meta(&name, &value);
    }
    b.commit(1).unwrap();
    let mut b = m.begin_apply(&any_lease);
    b.put(&put("a", b"2".to_vec(), 0)).unwrap();
    b.delete_range(&DeleteRangeRequest {
        key: b"c".to_vec(),
        ..Default::default()
    })
    .unwrap();
    b.commit(2).unwrap();
    let mut b = m.begin_apply(&any_lease);
    b.compact(&CompactionRequest {
        revision: m.current_revision() - 1,
        physical: true,
    })
    .unwrap();
    b.commit(3).unwrap();
    let mut b = m.begin_apply(&any_lease);
    b.put(&put("d", vec![b'x'; 100 * 1024], 0)).unwrap();
    b.commit(4).unwrap();
    m
}

fn all(m: &Mvcc, revision: i64) -> Result<RangeResponse, MvccError> {
    m.range(&RangeRequest {
        key: vec![0],
        range_end: vec![0],
        revision,
        ..Default::default()
    })
}

/// `m` exported to a sealed snapshot file in `dir`.
fn snapshot_of(m: &Mvcc, dir: &Path) -> PathBuf {
    let path = dir.join("snap.db");
    let exported = export(&m.view().unwrap(), &path, "3.5.13").unwrap();
    assert_eq!(exported.revision, m.current_revision());
    assert_eq!(exported.leases, 1);
    assert_eq!(keel_bbolt::check(&path).unwrap(), Vec::<String>::new());
    sealed::seal(&path).unwrap();
    path
}

fn options(data_dir: &Path) -> RestoreOptions {
    RestoreOptions {
        data_dir: Some(data_dir.to_path_buf()),
        ..RestoreOptions::default()
    }
}

fn open_restored(restored: &Restored) -> Mvcc {
    Mvcc::open(&DataDir::new(&restored.data_dir).backend()).unwrap()
}

/// The directory's entries besides `keep`: what a failed restore must not leave.
fn leftovers(dir: &Path, keep: &[&str]) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(&n.as_str()))
        .collect()
}

#[test]
fn an_exported_backend_restores_with_its_keys_leases_and_auth() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source_store(tmp.path());
    let snap = snapshot_of(&src, tmp.path());
    let restored = restore(&snap, &options(&tmp.path().join("r"))).unwrap();
    assert_eq!(restored.revision, src.current_revision());
    assert_eq!(restored.compact_revision, src.compact_revision());
    assert_eq!(restored.leases, 1);
    let identity = crate::identity::Identity::of_new_cluster(
        &[("default".into(), vec!["http://localhost:2380".into()])],
        &["http://localhost:2380".into()],
        "etcd-cluster",
    );
    assert_eq!(restored.member_id, identity.member_id);

    let got = open_restored(&restored);
    assert_eq!(all(&got, 0).unwrap(), all(&src, 0).unwrap());
    let at = src.compact_revision();
    assert_eq!(all(&got, at).unwrap(), all(&src, at).unwrap());
    assert!(matches!(all(&got, at - 1), Err(MvccError::Compacted)));
    assert_eq!(got.applied_index(), 0, "the member bootstraps its log");
    let records = Records::of_mvcc(&got).unwrap();
    assert_eq!(records.applied, None);
    assert_eq!(records.auth.users.len(), 1);
    assert_eq!(records.auth.revision, 2);
    assert_eq!(records.alarms.len(), 1);
    let lease = records.leases[0];
    assert_eq!(
        (lease.id, lease.ttl, lease.remaining_ms),
        (LEASE, 60, 60_000)
    );
    assert_eq!(got.leased_keys().unwrap(), vec![(LEASE, b"b".to_vec())]);
    assert_eq!(
        leftovers(tmp.path(), &["src.db", "snap.db", "r"]),
        Vec::<String>::new()
    );
}

#[test]
fn a_bumped_restore_starts_past_the_snapshot_with_everything_before_compacted() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source_store(tmp.path());
    let snap = snapshot_of(&src, tmp.path());
    let latest = src.current_revision();
    let opts = RestoreOptions {
        bump_revision: 1000,
        mark_compacted: true,
        ..options(&tmp.path().join("r"))
    };
    let restored = restore(&snap, &opts).unwrap();
    assert_eq!(restored.revision, latest + 1000);
    assert_eq!(restored.compact_revision, latest + 1000);
    let got = open_restored(&restored);
    assert_eq!(got.current_revision(), latest + 1000);
    assert!(matches!(all(&got, latest), Err(MvccError::Compacted)));
    let (now, before) = (all(&got, 0).unwrap(), all(&src, 0).unwrap());
    assert_eq!(now.kvs, before.kvs);
    assert_eq!(now.header.unwrap().revision, latest + 1000);
}

#[test]
fn a_rewritten_snapshot_is_served_at_the_bumped_revision() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source_store(tmp.path());
    let snap = snapshot_of(&src, tmp.path());
    let latest = src.current_revision();
    let out = tmp.path().join("bumped.db");
    let rewritten = rewrite(&snap, &out, 10, true).unwrap();
    assert_eq!(rewritten.revision, latest + 10);
    assert_eq!(rewritten.compact_revision, latest + 10);
    assert_eq!(rewritten.file_size, std::fs::metadata(&out).unwrap().len());
    // A plain copy is the same database with a fresh hash.
    let copy = tmp.path().join("copy.db");
    let copied = rewrite(&snap, &copy, 0, false).unwrap();
    assert_eq!(std::fs::read(&copy).unwrap(), std::fs::read(&snap).unwrap());
    assert_eq!(copied.revision, latest);

    let restored = restore(&out, &options(&tmp.path().join("r"))).unwrap();
    assert_eq!(restored.revision, latest + 10);
    let got = open_restored(&restored);
    assert_eq!(got.current_revision(), latest + 10);
    assert_eq!(got.compact_revision(), latest + 10);
    assert!(matches!(all(&got, latest), Err(MvccError::Compacted)));
    assert_eq!(all(&got, 0).unwrap().kvs, all(&src, 0).unwrap().kvs);
    assert!(matches!(
        rewrite(&snap, &out, 10, false),
        Err(RestoreError::BumpWithoutMark)
    ));
}

#[test]
fn refused_restores_leave_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source_store(tmp.path());
    let snap = snapshot_of(&src, tmp.path());
    let keep = ["src.db", "snap.db", "full", "bad.db", "bare.db"];

    let full = tmp.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("mine"), b"keep me").unwrap();
    let err = restore(&snap, &options(&full)).unwrap_err();
    assert!(matches!(err, RestoreError::NotEmpty(_)), "{err}");
    assert!(
        err.to_string().ends_with("not empty or could not be read"),
        "{err}"
    );
    assert_eq!(std::fs::read(full.join("mine")).unwrap(), b"keep me");
    assert_eq!(leftovers(&full, &[]), ["mine"]);

    let mut bytes = std::fs::read(&snap).unwrap();
    let bare = tmp.path().join("bare.db");
    std::fs::write(&bare, &bytes[..bytes.len() - 32]).unwrap();
    let bad = tmp.path().join("bad.db");
    bytes[4096 * 2 + 100] ^= 1;
    std::fs::write(&bad, &bytes).unwrap();
    let target = tmp.path().join("r");
    let err = restore(&bad, &options(&target)).unwrap_err();
    assert!(matches!(err, RestoreError::HashMismatch { .. }), "{err}");

    let err = restore(&bare, &options(&target)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "snapshot missing hash but --skip-hash-check=false"
    );
    let opts = RestoreOptions {
        bump_revision: 5,
        ..options(&target)
    };
    assert!(matches!(
        restore(&snap, &opts),
        Err(RestoreError::BumpWithoutMark)
    ));
    let opts = RestoreOptions {
        name: "other".into(),
        ..options(&target)
    };
    assert!(matches!(
        restore(&snap, &opts),
        Err(RestoreError::Cluster(_))
    ));
    assert_eq!(leftovers(tmp.path(), &keep), Vec::<String>::new());

    // An empty target directory is taken, and a database without its hash is restored
    // when asked to skip the check.
    std::fs::create_dir(&target).unwrap();
    let opts = RestoreOptions {
        skip_hash_check: true,
        ..options(&target)
    };
    let restored = restore(&bare, &opts).unwrap();
    assert_eq!(restored.data_dir, target);
    assert_eq!(
        all(&open_restored(&restored), 0).unwrap(),
        all(&src, 0).unwrap()
    );
}

#[test]
fn a_snapshot_with_authentication_enabled_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source_store(tmp.path());
    let plain = tmp.path().join("plain.db");
    export(&src.view().unwrap(), &plain, "3.5.13").unwrap();
    // The same database with `authEnabled` set, as etcd writes it on `auth enable`.
    let db = keel_bbolt::Db::open(&plain).unwrap();
    let enabled = tmp.path().join("enabled.db");
    let mut w = keel_bbolt::Writer::create(&enabled).unwrap();
    for name in db.buckets().unwrap() {
        w.begin_bucket(&name).unwrap();
        if name == schema::AUTH {
            w.put(schema::AUTH_ENABLED, &[1]).unwrap();
        }
        for pair in db.entries(&name).unwrap() {
            let (k, v) = pair.unwrap();
            w.put(&k, &v).unwrap();
        }
    }
    w.finish().unwrap();
    sealed::seal(&enabled).unwrap();
    let target = tmp.path().join("r");
    let err = restore(&enabled, &options(&target)).unwrap_err();
    assert!(matches!(err, RestoreError::AuthEnabled), "{err}");
    assert!(!target.exists());
}
