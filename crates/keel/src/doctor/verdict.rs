//! The doctor's decision, sans I/O: from what the apiserver's and each store member's metrics
//! did over one interval, the layer at fault (`apiserver`, `store` or `none`), the store's axis
//! (Raft, WAL, MVCC, Watch, Lease), the member, and the evidence.
//!
//! Each signal is compared with a threshold taken from etcd's or Kubernetes' own guidance
//! (cited at each one) and scored: 0 below it, 0.5 at it, 1 at ten times it. The strongest
//! signal names the verdict; below 0.5 everywhere the verdict is `none`. Two rules keep the
//! classic mistakes out: a slow apiserver whose time goes to the store is the store's (and
//! takes the store's axis), and signals of a symptom (a watch backlog, relists, nodes not
//! renewing) name their own axis, never Raft, when the store has a leader and no Raft signal.

use std::fmt;

use serde::Serialize;

use super::logs::LogLine;
use super::scrape::{Delta, Sample, all};

/// Where the trouble is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    /// The Kubernetes API server.
    Apiserver,
    /// The store (etcd or keel store).
    Store,
    /// Nowhere: every signal is within its threshold.
    None,
}

/// The store's five axes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Axis {
    /// Elections, leader changes, peer round trips, failed proposals.
    Raft,
    /// fsync latency: the disk.
    Wal,
    /// Backend commits, applies, database size and quota.
    Mvcc,
    /// Slow or overflowing watchers, relists after compaction, the watch cache.
    Watch,
    /// Expiry storms, keep-alives, node heartbeats.
    Lease,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layer::Apiserver => "apiserver",
            Layer::Store => "store",
            Layer::None => "none",
        })
    }
}

impl fmt::Display for Axis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Axis::Raft => "raft",
            Axis::Wal => "wal",
            Axis::Mvcc => "mvcc",
            Axis::Watch => "watch",
            Axis::Lease => "lease",
        })
    }
}

/// One signal past (or near) its threshold.
#[derive(Debug, Clone, Serialize)]
pub struct Evidence {
    /// The metric, with the labels or the quantile read (`p99 of ...`).
    pub metric: String,
    /// What it was over the interval.
    pub value: f64,
    /// Its threshold.
    pub threshold: f64,
    /// The member it was read on (store signals).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub member: Option<String>,
    /// What it means, in a few words.
    pub meaning: String,
    #[serde(skip)]
    layer: Layer,
    #[serde(skip)]
    axis: Option<Axis>,
    /// The member a signal points at (a peer's round trips point at the peer).
    #[serde(skip)]
    at_fault: Option<String>,
    #[serde(skip)]
    score: f64,
    /// A consequence of another signal's cause (a slow disk's failed proposals): it decides
    /// only when no cause does.
    #[serde(skip)]
    symptom: bool,
}

/// The doctor's answer.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// Where the trouble is.
    pub layer: Layer,
    /// The store's axis (or the apiserver's, for its watch cache and node heartbeats).
    pub axis: Option<Axis>,
    /// The member at fault, when one is.
    pub member: Option<String>,
    /// How sure: the deciding signal's score, 0 to 1.
    pub confidence: f64,
    /// The signals that decided it, strongest first.
    pub evidence: Vec<Evidence>,
    /// The log lines of the interval that matter (`--log`), its own axis's first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub logs: Vec<LogLine>,
    /// What to run next.
    pub next: Vec<String>,
}

/// One store member's interval.
pub struct Member<'s> {
    /// Its name.
    pub name: String,
    /// Its metrics over the interval.
    pub delta: Delta<'s>,
    /// Member IDs (hex, as in `To` labels) to names, for signals about a peer.
    pub peers: Vec<(String, String)>,
}

/// What was observed over one interval.
pub struct Observed<'s> {
    /// The apiserver's metrics, when one was named.
    pub apiserver: Option<Delta<'s>>,
    /// Each store member's.
    pub members: Vec<Member<'s>>,
}

/// The score of `value` against `threshold`: 0 below it, 0.5 at it, 1 at ten times it.
fn score(value: f64, threshold: f64) -> f64 {
    if value < threshold || threshold <= 0.0 {
        return 0.0;
    }
    (0.5 + 0.5 * (value / threshold).log10()).min(1.0)
}

struct Signals {
    found: Vec<Evidence>,
}

impl Signals {
    #[allow(clippy::too_many_arguments)]
    fn check(
        &mut self,
        layer: Layer,
        axis: Option<Axis>,
        member: Option<&str>,
        metric: String,
        value: f64,
        threshold: f64,
        meaning: &str,
    ) {
        let score = score(value, threshold);
        if score > 0.0 {
            self.found.push(Evidence {
                metric,
                value,
                threshold,
                member: member.map(str::to_string),
                meaning: meaning.to_string(),
                layer,
                axis,
                at_fault: member.map(str::to_string),
                score,
                symptom: false,
            });
        }
    }
}

/// Decides from `observed`.
pub fn decide(observed: &Observed) -> Verdict {
    let mut signals = Signals { found: Vec::new() };
    for member in &observed.members {
        store_signals(&mut signals, member);
    }
    if let Some(apiserver) = &observed.apiserver {
        apiserver_signals(&mut signals, apiserver, &observed.members);
    }
    let mut found = signals.found;
    blame_raft(&mut found, &observed.members);
    mark_symptoms(&mut found);
    found.sort_by(|a, b| b.score.total_cmp(&a.score));
    // Causes before symptoms, then the strongest; at equal strength the axis more often a
    // cause (a slow disk fails proposals, never the reverse).
    let top = found
        .iter()
        .filter(|e| e.score >= 0.5)
        .min_by(|a, b| {
            a.symptom
                .cmp(&b.symptom)
                .then(b.score.total_cmp(&a.score))
                .then(cause_order(a.axis).cmp(&cause_order(b.axis)))
        })
        .cloned();
    let Some(top) = top else {
        return Verdict {
            layer: Layer::None,
            axis: None,
            member: None,
            confidence: 1.0 - found.first().map_or(0.0, |e| e.score),
            evidence: found,
            logs: Vec::new(),
            next: Vec::new(),
        };
    };
    // A slow apiserver whose time goes to the store: the store's axis, if it shows one.
    let (layer, axis, member) = match (top.layer, top.axis) {
        (Layer::Store, None) => match found
            .iter()
            .find(|e| e.layer == Layer::Store && e.axis.is_some())
        {
            Some(cause) => (Layer::Store, cause.axis, cause.at_fault.clone()),
            None => (Layer::Store, None, None),
        },
        _ => (top.layer, top.axis, top.at_fault.clone()),
    };
    // A signal every member shows (an expiry storm each applies, a disk they share) points
    // at none of them.
    let everywhere = observed.members.len() >= 2
        && top.axis != Some(Axis::Raft)
        && observed.members.iter().all(|m| {
            found.iter().any(|e| {
                e.metric == top.metric && e.score >= 0.5 && e.member.as_ref() == Some(&m.name)
            })
        });
    let member = member.filter(|_| !everywhere);
    Verdict {
        next: next_steps(layer, axis, member.as_deref().unwrap_or("")),
        layer,
        axis,
        member,
        confidence: (top.score * 100.0).round() / 100.0,
        evidence: found,
        logs: Vec::new(),
    }
}

/// Which axis wins a tie: the one more often a cause.
fn cause_order(axis: Option<Axis>) -> u8 {
    match axis {
        Some(Axis::Wal) => 0,
        Some(Axis::Mvcc) => 1,
        Some(Axis::Lease) => 2,
        Some(Axis::Watch) => 3,
        None => 4,
        Some(Axis::Raft) => 5,
    }
}

/// Marks the signals that are another's consequence: elections and failed proposals beside a
/// slow disk or backend (writes time out waiting on it), and nodes not renewing while the
/// store shows a cause of its own (their renewals wait on it: not the kubelets).
fn mark_symptoms(found: &mut [Evidence]) {
    let cause = |e: &Evidence| e.layer == Layer::Store && e.score >= 0.5;
    let slow_disk = found
        .iter()
        .any(|e| cause(e) && matches!(e.axis, Some(Axis::Wal | Axis::Mvcc)));
    for e in found.iter_mut() {
        let consequence = e
            .metric
            .starts_with("increase of etcd_server_leader_changes_seen")
            || e.metric
                .starts_with("increase of etcd_server_proposals_failed");
        if slow_disk && consequence {
            e.symptom = true;
            e.meaning += " (a symptom: the disk or the backend is slow)";
        }
    }
    let store_cause = found.iter().any(|e| cause(e) && !e.symptom);
    for e in found.iter_mut() {
        if store_cause && e.metric == UNHEALTHY_NODES {
            e.symptom = true;
            e.meaning = "nodes stopped renewing: their renewals wait on the slow store".into();
        }
    }
}

const UNHEALTHY_NODES: &str = "node_collector_unhealthy_nodes_in_zone";

/// The member Raft's failed messages point at: each failure to a peer blames the peer once,
/// and a member whose messages to every peer fail is blamed once per peer (it is the one cut
/// off, or it drops what it sends). Every Raft signal then names it.
fn blame_raft(found: &mut [Evidence], members: &[Member]) {
    let mut blame: Vec<(String, usize)> = Vec::new();
    let mut add = |name: &str, n: usize| match blame.iter_mut().find(|(m, _)| m == name) {
        Some((_, count)) => *count += n,
        None => blame.push((name.to_string(), n)),
    };
    for member in members {
        let failing: Vec<&Evidence> = found
            .iter()
            .filter(|e| e.metric.starts_with(PEER_FAILURES))
            .filter(|e| e.member.as_deref() == Some(member.name.as_str()))
            .collect();
        for e in &failing {
            add(e.at_fault.as_deref().unwrap_or(""), 1);
        }
        if member.peers.len() >= 2 && failing.len() == member.peers.len() {
            add(&member.name, failing.len());
        }
    }
    let Some((blamed, _)) = blame.into_iter().max_by_key(|(_, n)| *n) else {
        return;
    };
    for e in found.iter_mut().filter(|e| e.axis == Some(Axis::Raft)) {
        e.at_fault = Some(blamed.clone());
    }
}

const PEER_FAILURES: &str = "increase of etcd_network_peer_sent_failures_total";

fn store_signals(signals: &mut Signals, m: &Member) {
    let d = &m.delta;
    let name = Some(m.name.as_str());
    let store = Layer::Store;
    // A member that does not answer is down, frozen or cut off (etcd's `etcdMembersDown`).
    if let Some(why) = &d.after.unanswered {
        signals.check(
            store,
            Some(Axis::Raft),
            name,
            "members that do not answer /metrics".into(),
            1.0,
            1.0,
            &format!("the member does not answer ({why}): down, frozen or cut off"),
        );
    }
    // Raft. A member without a leader refuses every write (etcd's `etcdMembersDown`,
    // `etcdNoLeader` alerts).
    if d.gauge("etcd_server_has_leader", all) == Some(0.0) {
        signals.check(
            store,
            Some(Axis::Raft),
            name,
            "members without a leader (etcd_server_has_leader 0)".into(),
            1.0,
            1.0,
            "the member has no leader: every write fails",
        );
    }
    // etcd's mixin alerts on any leader change (etcdHighNumberOfLeaderChanges counts 4 in 15
    // minutes); within one interval, one is already an election.
    signals.check(
        store,
        Some(Axis::Raft),
        name,
        "increase of etcd_server_leader_changes_seen_total".into(),
        d.increase("etcd_server_leader_changes_seen_total", all),
        1.0,
        "the leader changed: an election",
    );
    // etcdHighNumberOfFailedProposals: any failed proposal.
    signals.check(
        store,
        Some(Axis::Raft),
        name,
        "increase of etcd_server_proposals_failed_total".into(),
        d.increase("etcd_server_proposals_failed_total", all),
        1.0,
        "proposals failed",
    );
    // Messages to a peer that failed, and slow round trips (etcdMemberCommunicationSlow:
    // p99 above 150 ms): they point at the peer.
    for (id, peer) in &m.peers {
        let to = |s: &Sample| s.label("To") == Some(id.as_str());
        let failures = d.increase("etcd_network_peer_sent_failures_total", to);
        let before = signals.found.len();
        signals.check(
            store,
            Some(Axis::Raft),
            name,
            format!("{PEER_FAILURES}{{To=\"{id}\"}}"),
            failures,
            5.0,
            &format!("Raft messages to {peer} fail"),
        );
        if let Some((rtt, q)) = d.p99("etcd_network_peer_round_trip_time_seconds", to) {
            signals.check(
                store,
                Some(Axis::Raft),
                name,
                format!("{q} of etcd_network_peer_round_trip_time_seconds{{To=\"{id}\"}}"),
                rtt,
                0.15,
                &format!("round trips to {peer} are slow"),
            );
        }
        for e in &mut signals.found[before..] {
            e.at_fault = Some(peer.clone());
        }
    }
    // WAL: etcd's hardware guide asks for a disk of at least 50 sequential IOPS, 20 ms a
    // write (10 ms is the ideal its performance documentation names); etcd's mixin alert
    // (etcd PR 12266) calls 20 ms the recommended fsync. Below it the disk is not at fault.
    const WAL_FSYNC: f64 = 0.020;
    let fsync = d.p99("etcd_disk_wal_fsync_duration_seconds", all);
    if let Some((p99, q)) = fsync {
        signals.check(
            store,
            Some(Axis::Wal),
            name,
            format!("{q} of etcd_disk_wal_fsync_duration_seconds"),
            p99,
            WAL_FSYNC,
            "WAL fsyncs are slow: the disk",
        );
    }
    // A disk so slow that no fsync finished in the interval leaves no latency to read: the
    // proposals waiting on it say so.
    let pending = d.gauge("etcd_server_proposals_pending", all).unwrap_or(0.0);
    let stuck = pending > 0.0
        && d.comparable()
        && d.increase("etcd_disk_wal_fsync_duration_seconds_count", all) == 0.0;
    if stuck {
        signals.check(
            store,
            Some(Axis::Wal),
            name,
            "etcd_server_proposals_pending, with no WAL fsync finished".into(),
            pending,
            1.0,
            "proposals wait and no WAL fsync finished in the interval: the disk is stuck",
        );
    }
    let slow_disk = stuck || fsync.is_some_and(|(p99, _)| p99 >= WAL_FSYNC);
    // Lease: an expiry storm, many more leases revoked than granted (etcd revokes at most
    // 1,000 a second).
    let revoked = d.increase("etcd_debugging_lease_revoked_total", all);
    let granted = d.increase("etcd_debugging_lease_granted_total", all);
    let storm = revoked >= 100.0 && revoked > 10.0 * granted.max(1.0);
    if storm {
        signals.check(
            store,
            Some(Axis::Lease),
            name,
            "increase of etcd_debugging_lease_revoked_total".into(),
            revoked,
            100.0,
            "leases expire in a storm",
        );
    }
    // MVCC: etcd's disk guidance wants backend commit p99 under 25 ms; an apply past 100 ms
    // is etcd's `--warning-apply-duration`. In an expiry storm they are the revocations'
    // (each deletes the lease's keys): a symptom of the Lease axis. With the member's WAL
    // fsyncs slow too, they wait on the same slow disk (a backend commit fsyncs its file):
    // the WAL axis. Only alone are they the backend's own.
    let (backend, slow) = match (storm, slow_disk) {
        (true, _) => (Axis::Lease, " (the storm's revocations)"),
        (false, true) => (Axis::Wal, " (the same slow disk as the WAL's fsyncs)"),
        (false, false) => (Axis::Mvcc, ""),
    };
    if let Some((p99, q)) = d.p99("etcd_disk_backend_commit_duration_seconds", all) {
        signals.check(
            store,
            Some(backend),
            name,
            format!("{q} of etcd_disk_backend_commit_duration_seconds"),
            p99,
            0.025,
            &format!("backend commits are slow{slow}"),
        );
    }
    signals.check(
        store,
        Some(backend),
        name,
        "increase of etcd_server_slow_apply_total".into(),
        d.increase("etcd_server_slow_apply_total", all),
        1.0,
        &format!("applies took over 100 ms{slow}"),
    );
    if let (Some(size), Some(quota)) = (
        d.gauge("etcd_mvcc_db_total_size_in_bytes", all),
        d.gauge("etcd_server_quota_backend_bytes", all),
    ) && quota > 0.0
    {
        // etcd's mixin: etcdDatabaseQuotaLowSpace at 95 %; warn from 80 %.
        signals.check(
            store,
            Some(Axis::Mvcc),
            name,
            "etcd_mvcc_db_total_size_in_bytes / etcd_server_quota_backend_bytes".into(),
            size / quota,
            0.8,
            "the database nears its quota (NOSPACE at 100 %)",
        );
    }
    // Watch: watchers that fell behind, events waiting for them.
    signals.check(
        store,
        Some(Axis::Watch),
        name,
        "etcd_debugging_mvcc_slow_watcher_total".into(),
        d.gauge("etcd_debugging_mvcc_slow_watcher_total", all)
            .unwrap_or(0.0),
        1.0,
        "watchers fell behind (a slow reader or a stalled stream)",
    );
    signals.check(
        store,
        Some(Axis::Watch),
        name,
        "etcd_debugging_mvcc_pending_events_total".into(),
        d.gauge("etcd_debugging_mvcc_pending_events_total", all)
            .unwrap_or(0.0),
        1000.0,
        "events wait to be sent to watchers",
    );
}

fn apiserver_signals(signals: &mut Signals, d: &Delta, members: &[Member]) {
    let not_long = |s: &Sample| !matches!(s.label("verb"), Some("WATCH" | "CONNECT"));
    let code = |c: &'static str| move |s: &Sample| s.label("code") == Some(c);
    let api = Layer::Apiserver;
    // Kubernetes' API call latency SLO: p99 of single-object calls under 1 s.
    // An apiserver that does not answer its own metrics is at fault itself.
    if let Some(why) = &d.after.unanswered {
        signals.check(
            api,
            None,
            None,
            "an apiserver that does not answer /metrics".into(),
            1.0,
            1.0,
            &format!("the apiserver does not answer ({why})"),
        );
    }
    let request = d.p99("apiserver_request_duration_seconds", not_long);
    let store_request = d.p99("etcd_request_duration_seconds", all);
    if let Some((p99, q)) = request {
        let in_store = store_request.map_or(0.0, |(p99, _)| p99);
        let (layer, meaning) = if in_store >= p99 / 2.0 {
            (
                Layer::Store,
                "requests are slow, and the time goes to the store",
            )
        } else {
            (
                api,
                "requests are slow in the apiserver itself, not in the store",
            )
        };
        signals.check(
            layer,
            None,
            None,
            format!("{q} of apiserver_request_duration_seconds"),
            p99,
            1.0,
            meaning,
        );
    }
    // Shed load: more than 5 % of requests answered 429.
    let total = d.increase("apiserver_request_total", all);
    if total > 0.0 {
        signals.check(
            api,
            None,
            None,
            "share of apiserver_request_total answered 429".into(),
            d.increase("apiserver_request_total", code("429")) / total,
            0.05,
            "the apiserver sheds load (--max-requests-inflight)",
        );
    }
    // Watch: clients relisting after their resourceVersion was compacted (410 Gone: a list's
    // answer, or the Expired event a watch from it gets with its 200, which keel counts in
    // `keel_apiserver_watch_expired_total`), watchers ended for falling behind, consistent
    // reads waiting for a lagging watch cache.
    signals.check(
        api,
        Some(Axis::Watch),
        None,
        "increase of apiserver_request_total{code=\"410\"} and keel_apiserver_watch_expired_total"
            .into(),
        d.increase("apiserver_request_total", code("410"))
            + d.increase("keel_apiserver_watch_expired_total", all),
        10.0,
        "clients relist: their resourceVersion was compacted (not a store outage)",
    );
    signals.check(
        api,
        Some(Axis::Watch),
        None,
        "increase of apiserver_terminated_watchers_total".into(),
        d.increase("apiserver_terminated_watchers_total", all),
        1.0,
        "watchers were ended for falling behind",
    );
    if let Some((wait, q)) = d.p99("apiserver_watch_cache_read_wait_seconds", all) {
        signals.check(
            api,
            Some(Axis::Watch),
            None,
            format!("{q} of apiserver_watch_cache_read_wait_seconds"),
            wait,
            0.5,
            "reads wait for a watch cache that lags behind its store",
        );
    }
    // Lease: nodes that stopped renewing while the store answers (the node lifecycle
    // controller's view); with a store without a leader it would be Raft.
    let store_led = members
        .iter()
        .all(|m| m.delta.gauge("etcd_server_has_leader", all) != Some(0.0));
    if store_led {
        signals.check(
            api,
            Some(Axis::Lease),
            None,
            UNHEALTHY_NODES.into(),
            d.gauge(UNHEALTHY_NODES, all).unwrap_or(0.0),
            1.0,
            "nodes stopped renewing their Leases: the kubelets, not the store",
        );
    }
}

fn next_steps(layer: Layer, axis: Option<Axis>, member: &str) -> Vec<String> {
    let on = |what: &str| match member {
        "" => what.to_string(),
        m => format!("{what} (member {m})"),
    };
    let steps: Vec<String> = match (layer, axis) {
        (Layer::None, _) => Vec::new(),
        (Layer::Store, Some(Axis::Raft)) => vec![
            "etcdctl endpoint status --cluster -w table".into(),
            on("check the network between the members and whether each is running"),
        ],
        (Layer::Store, Some(Axis::Wal)) => vec![
            on("check the disk under --data-dir: etcd wants WAL fsync p99 under 20 ms"),
            "keel bench put --total 10000 (fsync latency end to end)".into(),
        ],
        (Layer::Store, Some(Axis::Mvcc)) => vec![
            "etcdctl endpoint status --cluster -w table (DB SIZE, RAFT APPLIED INDEX)".into(),
            "etcdctl defrag, or raise --quota-backend-bytes".into(),
        ],
        (_, Some(Axis::Watch)) => vec![
            "kubectl get --raw /metrics | grep -E 'terminated_watchers|watch_cache'".into(),
            "look for clients that watch and do not read, or relist in a loop".into(),
        ],
        (Layer::Store, Some(Axis::Lease)) => vec![
            "etcdctl lease list".into(),
            "look for a client that lets many leases expire at once".into(),
        ],
        (Layer::Apiserver, Some(Axis::Lease)) => vec![
            "kubectl get leases -n kube-node-lease".into(),
            "kubectl get nodes; check the kubelets of the nodes not Ready".into(),
        ],
        (Layer::Store, None) => vec!["etcdctl endpoint status --cluster -w table".into()],
        (Layer::Apiserver, _) => vec![
            "kubectl get --raw /metrics | grep apiserver_request_duration_seconds".into(),
            "check --max-requests-inflight and the clients sending the most requests".into(),
        ],
    };
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::scrape::Scrape;

    const HEALTHY: &str = "etcd_server_has_leader 1\netcd_server_leader_changes_seen_total 1\n\
        etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.001\"} 100\n\
        etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.256\"} 100\n\
        etcd_disk_wal_fsync_duration_seconds_bucket{le=\"+Inf\"} 100\n";

    fn verdict_of(member: (&Scrape, &Scrape), apiserver: Option<(&Scrape, &Scrape)>) -> Verdict {
        decide(&Observed {
            apiserver: apiserver.map(|(before, after)| Delta { before, after }),
            members: vec![Member {
                name: "m0".into(),
                delta: Delta {
                    before: member.0,
                    after: member.1,
                },
                peers: vec![("a1".into(), "m1".into())],
            }],
        })
    }

    #[test]
    fn a_healthy_store_is_none() {
        let store = Scrape::parse(HEALTHY);
        let v = verdict_of((&store, &store), None);
        assert_eq!((v.layer, v.axis), (Layer::None, None));
        assert!(v.next.is_empty());
    }

    #[test]
    fn slow_fsyncs_are_the_wal() {
        let before = Scrape::parse(HEALTHY);
        let after = Scrape::parse(
            "etcd_server_has_leader 1\netcd_server_leader_changes_seen_total 1\n\
             etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.001\"} 100\n\
             etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.256\"} 200\n\
             etcd_disk_wal_fsync_duration_seconds_bucket{le=\"+Inf\"} 200\n",
        );
        let v = verdict_of((&before, &after), None);
        assert_eq!((v.layer, v.axis), (Layer::Store, Some(Axis::Wal)));
        assert_eq!(v.member.as_deref(), Some("m0"));
        assert!(v.confidence > 0.9, "{v:?}");
        assert_eq!(
            v.evidence[0].metric,
            "p99 of etcd_disk_wal_fsync_duration_seconds"
        );
    }

    #[test]
    fn failures_to_a_peer_point_at_the_peer() {
        let before = Scrape::parse(HEALTHY);
        let after = Scrape::parse(&format!(
            "{HEALTHY}etcd_network_peer_sent_failures_total{{To=\"a1\"}} 40\n"
        ));
        let v = verdict_of((&before, &after), None);
        assert_eq!((v.layer, v.axis), (Layer::Store, Some(Axis::Raft)));
        assert_eq!(v.member.as_deref(), Some("m1"));
    }

    #[test]
    fn a_member_whose_every_message_fails_is_the_one_at_fault() {
        let healthy = Scrape::parse(HEALTHY);
        let cut_off = Scrape::parse(&format!(
            "{HEALTHY}etcd_network_peer_sent_failures_total{{To=\"a1\"}} 40\n\
             etcd_network_peer_sent_failures_total{{To=\"a2\"}} 40\n"
        ));
        let leader = Scrape::parse(&format!(
            "{HEALTHY}etcd_network_peer_sent_failures_total{{To=\"a0\"}} 40\n"
        ));
        let member = |name: &str, after, peers: [(&str, &str); 2]| Member {
            name: name.into(),
            delta: Delta {
                before: &healthy,
                after,
            },
            peers: peers
                .iter()
                .map(|(id, n)| (id.to_string(), n.to_string()))
                .collect(),
        };
        let v = decide(&Observed {
            apiserver: None,
            members: vec![
                member("m0", &cut_off, [("a1", "m1"), ("a2", "m2")]),
                member("m1", &leader, [("a0", "m0"), ("a2", "m2")]),
                member("m2", &healthy, [("a0", "m0"), ("a1", "m1")]),
            ],
        });
        assert_eq!((v.layer, v.axis), (Layer::Store, Some(Axis::Raft)));
        assert_eq!(v.member.as_deref(), Some("m0"));
    }

    #[test]
    fn a_slow_apiserver_is_the_store_when_its_time_goes_there() {
        let store = Scrape::parse(HEALTHY);
        let api_before = Scrape::parse("");
        let slow = |name: &str| {
            format!(
                "{name}_bucket{{verb=\"GET\",le=\"0.1\"}} 0\n{name}_bucket{{verb=\"GET\",le=\"4\"}} 50\n\
                 {name}_bucket{{verb=\"GET\",le=\"+Inf\"}} 50\n"
            )
        };
        // Time in the store as well: the store, and with no axis of its own shown, none named.
        let both = Scrape::parse(&format!(
            "{}{}",
            slow("apiserver_request_duration_seconds"),
            slow("etcd_request_duration_seconds")
        ));
        let v = verdict_of((&store, &store), Some((&api_before, &both)));
        assert_eq!((v.layer, v.axis), (Layer::Store, None));
        // Time in the apiserver alone: the apiserver.
        let api_only = Scrape::parse(&slow("apiserver_request_duration_seconds"));
        let v = verdict_of((&store, &store), Some((&api_before, &api_only)));
        assert_eq!((v.layer, v.axis), (Layer::Apiserver, None));
    }

    #[test]
    fn slow_applies_in_an_expiry_storm_are_the_storms() {
        let before = Scrape::parse(HEALTHY);
        let slow = "etcd_server_slow_apply_total 50\n";
        let storm = Scrape::parse(&format!(
            "{HEALTHY}{slow}etcd_debugging_lease_revoked_total 5000\n"
        ));
        let v = verdict_of((&before, &storm), None);
        assert_eq!(
            (v.layer, v.axis),
            (Layer::Store, Some(Axis::Lease)),
            "{v:?}"
        );
        // Without the storm, slow applies are MVCC.
        let v = verdict_of((&before, &Scrape::parse(&format!("{HEALTHY}{slow}"))), None);
        assert_eq!((v.layer, v.axis), (Layer::Store, Some(Axis::Mvcc)), "{v:?}");
    }

    #[test]
    fn slow_commits_beside_slow_fsyncs_are_the_disk() {
        let before = Scrape::parse(HEALTHY);
        let commits = "etcd_disk_backend_commit_duration_seconds_bucket{le=\"0.001\"} 0\n\
             etcd_disk_backend_commit_duration_seconds_bucket{le=\"0.512\"} 100\n\
             etcd_disk_backend_commit_duration_seconds_bucket{le=\"+Inf\"} 100\n\
             etcd_server_slow_apply_total 20\n";
        // The backend alone is slow: MVCC.
        let v = verdict_of(
            (&before, &Scrape::parse(&format!("{HEALTHY}{commits}"))),
            None,
        );
        assert_eq!((v.layer, v.axis), (Layer::Store, Some(Axis::Mvcc)), "{v:?}");
        // The WAL's fsyncs are slow too (etcd on a slow disk): the WAL.
        let disk = Scrape::parse(&format!(
            "etcd_server_has_leader 1\netcd_server_leader_changes_seen_total 1\n\
             etcd_disk_wal_fsync_duration_seconds_bucket{{le=\"0.001\"}} 100\n\
             etcd_disk_wal_fsync_duration_seconds_bucket{{le=\"0.256\"}} 200\n\
             etcd_disk_wal_fsync_duration_seconds_bucket{{le=\"+Inf\"}} 200\n{commits}"
        ));
        let v = verdict_of((&before, &disk), None);
        assert_eq!((v.layer, v.axis), (Layer::Store, Some(Axis::Wal)), "{v:?}");
    }

    /// HEALTHY with `n` more fsyncs, all of them taking about 128-256 ms.
    fn slow_fsyncs(n: u32) -> String {
        format!(
            "etcd_server_has_leader 1\netcd_server_leader_changes_seen_total 1\n\
             etcd_disk_wal_fsync_duration_seconds_bucket{{le=\"0.001\"}} 100\n\
             etcd_disk_wal_fsync_duration_seconds_bucket{{le=\"0.128\"}} 100\n\
             etcd_disk_wal_fsync_duration_seconds_bucket{{le=\"0.256\"}} {}\n\
             etcd_disk_wal_fsync_duration_seconds_bucket{{le=\"+Inf\"}} {}\n\
             etcd_disk_wal_fsync_duration_seconds_count {}\n",
            100 + n,
            100 + n,
            100 + n
        )
    }

    #[test]
    fn a_slow_disk_that_fails_proposals_is_the_wal_not_raft() {
        let before = Scrape::parse(&format!(
            "{HEALTHY}etcd_disk_wal_fsync_duration_seconds_count 100\n"
        ));
        let after = Scrape::parse(&format!(
            "{}etcd_server_proposals_failed_total 40\n",
            slow_fsyncs(100)
        ));
        let v = verdict_of((&before, &after), None);
        assert_eq!((v.layer, v.axis), (Layer::Store, Some(Axis::Wal)), "{v:?}");
        // Nodes drifting to NotReady meanwhile wait on the store: not the kubelets.
        let empty = Scrape::parse("");
        let drift = Scrape::parse("node_collector_unhealthy_nodes_in_zone{zone=\"\"} 20\n");
        let v = verdict_of((&before, &after), Some((&empty, &drift)));
        assert_eq!((v.layer, v.axis), (Layer::Store, Some(Axis::Wal)), "{v:?}");
    }

    #[test]
    fn a_stuck_disk_is_the_wal() {
        let before = Scrape::parse(&format!(
            "{HEALTHY}etcd_disk_wal_fsync_duration_seconds_count 100\n"
        ));
        let stuck = Scrape::parse(&format!(
            "{HEALTHY}etcd_disk_wal_fsync_duration_seconds_count 100\netcd_server_proposals_pending 12\n"
        ));
        let v = verdict_of((&before, &stuck), None);
        assert_eq!((v.layer, v.axis), (Layer::Store, Some(Axis::Wal)), "{v:?}");
    }

    #[test]
    fn one_slow_fsync_among_few_is_not_the_disk() {
        // Five fsyncs, one slow: their p99 would be the slow one; their median is not.
        let before = Scrape::parse(&slow_fsyncs(0));
        let after = Scrape::parse(
            "etcd_server_has_leader 1\netcd_server_leader_changes_seen_total 1\n\
             etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.001\"} 104\n\
             etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.128\"} 104\n\
             etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.256\"} 105\n\
             etcd_disk_wal_fsync_duration_seconds_bucket{le=\"+Inf\"} 105\n\
             etcd_disk_wal_fsync_duration_seconds_count 105\n",
        );
        let v = verdict_of((&before, &after), None);
        assert_eq!(v.layer, Layer::None, "{v:?}");
    }

    #[test]
    fn a_scrape_that_did_not_answer_is_not_compared() {
        // After a member did not answer, the next interval compares nothing with it: its
        // lifetime totals (a leader change, every fsync) are not the interval's.
        let gone = Scrape::unanswered("no answer".into());
        let back = Scrape::parse(&slow_fsyncs(100));
        let v = verdict_of((&gone, &back), None);
        assert_eq!(v.layer, Layer::None, "{v:?}");
        // A restart between the scrapes: its counters start again from zero.
        let before = Scrape::parse(&format!("{HEALTHY}process_start_time_seconds 100\n"));
        let restarted = Scrape::parse(
            "etcd_server_has_leader 1\netcd_server_leader_changes_seen_total 1\n\
             process_start_time_seconds 200\n",
        );
        let v = verdict_of((&before, &restarted), None);
        assert_eq!((v.layer, v.axis), (Layer::Store, Some(Axis::Raft)), "{v:?}");
    }

    #[test]
    fn an_apiserver_that_does_not_answer_is_the_apiserver() {
        let store = Scrape::parse(HEALTHY);
        let (up, down) = (Scrape::parse(""), Scrape::unanswered("timed out".into()));
        let v = verdict_of((&store, &store), Some((&up, &down)));
        assert_eq!((v.layer, v.axis), (Layer::Apiserver, None), "{v:?}");
    }

    #[test]
    fn a_storm_every_member_applies_names_no_member() {
        let healthy = Scrape::parse(HEALTHY);
        let storm = Scrape::parse(&format!(
            "{HEALTHY}etcd_debugging_lease_revoked_total 3000\n"
        ));
        let member = |name: &str| Member {
            name: name.into(),
            delta: Delta {
                before: &healthy,
                after: &storm,
            },
            peers: Vec::new(),
        };
        let v = decide(&Observed {
            apiserver: None,
            members: vec![member("m0"), member("m1"), member("m2")],
        });
        assert_eq!(
            (v.layer, v.axis),
            (Layer::Store, Some(Axis::Lease)),
            "{v:?}"
        );
        assert_eq!(v.member, None);
    }

    #[test]
    fn the_classic_mistakes() {
        let store = Scrape::parse(HEALTHY);
        // Watch backpressure is Watch, not Raft.
        let backlog = Scrape::parse(&format!(
            "{HEALTHY}etcd_debugging_mvcc_slow_watcher_total 1000\netcd_debugging_mvcc_pending_events_total 50000\n"
        ));
        let v = verdict_of((&store, &backlog), None);
        assert_eq!((v.layer, v.axis), (Layer::Store, Some(Axis::Watch)));
        // Nodes not renewing with a store that has a leader: Lease.
        let empty = Scrape::parse("");
        let drift = Scrape::parse("node_collector_unhealthy_nodes_in_zone{zone=\"\"} 20\n");
        let v = verdict_of((&store, &store), Some((&empty, &drift)));
        assert_eq!((v.layer, v.axis), (Layer::Apiserver, Some(Axis::Lease)));
        // Relists after a compaction: Watch, not a store outage.
        let relists = Scrape::parse("apiserver_request_total{code=\"410\",verb=\"WATCH\"} 300\n");
        let v = verdict_of((&store, &store), Some((&empty, &relists)));
        assert_eq!((v.layer, v.axis), (Layer::Apiserver, Some(Axis::Watch)));
    }

    #[test]
    fn scores_grow_with_the_distance_past_the_threshold() {
        assert_eq!(score(0.5, 1.0), 0.0);
        assert_eq!(score(1.0, 1.0), 0.5);
        assert!((score(10.0, 1.0) - 1.0).abs() < 1e-9);
        assert_eq!(score(100.0, 1.0), 1.0);
    }
}
