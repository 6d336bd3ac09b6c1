//! The watch cache's shell: the task that keeps a cache in step with the store (see the
//! [module docs](super) for what it does and how it locks).

use keel_process::faults::Fault;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::handoff::{self, Make};
use super::ring::{Limits, Ring};
use super::{Codec, LIST_PAGE, MAX_BACKOFF, Objects, PROGRESS_REQUEST_PERIOD, Shared, State};
use crate::storage::watch::Received;
use crate::storage::{Etcd3, Event, ListOptions, Object, StorageError};

/// The task that keeps a cache in step with the store.
pub(super) struct Shell<C: Codec> {
    pub(super) shared: Weak<Shared<C>>,
    pub(super) storage: Etcd3,
    pub(super) prefix: String,
    pub(super) limits: Limits,
    pub(super) codec: Arc<C>,
}

/// A store event as the cache applies it: the object as stored (None for a deletion), what
/// the codec made of the event and of the object, and the object's indexed fields.
struct Applied<C: Codec> {
    revision: i64,
    key: String,
    weight: usize,
    stored: Option<(Object, C::Object, Vec<String>)>,
    event: C::Event,
}

impl<C: Codec> Shell<C> {
    /// Runs until the cache is dropped. However it ends (dropped, or a panic), the cache is
    /// emptied: its watchers end and new reads go to the store instead of waiting on a cache
    /// nobody fills.
    pub(super) async fn run(self, mut stopped: oneshot::Receiver<()>) {
        let _empty = EmptyOnExit(self.shared.clone());
        tokio::select! {
            _ = &mut stopped => {}
            _ = self.follow() => {}
        }
    }

    /// Lists the objects (page by page, every page at the first one's revision) and the
    /// revision they are the state at.
    async fn list(&self) -> Result<(Objects<C::Object>, i64), StorageError> {
        let mut token: Option<String> = None;
        let mut listed: Option<Objects<C::Object>> = None;
        loop {
            let options = ListOptions {
                limit: LIST_PAGE,
                continue_token: token.as_deref(),
                ..ListOptions::default()
            };
            let page = self.storage.list(&self.prefix, options).await?;
            let objects = listed
                .get_or_insert_with(|| Objects::new(self.codec.indexed_fields(), page.revision));
            for object in page.items {
                let value = self.codec.object(&object);
                let fields = self.fields(&value);
                objects.put(object, value, fields);
            }
            objects.advance(page.revision);
            token = page.continue_token;
            if token.is_none() {
                return Ok((listed.take().expect("listed above"), page.revision));
            }
        }
    }

    fn fields(&self, value: &C::Object) -> Vec<String> {
        let codec = &self.codec;
        codec
            .indexed_fields()
            .iter()
            .map(|f| codec.field(value, f))
            .collect()
    }

    /// Follows the store's events for as long as the cache exists.
    async fn follow(&self) {
        // The revision the cache reflects, while its history is unbroken.
        let mut reflected: Option<i64> = None;
        let mut failures = 0u32;
        let mut events = Vec::new();
        loop {
            if failures > 0 {
                let backoff = Duration::from_millis(50 << failures.min(6));
                tokio::time::sleep(backoff.min(MAX_BACKOFF)).await;
            }
            failures += 1;
            // A version the store does not tell is not a supported one (consistent reads
            // then go to the store), as kube-apiserver's feature check has it.
            let supported = match self.storage.version().await {
                Ok(version) => supports_watch_progress(&version),
                Err(e) => {
                    tracing::warn!(prefix = %self.prefix, error = %e, "watch cache: reading the store's version");
                    false
                }
            };
            let Some(shared) = self.shared.upgrade() else {
                return;
            };
            shared
                .progress_supported
                .store(supported, Ordering::Relaxed);
            drop(shared);
            let (listed, after) = match reflected {
                Some(revision) => (None, revision),
                None => match self.list().await {
                    Ok((objects, revision)) => (Some(objects), revision),
                    Err(e) => {
                        tracing::warn!(prefix = %self.prefix, error = %e, "watch cache: listing the store");
                        continue;
                    }
                },
            };
            let mut watch = match self.storage.watch_after(&self.prefix, true, after).await {
                Ok(watch) => watch,
                Err(StorageError::Expired { .. }) => {
                    tracing::warn!(prefix = %self.prefix, revision = after, "watch cache: the store compacted past the cache; starting over");
                    reflected = None;
                    continue;
                }
                Err(e) => {
                    tracing::warn!(prefix = %self.prefix, error = %e, "watch cache: watching the store");
                    continue;
                }
            };
            if let Some(objects) = listed {
                let Some(shared) = self.shared.upgrade() else {
                    return;
                };
                let mut state = shared.state();
                match state.as_mut() {
                    Some(state) => {
                        state.ring.reset(after);
                        state.objects = objects;
                    }
                    None => {
                        *state = Some(State {
                            ring: Ring::new(self.limits, after),
                            objects,
                        })
                    }
                }
                drop(state);
                handoff::lock(&shared.handoff).pass(after);
                shared.notify(after);
                shared.metrics.initializations.inc();
                reflected = Some(after);
            }
            let progress = watch.progress_requester();
            let mut last_request = None;
            loop {
                events.clear();
                let received = tokio::select! {
                    received = watch.next_batch(&mut events) => received,
                    () = self.progress_due(&mut last_request) => {
                        progress.request();
                        continue;
                    }
                };
                let Some(shared) = self.shared.upgrade() else {
                    return;
                };
                match received {
                    Some(Ok(Received::Events)) => {
                        failures = 0;
                        keel_process::faults::process()
                            .pause(Fault::ApiserverWatchcacheStall)
                            .await;
                        let received = events.len() as u64;
                        let mut handed = take_handed(&shared, &events).into_iter();
                        let applied: Vec<_> = events
                            .drain(..)
                            .map(|e| self.apply(e, handed.next().flatten()))
                            .collect();
                        let mut guard = shared.state();
                        let Some(state) = guard.as_mut() else { return };
                        for a in applied {
                            reflected = Some(a.revision);
                            match a.stored {
                                Some((object, value, fields)) => {
                                    state.objects.put(object, value, fields)
                                }
                                None => state.objects.remove(&a.key, a.revision),
                            }
                            state.ring.push(a.revision, a.key, a.event, a.weight);
                        }
                        shared.sweep_overrun(&state.ring);
                        // Counted under the lock, so a watcher that has seen an event finds
                        // it counted.
                        shared.metrics.received.inc_by(received);
                        let revision = state.objects.revision();
                        drop(guard);
                        handoff::lock(&shared.handoff).pass(revision);
                        shared.metrics.dispatched.inc_by(received);
                        shared.notify(revision);
                    }
                    Some(Ok(Received::Progress(revision))) => {
                        failures = 0;
                        let mut guard = shared.state();
                        let Some(state) = guard.as_mut() else { return };
                        state.objects.advance(revision);
                        let revision = state.objects.revision();
                        drop(guard);
                        handoff::lock(&shared.handoff).pass(revision);
                        shared.notify(revision);
                    }
                    Some(Err(StorageError::Expired { .. })) => {
                        tracing::warn!(prefix = %self.prefix, revision = ?reflected, "watch cache: the store compacted past the cache; starting over");
                        reflected = None;
                        break;
                    }
                    Some(Err(e)) => {
                        tracing::warn!(prefix = %self.prefix, error = %e, "watch cache: the store's watch ended");
                        break;
                    }
                    None => break,
                }
            }
        }
    }

    /// One store event made into what the cache keeps (outside the lock), with what its
    /// writer handed over, if anything.
    fn apply(&self, event: Event, handed: Option<Make<C::Object>>) -> Applied<C> {
        let (object, weight, deleted) = match &event {
            Event::Added(o) => (o.clone(), o.value.len(), false),
            Event::Modified(o, prev) => (o.clone(), o.value.len() + prev.len(), false),
            Event::Deleted(o) => (o.clone(), o.value.len(), true),
        };
        let (revision, key) = (object.mod_revision, object.key.clone());
        let handed = handed.map(|make| make(revision));
        let event = match &handed {
            Some(value) => self.codec.event_with(event, value),
            None => self.codec.event(event),
        };
        let stored = (!deleted).then(|| {
            let value = handed.unwrap_or_else(|| self.codec.object_of(&event));
            let fields = self.fields(&value);
            (object, value, fields)
        });
        Applied {
            revision,
            key,
            weight,
            stored,
            event,
        }
    }

    /// Resolves when the store should be asked for progress: at once when a read starts
    /// waiting, then every [`PROGRESS_REQUEST_PERIOD`] while any waits.
    async fn progress_due(&self, last: &mut Option<Instant>) {
        loop {
            let Some(shared) = self.shared.upgrade() else {
                return std::future::pending().await;
            };
            if shared.waiting.load(Ordering::SeqCst) == 0 {
                shared.wake.notified().await;
                continue;
            }
            drop(shared);
            let now = Instant::now();
            match *last {
                Some(at) if now < at + PROGRESS_REQUEST_PERIOD => {
                    tokio::time::sleep_until((at + PROGRESS_REQUEST_PERIOD).into()).await;
                }
                _ => {
                    *last = Some(now);
                    return;
                }
            }
        }
    }
}

/// Whether an etcd server of `version` answers progress requests as a consistent read
/// needs, by kube-apiserver's rule (`endpointSupportsRequestWatchProgress`): 3.4.31 and later
/// 3.4 releases, 3.5.13 and later, anything newer; an unreadable version does not.
pub fn supports_watch_progress(version: &str) -> bool {
    let mut parts = version.split(['.', '-', '+']);
    let mut number = || parts.next().and_then(|p| p.parse::<u64>().ok());
    let (Some(major), Some(minor), Some(patch)) = (number(), number(), number()) else {
        return false;
    };
    match (major, minor) {
        (3, 4) => patch >= 31,
        (3, 5) => patch >= 13,
        (3, m) => m > 5,
        (m, _) => m > 3,
    }
}

/// What writers handed over for `events` (ADDED and MODIFIED ones), in their order; empty
/// when nothing waits.
fn take_handed<C: Codec>(shared: &Shared<C>, events: &[Event]) -> Vec<Option<Make<C::Object>>> {
    let mut handoff = handoff::lock(&shared.handoff);
    if handoff.is_empty() {
        return Vec::new();
    }
    let mut take = |o: &Object| handoff.take(&o.key, o.mod_revision, &o.value);
    events
        .iter()
        .map(|event| match event {
            Event::Added(o) | Event::Modified(o, _) => take(o),
            Event::Deleted(_) => None,
        })
        .collect()
}

/// Empties a cache when its shell ends.
struct EmptyOnExit<C: Codec>(Weak<Shared<C>>);

impl<C: Codec> Drop for EmptyOnExit<C> {
    fn drop(&mut self) {
        if let Some(shared) = self.0.upgrade() {
            *shared.state() = None;
            handoff::lock(&shared.handoff).clear();
            shared.notify(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_supported_from_the_versions_kube_apiserver_requires() {
        for (version, supported) in [
            ("3.5.13", true),
            ("3.5.21", true),
            ("3.5.12", false),
            ("3.5.0", false),
            ("3.4.31", true),
            ("3.4.30", false),
            ("3.6.0", true),
            ("4.0.0", true),
            ("3.3.27", false),
            ("3.5.13-alpha.0", true),
            ("3.5", false),
            ("not a version", false),
        ] {
            assert_eq!(supports_watch_progress(version), supported, "{version}");
        }
    }
}
