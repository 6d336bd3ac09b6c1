//! `keel doctor`: names the layer at fault (apiserver or store) and the store's axis (Raft,
//! WAL, MVCC, Watch, Lease) from the servers' own metrics. It scrapes the apiserver's and every
//! store member's `/metrics` twice, an interval apart ([`scrape`]), decides ([`verdict`]) and
//! prints the verdict first, then the evidence, the log lines that matter when it is given
//! the logs ([`logs`]) and the next command to run. It works against keel and against etcd 3.5
//! members, whose metrics (and warnings) carry the same names.

mod logs;
mod scrape;
mod verdict;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use http::Method;
use keel_bench::https::{Conn, Endpoint};
use keel_proto::etcdserverpb::cluster_client::ClusterClient;
use keel_proto::etcdserverpb::maintenance_client::MaintenanceClient;
use keel_proto::etcdserverpb::{MemberListRequest, StatusRequest};

use crate::store_client;
use scrape::{Delta, Scrape};
use verdict::{Layer, Member, Observed, Verdict};

/// `keel doctor`'s flags.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// The apiserver's kubeconfig (its metrics need an authorized user).
    #[arg(long, value_name = "FILE", conflicts_with = "apiserver")]
    kubeconfig: Option<PathBuf>,
    /// The apiserver's URL, for one whose `/metrics` needs no token (`--plain-http`, or
    /// kube-apiserver with anonymous metrics); an https URL's certificate is not checked.
    #[arg(long, value_name = "URL")]
    apiserver: Option<String>,
    /// The store's client URLs, comma-separated: one is enough, the others come from its
    /// member list. Without them the layer is still named from the apiserver's metrics.
    #[arg(long, value_delimiter = ',', value_name = "URLS")]
    etcd_servers: Vec<String>,
    /// The time between the two scrapes a verdict compares.
    #[arg(long, default_value = "10s", value_parser = keel_process::go_duration::parse)]
    interval: Duration,
    /// One JSON object: layer, axis, member, confidence, evidence, logs (with `--log`), next.
    #[arg(long)]
    json: bool,
    /// Decide again every interval, until interrupted.
    #[arg(long)]
    watch: bool,
    /// A store member's or the apiserver's log file (keel's console or JSON lines, etcd's
    /// JSON lines), repeatable: the lines it gains over the interval that an operator greps
    /// for (`slow fdatasync`, `apply request took too long`, `elected leader`, ...) go with
    /// the verdict.
    #[arg(long = "log", value_name = "FILE")]
    logs: Vec<PathBuf>,
}

/// A server whose `/metrics` is read.
struct Source {
    /// The member's name, or "apiserver".
    name: String,
    /// Where it is reached, or why it cannot be.
    endpoint: Result<Arc<Endpoint>, String>,
    /// The open connection, if there is one.
    conn: Option<Conn>,
    /// Member IDs (hex) and names, for a store member.
    peers: Vec<(String, String)>,
}

/// Runs `keel doctor`.
pub async fn run(args: DoctorArgs) -> anyhow::Result<()> {
    if args.kubeconfig.is_none() && args.apiserver.is_none() && args.etcd_servers.is_empty() {
        bail!(
            "name what to examine: --kubeconfig FILE or --apiserver URL (the apiserver), \
             --etcd-servers URLS (the store), or both"
        );
    }
    let (mut apiserver, mut members) = connect(&args).await?;
    let mut tails = logs::Tails::at_end(&args.logs)?;
    let mut before = scrape_all(&mut apiserver, &mut members).await?;
    let mut history: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    loop {
        tokio::time::sleep(args.interval).await;
        let after = scrape_all(&mut apiserver, &mut members).await?;
        let mut verdict = verdict::decide(&Observed {
            apiserver: match (&before.0, &after.0) {
                (Some(before), Some(after)) => Some(Delta { before, after }),
                _ => None,
            },
            members: members
                .iter()
                .zip(before.1.iter().zip(&after.1))
                .map(|(m, (before, after))| Member {
                    name: m.name.clone(),
                    delta: Delta { before, after },
                    peers: m.peers.clone(),
                })
                .collect(),
        });
        let mut picker = logs::Picker::new(verdict.axis);
        tails.read_into(&mut picker);
        verdict.logs = picker.finish();
        if args.json {
            println!("{}", serde_json::to_string(&verdict)?);
        } else {
            if args.watch {
                // Refreshed in place: clear the terminal and go home.
                print!("\x1b[2J\x1b[H");
            }
            for e in &verdict.evidence {
                let seen = history.entry(signal(&e.metric).to_string()).or_default();
                seen.push(e.value);
                if seen.len() > 30 {
                    seen.remove(0);
                }
            }
            print!("{}", report(&verdict, args.watch.then_some(&history)));
        }
        if !args.watch {
            return Ok(());
        }
        before = after;
    }
}

/// The apiserver (if named) and every store member.
async fn connect(args: &DoctorArgs) -> anyhow::Result<(Option<Source>, Vec<Source>)> {
    const DIAL: Duration = Duration::from_secs(5);
    let target = match (&args.kubeconfig, &args.apiserver) {
        (Some(path), _) => Some(keel_bench::kubeconfig::load(path, None)?),
        (None, Some(url)) if url.starts_with("https://") => {
            let mut target =
                store_client::http_target(&url.replacen("https://", "http://", 1), "--apiserver")?;
            target.server = url.trim_end_matches('/').to_string();
            target.https = true;
            target.insecure = true;
            target.port = url
                .parse::<http::Uri>()
                .ok()
                .and_then(|u| u.port_u16())
                .unwrap_or(443);
            Some(target)
        }
        (None, Some(url)) => Some(store_client::http_target(url, "--apiserver")?),
        (None, None) => None,
    };
    let apiserver = match target {
        Some(target) => {
            // An apiserver that cannot be reached now is evidence, not the doctor's failure.
            let endpoint: Arc<Endpoint> = Endpoint::new(target, false, DIAL)?;
            Some(Source {
                name: "apiserver".into(),
                conn: endpoint.connect().await.ok(),
                endpoint: Ok(endpoint),
                peers: Vec::new(),
            })
        }
        None => None,
    };
    let mut members = Vec::new();
    if !args.etcd_servers.is_empty() {
        let listed = member_list(&args.etcd_servers).await;
        // Each member at the URL it was given by, if it was (a tunnel, a port-forward), else
        // at the client URL it advertises.
        let given = identify(&args.etcd_servers).await;
        let urls: Vec<(String, String)> = match &listed {
            Ok(list) if !list.is_empty() => list
                .iter()
                .map(|(id, name, advertised)| {
                    let url = given.iter().find(|(_, g)| g == id).map(|(url, _)| url);
                    (name.clone(), url.unwrap_or(advertised).clone())
                })
                .collect(),
            _ => args
                .etcd_servers
                .iter()
                .map(|u| (u.clone(), u.clone()))
                .collect(),
        };
        let peers: Vec<(String, String)> = listed
            .unwrap_or_default()
            .into_iter()
            .map(|(id, name, _)| (format!("{id:x}"), name))
            .collect();
        for (name, url) in urls {
            // A member that cannot be reached is reported, not fatal: that is evidence.
            let endpoint = store_client::http_target(&url, "--etcd-servers")
                .and_then(|target| Endpoint::new(target, true, DIAL))
                .map_err(|e| format!("{e:#}; give a URL it answers on with --etcd-servers"));
            let conn = match &endpoint {
                Ok(endpoint) => endpoint.connect().await.ok(),
                Err(_) => None,
            };
            let others = peers.iter().filter(|(_, n)| *n != name).cloned().collect();
            members.push(Source {
                name,
                conn,
                endpoint,
                peers: others,
            });
        }
    }
    Ok((apiserver, members))
}

/// The member ID behind each of `servers` that answers its Status within [`SCRAPE_TIMEOUT`].
async fn identify(servers: &[String]) -> Vec<(String, u64)> {
    let ids = futures::future::join_all(servers.iter().map(|server| async move {
        let status = tokio::time::timeout(SCRAPE_TIMEOUT, async {
            let channel = store_client::connect(std::slice::from_ref(server)).await?;
            let status = MaintenanceClient::new(channel)
                .status(StatusRequest {})
                .await?
                .into_inner();
            anyhow::Ok(status.header.map(|h| h.member_id))
        })
        .await;
        match status {
            Ok(Ok(Some(id))) => Some((server.clone(), id)),
            _ => None,
        }
    }))
    .await;
    ids.into_iter().flatten().collect()
}

/// The members of the store at `servers`: (ID, name, first client URL), from the first
/// server that answers within [`SCRAPE_TIMEOUT`] (one may be frozen).
async fn member_list(servers: &[String]) -> anyhow::Result<Vec<(u64, String, String)>> {
    let mut last = anyhow::anyhow!("no --etcd-servers");
    for server in servers {
        let list = tokio::time::timeout(SCRAPE_TIMEOUT, async {
            let channel = store_client::connect(std::slice::from_ref(server)).await?;
            let request = MemberListRequest {
                linearizable: false,
            };
            anyhow::Ok(ClusterClient::new(channel).member_list(request).await?)
        })
        .await;
        match list {
            Ok(Ok(list)) => return Ok(members_of(list.into_inner())),
            Ok(Err(e)) => last = e,
            Err(_) => last = anyhow::anyhow!("{server}: no answer within {SCRAPE_TIMEOUT:?}"),
        }
    }
    Err(last)
}

/// (ID, name, first client URL) of each member in `list`.
fn members_of(list: keel_proto::etcdserverpb::MemberListResponse) -> Vec<(u64, String, String)> {
    list.members
        .into_iter()
        .filter_map(|m| {
            let url = m.client_ur_ls.first()?.clone();
            let name = if m.name.is_empty() {
                url.clone()
            } else {
                m.name
            };
            Some((m.id, name, url))
        })
        .collect()
}

/// One scrape of every source.
async fn scrape_all(
    apiserver: &mut Option<Source>,
    members: &mut [Source],
) -> anyhow::Result<(Option<Scrape>, Vec<Scrape>)> {
    let api = match apiserver {
        Some(source) => Some(answered_or_not(scrape(source).await)?),
        None => None,
    };
    // Every member at once: a frozen one costs one timeout, not one per member.
    let scraped = futures::future::join_all(members.iter_mut().map(scrape)).await;
    let scraped: anyhow::Result<Vec<Scrape>> = scraped.into_iter().map(answered_or_not).collect();
    Ok((api, scraped?))
}

/// A scrape, or the evidence that the server did not answer; a server that refuses the
/// doctor (401, 403) is the operator's to fix, not evidence: the doctor stops and says so.
fn answered_or_not(scraped: anyhow::Result<Scrape>) -> anyhow::Result<Scrape> {
    match scraped {
        Ok(scrape) => Ok(scrape),
        Err(e) if e.downcast_ref::<Refused>().is_some() => Err(e),
        Err(e) => Ok(Scrape::unanswered(format!("{e:#}"))),
    }
}

/// A server that answered `/metrics` with 401 or 403.
#[derive(Debug)]
struct Refused(String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// One `/metrics` of `source`, within [`SCRAPE_TIMEOUT`]; a connection lost or timed out is
/// opened again on the next scrape.
async fn scrape(source: &mut Source) -> anyhow::Result<Scrape> {
    let answer = tokio::time::timeout(SCRAPE_TIMEOUT, async {
        let conn = match &mut source.conn {
            Some(conn) => conn,
            None => {
                let endpoint = source
                    .endpoint
                    .as_ref()
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                source.conn.insert(endpoint.connect().await?)
            }
        };
        conn.call(Method::GET, "/metrics", None).await
    })
    .await;
    let answer = match answer {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => {
            source.conn = None;
            return Err(e);
        }
        Err(_) => {
            source.conn = None;
            bail!("no answer within {SCRAPE_TIMEOUT:?}");
        }
    };
    if matches!(answer.status.as_u16(), 401 | 403) {
        let why = format!("{}: /metrics answered {}", source.name, answer.error());
        return Err(Refused(why).into());
    }
    if !answer.status.is_success() {
        bail!("{}: /metrics answered {}", source.name, answer.error());
    }
    Ok(Scrape::parse(&String::from_utf8_lossy(&answer.body)))
}

/// How long one `/metrics` may take before its server counts as not answering.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// The human report: the verdict first, then the evidence, the log lines and what to run next;
/// with `history`, a sparkline of each signal's last values.
fn report(v: &Verdict, history: Option<&BTreeMap<String, Vec<f64>>>) -> String {
    let mut out = String::new();
    let place = match (v.layer, v.axis) {
        (Layer::None, _) => "none: every signal is within its threshold".to_string(),
        (layer, Some(axis)) => format!("{layer} / {axis}"),
        (layer, None) => layer.to_string(),
    };
    let member = v
        .member
        .as_ref()
        .map(|m| format!(", member {m}"))
        .unwrap_or_default();
    out.push_str(&format!(
        "VERDICT  {place}{member} (confidence {:.2})\n",
        v.confidence
    ));
    if !v.evidence.is_empty() {
        out.push_str("EVIDENCE\n");
    }
    for e in &v.evidence {
        let on = e
            .member
            .as_ref()
            .map(|m| format!(" on {m}"))
            .unwrap_or_default();
        let spark = history
            .and_then(|h| h.get(signal(&e.metric)))
            .map(|values| format!("  {}", sparkline(values)))
            .unwrap_or_default();
        out.push_str(&format!(
            "  {}{on} = {} (threshold {}): {}{spark}\n",
            e.metric,
            figure(e.value),
            figure(e.threshold),
            e.meaning
        ));
    }
    if !v.logs.is_empty() {
        out.push_str("LOGS\n");
    }
    for l in &v.logs {
        out.push_str(&format!("  [{}] {}: {}\n", l.axis, l.file, l.line));
    }
    if !v.next.is_empty() {
        out.push_str("NEXT\n");
        for step in &v.next {
            out.push_str(&format!("  {step}\n"));
        }
    }
    out
}

/// The signal an evidence line is about, whichever quantile was read (`p99 of X` and `p50 of
/// X` are one sparkline).
fn signal(metric: &str) -> &str {
    metric
        .strip_prefix("p99 of ")
        .or_else(|| metric.strip_prefix("p50 of "))
        .unwrap_or(metric)
}

/// A number as a person reads it: 3 significant digits.
fn figure(x: f64) -> String {
    if x == x.trunc() && x.abs() < 1e9 {
        format!("{x}")
    } else {
        format!("{x:.3}")
    }
}

/// `values` as a line of eighth blocks, the largest full.
fn sparkline(values: &[f64]) -> String {
    const BLOCKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let max = values.iter().copied().fold(0.0, f64::max);
    values
        .iter()
        .map(|v| match max > 0.0 {
            true => BLOCKS[((v / max) * 7.0).round().clamp(0.0, 7.0) as usize],
            false => BLOCKS[0],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_shows_the_log_lines_after_the_evidence() {
        let line = "2026-12-07T04:00:00Z  WARN keel_store::slow_log: slow fdatasync took=1.5s";
        let mut picker = logs::Picker::new(Some(verdict::Axis::Wal));
        picker.offer("store.log", line);
        let v = Verdict {
            layer: Layer::Store,
            axis: Some(verdict::Axis::Wal),
            member: None,
            confidence: 1.0,
            evidence: Vec::new(),
            logs: picker.finish(),
            next: vec!["check the disk".into()],
        };
        let text = report(&v, None);
        assert!(
            text.ends_with(&format!(
                "LOGS\n  [wal] store.log: {line}\nNEXT\n  check the disk\n"
            )),
            "{text}"
        );
        let json = serde_json::to_value(&v).unwrap();
        assert_eq!(json["logs"][0]["axis"], "wal");
        assert_eq!(json["logs"][0]["file"], "store.log");
        // No lines, no field.
        let quiet = Verdict {
            logs: Vec::new(),
            ..v
        };
        assert!(serde_json::to_value(&quiet).unwrap().get("logs").is_none());
        assert!(!report(&quiet, None).contains("LOGS"));
    }

    #[test]
    fn sparklines_scale_to_the_largest() {
        assert_eq!(sparkline(&[0.0, 1.0, 2.0]), "▁▅█");
        assert_eq!(sparkline(&[0.0, 0.0]), "▁▁");
    }
}
