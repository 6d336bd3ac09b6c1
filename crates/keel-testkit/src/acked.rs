//! Writers that record every acknowledged put, and the checks that a restarted server still
//! holds each of them: the crash and power-loss tests.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::{PutRequest, RangeRequest};
use tokio::task::JoinHandle;

use super::Server;

/// Acknowledged puts: key -> (value, revision from the response header).
pub type Acked = BTreeMap<String, (String, i64)>;

/// Upper bound on waiting for writers to notice the server is gone.
const WRITER_STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// Concurrent writers, each putting unique keys `<prefix>r<round>/w<writer>/<n>` until its
/// first error (an unknown outcome, not recorded) or [`Writers::stop`].
pub struct Writers {
    acked: Arc<Mutex<Acked>>,
    tasks: Vec<JoinHandle<()>>,
    round: usize,
    stop: Arc<AtomicBool>,
}

impl Writers {
    /// Starts `n` writers against `server`.
    pub async fn start(server: &Server, prefix: &str, round: usize, n: usize) -> Writers {
        let acked = Arc::new(Mutex::new(Acked::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for w in 0..n {
            let mut kv = KvClient::new(server.channel().await);
            let acked = acked.clone();
            let stop = stop.clone();
            let prefix = prefix.to_string();
            tasks.push(tokio::spawn(async move {
                for i in 0u64.. {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let key = format!("{prefix}r{round}/w{w}/{i:08}");
                    let value = format!("v{round}-{w}-{i}");
                    let req = PutRequest {
                        key: key.clone().into_bytes(),
                        value: value.clone().into_bytes(),
                        ..Default::default()
                    };
                    match kv.put(req).await {
                        Ok(resp) => {
                            let rev = resp
                                .into_inner()
                                .header
                                .expect("put response header")
                                .revision;
                            acked.lock().unwrap().insert(key, (value, rev));
                        }
                        Err(_) => return,
                    }
                }
            }));
        }
        Writers {
            acked,
            tasks,
            round,
            stop,
        }
    }

    /// Waits until at least `n` puts were acknowledged (at most 30 s).
    pub async fn wait_acked(&self, n: usize) {
        let round = self.round;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while self.acked.lock().unwrap().len() < n {
            assert!(
                tokio::time::Instant::now() < deadline,
                "round {round}: fewer than {n} puts acknowledged within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Stops the writers after their puts in flight and returns what they saw acknowledged
    /// (for a server that stays up).
    pub async fn stop(self) -> Acked {
        self.stop.store(true, Ordering::Relaxed);
        self.finish().await
    }

    /// Waits until every writer stopped (the server must be gone) and returns what they saw
    /// acknowledged.
    pub async fn finish(self) -> Acked {
        let round = self.round;
        for t in self.tasks {
            tokio::time::timeout(WRITER_STOP_TIMEOUT, t)
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "round {round}: a writer was still running {WRITER_STOP_TIMEOUT:?} after \
                         the server went"
                    )
                })
                .expect("writer task panicked");
        }
        Arc::try_unwrap(self.acked).unwrap().into_inner().unwrap()
    }
}

/// Reads back every key under `prefix` and checks each acknowledged write (value and
/// mod_revision); returns the store revision, which must be at least `min_rev`.
pub async fn verify(
    server: &mut Server,
    prefix: &str,
    acked: &Acked,
    min_rev: i64,
    context: &str,
) -> i64 {
    verify_read(server, prefix, acked, min_rev, false, context).await
}

/// [`verify`] with a read that is `serializable` (served by `server` from its own state, a
/// follower's included) or linearizable.
pub async fn verify_read(
    server: &mut Server,
    prefix: &str,
    acked: &Acked,
    min_rev: i64,
    serializable: bool,
    context: &str,
) -> i64 {
    let mut kv = KvClient::new(server.channel().await).max_decoding_message_size(256 << 20);
    let resp = match kv
        .range(RangeRequest {
            key: prefix.as_bytes().to_vec(),
            range_end: keel_proto::prefix_end(prefix.as_bytes()),
            serializable,
            ..Default::default()
        })
        .await
    {
        Ok(r) => r.into_inner(),
        Err(e) => panic!(
            "{context}: range after restart failed ({}): {e:?}",
            server.process_state()
        ),
    };
    let rev = resp.header.expect("range response header").revision;
    let stored: Acked = resp
        .kvs
        .into_iter()
        .map(|kv| {
            (
                String::from_utf8_lossy(&kv.key).into_owned(),
                (
                    String::from_utf8_lossy(&kv.value).into_owned(),
                    kv.mod_revision,
                ),
            )
        })
        .collect();
    let mut lost = Vec::new();
    for (key, (value, rev)) in acked {
        match stored.get(key) {
            Some(got) if got == &(value.clone(), *rev) => {}
            other => lost.push(format!(
                "  {key}: acknowledged value {value:?} at revision {rev}, read back {other:?}"
            )),
        }
    }
    assert!(
        lost.is_empty(),
        "{context}: {} of {} acknowledged writes were lost or changed:\n{}",
        lost.len(),
        acked.len(),
        lost.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
    );
    assert!(
        rev >= min_rev,
        "{context}: store revision went backwards: {rev} after restart, {min_rev} acknowledged before"
    );
    rev
}

/// After a restart, a put of `key` must succeed and get a revision above `max_rev`; returns it.
pub async fn put_after_restart(server: &mut Server, key: &str, max_rev: i64, context: &str) -> i64 {
    let put = KvClient::new(server.channel().await)
        .put(PutRequest {
            key: key.as_bytes().to_vec(),
            value: b"v".to_vec(),
            ..Default::default()
        })
        .await;
    let rev = match put {
        Ok(r) => r.into_inner().header.expect("put response header").revision,
        Err(e) => panic!(
            "{context}: put after restart failed ({}): {e:?}",
            server.process_state()
        ),
    };
    assert!(
        rev > max_rev,
        "{context}: put after restart got revision {rev}, not above {max_rev}"
    );
    rev
}
