//! networking.k8s.io/v1 IngressClasses (cluster-scoped): NAME, CONTROLLER, PARAMETERS, AGE
//! (`printIngressClass`, pkg/printers/internalversion/printers.go). Defaults as
//! `SetDefaults_IngressClass` (pkg/apis/networking/v1/defaults.go): a parameters reference
//! without a scope gets `Cluster`. As pkg/registry/networking/ingressclass/strategy.go the
//! generation counts spec changes. Validated as pkg/apis/networking/validation/validation.go
//! does: the controller a domain-prefixed path of at most 250 bytes and immutable, the
//! parameters reference (kind, name, scope, and a namespace exactly when the scope is
//! `Namespace`). The `ingressclass.kubernetes.io/is-default-class` annotation is stored but
//! not acted on (kube's admission plugin sets the default class on new ingresses).

use serde_json::Value;

use super::shared::{object_at, typed_local_object_reference};
use crate::apimachinery::time::Time;
use crate::apimachinery::validation::is_dns1123_label;
use crate::json_pointer::At;
use crate::registry::rules::{domain_prefixed_path, immutable};
use crate::registry::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, text};
use crate::storage::FieldError;

/// The IngressClass strategy.
pub struct IngressClasses;

static INFO: ResourceInfo = ResourceInfo {
    namespaced: false,
    ..ResourceInfo::new(
        "networking.k8s.io",
        "v1",
        "IngressClass",
        "ingressclasses",
        "ingressclass",
    )
};

static COLUMNS: [Column; 4] = [
    NAME_COLUMN,
    Column::string(
        "Controller",
        0,
        "Controller that is responsible for handling this class",
    ),
    Column::string(
        "Parameters",
        0,
        "A reference to a resource with additional parameters",
    ),
    AGE_COLUMN,
];

/// `maxLenIngressClassController`.
const CONTROLLER_MAX: usize = 250;
/// `supportedIngressClassParametersReferenceScopes`, sorted.
const SCOPES: [&str; 2] = ["Cluster", "Namespace"];

/// `validateIngressClassParametersReference`.
fn validate_parameters(params: &Value) -> Vec<FieldError> {
    let path = "spec.parameters";
    let mut errors = typed_local_object_reference(params, path);
    let Some(scope) = params.get("scope").and_then(Value::as_str) else {
        errors.push(FieldError::required(&format!("{path}.scope"), ""));
        return errors;
    };
    let namespace = params.get("namespace").and_then(Value::as_str);
    match scope {
        "Namespace" => match namespace {
            None => errors.push(FieldError::required(
                &format!("{path}.namespace"),
                "`parameters.scope` is set to 'Namespace'",
            )),
            Some(ns) => {
                for problem in is_dns1123_label(ns) {
                    errors.push(FieldError::invalid(
                        &format!("{path}.namespace"),
                        ns,
                        &problem,
                    ));
                }
            }
        },
        "Cluster" if namespace.is_some() => errors.push(FieldError::forbidden(
            &format!("{path}.namespace"),
            "`parameters.scope` is set to 'Cluster'",
        )),
        "Cluster" => {}
        other => errors.push(FieldError::not_supported(
            &format!("{path}.scope"),
            other,
            &SCOPES,
        )),
    }
    errors
}

impl Strategy for IngressClasses {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    /// `SetDefaults_IngressClass`.
    fn set_defaults(&self, obj: &mut Value) {
        let Some(spec) = obj.get_mut("spec") else {
            return;
        };
        if spec.get("parameters").is_some_and(Value::is_object)
            && let Some(params) = object_at(spec, "parameters")
            && params.get("scope").is_none_or(Value::is_null)
        {
            params.insert("scope".into(), "Cluster".into());
        }
    }

    /// `validateIngressClassSpec`.
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let controller = text(obj, "/spec/controller");
        if controller.len() > CONTROLLER_MAX {
            errors.push(FieldError::too_long("spec.controller", CONTROLLER_MAX));
        }
        errors.extend(domain_prefixed_path("spec.controller", controller));
        if let Some(params) = obj.at("/spec/parameters").filter(|v| !v.is_null()) {
            errors.extend(validate_parameters(params));
        }
        errors
    }

    /// `ValidateIngressClassUpdate`: the controller may not change.
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors: Vec<FieldError> = immutable(
            "spec.controller",
            new.at("/spec/controller"),
            old.at("/spec/controller"),
        )
        .into_iter()
        .collect();
        errors.extend(self.validate(new));
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let parameters = match obj.at("/spec/parameters").filter(|v| v.is_object()) {
            None => "<none>".to_string(),
            Some(p) => {
                let mut s = text(p, "/kind").to_string();
                if let Some(group) = p.get("apiGroup").and_then(Value::as_str) {
                    s = format!("{s}.{group}");
                }
                format!("{s}/{}", text(p, "/name"))
            }
        };
        crate::registry::name_age_row(
            obj,
            now,
            [
                Value::from(text(obj, "/spec/controller")),
                Value::from(parameters),
            ],
        )
    }

    fn tracks_generation(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;
    use serde_json::json;

    #[test]
    fn parameters_default_to_cluster_scope() {
        let mut class = json!({"spec": {"controller": "example.com/ingress",
            "parameters": {"kind": "Params", "name": "p"}}});
        IngressClasses.set_defaults(&mut class);
        let expected = json!({"spec": {"controller": "example.com/ingress",
            "parameters": {"kind": "Params", "name": "p", "scope": "Cluster"}}});
        assert_eq!(class, expected);
        let mut none = json!({"spec": {"controller": "example.com/ingress"}});
        IngressClasses.set_defaults(&mut none);
        assert_eq!(none, json!({"spec": {"controller": "example.com/ingress"}}));
        assert!(IngressClasses.validate(&class).is_empty());
        assert!(IngressClasses.tracks_generation());
    }

    #[test]
    fn controllers_and_parameters_are_validated_in_upstream_words() {
        let bad = json!({"spec": {"controller": "nginx",
            "parameters": {"kind": "K", "name": "n", "scope": "Namespace"}}});
        assert_eq!(
            messages(&IngressClasses.validate(&bad)),
            vec![
                "spec.controller: Invalid value: \"nginx\": must be a domain-prefixed path (such \
                 as \"acme.io/foo\")",
                "spec.parameters.namespace: Required value: `parameters.scope` is set to \
                 'Namespace'",
            ]
        );
        let cluster = json!({"spec": {"controller": "a.io/b c",
            "parameters": {"kind": "K", "name": "n", "scope": "Cluster", "namespace": "x"}}});
        assert_eq!(
            messages(&IngressClasses.validate(&cluster)),
            vec![
                "spec.controller: Invalid value: \"b c\": Invalid path (regex used for \
                 validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')",
                "spec.parameters.namespace: Forbidden: `parameters.scope` is set to 'Cluster'",
            ]
        );
        let missing =
            json!({"spec": {"parameters": {"kind": "K", "name": "n", "scope": "Global"}}});
        assert_eq!(
            messages(&IngressClasses.validate(&missing)),
            vec![
                "spec.controller: Required value",
                "spec.parameters.scope: Unsupported value: \"Global\": supported values: \
                 \"Cluster\", \"Namespace\"",
            ]
        );
        let old = json!({"spec": {"controller": "a.io/one"}});
        let new = json!({"spec": {"controller": "a.io/two"}});
        assert_eq!(
            messages(&IngressClasses.validate_update(&new, &old)),
            vec!["spec.controller: Invalid value: \"a.io/two\": field is immutable"]
        );
    }

    #[test]
    fn the_row_names_the_controller_and_parameters() {
        let now = Time(1_780_000_000);
        let class = json!({"metadata": {"name": "nginx", "creationTimestamp": "2026-05-28T20:00:00Z"},
            "spec": {"controller": "k8s.io/ingress-nginx",
                "parameters": {"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "p"}}});
        assert_eq!(
            IngressClasses.cells(&class, now),
            vec![
                json!("nginx"),
                json!("k8s.io/ingress-nginx"),
                json!("IngressParameters.k8s.example.com/p"),
                json!("26m")
            ]
        );
        let plain = json!({"spec": {"controller": "a.io/b"}});
        assert_eq!(IngressClasses.cells(&plain, now)[2], json!("<none>"));
    }
}
