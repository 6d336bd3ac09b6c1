//! The OpenAPI documents, served as kube-apiserver's `kube-openapi` handlers serve them:
//!
//! - `/openapi/v3`: the index, `{"paths": {"api/v1": {"serverRelativeURL":
//!   "/openapi/v3/api/v1?hash=<etag>"}, ...}}`;
//! - `/openapi/v3/<api/v1|apis/<group>/<version>>`: one group version's document
//!   (`components.schemas` from [`schemas`], `paths` from [`paths`]). Its ETag is the upper-case
//!   hex SHA-512 of the JSON; asked for with `?hash=` equal to it, the answer may be cached for
//!   good (`Cache-Control: public, immutable`, `Expires` a year on); with another hash, a 301
//!   to the current one; `If-None-Match` with the ETag, a 304;
//! - `/openapi/v2`: one Swagger 2.0 document of everything, in JSON or in gnostic's protobuf
//!   ([`v2_proto`]), which kubectl 1.27 downloads for `explain`, `create -f` and `apply -f`.
//!
//! v3 is served in JSON only (kubectl reads it so): a client that accepts nothing else gets
//! 406, as upstream answers an Accept header it cannot meet.
//!
//! The documents are made once per process from the registry's kinds (they do not change while
//! it runs) and kept as bytes.

pub mod parameters;
pub mod paths;
pub mod schemas;
pub mod v2_proto;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha512};

use crate::apimachinery::time::Time;
use crate::registry::Strategy;
use schemas::Flavor;

/// One document as served.
#[derive(Debug)]
struct Served {
    body: Bytes,
    etag: String,
    content_type: &'static str,
}

impl Served {
    fn new(value: &Value) -> Served {
        Served::bytes(
            serde_json::to_vec(value).expect("a JSON value encodes"),
            "application/json",
        )
    }

    fn bytes(body: Vec<u8>, content_type: &'static str) -> Served {
        let etag = hex_upper(&Sha512::digest(&body));
        Served {
            body: body.into(),
            etag,
            content_type,
        }
    }
}

fn hex_upper(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

/// Every document, made once.
#[derive(Debug)]
pub struct Documents {
    index: Served,
    group_versions: BTreeMap<String, Served>,
    v2: Served,
    v2_proto: Served,
    definitions: Map<String, Value>,
    modified: Time,
}

static DOCUMENTS: OnceLock<Arc<Documents>> = OnceLock::new();

/// The documents of the built-in kinds among `kinds` (made on first use; the kinds are the
/// process's registry's): what the decoders read objects against.
pub fn documents(kinds: &[&'static dyn Strategy]) -> &'static Documents {
    builtin(kinds)
}

fn builtin(kinds: &[&'static dyn Strategy]) -> &'static Arc<Documents> {
    DOCUMENTS.get_or_init(|| {
        let builtin: Vec<&'static dyn Strategy> = kinds
            .iter()
            .copied()
            .filter(|k| k.custom_schema().is_none())
            .collect();
        Arc::new(Documents::new(&builtin))
    })
}

/// The documents of every kind served now: the built-in ones' while no custom resource is
/// served, else made again each time the kinds change (`generation`).
pub fn current(kinds: &[&'static dyn Strategy], generation: u64) -> Arc<Documents> {
    static CURRENT: Mutex<Option<(u64, Arc<Documents>)>> = Mutex::new(None);
    if kinds.iter().all(|k| k.custom_schema().is_none()) {
        return builtin(kinds).clone();
    }
    let mut current = CURRENT.lock().unwrap_or_else(|p| p.into_inner());
    match &*current {
        Some((made_at, docs)) if *made_at == generation => docs.clone(),
        _ => {
            let docs = Arc::new(Documents::new(kinds));
            *current = Some((generation, docs.clone()));
            docs
        }
    }
}

/// `api/v1` or `apis/<group>/<version>`: a group version's key in the index.
fn key(group: &str, version: &str) -> String {
    paths::prefix(group, version)
        .trim_start_matches('/')
        .to_string()
}

fn info() -> Value {
    let version = crate::http::discovery::version();
    json!({"title": "Kubernetes", "version": version["gitVersion"]})
}

fn security_scheme() -> Value {
    json!({"BearerToken": {
        "type": "apiKey",
        "description": "Bearer Token authentication",
        "name": "authorization",
        "in": "header",
    }})
}

impl Documents {
    /// The documents of `kinds`.
    pub fn new(kinds: &[&'static dyn Strategy]) -> Documents {
        let mut group_versions: Vec<(&str, &str)> = Vec::new();
        for kind in kinds {
            let info = kind.info();
            if !group_versions.contains(&(info.group, info.version)) {
                group_versions.push((info.group, info.version));
            }
        }
        let mut served = BTreeMap::new();
        let mut v2_paths = Map::new();
        for &(group, version) in &group_versions {
            let of_gv: Vec<&'static dyn Strategy> = kinds
                .iter()
                .copied()
                .filter(|k| k.info().group == group && k.info().version == version)
                .collect();
            let items = paths::group_version(kinds, group, version);
            let v3_paths: Map<String, Value> = items
                .iter()
                .map(|p| (p.path.clone(), p.render(Flavor::V3)))
                .collect();
            v2_paths.extend(items.iter().map(|p| (p.path.clone(), p.render(Flavor::V2))));
            let document = json!({
                "openapi": "3.0.0",
                "info": info(),
                "paths": v3_paths,
                "components": {
                    "schemas": schemas::definitions(&of_gv, &[(group, version)], Flavor::V3),
                    "securitySchemes": security_scheme(),
                },
                "security": [{"BearerToken": []}],
            });
            served.insert(key(group, version), Served::new(&document));
        }
        let index: Map<String, Value> = served
            .iter()
            .map(|(gv, doc)| {
                let url = format!("/openapi/v3/{gv}?hash={}", doc.etag);
                (gv.clone(), json!({"serverRelativeURL": url}))
            })
            .collect();
        let v2 = json!({
            "swagger": "2.0",
            "info": info(),
            "paths": v2_paths,
            "definitions": schemas::definitions(kinds, &group_versions, Flavor::V2),
            "securityDefinitions": security_scheme(),
            "security": [{"BearerToken": []}],
        });
        Documents {
            index: Served::new(&json!({"paths": index})),
            group_versions: served,
            v2_proto: Served::bytes(v2_proto::document(&v2), PROTOBUF_V2),
            v2: Served::new(&v2),
            definitions: schemas::definitions(kinds, &group_versions, Flavor::V3),
            modified: Time::now(),
        }
    }

    /// Every definition (`$ref`s as in v3), for reading objects against their schema.
    pub fn definitions(&self) -> &Map<String, Value> {
        &self.definitions
    }
}

/// Answers the OpenAPI paths (None: `path` is not one of them).
pub fn serve(
    kinds: &[&'static dyn Strategy],
    generation: u64,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Option<Response> {
    let docs = match path {
        "/openapi/v2" | "/openapi/v3" | "/openapi/v3/" => current(kinds, generation),
        _ if path.starts_with("/openapi/v3/") => current(kinds, generation),
        _ => return None,
    };
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .filter(|a| !a.trim().is_empty())
        .unwrap_or("*/*");
    let response = match path {
        "/openapi/v3" | "/openapi/v3/" => content(&docs.index, docs.modified, headers),
        "/openapi/v2" => match v2_form(accept) {
            Some(protobuf) => {
                let doc = if protobuf { &docs.v2_proto } else { &docs.v2 };
                let mut response = content(doc, docs.modified, headers);
                vary(&mut response);
                response
            }
            None => not_acceptable(),
        },
        _ => {
            let gv = &path["/openapi/v3/".len()..];
            let Some(doc) = docs.group_versions.get(gv) else {
                return Some((StatusCode::NOT_FOUND, "404 page not found\n").into_response());
            };
            if !accepts_json(accept) {
                let mut response = not_acceptable();
                vary(&mut response);
                return Some(response);
            }
            let hash = query.and_then(|q| {
                q.split('&')
                    .filter_map(|pair| pair.split_once('='))
                    .find(|(k, _)| *k == "hash")
                    .map(|(_, v)| v.to_string())
            });
            match hash.filter(|h| !h.is_empty()) {
                Some(hash) if hash != doc.etag => {
                    let location = format!("/openapi/v3/{gv}?hash={}", doc.etag);
                    let body = format!("<a href=\"{location}\">Moved Permanently</a>.\n\n");
                    let mut response = (
                        StatusCode::MOVED_PERMANENTLY,
                        [
                            (header::LOCATION, location),
                            (header::CONTENT_TYPE, "text/html; charset=utf-8".into()),
                        ],
                        body,
                    )
                        .into_response();
                    set_etag(&mut response, &doc.etag);
                    vary(&mut response);
                    response
                }
                Some(_) => {
                    let mut response = content(doc, docs.modified, headers);
                    vary(&mut response);
                    let h = response.headers_mut();
                    h.insert(
                        header::CACHE_CONTROL,
                        HeaderValue::from_static("public, immutable"),
                    );
                    let expires = Time(Time::now().0 + 365 * 86_400).http_date("UTC");
                    if let Ok(v) = HeaderValue::from_str(&expires) {
                        h.insert(header::EXPIRES, v);
                    }
                    response
                }
                None => {
                    let mut response = content(doc, docs.modified, headers);
                    vary(&mut response);
                    response
                }
            }
        }
    };
    Some(response)
}

/// The protobuf form of v2, as upstream names it in Content-Type.
const PROTOBUF_V2: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// The form of v2 an Accept header takes, as kube-openapi chooses it: the ranges by quality
/// (the client's order among equals), each tried against JSON then protobuf (`Some(true)`).
fn v2_form(accept: &str) -> Option<bool> {
    let mut ranges: Vec<(f32, String)> = accept
        .split(',')
        .map(|range| {
            let mut parts = range.split(';');
            let essence = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = parts
                .find_map(|p| p.trim().strip_prefix("q=").map(str::to_string))
                .and_then(|q| q.trim().parse().ok())
                .unwrap_or(1.0);
            (q, essence)
        })
        .filter(|(q, _)| *q > 0.0)
        .collect();
    ranges.sort_by(|a, b| b.0.total_cmp(&a.0));
    ranges
        .into_iter()
        .find_map(|(_, essence)| match essence.as_str() {
            "application/json" | "application/*" | "*/*" => Some(false),
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
            | "application/com.github.proto-openapi.spec.v2.v1.0+protobuf" => Some(true),
            _ => None,
        })
}

/// Whether an Accept header takes JSON (`application/json`, `application/*`, `*/*`, with a
/// quality above zero).
fn accepts_json(accept: &str) -> bool {
    accept.split(',').any(|range| {
        let mut parts = range.split(';');
        let essence = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let refused = parts.any(|p| {
            p.trim()
                .strip_prefix("q=")
                .and_then(|q| q.trim().parse::<f32>().ok())
                .is_some_and(|q| q <= 0.0)
        });
        !refused
            && matches!(
                essence.as_str(),
                "application/json" | "application/*" | "*/*"
            )
    })
}

/// 406 with no body, as kube-openapi answers.
fn not_acceptable() -> Response {
    StatusCode::NOT_ACCEPTABLE.into_response()
}

fn vary(response: &mut Response) {
    response
        .headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
}

fn set_etag(response: &mut Response, etag: &str) {
    if let Ok(v) = HeaderValue::from_str(&format!("\"{etag}\"")) {
        response.headers_mut().insert(header::ETAG, v);
    }
}

/// A JSON document as Go's `http.ServeContent` serves it: ETag, Last-Modified, and 304 for
/// an `If-None-Match` naming the ETag.
fn content(doc: &Served, modified: Time, headers: &HeaderMap) -> Response {
    let quoted = format!("\"{}\"", doc.etag);
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .any(|t| t.trim() == "*" || t.trim().trim_start_matches("W/") == quoted)
        });
    let mut response = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, doc.content_type)], doc.body.clone()).into_response()
    };
    set_etag(&mut response, &doc.etag);
    if let Ok(v) = HeaderValue::from_str(&modified.http_date("GMT")) {
        response.headers_mut().insert(header::LAST_MODIFIED, v);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;

    fn get(path: &str, query: Option<&str>, accept: Option<&str>) -> Response {
        let mut headers = HeaderMap::new();
        if let Some(a) = accept {
            headers.insert(header::ACCEPT, HeaderValue::from_str(a).unwrap());
        }
        serve(&registry::kinds(), 0, path, query, &headers).expect("an OpenAPI path")
    }

    async fn body(response: Response) -> Value {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn the_index_names_each_group_version_with_its_hash() {
        let index = body(get("/openapi/v3", None, None)).await;
        let paths = index["paths"].as_object().unwrap();
        let keys: Vec<&str> = paths.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "api/v1",
                "apis/admissionregistration.k8s.io/v1",
                "apis/apiextensions.k8s.io/v1",
                "apis/apiregistration.k8s.io/v1",
                "apis/apps/v1",
                "apis/authentication.k8s.io/v1",
                "apis/authorization.k8s.io/v1",
                "apis/autoscaling/v1",
                "apis/autoscaling/v2",
                "apis/batch/v1",
                "apis/certificates.k8s.io/v1",
                "apis/coordination.k8s.io/v1",
                "apis/discovery.k8s.io/v1",
                "apis/events.k8s.io/v1",
                "apis/networking.k8s.io/v1",
                "apis/node.k8s.io/v1",
                "apis/policy/v1",
                "apis/rbac.authorization.k8s.io/v1",
                "apis/scheduling.k8s.io/v1",
                "apis/storage.k8s.io/v1",
            ]
        );
        let url = paths["api/v1"]["serverRelativeURL"].as_str().unwrap();
        let hash = url.strip_prefix("/openapi/v3/api/v1?hash=").unwrap();
        assert_eq!(hash.len(), 128);
        assert!(
            hash.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_lowercase())
        );

        let cached = get("/openapi/v3/api/v1", Some(&format!("hash={hash}")), None);
        assert_eq!(cached.status(), StatusCode::OK);
        assert_eq!(cached.headers()[header::CACHE_CONTROL], "public, immutable");
        assert_eq!(
            cached.headers()[header::ETAG],
            format!("\"{hash}\"").as_str()
        );
        assert!(cached.headers().contains_key(header::EXPIRES));
        let doc = body(cached).await;
        assert_eq!(doc["openapi"], "3.0.0");
        assert!(doc["components"]["schemas"]["io.k8s.api.core.v1.Pod"].is_object());
        assert!(doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"].is_object());

        let stale = get("/openapi/v3/api/v1", Some("hash=0"), None);
        assert_eq!(stale.status(), StatusCode::MOVED_PERMANENTLY);
        assert_eq!(stale.headers()[header::LOCATION], url);
        let plain = get("/openapi/v3/api/v1", None, Some("application/json"));
        assert!(!plain.headers().contains_key(header::CACHE_CONTROL));

        let mut headers = HeaderMap::new();
        headers.insert(
            header::IF_NONE_MATCH,
            HeaderValue::from_str(&format!("\"{hash}\"")).unwrap(),
        );
        let unchanged = serve(&registry::kinds(), 0, "/openapi/v3/api/v1", None, &headers).unwrap();
        assert_eq!(unchanged.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(
            get("/openapi/v3/apis/extensions/v1beta1", None, None).status(),
            StatusCode::NOT_FOUND
        );
        let lease = body(get("/openapi/v3/apis/coordination.k8s.io/v1", None, None)).await;
        assert!(lease["components"]["schemas"]["io.k8s.api.core.v1.Pod"].is_null());
    }

    #[tokio::test]
    async fn v2_is_json_or_protobuf() {
        let protobuf = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
        let pb = get("/openapi/v2", None, Some(protobuf));
        assert_eq!(pb.status(), StatusCode::OK);
        assert_eq!(pb.headers()[header::CONTENT_TYPE], PROTOBUF_V2);
        assert_eq!(
            get(
                "/openapi/v2",
                None,
                Some("application/vnd.kubernetes.protobuf")
            )
            .status(),
            StatusCode::NOT_ACCEPTABLE
        );
        let v2 = get(
            "/openapi/v2",
            None,
            Some(&format!("{protobuf};q=0.5, application/json")),
        );
        assert_eq!(v2.status(), StatusCode::OK);
        let doc = body(v2).await;
        assert_eq!(doc["swagger"], "2.0");
        assert!(doc["definitions"]["io.k8s.api.coordination.v1.Lease"].is_object());
        let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
        assert!(
            patch["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "fieldValidation")
        );
        assert!(
            patch["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["in"] == "body")
        );
        assert!(serve(&registry::kinds(), 0, "/openapi", None, &HeaderMap::new()).is_none());
    }
}
