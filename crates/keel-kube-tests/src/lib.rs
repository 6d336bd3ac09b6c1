//! Nothing to link: this crate holds the end-to-end tests (`tests/`) that drive keel's
//! Kubernetes API with kube-rs, kept apart so that kube-rs is only ever a test dependency.
