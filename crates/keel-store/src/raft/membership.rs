//! Cluster membership: who the members are and how the leader changes them.
//!
//! etcd changes membership one member at a time (a single Raft conf change per MemberAdd,
//! MemberRemove or MemberPromote); keel does the same with openraft's single-step membership
//! append, guarded by the membership it was computed from so two changes never overwrite one
//! another. A member's peer URLs live in the Raft membership (its node address is the URLs
//! joined by commas; peers dial the first), its name and client URLs in the attributes it
//! publishes when it starts. The [`Roster`] answers both questions, and checks a change as
//! etcd's `--strict-reconfig-check` does before the leader makes it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use keel_proto::etcdserverpb::Member;
use openraft::async_runtime::WatchReceiver;
use openraft::errors::{ChangeMembershipError, ClientWriteError, Fatal, RaftError};
use openraft::impls::BasicNode;
use openraft::raft::ClientWriteResponse;
use openraft::raft::Precondition;
use openraft::{ChangeMembers, EntryPayload, Membership};
use tokio::sync::Notify;

use super::apply::Applier;
use super::{KeelRaft, RaftNode};
use crate::error::EtcdError;
use crate::identity::sorted;

/// How recently the leader must have heard from a voter for etcd to count it as connected
/// (etcd's `HealthInterval`).
const HEALTH_INTERVAL: Duration = Duration::from_secs(5);
/// etcd's `--max-learners` default.
const MAX_LEARNERS: usize = 1;
/// A learner may be promoted once it has this share of the leader's log (etcd's
/// `readyPercent`).
const LEARNER_READY: f64 = 0.9;

/// The message etcd's peers and a removed member itself use.
pub const REMOVED: &str = "the member has been permanently removed from the cluster";

/// One membership change.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A new member with this id (chosen by the member that received the request), these peer
    /// URLs, as a learner or a voter.
    Add {
        /// The new member's id.
        id: u64,
        /// Its peer URLs.
        peer_urls: Vec<String>,
        /// Whether it joins as a learner.
        learner: bool,
    },
    /// Remove a member.
    Remove(u64),
    /// Give a member new peer URLs.
    Update {
        /// The member.
        id: u64,
        /// Its new peer URLs.
        peer_urls: Vec<String>,
    },
    /// Make a learner a voter.
    Promote(u64),
}

/// The Raft node of a member with these peer URLs.
pub fn node(peer_urls: &[String]) -> BasicNode {
    BasicNode {
        addr: peer_urls.join(","),
    }
}

/// The peer URLs of a member's Raft node.
pub fn peer_urls(node: &BasicNode) -> Vec<String> {
    node.addr
        .split(',')
        .filter(|u| !u.is_empty())
        .map(str::to_string)
        .collect()
}

/// The peer URL other members dial.
pub fn peer_url(node: &BasicNode) -> &str {
    node.addr.split(',').next().unwrap_or_default()
}

/// Every member's peer URL as the membership has it now, for the clients that dial them.
#[derive(Default)]
pub struct PeerUrls {
    urls: parking_lot::RwLock<(Option<super::codec::LogId>, BTreeMap<u64, String>)>,
}

impl PeerUrls {
    /// Takes the URLs of `stored` when it is another membership than the last one taken.
    pub fn update(&self, stored: &openraft::alias::StoredMembershipOf<super::KeelRaft>) {
        if self.urls.read().0 == *stored.log_id() {
            return;
        }
        let urls = stored
            .membership()
            .nodes()
            .map(|(id, n)| (*id, peer_url(n).to_string()))
            .collect();
        *self.urls.write() = (*stored.log_id(), urls);
    }

    /// The URL member `id` is dialled at.
    pub fn get(&self, id: u64) -> Option<String> {
        self.urls.read().1.get(&id).cloned()
    }
}

/// Set once this member learns it was removed from the cluster; the store then stops.
#[derive(Default)]
pub struct Removal {
    removed: AtomicBool,
    notify: Notify,
}

impl Removal {
    /// Records that this member was removed.
    pub fn signal(&self) {
        if !self.removed.swap(true, Ordering::SeqCst) {
            tracing::warn!("{REMOVED}");
        }
        self.notify.notify_waiters();
    }

    /// Whether this member was removed.
    pub fn is_removed(&self) -> bool {
        self.removed.load(Ordering::SeqCst)
    }

    /// Waits until this member is removed.
    pub async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_removed() {
                return;
            }
            notified.await;
        }
    }
}

/// What a member knows of its cluster's members, and the leader's way to change them.
pub struct Roster {
    raft: RaftNode,
    applier: Arc<Applier>,
    member_id: u64,
    /// `--initial-cluster`: names of members that have not published theirs yet.
    initial: Vec<(String, Vec<String>)>,
    /// etcd's `--strict-reconfig-check`.
    strict: bool,
}

impl Roster {
    /// The roster of member `member_id`, named in `initial` (`--initial-cluster`), checking
    /// changes as etcd's `--strict-reconfig-check` does when `strict`.
    pub fn new(
        raft: RaftNode,
        applier: Arc<Applier>,
        member_id: u64,
        initial: Vec<(String, Vec<String>)>,
        strict: bool,
    ) -> Roster {
        Roster {
            raft,
            applier,
            member_id,
            initial,
            strict,
        }
    }

    /// Whether member `id` was removed from the cluster.
    pub fn is_removed(&self, id: u64) -> bool {
        self.applier.is_removed(id)
    }

    /// The members as etcd lists them: every member of the Raft membership with its peer
    /// URLs, and the name and client URLs it published. One that has not published yet (not
    /// started) has its name from `--initial-cluster` when it is listed there, else none, as
    /// a member added at run time has in etcd until it starts.
    pub fn members(&self) -> Vec<Member> {
        let metrics = self.raft.metrics();
        let m = metrics.borrow_watched();
        self.listed(m.membership_config.membership())
    }

    /// [`Roster::members`] of `membership`.
    fn listed(&self, membership: &Membership<u64, BasicNode>) -> Vec<Member> {
        let mut members = list(membership, |id| self.applier.published(id));
        for member in members.iter_mut().filter(|m| m.name.is_empty()) {
            let urls = sorted(member.peer_ur_ls.clone());
            if let Some((name, _)) = self
                .initial
                .iter()
                .find(|(_, listed)| sorted(listed.clone()) == urls)
            {
                member.name = name.clone();
            }
        }
        members
    }

    /// Makes `change` as the leader, within `timeout`; returns the log index a member must
    /// have applied before it answers: the change's own. Fails with `etcdserver: not leader`
    /// on any other member.
    ///
    /// A lone voter that takes on a second one is answered once the change is in its log
    /// (fsynced, and in effect): with the single-step change openraft commits it only with
    /// the new voter's acknowledgement, which etcd (committing a conf change under the old
    /// configuration) does not wait for, and the new member starts only after the answer.
    /// Its index is then the last one applied before the change.
    pub async fn reconfigure(&self, change: &Change, timeout: Duration) -> Result<u64, EtcdError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let (step, observed, alone) = {
                let metrics = self.raft.metrics();
                let m = metrics.borrow_watched();
                if m.current_leader != Some(self.member_id) {
                    return Err(EtcdError::NotLeader);
                }
                let step = self.plan(change, &m)?;
                let voters = m.membership_config.membership().voter_ids();
                let alone = voters.eq([self.member_id]);
                (step, *m.membership_config.log_id(), alone)
            };
            let guard = [Precondition::LastMembershipLogId {
                last_membership_log_id: observed,
            }];
            let written = match step {
                Step::Append(membership) if alone && membership.voter_ids().count() == 2 => {
                    match self.append_alone(membership, guard, deadline).await {
                        Appended::InLog(applied) => return Ok(applied),
                        Appended::Answered(written) => written,
                    }
                }
                Step::Append(membership) => {
                    let append =
                        self.raft
                            .append_membership(membership, EntryPayload::Blank, guard);
                    tokio::time::timeout_at(deadline, append).await.ok()
                }
                Step::SetNodes(nodes) => {
                    let set = self.raft.change_membership_if(
                        ChangeMembers::SetNodes(nodes),
                        false,
                        guard,
                    );
                    tokio::time::timeout_at(deadline, set).await.ok()
                }
            };
            match written {
                None => return Err(EtcdError::Timeout),
                Some(Ok(resp)) => return Ok(resp.log_id.index),
                Some(Err(RaftError::APIError(e))) if is_transient(&e) => {
                    // Another change, or this leader's first entry, is not committed yet.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Some(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f)))) => {
                    // A leader whose quorum has not acknowledged it lately names no other
                    // leader: it may still be one, so the change is tried again.
                    if f.leader_id.is_some() || tokio::time::Instant::now() >= deadline {
                        return Err(EtcdError::NotLeader);
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Some(Err(e)) => return Err(EtcdError::Internal(e.to_string())),
            }
        }
    }

    /// Appends `membership` (a second voter for this lone one) and returns as soon as it is
    /// durable in this leader's log and in effect, with the index applied then; or with
    /// openraft's answer when that comes first (a refusal, or the commit), or `None` at
    /// `deadline`. The append goes on after an early return, until the new voter
    /// acknowledges it.
    async fn append_alone(
        &self,
        membership: Membership<u64, BasicNode>,
        guard: [Precondition<KeelRaft>; 1],
        deadline: tokio::time::Instant,
    ) -> Appended {
        let expected = membership.clone();
        let raft = self.raft.clone();
        let mut append = tokio::spawn(async move {
            raft.append_membership(membership, EntryPayload::Blank, guard)
                .await
        });
        let me = self.member_id;
        let wait = self.raft.wait(None);
        let in_log = wait.metrics(
            move |m| {
                let flushed = m
                    .replication
                    .as_ref()
                    .and_then(|r| r.get(&me).cloned().flatten())
                    .map(|id| id.index);
                m.membership_config.membership() == &expected
                    && flushed >= m.membership_config.log_id().map(|id| id.index)
            },
            "the membership change in the log",
        );
        tokio::select! {
            Ok(m) = in_log => Appended::InLog(m.last_applied.map_or(0, |id| id.index)),
            done = &mut append => Appended::Answered(Some(done.unwrap_or(Err(RaftError::Fatal(Fatal::Panicked))))),
            () = tokio::time::sleep_until(deadline) => Appended::Answered(None),
        }
    }

    /// Checks `change` against the current membership as etcd does, and computes the step
    /// that makes it.
    fn plan(
        &self,
        change: &Change,
        m: &openraft::RaftMetrics<super::KeelRaft>,
    ) -> Result<Step, EtcdError> {
        let membership = m.membership_config.membership();
        let members = self.listed(membership);
        let voters: BTreeSet<u64> = membership.voter_ids().collect();
        let mut nodes: BTreeMap<u64, BasicNode> =
            membership.nodes().map(|(id, n)| (*id, n.clone())).collect();
        let find = |id: u64| {
            members
                .iter()
                .find(|m| m.id == id)
                .ok_or(EtcdError::MemberNotFound)
        };
        let urls_taken = |urls: &[String], except: u64| {
            members
                .iter()
                .filter(|m| m.id != except)
                .any(|m| m.peer_ur_ls.iter().any(|u| urls.contains(u)))
        };
        let append = |voters: BTreeSet<u64>, nodes: BTreeMap<u64, BasicNode>| {
            Membership::new(vec![voters], nodes)
                .map(Step::Append)
                .map_err(|e| EtcdError::Internal(e.to_string()))
        };
        // etcd counts a member as started once it has a name.
        let started = |m: &&Member| !m.name.is_empty();
        let connected = self.connected(m, &voters);
        match change {
            Change::Add {
                id,
                peer_urls,
                learner,
            } => {
                if nodes.contains_key(id) {
                    return Err(EtcdError::MemberIdExists);
                }
                if urls_taken(peer_urls, 0) {
                    return Err(EtcdError::PeerUrlExists);
                }
                if *learner {
                    if members.iter().filter(|m| m.is_learner).count() >= MAX_LEARNERS {
                        return Err(EtcdError::TooManyLearners);
                    }
                } else if self.strict {
                    let started = members
                        .iter()
                        .filter(|m| !m.is_learner)
                        .filter(started)
                        .count();
                    if !ready_to_add_voter(started, voters.len() + 1) {
                        return Err(EtcdError::NotEnoughStartedMembers);
                    }
                }
                // etcd's isConnectedToQuorumAfterAddingNewMemberSince (3.5.30 on; earlier 3.5
                // releases wanted every voter): the connected voters must be a quorum of the
                // voters with the new member.
                if self.strict && voters.len() > 1 && connected < quorum(voters.len() + 1) {
                    return Err(EtcdError::Unhealthy);
                }
                nodes.insert(*id, node(peer_urls));
                let mut voters = voters;
                if !learner {
                    voters.insert(*id);
                }
                append(voters, nodes)
            }
            Change::Remove(id) => {
                let removed = find(*id)?;
                if !removed.is_learner && voters.len() == 1 {
                    // The last voter cannot go, strict or not.
                    return Err(EtcdError::NotEnoughStartedMembers);
                }
                if self.strict && !removed.is_learner {
                    // etcd's IsReadyToRemoveVotingMember: the started voters left must be a
                    // quorum of the voters left.
                    let rest: Vec<&Member> = members
                        .iter()
                        .filter(|m| !m.is_learner && m.id != *id)
                        .collect();
                    let started = rest.iter().filter(|m| started(m)).count();
                    if started < quorum(rest.len()) {
                        return Err(EtcdError::NotEnoughStartedMembers);
                    }
                    // A member that is down is not part of the active quorum; otherwise the
                    // connected voters left must still be a quorum.
                    let is_up = *id == self.member_id || heard_within(m, *id, HEALTH_INTERVAL);
                    if is_up && connected - 1 < quorum(voters.len() - 1) {
                        return Err(EtcdError::Unhealthy);
                    }
                }
                nodes.remove(id);
                let mut voters = voters;
                voters.remove(id);
                append(voters, nodes)
            }
            Change::Update { id, peer_urls } => {
                find(*id)?;
                if urls_taken(peer_urls, *id) {
                    return Err(EtcdError::PeerUrlExists);
                }
                Ok(Step::SetNodes(BTreeMap::from([(*id, node(peer_urls))])))
            }
            Change::Promote(id) => {
                let promoted = find(*id)?;
                if !promoted.is_learner {
                    return Err(EtcdError::MemberNotLearner);
                }
                self.check_learner_ready(m, *id)?;
                // etcd counts the learner as started whatever it published.
                let started = 1 + members
                    .iter()
                    .filter(|m| !m.is_learner)
                    .filter(started)
                    .count();
                if self.strict && !ready_to_add_voter(started, voters.len() + 1) {
                    return Err(EtcdError::NotEnoughStartedMembers);
                }
                let mut voters = voters;
                voters.insert(*id);
                append(voters, nodes)
            }
        }
    }

    /// How many voters the leader heard from within etcd's health interval (itself included).
    fn connected(
        &self,
        m: &openraft::RaftMetrics<super::KeelRaft>,
        voters: &BTreeSet<u64>,
    ) -> usize {
        voters
            .iter()
            .filter(|id| **id == self.member_id || heard_within(m, **id, HEALTH_INTERVAL))
            .count()
    }

    /// etcd's `isLearnerReady`: the learner has at least 90 % of the leader's log.
    fn check_learner_ready(
        &self,
        m: &openraft::RaftMetrics<super::KeelRaft>,
        id: u64,
    ) -> Result<(), EtcdError> {
        let leader = m.last_log_index.unwrap_or(0);
        let learner = m
            .replication
            .as_ref()
            .and_then(|r| r.get(&id).cloned().flatten())
            .map_or(0, |log_id| log_id.index);
        if (learner as f64) < leader as f64 * LEARNER_READY {
            return Err(EtcdError::LearnerNotReady);
        }
        Ok(())
    }
}

/// Whether this member, as leader (per its metrics `m`), heard from member `id` (a heartbeat
/// or replication acknowledged) within `within`.
pub fn heard_within(m: &openraft::RaftMetrics<super::KeelRaft>, id: u64, within: Duration) -> bool {
    m.heartbeat
        .as_ref()
        .and_then(|h| h.get(&id).cloned().flatten())
        .is_some_and(|at| openraft::Instant::elapsed(&*at) < within)
}

/// openraft's answer to a membership change.
type Written =
    Result<ClientWriteResponse<KeelRaft>, RaftError<KeelRaft, ClientWriteError<KeelRaft>>>;

/// How far [`Roster::append_alone`] got.
enum Appended {
    /// The change is in the log; this member had applied up to this index.
    InLog(u64),
    /// openraft's answer came first (`None`: the deadline did).
    Answered(Option<Written>),
}

/// How the leader makes a change.
enum Step {
    /// Append this membership (one voter more or less, or the same voters).
    Append(Membership<u64, BasicNode>),
    /// Replace these members' nodes (new peer URLs).
    SetNodes(BTreeMap<u64, BasicNode>),
}

/// Whether a refused change may be retried at once: another change or this leader's first
/// entry is not committed yet, or the membership moved since the change was computed.
fn is_transient(e: &ClientWriteError<super::KeelRaft>) -> bool {
    matches!(
        e,
        ClientWriteError::ChangeMembershipError(
            ChangeMembershipError::InProgress(_) | ChangeMembershipError::UncommittedLeaderLog(_)
        ) | ClientWriteError::PreconditionFailed(_)
    )
}

/// etcd's IsReadyToAddVotingMember (and IsReadyToPromoteMember): `started` members make a
/// quorum of the `voters` the cluster will have; a 1-member cluster may always grow to 2.
fn ready_to_add_voter(started: usize, voters: usize) -> bool {
    (started == 1 && voters == 2) || started >= quorum(voters)
}

/// A majority of `n` voters.
fn quorum(n: usize) -> usize {
    n / 2 + 1
}

/// Every member of `membership` with its peer URLs, and what `published` knows of it.
pub(crate) fn list(
    membership: &Membership<u64, BasicNode>,
    published: impl Fn(u64) -> Option<Member>,
) -> Vec<Member> {
    let voters: BTreeSet<u64> = membership.voter_ids().collect();
    membership
        .nodes()
        .map(|(&id, node)| {
            let attributes = published(id).unwrap_or_default();
            Member {
                id,
                name: attributes.name,
                peer_ur_ls: peer_urls(node),
                client_ur_ls: attributes.client_ur_ls,
                is_learner: !voters.contains(&id),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voters_are_added_only_with_a_started_quorum() {
        assert!(ready_to_add_voter(1, 2), "1 member may grow to 2");
        assert!(!ready_to_add_voter(1, 3));
        assert!(ready_to_add_voter(2, 3));
        assert!(!ready_to_add_voter(2, 4));
        assert!(ready_to_add_voter(3, 4));
    }

    #[test]
    fn peer_urls_round_trip_through_a_node() {
        let urls = vec!["http://a:2380".to_string(), "http://b:2380".to_string()];
        let n = node(&urls);
        assert_eq!(peer_urls(&n), urls);
        assert_eq!(peer_url(&n), "http://a:2380");
        assert_eq!(
            peer_urls(&BasicNode {
                addr: String::new()
            }),
            Vec::<String>::new()
        );
    }
}
