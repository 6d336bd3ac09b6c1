//! Property test: random sequences of batches of put / delete_range / txn (with compares over
//! ranges) / compact, reads at random revisions, abandoned batches and reopens, checked response
//! by response against a simple `BTreeMap` model of etcd's semantics.

use std::collections::BTreeMap;
use std::time::Duration;

use keel_mvcc::{Mvcc, MvccError};
use keel_proto::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use keel_proto::etcdserverpb::request_op::Request;
use keel_proto::etcdserverpb::response_op::Response;
use keel_proto::etcdserverpb::{
    CompactionRequest, Compare, DeleteRangeRequest, DeleteRangeResponse, PutRequest, PutResponse,
    RangeRequest, RangeResponse, RequestOp, ResponseHeader, ResponseOp, TxnRequest, TxnResponse,
};
use keel_proto::mvccpb::event::EventType;
use keel_proto::mvccpb::{Event, KeyValue};
use proptest::prelude::*;

const KEYS: [&[u8]; 5] = [b"a", b"b", b"b1", b"c", b"d"];

fn hdr(revision: i64) -> Option<ResponseHeader> {
    Some(ResponseHeader {
        revision,
        ..Default::default()
    })
}

/// The model: every version of every key, never physically removed.
#[derive(Clone, Debug)]
struct Model {
    rev: i64,
    compact: i64,
    hist: BTreeMap<Vec<u8>, Vec<(i64, Option<KeyValue>)>>,
    events: Vec<Event>,
}

#[derive(Debug, PartialEq)]
enum Err {
    Compacted,
    Future,
    KeyNotFound,
    Other(String),
}

fn err(e: MvccError) -> Err {
    match e {
        MvccError::Compacted => Err::Compacted,
        MvccError::FutureRevision => Err::Future,
        MvccError::KeyNotFound => Err::KeyNotFound,
        e => Err::Other(e.to_string()),
    }
}

fn in_range(k: &[u8], key: &[u8], end: &[u8]) -> bool {
    if end.is_empty() {
        k == key
    } else if end == [0] {
        k >= key
    } else {
        k >= key && k < end
    }
}

impl Model {
    fn new() -> Model {
        Model {
            rev: 1,
            compact: -1,
            hist: BTreeMap::new(),
            events: Vec::new(),
        }
    }

    fn at(&self, key: &[u8], at: i64) -> Option<KeyValue> {
        self.hist
            .get(key)?
            .iter()
            .rev()
            .find(|(r, _)| *r <= at)
            .and_then(|(_, kv)| kv.clone())
    }

    fn keys_at(&self, key: &[u8], end: &[u8], at: i64) -> Vec<KeyValue> {
        self.hist
            .keys()
            .filter(|k| in_range(k, key, end))
            .filter_map(|k| self.at(k, at))
            .collect()
    }

    fn range(&self, r: &RangeRequest, cur: i64) -> Result<RangeResponse, Err> {
        let mut rev = r.revision;
        if rev > cur {
            return Err(Err::Future);
        }
        if rev <= 0 {
            rev = cur;
        }
        if rev < self.compact {
            return Err(Err::Compacted);
        }
        let mut kvs = self.keys_at(&r.key, &r.range_end, rev);
        let count = kvs.len() as i64;
        if r.count_only {
            kvs.clear();
        }
        let mut more = false;
        if r.limit > 0 && kvs.len() as i64 > r.limit {
            kvs.truncate(r.limit as usize);
            more = true;
        }
        if r.keys_only {
            kvs.iter_mut().for_each(|kv| kv.value.clear());
        }
        Ok(RangeResponse {
            header: hdr(cur),
            kvs,
            more,
            count,
        })
    }

    fn put(&mut self, p: &PutRequest, begin: i64, changes: &mut i64) -> Result<PutResponse, Err> {
        let rev = begin + 1;
        let prev = self.at(&p.key, rev);
        if p.ignore_value && prev.is_none() {
            return Err(Err::KeyNotFound);
        }
        let kv = KeyValue {
            key: p.key.clone(),
            create_revision: prev.as_ref().map_or(rev, |k| k.create_revision),
            mod_revision: rev,
            version: prev.as_ref().map_or(0, |k| k.version) + 1,
            value: if p.ignore_value {
                prev.clone().unwrap_or_default().value
            } else {
                p.value.clone()
            },
            lease: 0,
        };
        self.hist
            .entry(p.key.clone())
            .or_default()
            .push((rev, Some(kv.clone())));
        *changes += 1;
        self.events.push(Event {
            r#type: EventType::Put as i32,
            kv: Some(kv),
            prev_kv: prev.clone(),
        });
        Ok(PutResponse {
            header: hdr(rev),
            prev_kv: if p.prev_kv { prev } else { None },
        })
    }

    fn delete(
        &mut self,
        d: &DeleteRangeRequest,
        begin: i64,
        changes: &mut i64,
    ) -> DeleteRangeResponse {
        let rev = begin + 1;
        let read = begin + i64::from(*changes > 0);
        let victims = self.keys_at(&d.key, &d.range_end, read);
        for v in &victims {
            self.hist
                .entry(v.key.clone())
                .or_default()
                .push((rev, None));
            *changes += 1;
            self.events.push(Event {
                r#type: EventType::Delete as i32,
                kv: Some(KeyValue {
                    key: v.key.clone(),
                    mod_revision: rev,
                    ..Default::default()
                }),
                prev_kv: Some(v.clone()),
            });
        }
        let deleted = victims.len() as i64;
        DeleteRangeResponse {
            header: hdr(if deleted != 0 || *changes > 0 {
                rev
            } else {
                begin
            }),
            deleted,
            prev_kvs: if d.prev_kv { victims } else { Vec::new() },
        }
    }

    fn compare(&self, c: &Compare) -> bool {
        let kvs = self.keys_at(&c.key, &c.range_end, self.rev);
        let check = |kv: &KeyValue| {
            let ord = match (&c.target_union, CompareTarget::try_from(c.target)) {
                (Some(TargetUnion::Version(v)), _) => kv.version.cmp(v),
                (Some(TargetUnion::CreateRevision(v)), _) => kv.create_revision.cmp(v),
                (Some(TargetUnion::ModRevision(v)), _) => kv.mod_revision.cmp(v),
                (Some(TargetUnion::Value(v)), _) => kv.value.as_slice().cmp(v.as_slice()),
                _ => std::cmp::Ordering::Equal,
            };
            match CompareResult::try_from(c.result) {
                Ok(CompareResult::Equal) => ord.is_eq(),
                Ok(CompareResult::NotEqual) => ord.is_ne(),
                Ok(CompareResult::Greater) => ord.is_gt(),
                _ => ord.is_lt(),
            }
        };
        if kvs.is_empty() {
            return c.target != CompareTarget::Value as i32 && check(&KeyValue::default());
        }
        kvs.iter().all(check)
    }

    fn txn(&mut self, t: &TxnRequest) -> Result<TxnResponse, Err> {
        let ok = t.compare.iter().all(|c| self.compare(c));
        let ops = if ok { &t.success } else { &t.failure };
        for o in ops {
            match &o.request {
                Some(Request::RequestPut(p))
                    if p.ignore_value && self.at(&p.key, self.rev).is_none() =>
                {
                    return Err(Err::KeyNotFound);
                }
                _ => {}
            }
        }
        for o in ops {
            if let Some(Request::RequestRange(r)) = &o.request {
                if r.revision != 0 && r.revision > self.rev {
                    return Err(Err::Future);
                }
                if r.revision != 0 && r.revision < self.compact {
                    return Err(Err::Compacted);
                }
            }
        }
        let saved = self.clone();
        let begin = self.rev;
        let mut changes = 0;
        let mut responses = Vec::new();
        for o in ops {
            let response = match &o.request {
                Some(Request::RequestPut(p)) => match self.put(p, begin, &mut changes) {
                    Ok(r) => Response::ResponsePut(r),
                    Err(e) => {
                        *self = saved;
                        return Err(e);
                    }
                },
                Some(Request::RequestDeleteRange(d)) => {
                    Response::ResponseDeleteRange(self.delete(d, begin, &mut changes))
                }
                Some(Request::RequestRange(r)) => {
                    let cur = begin + i64::from(changes > 0);
                    Response::ResponseRange(
                        self.range(r, cur).map_err(|_| Err::Other("range".into()))?,
                    )
                }
                _ => unreachable!("not generated"),
            };
            responses.push(ResponseOp {
                response: Some(response),
            });
        }
        if changes > 0 {
            self.rev += 1;
        }
        Ok(TxnResponse {
            header: hdr(self.rev),
            succeeded: ok,
            responses,
        })
    }
}

#[derive(Debug, Clone)]
enum End {
    Single,
    Upto(usize),
    FromKey,
}

fn end_bytes(e: &End) -> Vec<u8> {
    match e {
        End::Single => Vec::new(),
        End::Upto(i) => KEYS[*i].to_vec(),
        End::FromKey => vec![0],
    }
}

#[derive(Debug, Clone)]
enum TOp {
    Put {
        key: usize,
        val: u8,
        prev_kv: bool,
        ignore_value: bool,
    },
    Delete {
        key: usize,
        end: End,
        prev_kv: bool,
    },
    Range {
        key: usize,
        end: End,
        back: i64,
        limit: i64,
    },
}

#[derive(Debug, Clone)]
enum Op {
    Write(TOp),
    Txn {
        cmps: Vec<(usize, End, u8, u8, i64)>,
        success: Vec<TOp>,
        failure: Vec<TOp>,
    },
    Compact {
        back: i64,
    },
    Read {
        key: usize,
        end: End,
        back: i64,
        limit: i64,
        count_only: bool,
        keys_only: bool,
    },
    Commit,
    Abandon,
    Reopen,
}

fn end() -> impl Strategy<Value = End> {
    prop_oneof![
        Just(End::Single),
        (0..KEYS.len()).prop_map(End::Upto),
        Just(End::FromKey)
    ]
}

fn top() -> impl Strategy<Value = TOp> {
    prop_oneof![
        4 => (0..KEYS.len(), 0u8..4, any::<bool>(), prop::bool::weighted(0.15))
            .prop_map(|(key, val, prev_kv, ignore_value)| TOp::Put { key, val, prev_kv, ignore_value }),
        2 => (0..KEYS.len(), end(), any::<bool>()).prop_map(|(key, end, prev_kv)| TOp::Delete { key, end, prev_kv }),
        1 => (0..KEYS.len(), end(), 0i64..6, 0i64..3).prop_map(|(key, end, back, limit)| TOp::Range { key, end, back, limit }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => top().prop_map(Op::Write),
        3 => (
            prop::collection::vec((0..KEYS.len(), end(), 0u8..4, 0u8..4, 0i64..8), 0..3),
            prop::collection::vec(top(), 0..4),
            prop::collection::vec(top(), 0..3),
        ).prop_map(|(cmps, success, failure)| Op::Txn { cmps, success, failure }),
        1 => (0i64..6).prop_map(|back| Op::Compact { back }),
        3 => (0..KEYS.len(), end(), 0i64..8, 0i64..3, prop::bool::weighted(0.2), prop::bool::weighted(0.2))
            .prop_map(|(key, end, back, limit, count_only, keys_only)| Op::Read { key, end, back, limit, count_only, keys_only }),
        2 => Just(Op::Commit),
        1 => Just(Op::Abandon),
        1 => Just(Op::Reopen),
    ]
}

fn to_request(t: &TOp, rev: i64) -> RequestOp {
    let r = match t {
        TOp::Put {
            key,
            val,
            prev_kv,
            ignore_value,
        } => Request::RequestPut(PutRequest {
            key: KEYS[*key].to_vec(),
            value: if *ignore_value {
                Vec::new()
            } else {
                vec![b'0' + val]
            },
            prev_kv: *prev_kv,
            ignore_value: *ignore_value,
            ..Default::default()
        }),
        TOp::Delete { key, end, prev_kv } => Request::RequestDeleteRange(DeleteRangeRequest {
            key: KEYS[*key].to_vec(),
            range_end: end_bytes(end),
            prev_kv: *prev_kv,
        }),
        TOp::Range {
            key,
            end,
            back,
            limit,
        } => Request::RequestRange(RangeRequest {
            key: KEYS[*key].to_vec(),
            range_end: end_bytes(end),
            revision: if *back == 0 { 0 } else { rev + 1 - back },
            limit: *limit,
            ..Default::default()
        }),
    };
    RequestOp { request: Some(r) }
}

fn compare(c: &(usize, End, u8, u8, i64)) -> Compare {
    let (key, end, target, result, n) = c;
    let target_union = match target {
        0 => TargetUnion::Version(*n % 3),
        1 => TargetUnion::CreateRevision(*n),
        2 => TargetUnion::ModRevision(*n),
        _ => TargetUnion::Value(vec![b'0' + (*n % 4) as u8]),
    };
    let target = [
        CompareTarget::Version,
        CompareTarget::Create,
        CompareTarget::Mod,
        CompareTarget::Value,
    ][*target as usize];
    let result = [
        CompareResult::Equal,
        CompareResult::Greater,
        CompareResult::Less,
        CompareResult::NotEqual,
    ][*result as usize];
    Compare {
        key: KEYS[*key].to_vec(),
        range_end: end_bytes(end),
        target: target as i32,
        result: result as i32,
        target_union: Some(target_union),
    }
}

fn no_leases(_: i64) -> bool {
    false
}

fn check_read(m: &Mvcc, model: &Model, r: &RangeRequest) {
    let got = m.range(r).map_err(err);
    let want = model.range(r, model.rev);
    assert_eq!(got, want, "range {r:?}");
}

fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let mut m = Mvcc::open(&path).expect("open");
    let mut committed = Model::new();
    let mut applied = 0u64;
    let mut i = 0;
    while i < ops.len() {
        match &ops[i] {
            Op::Read {
                key,
                end,
                back,
                limit,
                count_only,
                keys_only,
            } => {
                let r = RangeRequest {
                    key: KEYS[*key].to_vec(),
                    range_end: end_bytes(end),
                    revision: if *back == 0 {
                        0
                    } else {
                        committed.rev + 1 - back
                    },
                    limit: *limit,
                    count_only: *count_only,
                    keys_only: *keys_only,
                    ..Default::default()
                };
                check_read(&m, &committed, &r);
                i += 1;
                continue;
            }
            Op::Reopen => {
                // With no key left to keep, HashKV counts what a running compaction has not
                // removed yet (as etcd's does): compare finished states.
                assert!(
                    m.finish_compaction(Duration::from_secs(60))
                        .expect("compact")
                );
                let before = m.hash_kv(0).expect("hash_kv");
                m.sync().expect("sync");
                drop(m);
                m = Mvcc::open(&path).expect("reopen");
                assert_eq!(m.hash_kv(0).expect("hash_kv"), before);
                assert_eq!(m.applied_index(), applied);
                assert_eq!(m.current_revision(), committed.rev);
                assert_eq!(m.compact_revision(), committed.compact);
                let all = RangeRequest {
                    key: vec![0],
                    range_end: vec![0],
                    ..Default::default()
                };
                check_read(&m, &committed, &all);
                i += 1;
                continue;
            }
            Op::Commit | Op::Abandon => {
                i += 1;
                continue;
            }
            _ => {}
        }
        let mut model = committed.clone();
        model.events.clear();
        let mut b = m.begin_apply(&no_leases);
        let mut abandon = false;
        while i < ops.len() {
            match &ops[i] {
                Op::Write(t) => match to_request(t, model.rev).request {
                    Some(Request::RequestPut(p)) => {
                        let got = b.put(&p).map_err(err);
                        let (begin, mut ch) = (model.rev, 0);
                        let want = model.put(&p, begin, &mut ch);
                        if ch > 0 {
                            model.rev += 1;
                        }
                        assert_eq!(got, want, "put {p:?}");
                    }
                    Some(Request::RequestDeleteRange(d)) => {
                        let got = b.delete_range(&d).map_err(err);
                        let (begin, mut ch) = (model.rev, 0);
                        let want = model.delete(&d, begin, &mut ch);
                        if ch > 0 {
                            model.rev += 1;
                        }
                        assert_eq!(got, Ok(want), "delete {d:?}");
                    }
                    Some(Request::RequestRange(r)) => {
                        // Readers see only committed state while a batch is open.
                        check_read(&m, &committed, &RangeRequest { revision: 0, ..r });
                    }
                    _ => unreachable!(),
                },
                Op::Txn {
                    cmps,
                    success,
                    failure,
                } => {
                    let t = TxnRequest {
                        compare: cmps.iter().map(compare).collect(),
                        success: success.iter().map(|o| to_request(o, model.rev)).collect(),
                        failure: failure.iter().map(|o| to_request(o, model.rev)).collect(),
                    };
                    let got = b.txn(&t).map_err(err);
                    let want = model.txn(&t);
                    assert_eq!(got, want, "txn {t:?}");
                }
                Op::Compact { back } => {
                    let revision = model.rev - back;
                    let got = b
                        .compact(&CompactionRequest {
                            revision,
                            physical: false,
                        })
                        .map_err(err);
                    let want = if revision <= model.compact {
                        Err(Err::Compacted)
                    } else {
                        model.compact = revision;
                        Ok(keel_proto::etcdserverpb::CompactionResponse {
                            header: hdr(model.rev),
                        })
                    };
                    assert_eq!(got, want, "compact {revision}");
                }
                Op::Read { .. } => {
                    let Op::Read { key, end, .. } = &ops[i] else {
                        unreachable!()
                    };
                    let r = RangeRequest {
                        key: KEYS[*key].to_vec(),
                        range_end: end_bytes(end),
                        ..Default::default()
                    };
                    check_read(&m, &committed, &r);
                }
                Op::Abandon => {
                    abandon = true;
                    i += 1;
                    break;
                }
                Op::Commit => {
                    i += 1;
                    break;
                }
                Op::Reopen => break,
            }
            i += 1;
        }
        if abandon {
            drop(b);
        } else {
            applied += 1;
            let events = b.commit(applied).expect("commit");
            assert_eq!(events, model.events, "events");
            committed = model;
        }
        assert_eq!(m.current_revision(), committed.rev);
        assert_eq!(m.compact_revision(), committed.compact);
        let all = RangeRequest {
            key: vec![0],
            range_end: vec![0],
            ..Default::default()
        };
        check_read(&m, &committed, &all);
        for back in 0..4 {
            let r = RangeRequest {
                key: vec![0],
                range_end: vec![0],
                revision: committed.rev - back,
                ..Default::default()
            };
            check_read(&m, &committed, &r);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn store_matches_model(ops in prop::collection::vec(op(), 1..60)) {
        run(ops);
    }
}
