//! Tests of CustomResourceDefinitions, APIServices and aggregated discovery in protobuf
//! against bytes written and read here by hand, field by field, with the field numbers of
//! upstream's generated.proto (k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1,
//! k8s.io/kube-aggregator/pkg/apis/apiregistration/v1, k8s.io/api/apidiscovery/v2), so that
//! neither side of a check comes from keel's own schema or encoder.
use serde_json::{Value, json};

use super::{decode, encode};

/// A length-delimited field (wire type 2).
fn bytes(number: u64, data: &[u8]) -> Vec<u8> {
    let mut out = varint_raw(number << 3 | 2);
    out.extend(varint_raw(data.len() as u64));
    out.extend_from_slice(data);
    out
}

fn text(number: u64, s: &str) -> Vec<u8> {
    bytes(number, s.as_bytes())
}

/// A message field made of the given fields.
fn nested(number: u64, fields: &[Vec<u8>]) -> Vec<u8> {
    bytes(number, &fields.concat())
}

/// A varint field (wire type 0).
fn varint(number: u64, value: u64) -> Vec<u8> {
    [varint_raw(number << 3), varint_raw(value)].concat()
}

/// A double field (wire type 1).
fn double(number: u64, value: f64) -> Vec<u8> {
    [varint_raw(number << 3 | 1), value.to_le_bytes().to_vec()].concat()
}

fn varint_raw(mut value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

/// A map entry (key 1, value 2) of a `map<string, ...>` field.
fn entry(number: u64, key: &str, value: &[Vec<u8>]) -> Vec<u8> {
    nested(number, &[text(1, key), nested(2, value)])
}

/// The body client-go sends: `k8s\0`, then runtime.Unknown {typeMeta = 1 {apiVersion = 1,
/// kind = 2}, raw = 2}.
fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let type_meta = nested(1, &[text(1, api_version), text(2, kind)]);
    [b"k8s\0".to_vec(), type_meta, bytes(2, raw)].concat()
}

/// One field value read off the wire.
#[derive(Debug, Clone, PartialEq)]
enum Wire {
    Varint(u64),
    Fixed64(u64),
    Bytes(Vec<u8>),
}

/// A message's fields in order, read with the wire format alone.
fn read(mut data: &[u8]) -> Vec<(u64, Wire)> {
    fn raw(data: &mut &[u8]) -> u64 {
        let (mut value, mut shift) = (0u64, 0);
        loop {
            let byte = data[0];
            *data = &data[1..];
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return value;
            }
            shift += 7;
        }
    }
    let mut out = Vec::new();
    while !data.is_empty() {
        let key = raw(&mut data);
        let value = match key & 7 {
            0 => Wire::Varint(raw(&mut data)),
            1 => {
                let (head, rest) = data.split_at(8);
                data = rest;
                Wire::Fixed64(u64::from_le_bytes(head.try_into().unwrap()))
            }
            2 => {
                let len = raw(&mut data) as usize;
                let (head, rest) = data.split_at(len);
                data = rest;
                Wire::Bytes(head.to_vec())
            }
            other => panic!("wire type {other}"),
        };
        out.push((key >> 3, value));
    }
    out
}

/// Every value of field `number`.
fn all(data: &[u8], number: u64) -> Vec<Wire> {
    read(data)
        .into_iter()
        .filter(|(n, _)| *n == number)
        .map(|(_, v)| v)
        .collect()
}

/// The message at a path of (non-repeated, or first) fields.
fn at(data: &[u8], path: &[u64]) -> Vec<u8> {
    path.iter().fold(data.to_vec(), |data, number| {
        match all(&data, *number).into_iter().next() {
            Some(Wire::Bytes(b)) => b,
            other => panic!("field {number} of {path:?}: {other:?}"),
        }
    })
}

fn string_at(data: &[u8], path: &[u64]) -> String {
    String::from_utf8(at(data, path)).unwrap()
}

/// The value of the `map<string, ...>` field `number` under `key`.
fn map_value(data: &[u8], number: u64, key: &str) -> Vec<u8> {
    all(data, number)
        .into_iter()
        .find_map(|e| match e {
            Wire::Bytes(e) if string_at(&e, &[1]) == key => Some(at(&e, &[2])),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no {key} in field {number}"))
}

/// The object inside a protobuf body: runtime.Unknown's raw (2) after the magic.
fn unwrap(body: &[u8]) -> Vec<u8> {
    let data = body.strip_prefix(b"k8s\0").expect("the magic");
    assert_eq!(string_at(data, &[1, 1]), "apiextensions.k8s.io/v1");
    assert_eq!(string_at(data, &[1, 2]), "CustomResourceDefinition");
    at(data, &[2])
}

/// JSONSchemaProps fields (upstream numbers): type 5, description 4, $ref 3, default 8,
/// maximum 9, exclusiveMaximum 10, enum 20, items 24, properties 29,
/// additionalProperties 30, dependencies 32, x-kubernetes-preserve-unknown-fields 38,
/// x-kubernetes-list-type 42; JSON raw 1; OrArray schema 1; OrBool allows 1, schema 2;
/// OrStringArray property 2.
fn crd_schema() -> Vec<u8> {
    [
        text(5, "object"),
        entry(
            29,
            "spec",
            &[
                text(5, "object"),
                // What gogo writes for non-pointer fields left empty.
                text(4, ""),
                varint(10, 0),
                nested(30, &[varint(1, 1), nested(2, &[text(5, "string")])]),
                varint(38, 1),
            ],
        ),
        entry(
            29,
            "size",
            &[
                text(5, "integer"),
                nested(8, &[text(1, "3")]),
                double(9, 10.0),
                nested(20, &[text(1, "1")]),
                nested(20, &[text(1, "3")]),
                nested(20, &[text(1, "{\"big\":10}")]),
            ],
        ),
        entry(
            29,
            "tags",
            &[
                text(5, "array"),
                nested(24, &[nested(1, &[text(5, "string")])]),
                text(42, "set"),
            ],
        ),
        entry(
            29,
            "open",
            &[text(5, "object"), nested(30, &[varint(1, 0)])],
        ),
        entry(29, "ref", &[text(3, "#/definitions/x")]),
        entry(
            29,
            "deps",
            &[
                text(5, "object"),
                entry(32, "a", &[text(2, "b"), text(2, "c")]),
            ],
        ),
        entry(
            29,
            "tuple",
            &[nested(
                24,
                &[
                    nested(2, &[text(5, "string")]),
                    nested(2, &[text(5, "integer")]),
                ],
            )],
        ),
    ]
    .concat()
}

/// A CRD: metadata 1 {name 1, creationTimestamp 8 (zero: empty)}, spec 2 {group 1,
/// names 3 {plural 1, singular 2, kind 4, listKind 5}, scope 4, versions 7 {name 1,
/// served 2, storage 3, schema 4 {openAPIV3Schema 1}}}.
fn crd_body() -> Vec<u8> {
    let object = [
        nested(1, &[text(1, "widgets.example.com"), nested(8, &[])]),
        nested(
            2,
            &[
                text(1, "example.com"),
                nested(
                    3,
                    &[
                        text(1, "widgets"),
                        text(2, "widget"),
                        text(4, "Widget"),
                        text(5, "WidgetList"),
                    ],
                ),
                text(4, "Namespaced"),
                nested(
                    7,
                    &[
                        text(1, "v1"),
                        varint(2, 1),
                        varint(3, 1),
                        nested(4, &[nested(1, &[crd_schema()])]),
                    ],
                ),
                varint(10, 0),
            ],
        ),
    ]
    .concat();
    envelope(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        &object,
    )
}

/// The CRD's JSON, as apiextensions' marshal.go writes its hand-encoded types.
fn crd_json() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com", "creationTimestamp": null},
        "spec": {
            "group": "example.com",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                      "listKind": "WidgetList"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {
                "openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "additionalProperties": {"type": "string"},
                             "x-kubernetes-preserve-unknown-fields": true},
                    "size": {"type": "integer", "default": 3, "maximum": 10,
                             "enum": [1, 3, {"big": 10}]},
                    "tags": {"type": "array", "items": {"type": "string"},
                             "x-kubernetes-list-type": "set"},
                    "open": {"type": "object", "additionalProperties": false},
                    "ref": {"$ref": "#/definitions/x"},
                    "deps": {"type": "object", "dependencies": {"a": ["b", "c"]}},
                    "tuple": {"items": [{"type": "string"}, {"type": "integer"}]},
                }}}}],
        },
    })
}

#[test]
fn a_crd_body_reads_as_its_json() {
    let decoded = decode(
        &crd_body(),
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
    )
    .expect("decodes");
    assert_eq!(decoded, crd_json());
}

#[test]
fn a_crd_answer_carries_upstreams_fields() {
    let body = encode(&crd_json()).expect("a CRD has a protobuf form");
    let crd = unwrap(&body);
    assert_eq!(string_at(&crd, &[1, 1]), "widgets.example.com");
    assert_eq!(string_at(&crd, &[2, 3, 4]), "Widget");
    assert_eq!(all(&at(&crd, &[2, 7]), 2), vec![Wire::Varint(1)]);
    let schema = at(&crd, &[2, 7, 4, 1]);
    let spec = map_value(&schema, 29, "spec");
    assert_eq!(all(&spec, 38), vec![Wire::Varint(1)]);
    assert_eq!(all(&at(&spec, &[30]), 1), vec![Wire::Varint(1)]);
    assert_eq!(string_at(&spec, &[30, 2, 5]), "string");
    let size = map_value(&schema, 29, "size");
    assert_eq!(string_at(&size, &[8, 1]), "3");
    assert_eq!(all(&size, 9), vec![Wire::Fixed64(10f64.to_bits())]);
    let enums: Vec<String> = all(&size, 20)
        .into_iter()
        .map(|e| match e {
            Wire::Bytes(e) => string_at(&e, &[1]),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(enums, ["1", "3", "{\"big\":10}"]);
    let tags = map_value(&schema, 29, "tags");
    assert_eq!(string_at(&tags, &[24, 1, 5]), "string");
    assert_eq!(string_at(&tags, &[42]), "set");
    let open = map_value(&schema, 29, "open");
    assert_eq!(read(&at(&open, &[30])), vec![(1, Wire::Varint(0))]);
    assert_eq!(
        string_at(&map_value(&schema, 29, "ref"), &[3]),
        "#/definitions/x"
    );
    let deps = map_value(&map_value(&schema, 29, "deps"), 32, "a");
    assert_eq!(
        read(&deps),
        vec![
            (2, Wire::Bytes(b"b".to_vec())),
            (2, Wire::Bytes(b"c".to_vec()))
        ]
    );
    let tuple = at(&map_value(&schema, 29, "tuple"), &[24]);
    assert_eq!(all(&tuple, 1), vec![]);
    assert_eq!(all(&tuple, 2).len(), 2);
    // And read back whole (a zero time is left out, which reads as the same zero time).
    let decoded = decode(&body, "apiextensions.k8s.io/v1", "CustomResourceDefinition");
    let mut expected = crd_json();
    expected["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("creationTimestamp");
    assert_eq!(decoded.expect("decodes"), expected);
}

#[test]
fn an_apiservice_reads_and_writes_upstreams_fields() {
    // APIService: metadata 1, spec 2 {service 1 {namespace 1, name 2, port 3}, group 2,
    // version 3, insecureSkipTLSVerify 4, caBundle 5, groupPriorityMinimum 7,
    // versionPriority 8}, status 3 {conditions 1 {type 1, status 2, lastTransitionTime 3
    // {seconds 1}, reason 4, message 5}}.
    let object = [
        nested(1, &[text(1, "v1.example.com")]),
        nested(
            2,
            &[
                nested(1, &[text(1, "ns"), text(2, "svc"), varint(3, 443)]),
                text(2, "example.com"),
                text(3, "v1"),
                varint(4, 0),
                bytes(5, &[1, 2, 3]),
                varint(7, 1000),
                varint(8, 15),
            ],
        ),
        nested(
            3,
            &[nested(
                1,
                &[
                    text(1, "Available"),
                    text(2, "False"),
                    nested(3, &[varint(1, 1_780_000_000)]),
                    text(4, "ServiceNotFound"),
                    text(5, "service/svc in \"ns\" is not present"),
                ],
            )],
        ),
    ]
    .concat();
    let body = envelope("apiregistration.k8s.io/v1", "APIService", &object);
    let expected = json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1.example.com"},
        "spec": {"service": {"namespace": "ns", "name": "svc", "port": 443},
                 "group": "example.com", "version": "v1", "caBundle": "AQID",
                 "groupPriorityMinimum": 1000, "versionPriority": 15},
        "status": {"conditions": [{"type": "Available", "status": "False",
            "lastTransitionTime": "2026-05-28T20:26:40Z", "reason": "ServiceNotFound",
            "message": "service/svc in \"ns\" is not present"}]},
    });
    let decoded = decode(&body, "apiregistration.k8s.io/v1", "APIService").expect("decodes");
    assert_eq!(decoded, expected);
    let answer = encode(&expected).expect("an APIService has a protobuf form");
    let data = answer.strip_prefix(b"k8s\0").expect("the magic");
    assert_eq!(string_at(data, &[1, 2]), "APIService");
    let written = at(data, &[2]);
    assert_eq!(string_at(&written, &[2, 1, 2]), "svc");
    assert_eq!(all(&at(&written, &[2, 1]), 3), vec![Wire::Varint(443)]);
    assert_eq!(at(&written, &[2, 5]), vec![1, 2, 3]);
    assert_eq!(all(&at(&written, &[2]), 7), vec![Wire::Varint(1000)]);
    assert_eq!(
        all(&at(&written, &[3, 1, 3]), 1),
        vec![Wire::Varint(1_780_000_000)]
    );
    let list = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIServiceList",
        "metadata": {"resourceVersion": "5"}, "items": [expected.clone()]});
    let list = encode(&list).expect("the list has a protobuf form");
    let data = list.strip_prefix(b"k8s\0").unwrap();
    // APIServiceList: metadata 1 {resourceVersion 2}, items 2.
    assert_eq!(string_at(data, &[2, 1, 2]), "5");
}

#[test]
fn aggregated_discovery_writes_upstreams_fields() {
    let document = json!({
        "kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": [{"metadata": {"name": "apps", "creationTimestamp": null}, "versions": [{
            "version": "v1", "freshness": "Current",
            "resources": [{"resource": "deployments", "scope": "Namespaced",
                "singularResource": "deployment", "verbs": ["get", "list"],
                "shortNames": ["deploy"], "categories": ["all"],
                "responseKind": {"group": "", "version": "", "kind": "Deployment"},
                "subresources": [{"subresource": "scale", "verbs": ["get"],
                    "responseKind": {"group": "autoscaling", "version": "v1",
                                     "kind": "Scale"}}]}]}]}],
    });
    let body = encode(&document).expect("the discovery document has a protobuf form");
    let data = body.strip_prefix(b"k8s\0").expect("the magic");
    assert_eq!(string_at(data, &[1, 1]), "apidiscovery.k8s.io/v2");
    assert_eq!(string_at(data, &[1, 2]), "APIGroupDiscoveryList");
    // APIGroupDiscoveryList items 2; APIGroupDiscovery metadata 1, versions 2;
    // APIVersionDiscovery version 1, resources 2, freshness 3; APIResourceDiscovery
    // resource 1, responseKind 2 {group 1, version 2, kind 3}, scope 3, singularResource 4,
    // verbs 5, shortNames 6, categories 7, subresources 8 {subresource 1, responseKind 2,
    // verbs 4}.
    let list = at(data, &[2]);
    assert_eq!(string_at(&list, &[2, 1, 1]), "apps");
    let version = at(&list, &[2, 2]);
    assert_eq!(string_at(&version, &[1]), "v1");
    assert_eq!(string_at(&version, &[3]), "Current");
    let resource = at(&version, &[2]);
    assert_eq!(string_at(&resource, &[1]), "deployments");
    assert_eq!(string_at(&resource, &[2, 3]), "Deployment");
    assert_eq!(string_at(&resource, &[3]), "Namespaced");
    assert_eq!(string_at(&resource, &[4]), "deployment");
    assert_eq!(
        all(&resource, 5),
        vec![Wire::Bytes(b"get".to_vec()), Wire::Bytes(b"list".to_vec())]
    );
    assert_eq!(string_at(&resource, &[6]), "deploy");
    assert_eq!(string_at(&resource, &[7]), "all");
    assert_eq!(string_at(&resource, &[8, 1]), "scale");
    assert_eq!(string_at(&resource, &[8, 2, 1]), "autoscaling");
    assert_eq!(string_at(&resource, &[8, 4]), "get");
}

#[test]
fn custom_resources_still_have_no_protobuf_form() {
    assert!(!super::has_message("example.com/v1", "Widget"));
    assert!(super::has_message(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinitionList"
    ));
    assert!(super::has_message(
        "apiregistration.k8s.io/v1",
        "APIServiceList"
    ));
}
