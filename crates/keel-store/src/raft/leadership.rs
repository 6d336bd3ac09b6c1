//! Who leads, as etcd reports it: openraft's view with etcd's check-quorum rules on top.
//!
//! openraft keeps a leader that lost its quorum in the leader role (it only refuses new
//! proposals once its lease has run out) and lets a follower cut off from the leader keep
//! naming it. etcd instead has such a leader step down, and such a follower forget its
//! leader, within an election timeout, so that Status and `etcd_server_has_leader` say "no
//! leader" and requests fail fast with `etcdserver: no leader`. [`Leadership`] gives keel
//! etcd's answer:
//!
//! - this member leads while a quorum acknowledged it within the last election timeout (or it
//!   is the only voter);
//! - another member leads, for this member, while it heard from that member (an
//!   `AppendEntries`, heartbeats included) within the last election timeout.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// openraft's view of leadership at one moment, as [`Leadership::leader`] needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RaftView {
    /// The leader openraft names, if any.
    pub leader: Option<u64>,
    /// The Raft term.
    pub term: u64,
    /// Voters in the membership.
    pub voters: usize,
    /// When a quorum last acknowledged this member as leader (None: not yet, or not leader).
    pub quorum_acked: Option<Instant>,
}

/// etcd's notion of the current leader for one member.
#[derive(Debug)]
pub struct Leadership {
    member_id: u64,
    election_timeout: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The leader openraft named last, its term, and since when.
    named: Option<(u64, u64, Instant)>,
    /// The member that last sent this member an `AppendEntries`, and when.
    heard: Option<(u64, Instant)>,
}

impl Leadership {
    /// The leadership view of member `member_id` with etcd's `--election-timeout`.
    pub fn new(member_id: u64, election_timeout: Duration) -> Leadership {
        Leadership {
            member_id,
            election_timeout,
            state: Mutex::new(State::default()),
        }
    }

    /// Records an `AppendEntries` from `leader` that this member accepted.
    pub fn heard_from(&self, leader: u64, now: Instant) {
        self.state.lock().heard = Some((leader, now));
    }

    /// The leader at `now` given openraft's `view`, or None.
    pub fn leader(&self, view: RaftView, now: Instant) -> Option<u64> {
        let mut state = self.state.lock();
        let leader = view.leader?;
        let since = match state.named {
            Some((named, term, since)) if named == leader && term == view.term => since,
            _ => {
                state.named = Some((leader, view.term, now));
                now
            }
        };
        // A fresh leader gets one election timeout to be acknowledged or heard from.
        let fresh = |t: Instant| now.saturating_duration_since(t) < self.election_timeout;
        let trusted = if leader == self.member_id {
            view.voters <= 1 || fresh(view.quorum_acked.unwrap_or(since).max(since))
        } else {
            let heard = state
                .heard
                .filter(|(from, _)| *from == leader)
                .map_or(since, |(_, t)| t.max(since));
            fresh(heard)
        };
        trusted.then_some(leader)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: u64 = 1;
    const OTHER: u64 = 2;
    const TIMEOUT: Duration = Duration::from_millis(1000);

    fn view(leader: Option<u64>, voters: usize, quorum_acked: Option<Instant>) -> RaftView {
        RaftView {
            leader,
            term: 1,
            voters,
            quorum_acked,
        }
    }

    #[test]
    fn a_leader_without_a_quorum_steps_down_after_an_election_timeout() {
        let l = Leadership::new(ME, TIMEOUT);
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        // Fresh leader, not acknowledged yet: trusted for one election timeout.
        assert_eq!(l.leader(view(Some(ME), 3, None), t0), Some(ME));
        assert_eq!(l.leader(view(Some(ME), 3, None), ms(999)), Some(ME));
        assert_eq!(l.leader(view(Some(ME), 3, None), ms(1000)), None);
        // Acknowledged by a quorum: trusted until one election timeout after that.
        assert_eq!(
            l.leader(view(Some(ME), 3, Some(ms(1500))), ms(2400)),
            Some(ME)
        );
        assert_eq!(l.leader(view(Some(ME), 3, Some(ms(1500))), ms(2500)), None);
        // A single voter needs nobody.
        assert_eq!(l.leader(view(Some(ME), 1, None), ms(9000)), Some(ME));
        assert_eq!(l.leader(view(None, 3, None), ms(9000)), None);
    }

    #[test]
    fn a_follower_forgets_a_leader_it_stopped_hearing_from() {
        let l = Leadership::new(ME, TIMEOUT);
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        assert_eq!(l.leader(view(Some(OTHER), 3, None), t0), Some(OTHER));
        l.heard_from(OTHER, ms(800));
        assert_eq!(l.leader(view(Some(OTHER), 3, None), ms(1700)), Some(OTHER));
        assert_eq!(l.leader(view(Some(OTHER), 3, None), ms(1800)), None);
        // Heard from an old leader: does not vouch for a new one.
        l.heard_from(OTHER, ms(1900));
        assert_eq!(l.leader(view(Some(3), 3, None), ms(2000)), Some(3));
        assert_eq!(l.leader(view(Some(3), 3, None), ms(3000)), None);
    }
}
