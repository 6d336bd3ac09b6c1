//! Objects as the store keeps them: written as JSON in the kind's storage form without
//! `metadata.resourceVersion`, read back in the kind's served form with the key's
//! mod_revision as the resourceVersion, and parsed without `serde_json`'s recursion limit
//! but no deeper than [`MAX_STORED_DEPTH`].

use serde_json::{Map, Value};

use super::{Strategy, meta};
use crate::storage::{Object, Status};

/// `obj` as the store keeps it: its bytes, and the value they encode (the kind's storage
/// form, without resourceVersion).
pub fn encode_owned(kind: &dyn Strategy, obj: Value) -> (Vec<u8>, Value) {
    let stored = kind.to_storage(with_no_resource_version(obj));
    let bytes = serde_json::to_vec(&stored).expect("a JSON value encodes");
    (bytes, stored)
}

/// `obj` without `metadata.resourceVersion`.
pub fn with_no_resource_version(mut obj: Value) -> Value {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
    }
    obj
}

/// Whether `a` and `b` are the same object but perhaps for `metadata.resourceVersion`
/// (compared in place: an update that changes nothing is the common case of a retry).
pub fn same_but_resource_version(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    a.len() == b.len()
        && a.iter()
            .all(|(key, value)| match (key.as_str(), b.get(key)) {
                (_, None) => false,
                ("metadata", Some(other)) => match (value.as_object(), other.as_object()) {
                    (Some(x), Some(y)) => {
                        let fields = |m: &'_ Map<String, Value>| {
                            m.len() - usize::from(m.contains_key("resourceVersion"))
                        };
                        fields(x) == fields(y)
                            && x.iter().all(|(k, v)| {
                                k == "resourceVersion" || y.get(k).is_some_and(|w| v == w)
                            })
                    }
                    _ => value == other,
                },
                (_, Some(other)) => value == other,
            })
}

/// How deep a stored value may nest. Request parsers each stop at 128 levels and the server
/// adds a few (managedFields' sets), so whatever keel wrote reads back; a deeper value (written
/// straight into the store) is answered as a decode error rather than read on a worker
/// thread's stack until it overflows.
pub const MAX_STORED_DEPTH: usize = 1000;

/// Parses a stored value without serde_json's recursion limit of 128 (whatever the request
/// parsers accepted, plus what the server adds, must always read back, or one object would
/// make its whole resource unreadable), but refuses one nested deeper than
/// [`MAX_STORED_DEPTH`].
pub fn parse_stored(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    use serde::Deserialize;
    use serde::de::Error;
    if crate::nesting::depth(bytes) > MAX_STORED_DEPTH {
        return Err(serde_json::Error::custom(format!(
            "nested deeper than {MAX_STORED_DEPTH} levels"
        )));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    de.disable_recursion_limit();
    let value = Value::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// A stored object in `kind`'s form, with its resourceVersion set.
pub fn decode(kind: &dyn Strategy, object: &Object) -> Result<Value, Status> {
    let info = kind.info();
    let value: Value = parse_stored(&object.value).map_err(|e| {
        Status::internal(format!(
            "object at {} is not a JSON {}: {e}",
            object.key, info.kind
        ))
    })?;
    if !value.is_object() {
        return Err(Status::internal(format!(
            "object at {} is not a JSON object",
            object.key
        )));
    }
    let mut value = kind.to_served(value);
    meta::metadata(&mut value).insert(
        "resourceVersion".into(),
        object.mod_revision.to_string().into(),
    );
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_that_differ_only_in_resource_version_are_the_same() {
        let at = |rv: Option<&str>, data: &str| {
            let mut obj =
                json!({"kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": data}});
            if let Some(rv) = rv {
                obj["metadata"]["resourceVersion"] = rv.into();
            }
            obj
        };
        assert!(same_but_resource_version(
            &at(Some("1"), "x"),
            &at(Some("2"), "x")
        ));
        assert!(same_but_resource_version(
            &at(None, "x"),
            &at(Some("2"), "x")
        ));
        assert!(same_but_resource_version(
            &at(Some("1"), "x"),
            &at(None, "x")
        ));
        assert!(!same_but_resource_version(
            &at(Some("1"), "x"),
            &at(Some("1"), "y")
        ));
        let mut labelled = at(Some("1"), "x");
        labelled["metadata"]["labels"] = json!({"a": "b"});
        assert!(!same_but_resource_version(&labelled, &at(Some("1"), "x")));
        assert!(!same_but_resource_version(&at(Some("1"), "x"), &labelled));
        let mut extra = at(None, "x");
        extra["spec"] = json!({});
        assert!(!same_but_resource_version(&extra, &at(None, "x")));
        for (a, b) in [(&extra, &at(None, "x")), (&labelled, &labelled)] {
            assert_eq!(
                same_but_resource_version(a, b),
                with_no_resource_version(a.clone()) == with_no_resource_version(b.clone())
            );
        }
    }

    #[test]
    fn stored_values_read_back_deep_but_not_deeper_than_the_limit() {
        let nested = |depth: usize| {
            let mut text = "[".repeat(depth);
            text.push_str(&"]".repeat(depth));
            text
        };
        assert!(parse_stored(nested(MAX_STORED_DEPTH).as_bytes()).is_ok());
        let err = parse_stored(nested(MAX_STORED_DEPTH + 1).as_bytes()).unwrap_err();
        assert!(err.to_string().contains("nested deeper than 1000"), "{err}");
        // Far past what a worker thread's stack would survive: an error, not a crash.
        assert!(parse_stored(nested(100_000).as_bytes()).is_err());
    }
}
