//! The entries of `metadata.managedFields` as the field manager reads and writes them: their
//! identity, their JSON form and order, the bookkeeping that touches only entries (system
//! fields stripped, old update entries capped), and what a valid entry and a valid
//! `fieldManager` are.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde_json::{Map, Value};

use super::fieldpath::{PathElement, Set, go_json_string};
use crate::apimachinery::quote::go_quote;
use crate::apimachinery::time::Time;
use crate::json_pointer::At;
use crate::storage::FieldError;

/// The longest field manager name (`FieldManagerMaxLength`).
pub const FIELD_MANAGER_MAX_LENGTH: usize = 128;

/// The longest subresource name an entry may carry.
const MAX_SUBRESOURCE_LENGTH: usize = 256;

/// Update entries kept before the oldest merge (`DefaultMaxUpdateManagers`).
const MAX_UPDATE_MANAGERS: usize = 10;

/// The entry the oldest updates merge into.
const ANCIENT_CHANGES: &str = "ancient-changes";

/// The fields of `metadata` (and the type) no manager owns.
static STRIPPED: LazyLock<Set> = LazyLock::new(strip_set);

fn strip_set() -> Set {
    let mut set = Set::new();
    for f in ["apiVersion", "kind", "metadata"] {
        set.insert(&[PathElement::field(f)]);
    }
    for f in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        set.insert(&[PathElement::field("metadata"), PathElement::field(f)]);
    }
    set
}

/// Whether `path` is one of the system fields no manager owns.
pub(super) fn stripped(path: &[PathElement]) -> bool {
    STRIPPED.has(path)
}

/// Whether `fields_v1` is in the form the field manager writes a FieldsV1 (so reading it
/// and writing it back gives it again): objects all the way down, every key an element as
/// [`PathElement::to_key`] writes it, and `"."` (empty) only beside a node's children.
pub(super) fn canonical(fields_v1: &Value) -> bool {
    fn node(map: &Map<String, Value>, root: bool) -> bool {
        map.iter().all(|(key, value)| {
            let Some(inner) = value.as_object() else {
                return false;
            };
            if key == "." {
                return !root && inner.is_empty() && map.len() > 1;
            }
            let written = key.starts_with("f:")
                || matches!(PathElement::from_key(key), Ok(Some(pe)) if pe.to_key() == *key);
            written && node(inner, false)
        })
    }
    fields_v1.as_object().is_some_and(|map| node(map, true))
}

/// Whether the FieldsV1 `fields_v1`, in the form the field manager writes it, has `path`:
/// its node is there and is a member (`{}`, or `"."` beside its children).
pub(super) fn owns(fields_v1: &Value, path: &[PathElement]) -> bool {
    let mut node = fields_v1;
    for pe in path {
        let child = match pe {
            PathElement::Field(name) => node.as_object().and_then(|m| {
                m.iter()
                    .find(|(k, _)| k.strip_prefix("f:") == Some(name.as_str()))
                    .map(|(_, v)| v)
            }),
            other => node.get(other.to_key()),
        };
        match child {
            Some(child) => node = child,
            None => return false,
        }
    }
    !path.is_empty()
        && node
            .as_object()
            .is_some_and(|m| m.is_empty() || m.contains_key("."))
}

/// What an entry did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    /// A server-side apply.
    Apply,
    /// Any other write.
    Update,
}

impl Operation {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// An entry's identity. Ordered as upstream sorts its identifier, the JSON of the entry's
/// manager, operation, apiVersion (updates only) and subresource.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Id {
    pub(super) json: String,
    pub(super) manager: String,
    pub(super) operation: Operation,
    pub(super) api_version: String,
    pub(super) subresource: String,
}

impl Id {
    pub(super) fn new(
        manager: &str,
        operation: Operation,
        api_version: &str,
        subresource: &str,
    ) -> Id {
        let api_version = match operation {
            Operation::Apply => "",
            Operation::Update => api_version,
        };
        let mut json = String::from("{");
        let mut fields = Vec::new();
        if !manager.is_empty() {
            fields.push(format!("\"manager\":{}", go_json_string(manager)));
        }
        fields.push(format!("\"operation\":\"{}\"", operation.as_str()));
        if !api_version.is_empty() {
            fields.push(format!("\"apiVersion\":{}", go_json_string(api_version)));
        }
        if !subresource.is_empty() {
            fields.push(format!("\"subresource\":{}", go_json_string(subresource)));
        }
        json.push_str(&fields.join(","));
        json.push('}');
        Id {
            json,
            manager: manager.to_string(),
            operation,
            api_version: api_version.to_string(),
            subresource: subresource.to_string(),
        }
    }

    /// How a conflict names the manager (`printManager`).
    pub(super) fn printed(&self) -> String {
        let mut out = go_quote(&self.manager);
        if !self.subresource.is_empty() {
            out.push_str(&format!(
                " with subresource {}",
                go_quote(&self.subresource)
            ));
        }
        if self.operation == Operation::Update {
            out.push_str(&format!(" using {}", self.api_version));
        }
        out
    }
}

/// One entry's fields.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Owned {
    pub(super) set: Set,
    pub(super) api_version: String,
    pub(super) time: Option<Time>,
}

/// Every entry of an object, by identity.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Managed(pub(super) BTreeMap<Id, Owned>);

impl Managed {
    /// `DecodeManagedFields`: the entries of `managedFields` (absent or null: none).
    pub(super) fn decode(entries: Option<&Value>) -> Result<Managed, String> {
        let entries = match entries {
            None | Some(Value::Null) => return Ok(Managed::default()),
            Some(Value::Array(a)) => a,
            Some(other) => return Err(format!("managedFields is not a list: {other}")),
        };
        let mut managed = Managed::default();
        for (i, entry) in entries.iter().enumerate() {
            let text = |f: &str| -> Result<&str, String> {
                match entry.get(f) {
                    None | Some(Value::Null) => Ok(""),
                    Some(Value::String(s)) => Ok(s),
                    Some(other) => Err(format!("{f} is not a string: {other}")),
                }
            };
            let operation = match text("operation")? {
                "Apply" => Operation::Apply,
                "Update" => Operation::Update,
                _ => return Err("operation must be `Apply` or `Update`".into()),
            };
            let api_version = text("apiVersion")?;
            if api_version.is_empty() {
                return Err("apiVersion must not be empty".into());
            }
            match text("fieldsType")? {
                "FieldsV1" => {}
                "" => return Err(format!("missing fieldsType in managed fields entry {i}")),
                other => {
                    return Err(format!(
                        "invalid fieldsType {other:?} in managed fields entry {i}"
                    ));
                }
            }
            let time = match text("time")? {
                "" => None,
                t => Some(Time::parse(t).ok_or_else(|| format!("invalid time {t:?}"))?),
            };
            let set = Set::from_fields_v1(entry.get("fieldsV1").unwrap_or(&Value::Null))
                .map_err(|e| format!("error decoding set: {e}"))?;
            let id = Id::new(
                text("manager")?,
                operation,
                api_version,
                text("subresource")?,
            );
            let owned = Owned {
                set,
                api_version: api_version.to_string(),
                time,
            };
            managed.0.insert(id, owned);
        }
        Ok(managed)
    }

    /// `encodeManagedFields`: the entries, sorted as upstream sorts them.
    pub(super) fn encode(&self) -> Vec<Value> {
        let mut entries: Vec<(&Id, &Owned)> = self.0.iter().collect();
        entries.sort_by(|(a, x), (b, y)| {
            let seconds = |o: &Owned| o.time.map_or(0, |t| t.0);
            (
                a.operation,
                seconds(x),
                &a.manager,
                &x.api_version,
                &a.subresource,
            )
                .cmp(&(
                    b.operation,
                    seconds(y),
                    &b.manager,
                    &y.api_version,
                    &b.subresource,
                ))
        });
        entries
            .into_iter()
            .map(|(id, owned)| {
                let mut e = Map::new();
                if !id.manager.is_empty() {
                    e.insert("manager".into(), id.manager.clone().into());
                }
                e.insert("operation".into(), id.operation.as_str().into());
                e.insert("apiVersion".into(), owned.api_version.clone().into());
                if let Some(t) = owned.time {
                    e.insert("time".into(), t.rfc3339().into());
                }
                e.insert("fieldsType".into(), "FieldsV1".into());
                e.insert("fieldsV1".into(), owned.set.to_fields_v1());
                if !id.subresource.is_empty() {
                    e.insert("subresource".into(), id.subresource.clone().into());
                }
                Value::Object(e)
            })
            .collect()
    }

    /// Entries of another apiVersion than the kind's: SMD cannot convert to it, so drops
    /// them.
    pub(super) fn keep_version(&mut self, api_version: &str) {
        self.0.retain(|_, o| o.api_version == api_version);
    }

    /// `stripMetaManager`: the system fields are nobody's.
    pub(super) fn strip(&mut self, id: &Id) {
        if let Some(owned) = self.0.get_mut(id) {
            owned.set.subtract(&STRIPPED);
            if owned.set.is_empty() {
                self.0.remove(id);
            }
        }
    }

    /// `capManagersManager`: past ten update entries, the oldest merge into one
    /// `ancient-changes` entry per apiVersion.
    pub(super) fn cap_updates(&mut self) {
        let mut updaters: Vec<Id> = self
            .0
            .keys()
            .filter(|id| id.operation == Operation::Update)
            .cloned()
            .collect();
        if updaters.len() <= MAX_UPDATE_MANAGERS {
            return;
        }
        let seconds = |m: &Managed, id: &Id| m.0.get(id).and_then(|o| o.time).map_or(0, |t| t.0);
        updaters.sort_by(|a, b| (seconds(self, a), &a.json).cmp(&(seconds(self, b), &b.json)));
        let mut first_of_version: BTreeMap<String, Id> = BTreeMap::new();
        let mut length = updaters.len();
        for id in updaters {
            if length <= MAX_UPDATE_MANAGERS {
                break;
            }
            let Some(owned) = self.0.get(&id).cloned() else {
                continue;
            };
            let bucket = Id::new(ANCIENT_CHANGES, Operation::Update, &owned.api_version, "");
            match first_of_version.get(&owned.api_version) {
                Some(first) => {
                    if !self.0.contains_key(&bucket)
                        && let Some(f) = self.0.remove(first)
                    {
                        self.0.insert(bucket.clone(), f);
                    }
                    let merged = self.0.get(&bucket).map(|b| b.set.union(&owned.set));
                    self.0.remove(&id);
                    self.0.insert(
                        bucket,
                        Owned {
                            set: merged.unwrap_or(owned.set),
                            api_version: owned.api_version,
                            time: owned.time,
                        },
                    );
                    length -= 1;
                }
                None => {
                    first_of_version.insert(owned.api_version.clone(), id);
                }
            }
        }
    }
}

/// `ValidateManagedFields`: what a stored entry may not be.
pub fn validate(obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(entries) = obj.at("/metadata/managedFields").and_then(Value::as_array) else {
        return errors;
    };
    for (i, entry) in entries.iter().enumerate() {
        let at = |f: &str| format!("metadata.managedFields[{i}].{f}");
        let text = |f: &str| entry.get(f).and_then(Value::as_str).unwrap_or("");
        match text("operation") {
            "Apply" | "Update" => {}
            "" => errors.push(FieldError::required(&at("operation"), "must not be empty")),
            other => errors.push(FieldError::not_supported(
                &at("operation"),
                other,
                &["Apply", "Update"],
            )),
        }
        let fields_type = text("fieldsType");
        if !fields_type.is_empty() && fields_type != "FieldsV1" {
            errors.push(FieldError::invalid(
                &at("fieldsType"),
                fields_type,
                "must be `FieldsV1`",
            ));
        }
        errors.extend(validate_field_manager(text("manager"), &at("manager")));
        if text("subresource").len() > MAX_SUBRESOURCE_LENGTH {
            errors.push(FieldError::too_long(
                &at("subresource"),
                MAX_SUBRESOURCE_LENGTH,
            ));
        }
    }
    errors
}

/// `ValidateFieldManager`: at most 128 bytes, every character printable.
pub fn validate_field_manager(manager: &str, field: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if manager.len() > FIELD_MANAGER_MAX_LENGTH {
        errors.push(FieldError::too_long(field, FIELD_MANAGER_MAX_LENGTH));
    }
    for (i, c) in manager.char_indices() {
        if !is_print(c) {
            errors.push(FieldError::invalid(
                field,
                manager,
                &format!("invalid character U+{:04X} (at position {i})", c as u32),
            ));
        }
    }
    errors
}

/// Go's `unicode.IsPrint`: letters, marks, numbers, punctuation, symbols and the ASCII
/// space; not controls, other spaces or format characters.
pub fn is_print(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(c as u32,
        0x00AD | 0x0600..=0x0605 | 0x061C | 0x06DD | 0x070F | 0x08E2 | 0x180E
        | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F
        | 0xFEFF | 0xFFF9..=0xFFFB | 0xE000..=0xF8FF | 0xFFFE | 0xFFFF
        | 0xF0000..=0x10FFFF)
}

/// The field manager of a write when the request names none: the User-Agent up to its
/// first `/`, printable characters only, at most 128 bytes (`prefixFromUserAgent`).
pub fn manager_from_user_agent(user_agent: &str) -> String {
    let prefix = user_agent.split('/').next().unwrap_or("");
    let mut out = String::new();
    for c in prefix.chars().filter(|c| is_print(*c)) {
        if out.len() + c.len_utf8() > FIELD_MANAGER_MAX_LENGTH {
            break;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn entry_validation_and_managers_from_user_agents() {
        let long = json!({"metadata": {"managedFields": [{
            "manager": "m".repeat(129), "operation": "Apply", "fieldsType": "FieldsV2"
        }]}});
        let errors: Vec<String> = validate(&long).iter().map(|e| e.to_string()).collect();
        assert_eq!(
            errors,
            [
                "metadata.managedFields[0].fieldsType: Invalid value: \"FieldsV2\": must be `FieldsV1`",
                "metadata.managedFields[0].manager: Too long: may not be more than 128 bytes",
            ]
        );
        assert_eq!(
            manager_from_user_agent("kubectl/v1.32.0 (linux/amd64)"),
            "kubectl"
        );
        assert_eq!(manager_from_user_agent("a\u{1}b/c"), "ab");
        assert!(!is_print('\u{200b}'));
        assert!(is_print('é'));
    }
}
