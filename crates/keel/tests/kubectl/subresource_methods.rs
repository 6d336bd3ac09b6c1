//! Methods a subresource is not served for, with `curl`: kube-apiserver's installer
//! registers `status` and `scale` (and a CSR's `approval`) for get, update and patch alone
//! and a namespace's `finalize` for update alone, so any other method there is its router's
//! 405: a `MethodNotAllowed` Status with empty details (`serviceErrorHandler` builds it with
//! `NewGenericServerResponse` and no resource or name) and no `Allow` header. The object
//! is left as it was.

use keel_testkit::kube::Kube;
use serde_json::json;

use super::curl::Curl;
use super::ok;

/// Every method a subresource does not serve is 405, in upstream's words; what it serves
/// still answers.
pub fn check(kube: &Kube, ns: &str) {
    ok(
        kube,
        None,
        &["create", "deployment", "sub", "--image=nginx", "-n", ns],
    );
    let curl = Curl::new(kube);
    let deployment = format!("/apis/apps/v1/namespaces/{ns}/deployments/sub");
    let namespace = format!("/api/v1/namespaces/{ns}");
    let refused = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server does not allow this method on the requested resource",
        "reason": "MethodNotAllowed",
        "details": {},
        "code": 405,
    });
    let cases = [
        (format!("{deployment}/status"), &["DELETE", "POST"][..]),
        (format!("{deployment}/scale"), &["DELETE", "POST"][..]),
        (format!("{namespace}/status"), &["DELETE", "POST"][..]),
        (
            format!("{namespace}/finalize"),
            &["GET", "DELETE", "POST", "PATCH"][..],
        ),
    ];
    for (path, methods) in cases {
        for method in methods {
            let answer = curl.send(method, &path, "application/json", "{}");
            assert_eq!(answer.code, 405, "{method} {path}: {}", answer.text);
            assert_eq!(answer.json(), refused, "{method} {path}");
            assert!(
                answer.allow.is_empty(),
                "{method} {path}: {:?}",
                answer.allow
            );
        }
    }
    // Still there, and what the subresources do serve still answers.
    for path in [
        format!("{deployment}/status"),
        format!("{deployment}/scale"),
        format!("{namespace}/status"),
    ] {
        let answer = curl.get(&path, "application/json");
        assert_eq!(answer.code, 200, "GET {path}: {}", answer.text);
    }
    ok(kube, None, &["delete", "deployment", "sub", "-n", ns]);
}
