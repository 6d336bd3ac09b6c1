//! Kubernetes protobuf responses (`application/vnd.kubernetes.protobuf`, what client-go's
//! components ask for): an object's JSON value written as its message, the inverse of
//! [`super::decode`], in the `k8s\0` + `runtime.Unknown` envelope kube-apiserver's protobuf
//! serializer writes; and a watch event as the length-prefixed `WatchEvent` frame of its
//! protobuf stream (the event's object enveloped inside it). Fields the message does not
//! have are left out (a built-in kind's objects are pruned to its schema before they are
//! stored); the hand-encoded types take their protobuf forms from their JSON forms.

use std::collections::HashMap;

use base64::Engine;
use prost_reflect::prost::Message;
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor};
use serde_json::{Map, Value};

use super::{MAGIC, SCHEMA, message, object_message};
use crate::apimachinery::time::{MicroTime, Time};

/// Whether objects of `api_version` `kind` have a protobuf form (every built-in kind and its
/// list; no custom resource).
pub fn has_message(api_version: &str, kind: &str) -> bool {
    object_message(api_version, kind).is_some()
}

/// The protobuf body of an object, a list or a Status (its `apiVersion` and `kind` name its
/// message); None if it has no protobuf form.
pub fn encode(value: &Value) -> Option<Vec<u8>> {
    let text = |f: &str| value.get(f).and_then(Value::as_str).unwrap_or("");
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    let descriptor = object_message(api_version, kind)?;
    let raw = object(&descriptor, value.as_object()?).encode_to_vec();
    let envelope = message("k8s.io.apimachinery.pkg.runtime.Unknown")?;
    let type_meta = message("k8s.io.apimachinery.pkg.runtime.TypeMeta")?;
    let mut meta = DynamicMessage::new(type_meta);
    meta.set_field_by_name(
        "apiVersion",
        prost_reflect::Value::String(api_version.into()),
    );
    meta.set_field_by_name("kind", prost_reflect::Value::String(kind.into()));
    let mut unknown = DynamicMessage::new(envelope);
    unknown.set_field_by_name("typeMeta", prost_reflect::Value::Message(meta));
    unknown.set_field_by_name("raw", prost_reflect::Value::Bytes(raw.into()));
    let mut out = MAGIC.to_vec();
    unknown.encode(&mut out).ok()?;
    Some(out)
}

/// One frame of a protobuf watch stream: the 4-byte big-endian length, then a `WatchEvent`
/// of `event_type` whose object is `object`'s protobuf body. None if `object` has no
/// protobuf form.
pub fn watch_frame(event_type: &str, object: &Value) -> Option<Vec<u8>> {
    let raw = encode(object)?;
    let raw_extension = message("k8s.io.apimachinery.pkg.runtime.RawExtension")?;
    let mut extension = DynamicMessage::new(raw_extension);
    extension.set_field_by_name("raw", prost_reflect::Value::Bytes(raw.into()));
    let mut event =
        DynamicMessage::new(message("k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent")?);
    event.set_field_by_name("type", prost_reflect::Value::String(event_type.into()));
    event.set_field_by_name("object", prost_reflect::Value::Message(extension));
    let body = event.encode_to_vec();
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    Some(frame)
}

/// The message `descriptor` of a JSON object.
pub(super) fn object(descriptor: &MessageDescriptor, obj: &Map<String, Value>) -> DynamicMessage {
    let mut out = DynamicMessage::new(descriptor.clone());
    for field in descriptor.fields() {
        if SCHEMA.inline.contains(field.full_name()) {
            if let Kind::Message(embedded) = field.kind() {
                out.set_field(
                    &field,
                    prost_reflect::Value::Message(object(&embedded, obj)),
                );
            }
            continue;
        }
        let Some(value) = obj.get(field.json_name()).filter(|v| !v.is_null()) else {
            continue;
        };
        if let Some(value) = field_value(&field, value) {
            out.set_field(&field, value);
        }
    }
    out
}

/// A field's protobuf value from its JSON value (None: it does not fit, and is left out).
fn field_value(field: &FieldDescriptor, value: &Value) -> Option<prost_reflect::Value> {
    if field.is_map() {
        let Kind::Message(entry) = field.kind() else {
            return None;
        };
        let (key_kind, value_kind) = (
            entry.map_entry_key_field().kind(),
            entry.map_entry_value_field().kind(),
        );
        let mut map = HashMap::new();
        for (k, v) in value.as_object()? {
            let key = match key_kind {
                Kind::String => MapKey::String(k.clone()),
                Kind::Int32 => MapKey::I32(k.parse().ok()?),
                Kind::Int64 => MapKey::I64(k.parse().ok()?),
                Kind::Bool => MapKey::Bool(k.parse().ok()?),
                _ => return None,
            };
            if let Some(v) = scalar_or_message(&value_kind, v) {
                map.insert(key, v);
            }
        }
        return Some(prost_reflect::Value::Map(map));
    }
    if field.is_list() {
        let items = value.as_array()?;
        let kind = field.kind();
        return Some(prost_reflect::Value::List(
            items
                .iter()
                .filter_map(|item| scalar_or_message(&kind, item))
                .collect(),
        ));
    }
    scalar_or_message(&field.kind(), value)
}

pub(super) fn scalar_or_message(kind: &Kind, value: &Value) -> Option<prost_reflect::Value> {
    use prost_reflect::Value as V;
    let int = || value.as_i64().or_else(|| value.as_f64().map(|f| f as i64));
    Some(match kind {
        Kind::String => V::String(value.as_str()?.to_string()),
        Kind::Bool => V::Bool(value.as_bool()?),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => V::I32(i32::try_from(int()?).ok()?),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => V::I64(int()?),
        Kind::Uint32 | Kind::Fixed32 => V::U32(u32::try_from(int()?).ok()?),
        Kind::Uint64 | Kind::Fixed64 => V::U64(u64::try_from(int()?).ok()?),
        Kind::Double => V::F64(value.as_f64()?),
        Kind::Float => V::F32(value.as_f64()? as f32),
        Kind::Bytes => V::Bytes(
            base64::engine::general_purpose::STANDARD
                .decode(value.as_str()?)
                .ok()?
                .into(),
        ),
        Kind::Enum(_) => return None,
        Kind::Message(descriptor) => V::Message(match special(descriptor, value) {
            Some(message) => message?,
            None => object(descriptor, value.as_object()?),
        }),
    })
}

/// The protobuf form of a type apimachinery encodes by hand, from its JSON form (None: an
/// ordinary message; Some(None): the JSON does not fit).
fn special(descriptor: &MessageDescriptor, value: &Value) -> Option<Option<DynamicMessage>> {
    use prost_reflect::Value as V;
    let mut out = DynamicMessage::new(descriptor.clone());
    let mut set = |name: &str, v: V| out.set_field_by_name(name, v);
    match descriptor.full_name() {
        "k8s.io.apimachinery.pkg.apis.meta.v1.Time" => {
            let Some(time) = value.as_str().and_then(Time::parse) else {
                return Some(None);
            };
            set("seconds", V::I64(time.0));
            set("nanos", V::I32(0));
        }
        "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime" => {
            let Some(time) = value.as_str().and_then(MicroTime::parse) else {
                return Some(None);
            };
            set("seconds", V::I64(time.seconds));
            set("nanos", V::I32(time.micros as i32 * 1000));
        }
        "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1" => {
            let raw = serde_json::to_vec(value).expect("a JSON value encodes");
            set("Raw", V::Bytes(raw.into()));
        }
        "k8s.io.apimachinery.pkg.api.resource.Quantity" => {
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return Some(None),
            };
            set("string", V::String(text));
        }
        "k8s.io.apimachinery.pkg.util.intstr.IntOrString" => match value {
            Value::String(s) => {
                set("type", V::I64(1));
                set("strVal", V::String(s.clone()));
            }
            other => {
                let Some(n) = other.as_i64().and_then(|n| i32::try_from(n).ok()) else {
                    return Some(None);
                };
                set("type", V::I64(0));
                set("intVal", V::I32(n));
            }
        },
        "k8s.io.apimachinery.pkg.runtime.RawExtension" => {
            let raw = serde_json::to_vec(value).expect("a JSON value encodes");
            set("raw", V::Bytes(raw.into()));
        }
        _ => return super::schema_props::encode(descriptor, value),
    }
    Some(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Encoded, then read back by the request decoder: the same JSON.
    fn round_trip(value: &Value) -> Value {
        let body = encode(value).expect("a built-in kind encodes");
        let text = |f: &str| value[f].as_str().unwrap().to_string();
        super::super::decode(&body, &text("apiVersion"), &text("kind")).expect("decodes")
    }

    #[test]
    fn objects_lists_and_statuses_read_back_as_their_json() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "uid": "u1",
                "resourceVersion": "7", "creationTimestamp": "2026-12-07T10:00:00Z",
                "labels": {"app": "web"},
                "managedFields": [{"manager": "kubectl", "operation": "Apply",
                    "apiVersion": "v1", "time": "2026-12-07T10:00:00Z", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}}}]},
            "spec": {"containers": [{"name": "c", "image": "nginx",
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "resources": {"limits": {"cpu": "500m"}},
                "livenessProbe": {"httpGet": {"port": "http", "path": "/"}}}],
                "terminationGracePeriodSeconds": 30},
            "status": {"phase": "Pending"}});
        assert_eq!(round_trip(&pod), pod);
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "n1", "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40,
                "renewTime": "2026-12-07T10:00:00.123456Z"}});
        assert_eq!(round_trip(&lease), lease);
        let list = json!({"apiVersion": "v1", "kind": "ConfigMapList",
            "metadata": {"resourceVersion": "9"},
            "items": [{"metadata": {"name": "a"}, "data": {"k": "v"}}]});
        assert_eq!(round_trip(&list), list);
        let status = json!({"apiVersion": "v1", "kind": "Status", "metadata": {},
            "status": "Failure", "message": "configmaps \"x\" not found", "reason": "NotFound",
            "details": {"name": "x", "kind": "configmaps"}, "code": 404});
        assert_eq!(round_trip(&status), status);
        assert!(encode(&json!({"apiVersion": "example.com/v1", "kind": "Widget"})).is_none());
    }

    #[test]
    fn watch_frames_carry_their_length_and_an_enveloped_object() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        let frame = watch_frame("ADDED", &cm).unwrap();
        let length = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(length, frame.len() - 4);
        let event = DynamicMessage::decode(
            message("k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent").unwrap(),
            &frame[4..],
        )
        .unwrap();
        assert_eq!(
            event.get_field_by_name("type").unwrap().as_str(),
            Some("ADDED")
        );
        let object = event.get_field_by_name("object").unwrap();
        let raw = object
            .as_message()
            .unwrap()
            .get_field_by_name("raw")
            .unwrap();
        let raw = raw.as_bytes().unwrap();
        assert_eq!(super::super::decode(raw, "v1", "ConfigMap").unwrap(), cm);
    }
}
