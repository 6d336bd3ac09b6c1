//! Owners and dependents created and deleted as fast as a pace allows, over HTTP/2 with
//! `keel_bench`'s client (kubectl would hide the 429s it waits out): each step of a client
//! creates a Deployment, two ConfigMaps it owns (with `blockOwnerDeletion`), and deletes the
//! Deployment, in the foreground and in the background in turn. A 429 is waited out for its
//! `Retry-After` and the request sent again; every answer's status is counted, and anything
//! but 200, 201, 202 and 409, or a 429 without `Retry-After`, or a request that got no answer
//! (a dropped connection, no answer in [`ANSWER_LIMIT`]), is a failure.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use keel_bench::https::{Conn, Endpoint};
use serde_json::Value;

use super::{Kind, Owner};

/// The longest a request may wait for its answer.
pub const ANSWER_LIMIT: Duration = Duration::from_secs(30);

/// What the clients got.
#[derive(Debug, Default)]
pub struct Tally {
    /// Answers by status code.
    pub codes: BTreeMap<u16, u64>,
    /// Requests that failed the rules, with why.
    pub failures: Vec<String>,
    /// Owner deletes acknowledged.
    pub deletes: u64,
}

/// Runs `clients` clients against the API server of `kubeconfig` for `duration`, each
/// starting a step every `pace` at most (a step is four writes).
pub async fn run(kubeconfig: &Path, clients: usize, pace: Duration, duration: Duration) -> Tally {
    let target = keel_bench::kubeconfig::load(kubeconfig, None).expect("the kubeconfig");
    let endpoint = Endpoint::new(target, false, Duration::from_secs(5)).expect("an endpoint");
    let conn = endpoint.connect().await.expect("connect");
    let tally = Arc::new(Mutex::new(Tally::default()));
    let until = Instant::now() + duration;
    let mut tasks = Vec::new();
    for (id, conn) in conn
        .share(clients)
        .await
        .expect("streams")
        .into_iter()
        .enumerate()
    {
        let tally = tally.clone();
        tasks.push(tokio::spawn(client(conn, id, pace, until, tally)));
    }
    for task in tasks {
        task.await.expect("a load client");
    }
    Arc::try_unwrap(tally).unwrap().into_inner().unwrap()
}

async fn client(
    mut conn: Conn,
    id: usize,
    pace: Duration,
    until: Instant,
    tally: Arc<Mutex<Tally>>,
) {
    let mut n = 0;
    while Instant::now() < until {
        let next = tokio::time::Instant::now() + pace;
        let name = format!("gc-{id:02}-{n:05}");
        let body = Kind::Deployment.manifest(&name, &name, &[]);
        let path = Kind::Deployment.path();
        if let Some(owner) = send(&mut conn, Method::POST, &path, Some(&body), &tally).await
            && owner.get("kind").and_then(Value::as_str) == Some("Deployment")
        {
            let owner = Owner::of(Kind::Deployment, &owner);
            for i in 0..2 {
                let cm = format!("{name}-{i}");
                let body = Kind::ConfigMap.manifest(&cm, &cm, std::slice::from_ref(&owner));
                send(
                    &mut conn,
                    Method::POST,
                    &Kind::ConfigMap.path(),
                    Some(&body),
                    &tally,
                )
                .await;
            }
            let policy = ["Foreground", "Background"][n % 2];
            let options = serde_json::json!({"kind": "DeleteOptions", "apiVersion": "v1",
                "propagationPolicy": policy});
            let path = format!("{path}/{name}");
            if send(&mut conn, Method::DELETE, &path, Some(&options), &tally)
                .await
                .is_some()
            {
                tally.lock().unwrap().deletes += 1;
            }
        }
        n += 1;
        tokio::time::sleep_until(next).await;
    }
}

/// Sends one request until it is answered other than 429, waiting each 429 out: the body of
/// a 2xx answer.
async fn send(
    conn: &mut Conn,
    method: Method,
    path: &str,
    body: Option<&Value>,
    tally: &Mutex<Tally>,
) -> Option<Value> {
    let bytes = body.map(|b| Bytes::from(b.to_string()));
    loop {
        let answer =
            tokio::time::timeout(ANSWER_LIMIT, conn.call(method.clone(), path, bytes.clone()))
                .await;
        let answer = match answer {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => {
                let why = format!("{method} {path}: no answer: {e:#}");
                tally.lock().unwrap().failures.push(why);
                conn.recover().await;
                return None;
            }
            Err(_) => {
                let why = format!("{method} {path}: no answer in {ANSWER_LIMIT:?}");
                tally.lock().unwrap().failures.push(why);
                conn.recover().await;
                return None;
            }
        };
        let code = answer.status.as_u16();
        let wait = {
            let mut t = tally.lock().unwrap();
            *t.codes.entry(code).or_default() += 1;
            match code {
                200..=202 => return serde_json::from_slice(&answer.body).ok(),
                409 => return None,
                429 => match answer.retry_after {
                    Some(wait) => wait,
                    None => {
                        t.failures
                            .push(format!("{method} {path}: 429 without Retry-After"));
                        return None;
                    }
                },
                _ => {
                    t.failures
                        .push(format!("{method} {path}: {}", answer.error()));
                    return None;
                }
            }
        };
        // As client-go waits: the server's Retry-After.
        tokio::time::sleep(wait).await;
    }
}
