//! CertificateSigningRequests with the real `kubectl` (the current one on `keel up`, 1.27 on
//! `keel apiserver` on a real etcd 3.5.1), as kube-apiserver serves them: a CSR made from a
//! real PKCS#10 request names its requestor as the request's user (the kubeconfig's, whatever
//! the manifest says, as `kubectl auth whoami` names it); `kubectl certificate approve` and
//! `deny` write its conditions through the `approval` subresource (listed in discovery); an
//! update of `status` sets the certificate; and upstream's refusals are worded as upstream
//! words them: approving what is denied, denying what is approved, adding Denied through
//! `status`, changing an issued certificate.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use keel_testkit::kube::{Kube, Stack, fails, get_json, ok, table, write};
use serde_json::Value;

/// A CSR manifest `name` for a new key, whose requestor fields say someone else.
fn manifest(name: &str) -> String {
    let key = rcgen::KeyPair::generate().expect("key");
    let params = rcgen::CertificateParams::new(vec![format!("{name}.example.com")]).unwrap();
    let request = params.serialize_request(&key).expect("csr").pem().unwrap();
    format!(
        "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  \
         name: {name}\nspec:\n  request: {}\n  signerName: example.com/serving\n  \
         expirationSeconds: 86400\n  usages: [digital signature, server auth]\n  \
         username: mallory\n  groups: [system:masters]\n",
        STANDARD.encode(request)
    )
}

/// A certificate (self-signed), base64 as `status.certificate` holds it.
fn certificate() -> String {
    let key = rcgen::KeyPair::generate().expect("key");
    let params = rcgen::CertificateParams::new(vec!["web.example.com".to_string()]).unwrap();
    STANDARD.encode(params.self_signed(&key).expect("cert").pem())
}

/// The condition of type `kind` of the CSR `name`.
fn condition(kube: &Kube, version: Option<&str>, name: &str, kind: &str) -> Value {
    let csr = get_json(kube, version, &["csr", name]);
    let found = csr["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == kind)
        .cloned();
    found.unwrap_or_else(|| panic!("{name} has no {kind} condition: {csr}"))
}

/// Who the kubeconfig's user is: `expected` (username, uid, groups) as the admin token names
/// them; with the current kubectl, also what `kubectl auth whoami` says.
fn requestor(kube: &Kube, version: Option<&str>) -> Value {
    let expected = serde_json::json!({"username": "admin", "uid": "admin",
        "groups": ["system:masters", "system:authenticated"]});
    if version.is_none() {
        let me = ok(kube, None, &["auth", "whoami", "-o", "json"]);
        let me: Value = serde_json::from_str(&me).expect("whoami prints JSON");
        assert_eq!(me["status"]["userInfo"], expected, "{me}");
    }
    expected
}

fn certificates(kube: &Kube, version: Option<&str>) {
    let run = |args: &[&str]| ok(kube, version, args);
    let web = write(kube, "web.yaml", &manifest("web"));
    let other = write(kube, "other.yaml", &manifest("other"));
    assert!(run(&["create", "-f", &web]).contains("certificatesigningrequest"));
    run(&["create", "-f", &other]);

    // The requestor is the request's user, whatever the manifest said.
    let csr = get_json(kube, version, &["csr", "web"]);
    let me = requestor(kube, version);
    for field in ["username", "uid", "groups"] {
        assert_eq!(csr["spec"][field], me[field], "{field}: {csr}");
    }
    let (header, row) = table(kube, version, &["get", "csr"], "web");
    let at = |h: &str| header.iter().position(|x| x == h).expect(h);
    assert_eq!(row[at("REQUESTOR")], "admin", "{row:?}");
    assert_eq!(row[at("CONDITION")], "Pending", "{row:?}");
    let selected = run(&[
        "get",
        "csr",
        "--field-selector",
        "spec.signerName=example.com/serving",
        "-o",
        "name",
    ]);
    assert_eq!(selected.lines().count(), 2, "{selected}");

    // Approve through `approval`: the condition as kubectl writes it, timed by the server.
    let approved = run(&["certificate", "approve", "web"]);
    assert!(approved.contains("approved"), "{approved}");
    let c = condition(kube, version, "web", "Approved");
    assert_eq!(c["status"], "True", "{c}");
    assert_eq!(c["reason"], "KubectlApprove", "{c}");
    assert_eq!(
        c["message"], "This CSR was approved by kubectl certificate approve.",
        "{c}"
    );
    assert!(c["lastTransitionTime"].is_string(), "{c}");
    let read = run(&[
        "get",
        "--raw",
        "/apis/certificates.k8s.io/v1/certificatesigningrequests/web/approval",
    ]);
    assert!(read.contains("KubectlApprove"), "{read}");

    // Deny the other; approving it then is refused, as denying the approved one is.
    assert!(run(&["certificate", "deny", "other"]).contains("denied"));
    let c = condition(kube, version, "other", "Denied");
    assert_eq!(
        (&c["status"], &c["reason"]),
        (&"True".into(), &"KubectlDeny".into())
    );
    // kubectl refuses by itself (even with --force); the server refuses both conditions
    // written through `approval`.
    let err = fails(
        kube,
        version,
        &["certificate", "approve", "--force", "other"],
    );
    assert!(err.contains("is already Denied"), "{err}");
    let err = fails(kube, version, &["certificate", "deny", "web"]);
    assert!(err.contains("is already Approved"), "{err}");
    let mut both = get_json(kube, version, &["csr", "other"]);
    both["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"type": "Approved", "status": "True"}));
    let both = write(kube, "both.json", &both.to_string());
    let approval = "/apis/certificates.k8s.io/v1/certificatesigningrequests/other/approval";
    let err = fails(kube, version, &["replace", "--raw", approval, "-f", &both]);
    assert!(
        err.contains(
            "status.conditions: Invalid value: \"Approved\": Approved and Denied conditions are \
             mutually exclusive"
        ),
        "{err}"
    );

    // `status` sets the certificate, once; its conditions cannot approve or deny.
    let cert = certificate();
    let issue = format!("{{\"status\":{{\"certificate\":\"{cert}\"}}}}");
    let status = [
        "patch",
        "csr",
        "web",
        "--subresource=status",
        "--type=merge",
        "-p",
    ];
    run(&[&status[..], &[issue.as_str()]].concat());
    let csr = get_json(kube, version, &["csr", "web"]);
    assert_eq!(csr["status"]["certificate"], cert.as_str(), "{csr}");
    let (_, row) = table(kube, version, &["get", "csr"], "web");
    assert_eq!(row[at("CONDITION")], "Approved,Issued", "{row:?}");
    let again = format!("{{\"status\":{{\"certificate\":\"{}\"}}}}", certificate());
    let err = fails(kube, version, &[&status[..], &[again.as_str()]].concat());
    assert!(
        err.contains(
            "status.certificate: Forbidden: updates may not modify existing certificate content"
        ),
        "{err}"
    );
    let deny =
        r#"[{"op":"add","path":"/status/conditions/-","value":{"type":"Denied","status":"True"}}]"#;
    let err = fails(
        kube,
        version,
        &[
            "patch",
            "csr",
            "web",
            "--subresource=status",
            "--type=json",
            "-p",
            deny,
        ],
    );
    assert!(
        err.contains("updates may not add a condition of type \"Denied\""),
        "{err}"
    );
    let junk = format!(
        "{{\"status\":{{\"certificate\":\"{}\"}}}}",
        STANDARD.encode("junk")
    );
    let err = fails(
        kube,
        version,
        &[
            "patch",
            "csr",
            "other",
            "--subresource=status",
            "--type=merge",
            "-p",
            &junk,
        ],
    );
    assert!(
        err.contains(
            "status.certificate: Invalid value: \"<certificate data>\": must contain at least \
             one CERTIFICATE PEM block"
        ),
        "{err}"
    );

    // Discovery lists the subresource as upstream does, before `status`.
    let resources: Value =
        serde_json::from_str(&run(&["get", "--raw", "/apis/certificates.k8s.io/v1"])).unwrap();
    let names: Vec<&str> = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "certificatesigningrequests",
            "certificatesigningrequests/approval",
            "certificatesigningrequests/status"
        ]
    );
}

#[test]
fn certificates_on_keel_up() {
    let kube = Kube::start(Stack::Up);
    certificates(&kube, None);
}

#[test]
fn certificates_on_keel_apiserver_on_etcd_with_kubectl_1_27() {
    let kube = Kube::start(Stack::OnEtcd);
    certificates(&kube, Some("1.27"));
}
