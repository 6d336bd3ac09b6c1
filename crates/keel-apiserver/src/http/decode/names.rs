//! The Go types of `k8s.io/api` v0.34 whose names the OpenAPI schemas do not carry: a field
//! declared `Protocol Protocol` is `type: string` in the schema, but Go's decoder names its
//! type `v1.Protocol` (`json: cannot unmarshal number into Go struct field
//! ContainerPort.spec.containers.ports.protocol of type v1.Protocol`). Every other field's
//! Go type follows from its schema ([`super::Shape::go_type`]).
//!
//! Rows are keyed by the Go struct and the field's JSON name, for the structs the kinds keel
//! serves reach; they were listed by comparing each such struct's fields in `k8s.io/api`
//! v0.34.9 (`core/v1`, `coordination/v1`, `events/v1`) and `k8s.io/apimachinery` v0.34.9
//! (`meta/v1`) with the schemas. Go prints a type by its package's name, so `metav1.Time`,
//! `corev1.Protocol` and `coordinationv1.CoordinatedLeaseStrategy` are all `v1.`.

/// The Go type of the field `field` of the struct `owner`, where it has a name of its own
/// (a slice of such a type is `[]v1.Capability`).
pub fn named_type(owner: &str, field: &str) -> Option<&'static str> {
    Some(match (owner, field) {
        ("Capabilities", "add") | ("Capabilities", "drop") => "[]v1.Capability",
        ("NamespaceSpec", "finalizers") => "[]v1.FinalizerName",
        ("ServiceSpec", "ipFamilies") => "[]v1.IPFamily",
        ("PersistentVolumeClaimSpec", "accessModes") => "[]v1.PersistentVolumeAccessMode",
        ("NodeStatus", "volumesInUse") => "[]v1.UniqueVolumeName",
        ("ConfigMapNodeConfigSource", "uid")
        | ("ObjectMeta", "uid")
        | ("ObjectReference", "uid")
        | ("OwnerReference", "uid") => "types.UID",
        ("AppArmorProfile", "type") => "v1.AppArmorProfileType",
        ("AzureDiskVolumeSource", "cachingMode") => "v1.AzureDataDiskCachingMode",
        ("AzureDiskVolumeSource", "kind") => "v1.AzureDataDiskKind",
        ("Condition", "status")
        | ("NamespaceCondition", "status")
        | ("NodeCondition", "status")
        | ("PodCondition", "status") => "v1.ConditionStatus",
        ("Container", "restartPolicy") | ("EphemeralContainer", "restartPolicy") => {
            "v1.ContainerRestartPolicy"
        }
        ("ContainerRestartRule", "action") => "v1.ContainerRestartRuleAction",
        ("ContainerRestartRuleOnExitCodes", "operator") => {
            "v1.ContainerRestartRuleOnExitCodesOperator"
        }
        ("LeaseSpec", "strategy") => "v1.CoordinatedLeaseStrategy",
        ("PodSpec", "dnsPolicy") => "v1.DNSPolicy",
        ("HostPathVolumeSource", "type") => "v1.HostPathType",
        ("ServiceSpec", "ipFamilyPolicy") => "v1.IPFamilyPolicy",
        ("LabelSelectorRequirement", "operator") => "v1.LabelSelectorOperator",
        ("LoadBalancerIngress", "ipMode") => "v1.LoadBalancerIPMode",
        ("ManagedFieldsEntry", "operation") => "v1.ManagedFieldsOperationType",
        ("VolumeMount", "mountPropagation") => "v1.MountPropagationMode",
        ("NamespaceCondition", "type") => "v1.NamespaceConditionType",
        ("NamespaceStatus", "phase") => "v1.NamespacePhase",
        ("NodeAddress", "type") => "v1.NodeAddressType",
        ("NodeCondition", "type") => "v1.NodeConditionType",
        ("TopologySpreadConstraint", "nodeAffinityPolicy")
        | ("TopologySpreadConstraint", "nodeTaintsPolicy") => "v1.NodeInclusionPolicy",
        ("NodeStatus", "phase") => "v1.NodePhase",
        ("NodeSelectorRequirement", "operator") => "v1.NodeSelectorOperator",
        ("PodOS", "name") => "v1.OSName",
        ("PersistentVolumeClaimSpec", "volumeMode") => "v1.PersistentVolumeMode",
        ("PodCondition", "type") | ("PodReadinessGate", "conditionType") => "v1.PodConditionType",
        ("PodSecurityContext", "fsGroupChangePolicy") => "v1.PodFSGroupChangePolicy",
        ("PodStatus", "phase") => "v1.PodPhase",
        ("PodStatus", "qosClass") => "v1.PodQOSClass",
        ("PodStatus", "resize") => "v1.PodResizeStatus",
        ("PodSecurityContext", "seLinuxChangePolicy") => "v1.PodSELinuxChangePolicy",
        ("PodSpec", "preemptionPolicy") => "v1.PreemptionPolicy",
        ("SecurityContext", "procMount") => "v1.ProcMountType",
        ("ContainerPort", "protocol")
        | ("EndpointPort", "protocol")
        | ("PortStatus", "protocol")
        | ("ServicePort", "protocol") => "v1.Protocol",
        ("Container", "imagePullPolicy")
        | ("EphemeralContainer", "imagePullPolicy")
        | ("ImageVolumeSource", "pullPolicy") => "v1.PullPolicy",
        ("VolumeMount", "recursiveReadOnly") | ("VolumeMountStatus", "recursiveReadOnly") => {
            "v1.RecursiveReadOnlyMode"
        }
        ("ResourceHealth", "health") => "v1.ResourceHealthStatus",
        ("ResourceHealth", "resourceID") => "v1.ResourceID",
        ("ContainerStatus", "allocatedResources")
        | ("NodeStatus", "allocatable")
        | ("NodeStatus", "capacity")
        | ("PodSpec", "overhead")
        | ("ResourceRequirements", "limits")
        | ("ResourceRequirements", "requests")
        | ("VolumeResourceRequirements", "limits")
        | ("VolumeResourceRequirements", "requests") => "v1.ResourceList",
        ("ContainerResizePolicy", "resourceName") | ("ResourceStatus", "name") => "v1.ResourceName",
        ("ContainerResizePolicy", "restartPolicy") => "v1.ResourceResizeRestartPolicy",
        ("PodSpec", "restartPolicy") => "v1.RestartPolicy",
        ("SeccompProfile", "type") => "v1.SeccompProfileType",
        ("Secret", "type") => "v1.SecretType",
        ("ServiceSpec", "sessionAffinity") => "v1.ServiceAffinity",
        ("ServiceSpec", "externalTrafficPolicy") => "v1.ServiceExternalTrafficPolicy",
        ("ServiceSpec", "internalTrafficPolicy") => "v1.ServiceInternalTrafficPolicy",
        ("ServiceSpec", "type") => "v1.ServiceType",
        ("ContainerStatus", "stopSignal") | ("Lifecycle", "stopSignal") => "v1.Signal",
        ("EmptyDirVolumeSource", "medium") => "v1.StorageMedium",
        ("PodSecurityContext", "supplementalGroupsPolicy") => "v1.SupplementalGroupsPolicy",
        ("Taint", "effect") | ("Toleration", "effect") => "v1.TaintEffect",
        ("Container", "terminationMessagePolicy")
        | ("EphemeralContainer", "terminationMessagePolicy") => "v1.TerminationMessagePolicy",
        ("Toleration", "operator") => "v1.TolerationOperator",
        ("HTTPGetAction", "scheme") => "v1.URIScheme",
        ("AttachedVolume", "name") => "v1.UniqueVolumeName",
        ("TopologySpreadConstraint", "whenUnsatisfiable") => "v1.UnsatisfiableConstraintAction",
        _ => return None,
    })
}
