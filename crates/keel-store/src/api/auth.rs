//! The etcd `Auth` service, answering as an etcd with authentication disabled and no users or
//! roles does. Creating users and roles is refused with a precise Unimplemented error.

use std::sync::Arc;

use keel_proto::etcdserverpb::auth_server::Auth;
use keel_proto::etcdserverpb::*;
use tonic::{Request, Response, Status};

use super::error::EtcdError;
use super::unary;
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
        result: Result<T, EtcdError>,
    ) -> Result<Response<T>, Status> {
        unary(&self.store, SERVICE, method, async { result }).await
    }
}

fn no_user_store() -> EtcdError {
    EtcdError::Unimplemented(
        "keel store does not store users and roles yet; authentication stays disabled".into(),
    )
}

#[tonic::async_trait]
impl Auth for AuthService {
    async fn auth_enable(
        &self,
        _r: Request<AuthEnableRequest>,
    ) -> Result<Response<AuthEnableResponse>, Status> {
        self.answer("AuthEnable", Err(EtcdError::RootUserNotExist))
            .await
    }

    async fn auth_disable(
        &self,
        _r: Request<AuthDisableRequest>,
    ) -> Result<Response<AuthDisableResponse>, Status> {
        self.answer(
            "AuthDisable",
            Ok(AuthDisableResponse {
                header: self.header(),
            }),
        )
        .await
    }

    async fn auth_status(
        &self,
        _r: Request<AuthStatusRequest>,
    ) -> Result<Response<AuthStatusResponse>, Status> {
        let resp = AuthStatusResponse {
            header: self.header(),
            enabled: false,
            auth_revision: 1,
        };
        self.answer("AuthStatus", Ok(resp)).await
    }

    async fn authenticate(
        &self,
        _r: Request<AuthenticateRequest>,
    ) -> Result<Response<AuthenticateResponse>, Status> {
        self.answer("Authenticate", Err(EtcdError::AuthNotEnabled))
            .await
    }

    async fn user_add(
        &self,
        _r: Request<AuthUserAddRequest>,
    ) -> Result<Response<AuthUserAddResponse>, Status> {
        self.answer("UserAdd", Err(no_user_store())).await
    }

    async fn user_get(
        &self,
        _r: Request<AuthUserGetRequest>,
    ) -> Result<Response<AuthUserGetResponse>, Status> {
        self.answer("UserGet", Err(EtcdError::UserNotFound)).await
    }

    async fn user_list(
        &self,
        _r: Request<AuthUserListRequest>,
    ) -> Result<Response<AuthUserListResponse>, Status> {
        self.answer(
            "UserList",
            Ok(AuthUserListResponse {
                header: self.header(),
                users: vec![],
            }),
        )
        .await
    }

    async fn user_delete(
        &self,
        _r: Request<AuthUserDeleteRequest>,
    ) -> Result<Response<AuthUserDeleteResponse>, Status> {
        self.answer("UserDelete", Err(EtcdError::UserNotFound))
            .await
    }

    async fn user_change_password(
        &self,
        _r: Request<AuthUserChangePasswordRequest>,
    ) -> Result<Response<AuthUserChangePasswordResponse>, Status> {
        self.answer("UserChangePassword", Err(EtcdError::UserNotFound))
            .await
    }

    async fn user_grant_role(
        &self,
        _r: Request<AuthUserGrantRoleRequest>,
    ) -> Result<Response<AuthUserGrantRoleResponse>, Status> {
        self.answer("UserGrantRole", Err(EtcdError::UserNotFound))
            .await
    }

    async fn user_revoke_role(
        &self,
        _r: Request<AuthUserRevokeRoleRequest>,
    ) -> Result<Response<AuthUserRevokeRoleResponse>, Status> {
        self.answer("UserRevokeRole", Err(EtcdError::UserNotFound))
            .await
    }

    async fn role_add(
        &self,
        _r: Request<AuthRoleAddRequest>,
    ) -> Result<Response<AuthRoleAddResponse>, Status> {
        self.answer("RoleAdd", Err(no_user_store())).await
    }

    async fn role_get(
        &self,
        _r: Request<AuthRoleGetRequest>,
    ) -> Result<Response<AuthRoleGetResponse>, Status> {
        self.answer("RoleGet", Err(EtcdError::RoleNotFound)).await
    }

    async fn role_list(
        &self,
        _r: Request<AuthRoleListRequest>,
    ) -> Result<Response<AuthRoleListResponse>, Status> {
        self.answer(
            "RoleList",
            Ok(AuthRoleListResponse {
                header: self.header(),
                roles: vec![],
            }),
        )
        .await
    }

    async fn role_delete(
        &self,
        _r: Request<AuthRoleDeleteRequest>,
    ) -> Result<Response<AuthRoleDeleteResponse>, Status> {
        self.answer("RoleDelete", Err(EtcdError::RoleNotFound))
            .await
    }

    async fn role_grant_permission(
        &self,
        _r: Request<AuthRoleGrantPermissionRequest>,
    ) -> Result<Response<AuthRoleGrantPermissionResponse>, Status> {
        self.answer("RoleGrantPermission", Err(EtcdError::RoleNotFound))
            .await
    }

    async fn role_revoke_permission(
        &self,
        _r: Request<AuthRoleRevokePermissionRequest>,
    ) -> Result<Response<AuthRoleRevokePermissionResponse>, Status> {
        self.answer("RoleRevokePermission", Err(EtcdError::RoleNotFound))
            .await
    }
}
