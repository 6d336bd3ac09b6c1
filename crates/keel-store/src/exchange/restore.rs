//! A new keel store data directory from an etcd snapshot file, as `etcdutl snapshot restore`
//! makes an etcd one.
//!
//! The options are etcdutl 3.5's, checked as it checks them (the member named in the
//! initial cluster with its advertised peer URLs), plus etcd 3.6's revision bump. The
//! directory holds the backend alone (`member/snap/db`, see `crate::data_dir`) and an empty
//! `member/wal`: no log, no identity. `keel store --data-dir <dir> --name <name>
//! --initial-cluster ... --initial-advertise-peer-urls ...` then bootstraps a new cluster on
//! it as on an empty directory (its identity from those flags; [`Restored`] tells the ids a
//! start with the restore's options gets) and serves the restored keys; each member of a
//! new cluster is restored from the same file with its own name and URLs.
//!
//! # Nothing or everything
//!
//! A target that exists and is not an empty directory is refused, and the target is not
//! touched until the end: the directory is built in a scratch folder beside it, its files
//! and folders fsynced, then renamed over the target (see [`keel_wal::staging`]). Any
//! error removes the scratch folder; a power cut leaves the target absent (or empty) or
//! complete.

use std::path::{Path, PathBuf};

use keel_wal::staging::Staging;

use super::error::RestoreError;
use super::import::import;
use super::source::{Source, check_bump};
use crate::config::{check_initial_member, parse_initial_cluster, split};
use crate::data_dir::DataDir;
use crate::identity::Identity;

/// What to restore into, as `etcdutl snapshot restore`'s flags (defaults as etcd's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreOptions {
    /// The data directory to create (`--data-dir`); `<name>.etcd` when `None`.
    pub data_dir: Option<PathBuf>,
    /// The member's name (`--name`, default `default`).
    pub name: String,
    /// The initial cluster (`--initial-cluster`, default `default=http://localhost:2380`).
    pub initial_cluster: String,
    /// The cluster token (`--initial-cluster-token`, default `etcd-cluster`).
    pub initial_cluster_token: String,
    /// The member's peer URLs (`--initial-advertise-peer-urls`, default
    /// `http://localhost:2380`).
    pub initial_advertise_peer_urls: String,
    /// Accept a file without a trailing sha256, and do not check one that has it
    /// (`--skip-hash-check`).
    pub skip_hash_check: bool,
    /// How far past the snapshot's latest revision the store's revision starts
    /// (`--bump-revision`, etcd 3.6; needs `mark_compacted`).
    pub bump_revision: u64,
    /// Mark every revision up to the bumped one compacted (`--mark-compacted`, etcd 3.6;
    /// needs `bump_revision > 0`).
    pub mark_compacted: bool,
}

impl Default for RestoreOptions {
    fn default() -> Self {
        RestoreOptions {
            data_dir: None,
            name: "default".into(),
            initial_cluster: "default=http://localhost:2380".into(),
            initial_cluster_token: "etcd-cluster".into(),
            initial_advertise_peer_urls: "http://localhost:2380".into(),
            skip_hash_check: false,
            bump_revision: 0,
            mark_compacted: false,
        }
    }
}

/// What [`restore`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// The new data directory.
    pub data_dir: PathBuf,
    /// The store's revision.
    pub revision: i64,
    /// The store's compaction revision (-1 when none).
    pub compact_revision: i64,
    /// Revisions of keys restored (rows of the backend's `key` table).
    pub revisions: u64,
    /// Leases restored.
    pub leases: u64,
    /// The member id a start with the options' name, cluster and URLs bootstraps with.
    pub member_id: u64,
    /// The cluster id of that start.
    pub cluster_id: u64,
}

/// Creates a keel store data directory from the etcd snapshot file `snapshot` (see the
/// module docs); on any error nothing is left behind and an existing target is untouched.
pub fn restore(snapshot: &Path, opts: &RestoreOptions) -> Result<Restored, RestoreError> {
    check_bump(opts.bump_revision, opts.mark_compacted)?;
    let members = parse_initial_cluster(&opts.initial_cluster)?;
    check_initial_member(&opts.name, &members, &opts.initial_advertise_peer_urls)?;
    let advertised: Vec<String> = split(&opts.initial_advertise_peer_urls)
        .map(str::to_string)
        .collect();
    let identity = Identity::of_new_cluster(&members, &advertised, &opts.initial_cluster_token);
    let target = opts
        .data_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.etcd", opts.name)));
    keel_wal::staging::check(&target)?;
    let source = Source::open(snapshot, opts.skip_hash_check)?;
    let staging = Staging::begin(&target, "restoring")?;
    let data = DataDir::create(staging.path()).map_err(RestoreError::io(staging.path()))?;
    let imported = import(&source, &data.backend(), opts.bump_revision)?;
    data.sync().map_err(RestoreError::io(staging.path()))?;
    staging.commit()?;
    Ok(Restored {
        data_dir: target,
        revision: imported.revisions.current,
        compact_revision: imported.revisions.compact,
        revisions: imported.rows,
        leases: imported.leases,
        member_id: identity.member_id,
        cluster_id: identity.cluster_id,
    })
}
