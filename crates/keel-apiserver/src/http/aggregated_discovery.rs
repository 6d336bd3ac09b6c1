//! Aggregated discovery (`apidiscovery.k8s.io` `v2`, and `v2beta1` for older clients): one
//! `APIGroupDiscoveryList` at `/api` (the core group) and one at `/apis` (every named group,
//! each version's resources and subresources), which kubectl and client-go ask for before
//! anything else, in place of one request per group version. Made from the same
//! `APIResourceList`s as unaggregated discovery ([`super::discovery::resources`]), converted
//! as kube-apiserver's `ConvertGroupVersionIntoToDiscovery` converts them, and served as its
//! aggregated handler serves them: with an `ETag` (the SHA-512 of the document) that an
//! `If-None-Match` turns into a 304, in JSON or in protobuf (`k8s.io/api/apidiscovery`'s
//! messages in the `k8s\0` envelope). Each document is made once per set of served kinds
//! ([`Cache`]), not on every request, and its protobuf form once the first time it is asked
//! for.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode, header};
use serde_json::{Value, json};
use sha2::{Digest, Sha512};

use super::negotiate::{Encoding, Output};
use super::{discovery, protobuf};
use crate::registry::Strategy;
use crate::registry::store::Kinds;

/// The `APIResourceDiscovery`s of one `APIResourceList`: each resource, with its
/// subresources (`pods/status`) folded into it.
fn resources(list: &Value) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    let listed = list["resources"].as_array().cloned().unwrap_or_default();
    let kind_of = |r: &Value| {
        json!({
            "group": r.get("group").cloned().unwrap_or(json!("")),
            "version": r.get("version").cloned().unwrap_or(json!("")),
            "kind": r["kind"],
        })
    };
    for r in listed.iter().filter(|r| !text(r, "name").contains('/')) {
        let scope = if r["namespaced"] == true {
            "Namespaced"
        } else {
            "Cluster"
        };
        let mut resource = json!({
            "resource": r["name"],
            "responseKind": kind_of(r),
            "scope": scope,
            "singularResource": r["singularName"],
            "verbs": r["verbs"],
        });
        for field in ["shortNames", "categories"] {
            if let Some(v) = r.get(field) {
                resource[field] = v.clone();
            }
        }
        out.push(resource);
    }
    for r in listed.iter() {
        let Some((parent, sub)) = text(r, "name").split_once('/') else {
            continue;
        };
        let Some(resource) = out.iter_mut().find(|o| o["resource"] == parent) else {
            continue;
        };
        let entry = json!({"subresource": sub, "responseKind": kind_of(r), "verbs": r["verbs"]});
        match resource["subresources"].as_array_mut() {
            Some(subs) => subs.push(entry),
            None => resource["subresources"] = json!([entry]),
        }
    }
    out
}

fn text<'a>(v: &'a Value, field: &str) -> &'a str {
    v.get(field).and_then(Value::as_str).unwrap_or("")
}

/// One `APIGroupDiscovery`: `group` ("" for core) in each of `versions`, preferred first.
fn group(kinds: &[&'static dyn Strategy], group: &str, versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .filter_map(|v| {
            let list = discovery::resources(kinds, group, v)?;
            Some(json!({"version": v, "resources": resources(&list), "freshness": "Current"}))
        })
        .collect();
    let mut metadata = json!({"creationTimestamp": null});
    if !group.is_empty() {
        metadata["name"] = group.into();
    }
    json!({"metadata": metadata, "versions": versions})
}

/// The `APIGroupDiscoveryList` of `/api` (`core`) or of `/apis`, in `version` (`v2` or
/// `v2beta1`).
pub fn document(kinds: &[&'static dyn Strategy], core: bool, version: &str) -> Value {
    let items: Vec<Value> = if core {
        vec![group(kinds, "", &["v1"])]
    } else {
        discovery::groups(kinds)
            .iter()
            .map(|(g, versions)| group(kinds, g, versions))
            .collect()
    };
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    })
}

/// A document ready to send: its JSON, its protobuf form (made the first time a client asks
/// for it) and its ETag (the SHA-512 of the JSON, in upper-case hex and quotes, as
/// kube-apiserver's handler makes it: one ETag whatever the encoding sent).
pub struct Encoded {
    body: Vec<u8>,
    protobuf: OnceLock<Vec<u8>>,
    etag: String,
}

impl Encoded {
    /// Encodes `document`.
    pub fn new(document: &Value) -> Self {
        let body = serde_json::to_vec(document).expect("a JSON value encodes");
        let etag = format!("\"{}\"", hex_upper(&Sha512::digest(&body)));
        Encoded {
            body,
            protobuf: OnceLock::new(),
            etag,
        }
    }

    /// The document in `encoding` (JSON, or its `apidiscovery.k8s.io` protobuf message).
    fn body(&self, encoding: Encoding) -> &[u8] {
        if encoding != Encoding::Protobuf {
            return &self.body;
        }
        self.protobuf.get_or_init(|| {
            let document: Value = serde_json::from_slice(&self.body).expect("the document is JSON");
            protobuf::encode(&document).expect("the discovery documents have a protobuf form")
        })
    }
}

/// The documents made for the kinds served now, by group (`/api` or `/apis`) and version:
/// made again only when the set of kinds changes (a CRD established or removed).
#[derive(Default)]
pub struct Cache(Mutex<HashMap<Which, (u64, Arc<Encoded>)>>);

/// Which document: `/api` (true) or `/apis`, and the `apidiscovery.k8s.io` version.
type Which = (bool, &'static str);

impl Cache {
    /// The document of `/api` (`core`) or `/apis` in `version`, for `kinds`.
    pub fn get(&self, kinds: &Kinds, core: bool, version: &'static str) -> Arc<Encoded> {
        let mut made = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((generation, encoded)) = made.get(&(core, version))
            && *generation == kinds.generation()
        {
            return encoded.clone();
        }
        let encoded = Arc::new(Encoded::new(&document(kinds, core, version)));
        made.insert((core, version), (kinds.generation(), encoded.clone()));
        encoded
    }
}

/// The response: the document in `encoding` with its media type (the encoding's, with the
/// group, version and kind, as kube-apiserver's `generateMediaTypeWithGVK` writes it) and
/// ETag, or 304 when the client's `If-None-Match` names that ETag.
pub fn respond(
    encoded: &Encoded,
    version: &str,
    encoding: Encoding,
    headers: &HeaderMap,
) -> Response {
    let media = Output {
        encoding,
        conversion: None,
    }
    .content_type();
    let media = format!("{media};g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList");
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == encoded.etag);
    let headers = [
        (header::CONTENT_TYPE, media),
        (header::ETAG, encoded.etag.clone()),
        (header::VARY, "Accept".to_string()),
        (header::CACHE_CONTROL, "public".to_string()),
    ];
    if matches {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    (StatusCode::OK, headers, encoded.body(encoding).to_vec()).into_response()
}

fn hex_upper(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;

    #[test]
    fn resources_carry_their_subresources_as_upstream_converts_them() {
        let kinds = registry::kinds();
        let core = document(&kinds, true, "v2");
        assert_eq!(core["apiVersion"], "apidiscovery.k8s.io/v2");
        let v1 = &core["items"][0];
        assert_eq!(v1["metadata"], json!({"creationTimestamp": null}));
        assert_eq!(v1["versions"][0]["version"], "v1");
        assert_eq!(v1["versions"][0]["freshness"], "Current");
        let pods = v1["versions"][0]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == "pods")
            .unwrap();
        assert_eq!(
            pods["responseKind"],
            json!({"group": "", "version": "", "kind": "Pod"})
        );
        assert_eq!(pods["scope"], "Namespaced");
        assert_eq!(pods["singularResource"], "pod");
        assert_eq!(pods["shortNames"], json!(["po"]));
        assert_eq!(
            pods["subresources"],
            json!([{"subresource": "status", "verbs": ["get", "patch", "update"],
                    "responseKind": {"group": "", "version": "", "kind": "Pod"}}])
        );
        let named = document(&kinds, false, "v2beta1");
        let leases = named["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["metadata"]["name"] == "coordination.k8s.io")
            .unwrap();
        assert_eq!(leases["versions"][0]["resources"][0]["scope"], "Namespaced");
    }

    #[test]
    fn an_unchanged_document_is_not_sent_again() {
        let doc = Encoded::new(&json!({"items": []}));
        let first = respond(&doc, "v2", Encoding::Json, &HeaderMap::new());
        assert_eq!(first.status(), StatusCode::OK);
        let etag = first.headers()[header::ETAG].clone();
        assert_eq!(
            first.headers()[header::CONTENT_TYPE],
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        );
        let mut headers = HeaderMap::new();
        headers.insert(header::IF_NONE_MATCH, etag);
        assert_eq!(
            respond(&doc, "v2", Encoding::Json, &headers).status(),
            StatusCode::NOT_MODIFIED
        );
    }
}
