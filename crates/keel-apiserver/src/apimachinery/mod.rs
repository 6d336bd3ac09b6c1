//! What Kubernetes' `k8s.io/apimachinery` (and the Go standard library under it) says in
//! words, done once for the whole server: how Go quotes a string ([`quote`]) and prints a
//! decoded JSON value or a float ([`go_value`]), how a `metav1.Time` or `MicroTime` is written
//! and an age worded ([`time`]), what a resource quantity amounts to ([`quantity`]), and what
//! `pkg/util/validation` finds wrong with a name, a label or a key ([`validation`]).
//!
//! A leaf: nothing here uses the rest of the crate, so every layer (storage, registry, http,
//! controllers) can use it.

pub mod go_value;
pub mod quantity;
pub mod quote;
pub mod time;
pub mod validation;
