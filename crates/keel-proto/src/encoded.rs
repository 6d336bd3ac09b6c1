//! Responses that are sent already encoded.
//!
//! A watch event goes to every watcher whose range holds its key, each in a response of its
//! own. Encoding the event once and copying its bytes into each response is much cheaper than
//! building and encoding one `Event` per watcher, so the server side of `etcdserverpb.Watch`
//! has a second stub, [`watch_server`], whose responses are [`PreEncoded`] byte chunks. The
//! wire format is unchanged: the chunks are a `WatchResponse` exactly as prost encodes it.

use std::marker::PhantomData;

use bytes::{BufMut, Bytes};
use tonic::Status;
use tonic::codec::{Codec, EncodeBuf, Encoder};
use tonic_prost::ProstDecoder;

#[allow(missing_docs, clippy::all)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/etcdserverpb.Watch.rs"));
}
/// The `etcdserverpb.Watch` server stub whose responses are [`PreEncoded`].
pub use generated::watch_server;

/// One message already encoded, as a sequence of chunks sent back to back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreEncoded(pub Vec<Bytes>);

impl PreEncoded {
    /// The encoded length in bytes.
    pub fn len(&self) -> usize {
        self.0.iter().map(Bytes::len).sum()
    }

    /// Whether the message is empty (every field at its default).
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(Bytes::is_empty)
    }

    /// The chunks joined into one buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        self.0.concat()
    }
}

/// Sends [`PreEncoded`] messages as they are and decodes requests of type `U` with prost.
#[derive(Debug, Clone)]
pub struct PreEncodedCodec<U>(PhantomData<U>);

impl<U> Default for PreEncodedCodec<U> {
    fn default() -> Self {
        PreEncodedCodec(PhantomData)
    }
}

impl<U: prost::Message + Default + Send + 'static> Codec for PreEncodedCodec<U> {
    type Encode = PreEncoded;
    type Decode = U;
    type Encoder = PreEncodedEncoder;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> PreEncodedEncoder {
        PreEncodedEncoder
    }

    fn decoder(&mut self) -> ProstDecoder<U> {
        ProstDecoder::default()
    }
}

/// Copies the chunks of a [`PreEncoded`] message into the frame.
#[derive(Debug, Clone, Copy, Default)]
pub struct PreEncodedEncoder;

impl Encoder for PreEncodedEncoder {
    type Item = PreEncoded;
    type Error = Status;

    fn encode(&mut self, item: PreEncoded, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        buf.reserve(item.len());
        for chunk in &item.0 {
            buf.put_slice(chunk);
        }
        Ok(())
    }
}
