//! The auth store: users, roles and permissions, replicated through the log like etcd's.
//!
//! With authentication disabled (keel store cannot enforce it yet, so it stays disabled) etcd
//! still stores users and roles, and `etcdctl user/role` commands manage them; this module
//! gives the same answers. Changes are [`AuthOp`]s applied in log order; the whole store is
//! small and is persisted as one record beside the key space.

use keel_proto::authpb::{Permission, Role, User, UserAddOptions};
use keel_proto::etcdserverpb::{
    AuthRoleAddRequest, AuthRoleDeleteRequest, AuthRoleGrantPermissionRequest,
    AuthRoleRevokePermissionRequest, AuthUserAddRequest, AuthUserChangePasswordRequest,
    AuthUserDeleteRequest, AuthUserGrantRoleRequest, AuthUserRevokeRoleRequest,
};
use std::ops::RangeInclusive;

use crate::error::EtcdError;

/// etcd's name of the superuser and of its role.
const ROOT: &str = "root";

/// One replicated change to the auth store.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AuthProposal {
    /// The change.
    #[prost(oneof = "AuthOp", tags = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10")]
    pub op: Option<AuthOp>,
}

/// The auth changes etcd replicates.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum AuthOp {
    /// Add a user (the password already hashed by the API layer).
    #[prost(message, tag = "1")]
    UserAdd(AuthUserAddRequest),
    /// Delete a user.
    #[prost(message, tag = "2")]
    UserDelete(AuthUserDeleteRequest),
    /// Change a user's password (already hashed).
    #[prost(message, tag = "3")]
    UserChangePassword(AuthUserChangePasswordRequest),
    /// Grant a role to a user.
    #[prost(message, tag = "4")]
    UserGrantRole(AuthUserGrantRoleRequest),
    /// Revoke a role from a user.
    #[prost(message, tag = "5")]
    UserRevokeRole(AuthUserRevokeRoleRequest),
    /// Add a role.
    #[prost(message, tag = "6")]
    RoleAdd(AuthRoleAddRequest),
    /// Delete a role (and revoke it from every user).
    #[prost(message, tag = "7")]
    RoleDelete(AuthRoleDeleteRequest),
    /// Grant a key-range permission to a role.
    #[prost(message, tag = "8")]
    RoleGrantPermission(AuthRoleGrantPermissionRequest),
    /// Revoke a key-range permission from a role.
    #[prost(message, tag = "9")]
    RoleRevokePermission(AuthRoleRevokePermissionRequest),
    /// Enable authentication.
    #[prost(message, tag = "10")]
    AuthEnable(keel_proto::etcdserverpb::AuthEnableRequest),
}

/// The persisted auth store.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AuthStore {
    /// Users, sorted by name.
    #[prost(message, repeated, tag = "1")]
    pub users: Vec<User>,
    /// Roles, sorted by name.
    #[prost(message, repeated, tag = "2")]
    pub roles: Vec<Role>,
    /// Bumped by every change, as etcd's auth revision (1 for a new store).
    #[prost(uint64, tag = "3")]
    pub revision: u64,
}

/// etcd's default `--bcrypt-cost` (Go's `bcrypt.DefaultCost`).
pub const DEFAULT_BCRYPT_COST: u32 = 10;

/// The bcrypt costs etcd accepts (Go's `bcrypt.MinCost..=bcrypt.MaxCost`).
pub const BCRYPT_COSTS: RangeInclusive<u32> = 4..=31;

/// Hashes a password with bcrypt at `cost` and a random salt, in the `$2a$` form Go's bcrypt
/// (and so etcd) writes. The member that receives the request hashes before proposing, so the
/// log and the store carry the hash, never the password.
pub fn hash_password(password: &str, cost: u32) -> Result<String, EtcdError> {
    bcrypt::hash_with_result(password, cost)
        .map(|h| h.format_for_version(bcrypt::Version::TwoA))
        .map_err(|e| EtcdError::Internal(format!("bcrypt: {e}")))
}

impl AuthStore {
    /// An empty store.
    pub fn new() -> AuthStore {
        AuthStore {
            revision: 1,
            ..Default::default()
        }
    }

    fn user_pos(&self, name: &str) -> Result<usize, usize> {
        self.users
            .binary_search_by(|u| u.name.as_slice().cmp(name.as_bytes()))
    }

    fn role_pos(&self, name: &str) -> Result<usize, usize> {
        self.roles
            .binary_search_by(|r| r.name.as_slice().cmp(name.as_bytes()))
    }

    fn user_mut(&mut self, name: &str) -> Result<&mut User, EtcdError> {
        let pos = self.user_pos(name).map_err(|_| EtcdError::UserNotFound)?;
        Ok(&mut self.users[pos])
    }

    fn role_mut(&mut self, name: &str) -> Result<&mut Role, EtcdError> {
        let pos = self.role_pos(name).map_err(|_| EtcdError::RoleNotFound)?;
        Ok(&mut self.roles[pos])
    }

    /// The roles granted to `name`.
    pub fn user_roles(&self, name: &str) -> Result<Vec<String>, EtcdError> {
        let pos = self.user_pos(name).map_err(|_| EtcdError::UserNotFound)?;
        Ok(self.users[pos].roles.clone())
    }

    /// Every user name, sorted.
    pub fn user_names(&self) -> Vec<String> {
        self.users
            .iter()
            .map(|u| String::from_utf8_lossy(&u.name).into_owned())
            .collect()
    }

    /// The permissions of role `name`.
    pub fn role_permissions(&self, name: &str) -> Result<Vec<Permission>, EtcdError> {
        let pos = self.role_pos(name).map_err(|_| EtcdError::RoleNotFound)?;
        Ok(self.roles[pos].key_permission.clone())
    }

    /// Every role name, sorted.
    pub fn role_names(&self) -> Vec<String> {
        self.roles
            .iter()
            .map(|r| String::from_utf8_lossy(&r.name).into_owned())
            .collect()
    }

    /// Applies one change with etcd's checks; a failed change leaves the store as it was.
    pub fn apply(&mut self, op: &AuthOp) -> Result<(), EtcdError> {
        match op {
            AuthOp::UserAdd(r) => {
                if r.name.is_empty() {
                    return Err(EtcdError::UserEmpty);
                }
                let Err(pos) = self.user_pos(&r.name) else {
                    return Err(EtcdError::UserAlreadyExists);
                };
                let options = r.options.unwrap_or(UserAddOptions { no_password: false });
                let password = if options.no_password {
                    Vec::new()
                } else {
                    r.hashed_password.clone().into_bytes()
                };
                let user = User {
                    name: r.name.clone().into_bytes(),
                    password,
                    roles: vec![],
                    options: Some(options),
                };
                self.users.insert(pos, user);
            }
            AuthOp::UserDelete(r) => {
                let pos = self
                    .user_pos(&r.name)
                    .map_err(|_| EtcdError::UserNotFound)?;
                self.users.remove(pos);
            }
            AuthOp::UserChangePassword(r) => {
                self.user_mut(&r.name)?.password = r.hashed_password.clone().into_bytes();
            }
            AuthOp::UserGrantRole(r) => {
                if r.role != ROOT && self.role_pos(&r.role).is_err() {
                    self.user_mut(&r.user)?;
                    return Err(EtcdError::RoleNotFound);
                }
                let user = self.user_mut(&r.user)?;
                match user.roles.binary_search(&r.role) {
                    Ok(_) => return Ok(()),
                    Err(pos) => user.roles.insert(pos, r.role.clone()),
                }
            }
            AuthOp::UserRevokeRole(r) => {
                let user = self.user_mut(&r.name)?;
                let pos = user
                    .roles
                    .iter()
                    .position(|role| *role == r.role)
                    .ok_or(EtcdError::RoleNotGranted)?;
                user.roles.remove(pos);
            }
            AuthOp::RoleAdd(r) => {
                if r.name.is_empty() {
                    return Err(EtcdError::RoleEmpty);
                }
                let Err(pos) = self.role_pos(&r.name) else {
                    return Err(EtcdError::RoleAlreadyExists);
                };
                self.roles.insert(
                    pos,
                    Role {
                        name: r.name.clone().into_bytes(),
                        key_permission: vec![],
                    },
                );
            }
            AuthOp::RoleDelete(r) => {
                let pos = self
                    .role_pos(&r.role)
                    .map_err(|_| EtcdError::RoleNotFound)?;
                self.roles.remove(pos);
                for user in &mut self.users {
                    user.roles.retain(|role| *role != r.role);
                }
            }
            AuthOp::RoleGrantPermission(r) => {
                let perm = r.perm.as_ref().ok_or(EtcdError::PermissionNotGiven)?;
                if !valid_permission_range(&perm.key, &perm.range_end) {
                    return Err(EtcdError::InvalidAuthManagement);
                }
                let role = self.role_mut(&r.name)?;
                let existing = role
                    .key_permission
                    .iter_mut()
                    .find(|p| p.key == perm.key && p.range_end == perm.range_end);
                match existing {
                    Some(p) => p.perm_type = perm.perm_type,
                    None => {
                        role.key_permission.push(perm.clone());
                        role.key_permission.sort_by(|a, b| a.key.cmp(&b.key));
                    }
                }
            }
            AuthOp::RoleRevokePermission(r) => {
                let role = self.role_mut(&r.role)?;
                let before = role.key_permission.len();
                role.key_permission
                    .retain(|p| p.key != r.key || p.range_end != r.range_end);
                if role.key_permission.len() == before {
                    return Err(EtcdError::PermissionNotGranted);
                }
            }
            AuthOp::AuthEnable(_) => {
                let pos = self
                    .user_pos(ROOT)
                    .map_err(|_| EtcdError::RootUserNotExist)?;
                if !self.users[pos].roles.iter().any(|r| r == ROOT) {
                    return Err(EtcdError::RootRoleNotExist);
                }
                return Err(EtcdError::Unimplemented(
                    "keel store cannot enforce authentication yet; it stays disabled".into(),
                ));
            }
        }
        self.revision += 1;
        Ok(())
    }
}

/// etcd's rule for a permission's key range: a key, and an end that is empty, after the key,
/// or `\0` (everything from the key on).
fn valid_permission_range(key: &[u8], range_end: &[u8]) -> bool {
    !key.is_empty() && (range_end.is_empty() || key < range_end || range_end == [0])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user_add(name: &str) -> AuthOp {
        AuthOp::UserAdd(AuthUserAddRequest {
            name: name.into(),
            hashed_password: hash_password("pw", *BCRYPT_COSTS.start()).unwrap(),
            ..Default::default()
        })
    }

    #[test]
    fn users_and_roles_as_etcd() {
        let mut s = AuthStore::new();
        s.apply(&user_add("bob")).unwrap();
        assert_eq!(s.apply(&user_add("bob")), Err(EtcdError::UserAlreadyExists));
        assert_eq!(s.apply(&user_add("")), Err(EtcdError::UserEmpty));
        let grant = |role: &str| {
            AuthOp::UserGrantRole(AuthUserGrantRoleRequest {
                user: "bob".into(),
                role: role.into(),
            })
        };
        assert_eq!(s.apply(&grant("dev")), Err(EtcdError::RoleNotFound));
        s.apply(&AuthOp::RoleAdd(AuthRoleAddRequest { name: "dev".into() }))
            .unwrap();
        s.apply(&grant("dev")).unwrap();
        s.apply(&grant("dev")).unwrap();
        s.apply(&grant("root")).unwrap();
        assert_eq!(s.user_roles("bob").unwrap(), vec!["dev", "root"]);
        let perm = |key: &str, end: &str| {
            AuthOp::RoleGrantPermission(AuthRoleGrantPermissionRequest {
                name: "dev".into(),
                perm: Some(Permission {
                    perm_type: 0,
                    key: key.into(),
                    range_end: end.into(),
                }),
            })
        };
        s.apply(&perm("b", "c")).unwrap();
        s.apply(&perm("a", "\0")).unwrap();
        assert_eq!(
            s.apply(&perm("c", "b")),
            Err(EtcdError::InvalidAuthManagement)
        );
        assert_eq!(
            s.role_permissions("dev")
                .unwrap()
                .iter()
                .map(|p| p.key.clone())
                .collect::<Vec<_>>(),
            vec![b"a".to_vec(), b"b".to_vec()]
        );
        s.apply(&AuthOp::RoleDelete(AuthRoleDeleteRequest {
            role: "dev".into(),
        }))
        .unwrap();
        assert_eq!(s.user_roles("bob").unwrap(), vec!["root"]);
        let revoke = AuthOp::UserRevokeRole(AuthUserRevokeRoleRequest {
            name: "bob".into(),
            role: "dev".into(),
        });
        assert_eq!(s.apply(&revoke), Err(EtcdError::RoleNotGranted));
        assert_eq!(s.revision, 8);
    }

    #[test]
    fn passwords_are_stored_as_salted_bcrypt_hashes() {
        let cost = *BCRYPT_COSTS.start();
        let a = hash_password("pw", cost).unwrap();
        let b = hash_password("pw", cost).unwrap();
        assert!(a.starts_with("$2a$04$"), "{a}");
        assert_ne!(a, b, "each hash has its own salt");
        assert!(bcrypt::verify("pw", &a).unwrap());
        assert!(!bcrypt::verify("other", &a).unwrap());
        let mut s = AuthStore::new();
        s.apply(&user_add("bob")).unwrap();
        let stored = String::from_utf8(s.users[0].password.clone()).unwrap();
        assert!(bcrypt::verify("pw", &stored).unwrap());
    }

    #[test]
    fn enabling_needs_a_root_user_with_the_root_role() {
        let mut s = AuthStore::new();
        let enable = AuthOp::AuthEnable(Default::default());
        assert_eq!(s.apply(&enable), Err(EtcdError::RootUserNotExist));
        s.apply(&user_add("root")).unwrap();
        assert_eq!(s.apply(&enable), Err(EtcdError::RootRoleNotExist));
    }
}
