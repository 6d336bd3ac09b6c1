//! The CEL expressions of admissionregistration.k8s.io objects, validated as
//! `pkg/apis/admissionregistration/validation/validation.go` validates them: a
//! ValidatingAdmissionPolicy's `matchConditions`, `variables`, `validations` (expression,
//! messageExpression, message, reason) and `auditAnnotations` (key, valueExpression), and
//! a webhook's `matchConditions`, each expression compiled in the environment its place
//! declares ([`crate::apiextensions::cel::admission`]).
//!
//! On an update upstream does not check a policy's matchConditions again when neither
//! they nor the `paramKind` changed (a webhook configuration's, when no webhook's changed),
//! and compiles every other expression the stored object already had in its
//! `StoredExpressions` environment, the one that accepts whatever the server accepted
//! before, so that a stored object stays updatable. keel's environment is not versioned:
//! what it accepted before is what an earlier keel stored unchecked, so an expression the
//! stored object already had is compiled (for the type a variable gives) but its errors
//! are not reported.

use std::collections::HashSet;

use serde_json::Value;

use crate::apiextensions::cel::admission::{Compiler, Declarations, Returns, is_cel_identifier};
use crate::apimachinery::validation::is_qualified_name;
use crate::registry::storage_k8s_io::fields::{items, str_at};
use crate::storage::FieldError;

/// The most matchConditions one policy or webhook has.
const MAX_MATCH_CONDITIONS: usize = 64;

/// The most auditAnnotations one policy has (`maxAuditAnnotations`).
const MAX_AUDIT_ANNOTATIONS: usize = 20;

/// The longest auditAnnotation valueExpression (`maxAuditAnnotationValueExpressionLength`).
const MAX_VALUE_EXPRESSION_LENGTH: usize = 5 * 1024;

/// `supportedValidationPolicyReason`, sorted.
const REASONS: [&str; 3] = ["Forbidden", "Invalid", "RequestEntityTooLarge"];

/// The expressions the stored object had (upstream's `preexistingExpressions`), by kind.
#[derive(Default)]
pub struct Preexisting<'a> {
    match_conditions: HashSet<&'a str>,
    validations: HashSet<&'a str>,
    messages: HashSet<&'a str>,
    audit_values: HashSet<&'a str>,
}

impl<'a> Preexisting<'a> {
    /// A policy's (`findValidatingPolicyPreexistingExpressions`).
    pub fn of_policy(old: &'a Value) -> Self {
        let mut p = Preexisting::default();
        for mc in items(old, "/spec/matchConditions") {
            p.match_conditions.insert(str_at(mc, "/expression"));
        }
        for v in items(old, "/spec/validations") {
            p.validations.insert(str_at(v, "/expression"));
            let m = str_at(v, "/messageExpression");
            if !m.is_empty() {
                p.messages.insert(m);
            }
        }
        for a in items(old, "/spec/auditAnnotations") {
            p.audit_values.insert(str_at(a, "/valueExpression"));
        }
        p
    }

    /// A webhook configuration's (`findValidatingPreexistingExpressions`).
    pub fn of_webhooks(old: &'a Value) -> Self {
        let mut p = Preexisting::default();
        for hook in items(old, "/webhooks") {
            for mc in items(hook, "/matchConditions") {
                p.match_conditions.insert(str_at(mc, "/expression"));
            }
        }
        p
    }
}

/// What validating a policy's or webhook's expressions takes (upstream's
/// `validationOptions`, the parts about expressions).
#[derive(Default)]
pub struct Options<'a> {
    /// `ignoreMatchConditions`: an update that changed none of them.
    pub ignore_match_conditions: bool,
    /// `allowParamsInMatchConditions`: the policy has a `paramKind`.
    pub params: bool,
    /// The stored object's expressions, on an update.
    pub preexisting: Preexisting<'a>,
}

impl Options<'_> {
    /// The optional variables an expression sees: `params` with a `paramKind`, and the
    /// `authorizer` where asked for.
    fn decls(&self, authorizer: bool) -> Declarations {
        Declarations {
            params: self.params,
            authorizer,
        }
    }
}

/// Compiles `source` (at `path`, shown as `shown`) and gives the field error upstream's
/// `convertCELErrorToValidationError` makes of a compile error, unless the expression
/// was `stored`.
fn compile_at(
    compiler: &Compiler,
    path: &str,
    (source, shown): (&str, &str),
    stored: bool,
    decls: Declarations,
    returns: Returns,
) -> Option<FieldError> {
    match compiler.compile(source, decls, returns) {
        Err(detail) if !stored => Some(FieldError::invalid(path, shown, &detail)),
        _ => None,
    }
}

/// `ValidateQualifiedName`.
fn qualified_name(value: &str, path: &str) -> Vec<FieldError> {
    is_qualified_name(value)
        .iter()
        .map(|m| FieldError::invalid(path, value, m))
        .collect()
}

/// `validateMatchConditions`.
pub fn match_conditions(conditions: &[Value], path: &str, opts: &Options) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if opts.ignore_match_conditions {
        return errors;
    }
    if conditions.len() > MAX_MATCH_CONDITIONS {
        errors.push(FieldError::too_many(
            path,
            conditions.len(),
            MAX_MATCH_CONDITIONS,
        ));
    }
    let compiler = Compiler::new(false);
    let mut names: HashSet<&str> = HashSet::new();
    for (i, mc) in conditions.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let written = str_at(mc, "/expression");
        let expression = written.trim();
        let expression_at = format!("{at}.expression");
        if expression.is_empty() {
            errors.push(FieldError::required(&expression_at, ""));
        } else {
            // Found as written, as upstream's set of preexisting expressions holds them.
            let stored = opts.preexisting.match_conditions.contains(written);
            let (source, decls) = ((expression, expression), opts.decls(true));
            let e = compile_at(
                &compiler,
                &expression_at,
                source,
                stored,
                decls,
                Returns::Bool,
            );
            errors.extend(e);
        }
        let name = str_at(mc, "/name");
        if name.is_empty() {
            errors.push(FieldError::required(&format!("{at}.name"), ""));
        } else {
            errors.extend(qualified_name(name, &format!("{at}.name")));
            if !names.insert(name) {
                errors.push(FieldError::duplicate(&format!("{at}.name"), name));
            }
        }
    }
    errors
}

/// The expressions of a ValidatingAdmissionPolicy's spec (`spec` of `policy`): its
/// matchConditions, variables, validations and auditAnnotations, as
/// `validateValidatingAdmissionPolicySpec` checks them after its failurePolicy, paramKind and
/// matchConstraints.
pub fn policy(policy: &Value, opts: &Options) -> Vec<FieldError> {
    let mut errors = match_conditions(
        items(policy, "/spec/matchConditions"),
        "spec.matchConditions",
        opts,
    );
    let variables = items(policy, "/spec/variables");
    let mut compiler = Compiler::new(!variables.is_empty());
    for (i, v) in variables.iter().enumerate() {
        let at = format!("spec.variables[{i}]");
        let name = str_at(v, "/name");
        if name.trim().is_empty() {
            errors.push(FieldError::required(
                &format!("{at}.name"),
                "name is not specified",
            ));
        } else if !is_cel_identifier(name) {
            let detail = "name is not a valid CEL identifier";
            errors.push(FieldError::invalid(&format!("{at}.name"), name, detail));
        }
        if let Some((expression, expression_at)) = expression_of(v, &at, &mut errors) {
            // Upstream looks a variable up among the stored validations' expressions.
            let stored = opts.preexisting.validations.contains(expression);
            let result = compiler.compile_variable(name, expression, opts.decls(true));
            if let Err(detail) = result
                && !stored
            {
                errors.push(FieldError::invalid(&expression_at, expression, &detail));
            }
        }
    }
    let validations = items(policy, "/spec/validations");
    let audit = items(policy, "/spec/auditAnnotations");
    if validations.is_empty() && audit.is_empty() {
        let detail = "validations or auditAnnotations must contain at least one item";
        errors.push(FieldError::required("spec.validations", detail));
        errors.push(FieldError::required("spec.auditAnnotations", detail));
        return errors;
    }
    for (i, v) in validations.iter().enumerate() {
        errors.extend(validation(
            &compiler,
            v,
            &format!("spec.validations[{i}]"),
            opts,
        ));
    }
    if audit.len() > MAX_AUDIT_ANNOTATIONS {
        let detail = format!("must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations");
        errors.push(FieldError::invalid_omitted(
            "spec.auditAnnotations",
            &detail,
        ));
    }
    let name = str_at(policy, "/metadata/name");
    let mut keys: HashSet<&str> = HashSet::new();
    for (i, a) in audit.iter().enumerate() {
        let at = format!("spec.auditAnnotations[{i}]");
        errors.extend(audit_annotation(&compiler, name, a, &at, opts));
        let key = str_at(a, "/key");
        if !keys.insert(key) {
            errors.push(FieldError::duplicate(&format!("{at}.key"), key));
        }
    }
    errors
}

/// The `expression` of a variable or validation at `at`, with its path; none, and
/// upstream's `expression is not specified`, when it is blank.
fn expression_of<'v>(
    v: &'v Value,
    at: &str,
    errors: &mut Vec<FieldError>,
) -> Option<(&'v str, String)> {
    let expression = str_at(v, "/expression");
    let path = format!("{at}.expression");
    if expression.trim().is_empty() {
        errors.push(FieldError::required(&path, "expression is not specified"));
        return None;
    }
    Some((expression, path))
}

fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

/// `validateValidation`.
fn validation(compiler: &Compiler, v: &Value, at: &str, opts: &Options) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some((expression, expression_at)) = expression_of(v, at, &mut errors) {
        let stored = opts.preexisting.validations.contains(expression);
        let (source, decls) = ((expression, expression), opts.decls(true));
        let e = compile_at(
            compiler,
            &expression_at,
            source,
            stored,
            decls,
            Returns::Bool,
        );
        errors.extend(e);
    }
    let message_expression = str_at(v, "/messageExpression");
    let message_expression_at = format!("{at}.messageExpression");
    if !message_expression.is_empty() && message_expression.trim().is_empty() {
        let detail = "must be non-empty if specified";
        errors.push(FieldError::invalid(
            &message_expression_at,
            message_expression,
            detail,
        ));
    } else if !message_expression.trim().is_empty() {
        // A messageExpression sees no authorizer.
        let stored = opts.preexisting.messages.contains(message_expression);
        let source = (message_expression, message_expression);
        let at = &message_expression_at;
        let e = compile_at(
            compiler,
            at,
            source,
            stored,
            opts.decls(false),
            Returns::String,
        );
        errors.extend(e);
    }
    let message = str_at(v, "/message");
    let message_at = format!("{at}.message");
    if !message.is_empty() && message.trim().is_empty() {
        let detail = "message must be non-empty if specified";
        errors.push(FieldError::invalid(&message_at, message, detail));
    } else if has_newlines(message.trim()) {
        let detail = "message must not contain line breaks";
        errors.push(FieldError::invalid(&message_at, message, detail));
    }
    if let Some(reason) = v.get("reason").and_then(Value::as_str)
        && !REASONS.contains(&reason)
    {
        errors.push(FieldError::not_supported(
            &format!("{at}.reason"),
            reason,
            &REASONS,
        ));
    }
    errors
}

/// `validateAuditAnnotation`.
fn audit_annotation(
    compiler: &Compiler,
    policy_name: &str,
    a: &Value,
    at: &str,
    opts: &Options,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let key = str_at(a, "/key");
    let key_at = format!("{at}.key");
    if policy_name.is_empty() {
        let detail = "requires metadata.name be non-empty";
        errors.push(FieldError::invalid(&key_at, key, detail));
    } else {
        errors.extend(qualified_name(&format!("{policy_name}/{key}"), &key_at));
    }
    let value = str_at(a, "/valueExpression");
    let trimmed = value.trim();
    let value_at = format!("{at}.valueExpression");
    if trimmed.is_empty() {
        let detail = "valueExpression is not specified";
        errors.push(FieldError::required(&value_at, detail));
    } else if trimmed.len() > MAX_VALUE_EXPRESSION_LENGTH {
        let detail = format!("must not exceed {MAX_VALUE_EXPRESSION_LENGTH} bytes in length");
        errors.push(FieldError::required(&value_at, &detail));
    } else {
        let stored = opts.preexisting.audit_values.contains(value);
        let (source, decls) = ((trimmed, value), opts.decls(true));
        let e = compile_at(
            compiler,
            &value_at,
            source,
            stored,
            decls,
            Returns::StringOrNull,
        );
        errors.extend(e);
    }
    errors
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::policies::ValidatingAdmissionPolicies;
    use super::super::webhooks::ValidatingWebhookConfigurations;
    use crate::registry::Strategy;
    use crate::registry::rules::messages;

    fn policy(spec: serde_json::Value) -> serde_json::Value {
        let mut spec = spec;
        spec["matchConstraints"] = json!({"resourceRules": [{"operations": ["CREATE"],
            "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}]});
        let mut p = json!({"metadata": {"name": "p"}, "spec": spec});
        ValidatingAdmissionPolicies.set_defaults(&mut p);
        p
    }

    #[test]
    fn every_expression_of_a_policy_is_compiled_at_its_path() {
        let p = policy(json!({
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConditions": [{"name": "m", "expression": "'a'"},
                {"name": "m", "expression": " "}],
            "variables": [{"name": "replicas", "expression": "object.spec.replicas"},
                {"name": "1x", "expression": "variables.later"},
                {"name": "later", "expression": "params.data.max"}],
            "validations": [{"expression": "object.x =="},
                {"expression": "variables.replicas <= int(variables.later)",
                 "messageExpression": "authorizer.path('/x').check('get').reason()",
                 "message": " ", "reason": "Conflict"}],
            "auditAnnotations": [{"key": "a", "valueExpression": "1"},
                {"key": "a", "valueExpression": "'x'"}]
        }));
        let errors = messages(&ValidatingAdmissionPolicies.validate(&p));
        let syntax = "spec.validations[0].expression: Invalid value: \"object.x ==\": compilation failed: ERROR: <input>:1:";
        assert_eq!(
            errors.iter().filter(|e| e.starts_with(syntax)).count(),
            1,
            "{errors:#?}"
        );
        let others: Vec<&String> = errors.iter().filter(|e| !e.starts_with(syntax)).collect();
        assert_eq!(
            others,
            [
                "spec.matchConditions[0].expression: Invalid value: \"'a'\": must evaluate to bool but got string",
                "spec.matchConditions[1].expression: Required value",
                "spec.matchConditions[1].name: Duplicate value: \"m\"",
                "spec.variables[1].name: Invalid value: \"1x\": name is not a valid CEL identifier",
                "spec.variables[1].expression: Invalid value: \"variables.later\": compilation failed: ERROR: <input>:1:10: undefined field 'later'\n | variables.later\n | .........^",
                "spec.validations[1].messageExpression: Invalid value: \"authorizer.path('/x').check('get').reason()\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'authorizer' (in container '')\n | authorizer.path('/x').check('get').reason()\n | ^",
                "spec.validations[1].message: Invalid value: \" \": message must be non-empty if specified",
                "spec.validations[1].reason: Unsupported value: \"Conflict\": supported values: \"Forbidden\", \"Invalid\", \"RequestEntityTooLarge\"",
                "spec.auditAnnotations[0].valueExpression: Invalid value: \"1\": must evaluate to one of [string null_type] but got int",
                "spec.auditAnnotations[1].key: Duplicate value: \"a\"",
            ]
        );
    }

    #[test]
    fn an_update_keeps_stored_expressions_and_unchanged_match_conditions() {
        // As stored before expressions were compiled.
        let old = policy(json!({
            "matchConditions": [{"name": "m", "expression": "'a'"}],
            "validations": [{"expression": "object.x ==", "messageExpression": "1"}]
        }));
        let mut new = old.clone();
        new["spec"]["validations"]
            .as_array_mut()
            .unwrap()
            .push(json!({"expression": "object.y"}));
        assert_eq!(
            messages(&ValidatingAdmissionPolicies.validate_update(&new, &old)),
            [
                "spec.validations[1].expression: Invalid value: \"object.y\": must evaluate to bool but got dyn"
            ]
        );
        // A new matchCondition is checked, the stored one is not refused.
        new["spec"]["validations"].as_array_mut().unwrap().pop();
        new["spec"]["matchConditions"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "n", "expression": "params.x"}));
        assert_eq!(
            messages(&ValidatingAdmissionPolicies.validate_update(&new, &old)),
            [
                "spec.matchConditions[1].expression: Invalid value: \"params.x\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n | params.x\n | ^"
            ]
        );
        // With a paramKind, `params` is declared.
        new["spec"]["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        assert_eq!(
            messages(&ValidatingAdmissionPolicies.validate_update(&new, &old)),
            [
                "spec.matchConditions[1].expression: Invalid value: \"params.x\": must evaluate to bool but got dyn"
            ]
        );
        assert_eq!(
            messages(&ValidatingAdmissionPolicies.validate(&old)).len(),
            3
        );
    }

    #[test]
    fn a_webhooks_match_conditions_are_compiled_without_params() {
        let mut hooks = json!({"webhooks": [{"name": "v.example.com", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "clientConfig": {"url": "https://v.example.com"},
            "matchConditions": [
                {"name": "exclude-leases", "expression": "!(request.resource.group == 'coordination.k8s.io' && request.resource.resource == 'leases')"},
                {"name": "rbac", "expression": "authorizer.group('rbac.authorization.k8s.io').resource('clusterroles').check('update').allowed()"},
                {"name": "Bad Name", "expression": "params.x"}]}]});
        ValidatingWebhookConfigurations.set_defaults(&mut hooks);
        assert_eq!(
            messages(&ValidatingWebhookConfigurations.validate(&hooks)),
            [
                "webhooks[0].matchConditions[2].expression: Invalid value: \"params.x\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n | params.x\n | ^",
                "webhooks[0].matchConditions[2].name: Invalid value: \"Bad Name\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ]
        );
        // Unchanged on an update, they are not checked again.
        assert!(
            ValidatingWebhookConfigurations
                .validate_update(&hooks, &hooks)
                .is_empty()
        );
    }
}
