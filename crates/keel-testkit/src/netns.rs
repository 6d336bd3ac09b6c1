//! Network namespaces for partition tests (root only).
//!
//! Each member of a [`Net`] gets a network namespace of its own with one address on a bridge
//! that the test process also sits on, so the test reaches every member while the members
//! reach each other only through the bridge. A partition between two members is a pair of
//! blackhole routes, one in each namespace: their packets to each other are dropped (and new
//! connections refused) while both still answer the test. Everything is removed on drop.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Networks created by this process, to keep names and subnets apart.
static CREATED: AtomicU32 = AtomicU32::new(0);

/// A bridge with `n` member namespaces on it.
pub struct Net {
    tag: String,
    subnet: String,
    n: usize,
}

impl Net {
    /// Creates the bridge and `n` namespaces, or says why it cannot (not root, no `ip`, no
    /// namespaces in this sandbox).
    pub fn create(n: usize) -> Result<Net, String> {
        let count = CREATED.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let net = Net {
            tag: format!("k{:x}{count}", pid & 0xfffff),
            subnet: format!("10.{}.{}", 200 + ((pid >> 8) + count) % 56, pid & 0xff),
            n,
        };
        let bridge = net.bridge();
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        ip(&[
            "addr",
            "add",
            &format!("{}.1/24", net.subnet),
            "dev",
            &bridge,
        ])?;
        ip(&["link", "set", &bridge, "up"])?;
        for i in 0..n {
            let (ns, host_end, ns_end) = (net.ns(i), format!("{}v{i}h", net.tag), net.veth(i));
            ip(&["netns", "add", &ns])?;
            ip(&[
                "link", "add", &host_end, "type", "veth", "peer", "name", &ns_end,
            ])?;
            ip(&["link", "set", &ns_end, "netns", &ns])?;
            ip(&["link", "set", &host_end, "master", &bridge])?;
            ip(&["link", "set", &host_end, "up"])?;
            let addr = format!("{}/24", net.ip(i));
            ip(&["-n", &ns, "addr", "add", &addr, "dev", &ns_end])?;
            ip(&["-n", &ns, "link", "set", &ns_end, "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(net)
    }

    /// The namespace of member `i`.
    pub fn ns(&self, i: usize) -> String {
        format!("{}n{i}", self.tag)
    }

    /// The address of member `i`.
    pub fn ip(&self, i: usize) -> String {
        format!("{}.{}", self.subnet, 10 + i)
    }

    /// Drops all traffic between members `i` and `j`.
    pub fn cut(&self, i: usize, j: usize) {
        self.route(i, j, "add");
        self.route(j, i, "add");
    }

    /// Cuts member `i` off from every other member (the test still reaches it).
    pub fn isolate(&self, i: usize) {
        for j in (0..self.n).filter(|&j| j != i) {
            self.cut(i, j);
        }
    }

    /// Restores traffic between member `i` and every other member.
    pub fn heal(&self, i: usize) {
        for j in (0..self.n).filter(|&j| j != i) {
            self.route(i, j, "del");
            self.route(j, i, "del");
        }
    }

    fn route(&self, from: usize, to: usize, action: &str) {
        let dst = format!("{}/32", self.ip(to));
        // Deleting a route that is not there is fine: heal is idempotent.
        let done = ip(&["-n", &self.ns(from), "route", action, "blackhole", &dst]);
        if action == "add" {
            done.unwrap_or_else(|e| panic!("{e}"));
        }
    }

    fn bridge(&self) -> String {
        format!("{}b", self.tag)
    }

    fn veth(&self, i: usize) -> String {
        format!("{}v{i}n", self.tag)
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for i in 0..self.n {
            let _ = ip(&["netns", "del", &self.ns(i)]);
        }
        let _ = ip(&["link", "del", &self.bridge()]);
    }
}

/// Runs `ip ARGS`.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `ip` (iproute2): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
