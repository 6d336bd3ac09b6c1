//! The rate-limited timed queue that paces NoExecute taints, one per zone, as
//! kube-controller-manager's `RateLimitedTimedQueue` does: each node at most once (until it
//! is removed: it became Ready again, or was tainted and must be re-queued for the opposite
//! taint), in the order it is due, and no faster than a token bucket allows (burst 1). The
//! bucket is swapped as the zone's state changes; rate 0 stops the zone's taints.
//!
//! Sans I/O: every call takes `now`. The caller takes the next due node ([`Queue::next`]),
//! taints it, and reports back ([`Queue::done`] or [`Queue::retry`]).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The burst of every eviction limiter.
const BURST: f64 = 1.0;

/// A token bucket (`flowcontrol.NewTokenBucketRateLimiter`); rate 0 never accepts.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    qps: f32,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket refilled at `qps` (0 or less: one that never accepts).
    pub fn new(qps: f32, now: Instant) -> TokenBucket {
        TokenBucket {
            qps: qps.max(0.0),
            tokens: if qps > 0.0 { BURST } else { 0.0 },
            last: now,
        }
    }

    /// The rate.
    pub fn qps(&self) -> f32 {
        self.qps
    }

    /// Takes a token if there is one.
    pub fn try_accept(&mut self, now: Instant) -> bool {
        if self.qps <= 0.0 {
            return false;
        }
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * f64::from(self.qps)).min(BURST);
        self.last = now.max(self.last);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// A queued node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedValue {
    /// The node's name.
    pub value: String,
    /// The node's uid.
    pub uid: String,
    /// When it was queued.
    pub added_at: Instant,
    /// When it is due.
    pub process_at: Instant,
}

/// One zone's queue.
#[derive(Debug)]
pub struct Queue {
    /// In the order they are due (ties: in the order added).
    queue: Vec<TimedValue>,
    /// The names queued or taken and not removed: a name here is not queued again.
    set: BTreeSet<String>,
    limiter: TokenBucket,
}

impl Queue {
    /// An empty queue paced at `qps`.
    pub fn new(qps: f32, now: Instant) -> Queue {
        Queue {
            queue: Vec::new(),
            set: BTreeSet::new(),
            limiter: TokenBucket::new(qps, now),
        }
    }

    /// Queues `value`, due now, unless it is there (or was taken and not removed); true if
    /// it was queued.
    pub fn add(&mut self, value: &str, uid: &str, now: Instant) -> bool {
        if !self.set.insert(value.to_string()) {
            return false;
        }
        self.push(TimedValue {
            value: value.to_string(),
            uid: uid.to_string(),
            added_at: now,
            process_at: now,
        });
        true
    }

    /// Takes `value` out, so it may be queued again; true if it was known.
    pub fn remove(&mut self, value: &str) -> bool {
        if !self.set.remove(value) {
            return false;
        }
        self.queue.retain(|v| v.value != value);
        true
    }

    /// Empties the queue.
    pub fn clear(&mut self) {
        self.queue.clear();
        self.set.clear();
    }

    /// Whether `value` is queued or taken and not removed.
    pub fn contains(&self, value: &str) -> bool {
        self.set.contains(value)
    }

    /// The rate.
    pub fn qps(&self) -> f32 {
        self.limiter.qps()
    }

    /// Paces the queue at `qps` from now on (`SwapLimiter`): a limiter that was out of
    /// tokens leaves the new one out of tokens too.
    pub fn swap_limiter(&mut self, qps: f32, now: Instant) {
        if self.limiter.qps() == qps.max(0.0) {
            return;
        }
        let mut limiter = TokenBucket::new(qps, now);
        if qps > 0.0 && !self.limiter.try_accept(now) {
            limiter.try_accept(now);
        }
        self.limiter = limiter;
    }

    /// The next value to act on, if one is due and the limiter gives a token (as `Try`
    /// takes the token before it looks at the head's time). It stays queued until
    /// [`Queue::done`] or [`Queue::retry`].
    pub fn next(&mut self, now: Instant) -> Option<TimedValue> {
        let head = self.queue.first()?.clone();
        if !self.limiter.try_accept(now) || now < head.process_at {
            return None;
        }
        Some(head)
    }

    /// `value` was acted on: out of the queue, but not queued again until removed.
    pub fn done(&mut self, value: &TimedValue) {
        self.queue.retain(|v| v.value != value.value);
    }

    /// `value` failed: due again `wait` after `now`, if it is still queued.
    pub fn retry(&mut self, value: &TimedValue, wait: Duration, now: Instant) {
        let Some(at) = self.queue.iter().position(|v| v.value == value.value) else {
            return;
        };
        let mut again = self.queue.remove(at);
        again.process_at = now + wait + Duration::from_nanos(1);
        self.push(again);
    }

    fn push(&mut self, value: TimedValue) {
        let at = self
            .queue
            .partition_point(|v| v.process_at <= value.process_at);
        self.queue.insert(at, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_holds_one_token_and_refills_at_its_rate() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(0.1, t0);
        assert!(bucket.try_accept(t0));
        assert!(!bucket.try_accept(t0 + Duration::from_secs(9)));
        assert!(bucket.try_accept(t0 + Duration::from_secs(10)));
        // An idle minute still leaves one token only.
        assert!(bucket.try_accept(t0 + Duration::from_secs(70)));
        assert!(!bucket.try_accept(t0 + Duration::from_secs(71)));
        let mut never = TokenBucket::new(0.0, t0);
        assert!(!never.try_accept(t0 + Duration::from_secs(3600)));
    }

    #[test]
    fn nodes_are_taken_once_in_order_at_the_limiters_pace() {
        let t0 = Instant::now();
        let mut q = Queue::new(1.0, t0);
        assert!(q.add("a", "ua", t0));
        assert!(q.add("b", "ub", t0));
        assert!(!q.add("a", "ua", t0), "a node is queued once");
        let a = q.next(t0).unwrap();
        assert_eq!(a.value, "a");
        q.done(&a);
        assert!(q.next(t0).is_none(), "one token a second");
        assert!(!q.add("a", "ua", t0), "a node taken is not queued again");
        let b = q.next(t0 + Duration::from_secs(1)).unwrap();
        assert_eq!(b.value, "b");
        // A failed taint is due again after its wait.
        q.retry(&b, Duration::from_millis(50), t0 + Duration::from_secs(1));
        assert!(q.next(t0 + Duration::from_secs(2)).is_some());
        // Removed, a node may be queued again.
        assert!(q.remove("a"));
        assert!(q.add("a", "ua", t0));
    }

    #[test]
    fn a_swapped_limiter_keeps_an_empty_bucket_empty_and_zero_stops_the_queue() {
        let t0 = Instant::now();
        let mut q = Queue::new(1.0, t0);
        q.add("a", "ua", t0);
        q.add("b", "ub", t0);
        let a = q.next(t0).unwrap();
        q.done(&a);
        q.swap_limiter(2.0, t0);
        assert_eq!(q.qps(), 2.0);
        assert!(
            q.next(t0).is_none(),
            "the old bucket was empty: so is the new"
        );
        q.swap_limiter(0.0, t0);
        assert!(q.next(t0 + Duration::from_secs(3600)).is_none());
        let later = t0 + Duration::from_secs(3600);
        q.swap_limiter(0.1, later);
        assert!(
            q.next(later).is_none(),
            "a stopped queue starts with no token"
        );
        assert!(q.next(later + Duration::from_secs(10)).is_some());
    }
}
