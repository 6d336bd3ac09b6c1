//! Discovery, as kube-apiserver serves it without aggregation: `/api` (`APIVersions`),
//! `/apis` (`APIGroupList`), `/apis/<group>` (`APIGroup`) and the `APIResourceList` of each
//! group version, all made from the registry's kinds; and `/version`.

use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::registry::Strategy;

/// The Kubernetes version this server speaks for.
pub const KUBERNETES_VERSION: (&str, &str) = ("1", "34");

/// The verbs of every resource.
const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// `/api`.
pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

/// The named groups (not the core group), in the order their kinds are registered, each
/// with its versions, the preferred first ([`version_order`]).
pub fn groups(kinds: &[&'static dyn Strategy]) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for kind in kinds {
        let info = kind.info();
        if info.group.is_empty() {
            continue;
        }
        match groups.iter_mut().find(|(g, _)| *g == info.group) {
            Some((_, versions)) if versions.contains(&info.version) => {}
            Some((_, versions)) => versions.push(info.version),
            None => groups.push((info.group, vec![info.version])),
        }
    }
    for (_, versions) in &mut groups {
        versions.sort_by(|a, b| version_order(a, b));
    }
    groups
}

/// apimachinery's `CompareKubeAwareVersionStrings`, as an ordering that puts the preferred
/// version first: GA before beta before alpha, a higher major first, then a higher minor;
/// versions not shaped like `v1beta2` after all of them, alphabetically.
pub fn version_order(a: &str, b: &str) -> std::cmp::Ordering {
    /// `(major, stage, minor)` of `v(\d+)((alpha|beta)(\d+))?`: stage 2 for GA, 1 for
    /// beta, 0 for alpha.
    fn parse(v: &str) -> Option<(u64, u8, u64)> {
        let number = |s: &str| {
            (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse().ok())
                .flatten()
        };
        let rest = v.strip_prefix('v')?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let major = number(&rest[..digits])?;
        let rest = &rest[digits..];
        if rest.is_empty() {
            return Some((major, 2, 0));
        }
        if let Some(minor) = rest.strip_prefix("beta") {
            return Some((major, 1, number(minor)?));
        }
        Some((major, 0, number(rest.strip_prefix("alpha")?)?))
    }
    match (parse(a), parse(b)) {
        (Some((ma, sa, na)), Some((mb, sb, nb))) => (sb, mb, nb).cmp(&(sa, ma, na)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

fn group_json(name: &str, versions: &[&str]) -> Value {
    let gv = |v: &str| json!({"groupVersion": format!("{name}/{v}"), "version": v});
    let listed: Vec<Value> = versions.iter().map(|v| gv(v)).collect();
    json!({"name": name, "versions": listed, "preferredVersion": gv(versions[0])})
}

/// `/apis`.
pub fn group_list(kinds: &[&'static dyn Strategy]) -> Value {
    let groups: Vec<Value> = groups(kinds)
        .into_iter()
        .map(|(g, v)| group_json(g, &v))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>` (None: no such group).
pub fn group(kinds: &[&'static dyn Strategy], name: &str) -> Option<Value> {
    let (g, v) = groups(kinds).into_iter().find(|(g, _)| *g == name)?;
    let mut group = group_json(g, &v);
    group["kind"] = "APIGroup".into();
    group["apiVersion"] = "v1".into();
    Some(group)
}

/// The `APIResourceList` of `group`/`version` (None: not served).
pub fn resources(kinds: &[&'static dyn Strategy], group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for kind in kinds {
        let info = kind.info();
        if info.group != group || info.version != version {
            continue;
        }
        let mut resource = json!({
            "name": info.resource,
            "singularName": info.singular,
            "namespaced": info.namespaced,
            "kind": info.kind,
            "verbs": match (kind.read_only(), kind.review().is_some()) {
                (true, _) => &["get", "list"][..],
                (_, true) => &["create"][..],
                _ => &VERBS[..],
            },
        });
        // Only what is stored has a storage version (the reviews, as upstream's, do not).
        if kind.stored() {
            resource["storageVersionHash"] =
                storage_version_hash(info.group, info.version, info.kind).into();
        }
        if !info.short_names.is_empty() {
            resource["shortNames"] = json!(info.short_names);
        }
        if !info.categories.is_empty() {
            resource["categories"] = json!(info.categories);
        }
        resources.push(resource);
        let mut subresource = |name: &str, verbs: &[&str]| {
            resources.push(json!({
                "name": format!("{}/{name}", info.resource),
                "singularName": "",
                "namespaced": info.namespaced,
                "kind": info.kind,
                "verbs": verbs,
            }));
        };
        if info.resource == "namespaces" {
            subresource("finalize", &["update"]);
        }
        // In upstream's order: its installer sorts the paths it serves.
        for sub in kind.subresources() {
            subresource(sub, &["get", "patch", "update"]);
        }
        if info.status {
            subresource("status", &["get", "patch", "update"]);
        }
        if kind.scale().is_some() {
            resources.push(json!({
                "name": format!("{}/scale", info.resource),
                "singularName": "",
                "namespaced": info.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let mut list =
        json!({"kind": "APIResourceList", "groupVersion": group_version, "resources": resources});
    if !group.is_empty() {
        list["apiVersion"] = "v1".into();
    }
    Some(list)
}

/// kube-apiserver's `storageVersionHash`: the first 8 bytes of the SHA-256 of
/// `<group>/<version>/<kind>`, base64.
fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    let digest = Sha256::digest(format!("{group}/{version}/{kind}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(&digest[..8])
}

/// `/version`.
pub fn version() -> Value {
    let (major, minor) = KUBERNETES_VERSION;
    json!({
        "major": major,
        "minor": minor,
        "emulationMajor": major,
        "emulationMinor": minor,
        "gitVersion": format!("v{major}.{minor}.0"),
        "gitCommit": format!("keel-{}", env!("CARGO_PKG_VERSION")),
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, go_arch()),
    })
}

/// The architecture as Go names it.
fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_ordered_as_kube_orders_them() {
        let mut versions = vec![
            "v1alpha1",
            "v2beta1",
            "foo",
            "v1",
            "v1beta2",
            "v2",
            "v1beta1",
            "v10",
            "v11alpha2",
            "bar",
            "v1beta",
        ];
        versions.sort_by(|a, b| version_order(a, b));
        assert_eq!(
            versions,
            vec![
                "v10",
                "v2",
                "v1",
                "v2beta1",
                "v1beta2",
                "v1beta1",
                "v11alpha2",
                "v1alpha1",
                "bar",
                "foo",
                "v1beta"
            ]
        );
    }

    #[test]
    fn storage_version_hash_is_kube_apiservers() {
        // kube-apiserver v1.3x lists configmaps with this hash.
        assert_eq!(storage_version_hash("", "v1", "ConfigMap"), "qFsyl6wFWjQ=");
    }
}
