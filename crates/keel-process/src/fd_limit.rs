//! The open-file limit: raised from the soft to the hard limit at start, as Go's runtime does
//! for every Go program (etcd and kube-apiserver among them), so a busy server is bounded by
//! what the operator allowed and not by a shell's default of 1024.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// The soft and hard limits on open files after [`raise`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// What the process may open now.
    pub soft: u64,
    /// What the soft limit may be raised to.
    pub hard: u64,
}

/// Raises the soft limit on open files to the hard limit (or to the kernel's `nr_open` when
/// the hard limit is unlimited) and returns the limits that hold afterwards. Failing to raise
/// it is not an error: the process runs with what it has, as Go programs do.
pub fn raise() -> Limits {
    let before = getrlimit(Resource::Nofile);
    let ceiling = before.maximum.unwrap_or_else(nr_open);
    if before.current.is_none_or(|soft| soft < ceiling) {
        let raised = Rlimit {
            current: Some(ceiling),
            maximum: before.maximum,
        };
        if let Err(e) = setrlimit(Resource::Nofile, raised) {
            tracing::debug!(error = %e, "cannot raise the open-file limit");
        }
    }
    current()
}

/// The limits on open files now.
pub fn current() -> Limits {
    let limit = getrlimit(Resource::Nofile);
    Limits {
        soft: limit.current.unwrap_or(u64::MAX),
        hard: limit.maximum.unwrap_or(u64::MAX),
    }
}

/// The kernel's ceiling on any process's open files (`/proc/sys/fs/nr_open`).
fn nr_open() -> u64 {
    std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raising_leaves_the_soft_limit_at_the_hard_limit() {
        let after = raise();
        assert!(after.soft <= after.hard);
        assert_eq!(after.soft, current().soft);
        if after.hard != u64::MAX {
            assert_eq!(after.soft, after.hard);
        }
    }
}
