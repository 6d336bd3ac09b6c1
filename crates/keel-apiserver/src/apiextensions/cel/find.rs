//! Kubernetes' CEL regex library (`k8s.io/apiserver/pkg/cel/library/regex.go`):
//! `'abc 123'.find('[0-9]+')` (the first match, or `''`), `.findAll(re)` (every
//! non-overlapping match, an empty one right after a match skipped, as Go's
//! `FindAllString`) and `.findAll(re, n)` (at most `n` when `n >= 0`). Patterns are RE2, as
//! Go's `regexp` reads them; one that does not compile fails the call with `Illegal regex:
//! error parsing regexp: ...`. Patterns are compiled once ([`crate::apiextensions::go_regex`]).
//!
//! The standard `matches` (`s.matches(re)`, `matches(s, re)`) runs on the same compiled
//! patterns: the `cel` crate's own compiles its pattern on every call with the regex
//! crate's Unicode classes, so a macro turns each call into one of [`MATCHES`], whose
//! error is Go's `regexp` error as cel-go returns it (`error parsing regexp: ...`).

use std::sync::Arc;

use cel::common::ast::{CallExpr, Expr, IdedExpr};
use cel::common::types::{INT_TYPE, STRING_TYPE};
use cel::common::value::CowVal;
use cel::parser::{Macro, MacroExprHelper, ParseError};
use cel::{DeclarationError, Env, ExecutionError, Value};

use super::library::{err, overload, owned, values};

/// The function `matches` calls become (a name no expression can spell).
pub(super) const MATCHES: &str = "@matches";

/// Rewrites a `matches` call (`s.matches(re)` or `matches(s, re)`) into the same call of
/// [`MATCHES`].
fn to_cached(
    helper: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<Option<IdedExpr>, ParseError> {
    let call = CallExpr {
        func_name: MATCHES.to_string(),
        target: target.take().map(Box::new),
        args: std::mem::take(args),
    };
    Ok(Some(helper.next_expr(Expr::Call(call))))
}

/// Registers `find` and `findAll` on `env`, and `matches` on the compiled patterns.
pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_macro(Macro::receiver("matches", 1, to_cached))?;
    env.add_macro(Macro::global("matches", 2, to_cached))?;
    let s = || vec![STRING_TYPE];
    env.add_member_overload(MATCHES, "string_matches_re2", STRING_TYPE, s(), matches)?;
    env.add_overload(
        MATCHES,
        "matches_re2",
        vec![STRING_TYPE, STRING_TYPE],
        matches,
    )?;
    env.add_member_overload("find", "string_find_string", STRING_TYPE, s(), find)?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string",
        STRING_TYPE,
        s(),
        find_all,
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string_int",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        find_all,
    )
}

/// Go's `regexp.Compile` error (`error parsing regexp: ...`) for the commonest mistakes,
/// else the regex crate's words.
fn go_error(pattern: &str, e: &::regex::Error) -> String {
    let text = e.to_string();
    let why = if text.contains("unclosed group") {
        format!("missing closing ): `{pattern}`")
    } else if text.contains("unopened group") {
        format!("unexpected ): `{pattern}`")
    } else if text.contains("unclosed character class") {
        let from = pattern.rfind('[').unwrap_or(0);
        format!("missing closing ]: `{}`", &pattern[from..])
    } else if text.contains("repetition operator missing expression") {
        let op = pattern.chars().find(|c| "*+?".contains(*c)).unwrap_or('*');
        format!("missing argument to repetition operator: `{op}`")
    } else {
        text.lines().last().unwrap_or_default().trim().to_string()
    };
    format!("error parsing regexp: {why}")
}

/// The compiled pattern, or the regex library's `Illegal regex: ...`.
fn compile(pattern: &str, function: &str) -> Result<Arc<::regex::Regex>, ExecutionError> {
    crate::apiextensions::go_regex::compile(pattern).map_err(|e| {
        err(
            function,
            &format!("Illegal regex: {}", go_error(pattern, &e)),
        )
    })
}

overload!(matches, |args| {
    let (s, re) = strings(args, "matches")?;
    let re = crate::apiextensions::go_regex::compile(re)
        .map_err(|e| err("matches", &go_error(re, &e)))?;
    Ok(Value::Bool(re.is_match(s)))
});

fn strings<'a>(args: &'a [Value], function: &str) -> Result<(&'a str, &'a str), ExecutionError> {
    match (args.first(), args.get(1)) {
        (Some(Value::String(s)), Some(Value::String(re))) => Ok((s.as_str(), re.as_str())),
        _ => Err(ExecutionError::no_such_overload(function, Vec::new())),
    }
}

overload!(find, |args| {
    let (s, re) = strings(args, "find")?;
    let found = compile(re, "find")?.find(s).map_or("", |m| m.as_str());
    Ok(Value::from(found.to_string()))
});

overload!(find_all, |args| {
    let (s, re) = strings(args, "findAll")?;
    let limit = match args.get(2) {
        Some(Value::Int(n)) => *n,
        None => -1,
        Some(_) => return Err(ExecutionError::no_such_overload("findAll", Vec::new())),
    };
    let re = compile(re, "findAll")?;
    let all = re.find_iter(s).map(|m| Value::from(m.as_str().to_string()));
    let found: Vec<Value> = match usize::try_from(limit) {
        Ok(n) => all.take(n).collect(),
        Err(_) => all.collect(),
    };
    Ok(Value::List(Arc::new(found)))
});
