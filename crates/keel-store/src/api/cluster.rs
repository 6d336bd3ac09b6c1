//! The etcd `Cluster` service for a one-member cluster: the member list, and etcd's own answers
//! to changes that a one-member cluster cannot make.

use std::sync::Arc;

use keel_proto::etcdserverpb::{
    Member, MemberAddRequest, MemberAddResponse, MemberListRequest, MemberListResponse,
    MemberPromoteRequest, MemberPromoteResponse, MemberRemoveRequest, MemberRemoveResponse,
    MemberUpdateRequest, MemberUpdateResponse, cluster_server::Cluster,
};
use tonic::{Request, Response, Status};

use super::error::EtcdError;
use super::unary;
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

    fn members(&self) -> Vec<Member> {
        let config = self.store.config();
        vec![Member {
            id: self.store.member_id(),
            name: config.name.clone(),
            peer_ur_ls: config.advertised_peer_urls(),
            client_ur_ls: config.advertised_client_urls(),
            is_learner: false,
        }]
    }

    /// etcd's cluster responses carry no revision in their header.
    fn header(&self) -> Option<keel_proto::etcdserverpb::ResponseHeader> {
        Some(self.store.header(0))
    }

    /// Fails with etcd's `member not found` unless `id` is this member.
    fn known(&self, id: u64) -> Result<(), EtcdError> {
        if id == self.store.member_id() {
            Ok(())
        } else {
            Err(EtcdError::MemberNotFound)
        }
    }
}

fn single_member_only(what: &str) -> EtcdError {
    EtcdError::Unimplemented(format!(
        "keel store runs single-member clusters; {what} is not supported"
    ))
}

#[tonic::async_trait]
impl Cluster for ClusterService {
    async fn member_add(
        &self,
        _request: Request<MemberAddRequest>,
    ) -> Result<Response<MemberAddResponse>, Status> {
        unary(&self.store, SERVICE, "MemberAdd", async {
            Err(single_member_only("adding a member"))
        })
        .await
    }

    async fn member_remove(
        &self,
        request: Request<MemberRemoveRequest>,
    ) -> Result<Response<MemberRemoveResponse>, Status> {
        let id = request.into_inner().id;
        let call = async {
            self.known(id)?;
            Err::<MemberRemoveResponse, _>(EtcdError::NotEnoughStartedMembers)
        };
        unary(&self.store, SERVICE, "MemberRemove", call).await
    }

    async fn member_update(
        &self,
        request: Request<MemberUpdateRequest>,
    ) -> Result<Response<MemberUpdateResponse>, Status> {
        let id = request.into_inner().id;
        let call = async {
            self.known(id)?;
            Err::<MemberUpdateResponse, _>(single_member_only("changing peer URLs"))
        };
        unary(&self.store, SERVICE, "MemberUpdate", call).await
    }

    async fn member_list(
        &self,
        _request: Request<MemberListRequest>,
    ) -> Result<Response<MemberListResponse>, Status> {
        let call = async {
            Ok(MemberListResponse {
                header: self.header(),
                members: self.members(),
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
            self.known(id)?;
            Err::<MemberPromoteResponse, _>(EtcdError::MemberNotLearner)
        };
        unary(&self.store, SERVICE, "MemberPromote", call).await
    }
}
