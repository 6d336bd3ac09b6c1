//! A Kubernetes API under test, driven with the real `kubectl`: `keel up` (store and
//! apiserver in one process), `keel apiserver` on a real etcd 3.5.1, or `keel apiserver` on
//! stores the test runs itself ([`Kube::start_on`]), each in its own scratch folder on free
//! ports, killed on drop; its watches read through `kubectl get --raw` ([`Watcher`]).
//! The end-to-end tests' common steps are free functions here: [`ok`], [`fails`],
//! [`get_json`], [`table`] and [`write`].

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{Flavor, READY_TIMEOUT, Server, free_port, keel_bin};

/// Which stack serves the API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stack {
    /// `keel up`.
    Up,
    /// `keel apiserver --etcd-servers` on etcd 3.5.1.
    OnEtcd,
    /// `keel apiserver --etcd-servers` on stores the test runs ([`Kube::start_on`]).
    OnStores,
}

/// A running API server.
pub struct Kube {
    /// Which stack.
    pub stack: Stack,
    /// The admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// The scratch folder.
    pub scratch: PathBuf,
    /// The store's client URL (keel up's own, or the etcd's).
    pub store_url: String,
    child: Child,
    args: Vec<String>,
    /// The open-file limit it runs under (`prlimit --nofile`), if the test sets one.
    open_files: Option<u64>,
    log: PathBuf,
    _etcd: Option<Server>,
    _tmp: tempfile::TempDir,
}

impl Kube {
    /// Starts `stack` and waits until `/readyz` answers `ok`.
    pub fn start(stack: Stack) -> Kube {
        Kube::start_with(stack, &[])
    }

    /// [`Kube::start`] with `flags` added to `keel up`'s or `keel apiserver`'s command line.
    pub fn start_with(stack: Stack, flags: &[&str]) -> Kube {
        let tmp = scratch();
        let flags = flags.iter().map(|f| f.to_string());
        match stack {
            Stack::Up => {
                let dir = tmp.path().join("keel.data");
                let (mut args, client) = up_args(&dir);
                args.extend(flags);
                Kube::launch(tmp, stack, args, dir.join("kubeconfig"), client, None)
            }
            Stack::OnEtcd => {
                let etcd = Server::start(Flavor::Etcd);
                let certs = tmp.path().join("certs");
                let mut args = apiserver_args(&etcd.client_url, &certs);
                args.extend(flags);
                let url = etcd.client_url.clone();
                Kube::launch(tmp, stack, args, certs.join("kubeconfig"), url, Some(etcd))
            }
            Stack::OnStores => panic!("Kube::start_on starts keel apiserver on the test's stores"),
        }
    }

    /// Starts `keel apiserver --etcd-servers <etcd_servers>` (stores the caller runs, e.g.
    /// members of a [`crate::Cluster`]) and waits until `/readyz` answers `ok`.
    pub fn start_on(etcd_servers: &str) -> Kube {
        Kube::start_on_with(etcd_servers, &[])
    }

    /// [`Kube::start_on`] with `flags` added to `keel apiserver`'s command line (e.g.
    /// `--max-requests-inflight=2`).
    pub fn start_on_with(etcd_servers: &str, flags: &[&str]) -> Kube {
        let tmp = scratch();
        let certs = tmp.path().join("certs");
        let mut args = apiserver_args(etcd_servers, &certs);
        args.extend(flags.iter().map(|f| f.to_string()));
        let url = etcd_servers.to_string();
        Kube::launch(
            tmp,
            Stack::OnStores,
            args,
            certs.join("kubeconfig"),
            url,
            None,
        )
    }

    /// Starts `keel up` with `flags` under an open-file limit of `open_files` (soft and hard,
    /// as `prlimit --nofile` sets them), and waits until `/readyz` answers `ok`.
    pub fn start_up_with_open_files(open_files: u64, flags: &[&str]) -> Kube {
        let tmp = scratch();
        let dir = tmp.path().join("keel.data");
        let (mut args, client) = up_args(&dir);
        args.extend(flags.iter().map(|f| f.to_string()));
        let log = tmp.path().join("server.log");
        let mut kube = Kube {
            stack: Stack::Up,
            kubeconfig: dir.join("kubeconfig"),
            scratch: tmp.path().to_path_buf(),
            store_url: client,
            child: spawn(&args, &log, Some(open_files)),
            args,
            open_files: Some(open_files),
            log,
            _etcd: None,
            _tmp: tmp,
        };
        kube.wait_ready();
        kube
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the server process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Starts `keel up` with its data folder at `data_dir` (which may be on a
    /// [`crate::disk::Disk`]), its log in a scratch folder of its own, and waits until
    /// `/readyz` answers `ok`.
    pub fn start_up_in(data_dir: &Path) -> Kube {
        Kube::start_up_in_with(data_dir, &[])
    }

    /// [`Kube::start_up_in`] with `flags` added to `keel up`'s command line.
    pub fn start_up_in_with(data_dir: &Path, flags: &[&str]) -> Kube {
        let (mut args, client) = up_args(data_dir);
        args.extend(flags.iter().map(|f| f.to_string()));
        let kubeconfig = data_dir.join("kubeconfig");
        Kube::launch(scratch(), Stack::Up, args, kubeconfig, client, None)
    }

    /// Spawns `keel` with `args`, its log in `tmp`, and waits until `/readyz` answers `ok`.
    fn launch(
        tmp: tempfile::TempDir,
        stack: Stack,
        args: Vec<String>,
        kubeconfig: PathBuf,
        store_url: String,
        etcd: Option<Server>,
    ) -> Kube {
        let scratch = tmp.path().to_path_buf();
        let log = scratch.join("server.log");
        let child = spawn(&args, &log, None);
        let mut kube = Kube {
            stack,
            kubeconfig,
            scratch,
            store_url,
            child,
            args,
            open_files: None,
            log,
            _etcd: etcd,
            _tmp: tmp,
        };
        kube.wait_ready();
        kube
    }

    fn wait_ready(&mut self) {
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "keel exited ({status}) before it was ready:\n{}",
                    self.log()
                );
            }
            if self.kubeconfig.exists() {
                let out = self.kubectl(&["get", "--raw", "/readyz"]);
                if out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok" {
                    return;
                }
            }
            if started.elapsed() > READY_TIMEOUT {
                panic!(
                    "keel was not ready within {READY_TIMEOUT:?}:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills the server with SIGKILL and starts it again with the same flags and folder,
    /// waiting until it is ready.
    pub fn kill_and_restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = spawn(&self.args, &self.log, self.open_files);
        self.wait_ready();
    }

    /// Kills the server with SIGKILL and reaps it (start it again with [`Kube::kill_and_restart`]).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kills the server (SIGKILL) and starts it again with the same flags and folder, without
    /// waiting for it to be ready (see [`Kube::kill_and_restart`]).
    pub fn respawn(&mut self) {
        self.kill();
        self.child = spawn(&self.args, &self.log, self.open_files);
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Runs the current `kubectl` with the admin kubeconfig.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_version(None, args)
    }

    /// Runs the current `kubectl`, which must succeed: its standard output.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} on {:?} failed: {}",
            self.stack,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The sum of the samples of `name` (e.g. `apiserver_terminated_watchers_total`) whose
    /// labels include `label` (e.g. `resource="configmaps"`), on the server's `/metrics`.
    pub fn metric_sum(&self, name: &str, label: &str) -> f64 {
        let text = self.kubectl_ok(&["get", "--raw", "/metrics"]);
        text.lines()
            .filter(|l| {
                l.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('{') && rest.contains(label))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// A watch of `path` (e.g. `/api/v1/configmaps?watch=1`) read through the current
    /// `kubectl get --raw`, without a request timeout; see [`Watcher`].
    pub fn watch(&self, path: &str) -> Watcher {
        let mut cmd = Command::new(kubectl_bin(None));
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["get", "--raw", path]);
        Watcher::start(cmd)
    }

    /// Runs the Python script `script` with this server's kubeconfig as KUBECONFIG and
    /// `env`, in the scratch folder, and fails the test unless it prints just `ok`.
    pub fn python_ok(&self, script: &str, env: &[(&str, &str)]) {
        let out = Command::new("python3")
            .arg(script)
            .env("KUBECONFIG", &self.kubeconfig)
            .envs(env.iter().copied())
            .current_dir(&self.scratch)
            .stdin(Stdio::null())
            .output()
            .expect("run python3");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.trim() == "ok",
            "{script} failed on {:?}:\n{stdout}{}\n{}",
            self.stack,
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
    }

    /// Runs `kubectl` (None: the current one; Some("1.27"): `kubectl.1.27`).
    pub fn kubectl_version(&self, version: Option<&str>, args: &[&str]) -> Output {
        Command::new(kubectl_bin(version))
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run kubectl")
    }
}

impl Drop for Kube {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A watch's kubectl (see [`Kube::watch`]), whose output is parsed line by line as it
/// comes, each line one event; killed (SIGKILL, which ends a frozen one too) when dropped.
pub struct Watcher {
    child: Child,
    events: mpsc::Receiver<Value>,
}

impl Watcher {
    /// Starts `cmd` (a kubectl printing a watch) and reads its standard output.
    fn start(mut cmd: Command) -> Watcher {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start a watch");
        let stdout = child.stdout.take().expect("the watch's stdout");
        let (tx, events) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let event = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("a watch event that is not JSON ({e}): {line}"));
                if tx.send(event).is_err() {
                    break;
                }
            }
        });
        Watcher { child, events }
    }

    /// The next event, waiting at most `limit`; None when none came by then or the stream
    /// ended.
    pub fn next(&self, limit: Duration) -> Option<Value> {
        self.events.recv_timeout(limit).ok()
    }

    /// Sends `signal` to the kubectl: `-STOP` freezes it (its connection stays open, unread),
    /// `-CONT` lets it run again.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        let status = Command::new("kill").args([signal, &pid]).status();
        assert!(status.is_ok_and(|s| s.success()), "kill {signal} {pid}");
    }

    /// Whether the kubectl has exited (its stream ended).
    pub fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Bytes (a command's output) as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `kubectl` (`version`: None for the current one, `Some("1.27")` for `kubectl.1.27`),
/// which must succeed: its standard output.
pub fn ok(kube: &Kube, version: Option<&str>, args: &[&str]) -> String {
    let out = kube.kubectl_version(version, args);
    assert!(
        out.status.success(),
        "kubectl {version:?} {args:?} on {:?}: {}\n{}",
        kube.stack,
        text(&out.stderr),
        kube.log()
    );
    text(&out.stdout)
}

/// Runs `kubectl`, which must fail: its error output.
pub fn fails(kube: &Kube, version: Option<&str>, args: &[&str]) -> String {
    let out = kube.kubectl_version(version, args);
    assert!(
        !out.status.success(),
        "kubectl {version:?} {args:?} succeeded: {}",
        text(&out.stdout)
    );
    text(&out.stderr)
}

/// `kubectl get -o json` of `args` (e.g. `["deployment/web"]`), which must succeed.
pub fn get_json(kube: &Kube, version: Option<&str>, args: &[&str]) -> Value {
    let mut all = vec!["get", "-o", "json"];
    all.extend_from_slice(args);
    serde_json::from_str(&ok(kube, version, &all)).expect("kubectl prints JSON")
}

/// Writes `body` to `name` in the scratch folder: its path.
pub fn write(kube: &Kube, name: &str, body: &str) -> String {
    let path = kube.scratch.join(name);
    fs::write(&path, body).expect("write a manifest");
    path.display().to_string()
}

/// The header of the table `kubectl <args>` prints and its first row that starts with
/// `name` (the first row when `name` is ""), their cells split on runs of two spaces or more.
pub fn table(
    kube: &Kube,
    version: Option<&str>,
    args: &[&str],
    name: &str,
) -> (Vec<String>, Vec<String>) {
    let out = ok(kube, version, args);
    let mut lines = out.lines();
    let header = lines.next().unwrap_or("");
    let split = |l: &str| -> Vec<String> {
        l.split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(String::from)
            .collect()
    };
    let row = lines.find(|l| l.starts_with(name)).unwrap_or("");
    (split(header), split(row))
}

/// A scratch folder for one stack.
fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("keel-test-kube-")
        .tempdir()
        .expect("create tempdir")
}

/// `keel up` on `data_dir`, on free ports: its arguments and the store's client URL.
fn up_args(data_dir: &Path) -> (Vec<String>, String) {
    let client = format!("http://127.0.0.1:{}", free_port());
    let args = vec![
        "up".to_string(),
        "--data-dir".into(),
        data_dir.display().to_string(),
        "--secure-port".into(),
        free_port().to_string(),
        "--listen-client-urls".into(),
        client.clone(),
        "--listen-peer-urls".into(),
        format!("http://127.0.0.1:{}", free_port()),
    ];
    (args, client)
}

/// `keel up --events-store` flags on free ports, with `ttl` as `--event-ttl`, and the events
/// store's client URL (for etcdctl).
pub fn events_store_flags(ttl: &str) -> (Vec<String>, String) {
    let client = format!("http://127.0.0.1:{}", free_port());
    let flags = vec![
        "--events-store".to_string(),
        format!("--events-listen-client-urls={client}"),
        format!("--events-listen-peer-urls=http://127.0.0.1:{}", free_port()),
        format!("--event-ttl={ttl}"),
    ];
    (flags, client)
}

/// `keel apiserver` on `etcd_servers` with its certificates in `certs`, on a free port.
fn apiserver_args(etcd_servers: &str, certs: &Path) -> Vec<String> {
    vec![
        "apiserver".to_string(),
        "--etcd-servers".into(),
        etcd_servers.to_string(),
        "--bind-address".into(),
        "127.0.0.1".into(),
        "--secure-port".into(),
        free_port().to_string(),
        "--cert-dir".into(),
        certs.display().to_string(),
    ]
}

/// Starts `keel` with `args`, appending its output to `log`.
fn spawn(args: &[String], log: &Path, open_files: Option<u64>) -> Child {
    let open = || {
        fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("open the server log")
    };
    let mut command = match open_files {
        Some(n) => {
            let mut c = Command::new("prlimit");
            c.arg(format!("--nofile={n}:{n}")).arg("--").arg(keel_bin());
            c
        }
        None => Command::new(keel_bin()),
    };
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(open())
        .stderr(open())
        .spawn()
        .expect("start keel")
}

/// The `kubectl` binary: `KEEL_TEST_KUBECTL` or `kubectl` on PATH; a versioned one
/// (`kubectl.1.27`) is looked for beside the real path of that binary (where the Google
/// Cloud SDK keeps them) and then on PATH.
pub fn kubectl_bin(version: Option<&str>) -> PathBuf {
    let base = std::env::var_os("KEEL_TEST_KUBECTL")
        .map(PathBuf::from)
        .or_else(|| which("kubectl"))
        .expect("kubectl is not installed: install it (e.g. apt-get install -y kubectl) or set KEEL_TEST_KUBECTL");
    let Some(version) = version else {
        return base;
    };
    let name = format!("kubectl.{version}");
    let real = fs::canonicalize(&base).unwrap_or(base);
    let beside = real.parent().map(|d| d.join(&name));
    beside
        .filter(|p| p.is_file())
        .or_else(|| which(&name))
        .unwrap_or_else(|| {
            panic!(
                "{name} is not installed (looked beside {} and on PATH)",
                real.display()
            )
        })
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| Path::new(p).is_file())
}
