//! Runs `keel bench` against a small in-memory KV server and checks what the server received.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use common::{Cli, args};
use keel_bench::BenchArgs;
use keel_proto::etcdserverpb::kv_server::{Kv, KvServer};
use keel_proto::etcdserverpb::{
    CompactionRequest, CompactionResponse, DeleteRangeRequest, DeleteRangeResponse, PutRequest,
    PutResponse, RangeRequest, RangeResponse, RangeStreamResponse, TxnRequest, TxnResponse,
    request_op,
};
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

/// What the fake server saw.
#[derive(Default)]
struct Seen {
    puts: u64,
    txns: u64,
    keys: BTreeMap<Vec<u8>, Vec<u8>>,
    ranges: Vec<RangeRequest>,
}

/// An in-memory KV service; with `fail` set, every request is refused.
#[derive(Clone, Default)]
struct Fake {
    seen: Arc<Mutex<Seen>>,
    fail: bool,
}

impl Fake {
    fn check(&self) -> Result<(), Status> {
        if self.fail {
            Err(Status::unavailable("etcdserver: no leader"))
        } else {
            Ok(())
        }
    }
}

#[tonic::async_trait]
impl Kv for Fake {
    async fn range(&self, r: Request<RangeRequest>) -> Result<Response<RangeResponse>, Status> {
        self.check()?;
        self.seen.lock().unwrap().ranges.push(r.into_inner());
        Ok(Response::new(RangeResponse::default()))
    }

    type RangeStreamStream = futures::stream::Empty<Result<RangeStreamResponse, Status>>;

    async fn range_stream(
        &self,
        _r: Request<RangeRequest>,
    ) -> Result<Response<Self::RangeStreamStream>, Status> {
        Err(Status::unimplemented("range stream"))
    }

    async fn put(&self, r: Request<PutRequest>) -> Result<Response<PutResponse>, Status> {
        self.check()?;
        let r = r.into_inner();
        let mut seen = self.seen.lock().unwrap();
        seen.puts += 1;
        seen.keys.insert(r.key, r.value);
        Ok(Response::new(PutResponse::default()))
    }

    async fn delete_range(
        &self,
        _r: Request<DeleteRangeRequest>,
    ) -> Result<Response<DeleteRangeResponse>, Status> {
        Err(Status::unimplemented("delete"))
    }

    async fn txn(&self, r: Request<TxnRequest>) -> Result<Response<TxnResponse>, Status> {
        self.check()?;
        let mut seen = self.seen.lock().unwrap();
        seen.txns += 1;
        for op in r.into_inner().success {
            if let Some(request_op::Request::RequestPut(put)) = op.request {
                seen.puts += 1;
                seen.keys.insert(put.key, put.value);
            }
        }
        Ok(Response::new(TxnResponse {
            succeeded: true,
            ..Default::default()
        }))
    }

    async fn compact(
        &self,
        _r: Request<CompactionRequest>,
    ) -> Result<Response<CompactionResponse>, Status> {
        Err(Status::unimplemented("compact"))
    }
}

async fn serve(fake: Fake) -> SocketAddr {
    let incoming = TcpIncoming::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = incoming.local_addr().unwrap();
    tokio::spawn(
        Server::builder()
            .add_service(KvServer::new(fake))
            .serve_with_incoming(incoming),
    );
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_sequential_covers_the_key_space() {
    let fake = Fake::default();
    let addr = serve(fake.clone()).await;
    let a = args(&format!(
        "--endpoints http://{addr} --conns 2 --clients 8 put --total 1000 \
         --key-space-size 100 --sequential-keys --val-size 16"
    ));
    let report = keel_bench::execute(&a).await.unwrap();
    assert_eq!(report.stats.succeeded(), 1000);
    assert_eq!(report.stats.failed(), 0);
    let seen = fake.seen.lock().unwrap();
    assert_eq!(seen.puts, 1000);
    assert_eq!(seen.keys.len(), 100);
    assert!(seen.keys.iter().all(|(k, v)| k.len() == 8 && v.len() == 16));
    let json = report.to_json();
    assert!(json.contains("\"total\":1000,\"succeeded\":1000,\"errors\":0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_random_stays_in_key_space_with_prefix() {
    let fake = Fake::default();
    let addr = serve(fake.clone()).await;
    let a = args(&format!(
        "put --endpoints {addr} --clients 4 --total 200 --key-space-size 10 --prefix /p/"
    ));
    keel_bench::execute(&a).await.unwrap();
    let seen = fake.seen.lock().unwrap();
    assert_eq!(seen.puts, 200);
    assert!(seen.keys.len() <= 10 && seen.keys.len() > 1);
    assert!(
        seen.keys
            .keys()
            .all(|k| k.starts_with(b"/p/") && k.len() == 11)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn txn_put_writes_txn_ops_keys_each() {
    let fake = Fake::default();
    let addr = serve(fake.clone()).await;
    let a = args(&format!(
        "--endpoints {addr} --clients 3 txn-put --txn-ops 3 --total 10 --key-space-size 100"
    ));
    let report = keel_bench::execute(&a).await.unwrap();
    assert_eq!(report.op, "txn-put");
    let seen = fake.seen.lock().unwrap();
    assert_eq!((seen.txns, seen.puts, seen.keys.len()), (10, 30, 30));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn range_flags_reach_the_server() {
    let fake = Fake::default();
    let addr = serve(fake.clone()).await;
    let a = args(&format!(
        "--endpoints {addr} -w json range foo --prefix --consistency s --limit 5 \
         --count-only --total 7"
    ));
    keel_bench::run(a).await.unwrap();
    {
        let seen = fake.seen.lock().unwrap();
        assert_eq!(seen.ranges.len(), 7);
        let r = &seen.ranges[0];
        assert_eq!(
            (r.key.as_slice(), r.range_end.as_slice()),
            (&b"foo"[..], &b"fop"[..])
        );
        assert!(r.serializable && r.count_only && !r.keys_only);
        assert_eq!(r.limit, 5);
    }
    let a = args(&format!("--endpoints {addr} range foo zoo --total 1"));
    keel_bench::execute(&a).await.unwrap();
    let seen = fake.seen.lock().unwrap();
    let r = seen.ranges.last().unwrap();
    assert_eq!(r.range_end, b"zoo");
    assert!(!r.serializable);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_paces_requests() {
    let addr = serve(Fake::default()).await;
    let a = args(&format!(
        "--endpoints {addr} --clients 4 --rate 200 put --total 41"
    ));
    let report = keel_bench::execute(&a).await.unwrap();
    assert!(
        report.elapsed >= Duration::from_millis(190),
        "{:?}",
        report.elapsed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_failing_is_an_error() {
    let addr = serve(Fake {
        fail: true,
        ..Fake::default()
    })
    .await;
    let a = args(&format!("--endpoints {addr} --json put --total 5"));
    let report = keel_bench::execute(&a).await.unwrap();
    assert_eq!(report.stats.failed(), 5);
    let err = keel_bench::run(a).await.unwrap_err().to_string();
    assert!(err.contains("all 5 requests failed"), "{err}");
    assert!(
        err.contains("Unavailable") && err.contains("no leader"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_and_malformed_endpoints_are_clear_errors() {
    // A port nobody listens on: bind, note it, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let a = args(&format!(
        "--endpoints 127.0.0.1:{port} --dial-timeout 2s put --total 1"
    ));
    let err = format!("{:#}", keel_bench::run(a).await.unwrap_err());
    assert!(err.contains("cannot connect to http://127.0.0.1:"), "{err}");

    let a = args("--endpoints localhost put --total 1");
    let err = format!("{:#}", keel_bench::run(a).await.unwrap_err());
    assert!(err.contains("missing port"), "{err}");
}

#[test]
fn flags_and_defaults_match_etcd_benchmark() {
    let a = args("put");
    assert_eq!(a.endpoints, vec!["127.0.0.1:2379".to_string()]);
    assert_eq!((a.conns, a.clients, a.total), (1, 1, 10_000));
    assert_eq!(
        (a.key_size, a.val_size, a.key_space_size, a.rate),
        (8, 8, 1, 0)
    );
    assert!(!a.sequential_keys);

    let a = args("--endpoints a:1,http://b:2 --conns 8 put --clients 64 --json");
    assert_eq!(
        a.endpoints,
        vec!["a:1".to_string(), "http://b:2".to_string()]
    );
    assert_eq!((a.conns, a.clients), (8, 64));
    assert_eq!(a.output(), keel_bench::OutputFormat::Json);

    let a = args("range foo");
    match a.command {
        keel_bench::BenchCommand::Range(r) => {
            assert_eq!(r.consistency, keel_bench::Consistency::L);
            assert_eq!(r.key, "foo");
            assert!(r.end.is_none());
        }
        other => panic!("{other:?}"),
    }
    assert!(Cli::try_parse_from(["x", "range", "foo", "--consistency", "x"]).is_err());
    assert!(Cli::try_parse_from(["x", "txn-put", "--txn-ops", "2"]).is_ok());
}

/// The shape the `keel` binary uses: `keel bench ...` as one variant of its subcommands.
#[derive(Parser)]
struct KeelCli {
    #[command(subcommand)]
    command: KeelCommand,
}

#[derive(clap::Subcommand)]
enum KeelCommand {
    /// Load generator.
    Bench(BenchArgs),
    /// Another subcommand with flags of its own.
    Store {
        #[arg(long)]
        name: Option<String>,
    },
}

#[test]
fn nests_as_a_keel_subcommand() {
    use clap::CommandFactory;
    KeelCli::command().debug_assert();
    let cli = KeelCli::try_parse_from([
        "keel",
        "bench",
        "--endpoints",
        "http://127.0.0.1:2379",
        "--conns",
        "8",
        "range",
        "foo",
        "--consistency",
        "s",
        "--clients",
        "64",
        "-w",
        "json",
    ])
    .unwrap();
    match cli.command {
        KeelCommand::Bench(a) => {
            assert_eq!((a.conns, a.clients), (8, 64));
            assert_eq!(a.output(), keel_bench::OutputFormat::Json);
        }
        KeelCommand::Store { .. } => panic!("parsed as store"),
    }
    assert!(KeelCli::try_parse_from(["keel", "store", "--name", "x"]).is_ok());
    assert!(KeelCli::try_parse_from(["keel", "bench"]).is_err());
}
