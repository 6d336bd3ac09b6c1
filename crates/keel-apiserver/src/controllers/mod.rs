//! Controllers that run inside the apiserver, as kube-apiserver's post-start hooks and
//! kube-controller-manager's controllers do. They work through the registry's API verbs (the
//! same path as a client request), never on the storage layer.
//!
//! kube-apiserver's own ([`system_namespaces`], [`priority_classes`], [`kubernetes_service`])
//! always run;
//! kube-controller-manager's are chosen by `--controllers` ([`Selection`]): [`namespaces`],
//! [`nodelifecycle`], [`serviceaccounts`], [`root_ca`], [`garbagecollector`],
//! [`clusterrole_aggregation`] and [`volume_protection`] (`pvc-protection`, `pv-protection`).

pub mod clusterrole_aggregation;
pub mod crds;
pub mod events;
pub mod garbagecollector;
pub mod informer;
pub mod kubernetes_service;
pub mod namespace_conditions;
pub mod namespaces;
pub mod nodelifecycle;
pub mod per_namespace;
pub mod priority_classes;
pub mod root_ca;
pub mod serviceaccounts;
pub mod system_namespaces;
pub mod volume_protection;

/// kube-controller-manager's names of the controllers keel runs.
pub const KNOWN: [&str; 8] = [
    "clusterrole-aggregation",
    "garbagecollector",
    "namespace",
    "nodelifecycle",
    "pv-protection",
    "pvc-protection",
    "root-ca-cert-publisher",
    "serviceaccount",
];

/// Which controllers `--controllers` turns on, read as kube-controller-manager reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection(Vec<String>);

impl Selection {
    /// The selection `--controllers` makes (None: unset, `keel apiserver`'s default); an
    /// error names an unknown controller as kube-controller-manager does.
    pub fn new(flag: Option<&[String]>) -> Result<Selection, String> {
        let entries: Vec<String> = match flag {
            Some(list) => list.iter().map(|e| e.trim().to_string()).collect(),
            None => crate::config::ControllerManagerConfig::APISERVER_DEFAULT
                .iter()
                .map(|e| e.to_string())
                .collect(),
        };
        for entry in &entries {
            let name = entry.strip_prefix('-').unwrap_or(entry);
            if name != "*" && !KNOWN.contains(&name) {
                return Err(format!(
                    "--controllers: {name:?} is not in the list of known controllers"
                ));
            }
        }
        Ok(Selection(entries))
    }

    /// Whether `name` runs: the first entry naming it (`name` or `-name`) decides, else `*`
    /// turns it on (none of keel's controllers is off by default).
    pub fn enabled(&self, name: &str) -> bool {
        let mut star = false;
        for entry in &self.0 {
            if entry == name {
                return true;
            }
            if entry.strip_prefix('-') == Some(name) {
                return false;
            }
            star |= entry == "*";
        }
        star
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn select(flag: &[&str]) -> Result<Selection, String> {
        let list: Vec<String> = flag.iter().map(|s| s.to_string()).collect();
        Selection::new(Some(&list))
    }

    #[test]
    fn controllers_are_chosen_as_kube_controller_manager_chooses_them() {
        let default = Selection::new(None).unwrap();
        assert!(default.enabled("namespace"));
        assert!(!default.enabled("nodelifecycle"));
        assert!(default.enabled("pvc-protection") && default.enabled("pv-protection"));
        let all = select(&["*"]).unwrap();
        assert!(KNOWN.iter().all(|c| all.enabled(c)));
        let but_one = select(&["*", "-nodelifecycle"]).unwrap();
        assert!(!but_one.enabled("nodelifecycle"));
        assert!(but_one.enabled("serviceaccount"));
        let first_wins = select(&["-namespace", "namespace", "*"]).unwrap();
        assert!(!first_wins.enabled("namespace"));
        let only = select(&["serviceaccount"]).unwrap();
        assert!(only.enabled("serviceaccount"));
        assert!(!only.enabled("namespace"));
        assert!(!select(&[]).unwrap().enabled("namespace"));
        assert_eq!(
            select(&["*", "-bogus"]).unwrap_err(),
            "--controllers: \"bogus\" is not in the list of known controllers"
        );
    }
}
