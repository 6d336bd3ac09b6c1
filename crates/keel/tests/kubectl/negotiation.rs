//! Answers in the forms metadata-only and table clients ask for, with `curl` (kubectl sends
//! only the Accept headers it needs): PartialObjectMetadata and its list in
//! `meta.k8s.io/v1beta1`, in JSON and YAML; a Table in YAML; the conversion that does not fit
//! the answer refused once it is made, a form not served and a YAML watch refused, a watch's
//! events converted in v1beta1; each 406
//! in kube-apiserver's words, every answer `application/json` or `application/yaml`.

use keel_testkit::kube::Kube;

use super::curl::Curl;

fn accept(conversion: &str, version: &str, encoding: &str) -> String {
    format!("application/{encoding};as={conversion};g=meta.k8s.io;v={version}")
}

/// Aggregated discovery: `/api` and `/apis` as one `APIGroupDiscoveryList` each for a
/// client that asks for it (v2 or v2beta1), with an ETag that makes a repeated request a
/// 304; the unaggregated documents for a client that does not; and kubectl, which asks,
/// needs no other discovery request.
pub fn aggregated_discovery(kube: &Kube) {
    let curl = Curl::new(kube);
    let v2 =
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
    let apis = curl.get("/apis", v2);
    assert_eq!(apis.code, 200, "{}", apis.text);
    assert_eq!(
        apis.content_type,
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    let body = apis.json();
    assert_eq!(body["kind"], "APIGroupDiscoveryList");
    let leases = body["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|g| g["metadata"]["name"] == "coordination.k8s.io")
        .unwrap_or_else(|| panic!("{body}"));
    assert_eq!(leases["versions"][0]["version"], "v1");
    assert_eq!(leases["versions"][0]["resources"][0]["resource"], "leases");
    assert!(!apis.etag.is_empty());
    let again = curl.get_with(
        "/apis",
        &[
            &format!("Accept: {v2}"),
            &format!("If-None-Match: {}", apis.etag),
        ],
    );
    assert_eq!(again.code, 304, "{}", again.text);
    let core = curl.get(
        "/api",
        "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList",
    );
    assert_eq!(core.json()["apiVersion"], "apidiscovery.k8s.io/v2beta1");
    let pods = &core.json()["items"][0]["versions"][0]["resources"];
    assert!(
        pods.as_array()
            .unwrap()
            .iter()
            .any(|r| r["resource"] == "pods"),
        "{pods}"
    );
    let plain = curl.get("/apis", "application/json");
    assert_eq!(plain.json()["kind"], "APIGroupList");

    let out = kube.kubectl(&["api-resources", "-v=6"]);
    let log = String::from_utf8_lossy(&out.stderr);
    let gets: Vec<&str> = log.lines().filter(|l| l.contains(" GET ")).collect();
    assert!(
        !gets.is_empty()
            && gets
                .iter()
                .all(|l| l.contains("/api?") || l.contains("/apis?")),
        "kubectl asked for more than /api and /apis: {gets:#?}"
    );
}

/// Protobuf answers for a built-in kind, as client-go's components ask for them: the object
/// and its list read back (with keel's own request decoder) as their JSON answers, a watch
/// streamed as length-prefixed protobuf frames, and a custom resource's 406 without protobuf
/// (tested with CRDs).
pub fn protobuf_answers(kube: &Kube, ns: &str) {
    use keel_apiserver::http::protobuf::decode;
    let curl = Curl::new(kube);
    let protobuf = "application/vnd.kubernetes.protobuf,application/json";
    let object = format!("/api/v1/namespaces/{ns}/configmaps/c1");
    let answer = curl.get(&object, protobuf);
    assert_eq!(answer.code, 200, "{}", answer.text);
    assert_eq!(answer.content_type, "application/vnd.kubernetes.protobuf");
    assert!(answer.bytes.starts_with(b"k8s\0"));
    let json = curl.get(&object, "application/json").json();
    assert_eq!(
        decode(&answer.bytes, "v1", "ConfigMap").expect("decodes"),
        json
    );

    let list = format!("/api/v1/namespaces/{ns}/configmaps");
    let answer = curl.get(&list, protobuf);
    assert_eq!(answer.content_type, "application/vnd.kubernetes.protobuf");
    let decoded = decode(&answer.bytes, "v1", "ConfigMapList").expect("decodes");
    let json = curl.get(&list, "application/json").json();
    assert_eq!(decoded["kind"], "ConfigMapList");
    assert_eq!(decoded["metadata"], json["metadata"]);
    assert_eq!(decoded["items"], json["items"]);

    let watch = curl.get(
        &format!("{list}?watch=1&timeoutSeconds=1"),
        "application/vnd.kubernetes.protobuf;stream=watch",
    );
    assert_eq!(
        watch.content_type,
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    let bytes = &watch.bytes;
    assert!(bytes.len() > 4, "no events");
    let first = u32::from_be_bytes(bytes[..4].try_into().expect("4 bytes")) as usize;
    assert!(first + 4 <= bytes.len(), "a whole first frame");
    let frame = &bytes[4..4 + first];
    assert!(
        frame.windows(4).any(|w| w == b"k8s\0") && frame.windows(5).any(|w| w == b"ADDED"),
        "{frame:?}"
    );

    // Not chosen by a wildcard, and a 406 that names it when asked for alone in a form
    // it does not take.
    assert_eq!(curl.get(&object, "*/*").content_type, "application/json");
    let table = curl.get(
        &object,
        "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1",
    );
    assert_eq!(table.code, 406, "{}", table.text);
    assert!(
        table.text.contains(
            "only the following media types are accepted: application/json, application/yaml, \
             application/vnd.kubernetes.protobuf"
        ),
        "{}",
        table.text
    );
}

/// The ConfigMap `c1` of `ns` and its list, in every form.
pub fn check(kube: &Kube, ns: &str) {
    let curl = Curl::new(kube);
    let object = format!("/api/v1/namespaces/{ns}/configmaps/c1");
    let list = format!("/api/v1/namespaces/{ns}/configmaps");

    let partial = curl.get(&object, &accept("PartialObjectMetadata", "v1beta1", "json"));
    assert_eq!(
        (partial.code, partial.content_type.as_str()),
        (200, "application/json"),
        "{}",
        partial.text
    );
    let body = partial.json();
    assert_eq!(body["apiVersion"], "meta.k8s.io/v1beta1");
    assert_eq!(body["kind"], "PartialObjectMetadata");
    assert_eq!(body["metadata"]["name"], "c1");
    assert!(body.get("data").is_none(), "{body}");

    let items = curl.get(
        &list,
        &accept("PartialObjectMetadataList", "v1beta1", "yaml"),
    );
    assert_eq!(
        (items.code, items.content_type.as_str()),
        (200, "application/yaml"),
        "{}",
        items.text
    );
    assert!(
        items
            .text
            .starts_with("apiVersion: meta.k8s.io/v1beta1\nitems:\n- apiVersion: meta.k8s.io/v1beta1\n  kind: PartialObjectMetadata\n"),
        "{}",
        items.text
    );
    assert!(items.text.contains("\nkind: PartialObjectMetadataList\n"));
    assert!(
        !items.text.lines().any(|l| l == "  data:"),
        "{}",
        items.text
    );

    let table = curl.get(&list, &accept("Table", "v1", "yaml"));
    assert_eq!(
        (table.code, table.content_type.as_str()),
        (200, "application/yaml"),
        "{}",
        table.text
    );
    assert!(
        table.text.contains("\nkind: Table\n") && table.text.contains("\n  name: Name\n"),
        "{}",
        table.text
    );

    // A watch in v1beta1: each event's object converted in that version.
    let watch = format!("{list}?watch=1&resourceVersion=0&timeoutSeconds=1");
    for (conversion, kind) in [
        ("PartialObjectMetadata", "PartialObjectMetadata"),
        ("Table", "Table"),
    ] {
        let events = curl.get(&watch, &accept(conversion, "v1beta1", "json"));
        assert_eq!(events.code, 200, "{}", events.text);
        let first = events.text.lines().next().unwrap_or_default();
        let event: serde_json::Value =
            serde_json::from_str(first).unwrap_or_else(|e| panic!("{e}: {}", events.text));
        assert_eq!(
            (
                event["type"].as_str(),
                event["object"]["apiVersion"].as_str(),
                event["object"]["kind"].as_str()
            ),
            (Some("ADDED"), Some("meta.k8s.io/v1beta1"), Some(kind)),
            "{first}"
        );
    }

    let refusals = [
        (
            curl.get(&list, &accept("PartialObjectMetadata", "v1", "json")),
            "you requested PartialObjectMetadata, but the requested object is a list (*core.ConfigMapList)",
        ),
        (
            curl.get(
                &object,
                &accept("PartialObjectMetadataList", "v1beta1", "json"),
            ),
            "you requested PartialObjectMetadataList, but the requested object is not a list (*core.ConfigMap)",
        ),
        (
            curl.get(&object, "text/html"),
            "only the following media types are accepted: application/json, application/yaml, \
             application/vnd.kubernetes.protobuf",
        ),
        (
            curl.get(
                &format!("{list}?watch=1&timeoutSeconds=1"),
                "application/yaml",
            ),
            "only the following media types are accepted: application/json;stream=watch, \
             application/vnd.kubernetes.protobuf;stream=watch",
        ),
    ];
    for (answer, message) in refusals {
        assert_eq!(answer.code, 406, "{}", answer.text);
        if answer.content_type == "application/yaml" {
            // A watch refused in YAML: kube-apiserver writes its error in the form the
            // client accepts for a plain answer (`ErrorNegotiated`), which YAML is.
            assert!(
                answer.text.contains("reason: NotAcceptable") && answer.text.contains(message),
                "{}",
                answer.text
            );
            continue;
        }
        let status = answer.json();
        assert_eq!(
            (status["reason"].as_str(), status["message"].as_str()),
            (Some("NotAcceptable"), Some(message))
        );
    }
}
