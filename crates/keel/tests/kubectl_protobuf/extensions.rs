//! Protobuf answers for the kinds outside k8s.io/api and for aggregated discovery, as
//! kube-apiserver gives them to a client asking for protobuf only: a CustomResourceDefinition
//! and an APIService got, listed and watched, each read back (with keel's decoder) as its JSON
//! answer; a CRD created from a protobuf body; `/api` and `/apis` as `APIGroupDiscoveryList`
//! messages with the groups and resources of the JSON documents, the unaggregated documents
//! in protobuf and a form no discovery handler makes refused; a custom resource still
//! refused (406), as upstream refuses it.

use serde_json::{Value, json};

use keel_apiserver::http::protobuf::{decode, encode};
use keel_testkit::kube::{Kube, ok, write};

use super::curl::{Answer, Curl};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// The CRD created from JSON: a schema with each of the types apiextensions writes by hand.
fn crd(plural: &str, group: &str) -> Value {
    let schema = json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "size": {"type": "integer", "default": 3, "maximum": 10, "enum": [1, 3, 10]},
            "tags": {"type": "array", "items": {"type": "string"},
                     "x-kubernetes-list-type": "set"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        }},
    }});
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": plural, "singular": plural.trim_end_matches('s'),
                      "kind": "Gadget", "listKind": "GadgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": schema}}]}})
}

/// The protobuf answer to `path`, checked for its media type and magic, decoded.
fn protobuf_get(curl: &Curl, path: &str, api_version: &str, kind: &str) -> Value {
    let answer = curl.get(path, PROTOBUF);
    assert_eq!(answer.code, 200, "{path}: {}", answer.text);
    assert_eq!(answer.content_type, PROTOBUF, "{path}");
    assert!(answer.bytes.starts_with(b"k8s\0"), "{path}");
    decode(&answer.bytes, api_version, kind).unwrap_or_else(|e| panic!("{path}: {e:?}"))
}

/// The objects of each frame of a protobuf watch stream (the frame's WatchEvent holds the
/// object's `k8s\0` body last, so it runs to the frame's end).
fn watched(answer: &Answer, api_version: &str, kind: &str) -> Vec<Value> {
    assert_eq!(answer.content_type, format!("{PROTOBUF};stream=watch"));
    let mut bytes = answer.bytes.as_slice();
    let mut objects = Vec::new();
    while bytes.len() >= 4 {
        let length = u32::from_be_bytes(bytes[..4].try_into().expect("4 bytes")) as usize;
        let frame = &bytes[4..4 + length];
        let at = frame
            .windows(4)
            .position(|w| w == b"k8s\0")
            .expect("an enveloped object");
        objects.push(decode(&frame[at..], api_version, kind).expect("the event's object"));
        bytes = &bytes[4 + length..];
    }
    objects
}

/// Get, list and watch of one object of a kind in protobuf, each read as its JSON answer.
fn get_list_watch(curl: &Curl, collection: &str, name: &str, api_version: &str, kind: &str) {
    let object = format!("{collection}/{name}");
    let decoded = protobuf_get(curl, &object, api_version, kind);
    assert_eq!(decoded, curl.get(&object, "application/json").json());

    let list_kind = format!("{kind}List");
    let decoded = protobuf_get(curl, collection, api_version, &list_kind);
    let json = curl.get(collection, "application/json").json();
    assert_eq!(decoded["kind"], list_kind);
    assert_eq!(decoded["metadata"], json["metadata"]);
    assert_eq!(decoded["items"], json["items"]);

    let watch = curl.get(
        &format!("{collection}?watch=1&timeoutSeconds=1&fieldSelector=metadata.name={name}"),
        &format!("{PROTOBUF};stream=watch"),
    );
    let objects = watched(&watch, api_version, kind);
    assert_eq!(
        objects,
        vec![curl.get(&object, "application/json").json()],
        "one ADDED event"
    );
}

/// CRDs and APIServices in protobuf, a CRD created from a protobuf body, and a custom
/// resource's 406.
pub fn crds_and_apiservices(kube: &Kube, suffix: &str) {
    let curl = Curl::new(kube);
    let group = format!("proto-{suffix}.example.com");
    let path = write(kube, "crd.json", &crd("gadgets", &group).to_string());
    ok(kube, None, &["apply", "-f", &path]);
    let name = format!("gadgets.{group}");
    ok(
        kube,
        None,
        &[
            "wait",
            "--for=condition=Established",
            &format!("crd/{name}"),
        ],
    );
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let v1 = "apiextensions.k8s.io/v1";
    get_list_watch(&curl, crds, &name, v1, "CustomResourceDefinition");
    let decoded = protobuf_get(
        &curl,
        &format!("{crds}/{name}"),
        v1,
        "CustomResourceDefinition",
    );
    let props = &decoded["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        ["properties"];
    assert_eq!(props["size"]["maximum"], 10, "{props}");
    assert_eq!(props["size"]["enum"], json!([1, 3, 10]));
    assert_eq!(props["tags"]["x-kubernetes-list-type"], "set");
    assert_eq!(
        props["labels"]["additionalProperties"],
        json!({"type": "string"})
    );
    assert_eq!(props["free"]["x-kubernetes-preserve-unknown-fields"], true);

    // A CRD sent as a protobuf body, as a typed client would send it.
    let other = crd("sprockets", &group);
    let body = encode(&other).expect("a CRD has a protobuf form");
    let created = curl.send_bytes("POST", crds, PROTOBUF, &body);
    assert_eq!(created.code, 201, "{}", created.text);
    let read = curl
        .get(&format!("{crds}/sprockets.{group}"), "application/json")
        .json();
    assert_eq!(
        read["spec"]["versions"][0]["schema"],
        other["spec"]["versions"][0]["schema"]
    );
    assert_eq!(read["spec"]["names"]["kind"], "Gadget");

    // A custom resource has no protobuf form: 406, in kube-apiserver's words.
    let resources = format!("/apis/{group}/v1/namespaces/default/gadgets");
    let refused = curl.get(&resources, PROTOBUF);
    assert_eq!(refused.code, 406, "{}", refused.text);
    let status = refused.json();
    assert_eq!(status["reason"], "NotAcceptable");
    assert_eq!(
        status["message"],
        "only the following media types are accepted: application/json, application/yaml"
    );

    let service = format!("v1.{group}");
    let apiservice = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": service},
        "spec": {"group": group, "version": "v1", "groupPriorityMinimum": 1000,
                 "versionPriority": 15, "insecureSkipTLSVerify": true,
                 "service": {"namespace": "default", "name": "nothing", "port": 8443}}});
    let path = write(kube, "apiservice.json", &apiservice.to_string());
    ok(kube, None, &["apply", "-f", &path]);
    let apiservices = "/apis/apiregistration.k8s.io/v1/apiservices";
    let v1 = "apiregistration.k8s.io/v1";
    get_list_watch(&curl, apiservices, &service, v1, "APIService");
    let decoded = protobuf_get(&curl, &format!("{apiservices}/{service}"), v1, "APIService");
    assert_eq!(decoded["spec"]["service"]["port"], 8443);
    assert_eq!(decoded["spec"]["groupPriorityMinimum"], 1000);
}

/// `/api` and `/apis` in protobuf: the media type with the group, version and kind, the same
/// groups and resources as the JSON documents, the same ETag; JSON when JSON comes first.
pub fn aggregated_discovery(kube: &Kube) {
    let curl = Curl::new(kube);
    let params = "g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    let (pb, js) = (
        format!("{PROTOBUF};{params}"),
        format!("application/json;{params}"),
    );
    for path in ["/api", "/apis"] {
        let answer = curl.get(path, &format!("{pb},{js},application/json"));
        assert_eq!(answer.code, 200, "{}", answer.text);
        assert_eq!(answer.content_type, pb);
        let decoded = decode(
            &answer.bytes,
            "apidiscovery.k8s.io/v2",
            "APIGroupDiscoveryList",
        )
        .expect("decodes");
        let json = curl.get(path, &js);
        assert_eq!(json.content_type, js);
        let json_body = json.json();
        assert_eq!(decoded["kind"], "APIGroupDiscoveryList");
        let groups = |doc: &Value| -> Vec<(Value, Value)> {
            doc["items"]
                .as_array()
                .expect("items")
                .iter()
                .map(|g| (g["metadata"]["name"].clone(), g["versions"].clone()))
                .collect()
        };
        assert!(!groups(&json_body).is_empty());
        assert_eq!(groups(&decoded), groups(&json_body), "{path}");
        assert_eq!(answer.etag, json.etag);
        let again = curl.get_with(
            path,
            &[
                &format!("Accept: {pb}"),
                &format!("If-None-Match: {}", answer.etag),
            ],
        );
        assert_eq!(again.code, 304);
        let json_first = curl.get(path, &format!("{js},{pb}"));
        assert_eq!(json_first.content_type, js);
    }

    // A plain protobuf range asks for the unaggregated documents, which come in protobuf too;
    // a conversion no discovery handler makes is refused (kube-apiserver's aggregated handler
    // passes it to the unaggregated one, which refuses it).
    let kind = |path: &str| curl.get(path, "application/json").json()["kind"].clone();
    for path in ["/api", "/apis", "/apis/apps", "/apis/apps/v1"] {
        let answer = curl.get(path, &format!("{PROTOBUF},{js}"));
        assert_eq!(answer.code, 200, "{path}: {}", answer.text);
        assert_eq!(answer.content_type, PROTOBUF, "{path}");
        let kind = kind(path);
        let decoded = decode(&answer.bytes, "v1", kind.as_str().expect("a kind"));
        let mut json = curl.get(path, "application/json").json();
        json.as_object_mut()
            .expect("an object")
            .remove("apiVersion");
        let mut decoded = decoded.expect("decodes");
        decoded
            .as_object_mut()
            .expect("an object")
            .remove("apiVersion");
        assert_eq!(decoded, json, "{path}");
    }
    for accept in [
        format!("{PROTOBUF};g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList"),
        format!("{PROTOBUF};as=Table;g=meta.k8s.io;v=v1"),
    ] {
        let refused = curl.get("/apis", &accept);
        assert_eq!(refused.code, 406, "{accept}: {}", refused.text);
        assert_eq!(
            refused.json()["message"],
            "only the following media types are accepted: application/json, \
             application/yaml, application/vnd.kubernetes.protobuf"
        );
    }
}
