//! keel-mvcc
