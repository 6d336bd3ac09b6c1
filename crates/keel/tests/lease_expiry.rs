//! Lease expiry under load.
//!
//! 10,000 leases with short TTLs (2 to 4 s; etcd's minimum with default flags is 2 s) are
//! granted, each with one attached key (every tenth with three keys, attached in one txn), while
//! a writer keeps putting other keys and 100 more leases are kept alive on one LeaseKeepAlive
//! stream. A watch with prev_kv on the whole prefix, opened before the first grant, sees every
//! change. Once every expiring lease's keys are gone, the test checks:
//!
//! - every attached key got exactly one DELETE event, whose prev_kv is the attached kv (same
//!   value, same lease), after its PUT;
//! - all keys of one lease are deleted in one revision;
//! - no DELETE was seen before the lease's TTL had passed since its grant was sent (the server
//!   starts the TTL no earlier than that);
//! - no kept-alive lease lost a key, every keep-alive answer had a positive TTL, and their keys
//!   are still there at the end;
//! - LeaseLeases lists exactly the kept-alive leases, and LeaseTimeToLive of expired leases
//!   answers TTL -1.
//!
//! TTLs come from a seeded PRNG; the seed is printed on failure (replay with `KEEL_TEST_SEED`).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::lease_client::LeaseClient;
use keel_proto::etcdserverpb::request_op::Request;
use keel_proto::etcdserverpb::{
    LeaseGrantRequest, LeaseKeepAliveRequest, LeaseLeasesRequest, LeaseTimeToLiveRequest,
    PutRequest, RangeRequest, RequestOp, TxnRequest, WatchCreateRequest,
};
use keel_proto::mvccpb::KeyValue;
use keel_proto::mvccpb::event::EventType;
use keel_testkit::kv::watch;
use keel_testkit::{Rng, SeedReport, Server, target_flavor, wait};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

/// Leases that expire.
const EXPIRING: usize = 10_000;
/// Leases kept alive throughout.
const LIVE: usize = 100;
/// TTL of the kept-alive leases, renewed every [`KEEPALIVE_EVERY`].
const LIVE_TTL: i64 = 6;
const KEEPALIVE_EVERY: Duration = Duration::from_millis(500);
/// Grants (each followed by its put) in flight at once.
const CONCURRENCY: usize = 64;
/// Upper bound, after the last grant, on waiting for every expiring lease's keys to be deleted.
const EXPIRY_TIMEOUT: Duration = Duration::from_secs(60);

/// What the test knows about one expiring lease.
#[derive(Clone, Debug)]
struct Granted {
    id: i64,
    ttl: i64,
    /// When the grant request was sent: the TTL cannot start before.
    sent: Instant,
    /// Attached keys and the revision of the put / txn that attached them; empty if the lease
    /// expired before the attach (the put then fails with "lease not found").
    keys: Vec<Vec<u8>>,
    attach_rev: i64,
}

/// One watch event as seen by the client.
#[derive(Clone, Debug)]
struct Seen {
    at: Instant,
    delete: bool,
    kv: KeyValue,
    prev: Option<KeyValue>,
}

fn key(i: usize, j: usize, multi: bool) -> Vec<u8> {
    if multi {
        format!("lease/x/{i:05}/{j}").into_bytes()
    } else {
        format!("lease/x/{i:05}").into_bytes()
    }
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

async fn expiry_under_load(seed: u64) {
    let server = Server::start(target_flavor());
    let ch = server.channel().await;
    let mut kv = KvClient::new(ch.clone());
    let mut lease = LeaseClient::new(ch.clone());
    let start_rev = kv
        .range(RangeRequest {
            key: b"lease/".to_vec(),
            ..Default::default()
        })
        .await
        .expect("Range")
        .into_inner()
        .header
        .unwrap()
        .revision
        + 1;

    // The watch sees everything under lease/ from before the first grant.
    let create = WatchCreateRequest {
        key: b"lease/".to_vec(),
        range_end: b"lease0".to_vec(),
        start_revision: start_rev,
        prev_kv: true,
        ..Default::default()
    };
    let (wtx, mut wstream) = watch(ch.clone(), create, false).await.expect("Watch RPC");
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let watch_error: Arc<Mutex<Option<String>>> = Arc::default();
    let watcher = {
        let seen = seen.clone();
        let watch_error = watch_error.clone();
        tokio::spawn(async move {
            let _keep = wtx;
            while let Some(r) = wstream.next().await {
                let r = match r {
                    Ok(r) => r,
                    Err(e) => {
                        *watch_error.lock().unwrap() = Some(format!("watch stream failed: {e}"));
                        return;
                    }
                };
                if r.canceled || r.compact_revision != 0 {
                    *watch_error.lock().unwrap() = Some(format!("watch cancelled: {r:?}"));
                    return;
                }
                let at = Instant::now();
                let mut s = seen.lock().unwrap();
                for e in r.events {
                    s.push(Seen {
                        at,
                        delete: e.r#type == EventType::Delete as i32,
                        kv: e.kv.unwrap_or_default(),
                        prev: e.prev_kv,
                    });
                }
            }
            *watch_error.lock().unwrap() = Some("watch stream ended".into());
        })
    };

    // Kept-alive leases, each with one key.
    let mut live = Vec::new();
    for i in 0..LIVE {
        let id = lease
            .lease_grant(LeaseGrantRequest {
                ttl: LIVE_TTL,
                id: 0,
            })
            .await
            .expect("LeaseGrant (kept alive)")
            .into_inner()
            .id;
        kv.put(PutRequest {
            key: format!("lease/live/{i:03}").into_bytes(),
            value: b"live".to_vec(),
            lease: id,
            ..Default::default()
        })
        .await
        .expect("put with a kept-alive lease");
        live.push(id);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let keepalive_failures: Arc<Mutex<Vec<String>>> = Arc::default();
    let renewals = Arc::new(AtomicU64::new(0));
    let keepalive = {
        let (ktx, krx) = mpsc::channel(LIVE * 2);
        // A first round queued before the call: the server answers the call with the first
        // response.
        for &id in &live {
            ktx.send(LeaseKeepAliveRequest { id }).await.unwrap();
        }
        let mut resp = LeaseClient::new(ch.clone())
            .lease_keep_alive(ReceiverStream::new(krx))
            .await
            .expect("LeaseKeepAlive RPC")
            .into_inner();
        let live = live.clone();
        let stop = stop.clone();
        let failures = keepalive_failures.clone();
        let renewals = renewals.clone();
        tokio::spawn(async move {
            let sender = tokio::spawn({
                let stop = stop.clone();
                async move {
                    while !stop.load(Ordering::Relaxed) {
                        tokio::time::sleep(KEEPALIVE_EVERY).await;
                        for &id in &live {
                            if ktx.send(LeaseKeepAliveRequest { id }).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
            while !stop.load(Ordering::Relaxed) {
                match tokio::time::timeout(Duration::from_millis(200), resp.next()).await {
                    Err(_) => continue,
                    Ok(Some(Ok(r))) => {
                        renewals.fetch_add(1, Ordering::Relaxed);
                        if r.ttl <= 0 {
                            failures.lock().unwrap().push(format!(
                                "keep-alive of lease {:x} answered TTL {}",
                                r.id, r.ttl
                            ));
                        }
                    }
                    Ok(other) => {
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("keep-alive stream ended: {other:?}"));
                        break;
                    }
                }
            }
            sender.abort();
        })
    };

    // Writes that go on during the whole test.
    let writes = Arc::new(AtomicU64::new(0));
    let writer = {
        let mut kv = kv.clone();
        let stop = stop.clone();
        let writes = writes.clone();
        let live = live.clone();
        tokio::spawn(async move {
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                // Now and then rewrite a kept-alive key, keeping its lease.
                let (key, lease) = if n.is_multiple_of(10) {
                    let j = (n / 10) % LIVE;
                    (format!("lease/live/{j:03}"), live[j])
                } else {
                    (format!("load/{}", n % 50), 0)
                };
                kv.put(PutRequest {
                    key: key.into_bytes(),
                    value: format!("w{n}").into_bytes(),
                    lease,
                    ..Default::default()
                })
                .await
                .unwrap_or_else(|e| panic!("background put {n}: {e}"));
                writes.fetch_add(1, Ordering::Relaxed);
                n += 1;
            }
        })
    };

    // The expiring leases: grant, then attach right away.
    let mut rng = Rng::new(seed);
    let ttls: Vec<i64> = (0..EXPIRING).map(|_| rng.range_i64(2, 4)).collect();
    let grant_started = Instant::now();
    let (gtx, mut grx) = mpsc::channel::<Granted>(EXPIRING);
    let mut granters = Vec::new();
    for t in 0..CONCURRENCY {
        let mut kv = kv.clone();
        let mut lease = lease.clone();
        let ttls = ttls.clone();
        let gtx = gtx.clone();
        granters.push(tokio::spawn(async move {
            for i in (t..EXPIRING).step_by(CONCURRENCY) {
                let sent = Instant::now();
                let r = lease
                    .lease_grant(LeaseGrantRequest {
                        ttl: ttls[i],
                        id: 0,
                    })
                    .await
                    .unwrap_or_else(|e| panic!("LeaseGrant {i}: {e}"))
                    .into_inner();
                assert!(
                    r.ttl >= ttls[i],
                    "LeaseGrant {i}: TTL {} < asked {}",
                    r.ttl,
                    ttls[i]
                );
                let multi = i.is_multiple_of(10);
                let keys: Vec<Vec<u8>> = (0..if multi { 3 } else { 1 })
                    .map(|j| key(i, j, multi))
                    .collect();
                let put = |k: &Vec<u8>| PutRequest {
                    key: k.clone(),
                    value: format!("{i}").into_bytes(),
                    lease: r.id,
                    ..Default::default()
                };
                let res = if multi {
                    kv.txn(TxnRequest {
                        success: keys
                            .iter()
                            .map(|k| RequestOp {
                                request: Some(Request::RequestPut(put(k))),
                            })
                            .collect(),
                        ..Default::default()
                    })
                    .await
                    .map(|r| r.into_inner().header.unwrap().revision)
                } else {
                    kv.put(put(&keys[0]))
                        .await
                        .map(|r| r.into_inner().header.unwrap().revision)
                };
                let (keys, attach_rev) = match res {
                    Ok(rev) => (keys, rev),
                    Err(e)
                        if e.code() == tonic::Code::NotFound
                            && e.message().contains("lease not found") =>
                    {
                        (Vec::new(), 0)
                    }
                    Err(e) => panic!("attach keys to lease {i} ({:x}): {e}", r.id),
                };
                gtx.send(Granted {
                    id: r.id,
                    ttl: ttls[i],
                    sent,
                    keys,
                    attach_rev,
                })
                .await
                .unwrap();
            }
        }));
    }
    drop(gtx);
    for g in granters {
        g.await.expect("granter task");
    }
    let mut granted = Vec::with_capacity(EXPIRING);
    while let Some(g) = grx.recv().await {
        granted.push(g);
    }
    let grant_time = grant_started.elapsed();
    let attached: usize = granted.iter().filter(|g| !g.keys.is_empty()).count();
    let all_keys: usize = granted.iter().map(|g| g.keys.len()).sum();
    eprintln!(
        "granted {EXPIRING} leases in {grant_time:?}; {attached} got their keys attached \
         ({all_keys} keys)"
    );
    assert!(
        attached * 10 >= EXPIRING * 9,
        "only {attached} of {EXPIRING} leases were still alive right after their grant (the put \
         with the lease answered `lease not found` for the others)"
    );

    // Wait for every attached key's DELETE.
    let deadline = Instant::now() + Duration::from_secs(4) + EXPIRY_TIMEOUT;
    loop {
        if let Some(e) = watch_error.lock().unwrap().clone() {
            panic!("{e}");
        }
        let deletes = seen.lock().unwrap().iter().filter(|s| s.delete).count();
        if deletes >= all_keys {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {deletes} of {all_keys} keys of expiring leases were deleted within \
             {EXPIRY_TIMEOUT:?} after the longest TTL"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A little more load after the last expiry, then stop: until a write made now is seen by
    // the watch (so any event the expiries still had to produce, a second DELETE say, came
    // before it, as the watch delivers in revision order) and a full round of keep-alives
    // has been answered since (the kept-alive leases outlived the expiries). The marker is a
    // rewrite of a kept-alive key with its lease, as the background writer makes them.
    let renewed_before = renewals.load(Ordering::Relaxed);
    let marker = kv
        .put(PutRequest {
            key: b"lease/live/000".to_vec(),
            value: b"marker".to_vec(),
            lease: live[0],
            ..Default::default()
        })
        .await
        .expect("the marker put")
        .into_inner()
        .header
        .expect("a header")
        .revision;
    wait::until_async(
        "the watch to see the marker put and a round of keep-alives to be answered",
        EXPIRY_TIMEOUT,
        || async {
            if let Some(e) = watch_error.lock().unwrap().clone() {
                panic!("{e}");
            }
            let seen_to = seen
                .lock()
                .unwrap()
                .iter()
                .map(|s| s.kv.mod_revision)
                .max()
                .unwrap_or(0);
            let renewed = renewals.load(Ordering::Relaxed) - renewed_before;
            if seen_to >= marker && renewed >= LIVE as u64 {
                Ok(())
            } else {
                Err(format!(
                    "the watch is at revision {seen_to} of {marker}; {renewed} of {LIVE} \
                     keep-alives answered"
                ))
            }
        },
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    writer.await.expect("writer task");
    keepalive.await.expect("keep-alive task");
    eprintln!(
        "{} background writes, {} keep-alive answers",
        writes.load(Ordering::Relaxed),
        renewals.load(Ordering::Relaxed)
    );

    // The checks.
    let seen = seen.lock().unwrap().clone();
    let mut by_key: HashMap<Vec<u8>, Vec<&Seen>> = HashMap::new();
    for s in &seen {
        by_key.entry(s.kv.key.clone()).or_default().push(s);
    }
    let mut problems = Vec::new();
    for g in &granted {
        let mut del_revs = BTreeMap::new();
        for k in &g.keys {
            let evs = by_key.get(k).map(Vec::as_slice).unwrap_or_default();
            let dels: Vec<&&Seen> = evs.iter().filter(|s| s.delete).collect();
            let puts: Vec<&&Seen> = evs.iter().filter(|s| !s.delete).collect();
            if dels.len() != 1 || puts.len() != 1 {
                problems.push(format!(
                    "key {} of lease {:x}: {} PUT and {} DELETE events (want 1 and 1)",
                    show(k),
                    g.id,
                    puts.len(),
                    dels.len()
                ));
                continue;
            }
            let (p, d) = (puts[0], dels[0]);
            if p.kv.lease != g.id || p.kv.mod_revision != g.attach_rev {
                problems.push(format!(
                    "key {}: PUT event {:?} does not match its attach (lease {:x}, revision {})",
                    show(k),
                    p.kv,
                    g.id,
                    g.attach_rev
                ));
            }
            if d.prev.as_ref() != Some(&p.kv) {
                problems.push(format!(
                    "key {} of lease {:x}: DELETE prev_kv {:?}, want the attached kv {:?}",
                    show(k),
                    g.id,
                    d.prev,
                    p.kv
                ));
            }
            if d.kv.mod_revision <= g.attach_rev {
                problems.push(format!(
                    "key {}: deleted at revision {} not after its attach at {}",
                    show(k),
                    d.kv.mod_revision,
                    g.attach_rev
                ));
            }
            let earliest = g.sent + Duration::from_secs(g.ttl as u64);
            if d.at < earliest {
                problems.push(format!(
                    "key {} of lease {:x} (TTL {} s): DELETE seen {:?} after the grant was sent, \
                     before the TTL ran out",
                    show(k),
                    g.id,
                    g.ttl,
                    d.at - g.sent
                ));
            }
            del_revs.insert(d.kv.mod_revision, k.clone());
        }
        if del_revs.len() > 1 {
            problems.push(format!(
                "keys of lease {:x} deleted in several revisions: {del_revs:?}",
                g.id
            ));
        }
    }
    for (k, evs) in &by_key {
        if k.starts_with(b"lease/live/") && evs.iter().any(|s| s.delete) {
            problems.push(format!("key {} of a kept-alive lease was deleted", show(k)));
        }
    }
    let unattached: Vec<&Granted> = granted.iter().filter(|g| g.keys.is_empty()).collect();
    let expected_events = 2 * all_keys;
    let lease_x_events = seen
        .iter()
        .filter(|s| s.kv.key.starts_with(b"lease/x/"))
        .count();
    if lease_x_events != expected_events {
        problems.push(format!(
            "{lease_x_events} events under lease/x/, want {expected_events} (a PUT and a DELETE \
             per attached key; {} leases expired before their attach)",
            unattached.len()
        ));
    }
    problems.extend(keepalive_failures.lock().unwrap().iter().cloned());
    assert!(
        problems.is_empty(),
        "{} problem(s) with lease expiry:\n{}",
        problems.len(),
        problems
            .iter()
            .take(30)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );

    // The store agrees: kept-alive keys and leases remain, expired leases are gone.
    let live_keys = kv
        .range(RangeRequest {
            key: b"lease/".to_vec(),
            range_end: b"lease0".to_vec(),
            ..Default::default()
        })
        .await
        .expect("Range lease/")
        .into_inner()
        .kvs;
    let mut live_names: Vec<String> = live_keys.iter().map(|kv| show(&kv.key)).collect();
    live_names.sort();
    let want: Vec<String> = (0..LIVE).map(|i| format!("lease/live/{i:03}")).collect();
    assert_eq!(live_names, want, "keys under lease/ after all expiries");
    let mut listed: Vec<i64> = lease
        .lease_leases(LeaseLeasesRequest {})
        .await
        .expect("LeaseLeases")
        .into_inner()
        .leases
        .iter()
        .map(|l| l.id)
        .collect();
    listed.sort();
    let mut want = live.clone();
    want.sort();
    assert_eq!(
        listed.len(),
        want.len(),
        "LeaseLeases lists {} leases, want the {} kept-alive ones",
        listed.len(),
        want.len()
    );
    assert_eq!(listed, want, "LeaseLeases after all expiries");
    for g in granted.iter().step_by(997) {
        let r = lease
            .lease_time_to_live(LeaseTimeToLiveRequest {
                id: g.id,
                keys: true,
            })
            .await
            .expect("LeaseTimeToLive")
            .into_inner();
        assert_eq!(
            r.ttl, -1,
            "LeaseTimeToLive of expired lease {:x}: {r:?}",
            g.id
        );
    }
    watcher.abort();
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_leases_expire_under_load() {
    let report = SeedReport::new("lease expiry");
    let seed = report.seed;
    expiry_under_load(seed).await;
}
