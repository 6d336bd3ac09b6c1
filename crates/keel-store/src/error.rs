//! Every error the store returns to clients, with etcd's exact gRPC code and message.
//!
//! etcd's Go client maps errors back to typed values by their message text, and
//! kube-apiserver compares those values, so the strings here are part of the wire contract
//! (etcd: `api/v3rpc/rpctypes/error.go`). This module is their one owner.

use keel_mvcc::MvccError;
use tonic::{Code, Status};

/// An error with an etcd wire representation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EtcdError {
    /// A read or compaction below the compacted revision.
    #[error("etcdserver: mvcc: required revision has been compacted")]
    Compacted,
    /// A read or compaction above the current revision.
    #[error("etcdserver: mvcc: required revision is a future revision")]
    FutureRevision,
    /// A request without a key.
    #[error("etcdserver: key is not provided")]
    EmptyKey,
    /// `ignore_value` / `ignore_lease` on a key that does not exist.
    #[error("etcdserver: key not found")]
    KeyNotFound,
    /// A value given together with `ignore_value`.
    #[error("etcdserver: value is provided")]
    ValueProvided,
    /// A lease given together with `ignore_lease`.
    #[error("etcdserver: lease is provided")]
    LeaseProvided,
    /// More operations in a txn than `--max-txn-ops`.
    #[error("etcdserver: too many operations in txn request")]
    TooManyOps,
    /// Overlapping writes in one txn.
    #[error("etcdserver: duplicate key given in txn request")]
    DuplicateKey,
    /// A sort order or target outside the enum.
    #[error("etcdserver: invalid sort option")]
    InvalidSortOption,
    /// A request larger than `--max-request-bytes`.
    #[error("etcdserver: request is too large")]
    RequestTooLarge,
    /// The member's applied index trails its commit index by more than
    /// [`crate::server::MAX_APPLY_GAP`] entries (etcd's `maxGapBetweenApplyAndCommitIndex`).
    #[error("etcdserver: too many requests")]
    TooManyRequests,
    /// A lease that does not exist.
    #[error("etcdserver: requested lease not found")]
    LeaseNotFound,
    /// A lease grant with an ID in use.
    #[error("etcdserver: lease already exists")]
    LeaseExists,
    /// A lease grant with a TTL above etcd's maximum (9,000,000,000 s).
    #[error("etcdserver: too large lease TTL")]
    LeaseTtlTooLarge,
    /// A write while the NOSPACE alarm is raised or would be by this write.
    #[error("etcdserver: mvcc: database space exceeded")]
    NoSpace,
    /// The member knows no leader.
    #[error("etcdserver: no leader")]
    NoLeader,
    /// A member id that is not in the cluster.
    #[error("etcdserver: member not found")]
    MemberNotFound,
    /// A leader transfer to a member that cannot lead.
    #[error("etcdserver: bad leader transferee")]
    BadLeaderTransferee,
    /// etcd's ErrNotLeader: the request must go to the leader (MoveLeader).
    #[error("etcdserver: not leader")]
    NotLeader,
    /// etcd's ErrTimeoutLeaderTransfer.
    #[error("etcdserver: request timed out, leader transfer took too long")]
    LeaderTransferTimeout,
    /// An auth request while auth is disabled.
    #[error("etcdserver: authentication is not enabled")]
    AuthNotEnabled,
    /// A user that does not exist.
    #[error("etcdserver: user name not found")]
    UserNotFound,
    /// A role that does not exist.
    #[error("etcdserver: role name not found")]
    RoleNotFound,
    /// A user without a name.
    #[error("etcdserver: user name is empty")]
    UserEmpty,
    /// A user that exists already.
    #[error("etcdserver: user name already exists")]
    UserAlreadyExists,
    /// A role without a name.
    #[error("etcdserver: role name is empty")]
    RoleEmpty,
    /// A role that exists already.
    #[error("etcdserver: role name already exists")]
    RoleAlreadyExists,
    /// Revoking a role the user does not have.
    #[error("etcdserver: role is not granted to the user")]
    RoleNotGranted,
    /// Revoking a permission the role does not have.
    #[error("etcdserver: permission is not granted to the role")]
    PermissionNotGranted,
    /// A permission grant without a permission.
    #[error("etcdserver: permission not given")]
    PermissionNotGiven,
    /// An auth change etcd refuses (e.g. an empty or inverted permission range).
    #[error("etcdserver: invalid auth management")]
    InvalidAuthManagement,
    /// `AuthEnable` with a root user that lacks the root role.
    #[error("etcdserver: root user does not have root role")]
    RootRoleNotExist,
    /// `AuthEnable` without a root user.
    #[error("etcdserver: root user does not exist")]
    RootUserNotExist,
    /// A member change that would leave too few started members.
    #[error("etcdserver: re-configuration failed due to not enough started members")]
    NotEnoughStartedMembers,
    /// A promote request for a member that is not a learner.
    #[error("etcdserver: can only promote a learner member")]
    MemberNotLearner,
    /// A MemberAdd whose member id is taken.
    #[error("etcdserver: member ID already exist")]
    MemberIdExists,
    /// A MemberAdd or MemberUpdate with peer URLs another member has.
    #[error("etcdserver: Peer URLs already exists")]
    PeerUrlExists,
    /// A MemberAdd or MemberUpdate with peer URLs that are not URLs.
    #[error("etcdserver: given member URLs are invalid")]
    MemberBadUrls,
    /// A learner added while the cluster has `--max-learners` already.
    #[error("etcdserver: too many learner members in cluster")]
    TooManyLearners,
    /// A promote request for a learner far behind the leader.
    #[error("etcdserver: can only promote a learner member which is in sync with leader")]
    LearnerNotReady,
    /// A request a learner does not serve.
    #[error("etcdserver: rpc not supported for learner")]
    NotSupportedForLearner,
    /// A member change the connected members could not survive.
    #[error("etcdserver: unhealthy cluster")]
    Unhealthy,
    /// A request that did not complete in time (e.g. the leader did not answer).
    #[error("etcdserver: request timed out")]
    Timeout,
    /// A write that did not complete in time while the leader it went to lost its place.
    #[error("etcdserver: request timed out, possibly due to previous leader failure")]
    TimeoutDueToLeaderFail,
    /// The member is shutting down.
    #[error("etcdserver: server stopped")]
    Stopped,
    /// A request this store does not serve; the message says which and why.
    #[error("{0}")]
    Unimplemented(String),
    /// An internal failure (storage, consensus); the message says what failed.
    #[error("etcdserver: {0}")]
    Internal(String),
    /// The error the leader answered a forwarded request with, passed on unchanged.
    #[error("{message}")]
    FromLeader {
        /// The leader's status code.
        code: Code,
        /// The leader's message.
        message: String,
    },
}

impl EtcdError {
    /// The gRPC status code etcd uses for this error.
    pub fn code(&self) -> Code {
        use EtcdError::*;
        match self {
            Compacted | FutureRevision | LeaseTtlTooLarge => Code::OutOfRange,
            EmptyKey
            | KeyNotFound
            | ValueProvided
            | LeaseProvided
            | TooManyOps
            | DuplicateKey
            | InvalidSortOption
            | RequestTooLarge
            | UserEmpty
            | RoleEmpty
            | PermissionNotGiven
            | InvalidAuthManagement
            | MemberBadUrls => Code::InvalidArgument,
            LeaseNotFound | MemberNotFound => Code::NotFound,
            NoSpace | TooManyRequests => Code::ResourceExhausted,
            NoLeader
            | Stopped
            | Timeout
            | TimeoutDueToLeaderFail
            | LeaderTransferTimeout
            | Unhealthy
            | NotSupportedForLearner => Code::Unavailable,
            LeaseExists
            | BadLeaderTransferee
            | NotLeader
            | NotEnoughStartedMembers
            | MemberNotLearner
            | MemberIdExists
            | PeerUrlExists
            | TooManyLearners
            | LearnerNotReady
            | AuthNotEnabled
            | UserNotFound
            | RoleNotFound
            | RootUserNotExist
            | RootRoleNotExist
            | UserAlreadyExists
            | RoleAlreadyExists
            | RoleNotGranted
            | PermissionNotGranted => Code::FailedPrecondition,
            Unimplemented(_) => Code::Unimplemented,
            Internal(_) => Code::Unknown,
            FromLeader { code, .. } => *code,
        }
    }
}

impl From<EtcdError> for Status {
    fn from(e: EtcdError) -> Status {
        Status::new(e.code(), e.to_string())
    }
}

impl From<MvccError> for EtcdError {
    fn from(e: MvccError) -> EtcdError {
        match e {
            MvccError::Compacted => EtcdError::Compacted,
            MvccError::FutureRevision => EtcdError::FutureRevision,
            MvccError::KeyNotFound => EtcdError::KeyNotFound,
            MvccError::LeaseNotFound(_) => EtcdError::LeaseNotFound,
            other => EtcdError::Internal(other.to_string()),
        }
    }
}

/// The go-grpc-prometheus name of a status code, for `grpc_server_handled_total`.
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "Canceled",
        Code::Unknown => "Unknown",
        Code::InvalidArgument => "InvalidArgument",
        Code::DeadlineExceeded => "DeadlineExceeded",
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::PermissionDenied => "PermissionDenied",
        Code::ResourceExhausted => "ResourceExhausted",
        Code::FailedPrecondition => "FailedPrecondition",
        Code::Aborted => "Aborted",
        Code::OutOfRange => "OutOfRange",
        Code::Unimplemented => "Unimplemented",
        Code::Internal => "Internal",
        Code::Unavailable => "Unavailable",
        Code::DataLoss => "DataLoss",
        Code::Unauthenticated => "Unauthenticated",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_form_matches_etcd() {
        let status = Status::from(EtcdError::Compacted);
        assert_eq!(status.code(), Code::OutOfRange);
        assert_eq!(
            status.message(),
            "etcdserver: mvcc: required revision has been compacted"
        );
        let status = Status::from(EtcdError::NoSpace);
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert_eq!(
            status.message(),
            "etcdserver: mvcc: database space exceeded"
        );
        assert_eq!(
            Status::from(EtcdError::EmptyKey).message(),
            "etcdserver: key is not provided"
        );
        let status = Status::from(EtcdError::LeaseExists);
        assert_eq!(status.code(), Code::FailedPrecondition);
        assert_eq!(status.message(), "etcdserver: lease already exists");
        let status = Status::from(EtcdError::LeaseTtlTooLarge);
        assert_eq!(status.code(), Code::OutOfRange);
        assert_eq!(status.message(), "etcdserver: too large lease TTL");
        let status = Status::from(EtcdError::LeaseNotFound);
        assert_eq!(status.code(), Code::NotFound);
        assert_eq!(status.message(), "etcdserver: requested lease not found");
        let status = Status::from(EtcdError::TooManyRequests);
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert_eq!(status.message(), "etcdserver: too many requests");
    }
}
