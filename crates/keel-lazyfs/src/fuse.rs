//! The FUSE face of a [`Tree`]: each kernel request becomes one call under the tree's lock.

use std::ffi::OsStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use fuser::{
    FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};
use parking_lot::Mutex;

use crate::tree::{Attr, Kind, Meta, Result, SetAttr, Tree};

/// How long the kernel may cache names and attributes: only this mount changes them.
const TTL: Duration = Duration::from_secs(1);

/// The filesystem served to the kernel.
pub(crate) struct LazyFuse {
    pub(crate) tree: Arc<Mutex<Tree>>,
    /// How long each fsync waits before it runs, in microseconds (a slow disk; 0: none).
    pub(crate) fsync_delay: Arc<AtomicU64>,
}

impl LazyFuse {
    /// Makes `ino` durable and replies, after the fsync delay if one is set. A delayed fsync
    /// waits on a thread of its own, so reads and writes meanwhile are served at once, as a
    /// slow disk's page cache serves them.
    fn fsync_after_delay(&self, ino: u64, reply: ReplyEmpty) {
        let delay = self.fsync_delay.load(Ordering::Relaxed);
        if delay == 0 {
            return empty(reply, self.tree.lock().fsync(ino));
        }
        let tree = self.tree.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_micros(delay));
            empty(reply, tree.lock().fsync(ino));
        });
    }
}

fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.size.div_ceil(512),
        atime: a.meta.atime,
        mtime: a.meta.mtime,
        ctime: a.meta.ctime,
        crtime: a.meta.ctime,
        kind: match a.kind {
            Kind::File => FileType::RegularFile,
            Kind::Dir => FileType::Directory,
        },
        perm: a.meta.perm,
        nlink: a.nlink,
        uid: a.meta.uid,
        gid: a.meta.gid,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

fn errno(e: nix::errno::Errno) -> fuser::Errno {
    fuser::Errno::from_i32(e as i32)
}

fn time(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

fn entry(reply: ReplyEntry, r: Result<Attr>) {
    match r {
        Ok(a) => reply.entry(&TTL, &file_attr(&a), Generation(0)),
        Err(e) => reply.error(errno(e)),
    }
}

fn attr(reply: ReplyAttr, r: Result<Attr>) {
    match r {
        Ok(a) => reply.attr(&TTL, &file_attr(&a)),
        Err(e) => reply.error(errno(e)),
    }
}

fn empty(reply: ReplyEmpty, r: Result<()>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(errno(e)),
    }
}

fn new_meta(req: &Request, mode: u32, umask: u32) -> Meta {
    Meta::new((mode & !umask & 0o7777) as u16, req.uid(), req.gid())
}

impl Filesystem for LazyFuse {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        entry(reply, self.tree.lock().lookup(parent.0, name));
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.tree.lock().forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        attr(reply, self.tree.lock().attr(ino.0));
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let set = SetAttr {
            perm: mode.map(|m| (m & 0o7777) as u16),
            uid,
            gid,
            size,
            atime: atime.map(time),
            mtime: mtime.map(time),
        };
        attr(reply, self.tree.lock().setattr(ino.0, set));
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let meta = new_meta(req, mode, umask);
        entry(reply, self.tree.lock().mkdir(parent.0, name, meta));
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(reply, self.tree.lock().unlink(parent.0, name));
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(reply, self.tree.lock().rmdir(parent.0, name));
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if !(flags - RenameFlags::RENAME_NOREPLACE).is_empty() {
            return reply.error(fuser::Errno::EINVAL);
        }
        let no_replace = flags.contains(RenameFlags::RENAME_NOREPLACE);
        let r = self
            .tree
            .lock()
            .rename(parent.0, name, newparent.0, newname, no_replace);
        empty(reply, r);
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.tree.lock().open(ino.0) {
            // Only this mount changes the files, so the kernel's page cache stays valid.
            Ok(()) => reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.tree.lock().read(ino.0, offset, size) {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.tree.lock().write(ino.0, offset, data) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        empty(reply, self.tree.lock().release(ino.0));
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.fsync_after_delay(ino.0, reply);
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.tree.lock().open(ino.0) {
            Ok(()) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let entries = match self.tree.lock().readdir(ino.0) {
            Ok(entries) => entries,
            Err(e) => return reply.error(errno(e)),
        };
        for (i, (child, kind, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            let kind = match kind {
                Kind::File => FileType::RegularFile,
                Kind::Dir => FileType::Directory,
            };
            if reply.add(INodeNo(child), i as u64 + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        empty(reply, self.tree.lock().release(ino.0));
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.fsync_after_delay(ino.0, reply);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let backing = self.tree.lock().backing().to_path_buf();
        match nix::sys::statvfs::statvfs(&backing) {
            Ok(s) => reply.statfs(
                s.blocks(),
                s.blocks_free(),
                s.blocks_available(),
                s.files(),
                s.files_free(),
                s.block_size() as u32,
                s.name_max() as u32,
                s.fragment_size() as u32,
            ),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        reply.ok();
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let meta = new_meta(req, mode, umask);
        match self.tree.lock().create(parent.0, name, meta) {
            Ok(a) => reply.created(
                &TTL,
                &file_attr(&a),
                Generation(0),
                FileHandle(0),
                FopenFlags::FOPEN_KEEP_CACHE,
            ),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        empty(
            reply,
            self.tree.lock().fallocate(ino.0, offset, length, mode),
        );
    }
}
