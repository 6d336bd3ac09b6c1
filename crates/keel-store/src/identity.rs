//! Who a member is: its member id and its cluster's id.
//!
//! A member of a new cluster derives both from `--initial-cluster` and the cluster token, as
//! etcd does, so every member computes the same ids. A member joining a running cluster
//! (`--initial-cluster-state existing`) asks the members listed in `--initial-cluster` instead:
//! the cluster id is theirs, and its own id is the one `member add` gave the member with its
//! peer URLs (etcd's `GetClusterFromRemotePeers` and `ValidateClusterAndAssignIDs`). Either
//! way the ids are kept in the data directory (`member/identity`) and used on every later
//! start, whatever the flags say then.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use keel_proto::etcdserverpb::Member;
use keel_proto::raftpb::{MembersRequest, peer_client::PeerClient};
use sha2::{Digest, Sha256};

use crate::config::{Config, ConfigError};

/// How long a joining member waits for one peer's answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(2);

/// The ids a member runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// This member.
    pub member_id: u64,
    /// Its cluster.
    pub cluster_id: u64,
}

/// A member that cannot learn who it is.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// A bad flag.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The identity file cannot be read or written.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: String,
        /// What failed.
        source: std::io::Error,
    },
    /// A joining member could not get the cluster from any peer, or is not in it.
    #[error("{0}")]
    Join(String),
}

impl Identity {
    /// The identity kept in `member_dir`; else a new cluster's ids when the directory holds
    /// no data yet or `--initial-cluster-state` is `new`, or the ids a running cluster gave
    /// this member (`existing`). A found or new identity is written to `member_dir`.
    pub async fn establish(
        config: &Config,
        member_dir: &Path,
        has_data: bool,
    ) -> Result<Identity, IdentityError> {
        let path = member_dir.join("identity");
        if let Some(identity) = Identity::load(&path)? {
            return Ok(identity);
        }
        let identity = if config.initial_cluster_state == "existing" && !has_data {
            join(config).await?
        } else {
            Identity::bootstrap(config)?
        };
        identity.store(&path)?;
        Ok(identity)
    }

    /// The ids every member of a new cluster derives from `--initial-cluster`.
    pub fn bootstrap(config: &Config) -> Result<Identity, ConfigError> {
        Ok(Identity::of_new_cluster(
            &config.initial_members()?,
            &config.advertised_peer_urls(),
            &config.initial_cluster_token,
        ))
    }

    /// The ids of the member with peer URLs `advertised` in a new cluster of `members` (each
    /// name with its peer URLs) bootstrapped with the cluster token `token`.
    pub fn of_new_cluster(
        members: &[(String, Vec<String>)],
        advertised: &[String],
        token: &str,
    ) -> Identity {
        let ids: Vec<u64> = members
            .iter()
            .map(|(_, urls)| member_id(urls, token))
            .collect();
        Identity {
            member_id: member_id(advertised, token),
            cluster_id: cluster_id(&ids, token),
        }
    }

    fn load(path: &Path) -> Result<Option<Identity>, IdentityError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(file_error(path, source)),
        };
        let mut ids = text
            .split_whitespace()
            .map(|hex| u64::from_str_radix(hex, 16));
        match (ids.next(), ids.next()) {
            (Some(Ok(member_id)), Some(Ok(cluster_id))) => Ok(Some(Identity {
                member_id,
                cluster_id,
            })),
            _ => Err(file_error(
                path,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "expected a member id and a cluster id in hex",
                ),
            )),
        }
    }

    /// Writes the ids durably (a new file, fsynced, renamed into place).
    fn store(&self, path: &Path) -> Result<(), IdentityError> {
        let tmp = path.with_extension("tmp");
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            writeln!(f, "{:016x} {:016x}", self.member_id, self.cluster_id)?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)?;
            if let Some(dir) = path.parent() {
                std::fs::File::open(dir)?.sync_all()?;
            }
            Ok(())
        };
        write().map_err(|source| file_error(path, source))
    }
}

fn file_error(path: &Path, source: std::io::Error) -> IdentityError {
    IdentityError::File {
        path: path.display().to_string(),
        source,
    }
}

/// Asks the other members of `--initial-cluster` for the cluster and finds this member in it
/// by its peer URLs.
async fn join(config: &Config) -> Result<Identity, IdentityError> {
    let mine = sorted(config.advertised_peer_urls());
    let initial = config.initial_members()?;
    let peers: Vec<&String> = initial
        .iter()
        .filter(|(_, urls)| sorted(urls.clone()) != mine)
        .flat_map(|(_, urls)| urls)
        .collect();
    // A member that has not applied the `member add` yet does not list this one: the others
    // are asked before giving up.
    let mut failures = Vec::new();
    let mut refusal = None;
    for url in peers {
        match ask(url).await {
            Ok((cluster_id, members)) => match assign(cluster_id, &members, &mine, initial.len()) {
                Ok(identity) => return Ok(identity),
                Err(e) => refusal = Some(e),
            },
            Err(e) => failures.push(format!("{url}: {e}")),
        }
    }
    if let Some(refusal) = refusal {
        return Err(refusal);
    }
    Err(IdentityError::Join(format!(
        "cannot fetch cluster info from peer urls: could not retrieve cluster information from the given URLs ({}); start this member with --initial-cluster naming running members",
        failures.join("; ")
    )))
}

/// The cluster id and members the member at `url` knows.
async fn ask(url: &str) -> Result<(u64, Vec<Member>), String> {
    let endpoint = tonic::transport::Endpoint::from_shared(url.to_string())
        .map_err(|e| e.to_string())?
        .connect_timeout(ASK_TIMEOUT)
        .timeout(ASK_TIMEOUT);
    let channel = endpoint.connect().await.map_err(|e| e.to_string())?;
    let resp = PeerClient::new(channel)
        .members(MembersRequest {})
        .await
        .map_err(|s| s.message().to_string())?
        .into_inner();
    Ok((resp.cluster_id, resp.members))
}

/// This member's ids in the cluster `members`, found by its peer URLs `mine` (etcd's
/// `ValidateClusterAndAssignIDs`); `listed` is how many members `--initial-cluster` names.
fn assign(
    cluster_id: u64,
    members: &[Member],
    mine: &[String],
    listed: usize,
) -> Result<Identity, IdentityError> {
    if members.len() != listed {
        return Err(IdentityError::Join(format!(
            "error validating peerURLs: member count is unequal (the cluster has {}, --initial-cluster names {listed})",
            members.len()
        )));
    }
    let me = members
        .iter()
        .find(|m| sorted(m.peer_ur_ls.clone()) == mine)
        .ok_or_else(|| {
            IdentityError::Join(format!(
                "error validating peerURLs: PeerURLs: no match found for existing member ({}); add this member first with `etcdctl member add NAME --peer-urls={}`",
                mine.join(","),
                mine.join(",")
            ))
        })?;
    Ok(Identity {
        member_id: me.id,
        cluster_id,
    })
}

/// `urls` in order, to compare sets of URLs.
pub(crate) fn sorted(mut urls: Vec<String>) -> Vec<String> {
    urls.sort();
    urls
}

/// etcd-style member id of a bootstrapping member: derived from its peer URLs and the
/// cluster token.
pub fn member_id(peer_urls: &[String], token: &str) -> u64 {
    let mut urls = peer_urls.to_vec();
    urls.sort();
    let digest = Sha256::digest(format!("{}{}", urls.join(""), token));
    u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"))
}

/// etcd-style id of a member added at run time: its peer URLs, the cluster token and the
/// time, so a member removed and added again gets a new id (etcd's `NewMember` with `now`).
pub fn added_member_id(peer_urls: &[String], token: &str) -> u64 {
    static ADDED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let n = ADDED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    member_id(peer_urls, &format!("{token}{now}.{n}"))
}

/// etcd-style cluster id: derived from the member ids and the cluster token.
fn cluster_id(members: &[u64], token: &str) -> u64 {
    let mut hasher = Sha256::new();
    for id in members {
        hasher.update(id.to_be_bytes());
    }
    hasher.update(token.as_bytes());
    u64::from_be_bytes(hasher.finalize()[..8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: u64, urls: &[&str]) -> Member {
        Member {
            id,
            peer_ur_ls: urls.iter().map(|u| u.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_joining_member_is_found_by_its_peer_urls() {
        let members = [
            member(1, &["http://a:2380"]),
            member(2, &["http://c:2380", "http://b:2380"]),
        ];
        let mine = sorted(vec!["http://b:2380".into(), "http://c:2380".into()]);
        let id = assign(7, &members, &mine, 2).unwrap();
        assert_eq!((id.member_id, id.cluster_id), (2, 7));
        let err = assign(7, &members, &mine, 3).unwrap_err().to_string();
        assert!(err.contains("member count is unequal"), "{err}");
        let err = assign(7, &members, &["http://d:2380".into()], 2)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no match found"), "{err}");
    }

    #[test]
    fn the_identity_file_round_trips_and_rejects_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("identity");
        assert!(Identity::load(&path).unwrap().is_none());
        let id = Identity {
            member_id: 0xdead_beef,
            cluster_id: u64::MAX,
        };
        id.store(&path).unwrap();
        assert_eq!(Identity::load(&path).unwrap(), Some(id));
        std::fs::write(&path, "zz").unwrap();
        assert!(Identity::load(&path).is_err());
    }

    #[test]
    fn added_members_get_fresh_ids() {
        let urls = vec!["http://a:2380".to_string()];
        assert_ne!(
            added_member_id(&urls, "t"),
            added_member_id(&urls, "t"),
            "a re-added member must not reuse its old id"
        );
    }
}
