//! resourceVersion as the storage layer reads it: the revision a get or a list reads, from
//! the request's `resourceVersion`, `resourceVersionMatch` and `limit`, by the table of the
//! Kubernetes API concepts page (and kube-apiserver's `ValidateListOptions`):
//!
//! | resourceVersionMatch | limit | RV unset | RV "0" | RV "n" |
//! |---|---|---|---|---|
//! | unset | unset | latest | any (latest) | not older than n |
//! | unset | set | latest | any (latest) | exactly n |
//! | NotOlderThan | either | (refused by validation) | any (latest) | not older than n |
//! | Exact | either | (refused by validation) | (refused by validation) | exactly n |
//!
//! Without a watch cache, "any" is served as "latest". A list with a continue token reads the
//! token's revision instead (see [`super::etcd3::Etcd3::list`]).

use super::StorageError;
use super::field::FieldError;

/// What apimachinery's `ValidateListOptions` finds wrong with a list's options (not a
/// watch's); the caller answers them as a 422 on `ListOptions.meta.k8s.io ""`.
pub fn validate_list_options(
    resource_version: &str,
    resource_version_match: &str,
    continue_token: &str,
    send_initial_events: bool,
) -> Vec<FieldError> {
    const FIELD: &str = "resourceVersionMatch";
    let mut errors = Vec::new();
    if !resource_version_match.is_empty() {
        if resource_version.is_empty() {
            errors.push(FieldError::forbidden(
                FIELD,
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if !continue_token.is_empty() {
            errors.push(FieldError::forbidden(
                FIELD,
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if !["Exact", "NotOlderThan"].contains(&resource_version_match) {
            errors.push(FieldError::not_supported(
                FIELD,
                resource_version_match,
                &["Exact", "NotOlderThan", ""],
            ));
        }
        if resource_version_match == "Exact" && resource_version == "0" {
            errors.push(FieldError::forbidden(
                FIELD,
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if send_initial_events {
        errors.push(FieldError::forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for list",
        ));
    }
    errors
}

/// apimachinery's `SetListOptionsDefaults` with the WatchList feature on (kube-apiserver
/// 1.34's default): a watch from "" or "0" that says neither `sendInitialEvents` nor
/// `resourceVersionMatch` is a streaming list (`sendInitialEvents=true`,
/// `resourceVersionMatch=NotOlderThan`). Its initial objects are those it always had; with
/// `allowWatchBookmarks` they now end with the initial-events-end bookmark. The
/// `resourceVersionMatch` and `sendInitialEvents` to use.
pub fn default_watch_options<'a>(
    resource_version: &str,
    resource_version_match: &'a str,
    send_initial_events: Option<bool>,
) -> (&'a str, Option<bool>) {
    if send_initial_events.is_none()
        && resource_version_match.is_empty()
        && ["", "0"].contains(&resource_version)
    {
        return ("NotOlderThan", Some(true));
    }
    (resource_version_match, send_initial_events)
}

/// What apimachinery's `validateWatchOptions` finds wrong with a watch's options, with the
/// WatchList feature on (`sendInitialEvents` allowed). Answered as a 422 on
/// `ListOptions.meta.k8s.io ""`.
pub fn validate_watch_options(
    resource_version_match: &str,
    continue_token: &str,
    send_initial_events: bool,
) -> Vec<FieldError> {
    const FIELD: &str = "resourceVersionMatch";
    const NOT_OLDER_THAN: &str = "NotOlderThan";
    let mut errors = Vec::new();
    if send_initial_events && resource_version_match != NOT_OLDER_THAN {
        errors.push(FieldError::forbidden(
            FIELD,
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if !resource_version_match.is_empty() {
        if !send_initial_events {
            errors.push(FieldError::forbidden(
                FIELD,
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        if resource_version_match != NOT_OLDER_THAN {
            errors.push(FieldError::not_supported(
                FIELD,
                resource_version_match,
                &[NOT_OLDER_THAN],
            ));
        }
        if !continue_token.is_empty() {
            errors.push(FieldError::forbidden(
                FIELD,
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
    }
    errors
}

/// Which revision a read is served at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadAt {
    /// The latest.
    Latest,
    /// The latest, which must be at least this revision (else 504 "Too large resource
    /// version").
    NotOlderThan(i64),
    /// Exactly this revision (410 Expired once compacted).
    Exact(i64),
}

/// Parses a resourceVersion ("" and "0" are 0), worded as kube-apiserver refuses a bad one.
pub fn parse(resource_version: &str) -> Result<i64, StorageError> {
    if resource_version.is_empty() {
        return Ok(0);
    }
    let invalid = |why: &str| {
        StorageError::BadRequest(format!(
            "invalid resource version: resourceVersion: Invalid value: \"{resource_version}\": \
             strconv.ParseUint: parsing \"{resource_version}\": {why}"
        ))
    };
    if !resource_version.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid("invalid syntax"));
    }
    let n: u64 = resource_version
        .parse()
        .map_err(|_| invalid("value out of range"))?;
    // Revisions are int64 in etcd: a larger one is simply newer than any store.
    Ok(i64::try_from(n).unwrap_or(i64::MAX))
}

/// The revision a list without a continue token reads.
pub fn list_read(
    resource_version: &str,
    resource_version_match: &str,
    limit: i64,
) -> Result<ReadAt, StorageError> {
    if resource_version.is_empty() {
        return Ok(ReadAt::Latest);
    }
    let rv = parse(resource_version)?;
    Ok(match resource_version_match {
        "NotOlderThan" => ReadAt::NotOlderThan(rv),
        "Exact" if rv > 0 => ReadAt::Exact(rv),
        "Exact" => ReadAt::Latest,
        "" if limit > 0 && rv > 0 => ReadAt::Exact(rv),
        "" => ReadAt::NotOlderThan(rv),
        other => {
            return Err(StorageError::Internal(format!(
                "unknown ResourceVersionMatch value: {other}"
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_read_what_the_table_says() {
        use ReadAt::*;
        let cases = [
            ("", "", 0, Latest),
            ("0", "", 0, NotOlderThan(0)),
            ("7", "", 0, NotOlderThan(7)),
            ("", "", 5, Latest),
            ("0", "", 5, NotOlderThan(0)),
            ("7", "", 5, Exact(7)),
            ("0", "NotOlderThan", 5, NotOlderThan(0)),
            ("7", "NotOlderThan", 5, NotOlderThan(7)),
            ("7", "Exact", 0, Exact(7)),
            ("7", "Exact", 5, Exact(7)),
        ];
        for (rv, m, limit, want) in cases {
            assert_eq!(
                list_read(rv, m, limit).unwrap(),
                want,
                "rv {rv:?} match {m:?} limit {limit}"
            );
        }
        assert_eq!(
            list_read("7", "Newest", 0).unwrap_err(),
            StorageError::Internal("unknown ResourceVersionMatch value: Newest".into())
        );
    }

    #[test]
    fn list_options_are_validated_as_apimachinery_validates_them() {
        use crate::storage::Status;
        let message = |rv, m, c, sie| {
            let errors = validate_list_options(rv, m, c, sie);
            Status::invalid("meta.k8s.io", "ListOptions", "", &errors).message
        };
        assert!(validate_list_options("", "", "", false).is_empty());
        assert!(validate_list_options("5", "Exact", "", false).is_empty());
        assert_eq!(
            message("", "Exact", "", false),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: \
             resourceVersionMatch is forbidden unless resourceVersion is provided"
        );
        assert_eq!(
            message("0", "Exact", "", false),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: \
             resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""
        );
        assert_eq!(
            message("5", "Newest", "tok", true),
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: \
             resourceVersionMatch is forbidden when continue is provided, resourceVersionMatch: \
             Unsupported value: \"Newest\": supported values: \"Exact\", \"NotOlderThan\", \"\", \
             sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list]"
        );
        let watch = |m, c, sie| {
            let errors = validate_watch_options(m, c, sie);
            Status::invalid("meta.k8s.io", "ListOptions", "", &errors).message
        };
        assert!(validate_watch_options("", "", false).is_empty());
        assert!(validate_watch_options("NotOlderThan", "", true).is_empty());
        assert_eq!(
            watch("", "", true),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: \
             sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
        );
        assert_eq!(
            watch("NotOlderThan", "tok", true),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: \
             resourceVersionMatch is forbidden when continue is provided"
        );
        assert_eq!(
            watch("Exact", "", false),
            "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: Forbidden: \
             resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided, \
             resourceVersionMatch: Unsupported value: \"Exact\": supported values: \
             \"NotOlderThan\"]"
        );
        let s = Status::invalid(
            "meta.k8s.io",
            "ListOptions",
            "",
            &validate_list_options("", "Exact", "", false),
        );
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["code"], 422);
        assert_eq!(v["reason"], "Invalid");
        assert_eq!(v["details"]["kind"], "ListOptions");
        assert_eq!(v["details"]["group"], "meta.k8s.io");
        assert_eq!(v["details"]["causes"][0]["reason"], "FieldValueForbidden");
        assert_eq!(v["details"]["causes"][0]["field"], "resourceVersionMatch");
        assert_eq!(
            v["details"]["causes"][0]["message"],
            "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
        );
    }

    #[test]
    fn a_watch_from_empty_or_zero_saying_nothing_is_a_streaming_list() {
        for rv in ["", "0"] {
            assert_eq!(
                default_watch_options(rv, "", None),
                ("NotOlderThan", Some(true))
            );
        }
        assert_eq!(default_watch_options("5", "", None), ("", None));
        assert_eq!(
            default_watch_options("", "", Some(false)),
            ("", Some(false))
        );
        assert_eq!(default_watch_options("0", "Exact", None), ("Exact", None));
    }

    #[test]
    fn bad_resource_versions_are_worded_as_kubernetes_words_them() {
        assert_eq!(parse("").unwrap(), 0);
        assert_eq!(parse("0").unwrap(), 0);
        assert_eq!(parse("18446744073709551615").unwrap(), i64::MAX);
        assert_eq!(
            parse("abc").unwrap_err(),
            StorageError::BadRequest(
                "invalid resource version: resourceVersion: Invalid value: \"abc\": \
                 strconv.ParseUint: parsing \"abc\": invalid syntax"
                    .into()
            )
        );
        for bad in ["-1", "1.5", " 1"] {
            assert!(
                matches!(parse(bad), Err(StorageError::BadRequest(m)) if m.ends_with("invalid syntax"))
            );
        }
        assert!(
            matches!(parse("18446744073709551616"), Err(StorageError::BadRequest(m)) if m.ends_with("value out of range"))
        );
    }
}
