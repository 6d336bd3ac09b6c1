//! The type check and cost of Kubernetes' authorization library
//! (`k8s.io/apiserver/pkg/cel/library/authz.go`, with the selectors of
//! `AuthzSelectors`), which admission expressions reach through the `authorizer` variable:
//! `authorizer.group('apps').resource('deployments').namespace('ns').check('create').allowed()`,
//! `authorizer.path('/healthz').check('get').reason()`, `authorizer.serviceAccount(ns,
//! name)`, `authorizer.requestResource.check('update')`. Costs are upstream's library
//! estimator's (`library/cost.go`): a `check` 350,000 (two per expression fit the per-call
//! limit), a selector a tenth of its length, every other call 1. keel stores admission
//! policies without running them, so the library is declared for compiling only.

use super::check::{Ty, ceil_div};

/// The library's types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Authz {
    /// `authorizer`, or what `serviceAccount` gives.
    Authorizer,
    /// What `path` gives.
    PathCheck,
    /// What `group` gives.
    GroupCheck,
    /// `authorizer.requestResource`, or what `resource` gives.
    ResourceCheck,
    /// What `check` gives.
    Decision,
}

impl Authz {
    /// cel-go's name of the type.
    pub(super) fn name(self) -> &'static str {
        match self {
            Authz::Authorizer => "kubernetes.authorization.Authorizer",
            Authz::PathCheck => "kubernetes.authorization.PathCheck",
            Authz::GroupCheck => "kubernetes.authorization.GroupCheck",
            Authz::ResourceCheck => "kubernetes.authorization.ResourceCheck",
            Authz::Decision => "kubernetes.authorization.Decision",
        }
    }

    /// The qualified variable a field selection names: `authorizer.requestResource`.
    pub(super) fn field(self, name: &str) -> Option<Authz> {
        (self == Authz::Authorizer && name == "requestResource").then_some(Authz::ResourceCheck)
    }
}

/// The cost of a `check` (upstream: "set to allow for only two authorization checks per
/// expression").
const CHECK_COST: u64 = 350_000;

/// The receiver type, argument count and result of each of the library's member functions.
fn overloads(name: &str) -> &'static [(Authz, usize, Option<Authz>)] {
    use Authz::*;
    match name {
        "path" => &[(Authorizer, 1, Some(PathCheck))],
        "group" => &[(Authorizer, 1, Some(GroupCheck))],
        "serviceAccount" => &[(Authorizer, 2, Some(Authorizer))],
        "resource" => &[(GroupCheck, 1, Some(ResourceCheck))],
        "subresource" | "namespace" | "name" | "fieldSelector" | "labelSelector" => {
            &[(ResourceCheck, 1, Some(ResourceCheck))]
        }
        "check" => &[
            (PathCheck, 1, Some(Decision)),
            (ResourceCheck, 1, Some(Decision)),
        ],
        "allowed" | "errored" | "reason" | "error" => &[(Decision, 0, None)],
        _ => &[],
    }
}

/// The result type of a decision accessor.
fn accessor<'s>(name: &str) -> Ty<'s> {
    match name {
        "allowed" | "errored" => Ty::Bool,
        _ => Ty::Str(super::check::UNBOUNDED),
    }
}

/// The result type and own cost of the library's function `name` called on `args` (the
/// receiver first), or cel-go's refusal when no overload fits; `None` when `name` is not
/// one of the library's functions or is called without a receiver.
pub(super) fn function<'s>(
    name: &str,
    member: bool,
    args: &[Ty<'s>],
) -> Option<Result<(Ty<'s>, u64), String>> {
    let candidates = overloads(name);
    if candidates.is_empty() || !member {
        return None;
    }
    let (receiver, rest) = args.split_first()?;
    let strings = rest.iter().all(|a| matches!(a, Ty::Str(_) | Ty::Dyn(_)));
    let fits = |want: Authz| match receiver {
        Ty::Authz(a) => *a == want,
        Ty::Dyn(_) => true,
        _ => false,
    };
    let found = candidates
        .iter()
        .find(|(want, n, _)| fits(*want) && *n == rest.len() && strings);
    let Some((_, _, result)) = found else {
        let named = |t: &Ty| t.cel_name().unwrap_or_else(|| "dyn".to_string());
        let names: Vec<String> = rest.iter().map(named).collect();
        let receiver = named(receiver);
        return Some(Err(format!(
            "found no matching overload for '{name}' applied to '{receiver}.({})'",
            names.join(", ")
        )));
    };
    let cost = match name {
        "check" => CHECK_COST,
        "fieldSelector" | "labelSelector" => ceil_div(rest[0].len(), 10),
        _ => 1,
    };
    let ty = match result {
        Some(a) => Ty::Authz(*a),
        None => accessor(name),
    };
    Some(Ok((ty, cost)))
}
