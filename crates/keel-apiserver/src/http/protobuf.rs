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
//! MicroTime, Quantity, IntOrString, FieldsV1) take their JSON forms.

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

/// The message of a kind: `v1` is package `k8s.io.api.core.v1`, `<group>.k8s.io/<version>`
/// package `k8s.io.api.<group>.<version>`; DeleteOptions is meta's in every version.
fn object_message(api_version: &str, kind: &str) -> Option<MessageDescriptor> {
    if kind == "DeleteOptions" {
        return message("k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions");
    }
    let package = match api_version.split_once('/') {
        None => format!("core.{api_version}"),
        Some((group, version)) => format!("{}.{version}", group.strip_suffix(".k8s.io")?),
    };
    message(&format!("k8s.io.api.{package}.{kind}"))
}

/// Writes a message's fields into `out` under their JSON names.
fn fields(message: &DynamicMessage, out: &mut Map<String, Value>) -> Result<(), String> {
    for field in message.descriptor().fields() {
        let keep_zero = SCHEMA.keep_zero.contains(field.full_name());
        if !message.has_field(&field) {
            // A list or map Go writes as null when it is nil.
            if keep_zero && (field.is_list() || field.is_map()) {
                out.insert(field.name().to_string(), Value::Null);
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
        out.insert(field.name().to_string(), json(&value)?);
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
        V::F64(n) => Value::from(*n),
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
        _ => return None,
    };
    Some(Ok(value))
}

#[cfg(test)]
mod tests {
    use prost_reflect::Value as V;
    use prost_reflect::prost::Message as _;
    use serde_json::json;

    use super::*;

    /// A body kubectl sent (`tests/fixtures/protobuf/<name>.pb`) and what
    /// `kubectl create ... --dry-run=client -o json` prints for the same command.
    fn fixture(name: &str) -> (Vec<u8>, Value) {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/protobuf");
        let body = std::fs::read(format!("{dir}/{name}.pb")).expect("fixture body");
        let json = std::fs::read(format!("{dir}/{name}.json")).expect("fixture JSON");
        (
            body,
            serde_json::from_slice(&json).expect("fixture JSON parses"),
        )
    }

    #[test]
    fn kubectl_create_bodies_read_as_their_json() {
        for name in [
            "namespace",
            "configmap",
            "secret",
            "secret-docker-registry",
            "serviceaccount",
            "service-clusterip",
            "service-nodeport",
        ] {
            let (body, expected) = fixture(name);
            let kind = expected["kind"].as_str().unwrap();
            assert_eq!(decode(&body, "v1", kind).unwrap(), expected, "{name}");
        }
    }

    const CORE: &str = "k8s.io.api.core.v1.";
    const META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.";

    fn s(text: &str) -> V {
        V::String(text.to_string())
    }

    /// A message of the schema with these fields set, as gogo-protobuf writes them (zero
    /// values of non-pointer fields included).
    fn msg(name: &str, fields: Vec<(&str, V)>) -> DynamicMessage {
        let mut out = DynamicMessage::new(message(name).expect(name));
        for (field, value) in fields {
            out.try_set_field_by_name(field, value).expect(field);
        }
        out
    }

    fn m(name: &str, fields: Vec<(&str, V)>) -> V {
        V::Message(msg(name, fields))
    }

    /// A body as client-go writes it: the magic, then `object` in a runtime.Unknown.
    fn body(api_version: &str, kind: &str, object: &DynamicMessage) -> Vec<u8> {
        let type_meta = vec![("apiVersion", s(api_version)), ("kind", s(kind))];
        let unknown = msg(
            "k8s.io.apimachinery.pkg.runtime.Unknown",
            vec![
                (
                    "typeMeta",
                    m("k8s.io.apimachinery.pkg.runtime.TypeMeta", type_meta),
                ),
                ("raw", V::Bytes(object.encode_to_vec().into())),
            ],
        );
        [MAGIC, &unknown.encode_to_vec()].concat()
    }

    fn object_meta(name: &str, creation: Option<i64>) -> V {
        let time = match creation {
            Some(seconds) => vec![("seconds", V::I64(seconds)), ("nanos", V::I32(5))],
            None => vec![],
        };
        m(
            &format!("{META}ObjectMeta"),
            vec![
                ("name", s(name)),
                ("namespace", s("")),
                ("generation", V::I64(0)),
                ("creationTimestamp", m(&format!("{META}Time"), time)),
            ],
        )
    }

    #[test]
    fn times_are_rfc3339_and_zero_times_null() {
        let lease = msg(
            "k8s.io.api.coordination.v1.Lease",
            vec![
                ("metadata", object_meta("l", Some(1_796_378_400))),
                (
                    "spec",
                    m(
                        "k8s.io.api.coordination.v1.LeaseSpec",
                        vec![
                            ("holderIdentity", s("")),
                            ("leaseDurationSeconds", V::I32(0)),
                            (
                                "renewTime",
                                m(
                                    &format!("{META}MicroTime"),
                                    vec![
                                        ("seconds", V::I64(1_796_378_400)),
                                        ("nanos", V::I32(123_456_789)),
                                    ],
                                ),
                            ),
                        ],
                    ),
                ),
            ],
        );
        let decoded = decode(
            &body("coordination.k8s.io/v1", "Lease", &lease),
            "coordination.k8s.io/v1",
            "Lease",
        );
        assert_eq!(
            decoded.unwrap(),
            json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": "l", "creationTimestamp": "2026-12-04T10:00:00Z"},
                // Pointers: their zero values are kept.
                "spec": {"holderIdentity": "", "leaseDurationSeconds": 0, "renewTime": "2026-12-04T10:00:00.123456Z"},
            })
        );
        let event = msg(
            "k8s.io.api.events.v1.Event",
            vec![
                ("metadata", object_meta("e", None)),
                ("eventTime", m(&format!("{META}MicroTime"), vec![])),
                (
                    "deprecatedFirstTimestamp",
                    m(&format!("{META}Time"), vec![]),
                ),
                ("deprecatedCount", V::I32(0)),
                ("note", s("n")),
            ],
        );
        let decoded = decode(
            &body("events.k8s.io/v1", "Event", &event),
            "events.k8s.io/v1",
            "Event",
        );
        assert_eq!(
            decoded.unwrap(),
            json!({
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {"name": "e", "creationTimestamp": null},
                "eventTime": null,
                "deprecatedFirstTimestamp": null,
                "note": "n",
            })
        );
    }

    #[test]
    fn go_json_rules_the_fields() {
        let port = m(
            "k8s.io.apimachinery.pkg.util.intstr.IntOrString",
            vec![
                ("type", V::I64(1)),
                ("intVal", V::I32(0)),
                ("strVal", s("http")),
            ],
        );
        let probe = m(
            &format!("{CORE}Probe"),
            vec![(
                "handler",
                m(
                    &format!("{CORE}ProbeHandler"),
                    vec![(
                        "httpGet",
                        m(
                            &format!("{CORE}HTTPGetAction"),
                            vec![("path", s("")), ("port", port)],
                        ),
                    )],
                ),
            )],
        );
        let container = m(
            &format!("{CORE}Container"),
            vec![
                ("name", s("")),
                ("stdin", V::Bool(false)),
                (
                    "ports",
                    V::List(vec![m(
                        &format!("{CORE}ContainerPort"),
                        vec![("containerPort", V::I32(0)), ("hostPort", V::I32(0))],
                    )]),
                ),
                ("readinessProbe", probe),
                (
                    "securityContext",
                    m(
                        &format!("{CORE}SecurityContext"),
                        vec![("privileged", V::Bool(false))],
                    ),
                ),
                (
                    "resources",
                    m(
                        &format!("{CORE}ResourceRequirements"),
                        vec![(
                            "limits",
                            V::Map(
                                [(
                                    MapKey::String("cpu".into()),
                                    m(
                                        "k8s.io.apimachinery.pkg.api.resource.Quantity",
                                        vec![("string", s("500m"))],
                                    ),
                                )]
                                .into(),
                            ),
                        )],
                    ),
                ),
            ],
        );
        let volume = m(
            &format!("{CORE}Volume"),
            vec![
                ("name", s("v")),
                (
                    "volumeSource",
                    m(
                        &format!("{CORE}VolumeSource"),
                        vec![(
                            "emptyDir",
                            m(
                                &format!("{CORE}EmptyDirVolumeSource"),
                                vec![("medium", s(""))],
                            ),
                        )],
                    ),
                ),
            ],
        );
        let pod = |containers: Vec<V>| {
            msg(
                &format!("{CORE}Pod"),
                vec![
                    ("metadata", object_meta("p", None)),
                    (
                        "spec",
                        m(
                            &format!("{CORE}PodSpec"),
                            vec![
                                ("containers", V::List(containers)),
                                ("volumes", V::List(vec![volume.clone()])),
                            ],
                        ),
                    ),
                ],
            )
        };
        let decoded = decode(&body("v1", "Pod", &pod(vec![container])), "v1", "Pod").unwrap();
        assert_eq!(
            decoded["spec"],
            json!({
                "containers": [{
                    // Not omitempty: kept though zero.
                    "name": "",
                    "ports": [{"containerPort": 0}],
                    // Embedded ProbeHandler: its fields are the probe's.
                    "readinessProbe": {"httpGet": {"port": "http"}},
                    "resources": {"limits": {"cpu": "500m"}},
                    "securityContext": {"privileged": false},
                }],
                "volumes": [{"name": "v", "emptyDir": {}}],
            })
        );
        // A nil list that is not omitempty is null in Go's JSON.
        let decoded = decode(&body("v1", "Pod", &pod(vec![])), "v1", "Pod").unwrap();
        assert_eq!(decoded["spec"]["containers"], Value::Null);
    }

    #[test]
    fn managed_fields_hold_their_json() {
        let entry = m(
            &format!("{META}ManagedFieldsEntry"),
            vec![
                ("manager", s("kubectl")),
                ("operation", s("Update")),
                (
                    "time",
                    m(&format!("{META}Time"), vec![("seconds", V::I64(0))]),
                ),
                ("fieldsType", s("FieldsV1")),
                (
                    "fieldsV1",
                    m(
                        &format!("{META}FieldsV1"),
                        vec![("Raw", V::Bytes(br#"{"f:data":{".":{}}}"#.as_slice().into()))],
                    ),
                ),
            ],
        );
        let meta = m(
            &format!("{META}ObjectMeta"),
            vec![("name", s("c")), ("managedFields", V::List(vec![entry]))],
        );
        let cm = msg(
            &format!("{CORE}ConfigMap"),
            vec![("metadata", meta), ("immutable", V::Bool(false))],
        );
        assert_eq!(
            decode(&body("v1", "ConfigMap", &cm), "v1", "ConfigMap").unwrap(),
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "c", "managedFields": [{
                    "manager": "kubectl",
                    "operation": "Update",
                    "time": "1970-01-01T00:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {".": {}}},
                }]},
                "immutable": false,
            })
        );
    }

    #[test]
    fn the_envelope_names_the_kind() {
        let cm = msg(
            &format!("{CORE}ConfigMap"),
            vec![("metadata", object_meta("c", None))],
        );
        // Left out of the envelope: the expected apiVersion and kind.
        let decoded = decode(&body("", "", &cm), "v1", "ConfigMap").unwrap();
        assert_eq!(
            (decoded["apiVersion"].as_str(), decoded["kind"].as_str()),
            (Some("v1"), Some("ConfigMap"))
        );
        // A kind the schema does not have: only its type, for the type check to refuse.
        assert_eq!(
            decode(&body("apps/v1", "Deployment", &cm), "v1", "ConfigMap").unwrap(),
            json!({"apiVersion": "apps/v1", "kind": "Deployment"})
        );
        // Another kind of the schema is read as that kind.
        let decoded = decode(&body("v1", "Secret", &cm), "v1", "ConfigMap").unwrap();
        assert_eq!(decoded["kind"], "Secret");
    }

    #[test]
    fn undecodable_bodies_are_bad_requests() {
        let message = |body: &[u8]| {
            let status = decode(body, "v1", "ConfigMap").unwrap_err();
            assert_eq!((status.code, status.reason), (400, "BadRequest"));
            status.message
        };
        assert_eq!(
            message(b""),
            "the object provided is unrecognized (must be of type ConfigMap): empty data (<empty>)"
        );
        assert_eq!(
            message(b"{\"kind\":\"ConfigMap\"}"),
            "the object provided is unrecognized (must be of type ConfigMap): provided data does \
             not appear to be a protobuf message, expected prefix [107 56 115 0] \
             ({\"kind\":\"ConfigMap\"})"
        );
        assert_eq!(
            message(MAGIC),
            "the object provided is unrecognized (must be of type ConfigMap): empty body \
             (6b387300)"
        );
        assert!(message(b"k8s\0\x0a\x05").starts_with(
            "the object provided is unrecognized (must be of type ConfigMap): failed to decode"
        ));
        let mut truncated = body(
            "v1",
            "ConfigMap",
            &msg(
                &format!("{CORE}ConfigMap"),
                vec![("metadata", object_meta("c", None))],
            ),
        );
        truncated.pop();
        let mut bad = body(
            "v1",
            "ConfigMap",
            &DynamicMessage::new(message_of("ConfigMap")),
        );
        bad.extend_from_slice(b"\x12\x03\x0a\x05\x01");
        assert!(
            message(&bad).starts_with(
                "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: failed to decode"
            ),
            "{}",
            message(&bad)
        );
        assert!(message(&truncated).starts_with("the object provided is unrecognized"));
    }

    fn message_of(kind: &str) -> MessageDescriptor {
        message(&format!("{CORE}{kind}")).unwrap()
    }

    #[test]
    fn drain_delete_options_read_as_their_json() {
        let (body, expected) = fixture("deleteoptions");
        let decoded = decode(&body, "meta.k8s.io/v1", "DeleteOptions").unwrap();
        assert_eq!(decoded, expected);
    }
}
