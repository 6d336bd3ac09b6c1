//! Byte encodings of what the Raft axis persists: log entries, the vote and the applied log id.
//!
//! Layouts are little-endian and length-prefixed:
//! - entry: `term u64 | kind u8 | payload` where kind 0 = blank, 1 = normal (a protobuf
//!   [`Proposal`]), 2 = membership (`configs u32 | {ids u32 | id u64..}.. | nodes u32 | {id u64 | addr}..`);
//! - vote: `term u64 | voted_for u64 | committed u8`;
//! - log id: `term u64 | index u64`.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use openraft::entry::RaftEntry;
use openraft::impls::BasicNode;
use openraft::membership::Membership;
use prost::Message;

use super::{KeelRaft, Proposal};

/// A log entry of keel's Raft group.
pub type Entry = openraft::alias::EntryOf<KeelRaft>;
/// A log id (term and index) of keel's Raft group.
pub type LogId = openraft::alias::LogIdOf<KeelRaft>;
/// A vote of keel's Raft group.
pub type Vote = openraft::alias::VoteOf<KeelRaft>;
type CommittedLeaderId = openraft::alias::CommittedLeaderIdOf<KeelRaft>;

/// Builds a log id from a term and an index.
pub fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(term), index)
}

/// Encodes a log entry (its index travels beside it in the WAL record).
pub fn encode_entry(entry: &Entry) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&entry.log_id.leader_id.term.to_le_bytes());
    match &entry.payload {
        openraft::EntryPayload::Blank => out.push(0),
        openraft::EntryPayload::Normal(proposal) => {
            out.push(1);
            proposal.encode(&mut out).expect("a Vec grows as needed");
        }
        openraft::EntryPayload::Membership(membership) => {
            out.push(2);
            encode_membership(membership, &mut out);
        }
    }
    out
}

/// Decodes a log entry written by [`encode_entry`].
pub fn decode_entry(index: u64, bytes: &[u8]) -> io::Result<Entry> {
    let mut r = Reader(bytes);
    let term = r.u64()?;
    let payload = match r.u8()? {
        0 => openraft::EntryPayload::Blank,
        1 => openraft::EntryPayload::Normal(Proposal::decode(r.0).map_err(invalid)?),
        2 => openraft::EntryPayload::Membership(decode_membership(&mut r)?),
        kind => return Err(invalid(format!("unknown log entry kind {kind}"))),
    };
    Ok(Entry::new(log_id(term, index), payload))
}

/// Encodes a vote.
pub fn encode_vote(vote: &Vote) -> Vec<u8> {
    let mut out = Vec::with_capacity(17);
    out.extend_from_slice(&vote.leader_id.term.to_le_bytes());
    out.extend_from_slice(&vote.leader_id.voted_for.to_le_bytes());
    out.push(u8::from(vote.committed));
    out
}

/// Decodes a vote written by [`encode_vote`].
pub fn decode_vote(bytes: &[u8]) -> io::Result<Vote> {
    let mut r = Reader(bytes);
    let (term, voted_for, committed) = (r.u64()?, r.u64()?, r.u8()? != 0);
    Ok(if committed {
        Vote::new_committed(term, voted_for)
    } else {
        Vote::new(term, voted_for)
    })
}

/// Encodes an optional log id (empty when absent).
pub fn encode_log_id(id: Option<&LogId>) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    if let Some(id) = id {
        out.extend_from_slice(&id.leader_id.term.to_le_bytes());
        out.extend_from_slice(&id.index.to_le_bytes());
    }
    out
}

/// Decodes an optional log id written by [`encode_log_id`].
pub fn decode_log_id(bytes: &[u8]) -> io::Result<Option<LogId>> {
    if bytes.is_empty() {
        return Ok(None);
    }
    let mut r = Reader(bytes);
    Ok(Some(log_id(r.u64()?, r.u64()?)))
}

/// Encodes a membership configuration.
pub fn encode_membership(membership: &Membership<u64, BasicNode>, out: &mut Vec<u8>) {
    let configs = membership.get_joint_config();
    out.extend_from_slice(&(configs.len() as u32).to_le_bytes());
    for config in configs {
        out.extend_from_slice(&(config.len() as u32).to_le_bytes());
        for id in config {
            out.extend_from_slice(&id.to_le_bytes());
        }
    }
    let nodes: Vec<_> = membership.nodes().collect();
    out.extend_from_slice(&(nodes.len() as u32).to_le_bytes());
    for (id, node) in nodes {
        out.extend_from_slice(&id.to_le_bytes());
        out.extend_from_slice(&(node.addr.len() as u32).to_le_bytes());
        out.extend_from_slice(node.addr.as_bytes());
    }
}

/// Decodes a membership configuration written by [`encode_membership`].
pub fn decode_membership(r: &mut Reader<'_>) -> io::Result<Membership<u64, BasicNode>> {
    let mut configs = Vec::new();
    for _ in 0..r.u32()? {
        let mut config = BTreeSet::new();
        for _ in 0..r.u32()? {
            config.insert(r.u64()?);
        }
        configs.push(config);
    }
    let mut nodes = BTreeMap::new();
    for _ in 0..r.u32()? {
        let id = r.u64()?;
        let len = r.u32()? as usize;
        let addr = String::from_utf8(r.take(len)?.to_vec()).map_err(invalid)?;
        nodes.insert(id, BasicNode { addr });
    }
    Membership::new(configs, nodes).map_err(invalid)
}

/// A cursor over encoded bytes.
pub struct Reader<'a>(pub &'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(invalid("truncated record"));
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }
    fn u8(&mut self) -> io::Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> io::Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    /// Reads a little-endian u64.
    pub fn u64(&mut self) -> io::Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
}

fn invalid(e: impl ToString) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::ProposalOp;
    use keel_proto::etcdserverpb::PutRequest;

    #[test]
    fn entries_round_trip() {
        let put = Proposal {
            op: Some(ProposalOp::Put(PutRequest {
                key: b"k".to_vec(),
                value: b"v".to_vec(),
                ..Default::default()
            })),
        };
        let membership = Membership::new(
            vec![BTreeSet::from([7])],
            BTreeMap::from([(
                7,
                BasicNode {
                    addr: "http://127.0.0.1:2380".into(),
                },
            )]),
        )
        .unwrap();
        for payload in [
            openraft::EntryPayload::Blank,
            openraft::EntryPayload::Normal(put),
            openraft::EntryPayload::Membership(membership),
        ] {
            let entry = Entry::new(log_id(3, 42), payload);
            assert_eq!(decode_entry(42, &encode_entry(&entry)).unwrap(), entry);
        }
        assert!(decode_entry(1, &[1, 2]).is_err());
    }

    #[test]
    fn votes_and_log_ids_round_trip() {
        for vote in [Vote::new(5, 9), Vote::new_committed(6, 1)] {
            assert_eq!(decode_vote(&encode_vote(&vote)).unwrap(), vote);
        }
        let id = log_id(2, 10);
        assert_eq!(decode_log_id(&encode_log_id(Some(&id))).unwrap(), Some(id));
        assert_eq!(decode_log_id(&encode_log_id(None)).unwrap(), None);
    }
}
