//! The two layers of the namespace and the operations on them, without FUSE.
//!
//! Every inode is a [`Node`] in memory. A directory holds two entry maps: `entries`, what a
//! program sees now, and `durable`, what survives a power cut; an fsync of the directory
//! makes the first the second. Every inode also has a backing object on disk that holds its
//! durable content (a file's fsynced bytes, a directory's durable entries): at its durable
//! place in the backing tree if some durable entry names it, else in the staging folder
//! `<backing>/.lazyfs-staging/<ino>`, which a mount empties first. So the backing tree minus
//! the staging folder is, at every moment, exactly the durable state.
//!
//! When an fsync of directory `d` makes an entry durable, the inode's backing object moves
//! from the staging folder to `d`'s backing folder; when it drops a durable entry, the object
//! moves to the staging folder (and is deleted once nothing can reach the inode any more). A
//! rename into `d` of an inode durable elsewhere moves its object from the old place: the
//! rename is durable as a whole once its destination directory is fsynced, as one journal
//! transaction on ext4. Fsyncing only its source directory makes just the removal durable,
//! so the inode survives a cut in neither place (stricter than ext4).

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use nix::errno::Errno;
use nix::libc;

use crate::pending::Pending;

/// The inode number of the root directory.
pub(crate) const ROOT: u64 = 1;
/// The folder in the backing root that holds the backing objects of inodes without a
/// durable entry; hidden from the mounted view.
pub(crate) const STAGING: &str = ".lazyfs-staging";

/// An operation's outcome: an errno for the caller of the system call.
pub(crate) type Result<T> = std::result::Result<T, Errno>;

/// What an inode is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
}

/// What `stat` shows of an inode.
#[derive(Clone, Debug)]
pub(crate) struct Attr {
    pub(crate) ino: u64,
    pub(crate) kind: Kind,
    pub(crate) size: u64,
    pub(crate) nlink: u32,
    pub(crate) meta: Meta,
}

/// Owner, permissions and times: kept in memory only, never part of the durability model.
#[derive(Clone, Debug)]
pub(crate) struct Meta {
    pub(crate) perm: u16,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) atime: SystemTime,
    pub(crate) mtime: SystemTime,
    pub(crate) ctime: SystemTime,
}

impl Meta {
    /// Fresh metadata for a new inode.
    pub(crate) fn new(perm: u16, uid: u32, gid: u32) -> Meta {
        let now = SystemTime::now();
        Meta {
            perm,
            uid,
            gid,
            atime: now,
            mtime: now,
            ctime: now,
        }
    }

    fn from_disk(md: &fs::Metadata) -> Meta {
        Meta {
            perm: (md.mode() & 0o7777) as u16,
            uid: md.uid(),
            gid: md.gid(),
            atime: md.accessed().unwrap_or(SystemTime::UNIX_EPOCH),
            mtime: md.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            ctime: md.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        }
    }
}

/// Changes asked for by `setattr`.
#[derive(Clone, Debug, Default)]
pub(crate) struct SetAttr {
    pub(crate) perm: Option<u16>,
    pub(crate) uid: Option<u32>,
    pub(crate) gid: Option<u32>,
    pub(crate) size: Option<u64>,
    pub(crate) atime: Option<SystemTime>,
    pub(crate) mtime: Option<SystemTime>,
}

/// An entry naming an inode: the directory and the name in it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Link {
    parent: u64,
    name: OsString,
}

#[derive(Debug)]
struct Node {
    meta: Meta,
    /// The entry that names this inode now (no hard links: at most one).
    link: Option<Link>,
    /// The entry that names it in the durable state.
    durable: Option<Link>,
    /// Open file handles.
    open: u32,
    /// References the kernel holds (lookups not yet forgotten).
    lookups: u64,
    /// Its backing object is deleted: nothing can reach it any more.
    gone: bool,
    body: Body,
}

#[derive(Debug)]
enum Body {
    File {
        /// The backing object, open for reading and writing (it follows renames).
        data: Option<File>,
        /// Length of the backing object.
        durable_len: u64,
        /// Visible size.
        size: u64,
        pending: Pending,
    },
    Dir {
        entries: BTreeMap<OsString, u64>,
        durable: BTreeMap<OsString, u64>,
    },
}

/// The filesystem state: every inode, both layers, and whether the power is on.
#[derive(Debug)]
pub(crate) struct Tree {
    root: PathBuf,
    staging: PathBuf,
    nodes: HashMap<u64, Node>,
    next_ino: u64,
    powered: bool,
}

/// An `io::Error` as the errno to report.
fn errno(e: io::Error) -> Errno {
    e.raw_os_error().map_or(Errno::EIO, Errno::from_raw)
}

impl Tree {
    /// The durable state in `backing` as both layers (the staging folder is emptied first).
    pub(crate) fn load(backing: &Path) -> io::Result<Tree> {
        let root = backing.to_path_buf();
        let staging = root.join(STAGING);
        if staging.exists() {
            fs::remove_dir_all(&staging)?;
        }
        fs::create_dir(&staging)?;
        let mut tree = Tree {
            root: root.clone(),
            staging,
            nodes: HashMap::new(),
            next_ino: ROOT + 1,
            powered: true,
        };
        let md = fs::metadata(&root)?;
        tree.nodes
            .insert(ROOT, Tree::dir_node(Meta::from_disk(&md), None));
        tree.load_dir(ROOT, &root)?;
        Ok(tree)
    }

    fn dir_node(meta: Meta, link: Option<Link>) -> Node {
        Node {
            meta,
            link: link.clone(),
            durable: link,
            open: 0,
            lookups: 0,
            gone: false,
            body: Body::Dir {
                entries: BTreeMap::new(),
                durable: BTreeMap::new(),
            },
        }
    }

    fn load_dir(&mut self, dir: u64, path: &Path) -> io::Result<()> {
        for dent in fs::read_dir(path)? {
            let dent = dent?;
            let name = dent.file_name();
            if dir == ROOT && name == STAGING {
                continue;
            }
            let md = fs::symlink_metadata(dent.path())?;
            let ino = self.next_ino;
            self.next_ino += 1;
            let link = Some(Link {
                parent: dir,
                name: name.clone(),
            });
            if md.is_dir() {
                self.nodes
                    .insert(ino, Tree::dir_node(Meta::from_disk(&md), link));
                self.load_dir(ino, &dent.path())?;
            } else if md.is_file() {
                let data = File::options().read(true).write(true).open(dent.path())?;
                self.nodes.insert(
                    ino,
                    Node {
                        meta: Meta::from_disk(&md),
                        link: link.clone(),
                        durable: link,
                        open: 0,
                        lookups: 0,
                        gone: false,
                        body: Body::File {
                            data: Some(data),
                            durable_len: md.len(),
                            size: md.len(),
                            pending: Pending::default(),
                        },
                    },
                );
            } else {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("{}: only files and directories", dent.path().display()),
                ));
            }
            let Body::Dir { entries, durable } = &mut self.node_mut(dir).body else {
                unreachable!("loading a directory");
            };
            entries.insert(name.clone(), ino);
            durable.insert(name, ino);
        }
        Ok(())
    }

    /// Cuts the power: every later operation fails with EIO and the volatile layer is gone.
    pub(crate) fn cut(&mut self) {
        self.powered = false;
        for node in self.nodes.values_mut() {
            if let Body::File { pending, .. } = &mut node.body {
                *pending = Pending::default();
            }
        }
    }

    /// The staging folder.
    pub(crate) fn staging(&self) -> &Path {
        &self.staging
    }

    /// The backing root.
    pub(crate) fn backing(&self) -> &Path {
        &self.root
    }

    /// Bytes written and not yet fsynced, over all files.
    pub(crate) fn pending_bytes(&self) -> usize {
        self.nodes
            .values()
            .map(|n| match &n.body {
                Body::File { pending, .. } => pending.bytes(),
                Body::Dir { .. } => 0,
            })
            .sum()
    }

    fn live(&self) -> Result<()> {
        if self.powered {
            Ok(())
        } else {
            Err(Errno::EIO)
        }
    }

    fn node(&self, ino: u64) -> Result<&Node> {
        self.nodes.get(&ino).ok_or(Errno::ENOENT)
    }

    fn node_mut(&mut self, ino: u64) -> &mut Node {
        self.nodes.get_mut(&ino).expect("a known inode")
    }

    /// The current entries of directory `ino`, which must still be linked.
    fn dir_entries(&self, ino: u64) -> Result<&BTreeMap<OsString, u64>> {
        let node = self.node(ino)?;
        match &node.body {
            Body::Dir { entries, .. } if ino == ROOT || node.link.is_some() => Ok(entries),
            Body::Dir { .. } => Err(Errno::ENOENT),
            Body::File { .. } => Err(Errno::ENOTDIR),
        }
    }

    fn entries_mut(&mut self, ino: u64) -> &mut BTreeMap<OsString, u64> {
        match &mut self.node_mut(ino).body {
            Body::Dir { entries, .. } => entries,
            Body::File { .. } => unreachable!("checked to be a directory"),
        }
    }

    fn durable_mut(&mut self, ino: u64) -> &mut BTreeMap<OsString, u64> {
        match &mut self.node_mut(ino).body {
            Body::Dir { durable, .. } => durable,
            Body::File { .. } => unreachable!("only directories hold durable entries"),
        }
    }

    fn child(&self, parent: u64, name: &OsStr) -> Result<u64> {
        if parent == ROOT && name == STAGING {
            return Err(Errno::ENOENT);
        }
        self.dir_entries(parent)?
            .get(name)
            .copied()
            .ok_or(Errno::ENOENT)
    }

    /// Checks that `name` may be created in `parent`.
    fn free_name(&self, parent: u64, name: &OsStr) -> Result<()> {
        if parent == ROOT && name == STAGING {
            return Err(Errno::EPERM);
        }
        if self.dir_entries(parent)?.contains_key(name) {
            return Err(Errno::EEXIST);
        }
        Ok(())
    }

    /// Where the backing object of `ino` is now.
    fn path(&self, ino: u64) -> PathBuf {
        if ino == ROOT {
            return self.root.clone();
        }
        match &self.nodes[&ino].durable {
            Some(l) => self.path(l.parent).join(&l.name),
            None => self.staging.join(ino.to_string()),
        }
    }

    /// What `stat` shows of `ino`.
    pub(crate) fn attr(&self, ino: u64) -> Result<Attr> {
        self.live()?;
        let node = self.node(ino)?;
        let (kind, size, nlink) = match &node.body {
            Body::File { size, .. } => (Kind::File, *size, u32::from(node.link.is_some())),
            Body::Dir { entries, .. } => {
                let subdirs = entries
                    .values()
                    .filter(|c| matches!(self.nodes[c].body, Body::Dir { .. }))
                    .count();
                (Kind::Dir, 4096, 2 + subdirs as u32)
            }
        };
        Ok(Attr {
            ino,
            kind,
            size,
            nlink,
            meta: node.meta.clone(),
        })
    }

    /// Looks `name` up in `parent`; the kernel now holds a reference to it.
    pub(crate) fn lookup(&mut self, parent: u64, name: &OsStr) -> Result<Attr> {
        self.live()?;
        let ino = self.child(parent, name)?;
        self.node_mut(ino).lookups += 1;
        self.attr(ino)
    }

    /// The kernel dropped `n` references to `ino`.
    pub(crate) fn forget(&mut self, ino: u64, n: u64) {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.lookups = node.lookups.saturating_sub(n);
            if node.lookups == 0 && node.gone {
                self.nodes.remove(&ino);
            }
        }
    }

    /// Applies `set` to `ino`; a size change is a pending truncate or extension.
    pub(crate) fn setattr(&mut self, ino: u64, set: SetAttr) -> Result<Attr> {
        self.live()?;
        let node = self.nodes.get_mut(&ino).ok_or(Errno::ENOENT)?;
        if let Some(new) = set.size {
            let Body::File {
                size,
                durable_len,
                pending,
                ..
            } = &mut node.body
            else {
                return Err(Errno::EISDIR);
            };
            if new < *size {
                pending.truncate(new, *durable_len);
            }
            *size = new;
            node.meta.mtime = SystemTime::now();
        }
        let meta = &mut node.meta;
        meta.perm = set.perm.unwrap_or(meta.perm);
        meta.uid = set.uid.unwrap_or(meta.uid);
        meta.gid = set.gid.unwrap_or(meta.gid);
        meta.atime = set.atime.unwrap_or(meta.atime);
        meta.mtime = set.mtime.unwrap_or(meta.mtime);
        meta.ctime = SystemTime::now();
        self.attr(ino)
    }

    fn new_node(&mut self, parent: u64, name: &OsStr, meta: Meta, body: Body) -> u64 {
        let ino = self.next_ino;
        self.next_ino += 1;
        self.nodes.insert(
            ino,
            Node {
                meta,
                link: Some(Link {
                    parent,
                    name: name.to_os_string(),
                }),
                durable: None,
                open: 0,
                lookups: 1,
                gone: false,
                body,
            },
        );
        self.entries_mut(parent).insert(name.to_os_string(), ino);
        self.node_mut(parent).meta.mtime = SystemTime::now();
        ino
    }

    /// Creates and opens file `name` in `parent`: only the volatile layer names it.
    pub(crate) fn create(&mut self, parent: u64, name: &OsStr, meta: Meta) -> Result<Attr> {
        self.live()?;
        self.free_name(parent, name)?;
        let path = self.staging.join(self.next_ino.to_string());
        let data = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(errno)?;
        data.set_permissions(fs::Permissions::from_mode(meta.perm.into()))
            .map_err(errno)?;
        let body = Body::File {
            data: Some(data),
            durable_len: 0,
            size: 0,
            pending: Pending::default(),
        };
        let ino = self.new_node(parent, name, meta, body);
        self.node_mut(ino).open = 1;
        self.attr(ino)
    }

    /// Creates directory `name` in `parent`: only the volatile layer names it.
    pub(crate) fn mkdir(&mut self, parent: u64, name: &OsStr, meta: Meta) -> Result<Attr> {
        self.live()?;
        self.free_name(parent, name)?;
        let path = self.staging.join(self.next_ino.to_string());
        fs::create_dir(&path).map_err(errno)?;
        fs::set_permissions(&path, fs::Permissions::from_mode(meta.perm.into())).map_err(errno)?;
        let body = Body::Dir {
            entries: BTreeMap::new(),
            durable: BTreeMap::new(),
        };
        let ino = self.new_node(parent, name, meta, body);
        self.attr(ino)
    }

    /// Opens `ino` (a file or a directory).
    pub(crate) fn open(&mut self, ino: u64) -> Result<()> {
        self.live()?;
        let node = self.nodes.get_mut(&ino).ok_or(Errno::ENOENT)?;
        if node.gone {
            return Err(Errno::ENOENT);
        }
        node.open += 1;
        Ok(())
    }

    /// Closes a handle of `ino`. Works without power, so handles never leak.
    pub(crate) fn release(&mut self, ino: u64) -> Result<()> {
        if let Some(node) = self.nodes.get_mut(&ino) {
            node.open = node.open.saturating_sub(1);
            self.reap_if_dead(ino)?;
        }
        Ok(())
    }

    /// Up to `len` visible bytes of file `ino` from `offset`.
    pub(crate) fn read(&self, ino: u64, offset: u64, len: u32) -> Result<Vec<u8>> {
        self.live()?;
        let Body::File {
            data: Some(data),
            durable_len,
            size,
            pending,
        } = &self.node(ino)?.body
        else {
            return Err(Errno::EISDIR);
        };
        let n = size.saturating_sub(offset).min(len.into()) as usize;
        let mut buf = vec![0; n];
        pending
            .read(data, *durable_len, offset, &mut buf)
            .map_err(errno)?;
        Ok(buf)
    }

    /// Writes `bytes` at `offset` of file `ino`, in the volatile layer.
    pub(crate) fn write(&mut self, ino: u64, offset: u64, bytes: &[u8]) -> Result<u32> {
        self.live()?;
        let node = self.nodes.get_mut(&ino).ok_or(Errno::ENOENT)?;
        let Body::File { size, pending, .. } = &mut node.body else {
            return Err(Errno::EISDIR);
        };
        pending.write(offset, bytes);
        *size = (*size).max(offset + bytes.len() as u64);
        node.meta.mtime = SystemTime::now();
        Ok(bytes.len() as u32)
    }

    /// `fallocate(2)` on file `ino`: grows the size, or zeroes a range, in the volatile layer.
    pub(crate) fn fallocate(&mut self, ino: u64, offset: u64, len: u64, mode: i32) -> Result<()> {
        self.live()?;
        let Body::File { size, .. } = &self.node(ino)?.body else {
            return Err(Errno::EISDIR);
        };
        let keep_size = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
        let end = if keep_size {
            (offset + len).min(*size)
        } else {
            offset + len
        };
        match mode & !libc::FALLOC_FL_KEEP_SIZE {
            0 => {}
            libc::FALLOC_FL_PUNCH_HOLE if keep_size => {}
            libc::FALLOC_FL_ZERO_RANGE => {}
            _ => return Err(Errno::EOPNOTSUPP),
        }
        if mode & !libc::FALLOC_FL_KEEP_SIZE != 0 && end > offset {
            self.write(ino, offset, &vec![0; (end - offset) as usize])?;
        }
        if let Body::File { size, .. } = &mut self.node_mut(ino).body {
            *size = (*size).max(end);
        }
        Ok(())
    }

    /// `fsync(2)` of `ino`: a file's bytes, or a directory's entries, become durable.
    pub(crate) fn fsync(&mut self, ino: u64) -> Result<()> {
        self.live()?;
        match &mut self.nodes.get_mut(&ino).ok_or(Errno::ENOENT)?.body {
            Body::File {
                data: Some(data),
                durable_len,
                size,
                pending,
            } => {
                if !pending.is_empty() || *durable_len != *size {
                    pending.apply(data, *durable_len, *size).map_err(errno)?;
                    *durable_len = *size;
                }
                Ok(())
            }
            Body::File { data: None, .. } => Ok(()),
            Body::Dir { .. } => self.sync_dir(ino),
        }
    }

    fn sync_dir(&mut self, dir: u64) -> Result<()> {
        let Body::Dir { entries, durable } = &self.nodes[&dir].body else {
            unreachable!("called for directories");
        };
        let removed: Vec<(OsString, u64)> = durable
            .iter()
            .filter(|(n, i)| entries.get(*n) != Some(i))
            .map(|(n, i)| (n.clone(), *i))
            .collect();
        let added: Vec<(OsString, u64)> = entries
            .iter()
            .filter(|(n, i)| durable.get(*n) != Some(i))
            .map(|(n, i)| (n.clone(), *i))
            .collect();
        // A directory moved below one of its own durable descendants would make the durable
        // tree a cycle; ext4 commits both renames together, this model does not follow.
        let mut up = Some(dir);
        while let Some(a) = up {
            if added.iter().any(|(_, c)| *c == a) {
                return Err(Errno::EIO);
            }
            up = self.nodes[&a].durable.as_ref().map(|l| l.parent);
        }
        for (_, c) in &removed {
            self.drop_durable(*c)?;
        }
        for (name, c) in added {
            if self.nodes[&c].durable.is_some() {
                self.drop_durable(c)?;
            }
            let to = self.path(dir).join(&name);
            fs::rename(self.staging.join(c.to_string()), to).map_err(errno)?;
            self.node_mut(c).durable = Some(Link {
                parent: dir,
                name: name.clone(),
            });
            self.durable_mut(dir).insert(name, c);
        }
        for (_, c) in removed {
            self.reap_if_dead(c)?;
        }
        Ok(())
    }

    /// Drops the durable entry of `ino`: its backing object moves to the staging folder.
    fn drop_durable(&mut self, ino: u64) -> Result<()> {
        let link = self.nodes[&ino].durable.clone().expect("a durable entry");
        let from = self.path(ino);
        fs::rename(from, self.staging.join(ino.to_string())).map_err(errno)?;
        self.node_mut(ino).durable = None;
        let durable = self.durable_mut(link.parent);
        if durable.get(&link.name) == Some(&ino) {
            durable.remove(&link.name);
        }
        Ok(())
    }

    /// Deletes the backing object of `ino` once nothing can reach it: no entry in either
    /// layer and no open handle.
    fn reap_if_dead(&mut self, ino: u64) -> Result<()> {
        let Some(node) = self.nodes.get(&ino) else {
            return Ok(());
        };
        if ino == ROOT
            || node.gone
            || node.link.is_some()
            || node.durable.is_some()
            || node.open > 0
        {
            return Ok(());
        }
        let path = self.path(ino);
        match &self.nodes[&ino].body {
            Body::File { .. } => {
                fs::remove_file(&path).map_err(errno)?;
            }
            Body::Dir { durable, .. } => {
                let children: Vec<u64> = durable.values().copied().collect();
                for c in children {
                    self.drop_durable(c)?;
                    self.reap_if_dead(c)?;
                }
                fs::remove_dir(&path).map_err(errno)?;
            }
        }
        let node = self.node_mut(ino);
        node.gone = true;
        if let Body::File { data, pending, .. } = &mut node.body {
            *data = None;
            *pending = Pending::default();
        }
        if node.lookups == 0 {
            self.nodes.remove(&ino);
        }
        Ok(())
    }

    /// Removes file `name` from `parent`, in the volatile layer.
    pub(crate) fn unlink(&mut self, parent: u64, name: &OsStr) -> Result<()> {
        self.remove(parent, name, Kind::File)
    }

    /// Removes the empty directory `name` from `parent`, in the volatile layer.
    pub(crate) fn rmdir(&mut self, parent: u64, name: &OsStr) -> Result<()> {
        self.remove(parent, name, Kind::Dir)
    }

    fn remove(&mut self, parent: u64, name: &OsStr, kind: Kind) -> Result<()> {
        self.live()?;
        let ino = self.child(parent, name)?;
        match (&self.nodes[&ino].body, kind) {
            (Body::File { .. }, Kind::Dir) => return Err(Errno::ENOTDIR),
            (Body::Dir { .. }, Kind::File) => return Err(Errno::EISDIR),
            (Body::Dir { entries, .. }, Kind::Dir) if !entries.is_empty() => {
                return Err(Errno::ENOTEMPTY);
            }
            _ => {}
        }
        self.entries_mut(parent).remove(name);
        self.node_mut(parent).meta.mtime = SystemTime::now();
        self.node_mut(ino).link = None;
        self.reap_if_dead(ino)
    }

    /// Renames `parent/name` to `new_parent/new_name`, in the volatile layer; with
    /// `no_replace`, an existing target is an error.
    pub(crate) fn rename(
        &mut self,
        parent: u64,
        name: &OsStr,
        new_parent: u64,
        new_name: &OsStr,
        no_replace: bool,
    ) -> Result<()> {
        self.live()?;
        let ino = self.child(parent, name)?;
        self.dir_entries(new_parent)?;
        if new_parent == ROOT && new_name == STAGING {
            return Err(Errno::EPERM);
        }
        if parent == new_parent && name == new_name {
            return Ok(());
        }
        let is_dir = matches!(self.nodes[&ino].body, Body::Dir { .. });
        if is_dir {
            let mut up = Some(new_parent);
            while let Some(a) = up {
                if a == ino {
                    return Err(Errno::EINVAL);
                }
                up = self.nodes[&a].link.as_ref().map(|l| l.parent);
            }
        }
        let replaced = self.dir_entries(new_parent)?.get(new_name).copied();
        if let Some(old) = replaced {
            if no_replace {
                return Err(Errno::EEXIST);
            }
            match (&self.nodes[&old].body, is_dir) {
                (Body::Dir { .. }, false) => return Err(Errno::EISDIR),
                (Body::File { .. }, true) => return Err(Errno::ENOTDIR),
                (Body::Dir { entries, .. }, true) if !entries.is_empty() => {
                    return Err(Errno::ENOTEMPTY);
                }
                _ => {}
            }
            self.node_mut(old).link = None;
        }
        self.entries_mut(parent).remove(name);
        self.entries_mut(new_parent)
            .insert(new_name.to_os_string(), ino);
        self.node_mut(ino).link = Some(Link {
            parent: new_parent,
            name: new_name.to_os_string(),
        });
        let now = SystemTime::now();
        self.node_mut(parent).meta.mtime = now;
        self.node_mut(new_parent).meta.mtime = now;
        match replaced {
            Some(old) => self.reap_if_dead(old),
            None => Ok(()),
        }
    }

    /// The entries of directory `ino`, with `.` and `..` first.
    pub(crate) fn readdir(&self, ino: u64) -> Result<Vec<(u64, Kind, OsString)>> {
        self.live()?;
        let entries = self.dir_entries(ino)?;
        let up = self.nodes[&ino].link.as_ref().map_or(ROOT, |l| l.parent);
        let mut out = vec![
            (ino, Kind::Dir, OsString::from(".")),
            (up, Kind::Dir, OsString::from("..")),
        ];
        for (name, &c) in entries {
            let kind = match self.nodes[&c].body {
                Body::File { .. } => Kind::File,
                Body::Dir { .. } => Kind::Dir,
            };
            out.push((c, kind, name.clone()));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
