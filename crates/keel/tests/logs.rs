//! Logs an operator can read: written to a file (as every test's server log is), a log
//! carries no terminal colour codes; with `keel store --log-format json` (etcd 3.6's flag),
//! `keel apiserver --logging-format json` (kube-apiserver's) or either on `keel up`, every
//! line is one JSON object with the time, the level, the component and the message, and
//! the store's lines name the member.

use serde_json::Value;

use keel_testkit::kube::{Kube, Stack};
use keel_testkit::{Flavor, Server, ServerOpts};

/// Every line of `log` as a JSON object (failing on the first that is not one).
fn json_lines(log: &str) -> Vec<Value> {
    log.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let line: Value = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {l:?}\n{log}"));
            for field in ["ts", "level", "component", "msg"] {
                assert!(line.get(field).is_some(), "no {field} in {l}");
            }
            line
        })
        .collect()
}

#[test]
fn a_log_written_to_a_file_has_no_colour_codes() {
    let server = Server::start(Flavor::Keel);
    let log = server.log();
    assert!(log.contains("ready to serve client requests"), "{log}");
    assert!(
        !log.contains('\u{1b}'),
        "escape codes in a log file:\n{log}"
    );
}

#[test]
fn keel_store_logs_json_lines_that_name_the_member() {
    let server = Server::start_with(
        Flavor::Keel,
        ServerOpts {
            name: Some("m1".into()),
            args: vec!["--log-format=json".into()],
            ..ServerOpts::default()
        },
    );
    let lines = json_lines(&server.log());
    let ready = lines
        .iter()
        .find(|l| l["msg"] == "ready to serve client requests")
        .expect("the ready line");
    assert_eq!(ready["component"], "store");
    assert_eq!(ready["member"], "m1");
    assert_eq!(ready["level"], "info");
    assert!(
        lines.iter().any(|l| l["msg"]
            .as_str()
            .is_some_and(|m| m.contains("keel store is serving"))),
        "the banner is a log line too"
    );
}

#[test]
fn keel_up_logs_json_lines_of_both_components() {
    let kube = Kube::start_with(Stack::Up, &["--logging-format=json"]);
    kube.kubectl_ok(&["create", "configmap", "c1", "--from-literal=a=b"]);
    let lines = json_lines(&kube.log());
    for component in ["store", "apiserver"] {
        assert!(
            lines.iter().any(|l| l["component"] == component),
            "no {component} line in {lines:?}"
        );
    }
}

#[test]
fn a_bad_log_format_is_refused() {
    let out = std::process::Command::new(keel_testkit::keel_bin())
        .args(["store", "--log-format=xml"])
        .output()
        .expect("run keel");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--log-format"));
}
