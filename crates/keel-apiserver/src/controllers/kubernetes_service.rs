//! The `default/kubernetes` Service, its Endpoints and its EndpointSlice, as kube-apiserver
//! keeps them (`kubernetesservice` controller and endpoint reconciler, whose
//! pkg/controlplane/reconcilers/endpointsadapter.go writes both endpoint kinds): clients
//! inside the cluster find the apiserver at the first address of `--service-cluster-ip-range`,
//! port 443, which the Endpoints and the EndpointSlice map to this apiserver's advertised
//! address and serving port. Checked every ten seconds (`EndpointInterval`): the Service is
//! made if missing and its ports and type set back if changed; the Endpoints and the
//! EndpointSlice are made or set to this apiserver's address. The slice is labelled
//! `kubernetes.io/service-name: kubernetes` (the adapter's only label), of the service IP's
//! address type (one of another type is deleted and made again, as that field is
//! immutable), its endpoint ready, its port `https`.
//!
//! kube-apiserver's lease reconciler lists every apiserver sharing the store through store
//! leases of its own; keel's apiservers each write their own address, so with several
//! apiservers on one store the Endpoints name the last one that checked.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::apimachinery::time::Time;
use crate::fieldmanager::FieldManager;
use crate::registry::store::Registry;
use crate::storage::Status;

/// The Service's and the Endpoints' name.
pub const NAME: &str = "kubernetes";
/// How often they are checked.
const INTERVAL: Duration = Duration::from_secs(10);
/// The field manager of the writes (kube-apiserver's own client).
const MANAGER: &str = "kube-apiserver";

/// Where clients find this apiserver.
#[derive(Debug, Clone, Copy)]
pub struct KubernetesService {
    /// The Service's cluster IP.
    pub cluster_ip: IpAddr,
    /// The address in the Endpoints.
    pub advertise: IpAddr,
    /// The serving port (the Service's target port).
    pub port: u16,
}

/// The address to advertise (kube-apiserver's `--advertise-address` default): `advertise`
/// if set, else the bind address unless it is unspecified or loopback, else the host's
/// default-route address (the bind address if the host has no route).
pub fn advertise_address(advertise: Option<IpAddr>, bind: IpAddr) -> IpAddr {
    if let Some(ip) = advertise.filter(|ip| !ip.is_unspecified()) {
        return ip;
    }
    if !bind.is_unspecified() && !bind.is_loopback() {
        return bind;
    }
    // A connected UDP socket sends nothing; it only asks the kernel for the route's source.
    let routed = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
        .and_then(|s| {
            s.connect(SocketAddr::from(([192, 0, 2, 1], 443)))?;
            s.local_addr()
        })
        .map(|a| a.ip());
    match routed {
        Ok(ip) if !ip.is_unspecified() => ip,
        _ if bind.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        _ => bind,
    }
}

impl KubernetesService {
    /// The Service's ports.
    fn ports(&self) -> Value {
        json!([{"name": "https", "protocol": "TCP", "port": 443, "targetPort": self.port}])
    }

    /// The Service to create.
    fn service(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": NAME, "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {
                "ports": self.ports(),
                "clusterIP": self.cluster_ip.to_string(),
                "ipFamilyPolicy": "SingleStack",
                "sessionAffinity": "None",
                "type": "ClusterIP",
            },
        })
    }

    /// The stored Service with its ports and type set back, if they changed
    /// (`getMasterServiceUpdateIfNeeded`).
    fn service_update(&self, stored: &Value) -> Option<Value> {
        let spec = &stored["spec"];
        if spec["type"] == "ClusterIP" && spec["ports"] == self.ports() {
            return None;
        }
        let mut fixed = stored.clone();
        fixed["spec"]["ports"] = self.ports();
        fixed["spec"]["type"] = "ClusterIP".into();
        Some(fixed)
    }

    /// The Endpoints' subsets.
    fn subsets(&self) -> Value {
        json!([{
            "addresses": [{"ip": self.advertise.to_string()}],
            "ports": [{"name": "https", "port": self.port, "protocol": "TCP"}],
        }])
    }

    /// The stored Endpoints as they should be, if they are not (None: missing).
    fn endpoints(&self, stored: Option<&Value>) -> Option<Value> {
        let mut endpoints = stored.cloned().unwrap_or_else(
            || json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": NAME}}),
        );
        let labels = endpoints["metadata"]["labels"].clone();
        let mirrored =
            labels.get("endpointslice.kubernetes.io/skip-mirror") != Some(&"true".into());
        if stored.is_some() && endpoints["subsets"] == self.subsets() && !mirrored {
            return None;
        }
        endpoints["subsets"] = self.subsets();
        if !labels.is_object() {
            endpoints["metadata"]["labels"] = json!({});
        }
        endpoints["metadata"]["labels"]["endpointslice.kubernetes.io/skip-mirror"] = "true".into();
        Some(endpoints)
    }

    /// The EndpointSlice's address type: the service IP's family's (`NewEndpointsAdapter`).
    fn address_type(&self) -> &'static str {
        if self.cluster_ip.is_ipv4() {
            "IPv4"
        } else {
            "IPv6"
        }
    }

    /// The EndpointSlice as `updateEndpointSlice` makes it from `stored` (None: missing),
    /// if it differs from `stored` in its endpoints, ports or labels.
    fn endpoint_slice(&self, stored: Option<&Value>) -> Option<Value> {
        let mut slice = stored.cloned().unwrap_or_else(|| {
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": NAME, "namespace": "default"}})
        });
        let same_family = self.advertise.is_ipv4() == self.cluster_ip.is_ipv4();
        let endpoints: Vec<Value> = same_family
            .then(|| json!({"addresses": [self.advertise.to_string()], "conditions": {"ready": true}}))
            .into_iter()
            .collect();
        let ports = json!([{"name": "https", "port": self.port, "protocol": "TCP"}]);
        let labels = json!({"kubernetes.io/service-name": NAME});
        let current = |field: &str| slice.get(field).cloned().unwrap_or(json!([]));
        if stored.is_some()
            && current("endpoints") == json!(endpoints)
            && current("ports") == ports
            && slice["metadata"]["labels"] == labels
        {
            return None;
        }
        slice["metadata"]["labels"] = labels;
        slice["addressType"] = self.address_type().into();
        slice["endpoints"] = json!(endpoints);
        slice["ports"] = ports;
        Some(slice)
    }

    /// Makes the object `name` of `kind` in `default` what `make` says: `make(None)` is the
    /// object to create when it is missing, `make(Some(stored))` the stored one as it should
    /// be, None when it already is.
    async fn sync(
        &self,
        registry: &Registry,
        kind: &dyn crate::registry::Strategy,
        make: impl Fn(Option<&Value>) -> Option<Value>,
    ) -> Result<(), Status> {
        let ns = Some("default");
        let fields = FieldManager::new(kind, None, Time::now());
        match registry.get(kind, ns, NAME, "").await {
            Ok(stored) => {
                if make(Some(&stored)).is_some() {
                    registry
                        .update(kind, ns, NAME, None, false, |current| {
                            let current = current.cloned().unwrap_or_default();
                            let mut new = make(Some(&current)).unwrap_or(current.clone());
                            fields.update(Some(&current), &mut new, MANAGER);
                            Ok(new)
                        })
                        .await?;
                }
            }
            Err(status) if status.code == 404 => {
                let mut obj = make(None).unwrap_or_default();
                fields.update(None, &mut obj, MANAGER);
                match registry.create(kind, ns, obj, false).await {
                    Ok(_) | Err(Status { code: 409, .. }) => {}
                    Err(status) => return Err(status),
                }
            }
            Err(status) => return Err(status),
        }
        Ok(())
    }

    /// Runs until the process ends: tried again soon until the first check passes (the
    /// `default` namespace may not exist yet), then every ten seconds.
    pub async fn run(self, registry: Arc<Registry>) {
        let mut retry = Duration::from_millis(100);
        let mut checked = false;
        loop {
            match self.reconcile(&registry).await {
                Ok(()) => checked = true,
                Err(status) => {
                    tracing::debug!(error = %status.message, "reconciling the kubernetes service");
                }
            }
            if checked {
                tokio::time::sleep(INTERVAL).await;
            } else {
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(INTERVAL);
            }
        }
    }

    /// One check of the Service, the Endpoints and the EndpointSlice.
    pub async fn reconcile(&self, registry: &Registry) -> Result<(), Status> {
        let services = registry.core("services");
        self.sync(registry, services, |stored| match stored {
            None => Some(self.service()),
            Some(stored) => {
                let fixed = self.service_update(stored);
                if fixed.is_some() {
                    tracing::warn!("resetting the kubernetes service's ports and type");
                }
                fixed
            }
        })
        .await?;
        let endpoints = registry.core("endpoints");
        self.sync(registry, endpoints, |stored| self.endpoints(stored))
            .await?;
        let Some(slices) = registry.kind("discovery.k8s.io", "v1", "endpointslices") else {
            return Ok(());
        };
        // The address type is immutable: a slice of another is deleted and made again.
        match registry.get(slices, Some("default"), NAME, "").await {
            Ok(stored) if stored["addressType"] != self.address_type() => {
                let options = crate::registry::store::DeleteOptions::default();
                match registry
                    .delete(slices, Some("default"), NAME, &options)
                    .await
                {
                    Ok(_) | Err(Status { code: 404, .. }) => {}
                    Err(status) => return Err(status),
                }
            }
            _ => {}
        }
        self.sync(registry, slices, |stored| self.endpoint_slice(stored))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERVICE: KubernetesService = KubernetesService {
        cluster_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        advertise: IpAddr::V4(Ipv4Addr::new(192, 168, 1, 5)),
        port: 6443,
    };

    #[test]
    fn the_service_is_set_back_only_when_its_ports_or_type_changed() {
        let mut stored = SERVICE.service();
        assert_eq!(SERVICE.service_update(&stored), None);
        stored["spec"]["type"] = "NodePort".into();
        stored["spec"]["ports"][0]["port"] = 8443.into();
        let fixed = SERVICE.service_update(&stored).unwrap();
        assert_eq!(fixed["spec"]["type"], "ClusterIP");
        assert_eq!(fixed["spec"]["ports"], SERVICE.ports());
    }

    #[test]
    fn the_endpoints_name_this_apiserver_and_are_not_mirrored() {
        let made = SERVICE.endpoints(None).unwrap();
        assert_eq!(made["subsets"][0]["addresses"][0]["ip"], "192.168.1.5");
        assert_eq!(made["subsets"][0]["ports"][0]["port"], 6443);
        assert_eq!(
            made["metadata"]["labels"]["endpointslice.kubernetes.io/skip-mirror"],
            "true"
        );
        assert_eq!(SERVICE.endpoints(Some(&made)), None);
    }

    #[test]
    fn the_endpoint_slice_is_the_one_the_endpoints_adapter_writes() {
        // `updateEndpointSlice` of a missing slice: name and namespace, the service-name
        // label, the service IP's address type, one ready endpoint, the `https` port.
        let made = SERVICE.endpoint_slice(None).unwrap();
        let expected = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "kubernetes", "namespace": "default",
                "labels": {"kubernetes.io/service-name": "kubernetes"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["192.168.1.5"], "conditions": {"ready": true}}],
            "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]});
        assert_eq!(made, expected);
        assert_eq!(SERVICE.endpoint_slice(Some(&made)), None);
        let mut moved = made.clone();
        moved["endpoints"][0]["addresses"][0] = "10.9.9.9".into();
        moved["metadata"]["labels"]["extra"] = "x".into();
        let fixed = SERVICE.endpoint_slice(Some(&moved)).unwrap();
        assert_eq!(fixed["endpoints"], expected["endpoints"]);
        assert_eq!(fixed["metadata"]["labels"], expected["metadata"]["labels"]);
    }

    #[test]
    fn the_advertised_address_is_the_flag_or_a_routable_bind_address() {
        let flag: IpAddr = "10.1.2.3".parse().unwrap();
        let bind: IpAddr = "192.168.7.7".parse().unwrap();
        assert_eq!(advertise_address(Some(flag), bind), flag);
        assert_eq!(advertise_address(None, bind), bind);
        let local = advertise_address(None, IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert!(!local.is_unspecified());
    }
}
