//! One lease renewal of one node, as the kubelet's lease controller
//! (`component-helpers/apimachinery/lease`) makes it: a sans-I/O state machine that says
//! which request to send next and is told each answer.
//!
//! The kubelet's `sync`: with a lease it wrote before, `retryUpdateLease` from it: PUT it with
//! `renewTime` bumped, up to `maxUpdateRetries` (5) times; a 409 Conflict means the lease
//! changed, so GET it (`backoffEnsureLease`) and PUT from what was read; any other failure
//! just PUTs again. If all five fail, fall back to `backoffEnsureLease` and one more
//! `retryUpdateLease` from the lease read. Without a lease written before (the first sync),
//! `backoffEnsureLease` and, unless it had to create the lease, `retryUpdateLease`.
//! `backoffEnsureLease` GETs the lease, POSTs it when the GET says 404, and on any failure
//! sleeps (200 ms, doubling, at most 7 s) and starts again: it only ends with a lease.
//!
//! A GET therefore happens only after a failed update or on the first sync, and the lease the
//! next renewal starts from is the last one the server answered ([`Renewal::latest`]).

use std::time::Duration;

use bytes::Bytes;

/// `maxUpdateRetries`: PUTs of one `retryUpdateLease`.
pub const MAX_UPDATE_RETRIES: u32 = 5;

/// `backoffEnsureLease`'s first sleep is twice this.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// `maxBackoff`: the longest sleep of `backoffEnsureLease`.
const MAX_BACKOFF: Duration = Duration::from_secs(7);

/// A request of the renewal.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// GET the lease.
    Get,
    /// POST the lease (the kubelet's new lease, renewed now).
    Create,
    /// PUT this lease, its `renewTime` to be set to now.
    Put(Bytes),
}

/// What to do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Send this request and call [`Renewal::answered`] with its answer.
    Send(Request),
    /// Sleep this long, then call [`Renewal::slept`].
    Sleep(Duration),
    /// The lease is renewed (or created): the server's answer is the latest lease.
    Renewed,
    /// Every attempt failed; the next renewal starts from [`Renewal::latest`].
    Failed,
}

/// After a `backoffEnsureLease`, what it was for.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Then {
    /// The start of `sync` (or its fallback): a created lease ends the renewal, a read one is
    /// updated from (`retryUpdateLease` from scratch).
    Sync,
    /// The conflict in `retryUpdateLease` attempt `attempt` (counting from 1) of a run that
    /// started from the latest lease (`from_latest`) or not.
    Conflict { attempt: u32, from_latest: bool },
}

/// Where the renewal is.
#[derive(Debug, Clone, PartialEq)]
enum State {
    /// A PUT of `base` is out: attempt `attempt` (from 0) of a `retryUpdateLease`.
    Updating {
        base: Bytes,
        attempt: u32,
        from_latest: bool,
    },
    /// A GET is out.
    Getting { then: Then },
    /// A POST is out.
    Creating { then: Then },
    /// Sleeping before the next GET.
    BackingOff { then: Then },
    /// Over.
    Done,
}

/// One renewal (see the module comment).
#[derive(Debug, Clone)]
pub struct Renewal {
    state: State,
    latest: Option<Bytes>,
    sleep: Duration,
}

/// How an answer is classed by the renewal (and counted by the caller).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// A success (2xx), or 404 to a GET.
    Ok,
    /// 409 to a PUT: the lease changed.
    Conflict,
    /// Anything else (0 for no answer at all).
    Error,
}

impl Renewal {
    /// Starts a renewal from `latest`, the lease last written (None on the first sync).
    pub fn start(latest: Option<Bytes>) -> (Self, Step) {
        let mut renewal = Self {
            state: State::Done,
            latest: None,
            sleep: FIRST_BACKOFF,
        };
        let step = match latest {
            Some(base) => {
                renewal.latest = Some(base.clone());
                renewal.update(base, 0, true)
            }
            None => renewal.ensure(Then::Sync),
        };
        (renewal, step)
    }

    /// The lease the next renewal starts from.
    pub fn latest(&self) -> Option<&Bytes> {
        self.latest.as_ref()
    }

    /// How an answer of `status` (0: none) to `request` is classed.
    pub fn class(request: &Request, status: u16) -> Class {
        match (request, status) {
            (_, 200..=299) | (Request::Get, 404) => Class::Ok,
            (Request::Put(_), 409) => Class::Conflict,
            _ => Class::Error,
        }
    }

    /// Takes the answer (`status`, 0 if none came, and `body`) to the request last asked for.
    pub fn answered(&mut self, status: u16, body: Bytes) -> Step {
        let ok = (200..=299).contains(&status);
        match std::mem::replace(&mut self.state, State::Done) {
            State::Updating {
                base,
                attempt,
                from_latest,
            } => {
                if ok {
                    self.latest = Some(body);
                    return Step::Renewed;
                }
                let attempt = attempt + 1;
                if status == 409 {
                    return self.ensure(Then::Conflict {
                        attempt,
                        from_latest,
                    });
                }
                if attempt < MAX_UPDATE_RETRIES {
                    self.update(base, attempt, from_latest)
                } else {
                    self.exhausted(from_latest)
                }
            }
            State::Getting { then } => match status {
                _ if ok => {
                    self.sleep = FIRST_BACKOFF;
                    self.latest = Some(body.clone());
                    self.ensured(body, then)
                }
                404 => {
                    self.state = State::Creating { then };
                    Step::Send(Request::Create)
                }
                _ => self.back_off(then),
            },
            State::Creating { then } if ok => {
                self.sleep = FIRST_BACKOFF;
                self.latest = Some(body.clone());
                match then {
                    Then::Sync => Step::Renewed,
                    Then::Conflict { .. } => self.ensured(body, then),
                }
            }
            State::Creating { then } => self.back_off(then),
            State::BackingOff { .. } | State::Done => Step::Failed,
        }
    }

    /// The sleep asked for is over.
    pub fn slept(&mut self) -> Step {
        match std::mem::replace(&mut self.state, State::Done) {
            State::BackingOff { then } => self.ensure(then),
            _ => Step::Failed,
        }
    }

    fn update(&mut self, base: Bytes, attempt: u32, from_latest: bool) -> Step {
        self.state = State::Updating {
            base: base.clone(),
            attempt,
            from_latest,
        };
        Step::Send(Request::Put(base))
    }

    fn ensure(&mut self, then: Then) -> Step {
        self.state = State::Getting { then };
        Step::Send(Request::Get)
    }

    /// `backoffEnsureLease` returned `lease` (read, or created after a conflict).
    fn ensured(&mut self, lease: Bytes, then: Then) -> Step {
        match then {
            Then::Sync => self.update(lease, 0, false),
            Then::Conflict {
                attempt,
                from_latest,
            } if attempt < MAX_UPDATE_RETRIES => self.update(lease, attempt, from_latest),
            Then::Conflict { from_latest, .. } => self.exhausted(from_latest),
        }
    }

    /// A `retryUpdateLease` used its attempts: from the latest lease, `sync` falls back to
    /// ensuring the lease and one more run; otherwise the renewal failed.
    fn exhausted(&mut self, from_latest: bool) -> Step {
        if from_latest {
            self.ensure(Then::Sync)
        } else {
            Step::Failed
        }
    }

    fn back_off(&mut self, then: Then) -> Step {
        self.sleep = (self.sleep * 2).min(MAX_BACKOFF);
        self.state = State::BackingOff { then };
        Step::Sleep(self.sleep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(rv: u32) -> Bytes {
        Bytes::from(format!("{{\"rv\":{rv}}}"))
    }

    fn put(rv: u32) -> Step {
        Step::Send(Request::Put(lease(rv)))
    }

    #[test]
    fn a_renewal_is_one_put_from_the_latest_lease() {
        let (mut r, step) = Renewal::start(Some(lease(1)));
        assert_eq!(step, put(1));
        assert_eq!(r.answered(200, lease(2)), Step::Renewed);
        assert_eq!(r.latest(), Some(&lease(2)));
    }

    #[test]
    fn the_first_sync_creates_the_lease() {
        let (mut r, step) = Renewal::start(None);
        assert_eq!(step, Step::Send(Request::Get));
        assert_eq!(r.answered(404, Bytes::new()), Step::Send(Request::Create));
        assert_eq!(r.answered(201, lease(5)), Step::Renewed);
        assert_eq!(r.latest(), Some(&lease(5)));

        // A lease already there (a restarted kubelet) is read and updated.
        let (mut r, _) = Renewal::start(None);
        assert_eq!(r.answered(200, lease(7)), put(7));
        assert_eq!(r.answered(200, lease(8)), Step::Renewed);
    }

    #[test]
    fn a_conflict_reads_the_lease_and_puts_from_it() {
        let (mut r, _) = Renewal::start(Some(lease(1)));
        assert_eq!(r.answered(409, Bytes::new()), Step::Send(Request::Get));
        assert_eq!(r.answered(200, lease(3)), put(3));
        assert_eq!(r.answered(200, lease(4)), Step::Renewed);
        assert_eq!(r.latest(), Some(&lease(4)));
    }

    #[test]
    fn other_failures_put_again_then_fall_back_once() {
        let (mut r, _) = Renewal::start(Some(lease(1)));
        for _ in 1..MAX_UPDATE_RETRIES {
            assert_eq!(r.answered(500, Bytes::new()), put(1));
        }
        // The fifth failure: ensure the lease, then one more run from what was read.
        assert_eq!(r.answered(0, Bytes::new()), Step::Send(Request::Get));
        assert_eq!(r.answered(200, lease(2)), put(2));
        for _ in 1..MAX_UPDATE_RETRIES {
            assert_eq!(r.answered(429, Bytes::new()), put(2));
        }
        assert_eq!(r.answered(503, Bytes::new()), Step::Failed);
        // The next renewal starts from the lease read.
        assert_eq!(r.latest(), Some(&lease(2)));
    }

    #[test]
    fn ensuring_backs_off_until_it_has_a_lease() {
        let (mut r, _) = Renewal::start(None);
        let mut sleeps = Vec::new();
        for _ in 0..7 {
            match r.answered(503, Bytes::new()) {
                Step::Sleep(d) => sleeps.push(d.as_millis()),
                other => panic!("{other:?}"),
            }
            assert_eq!(r.slept(), Step::Send(Request::Get));
        }
        assert_eq!(sleeps, [200, 400, 800, 1600, 3200, 6400, 7000]);
        // A failed create backs off too, and starts again with a GET.
        assert_eq!(r.answered(404, Bytes::new()), Step::Send(Request::Create));
        assert!(matches!(r.answered(409, Bytes::new()), Step::Sleep(_)));
        assert_eq!(r.slept(), Step::Send(Request::Get));
        assert_eq!(r.answered(200, lease(9)), put(9));
    }

    #[test]
    fn conflicts_on_every_attempt_fail_after_the_fallback() {
        let (mut r, _) = Renewal::start(Some(lease(1)));
        let mut gets = 0;
        let mut puts = 0;
        let mut step = put(1);
        let mut n = 1;
        loop {
            step = match step {
                Step::Send(Request::Put(_)) => {
                    puts += 1;
                    r.answered(409, Bytes::new())
                }
                Step::Send(Request::Get) => {
                    gets += 1;
                    n += 1;
                    r.answered(200, lease(n))
                }
                Step::Failed => break,
                other => panic!("{other:?}"),
            };
        }
        // Two runs of five PUTs, each conflict followed by a GET, and the fallback's GET.
        assert_eq!((puts, gets), (10, 11));
    }

    #[test]
    fn answers_are_classed() {
        let put = Request::Put(Bytes::new());
        assert_eq!(Renewal::class(&put, 200), Class::Ok);
        assert_eq!(Renewal::class(&put, 409), Class::Conflict);
        assert_eq!(Renewal::class(&Request::Get, 404), Class::Ok);
        assert_eq!(Renewal::class(&Request::Create, 409), Class::Error);
        assert_eq!(Renewal::class(&put, 0), Class::Error);
    }
}
