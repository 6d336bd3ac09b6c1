//! A kubectl watch of a collection from a resourceVersion, resumed from the last event's
//! resourceVersion whenever it ends (as a reflector resumes), recording what it delivers:
//! the fault tests check that no resourceVersion goes backwards across a fault and that every
//! acknowledged write is delivered.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::configmap_writer::{Api, rv_of};

/// What a watch reads off an object as its value (a write's unique mark).
pub type ValueOf = fn(&Value) -> Option<&str>;

/// One watch event: type, object name, resourceVersion, and the value the watch reads off
/// the object (see [`RvWatch::start`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub kind: String,
    /// The object's name.
    pub name: String,
    /// The object's resourceVersion.
    pub rv: i64,
    /// What the watch read off the object.
    pub value: String,
}

/// What an [`RvWatch`] saw.
#[derive(Debug, Default)]
pub struct Watched {
    /// The events delivered, in order.
    pub events: Vec<Event>,
    /// The resourceVersion to resume from: the last event's.
    pub last_rv: i64,
    /// Told 410 Gone: it cannot resume.
    pub gone: bool,
    /// Watch requests made (1 + resumptions).
    pub watches: usize,
    /// ERROR events other than 410, each ending a watch that was then resumed.
    pub errors: Vec<String>,
    /// Events at or below a resourceVersion delivered before them.
    pub backwards: Vec<String>,
}

/// A kubectl watch of a collection from a resourceVersion, in a thread, resumed from the
/// last event's resourceVersion whenever it ends (as a reflector resumes), until told 410 or
/// stopped.
pub struct RvWatch {
    watched: Arc<Mutex<Watched>>,
    stop: Arc<AtomicBool>,
    child: Arc<Mutex<Option<Child>>>,
    thread: JoinHandle<()>,
}

impl RvWatch {
    /// Watches `path` (a collection) through `api` from `from`; each event's value is what
    /// `value` reads off its object ("" for none).
    pub fn start(api: &Api, path: &str, from: i64, value: ValueOf) -> RvWatch {
        let watched = Arc::new(Mutex::new(Watched {
            last_rv: from,
            ..Default::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let child: Arc<Mutex<Option<Child>>> = Arc::new(Mutex::new(None));
        let (w, s, c, api) = (watched.clone(), stop.clone(), child.clone(), api.clone());
        let path = path.to_string();
        let thread = std::thread::spawn(move || RvWatch::run(&api, &path, value, &w, &s, &c));
        RvWatch {
            watched,
            stop,
            child,
            thread,
        }
    }

    fn run(
        api: &Api,
        path: &str,
        value: ValueOf,
        watched: &Mutex<Watched>,
        stop: &AtomicBool,
        slot: &Mutex<Option<Child>>,
    ) {
        loop {
            let stdout = {
                // Spawned under the lock, after looking at `stop`: stopping never misses a
                // child.
                let mut slot = slot.lock().unwrap();
                if stop.load(Ordering::SeqCst) {
                    return;
                }
                let from = watched.lock().unwrap().last_rv;
                let url = format!("{path}?watch=1&resourceVersion={from}");
                let mut child = api
                    .command(&["get", "--raw", &url])
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("run kubectl");
                let stdout = child.stdout.take().expect("kubectl's stdout");
                *slot = Some(child);
                stdout
            };
            watched.lock().unwrap().watches += 1;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(event) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                let mut w = watched.lock().unwrap();
                let kind = event["type"].as_str().unwrap_or_default().to_string();
                let object = &event["object"];
                if kind == "ERROR" {
                    if object["code"] == 410 {
                        w.gone = true;
                    } else {
                        w.errors.push(object.to_string());
                    }
                    break;
                }
                let rv = rv_of(object);
                if rv <= w.last_rv {
                    let last = w.last_rv;
                    w.backwards.push(format!("{kind} at {rv} after {last}"));
                }
                w.last_rv = w.last_rv.max(rv);
                w.events.push(Event {
                    kind,
                    name: object["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    rv,
                    value: value(object).unwrap_or_default().to_string(),
                });
            }
            if let Some(mut child) = slot.lock().unwrap().take() {
                let _ = child.kill();
                let _ = child.wait();
            }
            if watched.lock().unwrap().gone {
                return;
            }
            // Not a timing assumption: keeps an unavailable store from being asked in a
            // tight loop.
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The resourceVersion of the last event delivered.
    pub fn last_rv(&self) -> i64 {
        self.watched.lock().unwrap().last_rv
    }

    /// Waits until the watch has delivered an event at `rv` or later, or was told 410;
    /// fails after `limit`.
    pub fn wait_past(&self, rv: i64, limit: Duration, what: &str) {
        let deadline = Instant::now() + limit;
        loop {
            {
                let w = self.watched.lock().unwrap();
                if w.last_rv >= rv || w.gone {
                    return;
                }
                assert!(
                    Instant::now() < deadline,
                    "{what}: the watch got to resourceVersion {} of {rv} in {limit:?} \
                     ({} watches, errors {:?})",
                    w.last_rv,
                    w.watches,
                    w.errors
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until what the watch saw satisfies `check`; fails after `limit`.
    pub fn wait_until(&self, what: &str, limit: Duration, check: impl Fn(&Watched) -> bool) {
        let deadline = Instant::now() + limit;
        loop {
            {
                let w = self.watched.lock().unwrap();
                if check(&w) {
                    return;
                }
                assert!(
                    Instant::now() < deadline,
                    "{what}: not in {limit:?}: {} events in {} watches, errors {:?}",
                    w.events.len(),
                    w.watches,
                    w.errors
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the watch: what it saw.
    pub fn stop(self) -> Watched {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(child) = self.child.lock().unwrap().as_mut() {
            let _ = child.kill();
        }
        self.thread.join().expect("the watch thread");
        Arc::try_unwrap(self.watched)
            .expect("the watch is done")
            .into_inner()
            .unwrap()
    }
}
