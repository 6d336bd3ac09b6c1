//! The `Priority` admission plugin (plugin/pkg/admission/priority/admission.go, as of
//! Kubernetes 1.34): a new pod's `spec.priorityClassName` is resolved to `spec.priority` and
//! the class's `preemptionPolicy` (no name: the global default class, else priority 0 and
//! `PreemptLowerPriority`); an unknown class, or a priority or policy the pod gives that
//! differs from the class's, is refused. An update keeps the priority set at create when the
//! new object leaves it out. A PriorityClass marked `globalDefault` is refused while another
//! one is the default. The system classes need no special case: they are stored classes
//! (`controllers::priority_classes`), found like any other.

use serde_json::Value;

use crate::json_pointer::At;
use crate::registry::meta_str;

/// The plugin's name.
pub const PLUGIN: &str = "Priority";

/// `scheduling.DefaultPriorityWhenNoDefaultClassExists`.
const DEFAULT_PRIORITY: i64 = 0;

/// `v1.PreemptLowerPriority`, the policy of a pod with no class and no default class.
const PREEMPT_LOWER_PRIORITY: &str = "PreemptLowerPriority";

fn is_global_default(class: &Value) -> bool {
    class.get("globalDefault").and_then(Value::as_bool) == Some(true)
}

fn value(class: &Value) -> i64 {
    class.get("value").and_then(Value::as_i64).unwrap_or(0)
}

/// `getDefaultPriorityClass`: of the classes marked `globalDefault`, the one of lowest value
/// (several exist only after a race).
pub fn default_class(classes: &[Value]) -> Option<&Value> {
    classes
        .iter()
        .filter(|c| is_global_default(c))
        .min_by_key(|c| value(c))
}

/// `admitPod` on create: sets `spec.priority` (and `spec.preemptionPolicy`, and the default
/// class's name when the pod names none); Err is the reason of a 403 Forbidden.
pub fn admit_new_pod(pod: &mut Value, classes: &[Value]) -> Result<(), String> {
    let spec = pod.at("/spec");
    let named = spec
        .and_then(|s| s.get("priorityClassName"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let (class_name, priority, policy) = if named.is_empty() {
        match default_class(classes) {
            Some(class) => (
                meta_str(class, "name").to_string(),
                value(class),
                class.get("preemptionPolicy").cloned(),
            ),
            None => (
                String::new(),
                DEFAULT_PRIORITY,
                Some(Value::from(PREEMPT_LOWER_PRIORITY)),
            ),
        }
    } else {
        let class = classes
            .iter()
            .find(|c| meta_str(c, "name") == named)
            .ok_or_else(|| format!("no PriorityClass with name {named} was found"))?;
        (
            named.clone(),
            value(class),
            class.get("preemptionPolicy").cloned(),
        )
    };
    let given = spec
        .and_then(|s| s.get("priority"))
        .filter(|v| !v.is_null());
    if let Some(given) = given
        && given.as_i64() != Some(priority)
    {
        return Err(format!(
            "the integer value of priority ({given}) must not be provided in pod spec; \
             priority admission controller computed {priority} from the given PriorityClass name"
        ));
    }
    let given_policy = spec
        .and_then(|s| s.get("preemptionPolicy"))
        .and_then(Value::as_str);
    let policy = policy.and_then(|p| p.as_str().map(str::to_string));
    if let (Some(given), Some(computed)) = (given_policy, policy.as_deref())
        && given != computed
    {
        return Err(format!(
            "the string value of PreemptionPolicy ({given}) must not be provided in pod spec; \
             priority admission controller computed {computed} from the given PriorityClass name"
        ));
    }
    if !pod.get("spec").is_some_and(Value::is_object) {
        pod["spec"] = Value::Object(Default::default());
    }
    let spec = &mut pod["spec"];
    if !class_name.is_empty() {
        spec["priorityClassName"] = class_name.into();
    }
    spec["priority"] = priority.into();
    if let Some(policy) = policy {
        spec["preemptionPolicy"] = policy.into();
    }
    Ok(())
}

/// `admitPod` on update: the priority and preemption policy set at create are kept when the
/// update leaves them out (validation refuses any other change of them).
pub fn admit_pod_update(new: &mut Value, old: &Value) {
    let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for field in ["priority", "preemptionPolicy"] {
        let unset = spec.get(field).is_none_or(Value::is_null);
        if let Some(kept) = old.at("/spec").and_then(|s| s.get(field))
            && unset
            && !kept.is_null()
        {
            spec.insert(field.into(), kept.clone());
        }
    }
}

/// `validatePriorityClass`: a class marked `globalDefault` is refused when another is the
/// default already (on update: when the default is another class); Err is the reason of a
/// 403 Forbidden.
pub fn validate_class(class: &Value, update: bool, classes: &[Value]) -> Result<(), String> {
    if !is_global_default(class) {
        return Ok(());
    }
    match default_class(classes) {
        Some(current) if !update || meta_str(current, "name") != meta_str(class, "name") => {
            Err(format!(
                "PriorityClass {} is already marked as default. Only one default can exist",
                meta_str(current, "name")
            ))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn class(name: &str, value: i64, default: bool, policy: &str) -> Value {
        json!({"metadata": {"name": name}, "value": value, "globalDefault": default,
               "preemptionPolicy": policy})
    }

    fn system() -> Vec<Value> {
        vec![
            class(
                "system-cluster-critical",
                2_000_000_000,
                false,
                "PreemptLowerPriority",
            ),
            class(
                "system-node-critical",
                2_000_001_000,
                false,
                "PreemptLowerPriority",
            ),
        ]
    }

    #[test]
    fn a_named_class_gives_its_value_and_policy() {
        let mut classes = system();
        classes.push(class("batch", 10, false, "Never"));
        let mut pod = json!({"spec": {"priorityClassName": "system-cluster-critical"}});
        admit_new_pod(&mut pod, &classes).unwrap();
        assert_eq!(pod["spec"]["priority"], 2_000_000_000);
        assert_eq!(pod["spec"]["preemptionPolicy"], "PreemptLowerPriority");
        let mut pod = json!({"spec": {"priorityClassName": "batch", "priority": 10}});
        admit_new_pod(&mut pod, &classes).unwrap();
        assert_eq!(pod["spec"]["preemptionPolicy"], "Never");
        assert_eq!(
            admit_new_pod(&mut json!({"spec": {"priorityClassName": "foo"}}), &classes),
            Err("no PriorityClass with name foo was found".into())
        );
    }

    #[test]
    fn no_class_takes_the_default_or_zero() {
        let mut pod = json!({"spec": {}});
        admit_new_pod(&mut pod, &system()).unwrap();
        assert_eq!(
            pod["spec"],
            json!({"priority": 0, "preemptionPolicy": "PreemptLowerPriority"})
        );
        let mut classes = system();
        classes.push(class("high", 1000, true, "Never"));
        // A race left two defaults: the lower value wins.
        classes.push(class("low", 5, true, "PreemptLowerPriority"));
        let mut pod = json!({"spec": {}});
        admit_new_pod(&mut pod, &classes).unwrap();
        assert_eq!(
            pod["spec"],
            json!({"priorityClassName": "low", "priority": 5,
                   "preemptionPolicy": "PreemptLowerPriority"})
        );
    }

    #[test]
    fn a_priority_or_policy_other_than_the_class_is_refused() {
        let mut classes = system();
        classes.push(class("batch", 10, false, "Never"));
        assert_eq!(
            admit_new_pod(&mut json!({"spec": {"priority": 7}}), &classes),
            Err(
                "the integer value of priority (7) must not be provided in pod spec; priority \
                 admission controller computed 0 from the given PriorityClass name"
                    .into()
            )
        );
        assert_eq!(
            admit_new_pod(
                &mut json!({"spec": {"priorityClassName": "batch",
                                     "preemptionPolicy": "PreemptLowerPriority"}}),
                &classes
            ),
            Err(
                "the string value of PreemptionPolicy (PreemptLowerPriority) must not be \
                 provided in pod spec; priority admission controller computed Never from the \
                 given PriorityClass name"
                    .into()
            )
        );
    }

    #[test]
    fn an_update_keeps_the_priority_set_at_create() {
        let old = json!({"spec": {"priority": 10, "preemptionPolicy": "Never"}});
        let mut new = json!({"spec": {"containers": []}});
        admit_pod_update(&mut new, &old);
        assert_eq!(new["spec"]["priority"], 10);
        assert_eq!(new["spec"]["preemptionPolicy"], "Never");
        let mut changed = json!({"spec": {"priority": 11}});
        admit_pod_update(&mut changed, &old);
        assert_eq!(changed["spec"]["priority"], 11);
    }

    #[test]
    fn only_one_class_is_the_default() {
        let mut classes = system();
        let first = class("first", 1, true, "PreemptLowerPriority");
        assert_eq!(validate_class(&first, false, &classes), Ok(()));
        classes.push(first.clone());
        assert_eq!(
            validate_class(&class("second", 2, true, "Never"), false, &classes),
            Err(
                "PriorityClass first is already marked as default. Only one default can exist"
                    .into()
            )
        );
        // The default itself may be updated; another may not become the default.
        assert_eq!(validate_class(&first, true, &classes), Ok(()));
        assert!(validate_class(&class("other", 3, true, "Never"), true, &classes).is_err());
        assert_eq!(
            validate_class(&class("other", 3, false, "Never"), false, &classes),
            Ok(())
        );
    }
}
