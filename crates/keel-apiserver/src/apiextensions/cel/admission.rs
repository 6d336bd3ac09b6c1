//! Compiling the CEL expressions of admission configuration, as
//! `k8s.io/apiserver/pkg/admission/plugin/cel/compile.go` (`CompileCELExpression`) and its
//! composited compiler (`composition.go`) do for a ValidatingAdmissionPolicy's validations,
//! messageExpressions, auditAnnotations, matchConditions and variables and a webhook's
//! matchConditions.
//!
//! The environment declares `object` and `oldObject` (dyn), `request` (upstream's
//! `BuildRequestType`: `kind`, `resource`, `subResource`, `requestKind`,
//! `requestResource`, `requestSubResource`, `name`, `namespace`, `operation`, `userInfo`,
//! `dryRun`, `options`), `namespaceObject` (`BuildNamespaceType`: `metadata`, `spec`,
//! `status`), and, as the expression's place asks, `params` (dyn), `authorizer` with
//! `authorizer.requestResource` (the authorization library, `authz`) and `variables` (the
//! policy's variables compiled before this expression, each of the type its expression
//! has). Errors are upstream's details: `compilation failed: ERROR: <input>:L:C: ...` for
//! an expression that does not parse or check, `must evaluate to bool but got int` for
//! one of the wrong type (the type must be exactly the one asked for: an expression of
//! type `dyn`, as `object.spec.paused`, is not a bool).
//!
//! The text after `compilation failed: ` is keel's: the position, the caret line and the
//! words of a type error are cel-go's, but a syntax error's words come from the `cel`
//! crate's parser, not from cel-go's ANTLR one (`Syntax error: mismatched input ...`).
//! Upstream estimates no cost for these expressions when they are written (only CRD rules
//! are refused for their estimated cost), so none is estimated here.

use std::rc::Rc;
use std::sync::LazyLock;

use serde_json::{Value, json};

use super::authz::Authz;
use super::check::{Checker, OBJECT_TYPE_NAME, Ty, UNBOUNDED};
use super::compile::{parse_rendered, rendered_check_errors};

/// The type an expression must have (upstream's `ReturnTypes` of each expression kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Returns {
    /// A validation's expression or a matchCondition: `bool`.
    Bool,
    /// A messageExpression: `string`.
    String,
    /// An auditAnnotation's valueExpression: `string` or `null`.
    StringOrNull,
    /// A variable: any type.
    Any,
}

impl Returns {
    fn accepts(self, name: &str) -> bool {
        match self {
            Returns::Bool => name == "bool",
            Returns::String => name == "string",
            Returns::StringOrNull => name == "string" || name == "null_type",
            Returns::Any => true,
        }
    }

    /// Upstream's `must evaluate to ...` reason.
    fn reason(self, got: &str) -> String {
        match self {
            Returns::Bool => format!("must evaluate to bool but got {got}"),
            Returns::String => format!("must evaluate to string but got {got}"),
            _ => format!("must evaluate to one of [string null_type] but got {got}"),
        }
    }
}

/// Which optional variables an expression sees (upstream's `OptionalVariableDeclarations`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Declarations {
    /// `params` (the policy has a `paramKind`).
    pub params: bool,
    /// `authorizer` and `authorizer.requestResource`.
    pub authorizer: bool,
}

/// Whether `name` can name a variable (upstream's `isCELIdentifier`): `[_a-zA-Z][_a-zA-Z0-9]*`
/// and not one of CEL's reserved words.
pub fn is_cel_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    let first = chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic());
    first
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        && !super::schema::RESERVED.contains(&name)
}

/// A schema of a declared object type: its CEL name and its fields.
fn object(name: &str, properties: Value) -> Value {
    json!({"type": "object", OBJECT_TYPE_NAME: name, "properties": properties})
}

fn string() -> Value {
    json!({"type": "string"})
}

fn strings() -> Value {
    json!({"type": "array", "items": string()})
}

fn timestamp() -> Value {
    json!({"type": "string", "format": "date-time"})
}

/// Upstream's `BuildRequestType`: `kubernetes.AdmissionRequest`.
static REQUEST: LazyLock<Value> = LazyLock::new(|| {
    let gvk = object(
        "kubernetes.GroupVersionKind",
        json!({"group": string(), "version": string(), "kind": string()}),
    );
    let gvr = object(
        "kubernetes.GroupVersionResource",
        json!({"group": string(), "version": string(), "resource": string()}),
    );
    let user = object(
        "kubernetes.UserInfo",
        json!({"username": string(), "uid": string(), "groups": strings(),
            "extra": {"type": "object", "additionalProperties": strings()}}),
    );
    object(
        "kubernetes.AdmissionRequest",
        json!({"kind": gvk, "resource": gvr, "subResource": string(), "requestKind": gvk,
            "requestResource": gvr, "requestSubResource": string(), "name": string(),
            "namespace": string(), "operation": string(), "userInfo": user,
            "dryRun": {"type": "boolean"}, "options": {}}),
    )
});

/// Upstream's `BuildNamespaceType`: `kubernetes.Namespace`.
static NAMESPACE: LazyLock<Value> = LazyLock::new(|| {
    let map = json!({"type": "object", "additionalProperties": string()});
    let metadata = object(
        "kubernetes.NamespaceMetadata",
        json!({"name": string(), "generateName": string(), "namespace": string(),
            "labels": map, "annotations": map, "UID": string(),
            "creationTimestamp": timestamp(), "deletionGracePeriodSeconds": {"type": "integer"},
            "deletionTimestamp": timestamp(), "generation": {"type": "integer"},
            "resourceVersion": string(), "finalizers": strings()}),
    );
    let spec = object("kubernetes.NamespaceSpec", json!({"finalizers": strings()}));
    let condition = object(
        "kubernetes.NamespaceCondition",
        json!({"status": string(), "type": string(), "lastTransitionTime": timestamp(),
            "message": string(), "reason": string()}),
    );
    let status = object(
        "kubernetes.NamespaceStatus",
        json!({"conditions": {"type": "array", "items": condition}, "phase": string()}),
    );
    object(
        "kubernetes.Namespace",
        json!({"metadata": metadata, "spec": spec, "status": status}),
    )
});

/// Compiles the expressions of one admission object in order, keeping the types of the
/// variables compiled so far (upstream's `CompositedCompiler` when `composition`, its plain
/// `compiler` otherwise: then `variables` is not declared).
pub struct Compiler {
    variables: Option<Vec<(String, Ty<'static>)>>,
}

impl Compiler {
    /// A compiler; `composition` when the policy declares variables.
    pub fn new(composition: bool) -> Self {
        Compiler {
            variables: composition.then(Vec::new),
        }
    }

    fn declared(&self, decls: Declarations) -> Vec<(String, Ty<'static>)> {
        let dyn_ty = || Ty::Dyn(UNBOUNDED);
        let mut declared = vec![
            ("object".to_string(), dyn_ty()),
            ("oldObject".to_string(), dyn_ty()),
            ("namespaceObject".to_string(), Ty::Obj(&NAMESPACE, false)),
            ("request".to_string(), Ty::Obj(&REQUEST, false)),
        ];
        if decls.params {
            declared.push(("params".to_string(), dyn_ty()));
        }
        if decls.authorizer {
            declared.push(("authorizer".to_string(), Ty::Authz(Authz::Authorizer)));
        }
        if let Some(vars) = &self.variables {
            declared.push(("variables".to_string(), Ty::Vars(Rc::new(vars.clone()))));
        }
        declared
    }

    fn check(
        &self,
        source: &str,
        decls: Declarations,
        returns: Returns,
    ) -> (Ty<'static>, Result<(), String>) {
        let program = match parse_rendered(source) {
            Ok(p) => p,
            Err(issues) => return (Ty::Dyn(0), Err(format!("compilation failed: {issues}"))),
        };
        let mut checker = Checker::declaring(self.declared(decls));
        let (ty, _) = checker.expr(program.expression());
        if let Some(issues) = rendered_check_errors(source, &program, &checker.errors) {
            return (Ty::Dyn(0), Err(format!("compilation failed: {issues}")));
        }
        match ty.cel_name() {
            Some(name) if !returns.accepts(&name) => {
                let reason = returns.reason(&name);
                (ty, Err(reason))
            }
            _ => (ty, Ok(())),
        }
    }

    /// Compiles one expression that must be of type `returns`; the error is upstream's
    /// detail (the field error is Invalid, with the expression as its value).
    pub fn compile(
        &self,
        source: &str,
        decls: Declarations,
        returns: Returns,
    ) -> Result<(), String> {
        self.check(source, decls, returns).1
    }

    /// Compiles the variable `name` and declares it, with the type its expression has (dyn
    /// when it does not compile), for the expressions compiled after it.
    pub fn compile_variable(
        &mut self,
        name: &str,
        source: &str,
        decls: Declarations,
    ) -> Result<(), String> {
        let (ty, result) = self.check(source, decls, Returns::Any);
        let ty = if result.is_ok() {
            ty
        } else {
            Ty::Dyn(UNBOUNDED)
        };
        if let Some(vars) = &mut self.variables {
            vars.push((name.to_string(), ty));
        }
        result
    }
}
