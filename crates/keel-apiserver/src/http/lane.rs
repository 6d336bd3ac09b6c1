//! Which runtime serves a client's connection, when Events have a store of their own.
//!
//! Event handlers then run on the low-priority runtime ([`keel_process::background`]), but a
//! connection's own work (TLS, HTTP/1.1 parsing, HTTP/2 framing) is done where the
//! connection runs. A client that only writes Events (an event recorder, a flood) gets its
//! connection moved there after [`SETTLE`] requests, so a flood takes the CPU only when
//! heartbeats leave it. The first request of any other kind, any path, moves the connection
//! home for good. A handler always runs on the runtime its kind belongs to, wherever the
//! connection is, and an HTTP/2 stream's task (routing, and sending the response body: a
//! watch's events) always on the home runtime ([`HomeExecutor`]), so no request of another
//! kind is ever served at low priority beyond its connection's framing.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};

use keel_process::background;
use tokio::runtime::Handle;
use tokio::sync::Notify;

/// How many Event requests, and nothing else, move a connection to the low-priority runtime.
pub const SETTLE: u32 = 8;

/// A connection being served, whole (handshake included).
pub type Connection = Pin<Box<dyn Future<Output = ()> + Send>>;

const DECIDING: u8 = 0;
const BACKGROUND: u8 = 1;
const HOME: u8 = 2;

/// One connection's runtime: its home (where it was accepted) until it has served only Events.
pub struct Lane {
    home: Handle,
    events: AtomicU32,
    state: AtomicU8,
    moves: Notify,
}

impl Lane {
    /// A lane for a connection accepted on the current runtime.
    pub fn new() -> Arc<Lane> {
        Arc::new(Lane {
            home: Handle::current(),
            events: AtomicU32::new(0),
            state: AtomicU8::new(DECIDING),
            moves: Notify::new(),
        })
    }

    /// The runtime that accepted the connection.
    pub fn home(&self) -> Handle {
        self.home.clone()
    }

    /// Counts a request on the connection (`event`: an Events request whose handler runs at
    /// low priority) and moves the connection if it should be elsewhere.
    pub fn note(&self, event: bool) {
        let state = self.state.load(Ordering::Relaxed);
        if state == HOME {
            return;
        }
        if !event {
            // One atomic step: a concurrent move to the background is either seen here (and
            // undone) or refused by this one.
            if self.state.swap(HOME, Ordering::AcqRel) == BACKGROUND {
                self.moves.notify_one();
            }
        } else if state == DECIDING && self.events.fetch_add(1, Ordering::Relaxed) + 1 >= SETTLE {
            // A non-Event request seen meanwhile has the last word.
            if self
                .state
                .compare_exchange(DECIDING, BACKGROUND, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                self.moves.notify_one();
            }
        }
    }

    /// The runtime a handler must be sent to (`event`: of an Events request), or None when
    /// the current thread's runtime is the right one.
    pub fn handler_runtime(lane: Option<&Lane>, event: bool) -> Option<Handle> {
        match (event, background::is_current()) {
            (true, false) => Some(background::handle()),
            (false, true) => lane.map(|lane| lane.home.clone()),
            _ => None,
        }
    }

    /// Serves `connection`, moving it between runtimes as its requests say.
    pub fn drive(self: Arc<Self>, mut connection: Connection) -> Connection {
        Box::pin(async move {
            loop {
                tokio::select! {
                    () = &mut connection => return,
                    () = self.moves.notified() => {}
                }
                let to_background = self.state.load(Ordering::Acquire) == BACKGROUND;
                if to_background != background::is_current() {
                    let runtime = match to_background {
                        true => background::handle(),
                        false => self.home.clone(),
                    };
                    runtime.spawn(self.clone().drive(connection));
                    return;
                }
            }
        })
    }
}

/// Starts an HTTP/2 connection's stream tasks on the runtime that accepted the connection,
/// wherever the connection itself is polled.
#[derive(Clone)]
pub struct HomeExecutor(pub Handle);

impl<F> hyper::rt::Executor<F> for HomeExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        self.0.spawn(future);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which runtime the connection's future is polled on after each step.
    async fn runs_on_background(lane: &Arc<Lane>, steps: &[bool]) -> Vec<bool> {
        let (tell, mut told) = tokio::sync::mpsc::unbounded_channel();
        let (step, mut stepped) = tokio::sync::mpsc::unbounded_channel::<()>();
        let connection: Connection = Box::pin(async move {
            while stepped.recv().await.is_some() {
                tell.send(background::is_current()).unwrap();
            }
        });
        tokio::spawn(lane.clone().drive(connection));
        let mut seen = Vec::new();
        for &event in steps {
            lane.note(event);
            // The move happens between polls: the next step is taken where the lane put it.
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            step.send(()).unwrap();
            seen.push(told.recv().await.unwrap());
        }
        seen
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_connection_of_events_only_moves_to_the_background_and_home_on_anything_else() {
        let lane = Lane::new();
        let mut steps = vec![true; SETTLE as usize];
        steps.extend([true, false, true, true]);
        let mut expected = vec![false; SETTLE as usize - 1];
        // Moved once it has served SETTLE Events; home for good at the first other request.
        expected.extend([true, true, false, false, false]);
        assert_eq!(runs_on_background(&lane, &steps).await, expected);
    }

    #[test]
    fn a_request_of_another_kind_always_wins_the_race() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let _in = runtime.enter();
        for _ in 0..1000 {
            let lane = Lane::new();
            for _ in 0..SETTLE - 1 {
                lane.note(true);
            }
            // The 8th Event and the first other request at once.
            std::thread::scope(|s| {
                s.spawn(|| lane.note(true));
                s.spawn(|| lane.note(false));
            });
            assert_eq!(lane.state.load(Ordering::Acquire), HOME);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_mixed_connection_stays_home() {
        let lane = Lane::new();
        let mut steps = vec![false];
        steps.extend(vec![true; 2 * SETTLE as usize]);
        assert!(runs_on_background(&lane, &steps).await.iter().all(|on| !on));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn handlers_run_where_their_kind_belongs() {
        let lane = Lane::new();
        assert!(Lane::handler_runtime(Some(&lane), false).is_none());
        assert!(Lane::handler_runtime(Some(&lane), true).is_some());
        let (home, event) = background::handle()
            .spawn({
                let lane = lane.clone();
                async move {
                    (
                        Lane::handler_runtime(Some(&lane), false),
                        Lane::handler_runtime(Some(&lane), true).is_none(),
                    )
                }
            })
            .await
            .unwrap();
        // From the background, an Event stays and anything else goes home.
        assert!(event);
        let home = home.expect("sent home");
        assert!(
            !home
                .spawn(async { background::is_current() })
                .await
                .unwrap()
        );
    }
}
