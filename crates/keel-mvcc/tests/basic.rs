//! Scenario tests of the public API against etcd 3.5's documented behaviour.

use std::time::Duration;

use keel_mvcc::{Mvcc, MvccError};
use keel_proto::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use keel_proto::etcdserverpb::request_op::Request;
use keel_proto::etcdserverpb::response_op::Response;
use keel_proto::etcdserverpb::{
    CompactionRequest, Compare, DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, TxnRequest,
};
use keel_proto::mvccpb::KeyValue;
use keel_proto::mvccpb::event::EventType;
use prost::Message;

fn open() -> (tempfile::TempDir, Mvcc) {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = Mvcc::open(&dir.path().join("db")).expect("open");
    (dir, m)
}

fn no_leases(_: i64) -> bool {
    false
}

/// Waits for the background compactor to finish what was applied.
fn compacted(m: &Mvcc) {
    assert!(m.finish_compaction(Duration::from_secs(60)).unwrap());
}

fn put(k: &str, v: &str) -> PutRequest {
    PutRequest {
        key: k.into(),
        value: v.into(),
        ..Default::default()
    }
}

fn get(m: &Mvcc, k: &str) -> Option<KeyValue> {
    let r = m
        .range(&RangeRequest {
            key: k.into(),
            ..Default::default()
        })
        .expect("range");
    r.kvs.into_iter().next()
}

#[test]
fn revisions_versions_and_headers() {
    let (_d, m) = open();
    assert_eq!(m.current_revision(), 1);
    assert_eq!(m.compact_revision(), -1);
    assert_eq!(m.applied_index(), 0);
    let mut b = m.begin_apply(&no_leases);
    assert_eq!(b.put(&put("a", "1")).unwrap().header.unwrap().revision, 2);
    let r = b
        .put(&PutRequest {
            prev_kv: true,
            ..put("a", "2")
        })
        .unwrap();
    assert_eq!(r.header.unwrap().revision, 3);
    assert_eq!(r.prev_kv.unwrap().value, b"1");
    // Delete of nothing: no bump, header is the current revision.
    let d = b
        .delete_range(&DeleteRangeRequest {
            key: "zz".into(),
            ..Default::default()
        })
        .unwrap();
    assert_eq!((d.deleted, d.header.unwrap().revision), (0, 3));
    let d = b
        .delete_range(&DeleteRangeRequest {
            key: "a".into(),
            prev_kv: true,
            ..Default::default()
        })
        .unwrap();
    assert_eq!((d.deleted, d.header.unwrap().revision), (1, 4));
    assert_eq!(d.prev_kvs[0].version, 2);
    b.put(&put("a", "3")).unwrap();
    // Not visible before commit.
    assert_eq!(m.current_revision(), 1);
    let events = b.commit(7).unwrap();
    assert_eq!(m.applied_index(), 7);
    assert_eq!(m.current_revision(), 5);
    let kv = get(&m, "a").unwrap();
    assert_eq!((kv.create_revision, kv.mod_revision, kv.version), (5, 5, 1));

    let types: Vec<i32> = events.iter().map(|e| e.r#type).collect();
    let put_t = EventType::Put as i32;
    let del_t = EventType::Delete as i32;
    assert_eq!(types, vec![put_t, put_t, del_t, put_t]);
    assert!(events[0].prev_kv.is_none());
    assert_eq!(events[1].prev_kv.as_ref().unwrap().value, b"1");
    let del = &events[2];
    assert_eq!(
        del.kv.as_ref().unwrap(),
        &KeyValue {
            key: "a".into(),
            mod_revision: 4,
            ..Default::default()
        }
    );
    assert_eq!(del.prev_kv.as_ref().unwrap().mod_revision, 3);
    assert!(events[3].prev_kv.is_none());

    // Range at old revisions, header carries the current revision.
    let r = m
        .range(&RangeRequest {
            key: "a".into(),
            revision: 3,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(r.header.unwrap().revision, 5);
    assert_eq!(r.kvs[0].value, b"2");
    let r = m
        .range(&RangeRequest {
            key: "a".into(),
            revision: 4,
            ..Default::default()
        })
        .unwrap();
    assert!(r.kvs.is_empty());
    assert_eq!(r.count, 0);
    assert!(matches!(
        m.range(&RangeRequest {
            key: "a".into(),
            revision: 6,
            ..Default::default()
        }),
        Err(MvccError::FutureRevision)
    ));
}

#[test]
fn range_limit_count_sort_and_filters() {
    let (_d, m) = open();
    let mut b = m.begin_apply(&no_leases);
    for (k, v) in [("k1", "c"), ("k2", "a"), ("k3", "b"), ("k4", "a")] {
        b.put(&put(k, v)).unwrap();
    }
    b.put(&put("k2", "z")).unwrap();
    b.commit(1).unwrap();
    let all = RangeRequest {
        key: "k".into(),
        range_end: "l".into(),
        ..Default::default()
    };
    let r = m
        .range(&RangeRequest {
            limit: 2,
            ..all.clone()
        })
        .unwrap();
    assert_eq!((r.kvs.len(), r.count, r.more), (2, 4, true));
    let r = m
        .range(&RangeRequest {
            limit: 4,
            ..all.clone()
        })
        .unwrap();
    assert!(!r.more);
    let r = m
        .range(&RangeRequest {
            count_only: true,
            limit: 1,
            ..all.clone()
        })
        .unwrap();
    assert_eq!((r.kvs.len(), r.count, r.more), (0, 4, false));
    let r = m
        .range(&RangeRequest {
            keys_only: true,
            ..all.clone()
        })
        .unwrap();
    assert!(r.kvs.iter().all(|kv| kv.value.is_empty() && kv.version > 0));
    // sort by value descending; target != KEY with order NONE means ascending.
    let r = m
        .range(&RangeRequest {
            sort_order: 2,
            sort_target: 4,
            ..all.clone()
        })
        .unwrap();
    let vals: Vec<_> = r.kvs.iter().map(|kv| kv.value.clone()).collect();
    assert_eq!(
        vals,
        vec![b"z".to_vec(), b"c".to_vec(), b"b".to_vec(), b"a".to_vec()]
    );
    let r = m
        .range(&RangeRequest {
            sort_target: 3,
            ..all.clone()
        })
        .unwrap();
    assert_eq!(r.kvs.last().unwrap().key, b"k2");
    // Filters do not change count.
    let r = m
        .range(&RangeRequest {
            min_mod_revision: 4,
            ..all.clone()
        })
        .unwrap();
    assert_eq!((r.kvs.len(), r.count), (3, 4));
    let r = m
        .range(&RangeRequest {
            max_create_revision: 3,
            limit: 1,
            ..all.clone()
        })
        .unwrap();
    assert_eq!((r.kvs.len(), r.count, r.more), (1, 4, true));
    // From-key and all-keys ranges.
    let r = m
        .range(&RangeRequest {
            key: "k3".into(),
            range_end: vec![0],
            ..Default::default()
        })
        .unwrap();
    assert_eq!(r.count, 2);
    let r = m
        .range(&RangeRequest {
            key: vec![0],
            range_end: vec![0],
            ..Default::default()
        })
        .unwrap();
    assert_eq!(r.count, 4);
}

fn cmp_mod(k: &str, result: CompareResult, rev: i64) -> Compare {
    Compare {
        key: k.into(),
        target: CompareTarget::Mod as i32,
        result: result as i32,
        target_union: Some(TargetUnion::ModRevision(rev)),
        ..Default::default()
    }
}

fn op(r: Request) -> RequestOp {
    RequestOp { request: Some(r) }
}

#[test]
fn txn_semantics() {
    let (_d, m) = open();
    let mut b = m.begin_apply(&no_leases);
    b.put(&put("a", "1")).unwrap();
    // Failed compare with only reads: no bump.
    let t = TxnRequest {
        compare: vec![cmp_mod("a", CompareResult::Equal, 99)],
        success: vec![op(Request::RequestPut(put("a", "x")))],
        failure: vec![op(Request::RequestRange(RangeRequest {
            key: "a".into(),
            ..Default::default()
        }))],
    };
    let r = b.txn(&t).unwrap();
    assert!(!r.succeeded);
    assert_eq!(r.header.unwrap().revision, 2);
    // Success: put, then a range that sees it, a delete and a nested txn, all at revision 3.
    let nested = TxnRequest {
        compare: vec![cmp_mod("missing", CompareResult::Equal, 0)],
        success: vec![op(Request::RequestPut(put("n", "1")))],
        failure: vec![],
    };
    let t = TxnRequest {
        compare: vec![cmp_mod("a", CompareResult::Equal, 2)],
        success: vec![
            op(Request::RequestPut(PutRequest {
                prev_kv: true,
                ..put("b", "1")
            })),
            op(Request::RequestRange(RangeRequest {
                key: "b".into(),
                ..Default::default()
            })),
            op(Request::RequestDeleteRange(DeleteRangeRequest {
                key: "a".into(),
                ..Default::default()
            })),
            op(Request::RequestTxn(nested)),
        ],
        failure: vec![],
    };
    let r = b.txn(&t).unwrap();
    assert!(r.succeeded);
    assert_eq!(r.header.unwrap().revision, 3);
    let Some(Response::ResponsePut(p)) = &r.responses[0].response else {
        panic!()
    };
    assert_eq!(p.header.unwrap().revision, 3);
    let Some(Response::ResponseRange(g)) = &r.responses[1].response else {
        panic!()
    };
    assert_eq!(g.header.unwrap().revision, 3);
    assert_eq!(g.kvs[0].mod_revision, 3);
    let Some(Response::ResponseDeleteRange(d)) = &r.responses[2].response else {
        panic!()
    };
    assert_eq!(d.deleted, 1);
    let Some(Response::ResponseTxn(n)) = &r.responses[3].response else {
        panic!()
    };
    assert!(n.succeeded);
    assert_eq!(n.header.unwrap().revision, 0);
    let events = b.commit(1).unwrap();
    assert_eq!(events.len(), 4);
    assert_eq!(events[0].kv.as_ref().unwrap().mod_revision, 2);
    assert!(
        events[1..]
            .iter()
            .all(|e| e.kv.as_ref().unwrap().mod_revision == 3)
    );
    assert_eq!(get(&m, "n").unwrap().mod_revision, 3);
    assert_eq!(m.current_revision(), 3);
}

#[test]
fn txn_failures_change_nothing() {
    let (_d, m) = open();
    let leases = |id: i64| id == 7;
    let mut b = m.begin_apply(&leases);
    b.put(&put("a", "1")).unwrap();
    // ignore_value on a missing key inside a txn.
    let t = TxnRequest {
        success: vec![
            op(Request::RequestPut(put("x", "1"))),
            op(Request::RequestPut(PutRequest {
                key: "missing".into(),
                ignore_value: true,
                ..Default::default()
            })),
        ],
        ..Default::default()
    };
    assert!(matches!(b.txn(&t), Err(MvccError::KeyNotFound)));
    // Unknown lease inside a txn.
    let t = TxnRequest {
        success: vec![op(Request::RequestPut(PutRequest {
            lease: 8,
            ..put("x", "1")
        }))],
        ..Default::default()
    };
    assert!(matches!(b.txn(&t), Err(MvccError::LeaseNotFound(8))));
    // Range at a future revision inside a txn.
    let t = TxnRequest {
        success: vec![
            op(Request::RequestPut(put("x", "1"))),
            op(Request::RequestRange(RangeRequest {
                key: "x".into(),
                revision: 3,
                ..Default::default()
            })),
        ],
        ..Default::default()
    };
    assert!(matches!(b.txn(&t), Err(MvccError::FutureRevision)));
    // A delete earlier in the txn makes a later ignore_value put fail during execution.
    let t = TxnRequest {
        success: vec![
            op(Request::RequestDeleteRange(DeleteRangeRequest {
                key: "a".into(),
                ..Default::default()
            })),
            op(Request::RequestPut(PutRequest {
                key: "a".into(),
                ignore_value: true,
                ..Default::default()
            })),
        ],
        ..Default::default()
    };
    assert!(matches!(b.txn(&t), Err(MvccError::KeyNotFound)));
    assert!(matches!(
        b.put(&PutRequest {
            lease: 9,
            ..put("y", "1")
        }),
        Err(MvccError::LeaseNotFound(9))
    ));
    let ok = b
        .put(&PutRequest {
            lease: 7,
            ..put("y", "1")
        })
        .unwrap();
    assert_eq!(ok.header.unwrap().revision, 3);
    let events = b.commit(1).unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(get(&m, "a").unwrap().version, 1);
    assert!(get(&m, "x").is_none());
    assert_eq!(get(&m, "y").unwrap().lease, 7);
    // ignore_lease keeps the lease; ignore_value keeps the value but takes the request's lease (0).
    let mut b = m.begin_apply(&leases);
    b.put(&PutRequest {
        key: "y".into(),
        value: "2".into(),
        ignore_lease: true,
        ..Default::default()
    })
    .unwrap();
    b.put(&PutRequest {
        key: "y".into(),
        ignore_value: true,
        ..Default::default()
    })
    .unwrap();
    b.commit(2).unwrap();
    let y = get(&m, "y").unwrap();
    assert_eq!(
        (y.value.as_slice(), y.lease, y.version),
        (b"2".as_slice(), 0, 3)
    );
}

#[test]
fn compaction_rules() {
    let (_d, m) = open();
    let mut b = m.begin_apply(&no_leases);
    b.put(&put("a", "1")).unwrap(); // 2
    b.put(&put("a", "2")).unwrap(); // 3
    b.put(&put("b", "1")).unwrap(); // 4
    b.delete_range(&DeleteRangeRequest {
        key: "b".into(),
        ..Default::default()
    })
    .unwrap(); // 5
    b.put(&put("c", "1")).unwrap(); // 6
    assert!(matches!(
        b.compact(&CompactionRequest {
            revision: 7,
            physical: false
        }),
        Err(MvccError::FutureRevision)
    ));
    let r = b
        .compact(&CompactionRequest {
            revision: 5,
            physical: true,
        })
        .unwrap();
    assert_eq!(r.header.unwrap().revision, 6);
    assert!(matches!(
        b.compact(&CompactionRequest {
            revision: 5,
            physical: false
        }),
        Err(MvccError::Compacted)
    ));
    b.commit(1).unwrap();
    assert_eq!(m.compact_revision(), 5);
    compacted(&m);
    assert!(matches!(
        m.range(&RangeRequest {
            key: "a".into(),
            revision: 4,
            ..Default::default()
        }),
        Err(MvccError::Compacted)
    ));
    let r = m
        .range(&RangeRequest {
            key: "a".into(),
            revision: 5,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(r.kvs[0].value, b"2");
    // a's old revision (2) is gone; a@3 and c@6 are kept, and so is b's tombstone at exactly
    // the compaction revision (5), so that a watch resumed there still sees that delete.
    assert_eq!(m.indexed_keys(), 3);
    assert!(matches!(m.hash_kv(5), Err(MvccError::Compacted)));
    assert!(matches!(m.hash_kv(7), Err(MvccError::FutureRevision)));
    let h = m.hash_kv(0).unwrap();
    assert_eq!((h.compact_revision, h.hash_revision), (5, 6));
}

/// HashKV hashes etcd's bytes: "key", then each backend key and protobuf value.
#[test]
fn hash_kv_uses_etcds_layout() {
    let (_d, m) = open();
    assert_eq!(m.hash_kv(0).unwrap().compact_revision, -1);
    let mut b = m.begin_apply(&no_leases);
    b.put(&put("foo", "bar")).unwrap();
    b.delete_range(&DeleteRangeRequest {
        key: "foo".into(),
        ..Default::default()
    })
    .unwrap();
    b.commit(1).unwrap();
    let mut bytes = b"key".to_vec();
    bytes.extend_from_slice(b"\0\0\0\0\0\0\0\x02_\0\0\0\0\0\0\0\0");
    bytes.extend(
        KeyValue {
            key: "foo".into(),
            value: "bar".into(),
            create_revision: 2,
            mod_revision: 2,
            version: 1,
            lease: 0,
        }
        .encode_to_vec(),
    );
    let first = bytes.len();
    bytes.extend_from_slice(b"\0\0\0\0\0\0\0\x03_\0\0\0\0\0\0\0\0t");
    bytes.extend(
        KeyValue {
            key: "foo".into(),
            ..Default::default()
        }
        .encode_to_vec(),
    );
    let h = m.hash_kv(0).unwrap();
    assert_eq!(h.hash, crc32c::crc32c(&bytes));
    assert_eq!(h.hash_revision, 3);
    assert_eq!(m.hash_kv(2).unwrap().hash, crc32c::crc32c(&bytes[..first]));
}

#[test]
fn dropped_batch_and_readers_see_nothing() {
    let (_d, m) = open();
    let mut b = m.begin_apply(&no_leases);
    b.put(&put("a", "1")).unwrap();
    b.commit(1).unwrap();
    {
        let mut b = m.begin_apply(&no_leases);
        b.put(&put("a", "2")).unwrap();
        b.put(&put("new", "1")).unwrap();
        b.delete_range(&DeleteRangeRequest {
            key: "a".into(),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(get(&m, "a").unwrap().value, b"1");
        assert!(get(&m, "new").is_none());
    }
    assert_eq!(m.current_revision(), 2);
    assert_eq!(get(&m, "a").unwrap().version, 1);
    assert_eq!(m.indexed_keys(), 1);
    let mut b = m.begin_apply(&no_leases);
    assert_eq!(b.put(&put("a", "3")).unwrap().header.unwrap().revision, 3);
    b.commit(2).unwrap();
    assert_eq!(get(&m, "a").unwrap().version, 2);
}

#[test]
fn restart_restores_state_and_applied_index() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let (hash, hash_kv) = {
        let m = Mvcc::open(&path).unwrap();
        for i in 0..5u64 {
            let mut b = m.begin_apply(&no_leases);
            b.put(&put(&format!("k{i}"), "v")).unwrap();
            b.put(&put("k0", &format!("v{i}"))).unwrap();
            if i == 3 {
                b.delete_range(&DeleteRangeRequest {
                    key: "k1".into(),
                    ..Default::default()
                })
                .unwrap();
                b.compact(&CompactionRequest {
                    revision: 6,
                    physical: false,
                })
                .unwrap();
            }
            b.set_meta("alarm", &[i as u8]);
            b.commit(10 + i).unwrap();
        }
        compacted(&m);
        m.sync().unwrap();
        (m.hash().unwrap(), m.hash_kv(0).unwrap())
    };
    let m = Mvcc::open(&path).unwrap();
    assert_eq!(m.applied_index(), 14);
    assert_eq!(m.current_revision(), 12);
    assert_eq!(m.compact_revision(), 6);
    assert_eq!(m.hash().unwrap(), hash);
    assert_eq!(m.hash_kv(0).unwrap(), hash_kv);
    assert_eq!(m.meta("alarm").unwrap(), Some(vec![4]));
    assert_eq!(m.meta("none").unwrap(), None);
    let k0 = get(&m, "k0").unwrap();
    assert_eq!((k0.version, k0.value.as_slice()), (6, b"v4".as_slice()));
    // Created at revision 2 (the first write), its history compacted to one revision: the index rebuilt from
    // the backend keeps the creation, not the oldest revision left.
    assert_eq!((k0.create_revision, k0.mod_revision), (2, 12));
    assert!(get(&m, "k1").is_none());
    let mut b = m.begin_apply(&no_leases);
    assert_eq!(b.put(&put("k0", "x")).unwrap().header.unwrap().revision, 13);
    b.commit(15).unwrap();
    let k0 = get(&m, "k0").unwrap();
    assert_eq!(
        (k0.version, k0.create_revision, k0.mod_revision),
        (7, 2, 13)
    );
}

#[test]
fn maintenance() {
    let (d, m) = open();
    let mut b = m.begin_apply(&no_leases);
    for i in 0..200 {
        b.put(&put(&format!("key{i:04}"), &"x".repeat(512)))
            .unwrap();
    }
    b.commit(1).unwrap();
    let mut b = m.begin_apply(&no_leases);
    b.delete_range(&DeleteRangeRequest {
        key: "key".into(),
        range_end: "kez".into(),
        ..Default::default()
    })
    .unwrap();
    b.compact(&CompactionRequest {
        revision: 202,
        physical: true,
    })
    .unwrap();
    b.commit(2).unwrap();
    compacted(&m);
    assert!(m.db_size() > 0);
    assert!(m.db_size_in_use() > 0);
    let before = m.hash().unwrap();
    m.defragment().unwrap();
    assert_eq!(m.hash().unwrap(), before);
    let snap = d.path().join("snap");
    m.write_snapshot(&snap).unwrap();
    let s = Mvcc::open(&snap).unwrap();
    assert_eq!(s.hash().unwrap(), before);
    assert_eq!(s.applied_index(), 2);
    assert_eq!(s.current_revision(), 202);
    assert_eq!(s.compact_revision(), 202);
}

/// A tombstone kept at the compaction revision hashes the same before and after a reopen.
#[test]
fn tombstone_at_compaction_revision_survives_reopen() {
    let (d, m) = open();
    let none = |_: i64| false;
    let mut b = m.begin_apply(&none);
    b.put(&PutRequest {
        key: "a".into(),
        value: "1".into(),
        ..Default::default()
    })
    .unwrap();
    b.delete_range(&DeleteRangeRequest {
        key: "a".into(),
        ..Default::default()
    })
    .unwrap();
    b.put(&PutRequest {
        key: "b".into(),
        value: "1".into(),
        ..Default::default()
    })
    .unwrap();
    b.compact(&CompactionRequest {
        revision: 3,
        physical: true,
    })
    .unwrap();
    b.commit(1).unwrap();
    compacted(&m);
    let before = m.hash_kv(0).unwrap();
    let keys = m.indexed_keys();
    m.sync().unwrap();
    let path = d.path().join("db");
    drop(m);
    let m = Mvcc::open(&path).unwrap();
    assert_eq!(
        m.indexed_keys(),
        keys,
        "index rebuilt with the kept tombstone"
    );
    assert_eq!(m.hash_kv(0).unwrap(), before);
    // The key is dead after the reopen; a put creates it again, in a new generation.
    assert!(get(&m, "a").is_none());
    let mut b = m.begin_apply(&none);
    b.put(&PutRequest {
        key: "a".into(),
        value: "2".into(),
        ..Default::default()
    })
    .unwrap();
    b.commit(2).unwrap();
    let a = get(&m, "a").unwrap();
    assert_eq!((a.version, a.create_revision, a.mod_revision), (1, 5, 5));
}

#[test]
fn read_only_txns_are_answered_as_a_batch_answers_them() {
    let (_d, m) = open();
    let mut b = m.begin_apply(&no_leases);
    for (k, v) in [("a", "1"), ("b", "2"), ("a", "3"), ("c", "4")] {
        b.put(&put(k, v)).unwrap();
    }
    b.commit(1).unwrap();
    let mut b = m.begin_apply(&no_leases);
    b.compact(&CompactionRequest {
        revision: 2,
        ..Default::default()
    })
    .unwrap();
    b.commit(2).unwrap();
    let range = |key: &str, end: &str, revision: i64| {
        op(Request::RequestRange(RangeRequest {
            key: key.into(),
            range_end: end.into(),
            revision,
            limit: 1,
            ..Default::default()
        }))
    };
    let txns = [
        TxnRequest {
            compare: vec![cmp_mod("a", CompareResult::Equal, 4)],
            success: vec![range("a", "z", 0), range("b", "", 3)],
            failure: vec![range("c", "", 0)],
        },
        TxnRequest {
            compare: vec![cmp_mod("a", CompareResult::Equal, 2)],
            success: vec![],
            failure: vec![range("a", "\0", 0), range("a", "", 4)],
        },
        TxnRequest::default(),
        // Refused alike: a compacted and a future revision.
        TxnRequest {
            success: vec![range("a", "", 1)],
            ..Default::default()
        },
        TxnRequest {
            success: vec![range("a", "", 9)],
            ..Default::default()
        },
    ];
    for t in &txns {
        assert!(keel_mvcc::is_txn_readonly(t));
        let read = m.read_txn(t).map_err(|e| e.to_string());
        let mut b = m.begin_apply(&no_leases);
        let applied = b.txn(t).map_err(|e| e.to_string());
        drop(b);
        assert_eq!(read, applied, "{t:?}");
    }
    assert_eq!(m.current_revision(), 5, "reads bump nothing");
    let writes = TxnRequest {
        success: vec![op(Request::RequestPut(put("a", "x")))],
        ..Default::default()
    };
    assert!(!keel_mvcc::is_txn_readonly(&writes));
    assert!(matches!(m.read_txn(&writes), Err(MvccError::TxnWrites)));
    assert_eq!(get(&m, "a").unwrap().mod_revision, 4);
}

/// Batches that write no key (metadata only, or only a compaction) keep the store revision
/// across a reopen, and a compaction-only batch keeps its compact revision.
#[test]
fn batches_without_writes_keep_the_revisions_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    {
        let m = Mvcc::open(&path).unwrap();
        let mut b = m.begin_apply(&no_leases);
        b.put(&put("a", "1")).unwrap();
        b.put(&put("a", "2")).unwrap();
        b.commit(1).unwrap();
        let mut b = m.begin_apply(&no_leases);
        b.set_meta("alarm", b"x");
        b.commit(2).unwrap();
        let mut b = m.begin_apply(&no_leases);
        b.compact(&CompactionRequest {
            revision: 2,
            physical: false,
        })
        .unwrap();
        b.commit(3).unwrap();
        let b = m.begin_apply(&no_leases);
        b.commit(4).unwrap();
        compacted(&m);
        m.sync().unwrap();
    }
    let m = Mvcc::open(&path).unwrap();
    assert_eq!(m.applied_index(), 4);
    assert_eq!(m.current_revision(), 3);
    assert_eq!(m.compact_revision(), 2);
    assert_eq!(m.finished_compact_revision(), 2);
    assert_eq!(m.meta("alarm").unwrap(), Some(b"x".to_vec()));
    assert_eq!(get(&m, "a").unwrap().value, b"2");
}
