//! batch/v1 Jobs: NAME, STATUS, COMPLETIONS, DURATION, AGE and, wide, CONTAINERS, IMAGES,
//! SELECTOR (`printJob`). Defaults as `SetDefaults_Job` sets them (completions and
//! parallelism, the backoff limit, completion mode, suspend, pod replacement policy,
//! `manualSelector`, labels from the template) and the pod template's; a new Job gets the
//! selector and template labels generated from its uid (`generateSelector` of
//! `pkg/registry/batch/job/strategy.go`) unless `manualSelector`, an empty status and
//! generation 1; `ValidateJob` and `ValidateJobSpecUpdate` as
//! `pkg/apis/batch/validation/validation.go` words them; a status update is checked by
//! [`super::job_status`].

use serde_json::{Map, Value, json};

use super::job_spec::{self, int};
use crate::apimachinery::time::{Time, human_duration_secs};
use crate::apimachinery::validation::is_dns1123_label;
use crate::json_pointer::At;
use crate::registry::defaults::default_value;
use crate::registry::printing::{
    CONTAINERS_COLUMN, IMAGES_COLUMN, SELECTOR_COLUMN, container_cells, json_text,
    label_selector_json,
};
use crate::registry::rules::immutable_printed;
use crate::registry::selector::{LabelSelector, validate_label_selector};
use crate::registry::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, meta, meta_str};
use crate::storage::FieldError;

/// The Job strategy.
pub struct Jobs;

static INFO: ResourceInfo = ResourceInfo {
    categories: &["all"],
    status: true,
    ..ResourceInfo::new("batch", "v1", "Job", "jobs", "job")
};

/// `LegacyJobNameLabel`.
const LEGACY_JOB_NAME: &str = "job-name";
/// `JobNameLabel`.
const JOB_NAME: &str = "batch.kubernetes.io/job-name";
/// `LegacyControllerUidLabel`.
const LEGACY_CONTROLLER_UID: &str = "controller-uid";
/// `ControllerUidLabel`.
const CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";

static COLUMNS: [Column; 8] = [
    NAME_COLUMN,
    Column::string("Status", 0, "Status of the job."),
    Column::string(
        "Completions",
        0,
        "The number of pods which reached phase Succeeded. The value increases monotonically \
         for a given spec. However, it may decrease in reaction to scale down of elastic \
         indexed jobs.",
    ),
    Column::string("Duration", 0, "Time required to complete the job."),
    AGE_COLUMN,
    CONTAINERS_COLUMN,
    IMAGES_COLUMN,
    SELECTOR_COLUMN,
];

/// `obj.spec` as an object, made one if missing.
fn spec_of(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    let o = obj.as_object_mut()?;
    let spec = o.entry("spec").or_insert_with(|| json!({}));
    if !spec.is_object() {
        *spec = json!({});
    }
    spec.as_object_mut()
}

/// `SetDefaults_Job` and the defaults of its pod template and failure policy.
pub fn set_defaults(obj: &mut Value) {
    let template_labels = obj.at("/spec/template/metadata/labels").cloned();
    let Some(spec) = spec_of(obj) else {
        return;
    };
    let unset = |spec: &Map<String, Value>, k: &str| spec.get(k).is_none_or(Value::is_null);
    if unset(spec, "completions") && unset(spec, "parallelism") {
        spec.insert("completions".into(), json!(1));
        spec.insert("parallelism".into(), json!(1));
    }
    default_value(spec, "parallelism", json!(1));
    let backoff = if unset(spec, "backoffLimitPerIndex") {
        json!(6)
    } else {
        json!(i32::MAX)
    };
    default_value(spec, "backoffLimit", backoff);
    default_value(spec, "completionMode", json!("NonIndexed"));
    default_value(spec, "suspend", json!(false));
    let replacement = if unset(spec, "podFailurePolicy") {
        "TerminatingOrFailed"
    } else {
        "Failed"
    };
    default_value(spec, "podReplacementPolicy", json!(replacement));
    default_value(spec, "manualSelector", json!(false));
    if let Some(labels @ Value::Object(_)) = template_labels {
        let own = obj.at("/metadata/labels").and_then(Value::as_object);
        if own.is_none_or(Map::is_empty) {
            meta::metadata(obj).insert("labels".into(), labels);
        }
    }
    job_spec::template_defaults(obj, "/spec");
}

/// `generateSelector`: the template labeled with the Job's name and uid (both the legacy
/// and the `batch.kubernetes.io/` keys, unless the client set them) and the selector
/// matching the uid.
fn generate_selector(obj: &mut Value) {
    let name = meta_str(obj, "name").to_string();
    let uid = meta_str(obj, "uid").to_string();
    let Some(spec) = spec_of(obj) else {
        return;
    };
    let template = object(spec, "template");
    let labels = object(object(template, "metadata"), "labels");
    for (key, value) in [
        (LEGACY_JOB_NAME, &name),
        (JOB_NAME, &name),
        (LEGACY_CONTROLLER_UID, &uid),
        (CONTROLLER_UID, &uid),
    ] {
        labels.entry(key).or_insert_with(|| json!(value));
    }
    let selector = object(spec, "selector");
    let match_labels = object(selector, "matchLabels");
    match_labels
        .entry(CONTROLLER_UID)
        .or_insert_with(|| json!(uid));
}

/// `map[key]` as an object, made one if missing or null.
fn object<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let v = map.entry(key).or_insert_with(|| json!({}));
    if !v.is_object() {
        *v = json!({});
    }
    v.as_object_mut().expect("just made an object")
}

/// `ValidateHasLabel` of the template's metadata: `key` must be `expected`.
fn has_label(
    template_labels: Option<&Map<String, Value>>,
    key: &str,
    expected: &str,
) -> Option<FieldError> {
    let path = format!("spec.template.metadata.labels[{key}]");
    let detail = format!("must be '{expected}'");
    match template_labels.and_then(|l| l.get(key)) {
        None => Some(FieldError::required(&path, &detail)),
        Some(v) if v.as_str() != Some(expected) => Some(FieldError::invalid(
            &path,
            Value::Object(template_labels.cloned().unwrap_or_default()),
            &detail,
        )),
        Some(_) => None,
    }
}

/// `validateGeneratedSelector`: unless the selector is manual, the template carries the
/// generated labels and the selector selects them.
fn validate_generated_selector(obj: &Value, prefixed_labels: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let manual = obj.at("/spec/manualSelector").and_then(Value::as_bool) == Some(true);
    let selector = obj.at("/spec/selector").filter(|s| !s.is_null());
    let Some(selector) = selector.filter(|_| !manual) else {
        return errors;
    };
    let (name, uid) = (meta_str(obj, "name"), meta_str(obj, "uid"));
    if uid.is_empty() {
        errors.push(FieldError::required("metadata.uid", ""));
    }
    let labels = obj
        .at("/spec/template/metadata/labels")
        .and_then(Value::as_object);
    let mut expected = Map::new();
    let mut wanted = vec![(LEGACY_CONTROLLER_UID, uid), (LEGACY_JOB_NAME, name)];
    if prefixed_labels {
        wanted.extend([(CONTROLLER_UID, uid), (JOB_NAME, name)]);
    }
    for (key, value) in wanted {
        errors.extend(has_label(labels, key, value));
        expected.insert(key.into(), json!(value));
    }
    if let Ok(parsed) = LabelSelector::from_object(selector)
        && !parsed.matches(&expected)
    {
        errors.push(FieldError::invalid_printed(
            "spec.selector",
            label_selector_json(Some(selector)),
            "`selector` not auto-generated",
        ));
    }
    errors
}

/// `ValidateJob`, the object's metadata aside: the generated selector, the spec, its
/// selector and the host names an Indexed Job's pods get.
pub fn validate(obj: &Value, prefixed_labels: bool) -> Vec<FieldError> {
    let mut errors = validate_generated_selector(obj, prefixed_labels);
    let empty = json!({});
    let spec = obj.get("spec").unwrap_or(&empty);
    errors.extend(job_spec::validate_job_spec(spec, "spec"));
    let selector = spec.get("selector").filter(|s| !s.is_null());
    match selector {
        None => errors.push(FieldError::required("spec.selector", "")),
        Some(s) => errors.extend(validate_label_selector(s, "spec.selector")),
    }
    // A missing selector selects nothing (`LabelSelectorAsSelector(nil)`), so it does not
    // match the template either.
    let matches = match selector {
        None => Some(false),
        Some(s) => LabelSelector::from_object(s).ok().map(|parsed| {
            let empty = Map::new();
            let labels = spec
                .at("/template/metadata/labels")
                .and_then(Value::as_object);
            parsed.matches(labels.unwrap_or(&empty))
        }),
    };
    if matches == Some(false) {
        let labels = spec.at("/template/metadata/labels");
        errors.push(FieldError::invalid_printed(
            "spec.template.metadata.labels",
            json_text(labels),
            "`selector` does not match template `labels`",
        ));
    }
    let indexed = spec.get("completionMode").and_then(Value::as_str) == Some("Indexed");
    if let Some(c) = int(spec, "completions").filter(|c| indexed && *c > 0) {
        let name = meta_str(obj, "name");
        let host = format!("{name}-{}", c - 1);
        if !is_dns1123_label(&host).is_empty() {
            errors.push(FieldError::invalid(
                "metadata.name",
                name,
                &format!("will not able to create pod with invalid DNS label: {host}"),
            ));
        }
    }
    errors
}

/// The template without what `AllowMutableSchedulingDirectives` lets change (node affinity,
/// node selector, tolerations, annotations, labels, scheduling gates; an affinity left
/// empty is none): two templates equal so differ only there.
fn without_scheduling(template: Option<&Value>) -> Option<Value> {
    let mut t = template.cloned()?;
    for (parent, field) in [
        ("/spec/affinity", "nodeAffinity"),
        ("/spec", "nodeSelector"),
        ("/spec", "tolerations"),
        ("/metadata", "annotations"),
        ("/metadata", "labels"),
        ("/spec", "schedulingGates"),
    ] {
        if let Some(p) = t.at_mut(parent).and_then(Value::as_object_mut) {
            p.remove(field);
        }
    }
    let empty_affinity = t
        .at("/spec/affinity")
        .is_some_and(|a| a.is_null() || a.as_object().is_some_and(Map::is_empty));
    if empty_affinity && let Some(spec) = t.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("affinity");
    }
    Some(t)
}

/// `ValidateJobSpecUpdate`'s own rules (the spec itself is validated by [`validate`]).
fn validate_spec_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let (spec, old_spec) = (
        new.get("spec").cloned().unwrap_or(Value::Null),
        old.get("spec").cloned().unwrap_or(Value::Null),
    );
    let indexed = spec.get("completionMode").and_then(Value::as_str) == Some("Indexed");
    let (completions, old_completions) = (spec.get("completions"), old_spec.get("completions"));
    if !indexed {
        errors.extend(immutable_printed(
            "spec.completions",
            completions,
            old_completions,
            json_text(completions),
        ));
    } else if let Some(c) = int(&spec, "completions")
        && completions != old_completions
        && Some(c) != int(&spec, "parallelism")
    {
        errors.push(FieldError::invalid(
            "spec.completions",
            c,
            "can only be modified in tandem with spec.parallelism",
        ));
    }
    errors.extend(immutable_printed(
        "spec.selector",
        spec.get("selector"),
        old_spec.get("selector"),
        label_selector_json(spec.get("selector")),
    ));
    // Scheduling directives may change while a Job is suspended and has never started.
    let suspended = old_spec.get("suspend").and_then(Value::as_bool) == Some(true);
    let started = old.at("/status/startTime").is_some_and(|t| !t.is_null());
    let template = spec.get("template");
    let (now, was) = if suspended && !started {
        (
            without_scheduling(template),
            without_scheduling(old_spec.get("template")),
        )
    } else {
        (template.cloned(), old_spec.get("template").cloned())
    };
    errors.extend(immutable_printed(
        "spec.template",
        now.as_ref(),
        was.as_ref(),
        json_text(template),
    ));
    for field in [
        "completionMode",
        "podFailurePolicy",
        "backoffLimitPerIndex",
        "managedBy",
        "successPolicy",
    ] {
        let (now, was) = (spec.get(field), old_spec.get(field));
        errors.extend(immutable_printed(
            &format!("spec.{field}"),
            now,
            was,
            json_text(now),
        ));
    }
    errors
}

impl Strategy for Jobs {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn set_defaults(&self, obj: &mut Value) {
        set_defaults(obj);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        set_defaults(obj);
        if obj.at("/spec/manualSelector").and_then(Value::as_bool) != Some(true) {
            generate_selector(obj);
        }
        if let Some(o) = obj.as_object_mut() {
            o.insert("status".into(), json!({}));
        }
        // What kube-apiserver's decoder defaults on every read: the Job's labels from the
        // template's, which now carry the generated ones.
        set_defaults(obj);
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate(obj, true)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        let labels = old.at("/spec/template/metadata/labels");
        let prefixed =
            labels.is_some_and(|l| l.get(JOB_NAME).is_some() && l.get(CONTROLLER_UID).is_some());
        let mut errors = validate(new, prefixed);
        errors.extend(validate_spec_update(new, old));
        errors
    }

    fn validate_status_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        super::job_status::validate(new, old)
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let succeeded = obj
            .at("/status/succeeded")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
        let completions = match int(&spec, "completions") {
            Some(c) => format!("{succeeded}/{c}"),
            None => match int(&spec, "parallelism").unwrap_or(0) {
                p if p > 1 => format!("{succeeded}/1 of {p}"),
                _ => format!("{succeeded}/1"),
            },
        };
        let time = |p: &str| obj.at(p).and_then(Value::as_str).and_then(Time::parse);
        let duration = match (time("/status/startTime"), time("/status/completionTime")) {
            (None, _) => String::new(),
            (Some(start), None) => human_duration_secs(now.seconds_since(start)),
            (Some(start), Some(end)) => human_duration_secs(end.seconds_since(start)),
        };
        let condition = |kind: &str| {
            let conditions = obj.at("/status/conditions").and_then(Value::as_array);
            conditions
                .into_iter()
                .flatten()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
                .is_some_and(|c| c.get("status").and_then(Value::as_str) == Some("True"))
        };
        let status = if condition("Complete") {
            "Complete"
        } else if condition("Failed") {
            "Failed"
        } else if obj
            .at("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null())
        {
            "Terminating"
        } else if condition("Suspended") {
            "Suspended"
        } else if condition("FailureTarget") {
            "FailureTarget"
        } else {
            "Running"
        };
        let (names, images) = container_cells(obj, "/spec/template/spec");
        let selector = spec.get("selector").filter(|s| !s.is_null());
        vec![
            Value::from(meta_str(obj, "name")),
            Value::from(status),
            Value::from(completions),
            Value::from(duration),
            crate::registry::age(obj, now),
            Value::from(names),
            Value::from(images),
            // `FormatLabelSelector` of a nil selector is `<none>` too.
            Value::from(selector.map_or("<none>".into(), LabelSelector::format_object)),
        ]
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["status.successful"]
    }

    fn field(&self, obj: &Value, field: &str) -> String {
        match field {
            "status.successful" => obj
                .at("/status/succeeded")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                .to_string(),
            _ => String::new(),
        }
    }

    /// `DefaultGarbageCollectionPolicy` (pkg/registry/batch/job/strategy.go): a delete that names no policy
    /// orphans what the Job owns, as before the garbage collector existed.
    fn default_propagation(&self) -> crate::registry::store::Propagation {
        crate::registry::store::Propagation::Orphan
    }

    fn tracks_generation(&self) -> bool {
        true
    }
}

#[cfg(test)]
#[path = "jobs_tests.rs"]
mod tests;
