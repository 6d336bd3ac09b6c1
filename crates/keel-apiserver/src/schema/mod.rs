//! The one schema model: every kind's schema is an OpenAPI v3 definition, and everything that
//! needs to know a kind's shape reads it from there. The decoders ([`crate::http::decode`])
//! read the Go types and prune with it, both merges read their metadata from it ([`merge`]),
//! and the served OpenAPI documents ([`crate::http::openapi`]) are made of it.
//!
//! The built-in kinds' definitions are upstream's own ([`builtin`]): the OpenAPI v3 documents
//! kube-apiserver publishes, vendored by `scripts/k8s-openapi.py`. They carry what Go's
//! struct tags and markers say and the Rust types of the `k8s-openapi` crate do not:
//! `x-kubernetes-list-type`, `-list-map-keys`, `-map-type`, `-patch-strategy`,
//! `-patch-merge-key`, and the defaults of list-map keys. They also say where a kind holds
//! resource quantities, which every write stores in canonical form ([`quantities`]).

pub mod builtin;
pub mod merge;
pub mod quantities;

use serde_json::{Map, Value};

pub use merge::{FieldMeta, ListType, ObjectType, PatchStrategy, Schema, schema_for, schema_of};

/// Definitions by name (`io.k8s.api.core.v1.Pod`), as OpenAPI v3's `components.schemas`.
pub type Definitions = Map<String, Value>;

/// The prefix of a `$ref` to a definition in an OpenAPI v3 document.
pub const REF_PREFIX: &str = "#/components/schemas/";

/// The definition a schema points at, by `$ref` or by `allOf: [{$ref}]` (how v3 writes a
/// reference with a description or default beside it).
pub fn reference(schema: &Value) -> Option<&str> {
    schema
        .get("$ref")
        .or_else(|| schema.get("allOf")?.get(0)?.get("$ref"))
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix(REF_PREFIX))
}

/// Follows `$ref`s to the schema itself; the name of the last definition followed, if any.
pub fn resolve<'a>(schema: &'a Value, defs: &'a Definitions) -> (Option<&'a str>, &'a Value) {
    let mut current = schema;
    let mut name = None;
    for _ in 0..16 {
        match reference(current).and_then(|r| defs.get_key_value(r)) {
            Some((next_name, next)) => {
                name = Some(next_name.as_str());
                current = next;
            }
            None => break,
        }
    }
    (name, current)
}
