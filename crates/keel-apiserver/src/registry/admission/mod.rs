//! Admission: the built-in admission plugins of kube-apiserver that keel runs, one file each,
//! called by the registry on every create and update (a client's or the server's own, as
//! kube-apiserver's loopback writes pass admission too):
//!
//! - [`priority`] (`Priority`): a new pod's priority from its PriorityClass; one default class;
//! - [`default_storage_class`] (`DefaultStorageClass`): a new claim without a class gets the
//!   default StorageClass;
//! - [`storage_object_in_use_protection`] (`StorageObjectInUseProtection`): new claims and
//!   volumes get the protection finalizers the pvc- and pv-protection controllers remove.
//!
//! The order is kube-apiserver's: the mutating step ([`admit_create`], [`UpdateAdmission`])
//! runs on the decoded object before the kind's strategy prepares it, the validating step
//! after the strategy validated it. What a plugin reads of other kinds (PriorityClasses,
//! StorageClasses) it reads from the watch cache, as upstream's plugins read their informers'
//! listers; for an update that is read once, before the write, so each attempt of the write
//! decides without I/O. `--enable-admission-plugins` and `--disable-admission-plugins`
//! ([`Plugins::from_flags`]) turn them on and off by upstream's names; all three are on by
//! default, as in kube-apiserver 1.34.

pub mod default_storage_class;
pub mod priority;
pub mod storage_object_in_use_protection;

use serde_json::Value;

use crate::registry::store::{ListQuery, Registry};
use crate::registry::{Strategy, meta_str};
use crate::storage::Status;

/// The plugins kube-apiserver 1.34 registers (`AllOrderedPlugins` in
/// pkg/kubeapiserver/options/plugins.go), in its order: the names the flags accept.
pub const REGISTERED: [&str; 36] = [
    "AlwaysAdmit",
    "NamespaceAutoProvision",
    "NamespaceLifecycle",
    "NamespaceExists",
    "LimitPodHardAntiAffinityTopology",
    "LimitRanger",
    "ServiceAccount",
    "NodeRestriction",
    "TaintNodesByCondition",
    "AlwaysPullImages",
    "ImagePolicyWebhook",
    "PodSecurity",
    "PodNodeSelector",
    priority::PLUGIN,
    "DefaultTolerationSeconds",
    "PodTolerationRestriction",
    "EventRateLimit",
    "ExtendedResourceToleration",
    default_storage_class::PLUGIN,
    storage_object_in_use_protection::PLUGIN,
    "OwnerReferencesPermissionEnforcement",
    "PersistentVolumeClaimResize",
    "RuntimeClass",
    "CertificateApproval",
    "CertificateSigning",
    "ClusterTrustBundleAttest",
    "CertificateSubjectRestriction",
    "DefaultIngressClass",
    "DenyServiceExternalIPs",
    "PodTopologyLabels",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
    "AlwaysDeny",
];

/// The names a list flag gives: none for a flag set to the empty string, as pflag reads
/// `--disable-admission-plugins=`.
fn flag_names(names: &[String]) -> &[String] {
    match names {
        [only] if only.is_empty() => &[],
        names => names,
    }
}

/// The plugin names in `enable` and `disable` that kube-apiserver registers but keel does not
/// implement: accepted, so a kube-apiserver's flags start keel, but of no effect (keel runs
/// its namespace checks whatever the flags say), which the server warns of at start.
pub fn not_implemented<'a>(enable: &'a [String], disable: &'a [String]) -> Vec<&'a str> {
    let ours = [
        priority::PLUGIN,
        default_storage_class::PLUGIN,
        storage_object_in_use_protection::PLUGIN,
    ];
    let mut names: Vec<&str> = flag_names(enable)
        .iter()
        .chain(flag_names(disable))
        .map(String::as_str)
        .filter(|name| !ours.contains(name))
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// Which of keel's admission plugins run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plugins {
    /// `Priority`.
    pub priority: bool,
    /// `DefaultStorageClass`.
    pub default_storage_class: bool,
    /// `StorageObjectInUseProtection`.
    pub storage_object_in_use_protection: bool,
}

impl Default for Plugins {
    /// All on, as kube-apiserver 1.34 has them by default.
    fn default() -> Plugins {
        Plugins {
            priority: true,
            default_storage_class: true,
            storage_object_in_use_protection: true,
        }
    }
}

impl Plugins {
    /// The plugins `--enable-admission-plugins` and `--disable-admission-plugins` leave on,
    /// checked as kube-apiserver's `AdmissionOptions.Validate` checks them: every name must be
    /// a registered plugin's ([`REGISTERED`]) and no name in both lists. keel's plugins are
    /// on by default, so only a disable turns one off; a registered plugin keel does not
    /// implement is accepted and does nothing (the caller says so).
    pub fn from_flags(enable: &[String], disable: &[String]) -> Result<Plugins, String> {
        let (enable, disable) = (flag_names(enable), flag_names(disable));
        let mut errors = Vec::new();
        for (flag, names) in [("enable", enable), ("disable", disable)] {
            for name in names {
                if !REGISTERED.contains(&name.as_str()) {
                    errors.push(format!(
                        "{flag}-admission-plugins plugin {name:?} is unknown"
                    ));
                }
            }
        }
        let mut both: Vec<&str> = enable
            .iter()
            .filter(|n| disable.contains(n))
            .map(String::as_str)
            .collect();
        both.sort_unstable();
        both.dedup();
        if !both.is_empty() {
            errors.push(format!(
                "[{}] in enable-admission-plugins and disable-admission-plugins overlapped",
                both.join(" ")
            ));
        }
        // utilerrors.NewAggregate's wording: one error as it is, several in brackets.
        match errors.len() {
            0 => {}
            1 => return Err(errors.remove(0)),
            _ => return Err(format!("[{}]", errors.join(", "))),
        }
        let off = |name: &str| disable.iter().any(|d| d == name);
        Ok(Plugins {
            priority: !off(priority::PLUGIN),
            default_storage_class: !off(default_storage_class::PLUGIN),
            storage_object_in_use_protection: !off(storage_object_in_use_protection::PLUGIN),
        })
    }
}

/// Whether `kind` is the core kind `resource`.
fn is_core(kind: &dyn Strategy, resource: &str) -> bool {
    let info = kind.info();
    info.group.is_empty() && info.resource == resource
}

/// The name an admission refusal gives (`extractResourceName`: the name, else the
/// generateName, as names are generated after admission; else `Unknown`).
fn refused_name(obj: &Value) -> &str {
    match (meta_str(obj, "name"), meta_str(obj, "generateName")) {
        ("", "") => "Unknown",
        ("", generate) => generate,
        (name, _) => name,
    }
}

/// `admission.NewForbidden`: 403 Forbidden about `obj` of `kind`, for `why`.
fn forbidden(kind: &dyn Strategy, obj: &Value, why: &str) -> Status {
    Status::forbidden(&kind.info().target(refused_name(obj)), why)
}

/// Every object of the cluster-scoped `resource` of `group`/`version`, from the watch cache
/// (as a plugin's lister reads its informer); none when the kind is not served.
async fn listed(
    registry: &Registry,
    group: &str,
    version: &str,
    resource: &str,
) -> Result<Vec<Value>, Status> {
    let Some(kind) = registry.kind(group, version, resource) else {
        return Ok(Vec::new());
    };
    let cached = ListQuery {
        resource_version: "0",
        ..ListQuery::default()
    };
    let list = registry.list(kind, None, &cached).await?;
    Ok(list.objects().cloned().collect())
}

/// The mutating plugins on a new object (`obj`, decoded and defaulted, not yet prepared by
/// its kind), in kube-apiserver's order: Priority, DefaultStorageClass,
/// StorageObjectInUseProtection.
pub async fn admit_create(
    registry: &Registry,
    plugins: Plugins,
    kind: &dyn Strategy,
    obj: &mut Value,
) -> Result<(), Status> {
    if plugins.priority && is_core(kind, "pods") {
        let classes = listed(registry, "scheduling.k8s.io", "v1", "priorityclasses").await?;
        priority::admit_new_pod(obj, &classes).map_err(|why| forbidden(kind, obj, &why))?;
    }
    if plugins.default_storage_class && is_core(kind, "persistentvolumeclaims") {
        let classes = listed(registry, "storage.k8s.io", "v1", "storageclasses").await?;
        default_storage_class::admit_new_claim(obj, &classes);
    }
    if plugins.storage_object_in_use_protection {
        storage_object_in_use_protection::admit_new(kind, obj);
    }
    Ok(())
}

/// The validating plugins on a new object, once its kind has validated it.
pub async fn validate_create(
    registry: &Registry,
    plugins: Plugins,
    kind: &dyn Strategy,
    obj: &Value,
) -> Result<(), Status> {
    let admission = UpdateAdmission::gather(registry, plugins, kind, None).await?;
    admission.validate(kind, obj, None)
}

/// What admission decides of one update (of the object itself: subresources pass no
/// plugin of keel's), with what it read of other kinds before the write, so each attempt
/// decides without I/O.
#[derive(Debug, Default)]
pub struct UpdateAdmission {
    /// Priority's pod rule (keep the priority set at create).
    pods: bool,
    /// Priority's PriorityClass rule, with the classes it checks against.
    priority_classes: Option<Vec<Value>>,
}

impl UpdateAdmission {
    /// The admission of an update of `kind` (through `subresource`, if any).
    pub async fn gather(
        registry: &Registry,
        plugins: Plugins,
        kind: &dyn Strategy,
        subresource: Option<&str>,
    ) -> Result<UpdateAdmission, Status> {
        let mut admission = UpdateAdmission::default();
        if subresource.is_some() || !plugins.priority {
            return Ok(admission);
        }
        let info = kind.info();
        admission.pods = is_core(kind, "pods");
        if info.group == "scheduling.k8s.io" && info.resource == "priorityclasses" {
            let classes = listed(registry, info.group, info.version, info.resource).await?;
            admission.priority_classes = Some(classes);
        }
        Ok(admission)
    }

    /// The mutating plugins on `new`, the update of `old`, before the kind prepares it.
    pub fn admit(&self, new: &mut Value, old: &Value) {
        if self.pods {
            priority::admit_pod_update(new, old);
        }
    }

    /// The validating plugins on `new` (created when `old` is None), once validated.
    pub fn validate(
        &self,
        kind: &dyn Strategy,
        new: &Value,
        old: Option<&Value>,
    ) -> Result<(), Status> {
        if let Some(classes) = &self.priority_classes {
            priority::validate_class(new, old.is_some(), classes)
                .map_err(|why| forbidden(kind, new, &why))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_flags_are_checked_and_read_as_kube_apiserver_reads_them() {
        assert_eq!(Plugins::from_flags(&[], &[]), Ok(Plugins::default()));
        let off = Plugins::from_flags(
            &names(&["NodeRestriction"]),
            &names(&["Priority", "StorageObjectInUseProtection"]),
        )
        .unwrap();
        assert_eq!(
            off,
            Plugins {
                priority: false,
                default_storage_class: true,
                storage_object_in_use_protection: false,
            }
        );
        assert_eq!(
            Plugins::from_flags(&names(&["Bogus"]), &[]),
            Err("enable-admission-plugins plugin \"Bogus\" is unknown".into())
        );
        assert_eq!(
            Plugins::from_flags(
                &names(&["Priority", "DefaultStorageClass"]),
                &names(&["priority", "DefaultStorageClass"])
            ),
            Err(
                "[disable-admission-plugins plugin \"priority\" is unknown, \
                 [DefaultStorageClass] in enable-admission-plugins and \
                 disable-admission-plugins overlapped]"
                    .into()
            )
        );
    }

    #[test]
    fn an_empty_flag_is_an_empty_list_and_plugins_keel_lacks_are_named() {
        assert_eq!(
            Plugins::from_flags(&names(&[""]), &names(&[""])),
            Ok(Plugins::default())
        );
        assert_eq!(
            Plugins::from_flags(&names(&["Priority", ""]), &[]),
            Err("enable-admission-plugins plugin \"\" is unknown".into())
        );
        assert_eq!(
            not_implemented(
                &names(&["NodeRestriction", "Priority", "AlwaysDeny"]),
                &names(&[
                    "NamespaceLifecycle",
                    "NodeRestriction",
                    "DefaultStorageClass"
                ])
            ),
            vec!["AlwaysDeny", "NamespaceLifecycle", "NodeRestriction"]
        );
        assert!(not_implemented(&names(&[""]), &[]).is_empty());
    }

    #[test]
    fn a_refusal_names_the_object_or_its_generate_name() {
        use serde_json::json;
        assert_eq!(refused_name(&json!({"metadata": {"name": "x"}})), "x");
        assert_eq!(
            refused_name(&json!({"metadata": {"generateName": "web-"}})),
            "web-"
        );
        assert_eq!(refused_name(&json!({"metadata": {}})), "Unknown");
    }
}
