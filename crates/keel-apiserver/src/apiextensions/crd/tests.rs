//! Tests of the CRD object's defaults, validation and status.

use serde_json::{Value, json};

use super::*;

fn widget() -> Value {
    let mut crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
                }}},
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                "additionalPrinterColumns": [{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}],
            }],
        },
    });
    set_defaults(&mut crd);
    crd
}

fn messages(errors: Vec<FieldError>) -> Vec<String> {
    errors.iter().map(|e| e.to_string()).collect()
}

#[test]
fn defaults_fill_singular_list_kind_and_conversion() {
    let crd = widget();
    assert_eq!(crd["spec"]["names"]["singular"], "widget");
    assert_eq!(crd["spec"]["names"]["listKind"], "WidgetList");
    assert_eq!(crd["spec"]["conversion"], json!({"strategy": "None"}));
    assert_eq!(messages(validate(&crd)), Vec::<String>::new());
}

#[test]
fn bad_names_groups_versions_and_columns_read_as_upstream_words_them() {
    let mut crd = widget();
    crd["metadata"]["name"] = "widgets.other.com".into();
    crd["spec"]["group"] = "example".into();
    crd["spec"]["scope"] = "Global".into();
    crd["spec"]["names"]["plural"] = "Widgets".into();
    crd["spec"]["names"]["listKind"] = "Widget".into();
    crd["spec"]["versions"][0]["name"] = "V1".into();
    crd["spec"]["versions"][0]["storage"] = false.into();
    crd["spec"]["versions"][0]["subresources"]["scale"]["specReplicasPath"] = ".replicas".into();
    crd["spec"]["versions"][0]["additionalPrinterColumns"][0]["type"] = "int".into();
    let got = messages(validate(&crd));
    let dns1035 = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
    let want = [
        r#"metadata.name: Invalid value: "widgets.other.com": must be spec.names.plural+"."+spec.group"#.to_string(),
        r#"spec.group: Invalid value: "example": should be a domain with at least one dot"#.into(),
        r#"spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced""#.into(),
        format!(r#"spec.names.plural: Invalid value: "Widgets": {dns1035}"#),
        r#"spec.names.listKind: Invalid value: "Widget": kind and listKind may not be the same or parsing become ambiguous"#.into(),
        format!(r#"spec.versions[0].name: Invalid value: "V1": {dns1035}"#),
        r#"spec.versions[0].subresources.scale.specReplicasPath: Invalid value: ".replicas": should be a json path under .spec"#.into(),
        r#"spec.versions[0].additionalPrinterColumns[0].type: Unsupported value: "int": supported values: "integer", "number", "string", "boolean", "date""#.into(),
    ];
    for w in &want {
        assert!(got.contains(w), "missing {w}\n in {got:#?}");
    }
    assert!(
        got.iter()
            .any(|m| m.starts_with("spec.versions: Invalid value: ")
                && m.ends_with("must have exactly one version marked as storage version")),
        "{got:#?}"
    );
    let mut webhook = widget();
    webhook["spec"]["conversion"] = json!({"strategy": "Webhook"});
    assert_eq!(
        messages(validate(&webhook)),
        [
            "spec.conversion.strategy: Forbidden: keel does not call conversion webhooks: use None, which converts by setting apiVersion"
        ]
    );
    let mut no_schema = widget();
    no_schema["spec"]["versions"][0]
        .as_object_mut()
        .unwrap()
        .remove("schema");
    assert_eq!(
        messages(validate(&no_schema)),
        ["spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"]
    );
}

#[test]
fn updates_keep_group_and_scope_and_the_stored_versions() {
    let mut old = widget();
    old["status"] = status(&old, &[], "2026-01-01T00:00:00Z");
    let mut new = old.clone();
    new["spec"]["scope"] = "Cluster".into();
    new["spec"]["versions"][0]["name"] = "v2".into();
    assert_eq!(
        messages(validate_update(&new, &old)),
        [
            r#"spec.scope: Invalid value: "Cluster": field is immutable"#,
            r#"status.storedVersions[0]: Invalid value: "v1": must appear in spec.versions"#,
        ]
    );
}

#[test]
fn names_are_accepted_unless_another_crd_of_the_group_has_them() {
    let now = "2026-01-01T00:00:00Z";
    let mut first = widget();
    first["status"] = status(&first, &[], now);
    assert_eq!(first["status"]["acceptedNames"]["plural"], "widgets");
    assert_eq!(first["status"]["storedVersions"], json!(["v1"]));
    let types: Vec<(&str, &str, &str)> = first["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["type"].as_str().unwrap(),
                c["status"].as_str().unwrap(),
                c["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        types,
        [
            ("NamesAccepted", "True", "NoConflicts"),
            ("Established", "True", "InitialNamesAccepted")
        ]
    );
    let mut second = widget();
    second["metadata"]["name"] = "gadgets.example.com".into();
    second["spec"]["names"] = json!({"plural": "gadgets", "singular": "gadget", "kind": "Gadget",
        "listKind": "GadgetList", "shortNames": ["wd"]});
    let s = status(&second, std::slice::from_ref(&first), now);
    assert_eq!(s["conditions"][0]["status"], "False");
    assert_eq!(s["conditions"][0]["reason"], "ShortNamesConflict");
    assert_eq!(s["conditions"][0]["message"], "\"wd\" is already in use");
    assert_eq!(s["conditions"][1]["status"], "False");
    assert_eq!(s["acceptedNames"]["plural"], "");
    // A transition time stays while the status does.
    let later = status(&first, &[], "2027-01-01T00:00:00Z");
    assert_eq!(later["conditions"][0]["lastTransitionTime"], now);
}

#[test]
fn protected_groups_need_the_api_approval_annotation() {
    let protected = |group: &str, annotation: Option<&str>| {
        let mut crd = widget();
        crd["metadata"]["name"] = json!(format!("widgets.{group}"));
        crd["spec"]["group"] = json!(group);
        if let Some(a) = annotation {
            crd["metadata"]["annotations"] = json!({"api-approved.kubernetes.io": a});
        }
        crd
    };
    let missing = protected("sigs.k8s.io", None);
    assert_eq!(
        messages(validate(&missing)),
        [
            "metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111"
        ]
    );
    let invalid = protected("kubernetes.io", Some("invalid"));
    assert_eq!(
        messages(validate(&invalid)),
        [
            "metadata.annotations[api-approved.kubernetes.io]: Invalid value: \"invalid\": protected groups must have approval annotation \"api-approved.kubernetes.io\" with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"
        ]
    );
    for fine in [
        protected(
            "x.k8s.io",
            Some("https://github.com/kubernetes/kubernetes/pull/78458"),
        ),
        protected("x.k8s.io", Some("unapproved, experimental")),
        protected("k8s.io.example.com", None),
        protected("notk8s.io", None),
    ] {
        assert!(validate(&fine).is_empty(), "{fine}");
    }
    // An update that leaves the state as it was passes, as upstream lets it.
    assert!(validate_update(&invalid, &protected("kubernetes.io", Some("bad"))).is_empty());
    assert_eq!(
        messages(validate_update(
            &missing,
            &protected("sigs.k8s.io", Some("invalid"))
        ))
        .len(),
        1
    );
}
