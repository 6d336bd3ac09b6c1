//! keel-store
