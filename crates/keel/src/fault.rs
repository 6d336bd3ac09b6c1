//! `keel fault`: turns on, off and lists the faults injected for diagnosis drills, on keel
//! store members (`--etcd-servers`, from the member's own machine) and keel apiservers
//! (`--kubeconfig`, an administrator's), through their `/debug/faults`
//! (`keel_process::faults`).
//!
//! A command acts on every server that answers: one that is down, or frozen and answers
//! nothing within [`CALL`], is reported on stderr with the reason and makes the command fail,
//! after the others were done. A one-shot fault (`lease.expire.storm`) set on every member
//! acts on the leader; the followers' replies are notes, and the command fails only when no
//! server acted.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use bytes::Bytes;
use http::Method;
use keel_bench::https::{Conn, Endpoint};
use keel_bench::kubeconfig;
use keel_process::faults::{self, Component, Fault};

use crate::store_client;

/// `keel fault` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum FaultCommand {
    /// Turn faults on: NAME=VALUE, e.g. wal.fsync.delay=200ms, peer.drop=0.5@m2 (one peer),
    /// lease.expire.storm=1000. Store faults go to --etcd-servers, apiserver.* ones to
    /// --kubeconfig (`keel up` takes both kinds on either).
    Set {
        /// NAME=VALUE pairs.
        #[arg(required = true, value_name = "NAME=VALUE")]
        faults: Vec<String>,
        #[command(flatten)]
        target: Target,
    },
    /// Turn faults off: the ones named, or every one.
    Clear {
        /// Fault names (none: all).
        #[arg(value_name = "NAME")]
        names: Vec<String>,
        #[command(flatten)]
        target: Target,
    },
    /// The faults on, and the ones each server can inject.
    List {
        #[command(flatten)]
        target: Target,
        /// One JSON object: each server's answer by URL.
        #[arg(long)]
        json: bool,
    },
}

/// The servers a command goes to.
#[derive(Debug, clap::Args)]
pub struct Target {
    /// keel store members' client URLs, comma-separated (their `/debug/faults` answers
    /// loopback clients only).
    #[arg(long, value_delimiter = ',', value_name = "URLS")]
    etcd_servers: Vec<String>,
    /// A keel apiserver's kubeconfig, whose user is in `system:masters`.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
}

/// How long a server has to accept a connection.
const DIAL: Duration = Duration::from_secs(5);

/// How long a server has to answer one request.
const CALL: Duration = Duration::from_secs(5);

/// A server's `/debug/faults`.
struct Server {
    url: String,
    component: Component,
    /// The connection, or why there is none (refused, or no answer within [`CALL`]).
    conn: Result<Conn, String>,
}

/// A one-shot fault's answer from a server where it does not act (a follower).
#[derive(Debug)]
struct NotHere(String);

impl std::fmt::Display for NotHere {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotHere {}

/// Runs one `keel fault` command, printing what each server answered.
pub async fn run(command: FaultCommand) -> anyhow::Result<()> {
    match command {
        FaultCommand::Set { faults, target } => {
            let pairs = faults
                .iter()
                .map(|pair| {
                    pair.split_once('=').with_context(|| {
                        format!("{pair:?}: write NAME=VALUE, e.g. wal.fsync.delay=200ms")
                    })
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let mut servers = connect(&target).await?;
            let mut failed = 0;
            for (name, value) in pairs {
                let path = format!("/debug/faults/{name}");
                let mut acted = false;
                let mut not_here = Vec::new();
                for server in route(&mut servers, name) {
                    match call(server, Method::PUT, &path, Some(value)).await {
                        Ok(answer) => {
                            acted = true;
                            match answer["done"].as_str() {
                                Some(done) => println!("{done} ({})", server.url),
                                None => println!("{name}={value} on {}", server.url),
                            }
                        }
                        Err(e) => match e.downcast::<NotHere>() {
                            Ok(note) => not_here.push((server.url.clone(), note)),
                            Err(e) => {
                                failed += 1;
                                eprintln!("keel fault: {name}={value} on {}: {e:#}", server.url);
                            }
                        },
                    }
                }
                // Where a one-shot fault does not act: a note when another server acted.
                for (url, note) in not_here {
                    if acted {
                        println!("note: {url}: {note}");
                    } else {
                        failed += 1;
                        eprintln!("keel fault: {url}: {note}");
                    }
                }
            }
            done(failed)
        }
        FaultCommand::Clear { names, target } => {
            let mut servers = connect(&target).await?;
            let mut failed = 0;
            let names: Vec<Option<&str>> = match names.is_empty() {
                true => vec![None],
                false => names.iter().map(|n| Some(n.as_str())).collect(),
            };
            for name in names {
                let path = name.map_or("/debug/faults".into(), |n| format!("/debug/faults/{n}"));
                let chosen: Vec<&mut Server> = match name {
                    Some(name) => route(&mut servers, name),
                    None => servers.iter_mut().collect(),
                };
                for server in chosen {
                    let what = name.unwrap_or("every fault");
                    match call(server, Method::DELETE, &path, None).await {
                        Ok(_) => println!("{what} cleared on {}", server.url),
                        Err(e) => {
                            failed += 1;
                            eprintln!("keel fault: clearing {what} on {}: {e:#}", server.url);
                        }
                    }
                }
            }
            done(failed)
        }
        FaultCommand::List { target, json } => {
            let mut servers = connect(&target).await?;
            let mut all = serde_json::Map::new();
            let mut failed = 0;
            for server in &mut servers {
                match call(server, Method::GET, "/debug/faults", None).await {
                    Ok(listing) => {
                        if !json {
                            print_listing(&server.url, &listing);
                        }
                        all.insert(server.url.clone(), listing);
                    }
                    Err(e) => {
                        failed += 1;
                        eprintln!("keel fault: listing {}: {e:#}", server.url);
                    }
                }
            }
            if json {
                println!("{}", serde_json::Value::Object(all));
            }
            done(failed)
        }
    }
}

fn done(failed: usize) -> anyhow::Result<()> {
    match failed {
        0 => Ok(()),
        n => bail!("{n} request(s) failed"),
    }
}

/// The servers a fault named `name` goes to: those of its component, or all when none of
/// them was named (`keel up` serves both on each; another server explains the refusal).
fn route<'s>(servers: &'s mut [Server], name: &str) -> Vec<&'s mut Server> {
    let component = Fault::named(name).map(Fault::component);
    let matching = servers.iter().any(|s| Some(s.component) == component);
    servers
        .iter_mut()
        .filter(|s| !matching || Some(s.component) == component)
        .collect()
}

/// A connection to each server, or why there is none; fails only on a wrong command line
/// (no server, a bad URL or kubeconfig).
async fn connect(target: &Target) -> anyhow::Result<Vec<Server>> {
    if target.etcd_servers.is_empty() && target.kubeconfig.is_none() {
        bail!(
            "name the servers: --etcd-servers URLS (keel store) or --kubeconfig FILE (keel apiserver, keel up)"
        );
    }
    let mut endpoints = Vec::new();
    for url in &target.etcd_servers {
        let endpoint = Endpoint::new(
            store_client::http_target(url, "--etcd-servers")?,
            true,
            DIAL,
        )?;
        endpoints.push((url.clone(), Component::Store, endpoint));
    }
    if let Some(path) = &target.kubeconfig {
        let kube = kubeconfig::load(path, None)?;
        let url = kube.server.clone();
        let endpoint: Arc<Endpoint> = Endpoint::new(kube, false, DIAL)?;
        endpoints.push((url, Component::Apiserver, endpoint));
    }
    let mut servers = Vec::new();
    for (url, component, endpoint) in endpoints {
        let conn = endpoint.connect().await.map_err(|e| format!("{e:#}"));
        servers.push(Server {
            url,
            component,
            conn,
        });
    }
    Ok(servers)
}

/// One request to a server's `/debug/faults`, answered within [`CALL`]; its JSON answer, or
/// the error it explains ([`NotHere`] where a one-shot fault does not act). A server that
/// does not answer in time is not asked again.
async fn call(
    server: &mut Server,
    method: Method,
    path: &str,
    value: Option<&str>,
) -> anyhow::Result<serde_json::Value> {
    let body = value.map(|v| Bytes::from(v.to_string()));
    let conn = server.conn.as_mut().map_err(|why| anyhow!("{why}"))?;
    let answer =
        match tokio::time::timeout(CALL, conn.call_typed(method, path, body, "text/plain")).await {
            Ok(answer) => answer?,
            Err(_) => {
                let why = format!("no answer within {CALL:?} (is it stopped or overloaded?)");
                server.conn = Err(why.clone());
                bail!(why);
            }
        };
    let json: serde_json::Value = serde_json::from_slice(&answer.body).unwrap_or_default();
    if !answer.status.is_success() {
        let message = json
            .get("error")
            .or_else(|| json.get("message"))
            .and_then(|m| m.as_str())
            .map(str::to_string)
            .unwrap_or_else(|| String::from_utf8_lossy(&answer.body).trim().to_string());
        match answer.status.as_u16() {
            404 if json.is_null() => bail!("this server has no /debug/faults (not keel?)"),
            409 if json["reason"] == faults::NOT_HERE => return Err(NotHere(message).into()),
            status => bail!("{status}: {message}"),
        }
    }
    Ok(json)
}

fn print_listing(url: &str, listing: &serde_json::Value) {
    let names = |key: &str| -> Vec<String> {
        listing[key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|f| match f["value"].as_str() {
                Some(value) => format!("{}={value}", f["name"].as_str().unwrap_or("?")),
                None => f["name"].as_str().unwrap_or("?").to_string(),
            })
            .collect()
    };
    let active = names("active");
    match active.is_empty() {
        true => println!("{url}: no fault is on"),
        false => println!("{url}: ON {}", active.join(" ")),
    }
    println!("  can inject: {}", names("known").join(", "));
}
