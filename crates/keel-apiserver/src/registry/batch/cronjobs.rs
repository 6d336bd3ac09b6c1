//! batch/v1 CronJobs: NAME, SCHEDULE, TIMEZONE, SUSPEND, ACTIVE, LAST SCHEDULE, AGE and,
//! wide, CONTAINERS, IMAGES, SELECTOR (`printCronJob`). Defaults as `SetDefaults_CronJob`
//! sets them (concurrency policy `Allow`, not suspended, history limits 3 and 1) and the job
//! template's pod template's; a new CronJob gets an empty status and generation 1
//! (`pkg/registry/batch/cronjob/strategy.go`); `ValidateCronJobCreate` and
//! `ValidateCronJobUpdate` as `pkg/apis/batch/validation/validation.go` words them: the
//! schedule read as robfig/cron reads it ([`super::cron`]), no `TZ=` in it, the time zone an
//! IANA name, and a job template whose selector is generated.

use serde_json::{Value, json};

use super::cron::parse_standard;
use super::job_spec::{self, non_negative};
use super::zones::load_location;
use crate::apimachinery::time::Time;
use crate::json_pointer::At;
use crate::registry::defaults::default_value;
use crate::registry::printing::{
    CONTAINERS_COLUMN, IMAGES_COLUMN, SELECTOR_COLUMN, bool_ptr, container_cells,
    label_selector_json,
};
use crate::registry::selector::LabelSelector;
use crate::registry::{AGE_COLUMN, Column, NAME_COLUMN, ResourceInfo, Strategy, meta_str};
use crate::storage::FieldError;
use crate::storage::field::Kind;

/// The CronJob strategy.
pub struct CronJobs;

static INFO: ResourceInfo = ResourceInfo {
    short_names: &["cj"],
    categories: &["all"],
    status: true,
    ..ResourceInfo::new("batch", "v1", "CronJob", "cronjobs", "cronjob")
};

static COLUMNS: [Column; 10] = [
    NAME_COLUMN,
    Column::string(
        "Schedule",
        0,
        "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.",
    ),
    Column::string(
        "Timezone",
        0,
        "The time zone name for the given schedule, see \
         https://en.wikipedia.org/wiki/List_of_tz_database_time_zones.",
    ),
    Column {
        name: "Suspend",
        kind: "boolean",
        format: "",
        description: "This flag tells the controller to suspend subsequent executions, it does \
            not apply to already started executions. Defaults to false.",
        priority: 0,
    },
    Column {
        name: "Active",
        kind: "integer",
        format: "",
        description: "A list of pointers to currently running jobs.",
        priority: 0,
    },
    Column::string(
        "Last Schedule",
        0,
        "Information when was the last time the job was successfully scheduled.",
    ),
    AGE_COLUMN,
    CONTAINERS_COLUMN,
    IMAGES_COLUMN,
    SELECTOR_COLUMN,
];

/// The concurrency policies (`validateConcurrencyPolicy`).
const CONCURRENCY: [&str; 3] = ["Allow", "Forbid", "Replace"];

/// The longest CronJob name (a Job's 63 less the controller's 11-character suffix).
const MAX_NAME: usize = 52;

/// `SetDefaults_CronJob` and the defaults of the job template's pod template.
pub fn set_defaults(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    let spec = o.entry("spec").or_insert_with(|| json!({}));
    if !spec.is_object() {
        *spec = json!({});
    }
    if let Some(spec) = spec.as_object_mut() {
        if spec
            .get("concurrencyPolicy")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            spec.insert("concurrencyPolicy".into(), json!("Allow"));
        }
        default_value(spec, "suspend", json!(false));
        default_value(spec, "successfulJobsHistoryLimit", json!(3));
        default_value(spec, "failedJobsHistoryLimit", json!(1));
    }
    job_spec::template_defaults(obj, "/spec/jobTemplate/spec");
}

/// `validateScheduleFormat`: the schedule reads, and names no time zone (unless the stored
/// one did, and then not with `timeZone` too).
fn validate_schedule(schedule: &str, allow_tz: bool, has_zone: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let path = "spec.schedule";
    if let Err(e) = parse_standard(schedule) {
        errors.push(FieldError::invalid(path, schedule, &e));
    }
    let names_tz = schedule.contains("TZ");
    if allow_tz && names_tz && has_zone {
        errors.push(FieldError::invalid(
            path,
            schedule,
            "cannot use both timeZone field and TZ or CRON_TZ in schedule",
        ));
    } else if !allow_tz && names_tz {
        errors.push(FieldError::invalid(
            path,
            schedule,
            "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
        ));
    }
    errors
}

/// `validateTimeZone`: a name of at most 14 characters a part, not `Local`, that loads.
fn validate_time_zone(zone: &str) -> Vec<FieldError> {
    let path = "spec.timeZone";
    if zone.is_empty() {
        return vec![FieldError::invalid(
            path,
            zone,
            "timeZone must be nil or non-empty string",
        )];
    }
    let part_ok = |p: &str| {
        p != "."
            && p != ".."
            && !p.starts_with('-')
            && (1..=14).contains(&p.len())
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".-_+".contains(&b))
    };
    if !zone.split('/').all(part_ok) {
        return vec![FieldError::invalid(
            path,
            zone,
            &format!("unknown time zone {zone}"),
        )];
    }
    let mut errors = Vec::new();
    if zone.eq_ignore_ascii_case("Local") {
        errors.push(FieldError::invalid(
            path,
            zone,
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        ));
    }
    if let Err(e) = load_location(zone) {
        errors.push(FieldError::invalid(path, zone, &e));
    }
    errors
}

/// `validateCronJobSpec` of `obj`'s spec; `old` is the stored CronJob on update.
fn validate_spec(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let old_spec = old.and_then(|o| o.get("spec"));
    let zone = spec.get("timeZone").filter(|z| !z.is_null());
    let schedule = spec.get("schedule").and_then(Value::as_str).unwrap_or("");
    if schedule.is_empty() {
        errors.push(FieldError::required("spec.schedule", ""));
    } else {
        let old_schedule = old_spec
            .and_then(|s| s.get("schedule"))
            .and_then(Value::as_str);
        let allow_tz = old_schedule.is_some_and(|s| s.contains("TZ"));
        errors.extend(validate_schedule(schedule, allow_tz, zone.is_some()));
    }
    errors.extend(non_negative(&spec, "startingDeadlineSeconds", "spec"));
    let old_zone = old_spec
        .and_then(|s| s.get("timeZone"))
        .filter(|z| !z.is_null());
    if (old.is_none() || old_zone != zone)
        && let Some(zone) = zone
    {
        errors.extend(validate_time_zone(zone.as_str().unwrap_or("")));
    }
    let policy = spec
        .get("concurrencyPolicy")
        .and_then(Value::as_str)
        .unwrap_or("");
    errors.extend(crate::registry::rules::required_one_of(
        "spec.concurrencyPolicy",
        policy,
        &CONCURRENCY,
    ));
    let job_spec = spec.at("/jobTemplate/spec").cloned().unwrap_or(json!({}));
    errors.extend(job_spec::validate_job_spec(
        &job_spec,
        "spec.jobTemplate.spec",
    ));
    if let Some(selector) = job_spec.get("selector").filter(|s| !s.is_null()) {
        errors.push(FieldError::invalid_printed(
            "spec.jobTemplate.spec.selector",
            label_selector_json(Some(selector)),
            "`selector` will be auto-generated",
        ));
    }
    if job_spec.get("manualSelector").and_then(Value::as_bool) == Some(true) {
        errors.push(FieldError {
            kind: Kind::NotSupported,
            field: "spec.jobTemplate.spec.manualSelector".into(),
            value: Some(json!(true)),
            printed: None,
            detail: "supported values: \"nil\", \"false\"".into(),
        });
    }
    for field in ["successfulJobsHistoryLimit", "failedJobsHistoryLimit"] {
        errors.extend(non_negative(&spec, field, "spec"));
    }
    errors
}

impl Strategy for CronJobs {
    fn info(&self) -> &'static ResourceInfo {
        &INFO
    }

    fn set_defaults(&self, obj: &mut Value) {
        set_defaults(obj);
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        set_defaults(obj);
        if let Some(o) = obj.as_object_mut() {
            o.insert("status".into(), json!({}));
        }
    }

    fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = validate_spec(obj, None);
        let name = meta_str(obj, "name");
        if name.len() > MAX_NAME {
            errors.push(FieldError::invalid(
                "metadata.name",
                name,
                "must be no more than 52 characters",
            ));
        }
        errors
    }

    /// The 52-character name limit is not checked on update, so older CronJobs with longer
    /// names can still be changed and deleted.
    fn validate_update(&self, new: &Value, old: &Value) -> Vec<FieldError> {
        validate_spec(new, Some(old))
    }

    /// `cronJobStatusStrategy.ValidateUpdate` checks nothing.
    fn validate_status_update(&self, _new: &Value, _old: &Value) -> Vec<FieldError> {
        Vec::new()
    }

    fn columns(&self) -> &'static [Column] {
        &COLUMNS
    }

    fn cells(&self, obj: &Value, now: Time) -> Vec<Value> {
        let last = obj
            .at("/status/lastScheduleTime")
            .and_then(Value::as_str)
            .map_or_else(
                || "<none>".to_string(),
                |t| crate::apimachinery::time::since_text(Some(t), now),
            );
        let zone = obj
            .at("/spec/timeZone")
            .and_then(Value::as_str)
            .unwrap_or("<none>");
        let active = obj
            .at("/status/active")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        let template = "/spec/jobTemplate/spec/template/spec";
        let (names, images) = container_cells(obj, template);
        let selector = obj
            .at("/spec/jobTemplate/spec/selector")
            .filter(|s| !s.is_null());
        vec![
            Value::from(meta_str(obj, "name")),
            Value::from(
                obj.at("/spec/schedule")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
            ),
            Value::from(zone),
            Value::from(bool_ptr(obj.at("/spec/suspend"))),
            Value::from(active),
            Value::from(last),
            crate::registry::age(obj, now),
            Value::from(names),
            Value::from(images),
            Value::from(selector.map_or("<none>".into(), LabelSelector::format_object)),
        ]
    }

    fn tracks_generation(&self) -> bool {
        true
    }
}

#[cfg(test)]
#[path = "cronjobs_tests.rs"]
mod tests;
