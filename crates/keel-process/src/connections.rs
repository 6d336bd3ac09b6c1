//! A process-wide bound on accepted connections: every listener of the process (the store's
//! client ports, the apiserver's port) takes a permit before it accepts, and the connection
//! holds it until it closes. The bound leaves a reserve of file descriptors for the
//! process's own files (WAL segments, the backend, snapshots, peer connections), so no number
//! of clients can make a WAL segment fail to open: past the bound, new connections wait in
//! the kernel's listen queue until one closes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::fd_limit;

/// How many streams of one HTTP/2 connection to the apiserver may be reset by the client
/// before the server took them up, before the server ends the connection as an attack (HTTP/2
/// "rapid reset"). The library's default, 20, is far too low for a server under load: when
/// clients give up on queued requests (a timeout, a cancelled context) they reset streams the
/// busy server has not reached yet, and ending the connection then fails every other request
/// and watch on it. Go's HTTP/2 server, kube-apiserver's, ends a connection only when far more
/// handlers are queued; keel store sets no bound, as etcd's gRPC server ends no connection for
/// this at all (its clients are apiservers, whose cancelled requests must never cost their
/// watches).
pub const MAX_PENDING_ACCEPT_RESETS: usize = 1024;

/// The most descriptors kept back from connections for the process's own files.
pub const MAX_RESERVE: u64 = 256;

/// The descriptors kept back for the process's own files under a limit of `limit`: a quarter
/// of it, at most [`MAX_RESERVE`].
pub fn reserve_for(limit: u64) -> u64 {
    (limit / 4).min(MAX_RESERVE)
}

/// The process's budget, sized from the open-file limit at its first use (after
/// [`fd_limit::raise`], which `main` calls first).
pub fn budget() -> &'static ConnectionBudget {
    static BUDGET: OnceLock<ConnectionBudget> = OnceLock::new();
    BUDGET.get_or_init(|| {
        let limit = fd_limit::current().soft;
        ConnectionBudget::new(limit.saturating_sub(reserve_for(limit)).max(1))
    })
}

/// A bound on the connections open at once.
#[derive(Debug)]
pub struct ConnectionBudget {
    permits: Arc<Semaphore>,
    bound: usize,
    full: AtomicBool,
}

/// One accepted connection's place in the budget, given back when dropped.
#[derive(Debug)]
pub struct ConnectionPermit(#[allow(dead_code)] OwnedSemaphorePermit);

impl ConnectionBudget {
    /// A budget of `bound` connections.
    pub fn new(bound: u64) -> ConnectionBudget {
        let bound = usize::try_from(bound)
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS);
        ConnectionBudget {
            permits: Arc::new(Semaphore::new(bound)),
            bound,
            full: AtomicBool::new(false),
        }
    }

    /// Waits for room for one more connection. The first wait of a full stretch is logged,
    /// so an operator sees why new clients are not answered.
    pub async fn admit(&self) -> ConnectionPermit {
        if let Ok(permit) = self.permits.clone().try_acquire_owned() {
            self.full.store(false, Ordering::Relaxed);
            return ConnectionPermit(permit);
        }
        if !self.full.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                bound = self.bound,
                "every connection this process may accept is open; new connections wait \
                 until one closes (raise the open-file limit, `ulimit -n`, to allow more)"
            );
        }
        let permit = self.permits.clone().acquire_owned().await;
        ConnectionPermit(permit.expect("the budget's semaphore is never closed"))
    }

    /// The most connections open at once.
    pub fn bound(&self) -> usize {
        self.bound
    }

    /// The connections open now.
    pub fn open(&self) -> usize {
        self.bound - self.permits.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_is_a_quarter_of_a_small_limit_and_capped() {
        assert_eq!(reserve_for(400), 100);
        assert_eq!(reserve_for(1024), 256);
        assert_eq!(reserve_for(1 << 20), MAX_RESERVE);
    }

    #[tokio::test]
    async fn past_the_bound_a_connection_waits_for_one_to_close() {
        let budget = Arc::new(ConnectionBudget::new(2));
        let first = budget.admit().await;
        let _second = budget.admit().await;
        assert_eq!(budget.open(), 2);
        let waiting = tokio::spawn({
            let budget = budget.clone();
            async move { budget.admit().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(first);
        let _third = waiting.await.unwrap();
        assert_eq!(budget.open(), 2);
    }
}
