//! `meta.k8s.io` Tables, as kube-apiserver answers `Accept: application/json;as=Table`:
//! the kind's columns, one row per object with the kind's cells, and the object itself as
//! `PartialObjectMetadata` (or whole, or not at all, by `includeObject`, though the bookmark
//! that ends a streaming list's initial events keeps its metadata, so its annotation is
//! seen); in `v1`, or in `v1beta1` with its rows' metadata in `v1beta1` too.

use std::borrow::Borrow;

use serde_json::{Value, json};

use super::metadata::partial_object_in;
use super::negotiate::MetaVersion;

use crate::apimachinery::time::Time;
use crate::json_pointer::At;
use crate::registry::Strategy;
use crate::registry::watching::INITIAL_EVENTS_END;
use crate::storage::Status;

/// `includeObject`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// `None`.
    Nothing,
    /// `Metadata` (the default).
    Metadata,
    /// `Object`.
    Object,
}

impl IncludeObject {
    /// Reads the query parameter (400 for anything else, with kube-apiserver's words).
    pub fn parse(value: Option<&str>) -> Result<IncludeObject, Status> {
        match value.unwrap_or("") {
            "" | "Metadata" => Ok(IncludeObject::Metadata),
            "None" => Ok(IncludeObject::Nothing),
            "Object" => Ok(IncludeObject::Object),
            other => Err(Status::failure(
                400,
                "BadRequest",
                format!("unrecognized includeObject value: \"{other}\""),
            )),
        }
    }
}

/// The `meta.k8s.io/v1` Table of `objects` (one object or a list's items); `list_metadata`
/// is the list's metadata (resourceVersion, continue, remainingItemCount), and `headers`
/// whether the column definitions are included (a watch sends them with its first event
/// only).
pub fn table(
    kind: &dyn Strategy,
    objects: &[impl Borrow<Value>],
    list_metadata: Value,
    include: IncludeObject,
    headers: bool,
) -> Value {
    table_in(
        MetaVersion::V1,
        kind,
        objects,
        list_metadata,
        include,
        headers,
    )
}

/// [`table`] in `version`.
pub fn table_in(
    version: MetaVersion,
    kind: &dyn Strategy,
    objects: &[impl Borrow<Value>],
    list_metadata: Value,
    include: IncludeObject,
    headers: bool,
) -> Value {
    let now = Time::now();
    let columns: Vec<Value> = if headers {
        kind.columns()
            .iter()
            .map(|c| {
                json!({
                    "name": c.name,
                    "type": c.kind,
                    "format": c.format,
                    "description": c.description,
                    "priority": c.priority,
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    let info = kind.info();
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let obj = obj.borrow();
            let mut row = json!({"cells": kind.cells(obj, now)});
            let ends_initial_events = obj
                .at("/metadata/annotations")
                .and_then(|a| a.get(INITIAL_EVENTS_END))
                == Some(&Value::from("true"));
            let object = match include {
                IncludeObject::Nothing if !ends_initial_events => None,
                IncludeObject::Nothing => Some(partial_object_in(obj, version)),
                IncludeObject::Metadata => Some(partial_object_in(obj, version)),
                IncludeObject::Object => {
                    let mut whole = obj.clone();
                    info.set_type(&mut whole);
                    Some(whole)
                }
            };
            if let Some(object) = object {
                row["object"] = object;
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": version.api_version(),
        "metadata": list_metadata,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::watching::WatchEvent;

    #[test]
    fn the_bookmark_ending_the_initial_events_keeps_its_metadata_whatever_is_asked() {
        let cm = &crate::registry::configmaps::ConfigMaps;
        let row = |initial_events_end| {
            let bookmark = WatchEvent::bookmark(cm, 7, initial_events_end);
            let objects = [(*bookmark.object).clone()];
            table(cm, &objects, json!({}), IncludeObject::Nothing, false)["rows"][0].clone()
        };
        let end = row(true);
        assert_eq!(end["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(
            end["object"]["metadata"]["annotations"][INITIAL_EVENTS_END],
            "true"
        );
        assert_eq!(end["object"]["metadata"]["resourceVersion"], "7");
        assert!(row(false).get("object").is_none());
    }
}
