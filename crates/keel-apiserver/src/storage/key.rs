//! Where objects live in the store: `<prefix>/<resource>/<namespace>/<name>` for namespaced
//! objects and `<prefix>/<resource>/<name>` for cluster-scoped ones, with kube-apiserver's
//! legacy resource prefixes (nodes under `minions`, services under `services/specs`,
//! endpoints under `services/endpoints`), so a kube-apiserver on the same etcd reads the same
//! keys.

/// kube-apiserver's `SpecialDefaultResourcePrefixes`: resources stored under another name.
const SPECIAL_PREFIXES: [(&str, &str); 5] = [
    ("nodes", "minions"),
    ("services", "services/specs"),
    ("endpoints", "services/endpoints"),
    ("replicationcontrollers", "controllers"),
    ("ingresses", "ingress"),
];

/// The key layout under one `--etcd-prefix` (default `/registry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLayout {
    /// The prefix, always ending in `/`.
    prefix: String,
}

impl Default for KeyLayout {
    fn default() -> Self {
        KeyLayout::new("/registry")
    }
}

impl KeyLayout {
    /// The layout under `prefix`, normalised to end in exactly one `/` as kube-apiserver does.
    pub fn new(prefix: &str) -> KeyLayout {
        let trimmed = prefix.trim_end_matches('/');
        KeyLayout {
            prefix: format!("{trimmed}/"),
        }
    }

    /// The prefix every key starts with (ends in `/`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The key prefix of every object of `resource` (ends in `/`), in `namespace` if given.
    pub fn collection(&self, resource: &str, namespace: Option<&str>) -> String {
        let stored = SPECIAL_PREFIXES
            .iter()
            .find(|(r, _)| *r == resource)
            .map_or(resource, |(_, p)| p);
        match namespace {
            Some(ns) => format!("{}{stored}/{ns}/", self.prefix),
            None => format!("{}{stored}/", self.prefix),
        }
    }

    /// The key of one object. `namespace` and `name` must be valid path segments (see
    /// [`is_path_segment`]); the registry validates names before they get here.
    pub fn object(&self, resource: &str, namespace: Option<&str>, name: &str) -> String {
        format!("{}{name}", self.collection(resource, namespace))
    }
}

/// Whether `s` can be one segment of a key: not empty, not `.` or `..`, without `/` or `%`
/// (kube-apiserver's `path.IsValidPathSegmentName`).
pub fn is_path_segment(s: &str) -> bool {
    !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '%'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_laid_out_as_kube_apiserver_lays_them_out() {
        let l = KeyLayout::default();
        assert_eq!(
            l.object("configmaps", Some("default"), "x"),
            "/registry/configmaps/default/x"
        );
        assert_eq!(
            l.object("namespaces", None, "kube-system"),
            "/registry/namespaces/kube-system"
        );
        assert_eq!(l.object("nodes", None, "n1"), "/registry/minions/n1");
        assert_eq!(
            l.object("services", Some("default"), "kubernetes"),
            "/registry/services/specs/default/kubernetes"
        );
        assert_eq!(
            l.collection("endpoints", Some("a")),
            "/registry/services/endpoints/a/"
        );
        assert_eq!(l.collection("pods", None), "/registry/pods/");
    }

    #[test]
    fn the_prefix_ends_in_one_slash() {
        for p in ["/registry", "/registry/", "/registry//"] {
            assert_eq!(KeyLayout::new(p).prefix(), "/registry/");
        }
        assert_eq!(KeyLayout::new("/").prefix(), "/");
    }

    #[test]
    fn path_segments_exclude_traversal() {
        for bad in ["", ".", "..", "a/b", "a%2F"] {
            assert!(!is_path_segment(bad), "{bad:?}");
        }
        for good in ["a", "a.b", "..a", "kube-system"] {
            assert!(is_path_segment(good), "{good:?}");
        }
    }
}
