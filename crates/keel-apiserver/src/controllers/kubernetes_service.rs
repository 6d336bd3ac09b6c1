//! The `default/kubernetes` Service and its Endpoints, as kube-apiserver keeps them
//! (`kubernetesservice` controller and endpoint reconciler): clients inside the cluster find
//! the apiserver at the first address of `--service-cluster-ip-range`, port 443, which the
//! Endpoints map to this apiserver's advertised address and serving port. Checked every ten
//! seconds (`EndpointInterval`): the Service is made if missing and its ports and type set
//! back if changed; the Endpoints are made or set to this apiserver's address.
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

    /// One check of the Service and the Endpoints.
    pub async fn reconcile(&self, registry: &Registry) -> Result<(), Status> {
        let services = registry.core("services");
        let ns = Some("default");
        match registry.get(services, ns, NAME, "").await {
            Ok(stored) => {
                if self.service_update(&stored).is_some() {
                    tracing::warn!("resetting the kubernetes service's ports and type");
                    let fields = FieldManager::new(services, None, Time::now());
                    registry
                        .update(services, ns, NAME, None, false, |current| {
                            let current = current.cloned().unwrap_or_default();
                            let mut new = self.service_update(&current).unwrap_or(current.clone());
                            fields.update(Some(&current), &mut new, MANAGER);
                            Ok(new)
                        })
                        .await?;
                }
            }
            Err(status) if status.code == 404 => {
                let mut service = self.service();
                FieldManager::new(services, None, Time::now()).update(None, &mut service, MANAGER);
                match registry.create(services, ns, service, false).await {
                    Ok(_) | Err(Status { code: 409, .. }) => {}
                    Err(status) => return Err(status),
                }
            }
            Err(status) => return Err(status),
        }
        let kind = registry.core("endpoints");
        let fields = FieldManager::new(kind, None, Time::now());
        match registry.get(kind, ns, NAME, "").await {
            Ok(stored) => {
                if self.endpoints(Some(&stored)).is_some() {
                    registry
                        .update(kind, ns, NAME, None, false, |current| {
                            let current = current.cloned().unwrap_or_default();
                            let mut new = self.endpoints(Some(&current)).unwrap_or(current.clone());
                            fields.update(Some(&current), &mut new, MANAGER);
                            Ok(new)
                        })
                        .await?;
                }
            }
            Err(status) if status.code == 404 => {
                let mut endpoints = self.endpoints(None).unwrap_or_default();
                fields.update(None, &mut endpoints, MANAGER);
                match registry.create(kind, ns, endpoints, false).await {
                    Ok(_) | Err(Status { code: 409, .. }) => {}
                    Err(status) => return Err(status),
                }
            }
            Err(status) => return Err(status),
        }
        Ok(())
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
    fn the_advertised_address_is_the_flag_or_a_routable_bind_address() {
        let flag: IpAddr = "10.1.2.3".parse().unwrap();
        let bind: IpAddr = "192.168.7.7".parse().unwrap();
        assert_eq!(advertise_address(Some(flag), bind), flag);
        assert_eq!(advertise_address(None, bind), bind);
        let local = advertise_address(None, IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert!(!local.is_unspecified());
    }
}
