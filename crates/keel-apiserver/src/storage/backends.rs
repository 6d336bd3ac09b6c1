//! The stores an apiserver keeps its resources in, as kube-apiserver's storage factory routes
//! them: the main store (`--etcd-servers`) and one store for each distinct server list of
//! `--etcd-servers-overrides` (resources that name the same servers share it). Each has its
//! own health check (`etcd`, `etcd-override-<index>`), compactor and size metric; a resource's
//! watch cache, counts and writes go to the store that keeps it.

use super::Etcd3;

/// One store and what it keeps.
#[derive(Debug, Clone)]
pub struct Backend {
    /// The store.
    pub storage: Etcd3,
    /// The servers it was reached on (for messages).
    pub servers: Vec<String>,
    /// The resources routed to it, as (group, resource); empty for the main store, which
    /// keeps every resource not routed elsewhere.
    pub resources: Vec<(String, String)>,
}

/// The main store and the overrides' stores, in the order of their first override.
#[derive(Debug, Clone)]
pub struct Backends(Vec<Backend>);

impl Backends {
    /// Only the main store.
    pub fn new(main: Backend) -> Backends {
        Backends(vec![main])
    }

    /// Adds an override's store.
    pub fn with(mut self, backend: Backend) -> Backends {
        self.0.push(backend);
        self
    }

    /// The store that keeps `resource` of `group`: the override naming it, else one naming
    /// its whole group (`group/*`, kube-apiserver's all-resources alias), else the main one.
    pub fn of(&self, group: &str, resource: &str) -> &Backend {
        let naming = |wanted: &str| {
            self.0[1..]
                .iter()
                .find(|b| b.resources.iter().any(|(g, r)| g == group && r == wanted))
        };
        naming(resource)
            .or_else(|| naming("*"))
            .unwrap_or(&self.0[0])
    }

    /// The main store.
    pub fn main(&self) -> &Backend {
        &self.0[0]
    }

    /// Every store with the names of its health and readiness checks: `etcd` and
    /// `etcd-readiness` for the main store, `etcd-override-<index>` and
    /// `etcd-override-readiness-<index>` for the others (kube-apiserver's names).
    pub fn checks(&self) -> impl Iterator<Item = (String, String, &Backend)> {
        self.0.iter().enumerate().map(|(i, b)| match i {
            0 => ("etcd".into(), "etcd-readiness".into(), b),
            i => (
                format!("etcd-override-{}", i - 1),
                format!("etcd-override-readiness-{}", i - 1),
                b,
            ),
        })
    }

    /// Every store, the main one first.
    pub fn all(&self) -> &[Backend] {
        &self.0
    }
}

impl From<Etcd3> for Backends {
    /// One store keeping every resource.
    fn from(storage: Etcd3) -> Backends {
        Backends::new(Backend {
            storage,
            servers: Vec::new(),
            resources: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::StoreChannel;

    fn backend(servers: &str, resources: &[(&str, &str)]) -> Backend {
        let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:1").connect_lazy();
        Backend {
            storage: Etcd3::new(StoreChannel::new(channel)),
            servers: vec![servers.into()],
            resources: resources
                .iter()
                .map(|(g, r)| (g.to_string(), r.to_string()))
                .collect(),
        }
    }

    #[tokio::test]
    async fn a_resource_goes_to_its_override_then_its_groups_then_the_main_store() {
        let backends = Backends::new(backend("main", &[]))
            .with(backend("group", &[("coordination.k8s.io", "*")]))
            .with(backend("events", &[("", "events")]))
            .with(backend("one", &[("coordination.k8s.io", "leases")]));
        let of = |g, r| backends.of(g, r).servers[0].as_str();
        assert_eq!(of("", "events"), "events");
        assert_eq!(of("coordination.k8s.io", "leases"), "one");
        assert_eq!(of("coordination.k8s.io", "other"), "group");
        assert_eq!(of("", "configmaps"), "main");
        assert_eq!(of("apps", "*"), "main");
    }
}
