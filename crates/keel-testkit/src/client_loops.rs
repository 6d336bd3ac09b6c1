//! Client threads for the fault tests: each repeats a step (a write, a family of objects, a
//! delete) until stopped, counting the writes acknowledged and failed, so that a test can wait
//! for progress before and after a fault, then take back what every thread did.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What one step of a client came to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Step {
    /// Writes acknowledged (answered 2xx).
    pub acked: usize,
    /// Writes that failed, timed out or lost their answer.
    pub failed: usize,
}

/// Client threads, each with a state of its own, stepping until [`ClientLoops::finish`].
pub struct ClientLoops<S> {
    stop: Arc<AtomicBool>,
    acks: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
    threads: Vec<JoinHandle<S>>,
}

impl<S: Send + 'static> ClientLoops<S> {
    /// One thread for each of `states`, calling `step(&mut state, n)` for n = 0, 1, ... until
    /// stopped. After a step with a failure the thread pauses 50 ms: not a timing assumption,
    /// it only keeps a server that is down from being asked in a tight loop.
    pub fn start<F>(states: Vec<S>, step: F) -> ClientLoops<S>
    where
        F: Fn(&mut S, usize) -> Step + Send + Sync + 'static,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let acks = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(AtomicUsize::new(0));
        let step = Arc::new(step);
        let threads = states
            .into_iter()
            .map(|mut state| {
                let (stop, acks, failed, step) =
                    (stop.clone(), acks.clone(), failed.clone(), step.clone());
                std::thread::spawn(move || {
                    for n in 0.. {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        let done = step(&mut state, n);
                        acks.fetch_add(done.acked, Ordering::SeqCst);
                        if done.failed > 0 {
                            failed.fetch_add(done.failed, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(50));
                        }
                    }
                    state
                })
            })
            .collect();
        ClientLoops {
            stop,
            acks,
            failed,
            threads,
        }
    }

    /// Writes acknowledged so far, by every thread.
    pub fn acks(&self) -> usize {
        self.acks.load(Ordering::SeqCst)
    }

    /// Writes that failed or timed out so far, by every thread.
    pub fn failed(&self) -> usize {
        self.failed.load(Ordering::SeqCst)
    }

    /// Waits until `n` writes in all were acknowledged; fails after `limit`, or at once if a
    /// thread stopped (a check in its step failed).
    pub fn wait_acks(&self, n: usize, limit: Duration, what: &str) {
        let deadline = Instant::now() + limit;
        while self.acks() < n {
            assert!(
                !self.threads.iter().any(|t| t.is_finished()),
                "{what}: a client stopped"
            );
            assert!(
                Instant::now() < deadline,
                "{what}: {} of {n} writes acknowledged in {limit:?}",
                self.acks()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops every thread and answers their states, in the order they were given; a thread's
    /// panic is raised again here.
    pub fn finish(self) -> Vec<S> {
        self.stop.store(true, Ordering::SeqCst);
        self.threads
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    }
}
