//! keel-wal
