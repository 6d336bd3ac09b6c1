//! The etcd3 storage layer, as kube-apiserver's `storage/etcd3` package: every object is one
//! key (see [`key`]), its resourceVersion is the key's mod_revision, and every write is a Txn
//! that compares that revision, so concurrent writers never overwrite each other unseen.
//!
//! Values are opaque bytes here (the registry encodes objects as JSON with apiVersion and
//! kind); errors are [`StorageError`]s, which [`errors`] turns into Kubernetes `Status`
//! objects.

pub mod backends;
pub mod cacher;
pub mod channel;
pub mod compactor;
pub mod continue_token;
pub mod endpoints;
pub mod errors;
pub mod etcd3;
pub mod field;
pub mod health;
pub mod interface;
pub mod key;
pub mod lease_reuse;
pub mod resource_version;
pub mod watch;

pub use backends::{Backend, Backends};
pub use channel::StoreChannel;
pub use compactor::Compactor;
pub use errors::{Details, Status, StorageError, Target};
pub use etcd3::{Etcd3, Existing, ListOptions, ListPage, Object};
pub use field::FieldError;
pub use interface::Storage;
pub use key::KeyLayout;
pub use resource_version::ReadAt;
pub use watch::{Event, Received, Watch};
