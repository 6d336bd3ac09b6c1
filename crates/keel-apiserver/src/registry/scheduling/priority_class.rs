//! scheduling.k8s.io/v1 PriorityClasses (`pc`, cluster-scoped): NAME, VALUE,
//! GLOBAL-DEFAULT, AGE, PREEMPTIONPOLICY (`printPriorityClass`,
//! pkg/printers/internalversion/printers.go). Defaults as `SetDefaults_PriorityClass`
//! (pkg/apis/scheduling/v1/defaults.go): preemptionPolicy `PreemptLowerPriority`. As
//! pkg/registry/scheduling/priorityclass/strategy.go a new class starts at generation 1,
//! which updates never bump. Validated as pkg/apis/scheduling/validation/validation.go does:
//! a `system-` name only for the system classes with their value and globalDefault
//! (`IsKnownSystemPriorityClass`, pkg/apis/scheduling/v1/helpers.go), other values at most
//! one billion, the preemption policy, and value and preemptionPolicy immutable.

use serde_json::{Value, json};

use crate::apimachinery::time::Time;
use crate::registry::networking::shared::generation_one;
use crate::registry::rules::immutable;
use crate::registry::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, meta_str};
use crate::storage::FieldError;

/// The PriorityClass strategy.
pub struct PriorityClasses;

static INFO: ResourceInfo = ResourceInfo {
    short_names: &["pc"],
    namespaced: false,
    ..ResourceInfo::new(
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        "priorityclass",
    )
};

static COLUMNS: [Column; 5] = [
    NAME_COLUMN,
    Column {
        name: "Value",
        kind: "integer",
        format: "",
        description: "value represents the integer value of this priority class. This is the \
            actual priority that pods receive when they have the name of this class in their pod \
            spec.",
        priority: 0,
    },
    Column {
        name: "Global-Default",
        kind: "boolean",
        format: "",
        description: "globalDefault specifies whether this PriorityClass should be considered \
            as the default priority for pods that do not have any priority class. Only one \
            PriorityClass can be marked as `globalDefault`. However, if more than one \
            PriorityClasses exists with their `globalDefault` field set to true, the smallest \
            value of such global default PriorityClasses will be used as the default priority.",
        priority: 0,
    },
    AGE_COLUMN,
    Column::string(
        "PreemptionPolicy",
        0,
        "preemptionPolicy is the Policy for preempting pods with lower priority. One of \
            Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.",
    ),
];

/// A priority class kube-apiserver makes at start.
#[derive(Debug, Clone, Copy)]
pub struct SystemPriorityClass {
    /// Its name.
    pub name: &'static str,
    /// Its value.
    pub value: i64,
    /// Its description.
    pub description: &'static str,
}

/// `SystemCriticalPriority` (twice `HighestUserDefinablePriority`).
const SYSTEM_CRITICAL: i64 = 2 * HIGHEST_USER_DEFINABLE;
/// `HighestUserDefinablePriority`.
const HIGHEST_USER_DEFINABLE: i64 = 1_000_000_000;
/// `SystemPriorityClassPrefix`.
const SYSTEM_PREFIX: &str = "system-";

/// `systemPriorityClasses`: system-node-critical and system-cluster-critical.
pub const SYSTEM_PRIORITY_CLASSES: [SystemPriorityClass; 2] = [
    SystemPriorityClass {
        name: "system-node-critical",
        value: SYSTEM_CRITICAL + 1000,
        description: "Used for system critical pods that must not be moved from their current \
            node.",
    },
    SystemPriorityClass {
        name: "system-cluster-critical",
        value: SYSTEM_CRITICAL,
        description: "Used for system critical pods that must run in the cluster, but can be \
            moved to another node if necessary.",
    },
];

impl SystemPriorityClass {
    /// The object kube-apiserver creates (its defaults are set on create).
    pub fn object(&self) -> Value {
        json!({
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": self.name},
            "value": self.value,
            "description": self.description,
        })
    }
}

/// `PreemptLowerPriority` and `Never`, as `ValidatePreemptionPolicy` lists them.
const PREEMPTION_POLICIES: [&str; 2] = ["PreemptLowerPriority", "Never"];

/// `IsKnownSystemPriorityClass`: why a `system-` class is not one, if it is not.
fn unknown_system_class(name: &str, value: i64, global_default: bool) -> Option<String> {
    let Some(known) = SYSTEM_PRIORITY_CLASSES.iter().find(|c| c.name == name) else {
        return Some(format!("{name} is not a known system priority class"));
    };
    if known.value != value {
        return Some(format!(
            "value of {name} PriorityClass must be {}",
            known.value
        ));
    }
    global_default.then(|| format!("globalDefault of {name} PriorityClass must be false"))
}

impl Strategy for PriorityClasses {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    /// The system classes cannot be deleted (upstream's `REST.Delete`).
    fn refuses_delete(&self, name: &str) -> Option<crate::storage::Status> {
        SYSTEM_PRIORITY_CLASSES
            .iter()
            .any(|c| c.name == name)
            .then(|| {
                crate::storage::Status::forbidden(
                    &INFO.target(name),
                    "this is a system priority class and cannot be deleted",
                )
            })
    }

    /// `SetDefaults_PriorityClass`.
    fn set_defaults(&self, obj: &mut Value) {
        if let Some(o) = obj.as_object_mut()
            && o.get("preemptionPolicy").is_none_or(Value::is_null)
        {
            o.insert("preemptionPolicy".into(), json!("PreemptLowerPriority"));
        }
    }

    /// The defaults, and generation 1 (`PrepareForCreate`).
    fn prepare_for_create(&self, obj: &mut Value) {
        self.set_defaults(obj);
        generation_one(obj);
    }

    /// `ValidatePriorityClass`.
    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let name = meta_str(obj, "name");
        let value = obj.get("value").and_then(Value::as_i64).unwrap_or(0);
        let global_default = obj
            .get("globalDefault")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if name.starts_with(SYSTEM_PREFIX) {
            if let Some(why) = unknown_system_class(name, value, global_default) {
                errors.push(FieldError::forbidden(
                    "metadata.name",
                    &format!(
                        "priority class names with '{SYSTEM_PREFIX}' prefix are reserved for \
                         system use only. error: {why}"
                    ),
                ));
            }
        } else if value > HIGHEST_USER_DEFINABLE {
            errors.push(FieldError::forbidden(
                "value",
                &format!(
                    "maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE}"
                ),
            ));
        }
        match obj.get("preemptionPolicy").and_then(Value::as_str) {
            Some("") => errors.push(FieldError::required("preemptionPolicy", "")),
            Some(p) if !PREEMPTION_POLICIES.contains(&p) => errors.push(FieldError::not_supported(
                "preemptionPolicy",
                p,
                &PREEMPTION_POLICIES,
            )),
            _ => {}
        }
        errors
    }

    /// `ValidatePriorityClassUpdate`: value and preemptionPolicy may not change. (Upstream
    /// validates the rest only on create.)
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let mut errors = Vec::new();
        if new.get("value") != old.get("value") {
            errors.push(FieldError::forbidden(
                "value",
                "may not be changed in an update.",
            ));
        }
        errors.extend(immutable(
            "preemptionPolicy",
            new.get("preemptionPolicy"),
            old.get("preemptionPolicy"),
        ));
        errors
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        vec![
            Value::from(meta_str(obj, "name")),
            Value::from(obj.get("value").and_then(Value::as_i64).unwrap_or(0)),
            Value::from(
                obj.get("globalDefault")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            ),
            crate::registry::age(obj, now),
            Value::from(
                obj.get("preemptionPolicy")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::rules::messages;

    #[test]
    fn a_new_class_preempts_lower_priorities_and_starts_at_generation_one() {
        let mut pc = json!({"metadata": {"name": "high"}, "value": 1000});
        PriorityClasses.prepare_for_create(&mut pc);
        let expected = json!({"metadata": {"name": "high", "generation": 1}, "value": 1000,
            "preemptionPolicy": "PreemptLowerPriority"});
        assert_eq!(pc, expected);
        let mut never = json!({"value": 1, "preemptionPolicy": "Never"});
        PriorityClasses.set_defaults(&mut never);
        assert_eq!(never["preemptionPolicy"], "Never");
        assert!(!PriorityClasses.tracks_generation());
    }

    #[test]
    fn system_names_and_values_are_reserved() {
        let check = |obj: Value| messages(&PriorityClasses.validate(&obj));
        for class in SYSTEM_PRIORITY_CLASSES {
            let mut obj = class.object();
            PriorityClasses.set_defaults(&mut obj);
            assert!(check(obj).is_empty(), "{}", class.name);
        }
        assert_eq!(SYSTEM_PRIORITY_CLASSES[0].value, 2_000_001_000);
        assert_eq!(SYSTEM_PRIORITY_CLASSES[1].value, 2_000_000_000);
        assert_eq!(
            check(json!({"metadata": {"name": "system-mine"}, "value": 5})),
            vec![
                "metadata.name: Forbidden: priority class names with 'system-' prefix are \
                 reserved for system use only. error: system-mine is not a known system priority \
                 class"
            ]
        );
        assert_eq!(
            check(json!({"metadata": {"name": "system-node-critical"}, "value": 5})),
            vec![
                "metadata.name: Forbidden: priority class names with 'system-' prefix are \
                 reserved for system use only. error: value of system-node-critical \
                 PriorityClass must be 2000001000"
            ]
        );
        assert_eq!(
            check(
                json!({"metadata": {"name": "system-cluster-critical"}, "value": 2_000_000_000,
                "globalDefault": true})
            ),
            vec![
                "metadata.name: Forbidden: priority class names with 'system-' prefix are \
                 reserved for system use only. error: globalDefault of system-cluster-critical \
                 PriorityClass must be false"
            ]
        );
        assert_eq!(
            check(json!({"metadata": {"name": "huge"}, "value": 1_000_000_001,
                "preemptionPolicy": "Sometimes"})),
            vec![
                "value: Forbidden: maximum allowed value of a user defined priority is 1000000000",
                "preemptionPolicy: Unsupported value: \"Sometimes\": supported values: \
                 \"PreemptLowerPriority\", \"Never\"",
            ]
        );
    }

    #[test]
    fn value_and_preemption_policy_are_immutable() {
        let old = json!({"value": 1, "preemptionPolicy": "PreemptLowerPriority"});
        let new = json!({"value": 2, "preemptionPolicy": "Never", "description": "x"});
        assert_eq!(
            messages(&PriorityClasses.validate_update(&new, &old)),
            vec![
                "value: Forbidden: may not be changed in an update.",
                "preemptionPolicy: Invalid value: \"Never\": field is immutable",
            ]
        );
        let described = json!({"value": 1, "preemptionPolicy": "PreemptLowerPriority",
            "description": "now described"});
        assert!(PriorityClasses.validate_update(&described, &old).is_empty());
    }

    #[test]
    fn the_row_shows_value_default_and_policy() {
        let pc = json!({"metadata": {"name": "system-node-critical",
            "creationTimestamp": "2026-05-28T20:00:00Z"}, "value": 2_000_001_000,
            "preemptionPolicy": "PreemptLowerPriority"});
        assert_eq!(
            PriorityClasses.cells(&pc, Time(1_780_000_000)),
            vec![
                json!("system-node-critical"),
                json!(2_000_001_000),
                json!(false),
                json!("26m"),
                json!("PreemptLowerPriority")
            ]
        );
        let names: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            ["Name", "Value", "Global-Default", "Age", "PreemptionPolicy"]
        );
    }
}
