//! The etcd `Cluster` service: the member list (every member of the Raft membership, with the
//! attributes it published), and etcd's own answers to the membership changes keel does not
//! make yet.

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
        self.store.members()
    }

    /// etcd's cluster responses carry no revision in their header.
    fn header(&self) -> Option<keel_proto::etcdserverpb::ResponseHeader> {
        Some(self.store.header(0))
    }

    /// The member `id`, or etcd's `member not found`.
    fn known(&self, id: u64) -> Result<Member, EtcdError> {
        self.members()
            .into_iter()
            .find(|m| m.id == id)
            .ok_or(EtcdError::MemberNotFound)
    }
}

fn not_yet(what: &str) -> EtcdError {
    EtcdError::Unimplemented(format!(
        "keel store does not change cluster membership yet: {what} is not supported"
    ))
}

#[tonic::async_trait]
impl Cluster for ClusterService {
    async fn member_add(
        &self,
        _request: Request<MemberAddRequest>,
    ) -> Result<Response<MemberAddResponse>, Status> {
        unary(&self.store, SERVICE, "MemberAdd", async {
            Err(not_yet("adding a member"))
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
            // etcd refuses to remove the last member.
            if self.members().len() == 1 {
                return Err(EtcdError::NotEnoughStartedMembers);
            }
            Err::<MemberRemoveResponse, _>(not_yet("removing a member"))
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
            Err::<MemberUpdateResponse, _>(not_yet("changing peer URLs"))
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
            if !self.known(id)?.is_learner {
                return Err(EtcdError::MemberNotLearner);
            }
            Err::<MemberPromoteResponse, _>(not_yet("promoting a learner"))
        };
        unary(&self.store, SERVICE, "MemberPromote", call).await
    }
}
