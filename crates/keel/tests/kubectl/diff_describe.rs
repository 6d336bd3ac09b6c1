//! `kubectl diff` and `kubectl describe` (the current kubectl and 1.27): diffs of an applied
//! object changed locally (client- and server-side), unchanged, new and refused, with their
//! exit codes; descriptions of a ConfigMap, a Namespace (with its quota and limit range
//! sections), a Pod bound to a Node and that Node (its Lease, its pods, its events under the
//! UID and under the name), each with an Event found through the `involvedObject` field
//! selector. Every line kubectl prints is checked, whitespace collapsed, ages and creation
//! times matched by pattern.

use keel_testkit::kube::Kube;
use regex::Regex;

use super::{fails, ok, text, write};

/// An age as kubectl prints it (`0s`, `5m3s`, `12d`), with an event's count
/// (`0s (x3 over 5s)`).
const AGE: &str = r"[0-9]+[smhdy]([0-9]+[smh])?( \(x[0-9]+ over [0-9]+[smhdy]([0-9]+[smh])?\))?";

/// A fixed time for conditions, leases and events, and how describe prints it.
const FIXED: &str = "2026-01-02T03:04:05Z";
const FIXED_SHOWN: &str = "Fri, 02 Jan 2026 03:04:05 +0000";

/// `out`'s lines with runs of white space made one space, trimmed.
fn collapsed(out: &str) -> Vec<String> {
    out.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// Asserts that `out` is `expected` line by line (white space collapsed); in an expected
/// line `{age}` stands for an age and `{any}` for anything.
fn assert_lines(out: &str, expected: &[String]) {
    let actual = collapsed(out);
    let pattern = |line: &str| {
        let literal: Vec<String> = line
            .split("{age}")
            .map(|part| {
                part.split("{any}")
                    .map(regex::escape)
                    .collect::<Vec<_>>()
                    .join(".*")
            })
            .collect();
        Regex::new(&format!("^{}$", literal.join(AGE))).expect("a line pattern")
    };
    for (i, want) in expected.iter().enumerate() {
        let got = actual.get(i).map_or("<no line>", String::as_str);
        assert!(
            pattern(want).is_match(got),
            "line {} is {got:?}, expected {want:?}:\n{out}",
            i + 1
        );
    }
    assert_eq!(actual.len(), expected.len(), "extra lines:\n{out}");
}

/// The lines a unified diff changes (`-` and `+`, without the file headers).
fn changed(diff: &str) -> Vec<&str> {
    diff.lines()
        .filter(|l| (l.starts_with('-') || l.starts_with('+')) && !l.starts_with("--- "))
        .filter(|l| !l.starts_with("+++ "))
        .collect()
}

/// `kubectl diff` of an applied ConfigMap: unchanged (exit 0, nothing printed), changed
/// (exit 1, the changed line and only it; server-side also the last-applied annotation the
/// server keeps up to date), new (exit 1, all added, without a resourceVersion), and refused
/// by validation or a missing namespace (exit 2, the server's error).
pub fn diff(kube: &Kube, version: Option<&str>, ns: &str) {
    let manifest = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d1\n  namespace: {ns}\n  labels: {{app: web}}\ndata:\n  a: b\n"
    );
    let applied = write(kube, "d1.yaml", &manifest);
    assert_eq!(
        ok(kube, version, &["apply", "-f", &applied]),
        "configmap/d1 created\n"
    );
    let same = kube.kubectl_version(version, &["diff", "-f", &applied]);
    assert_eq!(same.status.code(), Some(0), "{}", text(&same.stderr));
    assert_eq!(text(&same.stdout), "");

    let local = write(kube, "d1-changed.yaml", &manifest.replace("a: b", "a: c"));
    let client = kube.kubectl_version(version, &["diff", "-f", &local]);
    assert_eq!(client.status.code(), Some(1), "{}", text(&client.stderr));
    let shown = text(&client.stdout);
    assert_eq!(changed(&shown), ["-  a: b", "+  a: c"], "{shown}");
    assert!(
        shown.contains("/v1.ConfigMap.") && !shown.contains("managedFields"),
        "{shown}"
    );

    let server = kube.kubectl_version(version, &["diff", "--server-side", "-f", &local]);
    assert_eq!(server.status.code(), Some(1), "{}", text(&server.stderr));
    let shown = text(&server.stdout);
    let last_applied = |a: &str, annotations: &str| {
        format!(
            "      {{\"apiVersion\":\"v1\",\"data\":{{\"a\":\"{a}\"}},\"kind\":\"ConfigMap\",\"metadata\":{{{annotations}\"labels\":{{\"app\":\"web\"}},\"name\":\"d1\",\"namespace\":\"{ns}\"}}}}"
        )
    };
    assert_eq!(
        changed(&shown),
        [
            "-  a: b".to_string(),
            "+  a: c".to_string(),
            format!("-{}", last_applied("b", "\"annotations\":{},")),
            format!("+{}", last_applied("c", "")),
        ],
        "{shown}"
    );
    // Nothing was written.
    assert_eq!(
        ok(
            kube,
            version,
            &["get", "cm", "d1", "-n", ns, "-o", "jsonpath={.data.a}"]
        ),
        "b"
    );

    let new = write(kube, "d2.yaml", &manifest.replace("name: d1", "name: d2"));
    let created = kube.kubectl_version(version, &["diff", "-f", &new]);
    assert_eq!(created.status.code(), Some(1), "{}", text(&created.stderr));
    let shown = text(&created.stdout);
    let added = changed(&shown);
    assert!(
        added.iter().all(|l| l.starts_with('+'))
            && added.contains(&"+  name: d2")
            && added.contains(&"+  a: b")
            && added.iter().any(|l| l.starts_with("+  uid: "))
            && !shown.contains("resourceVersion"),
        "{shown}"
    );
    let missing = fails(kube, version, &["get", "cm", "d2", "-n", ns]);
    assert!(missing.contains("NotFound"), "{missing}");

    let bad = write(
        kube,
        "d3.yaml",
        &manifest
            .replace("name: d1", "name: d3")
            .replace("a: b", "\"a b\": x"),
    );
    let refused = kube.kubectl_version(version, &["diff", "-f", &bad]);
    assert_eq!(refused.status.code(), Some(2));
    assert_eq!(
        text(&refused.stderr),
        "The ConfigMap \"d3\" is invalid: data[a b]: Invalid value: \"a b\": a valid config key \
         must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or \
         'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')\n"
    );
    let elsewhere = write(
        kube,
        "d4.yaml",
        &manifest.replace(&format!("namespace: {ns}"), "namespace: nowhere"),
    );
    let refused = kube.kubectl_version(version, &["diff", "-f", &elsewhere]);
    assert_eq!(refused.status.code(), Some(2));
    assert_eq!(
        text(&refused.stderr),
        "Error from server (NotFound): namespaces \"nowhere\" not found\n"
    );
}

/// An Event about an object, as a kubelet or controller records it (`involved`: the
/// `involvedObject` fields as YAML flow mapping entries).
fn event(
    name: &str,
    ns: &str,
    involved: &str,
    what: (&str, &str, &str),
    count: u32,
    last: &str,
) -> String {
    let (reason, source, message) = what;
    format!(
        "apiVersion: v1\nkind: Event\nmetadata: {{name: {name}, namespace: {ns}}}\ninvolvedObject: {{{involved}}}\nreason: {reason}\nmessage: \"{message}\"\ntype: Normal\nsource: {{component: {source}}}\nfirstTimestamp: \"{FIXED}\"\nlastTimestamp: \"{last}\"\ncount: {count}\n"
    )
}

fn uid(kube: &Kube, version: Option<&str>, args: &[&str]) -> String {
    let mut args = args.to_vec();
    args.extend(["-o", "jsonpath={.metadata.uid}"]);
    ok(kube, version, &args)
}

/// `kubectl describe` of a ConfigMap, a Namespace, a Pod bound to a Node and that Node.
pub fn describe(kube: &Kube, version: Option<&str>, ns: &str) {
    let k = |args: &[&str]| ok(kube, version, args);
    let node = format!("{ns}-node");
    let files = [
        (
            "node.yaml",
            format!(
                "apiVersion: v1\nkind: Node\nmetadata:\n  name: {node}\n  labels: {{kubernetes.io/hostname: {node}, node-role.kubernetes.io/worker: \"\"}}\n  annotations: {{node.alpha.kubernetes.io/ttl: \"0\"}}\nspec:\n  podCIDR: 10.244.1.0/24\n  podCIDRs: [10.244.1.0/24]\n  taints: [{{key: dedicated, value: db, effect: NoSchedule}}]\nstatus:\n  capacity: {{cpu: \"4\", memory: 8Gi, pods: \"110\"}}\n  allocatable: {{cpu: 3900m, memory: 7Gi, pods: \"110\"}}\n  addresses: [{{type: InternalIP, address: 10.0.0.2}}, {{type: Hostname, address: {node}}}]\n  conditions: [{{type: Ready, status: \"True\", reason: KubeletReady, message: kubelet is posting ready status, lastHeartbeatTime: \"{FIXED}\", lastTransitionTime: \"{FIXED}\"}}]\n  nodeInfo: {{machineID: m1, systemUUID: s1, bootID: b1, kernelVersion: 6.1.0, osImage: Debian, containerRuntimeVersion: \"containerd://1.7.0\", kubeletVersion: v1.34.0, kubeProxyVersion: \"\", operatingSystem: linux, architecture: amd64}}\n"
            ),
        ),
        (
            "node-lease.yaml",
            format!(
                "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {{name: {node}, namespace: kube-node-lease}}\nspec: {{holderIdentity: {node}, leaseDurationSeconds: 40, renewTime: \"2026-01-02T03:04:05.000000Z\"}}\n"
            ),
        ),
        // keel runs no admission plugins: the pod says what kube-apiserver's Priority,
        // ServiceAccount and DefaultTolerationSeconds plugins would add, so it is stored
        // (and described) as it would be there.
        (
            "web.yaml",
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: {ns}\n  labels: {{app: web}}\n  annotations: {{note: hi}}\nspec:\n  nodeName: {node}\n  priority: 0\n  serviceAccountName: default\n  automountServiceAccountToken: false\n  tolerations:\n  - {{key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 300}}\n  - {{key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 300}}\n  containers:\n  - name: c\n    image: busybox\n    ports: [{{containerPort: 80}}]\n    env: [{{name: A, value: \"1\"}}]\n    resources: {{requests: {{cpu: 100m, memory: 64Mi}}, limits: {{cpu: 200m, memory: 128Mi}}}}\n"
            ),
        ),
        (
            "limits.yaml",
            format!(
                "apiVersion: v1\nkind: LimitRange\nmetadata: {{name: limits, namespace: {ns}}}\nspec:\n  limits:\n  - {{type: Container, min: {{cpu: 50m}}, max: {{cpu: \"1\"}}, default: {{cpu: 500m}}, defaultRequest: {{cpu: 100m}}, maxLimitRequestRatio: {{cpu: \"10\"}}}}\n"
            ),
        ),
    ];
    for (name, body) in &files {
        k(&["create", "-f", &write(kube, name, body)]);
    }
    let cm_uid = uid(kube, version, &["get", "cm", "d1", "-n", ns]);
    let pod_uid = uid(kube, version, &["get", "pod", "web", "-n", ns]);
    let node_uid = uid(kube, version, &["get", "node", &node]);
    let events = [
        event(
            "d1.1",
            ns,
            &format!("apiVersion: v1, kind: ConfigMap, name: d1, namespace: {ns}, uid: {cm_uid}"),
            ("Checked", "keel-test", "config looked at"),
            1,
            FIXED,
        ),
        event(
            "web.1",
            ns,
            &format!("apiVersion: v1, kind: Pod, name: web, namespace: {ns}, uid: {pod_uid}"),
            (
                "Scheduled",
                "default-scheduler",
                &format!("Successfully assigned {ns}/web to {node}"),
            ),
            1,
            FIXED,
        ),
        event(
            "web.2",
            ns,
            &format!("apiVersion: v1, kind: Pod, name: web, namespace: {ns}, uid: {pod_uid}"),
            (
                "Pulled",
                "kubelet",
                "Container image busybox already present on machine",
            ),
            3,
            "2026-01-02T03:09:05Z",
        ),
        // The node controller names a node by its UID, the kubelet by its name; a
        // cluster-scoped object's events are in `default`.
        event(
            &format!("{node}.1"),
            "default",
            &format!("kind: Node, name: {node}, uid: {node_uid}"),
            (
                "RegisteredNode",
                "node-controller",
                &format!("Node {node} event: Registered Node {node} in Controller"),
            ),
            1,
            FIXED,
        ),
        event(
            &format!("{node}.2"),
            "default",
            &format!("kind: Node, name: {node}, uid: {node}"),
            (
                "NodeReady",
                "kubelet",
                &format!("Node {node} status is now: NodeReady"),
            ),
            1,
            "2026-01-02T03:09:05Z",
        ),
        // Another object's event is not shown.
        event(
            "other.1",
            ns,
            &format!("apiVersion: v1, kind: ConfigMap, name: d2, namespace: {ns}, uid: x"),
            ("Checked", "keel-test", "not this one"),
            1,
            FIXED,
        ),
    ];
    k(&[
        "create",
        "-f",
        &write(kube, "events.yaml", &events.join("---\n")),
    ]);
    let lines = |text: &[&str]| text.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let events_table = [
        "Events:",
        "Type Reason Age From Message",
        "---- ------ ---- ---- -------",
    ];

    let mut want = lines(&[
        "Name: d1",
        &format!("Namespace: {ns}"),
        "Labels: app=web",
        "Annotations: <none>",
        "",
        "Data",
        "====",
        "a:",
        "----",
        "b",
        "",
        "BinaryData",
        "====",
        "",
    ]);
    // kubectl 1.28 and later end each value with an empty line.
    if version != Some("1.27") {
        want.insert(10, String::new());
    }
    want.extend(lines(&events_table));
    want.push("Normal Checked {age} keel-test config looked at".into());
    assert_lines(&k(&["describe", "configmap", "d1", "-n", ns]), &want);

    assert_lines(
        &k(&["describe", "namespace", ns]),
        &lines(&[
            &format!("Name: {ns}"),
            &format!("Labels: kubernetes.io/metadata.name={ns}"),
            "Annotations: <none>",
            "Status: Active",
            "",
            "No resource quota.",
            "",
            "Resource Limits",
            "Type Resource Min Max Default Request Default Limit Max Limit/Request Ratio",
            "---- -------- --- --- --------------- ------------- -----------------------",
            "Container cpu 50m 1 100m 500m 10",
        ]),
    );
    let system = k(&["describe", "namespace", "kube-system"]);
    assert!(
        system.ends_with("No resource quota.\n\nNo LimitRange resource.\n"),
        "{system}"
    );

    let mut want = lines(&[
        "Name: web",
        &format!("Namespace: {ns}"),
        "Priority: 0",
        "Service Account: default",
        &format!("Node: {node}/"),
        "Labels: app=web",
        "Annotations: note: hi",
        "Status: Pending",
        "IP:",
        "IPs: <none>",
        "Containers:",
        "c:",
        "Image: busybox",
        "Port: 80/TCP",
        "Host Port: 0/TCP",
        "Limits:",
        "cpu: 200m",
        "memory: 128Mi",
        "Requests:",
        "cpu: 100m",
        "memory: 64Mi",
        "Environment:",
        "A: 1",
        "Mounts: <none>",
        "Volumes: <none>",
        "QoS Class: Burstable",
        "Node-Selectors: <none>",
        "Tolerations: node.kubernetes.io/not-ready:NoExecute op=Exists for 300s",
        "node.kubernetes.io/unreachable:NoExecute op=Exists for 300s",
    ]);
    want.extend(lines(&events_table));
    want.push(format!(
        "Normal Scheduled {{age}} default-scheduler Successfully assigned {ns}/web to {node}"
    ));
    want.push(
        "Normal Pulled {age} kubelet Container image busybox already present on machine".into(),
    );
    assert_lines(&k(&["describe", "pod", "web", "-n", ns]), &want);

    let mut want = lines(&[
        &format!("Name: {node}"),
        "Roles: worker",
        &format!("Labels: kubernetes.io/hostname={node}"),
        "node-role.kubernetes.io/worker=",
        "Annotations: node.alpha.kubernetes.io/ttl: 0",
        "CreationTimestamp: {any}",
        "Taints: dedicated=db:NoSchedule",
        "Unschedulable: false",
        "Lease:",
        &format!("HolderIdentity: {node}"),
        "AcquireTime: <unset>",
        &format!("RenewTime: {FIXED_SHOWN}"),
        "Conditions:",
        "Type Status LastHeartbeatTime LastTransitionTime Reason Message",
        "---- ------ ----------------- ------------------ ------ -------",
        &format!(
            "Ready True {FIXED_SHOWN} {FIXED_SHOWN} KubeletReady kubelet is posting ready status"
        ),
        "Addresses:",
        "InternalIP: 10.0.0.2",
        &format!("Hostname: {node}"),
        "Capacity:",
        "cpu: 4",
        "memory: 8Gi",
        "pods: 110",
        "Allocatable:",
        "cpu: 3900m",
        "memory: 7Gi",
        "pods: 110",
        "System Info:",
        "Machine ID: m1",
        "System UUID: s1",
        "Boot ID: b1",
        "Kernel Version: 6.1.0",
        "OS Image: Debian",
        "Operating System: linux",
        "Architecture: amd64",
        "Container Runtime Version: containerd://1.7.0",
        "Kubelet Version: v1.34.0",
        "Kube-Proxy Version:",
        "PodCIDR: 10.244.1.0/24",
        "PodCIDRs: 10.244.1.0/24",
        "Non-terminated Pods: (1 in total)",
        "Namespace Name CPU Requests CPU Limits Memory Requests Memory Limits Age",
        "--------- ---- ------------ ---------- --------------- ------------- ---",
        &format!("{ns} web 100m (2%) 200m (5%) 64Mi (0%) 128Mi (1%) {{age}}"),
        "Allocated resources:",
        "(Total limits may be over 100 percent, i.e., overcommitted.)",
        "Resource Requests Limits",
        "-------- -------- ------",
        "cpu 100m (2%) 200m (5%)",
        "memory 64Mi (0%) 128Mi (1%)",
        "ephemeral-storage 0 (0%) 0 (0%)",
    ]);
    want.extend(lines(&events_table));
    want.push(format!(
        "Normal RegisteredNode {{age}} node-controller Node {node} event: Registered Node {node} in Controller"
    ));
    want.push(format!(
        "Normal NodeReady {{age}} kubelet Node {node} status is now: NodeReady"
    ));
    assert_lines(&k(&["describe", "node", &node]), &want);

    // What is not there is NotFound, exit 1.
    let missing = fails(kube, version, &["describe", "configmap", "nope", "-n", ns]);
    assert_eq!(
        missing,
        "Error from server (NotFound): configmaps \"nope\" not found\n"
    );
    let missing = kube.kubectl_version(version, &["describe", "node", "nope"]);
    assert_eq!(missing.status.code(), Some(1));

    // The bound pod is gone at once only when forced (no kubelet confirms it); the node and
    // its lease are not in the namespace.
    k(&[
        "delete",
        "pod",
        "web",
        "-n",
        ns,
        "--grace-period=0",
        "--force",
    ]);
    k(&["delete", "node", &node]);
    k(&["delete", "lease", &node, "-n", "kube-node-lease"]);
    k(&[
        "delete",
        "events",
        &format!("{node}.1"),
        &format!("{node}.2"),
        "-n",
        "default",
    ]);
}
