//! What a request path names, as kube-apiserver's `RequestInfoFactory` reads it:
//! `/api/v1/...` (the core group) or `/apis/<group>/<version>/...`, then
//! `[namespaces/<ns>/]<resource>[/<name>[/<subresource>]]`, where `namespaces/<ns>/status`
//! and `namespaces/<ns>/finalize` are the namespace's own subresources, and a leading
//! `watch/` makes the request a watch (the deprecated watch paths); and the query
//! parameters that come with it ([`Query`]).

use std::collections::HashMap;

/// A request's query parameters (the last value of each).
pub type Query = HashMap<String, String>;

/// A boolean query parameter as apimachinery converts one: "0" and "false" (in any case)
/// are false, anything else (even "") true.
pub fn query_bool(value: &str) -> bool {
    !(value == "0" || value.eq_ignore_ascii_case("false"))
}

/// Whether this request is a watch (a long-running request).
pub fn is_watch(path: &ResourcePath, query: &Query) -> bool {
    path.watch_path
        || matches!(
            query.get("watch").map(String::as_str),
            Some("true") | Some("1")
        )
}

/// A request for a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    /// API group ("" for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Namespace, for a namespaced request.
    pub namespace: Option<String>,
    /// Resource, plural.
    pub resource: String,
    /// Object name, for a request about one object.
    pub name: Option<String>,
    /// Subresource (`status`), if any.
    pub subresource: Option<String>,
    /// The path started with `watch/`.
    pub watch_path: bool,
}

/// What a path is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Path {
    /// `/api`: the core group's versions.
    CoreVersions,
    /// `/apis`: the groups.
    Groups,
    /// `/apis/<group>`: one group.
    Group(String),
    /// `/api/v1` or `/apis/<group>/<version>`: the resources of a group version.
    Resources {
        /// Group ("" for core).
        group: String,
        /// Version.
        version: String,
    },
    /// A resource request.
    Resource(ResourcePath),
    /// Anything else.
    Other,
}

/// Subresources of a namespace that are not namespaced resources.
const NAMESPACE_SUBRESOURCES: [&str; 2] = ["status", "finalize"];

/// A URL path with its `%XX` escapes decoded, as Go's `url.URL.Path` holds it (an escape
/// that is not two hex digits is kept as it is; bytes that are not UTF-8 are replaced).
pub fn decode_path(raw: &str) -> String {
    if !raw.contains('%') {
        return raw.to_string();
    }
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads `path` (without the query, already decoded by [`decode_path`]).
pub fn parse(path: &str) -> Path {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match parts.as_slice() {
        ["api"] => return Path::CoreVersions,
        ["apis"] => return Path::Groups,
        ["apis", group] => return Path::Group(group.to_string()),
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Path::Other,
    };
    if rest.is_empty() {
        return Path::Resources {
            group: group.to_string(),
            version: version.to_string(),
        };
    }
    let (watch_path, mut rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        _ => (false, rest),
    };
    let mut namespace = None;
    if rest.len() > 1 && rest[0] == "namespaces" {
        namespace = Some(rest[1].to_string());
        if rest.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&rest[2]) {
            rest = &rest[2..];
        } else {
            // The namespace itself: /namespaces/<ns>[/status|/finalize].
            return Path::Resource(ResourcePath {
                group: group.to_string(),
                version: version.to_string(),
                namespace: None,
                resource: "namespaces".to_string(),
                name: namespace,
                subresource: rest.get(2).map(|s| s.to_string()),
                watch_path,
            });
        }
    }
    if rest.is_empty() || rest.len() > 3 || rest.iter().any(|p| p.is_empty()) {
        return Path::Other;
    }
    Path::Resource(ResourcePath {
        group: group.to_string(),
        version: version.to_string(),
        namespace,
        resource: rest[0].to_string(),
        name: rest.get(1).map(|s| s.to_string()),
        subresource: rest.get(2).map(|s| s.to_string()),
        watch_path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_decoded_as_go_decodes_url_path() {
        assert_eq!(
            decode_path("/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Anode"),
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/system:node"
        );
        assert_eq!(decode_path("/api/v1/namespaces"), "/api/v1/namespaces");
        assert_eq!(decode_path("/a%2"), "/a%2");
        assert_eq!(decode_path("/a%zz%41"), "/a%zzA");
    }

    fn res(path: &str) -> ResourcePath {
        match parse(path) {
            Path::Resource(r) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn paths_are_read_as_kube_apiserver_reads_them() {
        assert_eq!(parse("/api"), Path::CoreVersions);
        assert_eq!(
            parse("/apis/coordination.k8s.io"),
            Path::Group("coordination.k8s.io".into())
        );
        assert_eq!(
            parse("/api/v1"),
            Path::Resources {
                group: "".into(),
                version: "v1".into()
            }
        );
        let r = res("/api/v1/namespaces/default/pods/web/status");
        assert_eq!(
            (
                r.namespace.as_deref(),
                r.resource.as_str(),
                r.name.as_deref(),
                r.subresource.as_deref()
            ),
            (Some("default"), "pods", Some("web"), Some("status"))
        );
        let r = res("/api/v1/namespaces/default");
        assert_eq!(
            (r.namespace, r.resource.as_str(), r.name.as_deref()),
            (None, "namespaces", Some("default"))
        );
        let r = res("/api/v1/namespaces/gone/finalize");
        assert_eq!(
            (r.name.as_deref(), r.subresource.as_deref()),
            (Some("gone"), Some("finalize"))
        );
        let r = res("/api/v1/namespaces");
        assert_eq!((r.resource.as_str(), r.name), ("namespaces", None));
        let r = res("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases");
        assert_eq!(
            (r.group.as_str(), r.namespace.as_deref()),
            ("coordination.k8s.io", Some("kube-node-lease"))
        );
        let r = res("/api/v1/watch/namespaces/default/configmaps");
        assert!(r.watch_path);
        assert_eq!(parse("/api/v1/namespaces/a/pods/b/c/d"), Path::Other);
        assert_eq!(parse("/healthz"), Path::Other);
    }
}
