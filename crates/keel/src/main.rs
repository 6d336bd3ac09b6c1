//! `keel`: the Kubernetes control-plane storage stack in one binary.

mod doctor;
mod fault;
mod logging;
mod snapshot;
mod store_client;
mod up;

use clap::{Parser, Subcommand};

/// mimalloc: fewer cycles per request than the system allocator on the gRPC and apply paths.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// keel: an etcd-compatible store for Kubernetes control planes, and the tools around it.
#[derive(Parser)]
#[command(name = "keel", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run an etcd-compatible store member (accepts etcd's flags and ETCD_* variables).
    Store(Box<keel_store::Config>),
    /// Run a Kubernetes API server on etcd or keel store (kube-apiserver's flags).
    Apiserver(Box<keel_apiserver::Config>),
    /// Run keel store and the apiserver in one process, all state in one folder.
    Up(Box<up::UpArgs>),
    /// Load-test any etcd v3 endpoint (flags as etcd's `benchmark`).
    Bench(Box<keel_bench::BenchArgs>),
    /// Simulate Kubernetes components against any API server (`keel sim nodes`: kubelets).
    Sim(Box<keel_bench::SimArgs>),
    /// Back up and restore every store of a control plane (etcd-format snapshots).
    #[command(subcommand)]
    Snapshot(snapshot::SnapshotCommand),
    /// Name the layer (apiserver or store) and the store's axis at fault, from their metrics.
    Doctor(Box<doctor::DoctorArgs>),
    /// Inject faults for diagnosis drills: slow disks, lost peer messages, lease storms.
    #[command(subcommand)]
    Fault(fault::FaultCommand),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // As Go's runtime does for etcd and kube-apiserver: the operator's hard limit, not a
    // shell's default soft limit, bounds how many files and connections the process may hold.
    keel_process::fd_limit::raise();
    logging::init(log_format(&cli.command));
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.thread_stack_size(keel_process::THREAD_STACK);
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            logging::fail(&format!("keel: cannot start the async runtime: {e}"));
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Store(config) => run_store(*config).await,
            Command::Apiserver(config) => run_apiserver(*config).await,
            Command::Up(args) => up::run(*args).await,
            Command::Bench(args) => keel_bench::run(*args).await,
            Command::Sim(args) => keel_bench::sim::run(*args).await,
            Command::Snapshot(command) => snapshot::run(command).await,
            Command::Fault(command) => fault::run(command).await,
            Command::Doctor(args) => doctor::run(*args).await,
        }
    });
    // The main runtime's tasks go first (the apiserver and its links to the stores), then the
    // low-priority runtime's (the events store of `keel up --events-store`), so that every
    // store closes its backend before the process ends.
    drop(runtime);
    keel_process::background::shutdown(std::time::Duration::from_secs(10));
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            logging::fail(&format!("keel: {e:#}"));
            std::process::ExitCode::FAILURE
        }
    }
}

/// The log format the command's flags ask for: JSON when the store's `--log-format` or the
/// apiserver's `--logging-format` says `json`.
fn log_format(command: &Command) -> logging::Format {
    let (store, apiserver) = match command {
        Command::Store(c) => (Some(&**c), None),
        Command::Apiserver(c) => (None, Some(&**c)),
        Command::Up(up) => (Some(&up.store), Some(&up.apiserver)),
        _ => (None, None),
    };
    let json = store.is_some_and(|c| c.log_format == "json")
        || apiserver.is_some_and(|c| c.logging_format == "json");
    match json {
        true => logging::Format::Json {
            member: store.map(|c| c.name.clone()),
        },
        false => logging::Format::Text,
    }
}

async fn run_store(config: keel_store::Config) -> anyhow::Result<()> {
    let handle = keel_store::StoreHandle::start(config).await?;
    if let Some(addr) = handle.addrs().first() {
        logging::announce(&format!(
            "keel store is serving on http://{addr}; try: etcdctl --endpoints=http://{addr} put hello world"
        ));
    }
    handle.wait().await?;
    Ok(())
}

async fn run_apiserver(config: keel_apiserver::Config) -> anyhow::Result<()> {
    let store = keel_apiserver::server::connect(&config)?;
    let server = keel_apiserver::ApiServer::start(config, store, None).await?;
    logging::announce(&match &server.kubeconfig {
        Some(path) => format!(
            "keel apiserver is serving on {}; try: kubectl --kubeconfig {} get namespaces",
            server.url,
            path.display()
        ),
        None => format!("keel apiserver is serving on {}", server.url),
    });
    server.wait().await?;
    Ok(())
}
