//! The process's own resources, as both `keel store` and `keel apiserver` (and `keel up`,
//! which runs both) need them: the file-descriptor limit raised at start ([`fd_limit`]), a
//! process-wide bound on accepted connections that keeps a reserve of descriptors for the
//! store's own files ([`connections`]), the `process_*` metrics Go programs such as etcd
//! and kube-apiserver export ([`metrics`]), a runtime for work that yields the CPU to
//! everything else ([`background`]), the faults injected for diagnosis drills ([`faults`]),
//! Go's duration syntax, which both servers' flags and faults use ([`go_duration`]), and
//! tasks that end with their caller ([`AbortOnDrop`]).

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
