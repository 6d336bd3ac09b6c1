//! The apiserver's limits and bulk deletes, as an operator and kubectl meet them:
//!
//! - `--max-requests-inflight` / `--max-mutating-requests-inflight`: past either limit a
//!   request is answered at once with 429, a `Retry-After` header and a `Status` whose reason
//!   is `TooManyRequests`; read-only and mutating requests are counted apart, as
//!   kube-apiserver's max-in-flight filter counts them; the requests within the limits are
//!   served in full; node heartbeats (Node and `kube-node-lease` Lease writes) keep a quarter
//!   of the mutating slots that no other write can take, and Event writes hold at most an
//!   eighth, queueing for them (at most twice as many, for at most a few seconds) before a
//!   429.
//! - `--request-timeout`: a request the store does not answer in time gets 504 with a
//!   `Status` whose reason is `Timeout`, gives its in-flight slot back, and the server serves
//!   again once the store does.
//! - deletecollection with label and field selectors (`DELETE` on a namespace's collection,
//!   sent by `kubectl delete --raw`) and `kubectl delete -l` / `--field-selector` delete
//!   exactly the matching objects of that namespace; a collection `DELETE` across all
//!   namespaces is refused as kube-apiserver refuses it (405), and a bad selector deletes
//!   nothing. Run on `keel up` and on `keel apiserver` over a real etcd 3.5.1.
//! - `/metrics` never waits on the store: `apiserver_storage_objects` is counted in the
//!   background every `--etcd-count-metric-poll-period`, and a scrape while the store is
//!   frozen answers with the last counts.
//! - the paths kube-apiserver does not serve: `POST` (or `PUT`, `PATCH`) on a namespaced
//!   kind's collection across all namespaces (`/api/v1/configmaps`) is 405
//!   `MethodNotAllowed`, as its installer registers only list and watch there, and a named
//!   object of such a kind without its namespace (`/api/v1/configmaps/x`) is 404 (on
//!   `keel up` and on etcd 3.5.1).
//! - authentication: `/healthz`, `/livez`, `/readyz` and `/version` answer without a token;
//!   everything else is 401 with an `Unauthorized` Status without a token or with a wrong one.
//!
//! Requests are held in flight by freezing the store (`kill -STOP`) under `keel apiserver`:
//! a request that reached the store cannot finish before the store is resumed, so which
//! requests are answered while it is frozen is decided by the limits alone, whatever the
//! machine's speed. The store is `keel store`, or etcd 3.5.1 with `KEEL_TEST_TARGET=etcd`.
//! The requests are sent with `curl` (kubectl would retry a 429 on its own).

use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use keel_testkit::kube::{Kube, Stack};
use keel_testkit::{Server, target_flavor};
use serde_json::{Value, json};

/// How long a request held by the frozen store may take to be answered once it is resumed,
/// and how long the requests past the limits may take to be refused.
const ANSWER_LIMIT: Duration = Duration::from_secs(120);

/// An answer to one curl request.
#[derive(Debug)]
struct Answer {
    code: u16,
    /// The `Retry-After` header, if any.
    retry_after: Option<String>,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("{e}: answer {} {:?}", self.code, self.body))
    }
}

/// `curl` with the admin kubeconfig's server, token and CA.
struct Curl {
    server: String,
    token: String,
    ca_file: PathBuf,
    dir: PathBuf,
}

/// A request curl is sending.
struct Pending {
    child: Child,
    headers: PathBuf,
    body: PathBuf,
}

impl Curl {
    fn new(kube: &Kube) -> Curl {
        let view = |field: &str| {
            kube.kubectl_ok(&[
                "config",
                "view",
                "--raw",
                "-o",
                &format!("jsonpath={{{field}}}"),
            ])
        };
        let ca = base64::engine::general_purpose::STANDARD
            .decode(view(".clusters[0].cluster.certificate-authority-data"))
            .expect("the kubeconfig's CA");
        let ca_file = kube.scratch.join("curl-ca.crt");
        fs::write(&ca_file, ca).expect("write the CA");
        Curl {
            server: view(".clusters[0].cluster.server"),
            token: view(".users[0].user.token"),
            ca_file,
            dir: kube.scratch.clone(),
        }
    }

    /// Starts `method path` (with a JSON `body`) under the file name `tag`.
    fn spawn(&self, tag: &str, method: &str, path: &str, body: Option<&Value>) -> Pending {
        self.spawn_as(tag, method, path, body, Some(&self.token))
    }

    /// [`Curl::spawn`] with `token` as the bearer token, or none at all.
    fn spawn_as(
        &self,
        tag: &str,
        method: &str,
        path: &str,
        body: Option<&Value>,
        token: Option<&str>,
    ) -> Pending {
        let headers = self.dir.join(format!("{tag}.headers"));
        let out = self.dir.join(format!("{tag}.body"));
        let mut cmd = Command::new("curl");
        // HTTP/1.1: over HTTP/2, curl 7.88 sometimes fails (exit 92) when the server answers
        // before it has sent the request body, as a 429 or a 401 is answered.
        cmd.args(["-sS", "--http1.1", "--max-time", "300", "--cacert"])
            .arg(&self.ca_file)
            .arg("-D")
            .arg(&headers)
            .arg("-o")
            .arg(&out)
            .args(["-X", method]);
        if let Some(token) = token {
            cmd.args(["-H", &format!("Authorization: Bearer {token}")]);
        }
        if let Some(body) = body {
            let file = self.dir.join(format!("{tag}.request"));
            fs::write(&file, body.to_string()).expect("write the request body");
            // No `Expect: 100-continue` (curl's for a large body): one status line per answer.
            cmd.args(["-H", "Content-Type: application/json", "-H", "Expect:"])
                .arg("--data-binary")
                .arg(format!("@{}", file.display()));
        }
        let child = cmd
            .arg(format!("{}{path}", self.server))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run curl (apt-get install -y curl)");
        Pending {
            child,
            headers,
            body: out,
        }
    }

    /// `method path` to its answer.
    fn send(&self, tag: &str, method: &str, path: &str, body: Option<&Value>) -> Answer {
        self.spawn(tag, method, path, body)
            .wait(method, path, ANSWER_LIMIT)
    }

    /// `GET path` without a token, to its answer.
    fn get_anonymous(&self, tag: &str, path: &str) -> Answer {
        self.spawn_as(tag, "GET", path, None, None)
            .wait("GET", path, ANSWER_LIMIT)
    }
}

impl Pending {
    /// The answer, waited for up to `limit` (failing loudly past it).
    fn wait(mut self, method: &str, path: &str, limit: Duration) -> Answer {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(answer) = self.answer() {
                return answer;
            }
            assert!(
                Instant::now() < deadline,
                "{method} {path}: no answer within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The answer, once curl has it.
    fn answer(&mut self) -> Option<Answer> {
        let status = self.child.try_wait().expect("wait for curl")?;
        let mut err = String::new();
        if let Some(mut stderr) = self.child.stderr.take() {
            std::io::Read::read_to_string(&mut stderr, &mut err).expect("read curl's stderr");
        }
        assert!(status.success(), "curl failed ({status}): {err}");
        let headers = fs::read_to_string(&self.headers).expect("read the headers");
        let code = headers
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no status line in {headers:?}"));
        let retry_after = headers
            .lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.eq_ignore_ascii_case("retry-after"))
            .map(|(_, v)| v.trim().to_string());
        Some(Answer {
            code,
            retry_after,
            body: fs::read_to_string(&self.body).unwrap_or_default(),
        })
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn configmap(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"k": "v"},
    })
}

/// Asserts `answer` is kube's `Status` failure with `code` and `reason` (and `message`).
fn assert_status(answer: &Answer, code: u16, reason: &str, message: Option<&str>) {
    assert_eq!(answer.code, code, "{answer:?}");
    let status = answer.json();
    assert_eq!(status["kind"], "Status", "{status}");
    assert_eq!(status["apiVersion"], "v1", "{status}");
    assert_eq!(status["status"], "Failure", "{status}");
    assert_eq!(status["reason"], reason, "{status}");
    assert_eq!(status["code"], code, "{status}");
    if let Some(message) = message {
        assert_eq!(status["message"], message, "{status}");
    }
}

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// With two read-only and two mutating slots, four reads and four writes sent while the
/// store is frozen: two of each are answered 429 at once, the other two of each are served
/// in full once the store is resumed, and nothing else is answered.
#[test]
fn requests_past_the_inflight_limits_get_429_with_retry_after() {
    let store = Server::start(target_flavor());
    let kube = Kube::start_on_with(
        &store.client_url,
        &[
            "--max-requests-inflight=2",
            "--max-mutating-requests-inflight=2",
            // Far longer than the test holds a request: only the limits answer early.
            "--request-timeout=10m",
        ],
    );
    let curl = Curl::new(&kube);
    kube.kubectl_ok(&["create", "configmap", "held", "--from-literal=k=v"]);

    store.pause();
    let mut writes: Vec<(String, Pending)> = (0..4)
        .map(|i| {
            let name = format!("w{i}");
            let pending = curl.spawn(&name, "POST", CONFIGMAPS, Some(&configmap(&name)));
            (name, pending)
        })
        .collect();
    let mut reads: Vec<Pending> = (0..4)
        .map(|i| curl.spawn(&format!("r{i}"), "GET", &format!("{CONFIGMAPS}/held"), None))
        .collect();

    // Nothing can be served while the store is frozen: what is answered now is refused by
    // the limits, and two of each kind must be (the others hold the slots until the end).
    let mut write_answers: Vec<Option<Answer>> = (0..4).map(|_| None).collect();
    let mut read_answers: Vec<Option<Answer>> = (0..4).map(|_| None).collect();
    let deadline = Instant::now() + ANSWER_LIMIT;
    loop {
        for (i, (_, p)) in writes.iter_mut().enumerate() {
            if write_answers[i].is_none() {
                write_answers[i] = p.answer();
            }
        }
        for (i, p) in reads.iter_mut().enumerate() {
            if read_answers[i].is_none() {
                read_answers[i] = p.answer();
            }
        }
        for answer in write_answers.iter().chain(&read_answers).flatten() {
            assert_status(
                answer,
                429,
                "TooManyRequests",
                Some("Too many requests, please try again later."),
            );
            assert_eq!(answer.retry_after.as_deref(), Some("1"), "{answer:?}");
            assert_eq!(answer.json()["details"]["retryAfterSeconds"], 1);
        }
        let refused = |answers: &[Option<Answer>]| answers.iter().flatten().count();
        if refused(&write_answers) >= 2 && refused(&read_answers) >= 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "past 2 read-only and 2 mutating requests in flight, {} of 2 extra writes and {} \
             of 2 extra reads were refused within {ANSWER_LIMIT:?}\n{}",
            refused(&write_answers),
            refused(&read_answers),
            kube.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    store.resume();
    let deadline = Instant::now() + ANSWER_LIMIT;
    let mut created = BTreeSet::new();
    let mut refused_names = BTreeSet::new();
    for (i, (name, p)) in writes.iter_mut().enumerate() {
        let answer = match write_answers[i].take() {
            Some(answer) => {
                refused_names.insert(name.clone());
                answer
            }
            None => loop {
                if let Some(answer) = p.answer() {
                    assert_eq!(answer.code, 201, "a held create: {answer:?}");
                    assert_eq!(answer.json()["metadata"]["name"], name.as_str());
                    created.insert(name.clone());
                    break answer;
                }
                assert!(Instant::now() < deadline, "a held create was not answered");
                std::thread::sleep(Duration::from_millis(20));
            },
        };
        assert!(matches!(answer.code, 201 | 429), "{answer:?}");
    }
    for (i, p) in reads.iter_mut().enumerate() {
        if read_answers[i].is_some() {
            continue;
        }
        let answer = loop {
            if let Some(answer) = p.answer() {
                break answer;
            }
            assert!(Instant::now() < deadline, "a held get was not answered");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(answer.code, 200, "a held get: {answer:?}");
        assert_eq!(answer.json()["metadata"]["name"], "held");
    }
    assert_eq!(
        created.len(),
        2,
        "created {created:?}, refused {refused_names:?}"
    );
    assert_eq!(
        refused_names.len(),
        2,
        "created {created:?}, refused {refused_names:?}"
    );

    // Exactly the served creates exist, and every slot was given back.
    let names: BTreeSet<String> = kube
        .kubectl_ok(&["get", "configmaps", "-o", "name"])
        .lines()
        .map(|l| l.trim_start_matches("configmap/").to_string())
        .collect();
    let mut expected = created.clone();
    expected.insert("held".to_string());
    assert_eq!(names, expected);
    let again: Vec<Pending> = (0..2)
        .map(|i| curl.spawn(&format!("list{i}"), "GET", CONFIGMAPS, None))
        .chain((0..2).map(|i| {
            let name = format!("again{i}");
            curl.spawn(&name, "POST", CONFIGMAPS, Some(&configmap(&name)))
        }))
        .collect();
    for mut p in again {
        let deadline = Instant::now() + ANSWER_LIMIT;
        let answer = loop {
            if let Some(answer) = p.answer() {
                break answer;
            }
            assert!(
                Instant::now() < deadline,
                "no answer after the limits emptied"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(matches!(answer.code, 200 | 201), "{answer:?}");
    }
}

/// Node heartbeats keep a quarter of the mutating slots: with four, three ConfigMap creates
/// held by the frozen store fill what other writes may take (a fourth is refused at once),
/// and a node Lease create still gets the last slot; only a second Lease is refused. Once
/// the store is resumed, the held Lease is created.
#[test]
fn node_heartbeats_keep_a_quarter_of_the_mutating_slots() {
    let store = Server::start(target_flavor());
    let kube = Kube::start_on_with(
        &store.client_url,
        &[
            "--max-mutating-requests-inflight=4",
            "--request-timeout=10m",
        ],
    );
    let curl = Curl::new(&kube);
    kube.kubectl_ok(&["get", "namespace", "kube-node-lease"]);
    const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    let lease = |name: &str| {
        json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40},
        })
    };
    store.pause();
    let held: Vec<Pending> = (0..3)
        .map(|i| {
            let name = format!("held{i}");
            curl.spawn(&name, "POST", CONFIGMAPS, Some(&configmap(&name)))
        })
        .collect();
    // Once the three hold their slots, the rest are sent one by one.
    let in_flight = || kube.metric_sum("apiserver_current_inflight_requests", "\"mutating\"");
    let deadline = Instant::now() + ANSWER_LIMIT;
    while in_flight() < 3.0 {
        assert!(
            Instant::now() < deadline,
            "the creates never reached the store"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let fourth = curl
        .spawn("cm4", "POST", CONFIGMAPS, Some(&configmap("cm4")))
        .wait("POST", CONFIGMAPS, ANSWER_LIMIT);
    assert_status(&fourth, 429, "TooManyRequests", None);
    let mut heartbeat = curl.spawn("n1", "POST", LEASES, Some(&lease("n1")));
    while in_flight() < 4.0 {
        assert!(Instant::now() < deadline, "the heartbeat got no slot");
        std::thread::sleep(Duration::from_millis(50));
    }
    let second =
        curl.spawn("n2", "POST", LEASES, Some(&lease("n2")))
            .wait("POST", LEASES, ANSWER_LIMIT);
    assert_status(&second, 429, "TooManyRequests", None);
    assert!(
        heartbeat.answer().is_none(),
        "the heartbeat was answered while the store was frozen"
    );
    store.resume();
    let created = heartbeat.wait("POST", LEASES, ANSWER_LIMIT);
    assert_eq!(created.code, 201, "{created:?}");
    for p in held {
        let answer = p.wait("POST", CONFIGMAPS, ANSWER_LIMIT);
        assert_eq!(answer.code, 201, "{answer:?}");
    }
}

/// Event writes hold at most an eighth of the mutating slots and wait for one in a queue of
/// twice as many: with eight slots, one Event create held by the frozen store takes the
/// Events' share, two more wait in the queue (`apiserver_current_inqueue_requests`), a fourth
/// is refused at once, and a ConfigMap create still gets a slot; once the store answers, every
/// queued event is created. A queued event whose slot does not come within the wait limit is
/// answered 429.
#[test]
fn events_hold_at_most_an_eighth_of_the_mutating_slots_and_queue_for_them() {
    let store = Server::start(target_flavor());
    let kube = Kube::start_on_with(
        &store.client_url,
        &[
            "--max-mutating-requests-inflight=8",
            "--request-timeout=10m",
        ],
    );
    let curl = Curl::new(&kube);
    const EVENTS: &str = "/api/v1/namespaces/default/events";
    let event = |name: &str| {
        json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p1"},
            "reason": "Flood", "message": "m", "type": "Normal",
        })
    };
    let in_flight = || kube.metric_sum("apiserver_current_inflight_requests", "\"mutating\"");
    let in_queue = || kube.metric_sum("apiserver_current_inqueue_requests", "\"mutating\"");
    let wait_for = |what: &dyn Fn() -> f64, n: f64| {
        let deadline = Instant::now() + ANSWER_LIMIT;
        while what() < n {
            assert!(Instant::now() < deadline, "{n} writes never got there");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    store.pause();
    let held = curl.spawn("e1", "POST", EVENTS, Some(&event("e1")));
    wait_for(&in_flight, 1.0);
    let queued: Vec<_> = ["e2", "e3"]
        .into_iter()
        .map(|name| curl.spawn(name, "POST", EVENTS, Some(&event(name))))
        .collect();
    wait_for(&in_queue, 2.0);
    let refused =
        curl.spawn("e4", "POST", EVENTS, Some(&event("e4")))
            .wait("POST", EVENTS, ANSWER_LIMIT);
    assert_status(&refused, 429, "TooManyRequests", None);
    let configmap_write = curl.spawn("c1", "POST", CONFIGMAPS, Some(&configmap("c1")));
    wait_for(&in_flight, 2.0);
    store.resume();
    let answered = [(held, EVENTS), (configmap_write, CONFIGMAPS)]
        .into_iter()
        .chain(queued.into_iter().map(|p| (p, EVENTS)));
    for (p, path) in answered {
        let answer = p.wait("POST", path, ANSWER_LIMIT);
        assert_eq!(answer.code, 201, "{answer:?}");
    }
    assert_eq!(in_queue(), 0.0, "no event is left counted as queued");

    // A queued event waits at most the wait limit: the store frozen again, the one behind the
    // held event is answered 429 while the held one still waits for the store.
    store.pause();
    let held = curl.spawn("e5", "POST", EVENTS, Some(&event("e5")));
    wait_for(&in_flight, 1.0);
    let timed_out =
        curl.spawn("e6", "POST", EVENTS, Some(&event("e6")))
            .wait("POST", EVENTS, ANSWER_LIMIT);
    assert_status(&timed_out, 429, "TooManyRequests", None);
    store.resume();
    let answer = held.wait("POST", EVENTS, ANSWER_LIMIT);
    assert_eq!(answer.code, 201, "{answer:?}");
}

/// A body past the apiserver's 3 MiB limit is answered 413 `RequestEntityTooLarge`, stores
/// nothing, and gives its slot back: with one mutating slot, the next create is served.
#[test]
fn a_body_past_the_limit_gets_413_and_gives_its_slot_back() {
    let store = Server::start(target_flavor());
    let kube = Kube::start_on_with(&store.client_url, &["--max-mutating-requests-inflight=1"]);
    let curl = Curl::new(&kube);
    let mut huge = configmap("huge");
    huge["data"] = json!({"k": "x".repeat(4 * 1024 * 1024)});
    let answer = curl.send("huge", "POST", CONFIGMAPS, Some(&huge));
    assert_status(&answer, 413, "RequestEntityTooLarge", None);
    let next = curl.send("next", "POST", CONFIGMAPS, Some(&configmap("next")));
    assert_eq!(next.code, 201, "{next:?}");
    assert!(!kube.kubectl(&["get", "configmap", "huge"]).status.success());
}

/// `--request-timeout=2s` with one slot of each kind: a get and a create the frozen store
/// does not answer get 504 `Timeout`; the get's slot is given back (a second get times out
/// too rather than being refused 429); once the store is resumed the server serves again.
#[test]
fn a_request_past_the_request_timeout_gets_504() {
    let store = Server::start(target_flavor());
    let kube = Kube::start_on_with(
        &store.client_url,
        &[
            "--request-timeout=2s",
            "--max-requests-inflight=1",
            "--max-mutating-requests-inflight=1",
        ],
    );
    let curl = Curl::new(&kube);
    kube.kubectl_ok(&["create", "configmap", "before", "--from-literal=k=v"]);
    let timeout = "Timeout: request did not complete within requested timeout - context \
                   deadline exceeded";

    store.pause();
    let get = format!("{CONFIGMAPS}/before");
    for tag in ["get1", "get2"] {
        let answer = curl.send(tag, "GET", &get, None);
        assert_status(&answer, 504, "Timeout", Some(timeout));
    }
    let answer = curl.send("create", "POST", CONFIGMAPS, Some(&configmap("during")));
    assert_status(&answer, 504, "Timeout", Some(timeout));
    store.resume();

    let deadline = Instant::now() + ANSWER_LIMIT;
    loop {
        let answer = curl.send("get3", "GET", &get, None);
        if answer.code == 200 {
            assert_eq!(answer.json()["data"]["k"], "v");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server did not serve again after the store was resumed: {answer:?}\n{}",
            kube.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    kube.kubectl_ok(&["create", "configmap", "after", "--from-literal=k=v"]);
    let names = kube.kubectl_ok(&["get", "configmaps", "-o", "name"]);
    for name in ["configmap/before", "configmap/after"] {
        assert!(names.lines().any(|l| l == name), "{name} missing:\n{names}");
    }
}

/// The configmaps of the test's namespaces as `namespace/name`.
fn configmaps(kube: &Kube) -> BTreeSet<String> {
    let mut all = BTreeSet::new();
    for ns in NAMESPACES {
        let out = kube.kubectl_ok(&[
            "get",
            "configmaps",
            "-n",
            ns,
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}",
        ]);
        // kube-apiserver's root CA publisher adds one to every namespace; it is no part of
        // what the selectors below pick.
        all.extend(
            out.lines()
                .filter(|n| *n != "kube-root-ca.crt")
                .map(|n| format!("{ns}/{n}")),
        );
    }
    all
}

const NAMESPACES: [&str; 2] = ["sel-a", "sel-b"];

/// The names deleted by a collection `DELETE` (its answer is the list of what it deleted).
fn delete_collection(kube: &Kube, ns: &str, query: &str) -> BTreeSet<String> {
    let path = format!("/api/v1/namespaces/{ns}/configmaps?{query}");
    let out = kube.kubectl_ok(&["delete", "--raw", &path]);
    let list: Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: DELETE {path}: {out}"));
    assert_eq!(list["kind"], "ConfigMapList", "{list}");
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items in {list}"))
        .iter()
        .map(|item| {
            assert_eq!(item["metadata"]["namespace"], ns, "{item}");
            format!("{ns}/{}", item["metadata"]["name"].as_str().unwrap())
        })
        .collect()
}

/// Removes `gone` from `expected` and checks the store holds exactly `expected`.
fn check(kube: &Kube, expected: &mut BTreeSet<String>, gone: &[&str], step: &str) {
    for g in gone {
        assert!(expected.remove(*g), "{step}: {g} was not there to delete");
    }
    assert_eq!(&configmaps(kube), expected, "{step} on {:?}", kube.stack);
}

fn deletes_by_selector(stack: Stack) {
    let kube = Kube::start(stack);
    let mut expected = BTreeSet::new();
    for ns in NAMESPACES {
        kube.kubectl_ok(&["create", "namespace", ns]);
        for (name, labels) in [
            ("c1", "app=x"),
            ("c2", "app=x,tier=web"),
            ("c3", "app=y"),
            ("c4", "tier=web"),
            ("c5", ""),
            ("c6", "app=x"),
        ] {
            kube.kubectl_ok(&["create", "configmap", name, "-n", ns]);
            if !labels.is_empty() {
                let mut args = vec!["label", "configmap", name, "-n", ns];
                args.extend(labels.split(','));
                kube.kubectl_ok(&args);
            }
            expected.insert(format!("{ns}/{name}"));
        }
    }
    assert_eq!(configmaps(&kube), expected);

    // kubectl's own selector deletes (a list with the selector, then one delete per item).
    kube.kubectl_ok(&[
        "delete",
        "configmaps",
        "-n",
        "sel-a",
        "-l",
        "app=x,tier=web",
    ]);
    check(&kube, &mut expected, &["sel-a/c2"], "kubectl delete -l");
    kube.kubectl_ok(&[
        "delete",
        "configmaps",
        "-n",
        "sel-a",
        "--field-selector",
        "metadata.name=c3",
    ]);
    check(
        &kube,
        &mut expected,
        &["sel-a/c3"],
        "kubectl delete --field-selector",
    );

    // deletecollection: DELETE on the namespace's collection.
    let deleted = delete_collection(&kube, "sel-b", "labelSelector=app%3Dx");
    let want = ["sel-b/c1", "sel-b/c2", "sel-b/c6"];
    assert_eq!(deleted, want.iter().map(|s| s.to_string()).collect());
    check(
        &kube,
        &mut expected,
        &want,
        "deletecollection labelSelector=app=x",
    );
    let deleted = delete_collection(&kube, "sel-b", "fieldSelector=metadata.name%3Dc4");
    assert_eq!(deleted, BTreeSet::from(["sel-b/c4".to_string()]));
    check(
        &kube,
        &mut expected,
        &["sel-b/c4"],
        "deletecollection fieldSelector",
    );
    let deleted = delete_collection(
        &kube,
        "sel-a",
        "labelSelector=app%20in%20(x%2Cy)&fieldSelector=metadata.name!%3Dc6",
    );
    assert_eq!(deleted, BTreeSet::from(["sel-a/c1".to_string()]));
    check(
        &kube,
        &mut expected,
        &["sel-a/c1"],
        "deletecollection both selectors",
    );
    let deleted = delete_collection(&kube, "sel-a", "labelSelector=app%3Dnone");
    assert!(deleted.is_empty(), "{deleted:?}");
    check(
        &kube,
        &mut expected,
        &[],
        "deletecollection matching nothing",
    );

    // Refusals delete nothing: a selector that does not parse, and a DELETE of every
    // namespace's collection at once (kube-apiserver serves deletecollection only within a
    // namespace: 405 MethodNotAllowed).
    let out = kube.kubectl(&[
        "delete",
        "--raw",
        "/api/v1/namespaces/sel-a/configmaps?labelSelector=app%3D%3D%3Dx",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("BadRequest"), "{err}");
    check(&kube, &mut expected, &[], "a bad selector");
    let out = kube.kubectl(&[
        "delete",
        "--raw",
        "/api/v1/configmaps?labelSelector=app%3Dx",
    ]);
    assert!(
        !out.status.success(),
        "DELETE /api/v1/configmaps was served"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("MethodNotAllowed"), "{err}");
    check(&kube, &mut expected, &[], "DELETE across namespaces");

    // What is left: sel-a c4 c5 c6, sel-b c3 c5; `kubectl delete -l` across namespaces.
    kube.kubectl_ok(&["delete", "configmaps", "-A", "-l", "tier=web"]);
    check(&kube, &mut expected, &["sel-a/c4"], "kubectl delete -A -l");
    let left: Vec<&str> = expected.iter().map(String::as_str).collect();
    assert_eq!(left, ["sel-a/c5", "sel-a/c6", "sel-b/c3", "sel-b/c5"]);
}

#[test]
fn deletecollection_deletes_what_the_selectors_match_on_keel_up() {
    deletes_by_selector(Stack::Up);
}

#[test]
fn deletecollection_deletes_what_the_selectors_match_on_etcd() {
    deletes_by_selector(Stack::OnEtcd);
}

/// The value of `apiserver_storage_objects{resource="<resource>"}` in a scrape, if any.
fn storage_objects(scrape: &str, resource: &str) -> Option<i64> {
    let series = format!("apiserver_storage_objects{{resource=\"{resource}\"}} ");
    scrape
        .lines()
        .find_map(|line| line.strip_prefix(series.as_str()))
        .map(|value| {
            value
                .trim()
                .parse()
                .unwrap_or_else(|e| panic!("{e}: {series}{value}"))
        })
}

/// Scrapes `/metrics` until `apiserver_storage_objects` counts at least `at_least`
/// configmaps, and returns that count.
fn wait_for_configmap_count(kube: &Kube, curl: &Curl, at_least: i64) -> i64 {
    let deadline = Instant::now() + ANSWER_LIMIT;
    loop {
        let answer = curl.send("metrics", "GET", "/metrics", None);
        assert_eq!(answer.code, 200, "{answer:?}");
        let count = storage_objects(&answer.body, "configmaps");
        if let Some(count) = count.filter(|c| *c >= at_least) {
            return count;
        }
        assert!(
            Instant::now() < deadline,
            "apiserver_storage_objects did not count {at_least} configmaps within \
             {ANSWER_LIMIT:?} (last: {count:?})\n{}",
            kube.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// How long a scrape may take while the store is frozen: generous, but far below what a
/// scrape waiting on the store would take (it would wait until the store is resumed).
const FROZEN_SCRAPE_LIMIT: Duration = Duration::from_secs(10);

/// `apiserver_storage_objects` is counted in the background (every second here), so while
/// the store is frozen a scrape answers at once, with the last counts until a count times out
/// and then with -1 (a failed count, as kube-apiserver marks it), and the counting goes on
/// once the store is resumed.
#[test]
fn metrics_answers_with_the_last_counts_while_the_store_is_frozen() {
    let store = Server::start(target_flavor());
    let kube = Kube::start_on_with(&store.client_url, &["--etcd-count-metric-poll-period=1s"]);
    let curl = Curl::new(&kube);
    for name in ["counted1", "counted2"] {
        kube.kubectl_ok(&["create", "configmap", name, "--from-literal=k=v"]);
    }
    let counted = wait_for_configmap_count(&kube, &curl, 2);

    store.pause();
    let deadline = Instant::now() + Duration::from_secs(60);
    for scrape in 0.. {
        let tag = format!("frozen{scrape}");
        let answer =
            curl.spawn(&tag, "GET", "/metrics", None)
                .wait("GET", "/metrics", FROZEN_SCRAPE_LIMIT);
        assert_eq!(answer.code, 200, "{answer:?}");
        let count = storage_objects(&answer.body, "configmaps");
        assert!(
            count.is_some_and(|c| c >= counted || c == -1),
            "a scrape while the store is frozen: configmaps counted {count:?}, {counted} \
             before\n{}",
            answer.body
        );
        assert!(
            storage_objects(&answer.body, "leases.coordination.k8s.io").is_some(),
            "{}",
            answer.body
        );
        assert!(
            answer.body.contains("apiserver_request_total{"),
            "{}",
            answer.body
        );
        if count == Some(-1) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the frozen store's configmaps count never failed (-1) in {scrape} scrapes"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    store.resume();

    kube.kubectl_ok(&["create", "configmap", "counted3", "--from-literal=k=v"]);
    wait_for_configmap_count(&kube, &curl, counted + 1);
}

/// `POST`, `PUT` and `PATCH` on a namespaced kind's collection across all namespaces are
/// 405 `MethodNotAllowed` and write nothing; list is still served there.
fn writes_across_all_namespaces_are_not_allowed(stack: Stack) {
    let kube = Kube::start(stack);
    let curl = Curl::new(&kube);
    let message = "the server does not allow this method on the requested resource";
    let in_default = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "everywhere2", "namespace": "default"},
    });
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "everywhere", "namespace": "default"},
    });
    for (tag, method, path, body) in [
        (
            "post",
            "POST",
            "/api/v1/configmaps",
            configmap("everywhere"),
        ),
        ("post-ns", "POST", "/api/v1/configmaps", in_default.clone()),
        ("put", "PUT", "/api/v1/configmaps", in_default.clone()),
        (
            "patch",
            "PATCH",
            "/api/v1/configmaps",
            json!({"data": {"k": "v"}}),
        ),
        (
            "lease",
            "POST",
            "/apis/coordination.k8s.io/v1/leases",
            lease.clone(),
        ),
    ] {
        let answer = curl.send(tag, method, path, Some(&body));
        assert_status(&answer, 405, "MethodNotAllowed", Some(message));
    }
    let list = curl.send("list", "GET", "/api/v1/configmaps", None);
    assert_eq!(list.code, 200, "{list:?}");
    assert_eq!(list.json()["kind"], "ConfigMapList");
    let names = kube.kubectl_ok(&["get", "configmaps,leases", "-A", "-o", "name"]);
    assert!(!names.contains("everywhere"), "{names}");

    // The same objects are created within their namespace.
    let answer = curl.send("create", "POST", CONFIGMAPS, Some(&in_default));
    assert_eq!(answer.code, 201, "{answer:?}");

    // A named object is served only under its namespace: the same name without one is a
    // path kube-apiserver does not serve (404), whatever the method, and nothing changes.
    let missing = "the server could not find the requested resource";
    for (tag, method, path, body) in [
        ("get-named", "GET", "/api/v1/configmaps/everywhere2", None),
        (
            "put-named",
            "PUT",
            "/api/v1/configmaps/everywhere2",
            Some(&in_default),
        ),
        (
            "patch-named",
            "PATCH",
            "/api/v1/configmaps/everywhere2",
            Some(&json!({"data": {"k": "v"}})),
        ),
        (
            "delete-named",
            "DELETE",
            "/api/v1/configmaps/everywhere2",
            None,
        ),
        (
            "status-named",
            "GET",
            "/api/v1/pods/everywhere/status",
            None,
        ),
    ] {
        let answer = curl.send(tag, method, path, body);
        assert_status(&answer, 404, "NotFound", Some(missing));
    }
    let answer = curl.send(
        "still-there",
        "GET",
        &format!("{CONFIGMAPS}/everywhere2"),
        None,
    );
    assert_eq!(answer.code, 200, "{answer:?}");
    assert!(answer.json()["data"].is_null(), "{answer:?}");

    // Under `watch/` only GET is served: a write there is 405 and writes nothing (a DELETE
    // there once deleted the whole collection).
    let watch_path = "/api/v1/watch/namespaces/default/configmaps";
    for (tag, method, path, body) in [
        ("watch-delete", "DELETE", watch_path.to_string(), None),
        (
            "watch-post",
            "POST",
            watch_path.to_string(),
            Some(&in_default),
        ),
        (
            "watch-delete-named",
            "DELETE",
            format!("{watch_path}/everywhere2"),
            None,
        ),
        (
            "watch-put-named",
            "PUT",
            format!("{watch_path}/everywhere2"),
            Some(&in_default),
        ),
    ] {
        let answer = curl.send(tag, method, &path, body);
        assert_status(&answer, 405, "MethodNotAllowed", Some(message));
    }
    let answer = curl.send(
        "survived",
        "GET",
        &format!("{CONFIGMAPS}/everywhere2"),
        None,
    );
    assert_eq!(answer.code, 200, "{answer:?}");

    // A GET there watches the one object: its ADDED event, and no other object's.
    kube.kubectl_ok(&["create", "configmap", "bystander", "--from-literal=k=v"]);
    let answer = curl.send(
        "watch-named",
        "GET",
        &format!("{watch_path}/everywhere2?timeoutSeconds=2"),
        None,
    );
    assert_eq!(answer.code, 200, "{answer:?}");
    let events: Vec<Value> = answer
        .body
        .lines()
        .map(|l| serde_json::from_str(l).expect("a watch event"))
        .collect();
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["object"]["metadata"]["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(names, ["everywhere2"], "{}", answer.body);
    assert_eq!(events[0]["type"], "ADDED", "{}", answer.body);
}

#[test]
fn writes_across_all_namespaces_are_405_on_keel_up() {
    writes_across_all_namespaces_are_not_allowed(Stack::Up);
}

#[test]
fn writes_across_all_namespaces_are_405_on_etcd() {
    writes_across_all_namespaces_are_not_allowed(Stack::OnEtcd);
}

/// `/healthz`, `/livez`, `/readyz` and `/version` answer without a token; everything else
/// (discovery, `/metrics`, OpenAPI, resources) is 401 with an `Unauthorized` Status, without
/// a token or with a wrong one.
#[test]
fn only_health_and_version_answer_without_a_token() {
    let kube = Kube::start(Stack::Up);
    let curl = Curl::new(&kube);
    for path in ["/healthz", "/livez", "/readyz"] {
        let answer = curl.get_anonymous(path.trim_start_matches('/'), path);
        assert_eq!((answer.code, answer.body.trim()), (200, "ok"), "{path}");
    }
    let answer = curl.get_anonymous("version", "/version");
    assert_eq!(answer.code, 200, "{answer:?}");
    assert!(answer.json()["gitVersion"].as_str().is_some(), "{answer:?}");
    for (i, path) in [
        "/api",
        "/apis",
        "/api/v1",
        "/metrics",
        "/openapi/v2",
        CONFIGMAPS,
        "/api/v1/namespaces/default",
    ]
    .into_iter()
    .enumerate()
    {
        let answer = curl.get_anonymous(&format!("anonymous{i}"), path);
        assert_status(&answer, 401, "Unauthorized", Some("Unauthorized"));
        let answer = curl
            .spawn_as(&format!("wrong{i}"), "GET", path, None, Some("not-a-token"))
            .wait("GET", path, ANSWER_LIMIT);
        assert_status(&answer, 401, "Unauthorized", Some("Unauthorized"));
    }
    // A write with a wrong token is refused the same way, and writes nothing (kubectl: curl
    // 7.88 fails with exit 92 when an HTTP/2 server answers before it has sent the body,
    // which kube-apiserver does too).
    let out = kube.kubectl(&[
        "--token",
        "not-a-token",
        "create",
        "configmap",
        "anon",
        "--from-literal=k=v",
    ]);
    assert!(
        !out.status.success(),
        "a create with a wrong token was served"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Unauthorized"), "{err}");
    let names = kube.kubectl_ok(&["get", "configmaps", "-o", "name"]);
    assert!(!names.contains("configmap/anon"), "{names}");
    // The same paths with the token are served.
    for path in ["/api", "/metrics"] {
        let answer = curl.send("authorized", "GET", path, None);
        assert_eq!(answer.code, 200, "{path}: {answer:?}");
    }
}
