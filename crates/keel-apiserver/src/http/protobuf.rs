//! Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`, what kubectl's
//! typed clients send), read into the JSON value the same object has in JSON, as
//! kube-apiserver's protobuf serializer reads them: the magic `k8s\0`, a `runtime.Unknown`
//! envelope naming the object's apiVersion and kind, and in it the object's message.
//!
//! The messages are described by the schema in `proto/` (compiled by `build.rs`), written by
//! `scripts/k8s-protobuf-schema.py` from the Go API types' struct tags, with field names as
//! in JSON. What Go's JSON encoding does that protobuf does not carry is marked on the
//! fields (`proto/keel/json.proto`): a zero scalar of an `omitempty` non-pointer field is
//! left out (gogo-protobuf writes every non-pointer field), and an embedded `json:",inline"`
//! struct's fields are its parent's. The types apimachinery encodes by hand (Time,
//! MicroTime, Quantity, IntOrString, FieldsV1, and a CRD schema's JSON and
//! JSONSchemaPropsOr* of [`schema_props`]) take their JSON forms.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::LazyLock;

use base64::Engine;
use prost_reflect::{DescriptorPool, DynamicMessage, MapKey, MessageDescriptor, ReflectMessage};
use serde_json::{Map, Value};

use crate::apimachinery::time::Time;
use crate::storage::Status;

/// What every Kubernetes protobuf body starts with.
const MAGIC: &[u8] = b"k8s\0";

/// The compiled schema, and the fields marked with each `keel.json` option.
struct Schema {
    pool: DescriptorPool,
    keep_zero: HashSet<String>,
    inline: HashSet<String>,
}

static SCHEMA: LazyLock<Schema> = LazyLock::new(|| {
    let bytes = include_bytes!(concat!(env!("OUT_DIR"), "/k8s.fds"));
    let pool = DescriptorPool::decode(bytes.as_slice()).expect("the built-in schema decodes");
    let marked = |option: &str| {
        let extension = pool
            .get_extension_by_name(option)
            .expect("the schema declares its options");
        pool.all_messages()
            .flat_map(|m| m.fields().collect::<Vec<_>>())
            .filter(|f| f.options().get_extension(&extension).as_bool() == Some(true))
            .map(|f| f.full_name().to_string())
            .collect()
    };
    Schema {
        keep_zero: marked("keel.keep_zero"),
        inline: marked("keel.inline"),
        pool,
    }
});

/// Decodes a protobuf body into the JSON form of its object. `api_version` and `kind` are
/// what the request expects: they fill in an envelope that leaves them out, and name the
/// type in errors. An object of a kind outside the schema comes back as its apiVersion and
/// kind alone, for the caller's type check to refuse as it refuses such a JSON body.
pub fn decode(body: &[u8], api_version: &str, kind: &str) -> Result<Value, Status> {
    let unrecognized = |error: &str| {
        bad_request(format!(
            "the object provided is unrecognized (must be of type {kind}): {error} ({})",
            summary(body)
        ))
    };
    let data = match body.strip_prefix(MAGIC) {
        _ if body.is_empty() => return Err(unrecognized("empty data")),
        None => {
            return Err(unrecognized(
                "provided data does not appear to be a protobuf message, expected prefix \
                 [107 56 115 0]",
            ));
        }
        Some([]) => return Err(unrecognized("empty body")),
        Some(data) => data,
    };
    let envelope =
        message("k8s.io.apimachinery.pkg.runtime.Unknown").expect("the schema has runtime.Unknown");
    let unknown =
        DynamicMessage::decode(envelope, data).map_err(|e| unrecognized(&e.to_string()))?;
    let type_meta = get(&unknown, "typeMeta");
    let type_meta = type_meta.as_message().expect("typeMeta is a message");
    let (mut actual_version, mut actual_kind) =
        (string(type_meta, "apiVersion"), string(type_meta, "kind"));
    if actual_kind.is_empty() {
        actual_kind = kind.to_string();
    }
    if actual_version.is_empty() {
        actual_version = api_version.to_string();
    }
    let mut object = Map::new();
    object.insert("apiVersion".into(), Value::String(actual_version.clone()));
    object.insert("kind".into(), Value::String(actual_kind.clone()));
    let Some(descriptor) = object_message(&actual_version, &actual_kind) else {
        return Ok(Value::Object(object));
    };
    let raw = get(&unknown, "raw");
    let raw = raw.as_bytes().map(|b| b.as_ref()).unwrap_or_default();
    let cannot = |error: String| {
        let version = actual_version.rsplit('/').next().unwrap_or_default();
        bad_request(format!(
            "{actual_kind} in version {version:?} cannot be handled as a {kind}: {error}"
        ))
    };
    let message = DynamicMessage::decode(descriptor, raw).map_err(|e| cannot(e.to_string()))?;
    fields(&message, &mut object).map_err(cannot)?;
    Ok(Value::Object(object))
}

/// A field of a message of the schema.
fn get<'a>(message: &'a DynamicMessage, name: &str) -> Cow<'a, prost_reflect::Value> {
    message
        .get_field_by_name(name)
        .expect("the schema has the field")
}

fn string(message: &DynamicMessage, name: &str) -> String {
    get(message, name).as_str().unwrap_or_default().to_string()
}

fn int(message: &DynamicMessage, name: &str) -> i64 {
    let value = get(message, name);
    value
        .as_i64()
        .or(value.as_i32().map(i64::from))
        .unwrap_or_default()
}

fn bad_request(message: String) -> Status {
    Status::failure(400, "BadRequest", message)
}

/// The start of a body for an error message, as apimachinery's `summarizeData` gives it:
/// the text of a JSON object, else hex; 30 bytes and ` ...` when there are more.
pub(super) fn summary(body: &[u8]) -> String {
    let head = &body[..body.len().min(30)];
    let more = if body.len() > head.len() { " ..." } else { "" };
    match body.first() {
        None => "<empty>".to_string(),
        Some(b'{') => format!("{}{more}", String::from_utf8_lossy(head)),
        Some(_) => {
            let hex: String = head.iter().map(|b| format!("{b:02x}")).collect();
            format!("{hex}{more}")
        }
    }
}

fn message(name: &str) -> Option<MessageDescriptor> {
    SCHEMA.pool.get_message_by_name(name)
}

/// The kinds every group version shares, whose messages are meta's.
const META_KINDS: [&str; 7] = [
    "DeleteOptions",
    "Status",
    "WatchEvent",
    "APIResourceList",
    "APIGroupList",
    "APIGroup",
    "APIVersions",
];

/// The groups whose types are outside k8s.io/api, and the proto packages upstream gives them
/// (the version is appended).
const OUTSIDE_API: [(&str, &str); 2] = [
    (
        "apiextensions.k8s.io",
        "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions",
    ),
    (
        "apiregistration.k8s.io",
        "k8s.io.kube_aggregator.pkg.apis.apiregistration",
    ),
];

/// The message of a kind: `v1` is package `k8s.io.api.core.v1`, `<group>/<version>` package
/// `k8s.io.api.<the group's first label>.<version>` (`apps`, `rbac` for
/// `rbac.authorization.k8s.io`), or upstream's own for CustomResourceDefinitions and
/// APIServices ([`OUTSIDE_API`]); DeleteOptions, Status, WatchEvent and the discovery
/// documents are meta's in every version.
fn object_message(api_version: &str, kind: &str) -> Option<MessageDescriptor> {
    if META_KINDS.contains(&kind) {
        return message(&format!("k8s.io.apimachinery.pkg.apis.meta.v1.{kind}"));
    }
    let package = match api_version.split_once('/') {
        None => format!("k8s.io.api.core.{api_version}"),
        Some((group, version)) => match OUTSIDE_API.iter().find(|(g, _)| *g == group) {
            Some((_, package)) => format!("{package}.{version}"),
            None => format!("k8s.io.api.{}.{version}", group.split('.').next()?),
        },
    };
    message(&format!("{package}.{kind}"))
}

/// Writes a message's fields into `out` under their JSON names (the field's name, or the
/// `json_name` given where the JSON name is no identifier: `$ref`, `x-kubernetes-...`).
fn fields(message: &DynamicMessage, out: &mut Map<String, Value>) -> Result<(), String> {
    for field in message.descriptor().fields() {
        let keep_zero = SCHEMA.keep_zero.contains(field.full_name());
        if !message.has_field(&field) {
            // A list or map Go writes as null when it is nil.
            if keep_zero && (field.is_list() || field.is_map()) {
                out.insert(field.json_name().to_string(), Value::Null);
            }
            continue;
        }
        let value = message.get_field(&field);
        if SCHEMA.inline.contains(field.full_name()) {
            if let Some(embedded) = value.as_message() {
                fields(embedded, out)?;
            }
            continue;
        }
        if !keep_zero && is_zero(&value) {
            continue;
        }
        out.insert(field.json_name().to_string(), json(&value)?);
    }
    Ok(())
}

/// A scalar at its zero value, which `omitempty` leaves out.
fn is_zero(value: &prost_reflect::Value) -> bool {
    use prost_reflect::Value as V;
    match value {
        V::Bool(b) => !b,
        V::I32(n) | V::EnumNumber(n) => *n == 0,
        V::I64(n) => *n == 0,
        V::U32(n) => *n == 0,
        V::U64(n) => *n == 0,
        V::F32(n) => *n == 0.0,
        V::F64(n) => *n == 0.0,
        V::String(s) => s.is_empty(),
        V::Bytes(b) => b.is_empty(),
        V::Message(_) | V::List(_) | V::Map(_) => false,
    }
}

fn json(value: &prost_reflect::Value) -> Result<Value, String> {
    use prost_reflect::Value as V;
    Ok(match value {
        V::Bool(b) => Value::Bool(*b),
        V::I32(n) | V::EnumNumber(n) => Value::from(*n),
        V::I64(n) => Value::from(*n),
        V::U32(n) => Value::from(*n),
        V::U64(n) => Value::from(*n),
        V::F32(n) => Value::from(*n),
        V::F64(n) => whole(*n),
        V::String(s) => Value::String(s.clone()),
        V::Bytes(b) => Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
        V::List(items) => Value::Array(items.iter().map(json).collect::<Result<_, _>>()?),
        V::Map(entries) => {
            let mut out = Map::new();
            for (key, value) in entries {
                let key = match key {
                    MapKey::String(s) => s.clone(),
                    MapKey::Bool(b) => b.to_string(),
                    MapKey::I32(n) => n.to_string(),
                    MapKey::I64(n) => n.to_string(),
                    MapKey::U32(n) => n.to_string(),
                    MapKey::U64(n) => n.to_string(),
                };
                out.insert(key, json(value)?);
            }
            Value::Object(out)
        }
        V::Message(message) => special(message).unwrap_or_else(|| {
            let mut out = Map::new();
            fields(message, &mut out).map(|()| Value::Object(out))
        })?,
    })
}

/// A double as Go's encoding/json writes it: a whole number without a fraction (`10`, not
/// `10.0`), where it is exactly an integer.
fn whole(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        Value::from(n as i64)
    } else {
        Value::from(n)
    }
}

/// The JSON form of a type apimachinery encodes by hand (None: an ordinary message).
fn special(message: &DynamicMessage) -> Option<Result<Value, String>> {
    let name = message.descriptor().full_name().to_string();
    let value = match name.as_str() {
        // Zero times are written as an empty message, and are null in JSON; protobuf
        // readers keep whole seconds of a Time, microseconds of a MicroTime.
        "k8s.io.apimachinery.pkg.apis.meta.v1.Time" => match message.has_field_by_name("seconds") {
            false => Value::Null,
            true => Value::String(Time(int(message, "seconds")).rfc3339()),
        },
        "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime" => {
            match message.has_field_by_name("seconds") {
                false => Value::Null,
                true => {
                    let seconds = Time(int(message, "seconds")).rfc3339();
                    let micros = int(message, "nanos") / 1000;
                    let whole = seconds.trim_end_matches('Z');
                    Value::String(format!("{whole}.{micros:06}Z"))
                }
            }
        }
        "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1" => {
            let raw = get(message, "Raw");
            let raw = raw.as_bytes().map(|b| b.as_ref()).unwrap_or_default();
            return Some(match raw {
                [] => Ok(Value::Null),
                raw => serde_json::from_slice(raw).map_err(|e| format!("FieldsV1: {e}")),
            });
        }
        "k8s.io.apimachinery.pkg.api.resource.Quantity" => Value::String(string(message, "string")),
        "k8s.io.apimachinery.pkg.util.intstr.IntOrString" => match int(message, "type") {
            1 => Value::String(string(message, "strVal")),
            _ => Value::from(int(message, "intVal")),
        },
        _ => return schema_props::decode(message),
    };
    Some(Ok(value))
}

mod encode;
mod schema_props;

pub use encode::{encode, has_message, watch_frame};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod wire_tests;
