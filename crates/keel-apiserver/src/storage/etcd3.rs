//! [`Etcd3`]: objects in an etcd v3 store, read and written as kube-apiserver's etcd3 store
//! does it.
//!
//! - get: one Range; a resourceVersion asked for is a minimum ("not older than").
//! - create: `Txn(if mod_revision(key) == 0 then Put)`: a create never overwrites.
//! - update ([`Etcd3::guaranteed_update`]): read (or start from the caller's [`Existing`]
//!   object, e.g. the watch cache's), let the caller compute the new value, then
//!   `Txn(if mod_revision(key) == read revision then Put else Range)`; when another writer
//!   got there first, the Range answers the newer object and the caller computes again from
//!   it. A value equal to the stored one is not written (the resourceVersion stays); an
//!   object keeps its lease (its TTL) across updates. A start that was not just read from the
//!   store is a guess, as kube-apiserver's `origStateIsCurrent` is false for it: the caller
//!   refusing it, or finding nothing to change, reads the store before either is answered,
//!   so a stale guess costs a read or a failed Txn, never a wrong answer.
//! - delete: the same loop with `DeleteRange` (the caller's preconditions are checked against
//!   every object read).
//! - list: Range over the collection's prefix with a limit, every page read at the first
//!   page's revision and continued by a token (see [`super::continue_token`]); with a filter,
//!   the Range limit doubles (up to 10,000) until a page is full, as kube-apiserver pages.

use std::sync::Arc;
use std::time::Instant;

use super::StoreChannel;
use keel_proto::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use keel_proto::etcdserverpb::kv_client::KvClient;
use keel_proto::etcdserverpb::lease_client::LeaseClient;
use keel_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use keel_proto::etcdserverpb::request_op::Request;
use keel_proto::etcdserverpb::response_op::Response;
use keel_proto::etcdserverpb::{
    Compare, DeleteRangeRequest, LeaseGrantRequest, PutRequest, RangeRequest, RangeResponse,
    RequestOp, StatusRequest, TxnRequest, TxnResponse,
};
use keel_proto::mvccpb::KeyValue;
use keel_proto::prefix_end;

use super::lease_reuse::{LeaseFor, LeaseReuse};
use super::resource_version::{self, ReadAt};
use super::{StorageError, continue_token};
use prometheus_client::metrics::histogram::Histogram;

/// The most a filtered list asks the store for in one Range (kube-apiserver's `maxLimit`).
const MAX_LIMIT: i64 = 10_000;

/// One stored object: its key, its encoded value and its resourceVersion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// The key.
    pub key: String,
    /// The encoded object.
    pub value: Vec<u8>,
    /// The resourceVersion: the revision that last wrote it (for a deleted object, the
    /// revision of its deletion).
    pub mod_revision: i64,
}

impl Object {
    fn from_kv(kv: KeyValue) -> Object {
        Object {
            key: String::from_utf8_lossy(&kv.key).into_owned(),
            value: kv.value,
            mod_revision: kv.mod_revision,
        }
    }
}

/// Where an update or a delete starts: the object as last seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Existing {
    /// The object.
    pub object: Object,
    /// Whether it was just read from the store (false: a guess, such as the watch cache's).
    pub current: bool,
}

/// How to list a collection.
#[derive(Clone, Copy)]
pub struct ListOptions<'a> {
    /// The request's resourceVersion ("" if unset); see [`super::resource_version`].
    pub resource_version: &'a str,
    /// The request's resourceVersionMatch ("" if unset).
    pub resource_version_match: &'a str,
    /// At most this many objects (0: all).
    pub limit: i64,
    /// The token of the previous page.
    pub continue_token: Option<&'a str>,
    /// Only objects this accepts (label and field selectors).
    pub filter: Option<&'a (dyn Fn(&Object) -> bool + Sync)>,
    /// Whether the key is a prefix (a collection) rather than one object's key.
    pub recursive: bool,
}

impl Default for ListOptions<'_> {
    fn default() -> Self {
        ListOptions {
            resource_version: "",
            resource_version_match: "",
            limit: 0,
            continue_token: None,
            filter: None,
            recursive: true,
        }
    }
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListPage {
    /// The objects, in key order.
    pub items: Vec<Object>,
    /// The revision the list was read at (its resourceVersion).
    pub revision: i64,
    /// The token for the next page, if there is more.
    pub continue_token: Option<String>,
    /// How many objects follow this page (only without a filter, as Kubernetes reports it).
    pub remaining_item_count: Option<i64>,
}

/// An etcd v3 store holding Kubernetes objects.
#[derive(Debug, Clone)]
pub struct Etcd3 {
    channel: StoreChannel,
    /// The connection watches use (see [`Etcd3::with_watch_channel`]).
    watch_channel: StoreChannel,
    kv: KvClient<StoreChannel>,
    /// The lease TTL writes reuse (see [`super::lease_reuse`]).
    leases: Arc<tokio::sync::Mutex<LeaseReuse>>,
    /// `etcd_lease_object_counts`, when the apiserver keeps it.
    lease_object_counts: Option<Histogram>,
}

impl Etcd3 {
    /// Objects in the store behind `channel` (keel store or any etcd v3 endpoint).
    pub fn new(channel: impl Into<StoreChannel>) -> Etcd3 {
        let channel = channel.into();
        Etcd3 {
            kv: KvClient::new(channel.clone()).max_decoding_message_size(usize::MAX),
            watch_channel: channel.clone(),
            channel,
            leases: Arc::default(),
            lease_object_counts: None,
        }
    }

    /// The same store, with its watches on `watches`: a connection of their own, so no burst
    /// of requests (nor a server closing their connection under it) can end a watch.
    pub fn with_watch_channel(self, watches: impl Into<StoreChannel>) -> Etcd3 {
        let watches = watches.into();
        Etcd3 {
            watch_channel: watches,
            ..self
        }
    }

    /// The same store, reusing a lease for TTL writes for at most `seconds`
    /// (`--lease-reuse-duration-seconds`; see [`super::lease_reuse`]),
    /// and observing how many writes each lease served in `counts` (`etcd_lease_object_counts`).
    pub fn with_lease_reuse(self, seconds: i64, counts: Histogram) -> Etcd3 {
        Etcd3 {
            leases: Arc::new(tokio::sync::Mutex::new(LeaseReuse::new(seconds))),
            lease_object_counts: Some(counts),
            ..self
        }
    }

    /// The channel watches use.
    pub(super) fn watch_channel(&self) -> StoreChannel {
        self.watch_channel.clone()
    }

    /// The channel to the store, for the other services (Watch, Lease).
    pub(super) fn channel(&self) -> StoreChannel {
        self.channel.clone()
    }

    /// The object at `key` (or None) and the store's revision. A `resource_version` ("" or
    /// "0": any) is a minimum: an older store answers 504 "Too large resource version".
    pub async fn get(
        &self,
        key: &str,
        resource_version: &str,
    ) -> Result<(Option<Object>, i64), StorageError> {
        let min_revision = resource_version::parse(resource_version)?;
        let resp = self
            .kv
            .clone()
            .range(RangeRequest {
                key: key.as_bytes().to_vec(),
                ..Default::default()
            })
            .await
            .map_err(|e| from_etcd(e, "get"))?
            .into_inner();
        let revision = header_revision(resp.header.as_ref());
        if min_revision > revision {
            return Err(StorageError::TooLargeResourceVersion {
                requested: min_revision,
                current: revision,
            });
        }
        Ok((resp.kvs.into_iter().next().map(Object::from_kv), revision))
    }

    /// Creates the object at `key`; its resourceVersion. Fails with [`StorageError::KeyExists`]
    /// when an object is there.
    pub async fn create(&self, key: &str, value: Vec<u8>) -> Result<i64, StorageError> {
        self.create_with_ttl(key, value, 0).await
    }

    /// [`Etcd3::create`] of an object the store deletes after `ttl` seconds (0: never), on a
    /// lease shared with other TTL writes of the same window.
    pub async fn create_with_ttl(
        &self,
        key: &str,
        value: Vec<u8>,
        ttl: i64,
    ) -> Result<i64, StorageError> {
        let lease = if ttl > 0 { self.lease(ttl).await? } else { 0 };
        let resp = self
            .txn(mod_revision_is(key, 0), put(key, value, lease), None)
            .await?;
        if !resp.succeeded {
            return Err(StorageError::KeyExists {
                key: key.to_string(),
            });
        }
        Ok(header_revision(resp.header.as_ref()))
    }

    /// Replaces the object at `key` with what `update` makes of it, starting from `existing`
    /// (None: read from the store) and retrying with the newer object when another writer
    /// changed it in between; the object as stored. `update` fails the whole update with its
    /// error (e.g. a resourceVersion precondition's [`StorageError::Conflict`]); a result
    /// equal to the stored value writes nothing. A guessed start is checked against the store
    /// before either (see the module docs).
    pub async fn guaranteed_update(
        &self,
        key: &str,
        existing: Option<Existing>,
        mut update: impl FnMut(&Object) -> Result<Vec<u8>, StorageError>,
    ) -> Result<Object, StorageError> {
        let (mut current, mut is_current) = self.start(key, existing).await?;
        loop {
            let value = match update(&current) {
                Ok(value) => value,
                Err(e) if is_current => return Err(e),
                // Perhaps refused for being stale: decide on the stored object.
                Err(_) => {
                    (current, is_current) = (self.current(key).await?, true);
                    continue;
                }
            };
            if value == current.value {
                if is_current {
                    return Ok(current);
                }
                // Nothing to write only if the guess is what is stored.
                (current, is_current) = (self.current(key).await?, true);
                continue;
            }
            let resp = self
                .txn(
                    mod_revision_is(key, current.mod_revision),
                    keep_lease(put(key, value.clone(), 0)),
                    Some(key),
                )
                .await?;
            if resp.succeeded {
                return Ok(Object {
                    key: key.to_string(),
                    value,
                    mod_revision: header_revision(resp.header.as_ref()),
                });
            }
            (current, is_current) = (else_object(key, resp)?, true);
        }
    }

    /// Deletes the object at `key` once `check` accepts it, starting from `existing` (None:
    /// read from the store) and retrying with the newer object when another writer changed it
    /// in between; the deleted object, its resourceVersion the revision of the deletion.
    pub async fn delete(
        &self,
        key: &str,
        existing: Option<Existing>,
        mut check: impl FnMut(&Object) -> Result<(), StorageError>,
    ) -> Result<Object, StorageError> {
        let (mut current, mut is_current) = self.start(key, existing).await?;
        loop {
            match check(&current) {
                Ok(()) => {}
                Err(e) if is_current => return Err(e),
                Err(_) => {
                    (current, is_current) = (self.current(key).await?, true);
                    continue;
                }
            }
            let delete = Request::RequestDeleteRange(DeleteRangeRequest {
                key: key.as_bytes().to_vec(),
                ..Default::default()
            });
            let resp = self
                .txn(
                    mod_revision_is(key, current.mod_revision),
                    delete,
                    Some(key),
                )
                .await?;
            if resp.succeeded {
                return Ok(Object {
                    mod_revision: header_revision(resp.header.as_ref()),
                    ..current
                });
            }
            (current, is_current) = (else_object(key, resp)?, true);
        }
    }

    /// The store's current revision, as kube-apiserver's `GetCurrentResourceVersionFromStorage`
    /// learns it: a Range of at most one key under `prefix`, keys only.
    pub async fn current_revision(&self, prefix: &str) -> Result<i64, StorageError> {
        let one_key = RangeRequest {
            limit: 1,
            keys_only: true,
            ..Default::default()
        };
        let resp = self.range_prefix(prefix, one_key, "list").await?;
        Ok(header_revision(resp.header.as_ref()))
    }

    /// The version the store reports in its Status (etcd's server version).
    pub async fn version(&self) -> Result<String, StorageError> {
        Ok(self.status().await?.version)
    }

    /// The size of the store's database file, as its Status reports it.
    pub async fn db_size(&self) -> Result<i64, StorageError> {
        Ok(self.status().await?.db_size)
    }

    /// The Status of the member this connection reaches.
    async fn status(&self) -> Result<keel_proto::etcdserverpb::StatusResponse, StorageError> {
        Ok(MaintenanceClient::new(self.channel())
            .status(StatusRequest {})
            .await
            .map_err(|e| from_etcd(e, "status"))?
            .into_inner())
    }

    /// One page of the objects under `prefix` (a collection's key prefix, ending in `/`).
    pub async fn list(
        &self,
        prefix: &str,
        opts: ListOptions<'_>,
    ) -> Result<ListPage, StorageError> {
        // In kube-apiserver's order: the token, then the resourceVersion beside it.
        let (mut from, read) = match opts.continue_token {
            None => (
                prefix.to_string(),
                resource_version::list_read(
                    opts.resource_version,
                    opts.resource_version_match,
                    opts.limit,
                )?,
            ),
            Some(token) => {
                let c = continue_token::decode(token, prefix).map_err(|e| {
                    StorageError::BadRequest(format!("invalid continue token: {e}"))
                })?;
                if !["", "0"].contains(&opts.resource_version) {
                    return Err(StorageError::BadRequest(
                        "specifying resource version is not allowed when using continue".into(),
                    ));
                }
                let read = if c.revision > 0 {
                    ReadAt::Exact(c.revision)
                } else {
                    ReadAt::Latest
                };
                (c.from_key, read)
            }
        };
        let mut revision = match read {
            ReadAt::Exact(rev) => rev,
            _ => 0,
        };
        // Where this page starts: an expired token continues from here at the latest revision.
        let start = from.clone();
        let mut limit = opts.limit.max(0);
        let mut items = Vec::new();
        let mut last_key = None;
        let (more, count) = loop {
            let resp = self
                .kv
                .clone()
                .range(RangeRequest {
                    key: from.as_bytes().to_vec(),
                    range_end: if opts.recursive {
                        prefix_end(prefix.as_bytes())
                    } else {
                        Vec::new()
                    },
                    limit,
                    revision,
                    ..Default::default()
                })
                .await;
            let resp = match resp {
                Ok(resp) => resp.into_inner(),
                Err(e) => {
                    return Err(match self.list_error(e, revision).await {
                        StorageError::Expired { .. } if opts.continue_token.is_some() => {
                            StorageError::ContinueExpired {
                                token: continue_token::encode_from(&start, prefix, -1),
                            }
                        }
                        other => other,
                    });
                }
            };
            let header = header_revision(resp.header.as_ref());
            if revision == 0 {
                if let ReadAt::NotOlderThan(min) = read
                    && min > header
                {
                    return Err(StorageError::TooLargeResourceVersion {
                        requested: min,
                        current: header,
                    });
                }
                // Every later Range of this list reads the same revision.
                revision = header;
            }
            let mut more = resp.more;
            for kv in resp.kvs {
                if opts.limit > 0 && items.len() as i64 >= opts.limit {
                    more = true;
                    break;
                }
                let object = Object::from_kv(kv);
                last_key = Some(object.key.clone());
                if opts.filter.is_none_or(|f| f(&object)) {
                    items.push(object);
                }
            }
            if !more || opts.limit == 0 || items.len() as i64 >= opts.limit {
                break (more, resp.count);
            }
            // A filter left the page short: go on after the last key, asking for more.
            from = format!("{}\0", last_key.as_deref().unwrap_or(prefix));
            limit = (limit * 2).min(MAX_LIMIT);
        };
        let continue_token = match (&last_key, more) {
            (Some(key), true) => Some(continue_token::encode(key, prefix, revision)),
            _ => None,
        };
        let remaining_item_count = (more && opts.filter.is_none()).then(|| count - opts.limit);
        Ok(ListPage {
            items,
            revision,
            continue_token,
            remaining_item_count,
        })
    }

    /// How many objects are under `prefix` (a count-only Range).
    pub async fn count(&self, prefix: &str) -> Result<i64, StorageError> {
        let count_only = RangeRequest {
            count_only: true,
            ..Default::default()
        };
        let resp = self.range_prefix(prefix, count_only, "count").await?;
        Ok(resp.count)
    }

    // ---- internals ----

    /// `range` (its limit and flags) over every key under `prefix`; `what` names the request
    /// in errors.
    async fn range_prefix(
        &self,
        prefix: &str,
        range: RangeRequest,
        what: &'static str,
    ) -> Result<RangeResponse, StorageError> {
        let request = RangeRequest {
            key: prefix.as_bytes().to_vec(),
            range_end: prefix_end(prefix.as_bytes()),
            ..range
        };
        self.kv
            .clone()
            .range(request)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|e| from_etcd(e, what))
    }

    /// The lease for a write with `ttl` seconds: the previous one or a new grant. The
    /// decision and the grant are made under one lock, as kube-apiserver's lease manager
    /// makes them, so concurrent writes wait for one grant and share it instead of each
    /// granting a lease of their own.
    async fn lease(&self, ttl: i64) -> Result<i64, StorageError> {
        let mut leases = self.leases.lock().await;
        let now = Instant::now();
        let seconds = match leases.lease_for(ttl, now) {
            LeaseFor::Reuse(id) => return Ok(id),
            LeaseFor::Grant(seconds) => seconds,
        };
        let granted = LeaseClient::new(self.channel())
            .lease_grant(LeaseGrantRequest {
                ttl: seconds,
                id: 0,
            })
            .await
            .map_err(|e| from_etcd(e, "lease grant"))?
            .into_inner();
        let attached = leases.granted(granted.id, seconds, now);
        if let Some(counts) = &self.lease_object_counts {
            counts.observe(attached as f64);
        }
        Ok(granted.id)
    }

    /// Where an update or a delete starts, and whether that was just read from the store.
    async fn start(
        &self,
        key: &str,
        existing: Option<Existing>,
    ) -> Result<(Object, bool), StorageError> {
        match existing {
            Some(existing) => Ok((existing.object, existing.current)),
            None => Ok((self.current(key).await?, true)),
        }
    }

    /// The object at `key`, or [`StorageError::NotFound`].
    pub async fn current(&self, key: &str) -> Result<Object, StorageError> {
        match self.get(key, "").await? {
            (Some(object), _) => Ok(object),
            (None, _) => Err(StorageError::NotFound {
                key: key.to_string(),
            }),
        }
    }

    /// `Txn(if compare then success else [Range(else_get)])`.
    async fn txn(
        &self,
        compare: Compare,
        success: Request,
        else_get: Option<&str>,
    ) -> Result<TxnResponse, StorageError> {
        let failure = else_get.map(|key| RequestOp {
            request: Some(Request::RequestRange(RangeRequest {
                key: key.as_bytes().to_vec(),
                ..Default::default()
            })),
        });
        let req = TxnRequest {
            compare: vec![compare],
            success: vec![RequestOp {
                request: Some(success),
            }],
            failure: failure.into_iter().collect(),
        };
        self.kv
            .clone()
            .txn(req)
            .await
            .map(tonic::Response::into_inner)
            .map_err(|e| from_etcd(e, "txn"))
    }

    /// Whether the store still holds every change after `revision` under `key`, as a watch
    /// from it needs: one Range at `revision + 1`, which the store refuses once that
    /// revision is compacted ([`StorageError::Expired`]); a revision still to come is fine.
    pub async fn check_history(&self, key: &str, revision: i64) -> Result<(), StorageError> {
        let range = RangeRequest {
            key: key.as_bytes().to_vec(),
            revision: revision.saturating_add(1),
            count_only: true,
            ..Default::default()
        };
        match self.kv.clone().range(range).await {
            Ok(_) => Ok(()),
            Err(e) if e.message().contains("future revision") => Ok(()),
            Err(e) => match from_etcd(e, "range") {
                StorageError::Expired { .. } => Err(StorageError::Expired { of: "watch" }),
                other => Err(other),
            },
        }
    }

    /// A list's etcd error: 410 for a compacted revision, 504 for a future one.
    async fn list_error(&self, e: tonic::Status, revision: i64) -> StorageError {
        if e.message().contains("future revision") {
            let current = match self.get("\0", "").await {
                Ok((_, current)) => current,
                Err(e) => return e,
            };
            return StorageError::TooLargeResourceVersion {
                requested: revision,
                current,
            };
        }
        from_etcd(e, "list")
    }
}

/// The object a failed Txn's else-branch Range read, or NotFound if it is gone.
fn else_object(key: &str, resp: TxnResponse) -> Result<Object, StorageError> {
    let range = resp
        .responses
        .into_iter()
        .next()
        .and_then(|r| match r.response {
            Some(Response::ResponseRange(range)) => Some(range),
            _ => None,
        });
    range
        .and_then(|r| r.kvs.into_iter().next())
        .map(Object::from_kv)
        .ok_or_else(|| StorageError::NotFound {
            key: key.to_string(),
        })
}

/// `mod_revision(key) == revision`.
fn mod_revision_is(key: &str, revision: i64) -> Compare {
    Compare {
        result: CompareResult::Equal as i32,
        target: CompareTarget::Mod as i32,
        key: key.as_bytes().to_vec(),
        range_end: Vec::new(),
        target_union: Some(TargetUnion::ModRevision(revision)),
    }
}

/// `Put(key, value)`, on `lease` (0: none).
fn put(key: &str, value: Vec<u8>, lease: i64) -> Request {
    Request::RequestPut(PutRequest {
        key: key.as_bytes().to_vec(),
        value,
        lease,
        ..Default::default()
    })
}

/// The same Put, keeping the key's lease (etcd's `ignore_lease`): an object written with a
/// TTL keeps it across updates.
fn keep_lease(put: Request) -> Request {
    match put {
        Request::RequestPut(p) => Request::RequestPut(PutRequest {
            ignore_lease: true,
            ..p
        }),
        other => other,
    }
}

/// The revision in a response header (0 if the store sent none).
fn header_revision(header: Option<&keel_proto::etcdserverpb::ResponseHeader>) -> i64 {
    header.map_or(0, |h| h.revision)
}

/// An etcd error of a `what` request: a compacted revision is 410 Expired, the store shedding
/// load 429, anything else an internal error naming the store's message.
fn from_etcd(e: tonic::Status, what: &'static str) -> StorageError {
    if e.message().contains("required revision has been compacted") {
        return StorageError::Expired { of: "list" };
    }
    if e.code() == tonic::Code::ResourceExhausted && e.message().contains("too many requests") {
        return StorageError::TooManyRequests(e.message().to_string());
    }
    StorageError::Internal(format!("etcd {what}: {}", e.message()))
}
