//! Controllers that run inside the apiserver, as kube-apiserver's post-start hooks and
//! kube-controller-manager's namespace controller do. They work through the registry's API
//! verbs (the same path as a client request), never on the storage layer.

pub mod namespaces;
pub mod system_namespaces;
