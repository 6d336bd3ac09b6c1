//! The built-in groups policy/v1, networking.k8s.io/v1, discovery.k8s.io/v1,
//! scheduling.k8s.io/v1 and node.k8s.io/v1 with the real `kubectl` (the current one and 1.27)
//! against `keel up` and against `keel apiserver` on a real etcd 3.5.1: `kubectl create pdb`,
//! `create ingress` with a rule and `create priorityclass`, and `kubectl apply` of a
//! NetworkPolicy, an IngressClass, a RuntimeClass and an EndpointSlice; their tables; their
//! defaults as upstream sets them, field by field; an invalid object of each refused with
//! upstream's message, and the immutable fields; the two system priority classes and the
//! `kubernetes` EndpointSlice a fresh server has. Then the Python client
//! (`tests/python/api_groups.py`) creates, reads, patches, lists, watches and deletes one kind
//! of each group.

use std::time::{Duration, Instant};

use keel_testkit::kube::{Kube, Stack, fails, get_json, ok, write};
use serde_json::{Value, json};

/// The table row of `name` in `table` (its cells split on whitespace).
fn row(table: &str, name: &str) -> Vec<String> {
    table
        .lines()
        .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
        .find(|cells| cells.first().map(String::as_str) == Some(name))
        .unwrap_or_else(|| panic!("no row {name} in\n{table}"))
}

/// The objects `kubectl apply` makes: a NetworkPolicy with an egress rule and a port
/// without a protocol, an IngressClass whose parameters have no scope, a RuntimeClass and an
/// EndpointSlice whose port has neither name nor protocol.
fn manifest(s: &str, ns: &str) -> String {
    format!(
        r#"apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: np-{s}
  namespace: {ns}
spec:
  podSelector:
    matchLabels:
      app: web
  ingress:
  - ports:
    - port: 80
  egress:
  - to:
    - ipBlock:
        cidr: 10.0.0.0/16
        except: [10.0.5.0/24]
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: ic-{s}
spec:
  controller: example.com/ingress-controller
  parameters:
    apiGroup: k8s.example.com
    kind: IngressParameters
    name: params
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: rc-{s}
handler: runc
overhead:
  podFixed:
    cpu: 250m
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: es-{s}
  namespace: {ns}
  labels:
    kubernetes.io/service-name: web
addressType: IPv4
endpoints:
- addresses: [10.1.2.3]
ports:
- port: 80
"#
    )
}

/// What each group's kinds do for one kubectl, its objects suffixed `s` in namespace `ns`.
fn groups(kube: &Kube, version: Option<&str>, s: &str) {
    let ns = format!("groups-{s}");
    let k = |args: &[&str]| ok(kube, version, args);
    let no = |args: &[&str]| fails(kube, version, args);
    k(&["create", "namespace", &ns]);

    // The two system priority classes, made at start with upstream's values.
    let classes = k(&["get", "priorityclasses"]);
    let header: Vec<&str> = classes.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
    );
    let node = row(&classes, "system-node-critical");
    assert_eq!(
        (node[1].as_str(), node[2].as_str()),
        ("2000001000", "false")
    );
    assert_eq!(node[4], "PreemptLowerPriority");
    let cluster = row(&classes, "system-cluster-critical");
    assert_eq!(cluster[1], "2000000000");
    let critical = get_json(kube, version, &["priorityclass", "system-cluster-critical"]);
    assert_eq!(
        critical["description"],
        "Used for system critical pods that must run in the cluster, but can be moved to \
         another node if necessary."
    );
    assert_eq!(critical["preemptionPolicy"], "PreemptLowerPriority");
    assert_eq!(critical["metadata"]["generation"], 1);

    // PodDisruptionBudget: the zero status, a bound shown, the other N/A.
    k(&[
        "create",
        "pdb",
        &format!("pdb-{s}"),
        "-n",
        &ns,
        "--selector=app=web",
        "--min-available=1",
    ]);
    let pdbs = k(&["get", "pdb", "-n", &ns]);
    assert_eq!(
        pdbs.lines()
            .next()
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>(),
        [
            "NAME",
            "MIN",
            "AVAILABLE",
            "MAX",
            "UNAVAILABLE",
            "ALLOWED",
            "DISRUPTIONS",
            "AGE"
        ]
    );
    assert_eq!(row(&pdbs, &format!("pdb-{s}"))[1..4], ["1", "N/A", "0"]);
    let pdb = get_json(kube, version, &["pdb", &format!("pdb-{s}"), "-n", &ns]);
    assert_eq!(
        pdb["status"],
        json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0})
    );
    assert_eq!(pdb["metadata"]["generation"], 1);
    assert_eq!(
        pdb["spec"]["selector"],
        json!({"matchLabels": {"app": "web"}})
    );
    k(&[
        "patch",
        "pdb",
        &format!("pdb-{s}"),
        "-n",
        &ns,
        "--type=merge",
        "-p",
        r#"{"spec":{"minAvailable":2}}"#,
    ]);
    let pdb = get_json(kube, version, &["pdb", &format!("pdb-{s}"), "-n", &ns]);
    assert_eq!(pdb["metadata"]["generation"], 2);
    let err = no(&[
        "create",
        "pdb",
        "bad",
        "-n",
        &ns,
        "--selector=app=x",
        "--min-available=120%",
    ]);
    assert!(
        err.contains(
            r#"PodDisruptionBudget.policy "bad" is invalid: spec.minAvailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:"120%"}: must not be greater than 100%"#
        ),
        "{err}"
    );

    // Ingress: the rule kubectl makes, an empty load balancer status, the table.
    k(&[
        "create",
        "ingress",
        &format!("ing-{s}"),
        "-n",
        &ns,
        "--rule=foo.com/bar=svc1:8080",
    ]);
    let ings = k(&["get", "ingress", "-n", &ns]);
    assert_eq!(
        ings.lines()
            .next()
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"]
    );
    assert_eq!(
        row(&ings, &format!("ing-{s}"))[1..4],
        ["<none>", "foo.com", "80"]
    );
    let ing = get_json(kube, version, &["ingress", &format!("ing-{s}"), "-n", &ns]);
    assert_eq!(ing["status"], json!({"loadBalancer": {}}));
    assert_eq!(ing["metadata"]["generation"], 1);
    assert_eq!(
        ing["spec"]["rules"],
        json!([{"host": "foo.com", "http": {"paths": [{"path": "/bar", "pathType": "Exact",
            "backend": {"service": {"name": "svc1", "port": {"number": 8080}}}}]}}])
    );
    let bad_ingress = write(
        kube,
        &format!("bad-ing-{s}.yaml"),
        &format!(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: bad\n  \
             namespace: {ns}\nspec:\n  rules:\n  - host: foo.com\n    http:\n      paths:\n      \
             - path: /\n        backend:\n          service:\n            name: svc1\n            \
             port:\n              number: 80\n"
        ),
    );
    let err = no(&["apply", "-f", &bad_ingress]);
    assert!(
        err.contains(
            r#"The Ingress "bad" is invalid: spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified"#
        ),
        "{err}"
    );

    // PriorityClass: the preemption policy, value immutable, `system-` reserved.
    k(&[
        "create",
        "priorityclass",
        &format!("high-{s}"),
        "--value=1000",
        "--description=high",
    ]);
    let pc = get_json(kube, version, &["priorityclass", &format!("high-{s}")]);
    assert_eq!(pc["value"], 1000);
    assert_eq!(pc["preemptionPolicy"], "PreemptLowerPriority");
    assert_eq!(pc["metadata"]["generation"], 1);
    let err = no(&[
        "patch",
        "priorityclass",
        &format!("high-{s}"),
        "--type=merge",
        "-p",
        r#"{"value":2}"#,
    ]);
    assert!(
        err.contains("value: Forbidden: may not be changed in an update."),
        "{err}"
    );
    let err = no(&[
        "create",
        "priorityclass",
        &format!("system-{s}"),
        "--value=5",
    ]);
    assert!(
        err.contains(&format!(
            "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved \
             for system use only. error: system-{s} is not a known system priority class"
        )),
        "{err}"
    );

    // Applied: NetworkPolicy, IngressClass, RuntimeClass, EndpointSlice.
    let applied = write(kube, &format!("groups-{s}.yaml"), &manifest(s, &ns));
    k(&["apply", "-f", &applied]);
    let np = get_json(kube, version, &["netpol", &format!("np-{s}"), "-n", &ns]);
    assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    assert_eq!(
        np["spec"]["ingress"][0]["ports"],
        json!([{"port": 80, "protocol": "TCP"}])
    );
    assert_eq!(np["metadata"]["generation"], 1);
    let ic = get_json(kube, version, &["ingressclass", &format!("ic-{s}")]);
    assert_eq!(
        ic["spec"]["parameters"],
        json!({"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "params",
            "scope": "Cluster"})
    );
    let rc = get_json(kube, version, &["runtimeclass", &format!("rc-{s}")]);
    assert_eq!(rc["handler"], "runc");
    assert_eq!(rc["overhead"], json!({"podFixed": {"cpu": "250m"}}));
    let es = get_json(
        kube,
        version,
        &["endpointslice", &format!("es-{s}"), "-n", &ns],
    );
    assert_eq!(
        es["ports"],
        json!([{"name": "", "port": 80, "protocol": "TCP"}])
    );
    assert_eq!(es["metadata"]["generation"], 1);

    let table = k(&["get", "netpol", "-n", &ns]);
    assert_eq!(row(&table, &format!("np-{s}"))[1], "app=web");
    let table = k(&["get", "ingressclass"]);
    assert_eq!(
        row(&table, &format!("ic-{s}"))[1..3],
        [
            "example.com/ingress-controller",
            "IngressParameters.k8s.example.com/params"
        ]
    );
    let table = k(&["get", "runtimeclass"]);
    assert_eq!(row(&table, &format!("rc-{s}"))[1], "runc");
    let table = k(&["get", "endpointslices", "-n", &ns]);
    assert_eq!(
        table
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]
    );
    assert_eq!(
        row(&table, &format!("es-{s}"))[1..4],
        ["IPv4", "80", "10.1.2.3"]
    );

    // Invalid ones, and the immutable fields.
    let bad = write(
        kube,
        &format!("bad-{s}.yaml"),
        &format!(
            "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: bad\n  \
             namespace: {ns}\nspec:\n  podSelector: {{}}\n  policyTypes: [Sideways]\n"
        ),
    );
    let err = no(&["apply", "-f", &bad]);
    assert!(
        err.contains(
            r#"spec.policyTypes[0]: Unsupported value: "Sideways": supported values: "Ingress", "Egress""#
        ),
        "{err}"
    );
    let err = no(&[
        "patch",
        "ingressclass",
        &format!("ic-{s}"),
        "--type=merge",
        "-p",
        r#"{"spec":{"controller":"example.com/other"}}"#,
    ]);
    assert!(
        err.contains(r#"spec.controller: Invalid value: "example.com/other": field is immutable"#),
        "{err}"
    );
    let bad = write(
        kube,
        &format!("bad-ic-{s}.yaml"),
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata:\n  name: bad\nspec:\n  \
         controller: nginx\n",
    );
    let err = no(&["apply", "-f", &bad]);
    assert!(
        err.contains(
            r#"spec.controller: Invalid value: "nginx": must be a domain-prefixed path (such as "acme.io/foo")"#
        ),
        "{err}"
    );
    let err = no(&[
        "patch",
        "runtimeclass",
        &format!("rc-{s}"),
        "--type=merge",
        "-p",
        r#"{"handler":"kata"}"#,
    ]);
    assert!(
        err.contains(r#"handler: Invalid value: "kata": field is immutable"#),
        "{err}"
    );
    let bad = write(
        kube,
        &format!("bad-rc-{s}.yaml"),
        "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: bad\nhandler: Run_C\n",
    );
    let err = no(&["apply", "-f", &bad]);
    assert!(
        err.contains(r#"handler: Invalid value: "Run_C": a lowercase RFC 1123 label"#),
        "{err}"
    );
    let err = no(&[
        "patch",
        "endpointslice",
        &format!("es-{s}"),
        "-n",
        &ns,
        "--type=merge",
        "-p",
        r#"{"addressType":"FQDN","endpoints":[]}"#,
    ]);
    assert!(
        err.contains(r#"addressType: Invalid value: "FQDN": field is immutable"#),
        "{err}"
    );
    let bad = write(
        kube,
        &format!("bad-es-{s}.yaml"),
        &format!(
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: bad\n  \
             namespace: {ns}\naddressType: IPv4\nendpoints:\n- addresses: [\"fe80::1\"]\n"
        ),
    );
    let err = no(&["apply", "-f", &bad]);
    assert!(
        err.contains(
            r#"endpoints[0].addresses[0]: Invalid value: "fe80::1": must be a valid IPv4 address"#
        ),
        "{err}"
    );
    k(&["delete", "priorityclass", &format!("high-{s}")]);
    k(&["delete", "ingressclass", &format!("ic-{s}")]);
    k(&["delete", "runtimeclass", &format!("rc-{s}")]);
}

/// The `kubernetes` EndpointSlice the endpoint reconciler writes (it runs every ten seconds
/// from start, so it is waited for).
fn kubernetes_slice(kube: &Kube) {
    let deadline = Instant::now() + Duration::from_secs(15);
    let slice = loop {
        let out = kube.kubectl(&[
            "get",
            "endpointslice",
            "kubernetes",
            "-n",
            "default",
            "-o",
            "json",
        ]);
        if out.status.success() {
            break serde_json::from_slice::<Value>(&out.stdout).unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "no kubernetes EndpointSlice: {}",
            kube.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        slice["metadata"]["labels"],
        json!({"kubernetes.io/service-name": "kubernetes"})
    );
    assert_eq!(slice["addressType"], "IPv4");
    assert_eq!(slice["endpoints"][0]["conditions"], json!({"ready": true}));
    let port = slice["ports"][0]["port"].as_i64().unwrap();
    assert_eq!(slice["ports"][0]["name"], "https");
    assert_eq!(slice["ports"][0]["protocol"], "TCP");
    let endpoints = kube.kubectl_ok(&[
        "get",
        "endpoints",
        "kubernetes",
        "-n",
        "default",
        "-o",
        "json",
    ]);
    let endpoints: Value = serde_json::from_str(&endpoints).unwrap();
    assert_eq!(endpoints["subsets"][0]["ports"][0]["port"], port);
    assert_eq!(
        slice["endpoints"][0]["addresses"][0],
        endpoints["subsets"][0]["addresses"][0]["ip"]
    );
    let table = kube.kubectl_ok(&["get", "endpointslices", "-n", "default"]);
    let kubernetes = row(&table, "kubernetes");
    assert_eq!(kubernetes[1..3], ["IPv4".to_string(), port.to_string()]);
}

fn api_groups(stack: Stack) {
    let kube = Kube::start(stack);
    kubernetes_slice(&kube);
    groups(&kube, None, "cur");
    groups(&kube, Some("1.27"), "old");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/api_groups.py");
    kube.python_ok(script, &[]);
}

#[test]
fn api_groups_on_keel_up() {
    api_groups(Stack::Up);
}

#[test]
fn api_groups_on_keel_apiserver_on_etcd() {
    api_groups(Stack::OnEtcd);
}
