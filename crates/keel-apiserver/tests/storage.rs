//! The etcd3 storage layer against keel store and a real etcd 3.5.1: the same requests give
//! the same answers (revisions included) on both, and each answer is the one kube-apiserver's
//! storage layer gives.

use keel_apiserver::storage::{
    Compactor, Etcd3, Event, KeyLayout, ListOptions, Object, StorageError,
};
use keel_proto::etcdserverpb::CompactionRequest;
use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_testkit::{Flavor, Server};

/// Runs `scenario` against keel and against etcd; both transcripts must be equal. Returns
/// keel's.
async fn on_both<F, Fut>(scenario: F) -> Vec<String>
where
    F: Fn(Etcd3, KvClient<tonic::transport::Channel>) -> Fut,
    Fut: std::future::Future<Output = Vec<String>>,
{
    let mut transcripts = Vec::new();
    for flavor in [Flavor::Keel, Flavor::Etcd] {
        let server = Server::start(flavor);
        let channel = server.channel().await;
        transcripts.push(scenario(Etcd3::new(channel.clone()), KvClient::new(channel)).await);
    }
    assert_eq!(
        transcripts[0], transcripts[1],
        "keel (left) and etcd (right) differ"
    );
    transcripts.swap_remove(0)
}

fn show<T: std::fmt::Debug>(r: &Result<T, StorageError>) -> String {
    match r {
        Ok(v) => format!("ok {v:?}"),
        Err(e) => format!("err {e:?}"),
    }
}

fn names(items: &[Object]) -> Vec<&str> {
    items
        .iter()
        .map(|o| o.key.rsplit('/').next().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_update_and_delete_compare_the_resource_version() {
    let t = on_both(|s, _| async move {
        let key = KeyLayout::default().object("configmaps", Some("default"), "x");
        let mut t = Vec::new();
        let created = s.create(&key, b"v1".to_vec()).await;
        t.push(show(&created));
        let rv = created.unwrap();
        t.push(show(&s.create(&key, b"again".to_vec()).await));
        let (got, revision) = s.get(&key, "").await.unwrap();
        assert_eq!(got.as_ref().unwrap().mod_revision, rv);
        t.push(format!("get {got:?} at {revision}"));
        t.push(show(&s.get(&key, &(revision + 5).to_string()).await));
        t.push(show(&s.get(&key, "x1").await.map(|(_, rev)| rev)));

        // An update that changes nothing writes nothing.
        let same = s
            .guaranteed_update(&key, None, |o| Ok(o.value.clone()))
            .await
            .unwrap();
        assert_eq!(same.mod_revision, rv);
        assert_eq!(s.get(&key, "").await.unwrap().1, revision);

        // A writer that read before another one's write computes again from the newer object.
        let mut seen = Vec::new();
        let other = s.clone();
        let k2 = key.clone();
        let updated = s
            .guaranteed_update(&key, None, |o| {
                seen.push(String::from_utf8_lossy(&o.value).into_owned());
                if seen.len() == 1 {
                    // Someone else writes between this read and the Txn.
                    let theirs = other.guaranteed_update(&k2, None, |_| Ok(b"theirs".to_vec()));
                    let handle = tokio::runtime::Handle::current();
                    tokio::task::block_in_place(|| handle.block_on(theirs)).unwrap();
                }
                Ok([o.value.as_slice(), b"+mine"].concat())
            })
            .await;
        t.push(show(&updated));
        t.push(format!("update saw {seen:?}"));
        assert!(updated.unwrap().mod_revision > rv + 1);

        // A precondition refusing the object fails the update and writes nothing.
        let refused = s
            .guaranteed_update(&key, None, |o| {
                Err(StorageError::Conflict { key: o.key.clone() })
            })
            .await;
        t.push(show(&refused));

        let missing = KeyLayout::default().object("configmaps", Some("default"), "nope");
        t.push(show(
            &s.guaranteed_update(&missing, None, |o| Ok(o.value.clone()))
                .await,
        ));
        t.push(show(&s.delete(&missing, None, |_| Ok(())).await));
        t.push(show(
            &s.delete(&key, None, |o| {
                Err(StorageError::Conflict { key: o.key.clone() })
            })
            .await,
        ));
        let deleted = s.delete(&key, None, |_| Ok(())).await;
        t.push(show(&deleted));
        let (gone, after) = s.get(&key, "").await.unwrap();
        assert!(gone.is_none());
        assert_eq!(
            deleted.unwrap().mod_revision,
            after,
            "a deleted object's RV is its deletion"
        );
        t
    })
    .await;
    assert!(t[1].starts_with("err KeyExists"), "{t:?}");
    assert!(t[3].starts_with("err TooLargeResourceVersion"), "{t:?}");
    assert!(
        t[4].starts_with(
            r#"err BadRequest("invalid resource version: resourceVersion: Invalid value: \"x1\""#
        ),
        "{t:?}"
    );
    assert_eq!(t[6], r#"update saw ["v1", "theirs"]"#);
    assert!(t[7].starts_with("err Conflict"), "{t:?}");
    assert!(
        t[8].starts_with("err NotFound") && t[9].starts_with("err NotFound"),
        "{t:?}"
    );
}

#[tokio::test]
async fn lists_page_at_the_first_pages_revision() {
    let t = on_both(|s, _| async move {
        let layout = KeyLayout::default();
        let mut t = Vec::new();
        for i in 0..25 {
            let key = layout.object("configmaps", Some("ns"), &format!("c{i:02}"));
            s.create(&key, format!("{i}").into_bytes()).await.unwrap();
        }
        // Another namespace and another resource stay out of the list.
        s.create(&layout.object("configmaps", Some("nt"), "z"), vec![])
            .await
            .unwrap();
        s.create(&layout.object("secrets", Some("ns"), "s"), vec![])
            .await
            .unwrap();
        let prefix = layout.collection("configmaps", Some("ns"));
        let mut page = s
            .list(
                &prefix,
                ListOptions {
                    limit: 10,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        let first_revision = page.revision;
        t.push(format!(
            "{:?} rest {:?}",
            names(&page.items),
            page.remaining_item_count
        ));
        // A write after the first page is not in the later pages: they read its revision.
        s.create(&layout.object("configmaps", Some("ns"), "c99"), vec![])
            .await
            .unwrap();
        while let Some(token) = page.continue_token.clone() {
            let opts = ListOptions {
                limit: 10,
                continue_token: Some(&token),
                ..Default::default()
            };
            page = s.list(&prefix, opts).await.unwrap();
            assert_eq!(page.revision, first_revision);
            t.push(format!(
                "{:?} rest {:?}",
                names(&page.items),
                page.remaining_item_count
            ));
        }
        let all = s.list(&prefix, ListOptions::default()).await.unwrap();
        t.push(format!(
            "all {} at {}",
            all.items.len(),
            all.revision - first_revision
        ));

        // With a filter, pages are full of matching objects and carry no remaining count.
        // Values are the objects' numbers: keep those whose first digit is 0, 3, 6 or 9.
        let every_third = |o: &Object| {
            o.value
                .first()
                .is_some_and(|d| (d - b'0').is_multiple_of(3))
        };
        let opts = ListOptions {
            limit: 3,
            filter: Some(&every_third),
            ..Default::default()
        };
        let filtered = s.list(&prefix, opts).await.unwrap();
        t.push(format!(
            "filtered {:?} rest {:?} more {}",
            names(&filtered.items),
            filtered.remaining_item_count,
            filtered.continue_token.is_some()
        ));

        // An exact revision reads the past; a future one is too large.
        let (past_rv, future_rv, newer_rv) = (
            (first_revision - 20).to_string(),
            (all.revision + 10).to_string(),
            (all.revision + 1).to_string(),
        );
        let past = s
            .list(
                &prefix,
                ListOptions {
                    resource_version: &past_rv,
                    resource_version_match: "Exact",
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        t.push(format!("past {:?}", names(&past.items)));
        let future = ListOptions {
            resource_version: &future_rv,
            resource_version_match: "Exact",
            ..Default::default()
        };
        t.push(show(&s.list(&prefix, future).await.map(|p| p.revision)));
        let newer = ListOptions {
            resource_version: &newer_rv,
            resource_version_match: "NotOlderThan",
            ..Default::default()
        };
        t.push(show(&s.list(&prefix, newer).await.map(|p| p.revision)));
        // A resourceVersion with a continue token, or a bad token, is a bad request.
        let token = s
            .list(
                &prefix,
                ListOptions {
                    limit: 1,
                    ..Default::default()
                },
            )
            .await
            .unwrap()
            .continue_token
            .unwrap();
        let both = ListOptions {
            resource_version: "3",
            continue_token: Some(&token),
            ..Default::default()
        };
        t.push(show(&s.list(&prefix, both).await.map(|p| p.revision)));
        let bad = ListOptions {
            continue_token: Some("bad!"),
            ..Default::default()
        };
        t.push(show(&s.list(&prefix, bad).await.map(|p| p.revision)));
        t
    })
    .await;
    assert_eq!(
        t[..4],
        [
            r#"["c00", "c01", "c02", "c03", "c04", "c05", "c06", "c07", "c08", "c09"] rest Some(15)"#,
            r#"["c10", "c11", "c12", "c13", "c14", "c15", "c16", "c17", "c18", "c19"] rest Some(5)"#,
            r#"["c20", "c21", "c22", "c23", "c24"] rest None"#,
            "all 26 at 1",
        ]
    );
    assert_eq!(
        t[4],
        r#"filtered ["c00", "c03", "c06"] rest None more true"#
    );
    // Revision 8: the first 7 creates (revision 1 is the empty store's).
    assert_eq!(
        t[5],
        r#"past ["c00", "c01", "c02", "c03", "c04", "c05", "c06"]"#
    );
    assert!(t[6].starts_with("err TooLargeResourceVersion"), "{t:?}");
    assert!(t[7].starts_with("err TooLargeResourceVersion"), "{t:?}");
    assert_eq!(
        t[8],
        r#"err BadRequest("specifying resource version is not allowed when using continue")"#
    );
    assert!(
        t[9].starts_with(r#"err BadRequest("invalid continue token: continue key is not valid: "#)
    );
}

#[tokio::test]
async fn a_compacted_revision_is_expired() {
    let t = on_both(|s, mut kv| async move {
        let layout = KeyLayout::default();
        let prefix = layout.collection("pods", None);
        for i in 0..4 {
            s.create(&layout.object("pods", Some("ns"), &format!("p{i}")), vec![])
                .await
                .unwrap();
        }
        let first = s
            .list(
                &prefix,
                ListOptions {
                    limit: 2,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        s.create(&layout.object("pods", Some("ns"), "p9"), vec![])
            .await
            .unwrap();
        let latest = s
            .list(&prefix, ListOptions::default())
            .await
            .unwrap()
            .revision;
        kv.compact(CompactionRequest {
            revision: latest,
            physical: true,
        })
        .await
        .unwrap();
        let token = first.continue_token.unwrap();
        let next = ListOptions {
            limit: 2,
            continue_token: Some(&token),
            ..Default::default()
        };
        let first_rv = first.revision.to_string();
        let exact = ListOptions {
            resource_version: &first_rv,
            resource_version_match: "Exact",
            ..Default::default()
        };
        let expired = s.list(&prefix, next).await;
        let mut lines = vec![show(&s.list(&prefix, exact).await.map(|p| p.revision))];
        // The expired token comes with one that goes on from the same key at the latest
        // revision (an inconsistent continuation, as kube-apiserver offers it).
        let Err(StorageError::ContinueExpired { token }) = expired else {
            panic!("{expired:?}");
        };
        let mut token = Some(token);
        while let Some(t) = token {
            let opts = ListOptions {
                limit: 2,
                continue_token: Some(&t),
                ..Default::default()
            };
            let page = s.list(&prefix, opts).await.unwrap();
            lines.push(format!(
                "{:?} at the latest: {}",
                names(&page.items),
                page.revision == latest
            ));
            token = page.continue_token;
        }
        lines
    })
    .await;
    assert_eq!(
        t,
        [
            r#"err Expired { of: "list" }"#,
            r#"["p2", "p3"] at the latest: true"#,
            r#"["p9"] at the latest: true"#,
        ]
    );
}

/// One watch event as a transcript line.
fn event_line(e: Option<Result<Event, StorageError>>) -> String {
    match e {
        Some(Ok(Event::Added(o))) => {
            format!("ADDED {} {} {}", o.key, show_value(&o), o.mod_revision)
        }
        Some(Ok(Event::Modified(o, _))) => {
            format!("MODIFIED {} {} {}", o.key, show_value(&o), o.mod_revision)
        }
        Some(Ok(Event::Deleted(o))) => {
            format!("DELETED {} {} {}", o.key, show_value(&o), o.mod_revision)
        }
        Some(Err(e)) => format!("ERROR {e:?}"),
        None => "END".to_string(),
    }
}

fn show_value(o: &Object) -> String {
    String::from_utf8_lossy(&o.value).into_owned()
}

#[tokio::test]
async fn watches_start_from_a_state_or_a_resource_version() {
    let t = on_both(|s, mut kv| async move {
        let layout = KeyLayout::default();
        let prefix = layout.collection("leases", Some("kube-node-lease"));
        let (a, b) = (format!("{prefix}a"), format!("{prefix}b"));
        let first = s.create(&a, b"a1".to_vec()).await.unwrap();
        s.create(&b, b"b1".to_vec()).await.unwrap();
        // Outside the collection: never seen.
        s.create(&layout.object("leases", Some("other"), "x"), vec![])
            .await
            .unwrap();

        let mut t = Vec::new();
        let mut from_state = s.watch(&prefix, true, "").await.unwrap();
        let mut from_first = s.watch(&prefix, true, &first.to_string()).await.unwrap();
        let mut one_key = s.watch(&a, false, "0").await.unwrap();
        s.guaranteed_update(&a, None, |_| Ok(b"a2".to_vec()))
            .await
            .unwrap();
        s.delete(&b, None, |_| Ok(())).await.unwrap();
        s.create(&format!("{prefix}c"), b"c1".to_vec())
            .await
            .unwrap();
        for _ in 0..5 {
            t.push(format!("state: {}", event_line(from_state.next().await)));
        }
        for _ in 0..4 {
            t.push(format!(
                "from {first}: {}",
                event_line(from_first.next().await)
            ));
        }
        for _ in 0..2 {
            t.push(format!("one key: {}", event_line(one_key.next().await)));
        }

        // A start the store compacted is expired.
        let latest = s.get(&a, "").await.unwrap().1;
        kv.compact(CompactionRequest {
            revision: latest,
            physical: true,
        })
        .await
        .unwrap();
        // etcd creates the watch, then cancels it: the first event is the error.
        t.push(match s.watch(&prefix, true, &first.to_string()).await {
            Ok(mut w) => event_line(w.next().await),
            Err(e) => format!("err {e:?}"),
        });
        t.push(show(&s.watch(&prefix, true, "x").await.map(|_| ())));
        t
    })
    .await;
    let p = "/registry/leases/kube-node-lease";
    assert_eq!(
        t[..11],
        [
            format!("state: ADDED {p}/a a1 2"),
            format!("state: ADDED {p}/b b1 3"),
            format!("state: MODIFIED {p}/a a2 5"),
            format!("state: DELETED {p}/b b1 6"),
            format!("state: ADDED {p}/c c1 7"),
            format!("from 2: ADDED {p}/b b1 3"),
            format!("from 2: MODIFIED {p}/a a2 5"),
            format!("from 2: DELETED {p}/b b1 6"),
            format!("from 2: ADDED {p}/c c1 7"),
            format!("one key: ADDED {p}/a a1 2"),
            format!("one key: MODIFIED {p}/a a2 5"),
        ]
    );
    assert_eq!(t[11], r#"ERROR Expired { of: "watch" }"#);
    assert!(
        t[12].starts_with("err BadRequest(\"invalid resource version"),
        "{t:?}"
    );
}

/// Two apiservers' compactors on one store: one compaction per round between them, to the
/// revision seen a round earlier.
#[tokio::test]
async fn apiservers_sharing_a_store_compact_once_per_round() {
    let t = on_both(|s, mut kv| async move {
        let (mut a, mut b) = (Compactor::new(&s), Compactor::new(&s));
        let key = KeyLayout::default().object("configmaps", Some("default"), "x");
        let mut t = Vec::new();
        s.create(&key, b"0".to_vec()).await.unwrap();
        for round in 1..=4 {
            let mut revs = Vec::new();
            for _ in 0..3 {
                let o =
                    s.guaranteed_update(&key, None, |o| Ok([o.value.as_slice(), b"+"].concat()));
                revs.push(o.await.unwrap().mod_revision);
            }
            t.push(format!("round {round}: a {}", show(&a.round().await)));
            t.push(format!("round {round}: b {}", show(&b.round().await)));
        }
        let marker = kv
            .range(keel_proto::etcdserverpb::RangeRequest {
                key: b"compact_rev_key".to_vec(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        let marker = &marker.kvs[0];
        t.push(format!(
            "compact_rev_key {} version {}",
            String::from_utf8_lossy(&marker.value),
            marker.version
        ));
        t
    })
    .await;
    assert_eq!(
        t,
        [
            // Start-up: a records, b learns a's version.
            "round 1: a ok None",
            "round 1: b ok None",
            // a compacts to what it saw a round ago; b, a step behind, only learns.
            "round 2: a ok Some(6)",
            "round 2: b ok None",
            "round 3: a ok Some(10)",
            "round 3: b ok None",
            "round 4: a ok Some(14)",
            "round 4: b ok None",
            "compact_rev_key 14 version 4",
        ]
    );
}

/// The lease of each key under `prefix`, by name.
async fn leases_of(
    kv: &mut KvClient<tonic::transport::Channel>,
    prefix: &str,
) -> Vec<(String, i64)> {
    let resp = kv
        .range(keel_proto::etcdserverpb::RangeRequest {
            key: prefix.as_bytes().to_vec(),
            range_end: keel_proto::prefix_end(prefix.as_bytes()),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    resp.kvs
        .into_iter()
        .map(|kv| {
            (
                String::from_utf8_lossy(&kv.key)
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .to_string(),
                kv.lease,
            )
        })
        .collect()
}

#[tokio::test]
async fn ttl_writes_share_a_lease_and_expire() {
    let t = on_both(|s, mut kv| async move {
        let layout = KeyLayout::default();
        let prefix = layout.collection("events", Some("default"));
        let mut t = Vec::new();
        // TTL 20 s: a lease is reused for 5 % of it, 1 s.
        for name in ["a", "b"] {
            s.create_with_ttl(&format!("{prefix}{name}"), b"e".to_vec(), 20)
                .await
                .unwrap();
        }
        s.create(&format!("{prefix}c"), b"kept".to_vec())
            .await
            .unwrap();
        let before = leases_of(&mut kv, &prefix).await;
        t.push(format!(
            "a and b share a lease: {}, c has none: {}",
            before[0].1 != 0 && before[0].1 == before[1].1,
            before[2].1 == 0
        ));
        s.guaranteed_update(&format!("{prefix}a"), None, |_| Ok(b"e2".to_vec()))
            .await
            .unwrap();
        let after = leases_of(&mut kv, &prefix).await;
        t.push(format!(
            "an update keeps the lease: {}",
            after[0].1 == before[0].1
        ));
        // TTL 2 s: no reuse window (5 % rounds down to 0), a lease of its own.
        s.create_with_ttl(&format!("{prefix}d"), b"short".to_vec(), 2)
            .await
            .unwrap();
        let with_d = leases_of(&mut kv, &prefix).await;
        t.push(format!(
            "d has its own lease: {}",
            ![0, before[0].1].contains(&with_d[3].1)
        ));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        let left = loop {
            let left = leases_of(&mut kv, &prefix).await;
            if left.len() == 3 || std::time::Instant::now() > deadline {
                break left;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        };
        t.push(format!(
            "after d's TTL: {:?}",
            left.iter().map(|(n, _)| n).collect::<Vec<_>>()
        ));
        t
    })
    .await;
    assert_eq!(
        t,
        [
            "a and b share a lease: true, c has none: true",
            "an update keeps the lease: true",
            "d has its own lease: true",
            r#"after d's TTL: ["a", "b", "c"]"#,
        ]
    );
}
