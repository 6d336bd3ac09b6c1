//! Why a strategic merge patch could not be applied, in apimachinery's words, and the code
//! kube-apiserver answers each with.

use serde_json::{Map, Value};

type Object = Map<String, Value>;

use crate::apimachinery::go_value::{GoType, go_fmt_list, go_fmt_map, go_fmt_s};

/// Why a strategic merge patch could not be applied; the messages are apimachinery's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The object patched is not a JSON object (`mergepatch.ErrBadJSONDoc`).
    #[error("invalid JSON document")]
    BadJsonDoc,
    /// The patch is JSON but not an object (the JSON decoder's error).
    #[error("json: cannot unmarshal {0} into Go value of type map[string]interface {{}}")]
    PatchNotAnObject(&'static str),
    /// A malformed `$deleteFromPrimitiveList` key.
    #[error("invalid patch format of primitive list")]
    BadPatchFormatForPrimitiveList,
    /// `$retainKeys` is not a list, or the patch has a field the list does not retain.
    #[error("invalid patch format of retainKeys")]
    BadPatchFormatForRetainKeys,
    /// A malformed `$setElementOrder` key.
    #[error("invalid patch format of setElementOrder list")]
    BadPatchFormatForSetElementOrderList,
    /// A list whose elements are lists.
    #[error("lists of lists are not supported")]
    NoListOfLists,
    /// A list element without the field's merge key.
    #[error("map: {map} does not contain declared merge key: {key}")]
    NoMergeKey {
        /// The element, as Go prints a map.
        map: String,
        /// The merge key.
        key: String,
    },
    /// A value of the wrong JSON type where a map or list was expected.
    #[error("expected a {expected}, but received a {actual}")]
    BadArgType {
        /// The Go type expected.
        expected: &'static str,
        /// The Go type received.
        actual: &'static str,
    },
    /// A `$patch` value that is not a directive (or `merge` on a map).
    #[error("unknown patch type: {patch_type} in map: {map}")]
    BadPatchType {
        /// The value, as Go prints it.
        patch_type: String,
        /// The map holding it, as Go prints it.
        map: String,
    },
    /// `$patch: merge` as a list element.
    #[error("merging lists cannot yet be specified in the patch")]
    MergeListDirective,
    /// A list of objects merged (or deleted from) without a declared merge key.
    #[error("cannot merge lists without merge key for struct")]
    NoDeclaredMergeKey,
    /// A merged list mixes element types.
    #[error("list element types are not identical: {0}")]
    ElementTypesDiffer(String),
    /// Both lists of a `$setElementOrder` are empty.
    #[error("no elements in any of the given slices")]
    NoElements,
    /// `$setElementOrder` lists an element that is not an object.
    #[error("value for key {0} is not a map")]
    NotAMap(usize),
    /// The patch list's order contradicts its `$setElementOrder` list.
    #[error("The order in patch list:\n{patch}\n doesn't match $setElementOrder list:\n{order}\n")]
    SetElementOrderMismatch {
        /// The patch list, as Go prints it.
        patch: String,
        /// The `$setElementOrder` list, as Go prints it.
        order: String,
    },
}

impl PatchError {
    /// The HTTP code kube-apiserver answers with (`interpretStrategicMergePatchError`): 400
    /// BadRequest for a malformed document or directive list, 422 for lists of lists, and
    /// 500 (a plain error, `Status` with no reason) for everything else.
    pub fn status_code(&self) -> u16 {
        match self {
            PatchError::BadJsonDoc
            | PatchError::PatchNotAnObject(_)
            | PatchError::BadPatchFormatForPrimitiveList
            | PatchError::BadPatchFormatForRetainKeys
            | PatchError::BadPatchFormatForSetElementOrderList => 400,
            PatchError::NoListOfLists => 422,
            _ => 500,
        }
    }
}

pub(super) type Result<T> = std::result::Result<T, PatchError>;

pub(super) fn element_types_differ(lists: &[&[Value]]) -> PatchError {
    let inner: Vec<String> = lists.iter().map(|l| go_fmt_list(l)).collect();
    PatchError::ElementTypesDiffer(format!("[{}]", inner.join(" ")))
}

pub(super) fn bad_arg_type(expected: &'static str, actual: &Value) -> PatchError {
    PatchError::BadArgType {
        expected,
        actual: GoType::of(actual).name(),
    }
}

pub(super) fn no_merge_key(map: &Object, key: &str) -> PatchError {
    PatchError::NoMergeKey {
        map: go_fmt_map(map),
        key: key.to_string(),
    }
}

pub(super) fn bad_patch_type(directive: &Value, map: &Object) -> PatchError {
    PatchError::BadPatchType {
        patch_type: go_fmt_s(directive),
        map: go_fmt_map(map),
    }
}
