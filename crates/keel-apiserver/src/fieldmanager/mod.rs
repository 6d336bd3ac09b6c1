//! The field manager: who set which field of an object, kept in `metadata.managedFields` as
//! kube-apiserver's (`apimachinery/pkg/util/managedfields`, on structured-merge-diff) keeps
//! it, and server-side apply, which merges by it.
//!
//! - [`fieldpath`]: field paths and field sets, and their FieldsV1 form.
//! - [`typed`]: objects walked with their schema: field sets, comparisons, merges.
//! - [`managed`]: [`FieldManager`], the entries an update records and the merge an apply
//!   makes, with [`entries`] (the entries read, validated and written) and [`conflicts`]
//!   (an apply's 409).
//! - [`options`]: the `fieldManager` and `force` query parameters of a write.
//! - [`apply`]: server-side apply (`PATCH` with `application/apply-patch+yaml`).

pub mod apply;
pub mod conflicts;
pub mod entries;
pub mod fieldpath;
pub mod managed;
pub mod options;
pub mod typed;

pub use conflicts::{ApplyError, Conflict};
pub use entries::{
    FIELD_MANAGER_MAX_LENGTH, is_print, manager_from_user_agent, validate, validate_field_manager,
};
pub use managed::{FieldManager, LAST_APPLIED};
