//! Cases of upstream's `plugin/cel/compile_test.go` (`TestCompileValidatingPolicyExpression`)
//! and of the authorization library's tests, compiled in the admission environment.

use super::admission::{Compiler, Declarations, Returns};

const WITH_PARAMS: Declarations = Declarations {
    params: true,
    authorizer: true,
};

const NO_PARAMS: Declarations = Declarations {
    params: false,
    authorizer: true,
};

fn compiles(expression: &str, decls: Declarations) {
    let result = Compiler::new(false).compile(expression, decls, Returns::Bool);
    assert_eq!(result, Ok(()), "{expression}");
}

fn fails_with(expression: &str, decls: Declarations, wanted: &str) {
    let result = Compiler::new(false).compile(expression, decls, Returns::Bool);
    let error = result.expect_err(expression);
    assert!(error.contains(wanted), "{expression}: {error}");
}

#[test]
fn the_declared_variables_and_libraries_compile() {
    for e in [
        "object.foo < params.x",
        "namespaceObject.metadata.name.startsWith('test')",
        "object.foo == oldObject.foo",
        "object == null || oldObject == null || object.foo == oldObject.foo",
        "object.spec.string.matches('[0-9]+')",
        "object.spec.string.findAll('[0-9]+').size() > 0",
        "object.spec.list.isSorted()",
        "url(object.spec.endpoint).getHostname() in ['ok1', 'ok2']",
    ] {
        compiles(e, WITH_PARAMS);
    }
}

#[test]
fn the_request_is_typed() {
    for e in [
        "request.kind.group == 'example.com' && request.kind.version == 'v1' && request.kind.kind == 'Fake'",
        "request.resource.group == 'example.com' && request.resource.version == 'v1' && request.resource.resource == 'fake' && request.subResource == 'scale'",
        "request.requestKind.group == 'example.com' && request.requestKind.version == 'v1' && request.requestKind.kind == 'Fake'",
        "request.requestResource.group == 'example.com' && request.requestResource.version == 'v1' && request.requestResource.resource == 'fake' && request.requestSubResource == 'scale'",
        "request.name == 'fake-name'",
        "request.namespace == 'fake-namespace'",
        "request.operation == 'CREATE'",
        "request.userInfo.username == 'admin'",
        "request.userInfo.uid == '014fbff9a07c'",
        "request.userInfo.groups == ['system:authenticated', 'my-admin-group']",
        "request.userInfo.extra == {'some-key': ['some-value1', 'some-value2']}",
        "request.dryRun == false",
        "request.options == {'whatever': 'you want'}",
    ] {
        compiles(e, NO_PARAMS);
    }
    for (e, wanted) in [
        ("request.foo1 == 'nope'", "undefined field 'foo1'"),
        ("request.resource.foo2 == 'nope'", "undefined field 'foo2'"),
        (
            "request.requestKind.foo3 == 'nope'",
            "undefined field 'foo3'",
        ),
        (
            "request.requestResource.foo4 == 'nope'",
            "undefined field 'foo4'",
        ),
        ("request.userInfo.foo5 == 'nope'", "undefined field 'foo5'"),
    ] {
        fails_with(e, NO_PARAMS, wanted);
    }
}

#[test]
fn undeclared_names_bad_operands_and_syntax_are_refused() {
    fails_with(
        "object.foo < params.x",
        NO_PARAMS,
        "undeclared reference to 'params'",
    );
    fails_with(
        "object.foo < invalid.x",
        NO_PARAMS,
        "undeclared reference to 'invalid'",
    );
    fails_with(
        "1 || true",
        NO_PARAMS,
        "found no matching overload for '_||_' applied to '(int, bool)'",
    );
    fails_with(
        "1 < 'asdf'",
        NO_PARAMS,
        "found no matching overload for '_<_' applied to '(int, string)'",
    );
    // cel-go words it `Syntax error: missing ')' at '<EOF>'`; the position and the
    // prefix are the same.
    fails_with(
        "'asdf'.contains('x'",
        NO_PARAMS,
        "compilation failed: ERROR: <input>:1:",
    );
    let message = Compiler::new(false)
        .compile("params.x == 1", NO_PARAMS, Returns::Bool)
        .unwrap_err();
    assert_eq!(
        message,
        "compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')\n | params.x == 1\n | ^"
    );
}

#[test]
fn the_result_must_be_of_the_type_asked_for() {
    let c = Compiler::new(false);
    let check = |e: &str, r: Returns| c.compile(e, NO_PARAMS, r);
    assert_eq!(
        check("object.spec.paused", Returns::Bool),
        Err("must evaluate to bool but got dyn".to_string())
    );
    assert_eq!(
        check("1", Returns::Bool),
        Err("must evaluate to bool but got int".to_string())
    );
    assert_eq!(
        check("'a'", Returns::Bool),
        Err("must evaluate to bool but got string".to_string())
    );
    assert_eq!(
        check("1", Returns::StringOrNull),
        Err("must evaluate to one of [string null_type] but got int".to_string())
    );
    assert_eq!(check("null", Returns::StringOrNull), Ok(()));
    assert_eq!(
        check("'x' + string(object.metadata.name)", Returns::String),
        Ok(())
    );
    assert_eq!(check("[1].map(x, x)", Returns::Any), Ok(()));
    assert_eq!(
        check("object.items.map(x, x.name)", Returns::Bool),
        Err("must evaluate to bool but got list(dyn)".to_string())
    );
}

#[test]
fn the_authorizer_is_declared_where_asked_for() {
    for e in [
        "authorizer.group('').resource('pods').namespace('test').check('create').allowed()",
        "authorizer.path('/healthz').check('get').allowed()",
        "authorizer.requestResource.check('custom-verb').allowed()",
        "authorizer.group('apps').resource('deployments').subresource('scale').name('x').check('update').errored()",
        "authorizer.serviceAccount('default', 'builder').group('').resource('pods').fieldSelector('spec.nodeName=n').labelSelector('a=b').check('list').allowed()",
        "authorizer.path('/x').check('get').reason() == '' && authorizer.path('/x').check('get').error() == ''",
    ] {
        compiles(e, NO_PARAMS);
    }
    fails_with(
        "authorizer.path('/x').resource('pods').check('get').allowed()",
        NO_PARAMS,
        "found no matching overload for 'resource' applied to 'kubernetes.authorization.PathCheck.(string)'",
    );
    // A messageExpression has no authorizer.
    let no_authorizer = Declarations::default();
    let message = Compiler::new(false)
        .compile(
            "authorizer.path('/x').check('get').reason()",
            no_authorizer,
            Returns::String,
        )
        .unwrap_err();
    assert_eq!(
        message,
        "compilation failed: ERROR: <input>:1:1: undeclared reference to 'authorizer' (in container '')\n | authorizer.path('/x').check('get').reason()\n | ^"
    );
}

#[test]
fn variables_see_the_ones_before_them_with_their_types() {
    let mut c = Compiler::new(true);
    assert_eq!(
        c.compile_variable("x", "object.spec.replicas > 1", NO_PARAMS),
        Ok(())
    );
    let later = c
        .compile_variable("y", "variables.z", NO_PARAMS)
        .unwrap_err();
    assert!(later.contains("undefined field 'z'"), "{later}");
    assert_eq!(
        c.compile_variable("z", "variables.x && true", NO_PARAMS),
        Ok(())
    );
    // `variables.x` is a bool, so it is a validation on its own.
    assert_eq!(c.compile("variables.x", NO_PARAMS, Returns::Bool), Ok(()));
    assert_eq!(
        c.compile("has(variables.x)", NO_PARAMS, Returns::Bool),
        Ok(())
    );
    let undefined = c
        .compile("variables.x && variables.w", NO_PARAMS, Returns::Bool)
        .unwrap_err();
    assert!(undefined.contains("undefined field 'w'"), "{undefined}");
    // Without variables, `variables` is not declared.
    let stateless = Compiler::new(false)
        .compile("variables.x", NO_PARAMS, Returns::Any)
        .unwrap_err();
    assert!(
        stateless.contains("undeclared reference to 'variables'"),
        "{stateless}"
    );
}
