//! The process's own resources, as both `keel store` and `keel apiserver` (and `keel up`,
//! which runs both) need them: the file-descriptor limit raised at start ([`fd_limit`]), a
//! process-wide bound on accepted connections that keeps a reserve of descriptors for the
//! store's own files ([`connections`]), the `process_*` metrics Go programs such as etcd
//! and kube-apiserver export ([`metrics`]), a runtime for work that yields the CPU to
//! everything else ([`background`]), the faults injected for diagnosis drills ([`faults`]),
//! Go's duration syntax, which both servers' flags and faults use ([`go_duration`]), and
//! tasks that end with their caller ([`AbortOnDrop`]), and the stack every runtime thread
//! gets ([`THREAD_STACK`]).

/// The stack of every async runtime thread (workers and blocking threads): 16 MiB in place of
/// tokio's 2 MiB, reserved, not committed, until used. Walks over what clients send (a CEL
/// expression's tree as the parser builds it, nested JSON) recurse; their own limits (250
/// levels of CEL nesting, 128 of JSON) keep them well inside it, in debug builds too.
pub const THREAD_STACK: usize = 16 << 20;

pub mod abort;
pub mod background;
pub mod connections;
pub mod faults;
pub mod fd_limit;
pub mod go_duration;
pub mod metrics;

pub use abort::AbortOnDrop;
pub use connections::{ConnectionBudget, ConnectionPermit};
pub use metrics::ProcessCollector;
