//! The etcd `Auth` service, answering as an etcd with authentication disabled does: users,
//! roles and permissions are stored and listed (changes go through the log), `Authenticate`
//! says authentication is not enabled, and `AuthEnable` is refused because keel store cannot
//! enforce permissions yet.

use std::sync::Arc;

use keel_proto::etcdserverpb::auth_server::Auth;
use keel_proto::etcdserverpb::*;
use tonic::{Request, Response, Status};

use super::unary;
use crate::auth::{AuthOp, AuthProposal, hash_password};
use crate::error::EtcdError;
use crate::raft::{Applied, ProposalOp};
use crate::server::Store;

const SERVICE: &str = "etcdserverpb.Auth";

/// The Auth service of one member.
pub struct AuthService {
    store: Arc<Store>,
}

impl AuthService {
    /// Serves Auth requests on `store`.
    pub fn new(store: Arc<Store>) -> Self {
        AuthService { store }
    }

    fn header(&self) -> Option<ResponseHeader> {
        Some(self.store.header(self.store.mvcc().current_revision()))
    }

    async fn answer<T>(
        &self,
        method: &'static str,
        call: impl Future<Output = Result<T, EtcdError>>,
    ) -> Result<Response<T>, Status> {
        unary(&self.store, SERVICE, method, call).await
    }

    /// `password` hashed with `--bcrypt-cost`, on a blocking thread (bcrypt is slow on
    /// purpose).
    async fn hash(&self, password: String) -> Result<String, EtcdError> {
        let cost = self.store.config().bcrypt_cost();
        tokio::task::spawn_blocking(move || hash_password(&password, cost))
            .await
            .map_err(|e| EtcdError::Internal(e.to_string()))?
    }

    /// Replicates one auth change and returns the header for its response.
    async fn change(&self, op: AuthOp) -> Result<Option<ResponseHeader>, EtcdError> {
        match self
            .store
            .propose(ProposalOp::Auth(AuthProposal { op: Some(op) }))
            .await?
        {
            Applied::Auth => Ok(self.header()),
            other => Err(EtcdError::Internal(format!(
                "unexpected apply result {other:?}"
            ))),
        }
    }
}

#[tonic::async_trait]
impl Auth for AuthService {
    async fn auth_enable(
        &self,
        r: Request<AuthEnableRequest>,
    ) -> Result<Response<AuthEnableResponse>, Status> {
        let call = async {
            Ok(AuthEnableResponse {
                header: self.change(AuthOp::AuthEnable(r.into_inner())).await?,
            })
        };
        self.answer("AuthEnable", call).await
    }

    async fn auth_disable(
        &self,
        _r: Request<AuthDisableRequest>,
    ) -> Result<Response<AuthDisableResponse>, Status> {
        self.answer("AuthDisable", async {
            Ok(AuthDisableResponse {
                header: self.header(),
            })
        })
        .await
    }

    async fn auth_status(
        &self,
        _r: Request<AuthStatusRequest>,
    ) -> Result<Response<AuthStatusResponse>, Status> {
        let revision = self.store.auth(|a| a.revision);
        let resp = AuthStatusResponse {
            header: self.header(),
            enabled: false,
            auth_revision: revision,
        };
        self.answer("AuthStatus", async { Ok(resp) }).await
    }

    async fn authenticate(
        &self,
        _r: Request<AuthenticateRequest>,
    ) -> Result<Response<AuthenticateResponse>, Status> {
        self.answer("Authenticate", async { Err(EtcdError::AuthNotEnabled) })
            .await
    }

    async fn user_add(
        &self,
        r: Request<AuthUserAddRequest>,
    ) -> Result<Response<AuthUserAddResponse>, Status> {
        let mut req = r.into_inner();
        let call = async {
            if !req.options.is_some_and(|o| o.no_password) && req.hashed_password.is_empty() {
                req.hashed_password = self.hash(std::mem::take(&mut req.password)).await?;
            }
            req.password.clear();
            Ok(AuthUserAddResponse {
                header: self.change(AuthOp::UserAdd(req)).await?,
            })
        };
        self.answer("UserAdd", call).await
    }

    async fn user_get(
        &self,
        r: Request<AuthUserGetRequest>,
    ) -> Result<Response<AuthUserGetResponse>, Status> {
        let name = r.into_inner().name;
        let call = async {
            Ok(AuthUserGetResponse {
                header: self.header(),
                roles: self.store.auth(|a| a.user_roles(&name))?,
            })
        };
        self.answer("UserGet", call).await
    }

    async fn user_list(
        &self,
        _r: Request<AuthUserListRequest>,
    ) -> Result<Response<AuthUserListResponse>, Status> {
        let users = self.store.auth(|a| a.user_names());
        self.answer("UserList", async {
            Ok(AuthUserListResponse {
                header: self.header(),
                users,
            })
        })
        .await
    }

    async fn user_delete(
        &self,
        r: Request<AuthUserDeleteRequest>,
    ) -> Result<Response<AuthUserDeleteResponse>, Status> {
        let call = async {
            Ok(AuthUserDeleteResponse {
                header: self.change(AuthOp::UserDelete(r.into_inner())).await?,
            })
        };
        self.answer("UserDelete", call).await
    }

    async fn user_change_password(
        &self,
        r: Request<AuthUserChangePasswordRequest>,
    ) -> Result<Response<AuthUserChangePasswordResponse>, Status> {
        let mut req = r.into_inner();
        let call = async {
            if req.hashed_password.is_empty() {
                req.hashed_password = self.hash(std::mem::take(&mut req.password)).await?;
            }
            req.password.clear();
            Ok(AuthUserChangePasswordResponse {
                header: self.change(AuthOp::UserChangePassword(req)).await?,
            })
        };
        self.answer("UserChangePassword", call).await
    }

    async fn user_grant_role(
        &self,
        r: Request<AuthUserGrantRoleRequest>,
    ) -> Result<Response<AuthUserGrantRoleResponse>, Status> {
        let call = async {
            Ok(AuthUserGrantRoleResponse {
                header: self.change(AuthOp::UserGrantRole(r.into_inner())).await?,
            })
        };
        self.answer("UserGrantRole", call).await
    }

    async fn user_revoke_role(
        &self,
        r: Request<AuthUserRevokeRoleRequest>,
    ) -> Result<Response<AuthUserRevokeRoleResponse>, Status> {
        let call = async {
            Ok(AuthUserRevokeRoleResponse {
                header: self.change(AuthOp::UserRevokeRole(r.into_inner())).await?,
            })
        };
        self.answer("UserRevokeRole", call).await
    }

    async fn role_add(
        &self,
        r: Request<AuthRoleAddRequest>,
    ) -> Result<Response<AuthRoleAddResponse>, Status> {
        let call = async {
            Ok(AuthRoleAddResponse {
                header: self.change(AuthOp::RoleAdd(r.into_inner())).await?,
            })
        };
        self.answer("RoleAdd", call).await
    }

    async fn role_get(
        &self,
        r: Request<AuthRoleGetRequest>,
    ) -> Result<Response<AuthRoleGetResponse>, Status> {
        let role = r.into_inner().role;
        let call = async {
            Ok(AuthRoleGetResponse {
                header: self.header(),
                perm: self.store.auth(|a| a.role_permissions(&role))?,
            })
        };
        self.answer("RoleGet", call).await
    }

    async fn role_list(
        &self,
        _r: Request<AuthRoleListRequest>,
    ) -> Result<Response<AuthRoleListResponse>, Status> {
        let roles = self.store.auth(|a| a.role_names());
        self.answer("RoleList", async {
            Ok(AuthRoleListResponse {
                header: self.header(),
                roles,
            })
        })
        .await
    }

    async fn role_delete(
        &self,
        r: Request<AuthRoleDeleteRequest>,
    ) -> Result<Response<AuthRoleDeleteResponse>, Status> {
        let call = async {
            Ok(AuthRoleDeleteResponse {
                header: self.change(AuthOp::RoleDelete(r.into_inner())).await?,
            })
        };
        self.answer("RoleDelete", call).await
    }

    async fn role_grant_permission(
        &self,
        r: Request<AuthRoleGrantPermissionRequest>,
    ) -> Result<Response<AuthRoleGrantPermissionResponse>, Status> {
        let call = async {
            Ok(AuthRoleGrantPermissionResponse {
                header: self
                    .change(AuthOp::RoleGrantPermission(r.into_inner()))
                    .await?,
            })
        };
        self.answer("RoleGrantPermission", call).await
    }

    async fn role_revoke_permission(
        &self,
        r: Request<AuthRoleRevokePermissionRequest>,
    ) -> Result<Response<AuthRoleRevokePermissionResponse>, Status> {
        let call = async {
            Ok(AuthRoleRevokePermissionResponse {
                header: self
                    .change(AuthOp::RoleRevokePermission(r.into_inner()))
                    .await?,
            })
        };
        self.answer("RoleRevokePermission", call).await
    }
}
