//! [`Storage`]: the one storage a resource's registry reads and writes, as kube-apiserver's
//! `storage.Interface`: the store ([`Etcd3`]) alone, or the store behind its watch cache
//! ([`Cacher`]) as kube-apiserver's `CacheDelegator` puts it. The registry never chooses;
//! this module decides, by kube-apiserver's rules, which reads the cache serves:
//!
//! | read | served by |
//! |---|---|
//! | get, resourceVersion unset | the store |
//! | get, resourceVersion "0" or n | the cache, once it is the state at n or later |
//! | list, `resourceVersionMatch=Exact`, or a limit with resourceVersion n (legacy exact) | the store |
//! | list with `continue` | the store |
//! | list, resourceVersion unset | the cache, consistently (below), if the store supports it |
//! | list, resourceVersion "0" / NotOlderThan | the cache (a limit is ignored for "0") |
//! | watch | the cache when its buffer holds the start, else the store |
//!
//! A consistent read (a list with resourceVersion unset) reads the store's current revision
//! (one Range of at most one key), waits until the cache has reached it (the cache asks the
//! store for progress meanwhile) and lists from the cache; when that takes longer than the
//! cache's block timeout it falls back to the store, counted in
//! `apiserver_watch_cache_consistent_read_total{fallback="true"}`. Reads a cache that is not
//! ready (starting, or following a store it cannot reach) would wait on go to the store.
//!
//! Writes go to the store; an update or a delete starts from the cache's object (kube-
//! apiserver's `cachedExistingObject`), so a write usually costs one Txn (see
//! [`Etcd3::guaranteed_update`] for why a stale start is safe). A writer that knows what its
//! write decodes to hands it to the cache ([`Storage::handover`]), which then need not decode
//! the write's event. Every store request is timed in `etcd_request_duration_seconds`.

use std::sync::Arc;

use super::cacher::handoff::Handover;
use super::cacher::{Cacher, Codec, Entry};
use super::watch::Watch;
use super::{Etcd3, Existing, ListOptions, Object, StorageError, continue_token, resource_version};
use crate::metrics::Metrics;

/// A list request, as the storage reads it.
pub struct ListQuery<'a, O> {
    /// `resourceVersion` ("" when unset).
    pub resource_version: &'a str,
    /// `resourceVersionMatch` ("" when unset).
    pub resource_version_match: &'a str,
    /// `limit` (0: all).
    pub limit: i64,
    /// `continue`.
    pub continue_token: Option<&'a str>,
    /// Whether the key is a collection's prefix (false: one object's key).
    pub recursive: bool,
    /// Only the objects this accepts (label and field selectors).
    pub filter: Option<&'a (dyn Fn(&O) -> bool + Sync)>,
    /// The selector's exact `field=value` requirements, which an index may serve.
    pub exact: &'a [(&'a str, &'a str)],
}

impl<O> Clone for ListQuery<'_, O> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<O> Copy for ListQuery<'_, O> {}

/// One page of a list.
#[derive(Debug)]
pub struct Page<O> {
    /// The objects, in key order.
    pub items: Vec<O>,
    /// The revision the list was read at (its resourceVersion).
    pub revision: i64,
    /// The token for the next page, if there is more.
    pub continue_token: Option<String>,
    /// How many objects follow this page (only without a filter, as Kubernetes reports it).
    pub remaining_item_count: Option<i64>,
}

/// Where a watch's events come from.
pub enum WatchSource<E> {
    /// The watch cache.
    Cache(super::cacher::CacheWatch<E>),
    /// A store watch of its own.
    Store(Watch),
}

/// A watch as the storage starts it.
pub struct Watched<E> {
    /// The objects to send first as ADDED (a streaming list).
    pub initial: Vec<Object>,
    /// The revision the events follow.
    pub after: i64,
    /// The events after them.
    pub source: WatchSource<E>,
}

/// One resource's storage (see the module docs).
pub struct Storage<C: Codec> {
    store: Etcd3,
    codec: Arc<C>,
    cache: Option<Cacher<C>>,
    metrics: Arc<Metrics>,
    /// The `type` label of `etcd_request_duration_seconds` (`<resource>[.<group>]`).
    resource: String,
}

impl<C: Codec> Storage<C> {
    /// The store alone, decoding with `codec`.
    pub fn new(store: Etcd3, codec: Arc<C>, metrics: Arc<Metrics>, resource: String) -> Self {
        Storage {
            store,
            codec,
            cache: None,
            metrics,
            resource,
        }
    }

    /// The store behind `cache` (which decodes with the same codec).
    pub fn cached(store: Etcd3, cache: Cacher<C>, metrics: Arc<Metrics>, resource: String) -> Self {
        Storage {
            store,
            codec: cache.codec().clone(),
            cache: Some(cache),
            metrics,
            resource,
        }
    }

    /// The watch cache, when it is ready to serve reads.
    fn ready_cache(&self) -> Option<&Cacher<C>> {
        self.cache.as_ref().filter(|c| c.ready())
    }

    /// The object at `key` (or None) and the revision it was read at. A `resource_version`
    /// is a minimum ("" : the latest, from the store).
    pub async fn get(
        &self,
        key: &str,
        resource_version: &str,
    ) -> Result<(Option<C::Object>, i64), StorageError> {
        if let Some(cache) = self.ready_cache().filter(|_| !resource_version.is_empty()) {
            let min = resource_version::parse(resource_version)?;
            let (entry, revision) = cache.wait_until_fresh_and_get(min, key).await?;
            return Ok((entry.map(|e| e.value.clone()), revision));
        }
        let (found, revision) = self
            .timed("get", self.store.get(key, resource_version))
            .await?;
        Ok((found.map(|o| self.codec.object(&o)), revision))
    }

    /// One page of the objects under `key` (see the module docs for who serves it).
    pub async fn list(
        &self,
        key: &str,
        query: ListQuery<'_, C::Object>,
    ) -> Result<Page<C::Object>, StorageError> {
        let cache = self.ready_cache().filter(|c| {
            !should_delegate_list(
                query.resource_version,
                query.resource_version_match,
                query.limit,
                query.continue_token.is_some(),
                c.progress_supported(),
            )
        });
        let Some(cache) = cache else {
            return self.list_from_store(key, query).await;
        };
        if !query.resource_version.is_empty() {
            let min = resource_version::parse(query.resource_version)?;
            return self.list_from_cache(cache, key, min, query).await;
        }
        self.consistent_read(
            cache,
            key,
            |current| self.list_from_cache(cache, key, current, query),
            || self.list_from_store(key, query),
        )
        .await
    }

    /// kube-apiserver's consistent read from the cache (ConsistentListFromCache): the store's
    /// current revision, then `from_cache` at it once the cache has reached it, or
    /// `from_store` when the cache did not catch up in time; counted in
    /// `apiserver_watch_cache_consistent_read_total` by the answer's success and whether it
    /// fell back.
    async fn consistent_read<T, Cached, Stored>(
        &self,
        cache: &Cacher<C>,
        key: &str,
        from_cache: impl FnOnce(i64) -> Cached,
        from_store: impl FnOnce() -> Stored,
    ) -> Result<T, StorageError>
    where
        Cached: Future<Output = Result<T, StorageError>>,
        Stored: Future<Output = Result<T, StorageError>>,
    {
        let current = self.timed("list", self.store.current_revision(key)).await?;
        let (result, fallback) = match from_cache(current).await {
            Err(StorageError::TooLargeResourceVersion { .. }) => (from_store().await, true),
            served => (served, false),
        };
        cache.metrics().consistent_read(result.is_ok(), fallback);
        result
    }

    async fn list_from_cache(
        &self,
        cache: &Cacher<C>,
        key: &str,
        min: i64,
        query: ListQuery<'_, C::Object>,
    ) -> Result<Page<C::Object>, StorageError> {
        let listed = cache
            .wait_until_fresh_and_list(min, key, query.recursive, query.exact)
            .await?;
        // kube-apiserver's `computeListLimit`: resourceVersion "0" ignores the limit.
        let limit = if query.resource_version == "0" {
            0
        } else {
            query.limit.max(0) as usize
        };
        let mut items = Vec::new();
        let mut last: Option<&Arc<Entry<C::Object>>> = None;
        let mut more = false;
        let mut fetched = 0;
        for entry in &listed.entries {
            if limit > 0 && items.len() >= limit {
                more = true;
                break;
            }
            fetched += 1;
            if query.filter.is_none_or(|f| f(&entry.value)) {
                items.push(entry.value.clone());
                last = Some(entry);
            }
        }
        cache
            .metrics()
            .list_served(&listed.index, fetched, items.len());
        let continue_token = match (last, more) {
            (Some(last), true) => Some(continue_token::encode(
                &last.object.key,
                key,
                listed.revision,
            )),
            _ => None,
        };
        let remaining_item_count =
            (more && query.filter.is_none()).then(|| listed.entries.len() as i64 - query.limit);
        Ok(Page {
            items,
            revision: listed.revision,
            continue_token,
            remaining_item_count,
        })
    }

    async fn list_from_store(
        &self,
        key: &str,
        query: ListQuery<'_, C::Object>,
    ) -> Result<Page<C::Object>, StorageError> {
        let codec = &self.codec;
        let filter_object = |object: &Object| query.filter.is_none_or(|f| f(&codec.object(object)));
        let options = ListOptions {
            resource_version: query.resource_version,
            resource_version_match: query.resource_version_match,
            limit: query.limit,
            continue_token: query.continue_token,
            filter: query
                .filter
                .map(|_| &filter_object as &(dyn Fn(&Object) -> bool + Sync)),
            recursive: query.recursive,
        };
        let page = self.timed("list", self.store.list(key, options)).await?;
        Ok(Page {
            items: page.items.iter().map(|o| codec.object(o)).collect(),
            revision: page.revision,
            continue_token: page.continue_token,
            remaining_item_count: page.remaining_item_count,
        })
    }

    /// Creates the object at `key`, deleted by the store after `ttl` seconds (0: never); its
    /// resourceVersion.
    pub async fn create(&self, key: &str, value: Vec<u8>, ttl: i64) -> Result<i64, StorageError> {
        self.timed("create", self.store.create_with_ttl(key, value, ttl))
            .await
    }

    /// A handover of this request's writes of `key` to the watch cache (see
    /// [`super::cacher::handoff`]): offer what each write makes before sending it, then say
    /// where it landed. None when there is no cache ready to take it (nothing is kept then).
    pub fn handover(&self, key: &str) -> Option<Handover<C::Object>> {
        Some(self.ready_cache()?.handover(key))
    }

    /// Where an update of `key` starts: the cache's object (a guess), with what the cache
    /// made of it, else the store's (None: there is none).
    pub async fn existing(
        &self,
        key: &str,
    ) -> Result<Option<(Existing, Option<C::Object>)>, StorageError> {
        if let Some((guess, made)) = self.ready_cache().and_then(|c| c.existing(key)) {
            return Ok(Some((guess, Some(made))));
        }
        let (found, _) = self.timed("get", self.store.get(key, "")).await?;
        Ok(found.map(|object| {
            let existing = Existing {
                object,
                current: true,
            };
            (existing, None)
        }))
    }

    /// The object at `key` as stored, read from the store (None: there is none).
    pub async fn current(&self, key: &str) -> Result<Option<Object>, StorageError> {
        let (found, _) = self.timed("get", self.store.get(key, "")).await?;
        Ok(found)
    }

    /// [`Etcd3::guaranteed_update`], from `existing` or else the cache's object.
    pub async fn guaranteed_update(
        &self,
        key: &str,
        existing: Option<Existing>,
        update: impl FnMut(&Object) -> Result<Vec<u8>, StorageError>,
    ) -> Result<Object, StorageError> {
        let existing = existing.or_else(|| Some(self.ready_cache()?.existing(key)?.0));
        self.timed(
            "update",
            self.store.guaranteed_update(key, existing, update),
        )
        .await
    }

    /// [`Etcd3::delete`], from `existing` or else the cache's object.
    pub async fn delete(
        &self,
        key: &str,
        existing: Option<Existing>,
        check: impl FnMut(&Object) -> Result<(), StorageError>,
    ) -> Result<Object, StorageError> {
        let existing = existing.or_else(|| Some(self.ready_cache()?.existing(key)?.0));
        self.timed("delete", self.store.delete(key, existing, check))
            .await
    }

    /// A watch of `prefix`. With the current objects first (`send_initial_events`, or, when
    /// that is unset, a start of "" or "0", as kube-apiserver 1.34's WatchList defaults make
    /// legacy watches), they are read not older than `resource_version` (from the watch cache
    /// when it is ready, as kube-apiserver's Cacher serves them, else from the store), and the
    /// changes after them follow; without, the changes after `resource_version` (after the
    /// store's current revision for "" or "0"). The cache serves the changes when it holds them
    /// all, checking first that the store has not compacted a start it was given; otherwise
    /// the watch is a store watch of its own.
    pub async fn watch(
        &self,
        prefix: &str,
        resource_version: &str,
        send_initial_events: Option<bool>,
    ) -> Result<Watched<C::Event>, StorageError> {
        let rv = resource_version::parse(resource_version)?;
        let listed = send_initial_events.unwrap_or(rv == 0);
        let (initial, after) = if listed {
            let from_store =
                || self.initial_from_store(prefix, resource_version, send_initial_events);
            match self.ready_cache() {
                // From "" or "0" a consistent read: kube-apiserver's cache serves "0" as it is,
                // possibly behind the store, but a watcher starting from "0", as kube-rs's
                // streaming list does, should see what was written before it started, as it
                // does from the store.
                Some(cache) if rv == 0 => {
                    let from_cache = |current| self.initial_from_cache(cache, prefix, current);
                    self.consistent_read(cache, prefix, from_cache, from_store)
                        .await?
                }
                Some(cache) => self.initial_from_cache(cache, prefix, rv).await?,
                None => from_store().await?,
            }
        } else if rv == 0 {
            let now = self.timed("get", self.store.get(prefix, "")).await?;
            (Vec::new(), now.1)
        } else {
            (Vec::new(), rv)
        };
        if let Some(watch) = self.cache.as_ref().and_then(|c| c.watch(prefix, after)) {
            if !listed && rv > 0 {
                self.timed("watch", self.store.check_history(prefix, after))
                    .await?;
            }
            let source = WatchSource::Cache(watch);
            return Ok(Watched {
                initial,
                after,
                source,
            });
        }
        let watch = self
            .timed("watch", self.store.watch_after(prefix, true, after))
            .await?;
        let source = WatchSource::Store(watch);
        Ok(Watched {
            initial,
            after,
            source,
        })
    }

    /// The current objects a watch sends first, from the watch cache once it has reached
    /// `min` (504 after the wait), and the revision they are at.
    async fn initial_from_cache(
        &self,
        cache: &Cacher<C>,
        prefix: &str,
        min: i64,
    ) -> Result<(Vec<Object>, i64), StorageError> {
        let listed = cache
            .wait_until_fresh_and_list(min, prefix, true, &[])
            .await?;
        let served = listed.entries.len();
        cache.metrics().list_served(&listed.index, served, served);
        let objects = listed.entries.iter().map(|e| e.object.clone()).collect();
        Ok((objects, listed.revision))
    }

    /// The current objects a watch sends first, read from the store (not older than
    /// `resource_version`), and the revision they are at.
    async fn initial_from_store(
        &self,
        prefix: &str,
        resource_version: &str,
        send_initial_events: Option<bool>,
    ) -> Result<(Vec<Object>, i64), StorageError> {
        let options = ListOptions {
            resource_version,
            resource_version_match: match send_initial_events {
                Some(_) => "NotOlderThan",
                None => "",
            },
            ..ListOptions::default()
        };
        let all = self.timed("list", self.store.list(prefix, options)).await?;
        Ok((all.items, all.revision))
    }

    /// How many objects are under `prefix` (from the store).
    pub async fn count(&self, prefix: &str) -> Result<i64, StorageError> {
        self.timed("count", self.store.count(prefix)).await
    }

    /// Runs a store request, timed in `etcd_request_duration_seconds`.
    async fn timed<T>(&self, operation: &'static str, request: impl Future<Output = T>) -> T {
        let started = std::time::Instant::now();
        let out = request.await;
        self.metrics
            .etcd_request(operation, &self.resource, started.elapsed());
        out
    }
}

/// Whether a list goes to the store rather than the cache, by kube-apiserver's
/// `shouldDelegateList`: an exact resourceVersion (`Exact`, or a limit with a resourceVersion
/// other than "0"), a continue token, or a consistent read (resourceVersion unset) when the
/// store cannot serve one from the cache.
pub fn should_delegate_list(
    resource_version: &str,
    resource_version_match: &str,
    limit: i64,
    has_continue: bool,
    consistent_reads: bool,
) -> bool {
    match resource_version_match {
        "NotOlderThan" => {}
        "" if limit > 0 && !["", "0"].contains(&resource_version) => return true,
        "" => {}
        _ => return true,
    }
    if has_continue {
        return true;
    }
    resource_version.is_empty() && !consistent_reads
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_go_where_kube_apiserver_sends_them() {
        // (rv, match, limit, continue, consistent reads supported) -> store?
        let cases = [
            ("", "", 0, false, true, false),
            ("", "", 0, false, false, true),
            ("", "", 500, false, true, false),
            ("", "", 500, false, false, true),
            ("0", "", 0, false, false, false),
            ("0", "", 500, false, true, false),
            ("7", "", 0, false, true, false),
            ("7", "", 500, false, true, true),
            ("7", "NotOlderThan", 500, false, true, false),
            ("0", "NotOlderThan", 0, false, true, false),
            ("7", "Exact", 0, false, true, true),
            ("", "", 500, true, true, true),
            ("0", "", 500, true, true, true),
        ];
        for (rv, m, limit, cont, consistent, store) in cases {
            assert_eq!(
                should_delegate_list(rv, m, limit, cont, consistent),
                store,
                "rv {rv:?} match {m:?} limit {limit} continue {cont} consistent {consistent}"
            );
        }
    }
}
