//! Apply conflicts and the other refusals of an apply, answered as kube-apiserver answers
//! them (`NewApplyConflict`, SMD's `Conflicts` wording).

use std::collections::BTreeMap;

use super::entries::Id;
use super::fieldpath::{Path, path_string};
use crate::storage::{Details, Status};

/// One field another manager owns that an apply would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub(super) manager: Id,
    pub(super) path: Path,
}

/// Why an apply was refused.
#[derive(Debug, Clone, PartialEq)]
pub enum ApplyError {
    /// Fields other managers own, ordered by manager.
    Conflicts(Vec<Conflict>),
    /// A request kube-apiserver answers 400.
    BadRequest(String),
    /// A failure kube-apiserver answers 500 with its plain message.
    Internal(String),
}

impl ApplyError {
    /// The Status kube-apiserver answers (`NewApplyConflict` for conflicts).
    pub fn status(&self) -> Status {
        match self {
            ApplyError::BadRequest(m) => Status::failure(400, "BadRequest", m.clone()),
            ApplyError::Internal(m) => Status::failure(500, "", m.clone()),
            ApplyError::Conflicts(conflicts) => {
                let causes = conflicts
                    .iter()
                    .map(|c| crate::storage::errors::Cause {
                        kind: "FieldManagerConflict".into(),
                        message: format!("conflict with {}", c.manager.printed()),
                        field: path_string(&c.path),
                    })
                    .collect();
                Status {
                    details: Some(Box::new(Details {
                        causes,
                        ..Details::default()
                    })),
                    ..Status::failure(409, "Conflict", conflict_message(conflicts))
                }
            }
        }
    }
}

/// `getConflictMessage`.
pub(super) fn conflict_message(conflicts: &[Conflict]) -> String {
    if let [one] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            one.manager.printed(),
            path_string(&one.path)
        );
    }
    let mut by_manager: BTreeMap<&Id, Vec<String>> = BTreeMap::new();
    for c in conflicts {
        by_manager
            .entry(&c.manager)
            .or_default()
            .push(path_string(&c.path));
    }
    let mut lines = Vec::new();
    for (manager, paths) in by_manager {
        lines.push(format!("conflicts with {}:", manager.printed()));
        lines.extend(paths.into_iter().map(|p| format!("- {p}")));
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}
