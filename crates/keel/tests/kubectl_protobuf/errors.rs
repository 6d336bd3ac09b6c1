//! Error Statuses in the form the client negotiated, as kube-apiserver's `ErrorNegotiated`
//! writes them: a client of a built-in kind that accepts protobuf (client-go's components ask
//! for `application/vnd.kubernetes.protobuf, application/json`) reads a 404 as a protobuf
//! `Status`, a YAML client as YAML; a custom resource, which has no protobuf form, answers
//! JSON to the same Accept.

use keel_apiserver::http::protobuf::decode;
use keel_testkit::kube::Kube;

use super::curl::Curl;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// A missing ConfigMap and a missing custom resource of the `gadgets` CRD that
/// [`super::extensions::crds_and_apiservices`] made for `suffix`.
pub fn negotiated_errors(kube: &Kube, suffix: &str) {
    let curl = Curl::new(kube);
    let missing = "/api/v1/namespaces/default/configmaps/no-such-map";
    for accept in [
        PROTOBUF.to_string(),
        format!("{PROTOBUF}, application/json"),
    ] {
        let answer = curl.get(missing, &accept);
        assert_eq!(answer.code, 404, "{accept}: {}", answer.text);
        assert_eq!(answer.content_type, PROTOBUF, "{accept}");
        assert!(answer.bytes.starts_with(b"k8s\0"), "{accept}");
        let status = decode(&answer.bytes, "v1", "Status").expect("a protobuf Status");
        assert_eq!(status["kind"], "Status", "{status}");
        assert_eq!(status["status"], "Failure", "{status}");
        assert_eq!(status["reason"], "NotFound", "{status}");
        assert_eq!(status["code"], 404, "{status}");
        assert_eq!(
            status["message"], "configmaps \"no-such-map\" not found",
            "{status}"
        );
        assert_eq!(status["details"]["name"], "no-such-map", "{status}");
        assert_eq!(status["details"]["kind"], "configmaps", "{status}");
    }

    let answer = curl.get(missing, "application/yaml");
    assert_eq!(answer.code, 404, "{}", answer.text);
    assert_eq!(answer.content_type, "application/yaml");
    assert!(answer.text.contains("reason: NotFound"), "{}", answer.text);

    let gadget = format!("/apis/proto-{suffix}.example.com/v1/namespaces/default/gadgets/none");
    let answer = curl.get(&gadget, &format!("{PROTOBUF}, application/json"));
    assert_eq!(answer.code, 404, "{}", answer.text);
    assert_eq!(answer.content_type, "application/json");
    let status = answer.json();
    assert_eq!(status["reason"], "NotFound", "{status}");
    assert_eq!(
        status["message"],
        format!("gadgets.proto-{suffix}.example.com \"none\" not found"),
        "{status}"
    );
}
