//! certificates.k8s.io/v1 CertificateSigningRequests (`csr`), cluster-scoped, with the
//! subresources `status` and `approval`, as `pkg/registry/certificates/certificates/strategy.go`
//! has them: a new request's requestor fields (`username`, `uid`, `groups`, `extra`) are the
//! requesting user's, whatever the client sent, and its status is emptied; an update of the
//! object keeps the stored spec and status; an update of `status` keeps the spec and the
//! Approved and Denied conditions (it sets the certificate); an update of `approval` keeps all
//! but the conditions (what `kubectl certificate approve` and `deny` write). Defaults from
//! `pkg/apis/certificates/v1/defaults.go` (a condition's `status` True); validation in
//! [`validation`]; printed as `printCertificateSigningRequest` (NAME AGE SIGNERNAME REQUESTOR
//! REQUESTEDDURATION CONDITION).

mod validation;

use serde_json::{Value, json};

use crate::apimachinery::time::{Time, human_duration_secs};
use crate::http::auth::User;
use crate::registry::defaults::{as_map, default_value, object_entry};
use crate::registry::storage_k8s_io::fields::{items, present, str_at};
use crate::registry::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, age, meta_str};
use crate::storage::FieldError;
use validation::{
    validate_approval_update, validate_create, validate_status_update, validate_update,
};

/// The CertificateSigningRequest strategy.
pub struct CertificateSigningRequests;

static INFO: ResourceInfo = ResourceInfo {
    short_names: &["csr"],
    namespaced: false,
    status: true,
    ..ResourceInfo::new(
        "certificates.k8s.io",
        "v1",
        "CertificateSigningRequest",
        "certificatesigningrequests",
        "certificatesigningrequest",
    )
};

/// The subresource through which conditions are approved or denied.
const APPROVAL: &str = "approval";

static COLUMNS: [Column; 6] = [
    NAME_COLUMN,
    AGE_COLUMN,
    Column::string(
        "SignerName",
        0,
        "Requested signer for the request. It is a qualified name in the form: \
            `scope-hostname.io/name`.",
    ),
    Column::string("Requestor", 0, "Base64-encoded PKCS#10 CSR data"),
    Column::string(
        "RequestedDuration",
        0,
        "expirationSeconds is the requested duration of validity of the issued certificate.",
    ),
    Column::string(
        "Condition",
        0,
        "Conditions applied to the request, such as approval or denial.",
    ),
];

/// `extractCSRStatus`: Denied, Approved or Pending, then `,Failed` and `,Issued`.
fn condition_text(obj: &Value) -> String {
    let has = |t: &str| {
        items(obj, "/status/conditions")
            .iter()
            .any(|c| str_at(c, "/type") == t)
    };
    let mut s = if has("Denied") {
        "Denied".to_string()
    } else if has("Approved") {
        "Approved".to_string()
    } else {
        "Pending".to_string()
    };
    if has("Failed") {
        s.push_str(",Failed");
    }
    if !str_at(obj, "/status/certificate").is_empty() {
        s.push_str(",Issued");
    }
    s
}

impl Strategy for CertificateSigningRequests {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    /// Upstream's strategies (`pkg/registry/certificates/certificates/strategy.go`) reset the
    /// spec whatever the path, and what each path may not set of the status.
    fn reset_fields(&self, subresource: &str) -> &'static [&'static [&'static str]] {
        match subresource {
            "" => &[&["spec"], &["status"]],
            "status" => &[&["spec"], &["status", "conditions"]],
            "approval" => &[&["spec"], &["status", "certificate"]],
            _ => &[],
        }
    }

    fn set_defaults(&self, obj: &mut Value) {
        if let Some(Value::Array(list)) = obj.pointer_mut("/status/conditions") {
            for c in list.iter_mut() {
                let c = as_map(c);
                if c.get("status")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .is_empty()
                {
                    c.insert("status".into(), json!("True"));
                }
            }
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        let m = as_map(obj);
        let spec = object_entry(m, "spec");
        for field in ["username", "uid", "groups", "extra"] {
            spec.remove(field);
        }
        m.insert("status".into(), json!({}));
    }

    /// The requestor fields are the requesting user's (left out where empty, as Go's
    /// `omitempty` leaves them).
    fn prepare_for_create_by(&self, obj: &mut Value, user: Option<&User>) {
        let Some(user) = user else {
            return;
        };
        let spec = object_entry(as_map(obj), "spec");
        for (field, value, set) in [
            ("username", json!(user.name), !user.name.is_empty()),
            ("uid", json!(user.uid), !user.uid.is_empty()),
            ("groups", json!(user.groups), !user.groups.is_empty()),
            ("extra", json!(user.extra), !user.extra.is_empty()),
        ] {
            if set {
                spec.insert(field.into(), value);
            }
        }
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        self.set_defaults(new);
        let m = as_map(new);
        match old.get("spec") {
            Some(spec) => m.insert("spec".into(), spec.clone()),
            None => m.remove("spec"),
        };
        default_value(m, "status", json!({}));
    }

    /// `csrStatusStrategy`: the spec is kept (by the store), so are the Approved and Denied
    /// conditions where the update has as many of them as the stored object, and new
    /// conditions get their times.
    fn prepare_for_status_update(&self, new: &mut Value, old: &Value) {
        for kind in ["Approved", "Denied"] {
            preserve_conditions(new, old, kind);
        }
        stamp_conditions(new, old, Time::now());
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate_create(obj)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_update(new, old)
    }

    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_status_update(new, old)
    }

    fn subresources(&self) -> &'static [&'static str] {
        &[APPROVAL]
    }

    /// `csrApprovalStrategy`: the update's conditions, with their times, on the stored
    /// status.
    fn prepare_for_subresource_update(&self, subresource: &str, new: &mut Value, old: &Value) {
        if subresource != APPROVAL {
            return;
        }
        stamp_conditions(new, old, Time::now());
        let conditions = new.pointer("/status/conditions").cloned();
        let mut status = old.get("status").cloned().unwrap_or_else(|| json!({}));
        let fields = as_map(&mut status);
        match conditions {
            Some(c) => fields.insert("conditions".into(), c),
            None => fields.remove("conditions"),
        };
        as_map(new).insert("status".into(), status);
    }

    fn validate_subresource_update(
        &self,
        subresource: &str,
        new: &Value,
        old: &Value,
    ) -> Vec<FieldError> {
        match subresource {
            APPROVAL => validate_approval_update(new, old),
            _ => validate_update(new, old),
        }
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["spec.signerName"]
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let signer = match str_at(obj, "/spec/signerName") {
            "" => "<none>",
            s => s,
        };
        let duration = present(obj, "/spec/expirationSeconds")
            .and_then(Value::as_i64)
            .map_or("<none>".to_string(), human_duration_secs);
        vec![
            Value::from(meta_str(obj, "name")),
            age(obj, now),
            Value::from(signer),
            Value::from(str_at(obj, "/spec/username")),
            Value::from(duration),
            Value::from(condition_text(obj)),
        ]
    }
}

/// `preserveConditionInstances`: where `new` has as many conditions of type `kind` as `old`,
/// they are `old`'s, in `new`'s places.
fn preserve_conditions(new: &mut Value, old: &Value, kind: &str) {
    let kept = validation::conditions_of(old, kind);
    let Some(Value::Array(list)) = new.pointer_mut("/status/conditions") else {
        return;
    };
    let places: Vec<usize> = (0..list.len())
        .filter(|&i| str_at(&list[i], "/type") == kind)
        .collect();
    if places.len() == kept.len() {
        for (i, c) in places.into_iter().zip(kept) {
            list[i] = c.clone();
        }
    }
}

/// `populateConditionTimestamps`: a condition without `lastUpdateTime` gets `now`; one without
/// `lastTransitionTime` gets that of a stored condition of the same type and status, or
/// `now`.
fn stamp_conditions(new: &mut Value, old: &Value, now: Time) {
    let now = now.rfc3339();
    let Some(Value::Array(list)) = new.pointer_mut("/status/conditions") else {
        return;
    };
    let set = |c: &Value, field: &str| !str_at(c, &format!("/{field}")).is_empty();
    for c in list.iter_mut() {
        if !set(c, "lastUpdateTime") {
            as_map(c).insert("lastUpdateTime".into(), json!(now));
        }
        if !set(c, "lastTransitionTime") {
            let same = items(old, "/status/conditions").iter().find(|o| {
                str_at(o, "/type") == str_at(c, "/type")
                    && str_at(o, "/status") == str_at(c, "/status")
                    && set(o, "lastTransitionTime")
            });
            let at = same.map_or(now.clone(), |o| str_at(o, "/lastTransitionTime").into());
            as_map(c).insert("lastTransitionTime".into(), json!(at));
        }
    }
}

#[cfg(test)]
mod tests;
