//! Work that yields the CPU to everything else in the process: a runtime whose threads run at
//! the lowest CPU priority (nice 19).
//!
//! A flood of Events is a cluster's noisiest load and its least urgent; node heartbeats are
//! its most urgent. kube-apiserver keeps them apart with API Priority and Fairness, which
//! orders requests in queues but lets every admitted request take the CPU as any other. Here
//! what runs on this runtime gets a core only when nothing else wants it, so on a busy
//! machine the flood slows down and the heartbeats do not: when Events have a store of their
//! own, the handlers of Event requests and the connections of clients that send nothing
//! else (the apiserver's `http::lane`), and with `keel up --events-store` that whole store
//! (its Raft, WAL and apply; threads inherit the priority of the thread that starts them).
//! The threads' nice value is theirs alone: the rest of the process keeps its own.

use std::sync::Mutex;
use std::time::Duration;

use tokio::runtime::{Handle, Runtime};

/// The nice value of the runtime's threads: the lowest priority.
pub const NICE: i32 = 19;

/// The runtime: not started yet (None), running, or shut down for good (the process ends).
static RUNTIME: Mutex<Option<Slot>> = Mutex::new(None);

enum Slot {
    Running(Runtime),
    ShutDown,
}

thread_local! {
    /// This thread is one of the runtime's.
    static ON_BACKGROUND: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The calling thread is one of the low-priority runtime's.
pub fn is_current() -> bool {
    ON_BACKGROUND.with(|on| on.get())
}

/// The low-priority runtime, started on first use (as many threads as cores). Once it is shut
/// down (the process is ending), the caller's own runtime.
pub fn handle() -> Handle {
    let mut slot = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
    let slot = slot.get_or_insert_with(|| {
        Slot::Running(
            tokio::runtime::Builder::new_multi_thread()
                .thread_name("keel-background")
                .thread_stack_size(crate::THREAD_STACK)
                .on_thread_start(|| {
                    ON_BACKGROUND.with(|on| on.set(true));
                    lower_priority();
                })
                .enable_all()
                .build()
                .expect("the low-priority runtime starts"),
        )
    });
    match slot {
        Slot::Running(runtime) => runtime.handle().clone(),
        Slot::ShutDown => Handle::current(),
    }
}

/// Stops the runtime, dropping its tasks (a store on it closes its backend as it would on the
/// main runtime), waiting at most `timeout`; called outside any runtime, as the process ends.
pub fn shutdown(timeout: Duration) {
    let slot = RUNTIME
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .replace(Slot::ShutDown);
    if let Some(Slot::Running(runtime)) = slot {
        runtime.shutdown_timeout(timeout);
    }
}

/// Lowers the calling thread's CPU priority to [`NICE`] (Linux nice values are per thread).
/// Raising it back would need a privilege: a failure only leaves the thread as it was.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        let thread = rustix::thread::gettid();
        if let Err(e) = rustix::process::setpriority_process(Some(thread), NICE) {
            tracing::debug!(error = %e, "cannot lower a background thread's priority");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn the_runtime_threads_run_at_the_lowest_priority() {
        let mine = rustix::process::getpriority_process(None).unwrap();
        let (nice, on_background) = handle().block_on(async {
            tokio::spawn(async {
                (
                    rustix::process::getpriority_process(None).unwrap(),
                    is_current(),
                )
            })
            .await
            .unwrap()
        });
        assert_eq!(nice, NICE);
        assert!(on_background);
        assert!(!is_current());
        // The caller's own priority is untouched.
        assert_eq!(rustix::process::getpriority_process(None).unwrap(), mine);
    }
}
