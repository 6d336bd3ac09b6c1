//! Tests of protobuf request bodies: kubectl's bodies, Go's JSON rules and the envelope.
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
fn kinds_of_named_groups_find_their_messages() {
    for (api_version, kind) in [
        ("apps/v1", "Deployment"),
        ("batch/v1", "CronJob"),
        ("rbac.authorization.k8s.io/v1", "ClusterRole"),
        ("autoscaling/v2", "HorizontalPodAutoscaler"),
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview"),
        ("v1", "PersistentVolumeClaim"),
    ] {
        assert!(
            object_message(api_version, kind).is_some(),
            "{api_version} {kind}"
        );
    }
    assert!(object_message("example.com/v1", "Widget").is_none());
    let strategy = m(
        "k8s.io.api.apps.v1.DeploymentStrategy",
        vec![
            ("type", s("RollingUpdate")),
            (
                "rollingUpdate",
                m(
                    "k8s.io.api.apps.v1.RollingUpdateDeployment",
                    vec![(
                        "maxSurge",
                        m(
                            "k8s.io.apimachinery.pkg.util.intstr.IntOrString",
                            vec![("type", V::I64(1)), ("strVal", s("25%"))],
                        ),
                    )],
                ),
            ),
        ],
    );
    let deployment = msg(
        "k8s.io.api.apps.v1.Deployment",
        vec![
            ("metadata", object_meta("web", None)),
            (
                "spec",
                m(
                    "k8s.io.api.apps.v1.DeploymentSpec",
                    vec![("replicas", V::I32(2)), ("strategy", strategy)],
                ),
            ),
        ],
    );
    let json = decode(
        &body("apps/v1", "Deployment", &deployment),
        "apps/v1",
        "Deployment",
    )
    .unwrap();
    assert_eq!(json["spec"]["replicas"], 2);
    assert_eq!(json["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
    assert_eq!(json["metadata"]["name"], "web");
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
        decode(&body("example.com/v1", "Widget", &cm), "v1", "ConfigMap").unwrap(),
        json!({"apiVersion": "example.com/v1", "kind": "Widget"})
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
