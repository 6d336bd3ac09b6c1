//! CustomResourceDefinitions (`apiextensions.k8s.io/v1`), as kube-apiserver's
//! apiextensions-apiserver serves them: a CRD's `openAPIV3Schema` checked as upstream checks
//! it, and the custom resources it defines validated, defaulted and pruned by it, with its
//! CEL rules ([`cel`]).

pub mod applied;
pub mod cel;
pub mod crd;
pub mod defaults;
pub mod formats;
pub mod go_regex;
pub mod jsonpath;
pub mod listtype;
pub mod prune;
pub mod structural;
pub mod validate;
