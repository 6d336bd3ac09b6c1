//! The apiserver's connections to the members named by `--etcd-servers`: channels balanced
//! over the members that can be reached.
//!
//! kube-apiserver's etcd client (clientv3 on grpc-go) sends each request to a member whose
//! connection is up: a member that died is left out the moment its connection drops, and put
//! back once it can be reached again. tonic's balanced channel does not: a member whose
//! connection failed still looks ready to its balancer, which goes on choosing it, and every
//! request sent its way fails at once with `tcp connect error`. With one member of three
//! dead, a third or more of all requests failed with a 500, for as long as the member stayed
//! down, and so did the store health check behind `/readyz` and the node lifecycle
//! controller's pause: each failed check paused the controller and restarted every node's
//! grace period, so a node that really stopped might never be marked NotReady.
//!
//! So each member is probed every [`PROBE_PERIOD`] (a TCP connect, bounded by
//! [`PROBE_TIMEOUT`]): a member that cannot be reached is taken out of the balanced channels
//! and put back once it can ([`routed`]). When none can be reached, all stay in, so requests
//! fail at once with the member's error instead of waiting for one to come back. With a
//! single member there is nothing to choose and nothing is probed.

use std::time::Duration;

use tokio::sync::mpsc::Sender;
use tonic::transport::channel::Change;
use tonic::transport::{Channel, Endpoint};

/// How often each member is probed.
pub const PROBE_PERIOD: Duration = Duration::from_millis(500);

/// How long a probe waits for a member's TCP connection.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Which members the channels route to, by whether each could be `reachable`: the reachable
/// ones, or all of them when none is.
pub fn routed(reachable: &[bool]) -> Vec<bool> {
    if reachable.iter().any(|r| *r) {
        reachable.to_vec()
    } else {
        vec![true; reachable.len()]
    }
}

/// `copies` channels, each balanced over `endpoints` (the members) that can be reached, as
/// probed by one task for all of them. Must be called within a Tokio runtime.
pub fn balanced(endpoints: Vec<Endpoint>, copies: usize) -> Vec<Channel> {
    let mut channels = Vec::with_capacity(copies);
    let mut changes = Vec::with_capacity(copies);
    for _ in 0..copies {
        let (channel, tx) = Channel::balance_channel::<usize>(endpoints.len().max(1));
        for (i, endpoint) in endpoints.iter().enumerate() {
            tx.try_send(Change::Insert(i, endpoint.clone()))
                .expect("the channel has room for every member");
        }
        channels.push(channel);
        changes.push(tx);
    }
    if endpoints.len() > 1 {
        tokio::spawn(probe(endpoints, changes));
    }
    channels
}

/// Probes the members until every channel is dropped, taking the unreachable ones out of
/// the channels and putting them back once reachable.
async fn probe(endpoints: Vec<Endpoint>, changes: Vec<Sender<Change<usize, Endpoint>>>) {
    let mut current = vec![true; endpoints.len()];
    let mut tick = tokio::time::interval(PROBE_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if changes.iter().all(Sender::is_closed) {
            return;
        }
        let reachable = futures::future::join_all(endpoints.iter().map(reachable)).await;
        let wanted = routed(&reachable);
        for (i, (want, now)) in wanted.iter().zip(current.iter_mut()).enumerate() {
            if want == now {
                continue;
            }
            let uri = endpoints[i].uri();
            if *want {
                tracing::info!(endpoint = %uri, "etcd member reachable again: sending it requests");
            } else {
                tracing::warn!(endpoint = %uri, "etcd member unreachable: sending it no requests until it is back");
            }
            for tx in &changes {
                let change = if *want {
                    Change::Insert(i, endpoints[i].clone())
                } else {
                    Change::Remove(i)
                };
                let _ = tx.send(change).await;
            }
            *now = *want;
        }
    }
}

/// Whether a TCP connection to `endpoint` opens within [`PROBE_TIMEOUT`].
async fn reachable(endpoint: &Endpoint) -> bool {
    let uri = endpoint.uri();
    let Some(host) = uri.host() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    tokio::time::timeout(PROBE_TIMEOUT, tokio::net::TcpStream::connect((host, port)))
        .await
        .is_ok_and(|c| c.is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_reachable_members_are_routed_to_unless_none_is() {
        assert_eq!(routed(&[true, false, true]), [true, false, true]);
        assert_eq!(routed(&[false, false, true]), [false, false, true]);
        assert_eq!(routed(&[false, false]), [true, true]);
        assert_eq!(routed(&[true]), [true]);
    }

    #[tokio::test]
    async fn a_member_that_refuses_connections_is_unreachable() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let endpoint = Endpoint::from_shared(format!("http://127.0.0.1:{port}")).unwrap();
        assert!(reachable(&endpoint).await);
        drop(listener);
        assert!(!reachable(&endpoint).await);
    }
}
