//! The etcd `Cluster` service: the member list and membership changes (MemberAdd, also as a
//! learner, MemberRemove, MemberUpdate, MemberPromote), made by the leader with etcd's checks
//! and errors (see [`crate::raft::membership`]).

use std::sync::Arc;

use keel_proto::etcdserverpb::{
    Member, MemberAddRequest, MemberAddResponse, MemberListRequest, MemberListResponse,
    MemberPromoteRequest, MemberPromoteResponse, MemberRemoveRequest, MemberRemoveResponse,
    MemberUpdateRequest, MemberUpdateResponse, ResponseHeader, cluster_server::Cluster,
};
use tonic::{Request, Response, Status};

use super::unary;
use crate::error::EtcdError;
use crate::raft::membership::Change;
use crate::server::Store;

const SERVICE: &str = "etcdserverpb.Cluster";

/// The Cluster service of one member.
pub struct ClusterService {
    store: Arc<Store>,
}

impl ClusterService {
    /// Serves Cluster requests on `store`.
    pub fn new(store: Arc<Store>) -> Self {
        ClusterService { store }
    }

    /// etcd's cluster responses carry no revision in their header.
    fn header(&self) -> Option<ResponseHeader> {
        Some(self.store.header(0))
    }
}

/// etcd's `types.NewURLs`: trimmed, sorted URLs with a known scheme, and for http(s) a
/// `host:port` and no path; anything else is `given member URLs are invalid`.
fn member_urls(urls: &[String]) -> Result<Vec<String>, EtcdError> {
    let mut out = Vec::with_capacity(urls.len());
    for url in urls {
        let url = url.trim();
        let (scheme, rest) = url.split_once("://").ok_or(EtcdError::MemberBadUrls)?;
        let valid = match scheme {
            "http" | "https" => rest
                .rsplit_once(':')
                .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok()),
            "unix" | "unixs" => !rest.is_empty(),
            _ => false,
        };
        if !valid {
            return Err(EtcdError::MemberBadUrls);
        }
        out.push(url.to_string());
    }
    if out.is_empty() {
        return Err(EtcdError::MemberBadUrls);
    }
    out.sort();
    Ok(out)
}

#[tonic::async_trait]
impl Cluster for ClusterService {
    async fn member_add(
        &self,
        request: Request<MemberAddRequest>,
    ) -> Result<Response<MemberAddResponse>, Status> {
        let req = request.into_inner();
        let call = async {
            let peer_urls = member_urls(&req.peer_ur_ls)?;
            let token = &self.store.config().initial_cluster_token;
            let id = crate::identity::added_member_id(&peer_urls, token);
            let change = Change::Add {
                id,
                peer_urls: peer_urls.clone(),
                learner: req.is_learner,
            };
            self.store.reconfigure(&change).await?;
            Ok(MemberAddResponse {
                header: self.header(),
                member: Some(Member {
                    id,
                    peer_ur_ls: peer_urls,
                    is_learner: req.is_learner,
                    ..Default::default()
                }),
                members: self.store.members(),
            })
        };
        unary(&self.store, SERVICE, "MemberAdd", call).await
    }

    async fn member_remove(
        &self,
        request: Request<MemberRemoveRequest>,
    ) -> Result<Response<MemberRemoveResponse>, Status> {
        let id = request.into_inner().id;
        let call = async {
            self.store.reconfigure(&Change::Remove(id)).await?;
            Ok(MemberRemoveResponse {
                header: self.header(),
                members: self.store.members(),
            })
        };
        unary(&self.store, SERVICE, "MemberRemove", call).await
    }

    async fn member_update(
        &self,
        request: Request<MemberUpdateRequest>,
    ) -> Result<Response<MemberUpdateResponse>, Status> {
        let req = request.into_inner();
        let call = async {
            let peer_urls = member_urls(&req.peer_ur_ls)?;
            let change = Change::Update {
                id: req.id,
                peer_urls,
            };
            self.store.reconfigure(&change).await?;
            Ok(MemberUpdateResponse {
                header: self.header(),
                members: self.store.members(),
            })
        };
        unary(&self.store, SERVICE, "MemberUpdate", call).await
    }

    async fn member_list(
        &self,
        request: Request<MemberListRequest>,
    ) -> Result<Response<MemberListResponse>, Status> {
        let linearizable = request.into_inner().linearizable;
        let call = async {
            if linearizable {
                self.store.read_barrier().await?;
            }
            Ok(MemberListResponse {
                header: self.header(),
                members: self.store.members(),
            })
        };
        unary(&self.store, SERVICE, "MemberList", call).await
    }

    async fn member_promote(
        &self,
        request: Request<MemberPromoteRequest>,
    ) -> Result<Response<MemberPromoteResponse>, Status> {
        let id = request.into_inner().id;
        let call = async {
            self.store.reconfigure(&Change::Promote(id)).await?;
            Ok(MemberPromoteResponse {
                header: self.header(),
                members: self.store.members(),
            })
        };
        unary(&self.store, SERVICE, "MemberPromote", call).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_urls_follow_etcd() {
        let urls = |v: &[&str]| v.iter().map(|u| u.to_string()).collect::<Vec<_>>();
        assert_eq!(
            member_urls(&urls(&[" http://b:2380", "https://a:1"])).unwrap(),
            urls(&["http://b:2380", "https://a:1"])
        );
        for bad in [
            &[][..],
            &["b:2380"],
            &["ftp://a:1"],
            &["http://a"],
            &["http://a:2380/path"],
            &["http://a:port"],
        ] {
            assert_eq!(
                member_urls(&urls(bad)),
                Err(EtcdError::MemberBadUrls),
                "{bad:?}"
            );
        }
    }
}
