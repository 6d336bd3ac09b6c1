//! Skipping a test, with one rule for every suite.
//!
//! A test that cannot run because the machine lacks a capability it needs (root, network
//! namespaces, FUSE, a tmpfs mount, strace) calls [`skip`]. Outside CI that passes, saying so;
//! with `CI=true` (root or not) it fails, because CI installs everything the tests need and a
//! missing capability there is a broken machine, never a pass.
//!
//! A skip is seen even where the runner hides the output of passing tests (nextest's `ci`
//! profile): besides its `SKIPPED:` line on stderr, it appends `test: why` to the file named by
//! `KEEL_TEST_SKIP_LOG`, which `scripts/test` sets, then prints at the end of the run.
//!
//! A test that does not apply to the server under test (`KEEL_TEST_TARGET=etcd` runs a test
//! written for a behaviour only keel has) is not a skip: [`not_applicable`] says so and the
//! test passes, whatever `CI` says; it is recorded in `KEEL_TEST_NOT_APPLICABLE_LOG`, which
//! `scripts/test` lists apart from the skips.

use std::fs::OpenOptions;
use std::io::Write;

use crate::target_flavor;

/// The variable naming the file every skip is appended to.
pub const SKIP_LOG_VAR: &str = "KEEL_TEST_SKIP_LOG";

/// The variable naming the file every test that does not apply to the target is appended to.
pub const NOT_APPLICABLE_LOG_VAR: &str = "KEEL_TEST_NOT_APPLICABLE_LOG";

/// Whether this run is CI's (`CI=true`).
pub fn in_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// Skips the running test `test` because the machine lacks `what`. Under `CI=true` it panics
/// instead: a missing capability never passes silently in CI. The caller returns right after.
pub fn skip(test: &str, what: &str) {
    assert!(
        !in_ci(),
        "{test}: cannot run in CI: {what}; scripts/test installs what the tests need"
    );
    eprintln!("SKIPPED: {test}: {what}");
    record(SKIP_LOG_VAR, &format!("{test}: {what}"));
}

/// Appends `line` to the file the variable `var` names, if it is set.
fn record(var: &str, line: &str) {
    if let Some(path) = std::env::var_os(var) {
        let logged = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| writeln!(f, "{line}"));
        if let Err(e) = logged {
            panic!("record `{line}` in {}: {e}", path.to_string_lossy());
        }
    }
}

/// Says that `test` does not apply to the server under test (`KEEL_TEST_TARGET`), because
/// `why`; the test then returns and passes. Not a skip: nothing is missing from the machine.
pub fn not_applicable(test: &str, why: &str) {
    let target = target_flavor().name();
    eprintln!("NOT APPLICABLE to {target}: {test}: {why}");
    record(NOT_APPLICABLE_LOG_VAR, &format!("{test} ({target}): {why}"));
}
