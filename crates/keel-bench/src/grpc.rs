//! A lean gRPC client, straight on an HTTP/2 connection: unary calls and bidirectional
//! streams.
//!
//! The load generator shares the machine with the server it measures, so every microsecond it
//! spends per request is taken from the server. tonic's `Channel` queues each request to a
//! worker task and hyper spawns a task per request body; this client does neither: a call
//! opens an h2 stream, sends the framed request, and reads the answer and its trailers on the
//! caller's task. The wire is standard gRPC (`application/grpc`, 5-byte message prefix,
//! `grpc-status` trailers), so it works against any etcd.

use anyhow::Context;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use h2::RecvStream;
use h2::SendStream;
use h2::client::{ResponseFuture, SendRequest};
use http::{HeaderMap, HeaderValue, Method, Request, Uri};
use prost::Message;
use tokio::net::TcpStream;
use tonic::{Code, Status};

/// HTTP/2 flow-control windows: large enough that no benchmark answer waits for a window
/// update.
const STREAM_WINDOW: u32 = 4 << 20;
const CONNECTION_WINDOW: u32 = 16 << 20;
/// The largest DATA frame the server may send: a server that honours it sends a large answer
/// (a catch-up watch response) in one frame, which arrives as one chunk and is read in place.
const MAX_FRAME: u32 = 1 << 20;

/// The length of gRPC's message prefix (compression flag, big-endian length).
const PREFIX: usize = 5;

/// One HTTP/2 connection for gRPC calls; clones share it.
#[derive(Clone)]
pub struct GrpcConn {
    send: SendRequest<Bytes>,
    base: String,
}

impl GrpcConn {
    /// Connects to `uri` (`http://host:port`); the connection is driven by a task on the
    /// current runtime until every clone is dropped.
    pub async fn connect(uri: &str) -> anyhow::Result<GrpcConn> {
        let parsed: Uri = uri
            .parse()
            .with_context(|| format!("invalid endpoint {uri}"))?;
        let authority = parsed
            .authority()
            .with_context(|| format!("endpoint {uri}: missing host:port"))?
            .to_string();
        let tcp = TcpStream::connect(&authority).await?;
        tcp.set_nodelay(true)?;
        let (send, connection) = h2::client::Builder::new()
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .max_frame_size(MAX_FRAME)
            .handshake::<_, Bytes>(tcp)
            .await?;
        tokio::spawn(async move {
            // The connection ends when the server closes it or every handle is dropped; calls
            // in flight then fail with the cause.
            let _ = connection.await;
        });
        Ok(GrpcConn {
            send,
            base: format!("http://{authority}"),
        })
    }

    /// Calls the unary method at `path` (e.g. `/etcdserverpb.KV/Put`).
    pub async fn call<Req: Message, Resp: Message + Default>(
        &self,
        path: &str,
        request: &Req,
    ) -> Result<Resp, Status> {
        let (answer, mut send) = self.open(path).await?;
        send.send_data(frame(request), true).map_err(transport)?;
        let mut reply = Reply::start(answer).await?;
        let payload = reply
            .payload()
            .await?
            .ok_or_else(|| Status::internal("answer without a gRPC message"))?;
        if reply.payload().await?.is_some() {
            return Err(Status::internal("unary answer with several messages"));
        }
        decode(payload)
    }

    /// Opens a bidirectional stream on the method at `path`; nothing is sent until the first
    /// [`GrpcStream::send`].
    pub async fn open_stream(&self, path: &str) -> Result<GrpcStream, Status> {
        let (answer, send) = self.open(path).await?;
        Ok(GrpcStream {
            send,
            answer: Some(answer),
            reply: None,
        })
    }

    /// Opens an h2 stream carrying a gRPC call to `path`.
    async fn open(&self, path: &str) -> Result<(ResponseFuture, SendStream<Bytes>), Status> {
        let head = Request::builder()
            .method(Method::POST)
            .uri(format!("{}{path}", self.base))
            .header("content-type", HeaderValue::from_static("application/grpc"))
            .header("te", HeaderValue::from_static("trailers"))
            .body(())
            .map_err(|e| Status::internal(e.to_string()))?;
        let mut send = self.send.clone().ready().await.map_err(transport)?;
        send.send_request(head, false).map_err(transport)
    }
}

/// One bidirectional gRPC stream.
pub struct GrpcStream {
    send: SendStream<Bytes>,
    answer: Option<ResponseFuture>,
    reply: Option<Reply>,
}

impl GrpcStream {
    /// Sends one message.
    pub fn send<Req: Message>(&mut self, request: &Req) -> Result<(), Status> {
        self.send
            .send_data(frame(request), false)
            .map_err(transport)
    }

    /// The next message; `None` once the server ended the call with an OK status.
    pub async fn message<Resp: Message + Default>(&mut self) -> Result<Option<Resp>, Status> {
        match self.payload().await? {
            Some(payload) => decode(payload).map(Some),
            None => Ok(None),
        }
    }

    /// The next message's undecoded bytes; `None` once the server ended the call with an OK
    /// status.
    pub async fn payload(&mut self) -> Result<Option<Bytes>, Status> {
        if let Some(answer) = self.answer.take() {
            self.reply = Some(Reply::start(answer).await?);
        }
        match &mut self.reply {
            Some(reply) => reply.payload().await,
            None => Err(Status::internal("stream failed earlier")),
        }
    }
}

/// The answer side of a call: its messages, then its status.
struct Reply {
    body: RecvStream,
    frames: Frames,
}

impl Reply {
    /// Waits for the answer's headers; a trailers-only answer (an error) carries its status
    /// there.
    async fn start(answer: ResponseFuture) -> Result<Reply, Status> {
        let (head, body) = answer.await.map_err(transport)?.into_parts();
        if head.status != http::StatusCode::OK {
            return Err(Status::unknown(format!("HTTP status {}", head.status)));
        }
        if let Some(status) = status_of(&head.headers) {
            return Err(status);
        }
        Ok(Reply {
            body,
            frames: Frames::default(),
        })
    }

    /// The next message's payload, or `None` at the end of an answer whose status is OK.
    async fn payload(&mut self) -> Result<Option<Bytes>, Status> {
        loop {
            if let Some(frame) = self.frames.next() {
                return payload(frame).map(Some);
            }
            match self.body.data().await {
                Some(chunk) => {
                    let chunk = chunk.map_err(transport)?;
                    let _ = self.body.flow_control().release_capacity(chunk.len());
                    self.frames.push(chunk);
                }
                None => {
                    let trailers = self.body.trailers().await.map_err(transport)?;
                    if let Some(status) = trailers.as_ref().and_then(status_of) {
                        return Err(status);
                    }
                    if !self.frames.is_empty() {
                        return Err(Status::internal("answer ends inside a gRPC message"));
                    }
                    return Ok(None);
                }
            }
        }
    }
}

/// Cuts a byte stream into length-prefixed gRPC messages.
///
/// Chunks are kept as they arrive and messages are sliced out of them without copying; only a
/// message split across chunks is copied, once, into `spill`.
#[derive(Default)]
struct Frames {
    /// Bytes not taken yet, starting at a message boundary (empty while `spill` holds an
    /// incomplete message).
    buf: Bytes,
    /// One message split across chunks, being completed; it comes before `buf`.
    spill: BytesMut,
}

impl Frames {
    /// Adds the next chunk of the stream.
    fn push(&mut self, mut chunk: Bytes) {
        if self.spill.is_empty() {
            if self.buf.is_empty() {
                self.buf = chunk;
                return;
            }
            // `buf` holds the start of a message (whole ones were taken before).
            self.spill.extend_from_slice(&self.buf);
            self.buf = Bytes::new();
        }
        // Copy just the bytes that complete the split message; keep the rest as is.
        while !chunk.is_empty() {
            let want = frame_len(&self.spill).unwrap_or(PREFIX);
            if self.spill.len() >= want {
                break;
            }
            let take = (want - self.spill.len()).min(chunk.len());
            // A hint only, capped: a garbled length prefix must not allocate gigabytes.
            self.spill.reserve((want - self.spill.len()).min(16 << 20));
            self.spill.extend_from_slice(&chunk.split_to(take));
        }
        self.buf = chunk;
    }

    /// The next whole message, prefix included.
    fn next(&mut self) -> Option<Bytes> {
        if !self.spill.is_empty() {
            whole_frame(&self.spill)?;
            return Some(self.spill.split().freeze());
        }
        let len = whole_frame(&self.buf)?;
        Some(self.buf.split_to(len))
    }

    /// Whether no byte is left over.
    fn is_empty(&self) -> bool {
        self.buf.is_empty() && self.spill.is_empty()
    }
}

/// `request` as one length-prefixed, uncompressed gRPC message.
fn frame<Req: Message>(request: &Req) -> Bytes {
    let len = request.encoded_len();
    let mut buf = BytesMut::with_capacity(PREFIX + len);
    buf.put_u8(0);
    buf.put_u32(len as u32);
    request.encode_raw(&mut buf);
    buf.freeze()
}

/// The length of the gRPC message at the start of `buf`, prefix included, once its prefix is
/// there.
fn frame_len(buf: &[u8]) -> Option<usize> {
    let prefix = buf.get(..PREFIX)?;
    Some(PREFIX + u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize)
}

/// The length of the whole gRPC message at the start of `buf`, if it is all there.
fn whole_frame(buf: &[u8]) -> Option<usize> {
    frame_len(buf).filter(|&len| buf.len() >= len)
}

/// The call's error status, if `grpc-status` is present and not OK.
fn status_of(headers: &HeaderMap) -> Option<Status> {
    Status::from_header_map(headers).filter(|s| s.code() != Code::Ok)
}

/// The payload of one length-prefixed, uncompressed gRPC message.
fn payload(mut frame: Bytes) -> Result<Bytes, Status> {
    if frame.len() < PREFIX {
        return Err(Status::internal("answer without a gRPC message"));
    }
    if frame.get_u8() != 0 {
        return Err(Status::internal("compressed answer (none was asked for)"));
    }
    let len = frame.get_u32() as usize;
    if frame.len() != len {
        return Err(Status::internal(format!(
            "gRPC message of {} bytes, prefix says {len}",
            frame.len()
        )));
    }
    Ok(frame)
}

/// Decodes one message payload.
fn decode<Resp: Message + Default>(payload: Bytes) -> Result<Resp, Status> {
    Resp::decode(payload).map_err(|e| Status::internal(e.to_string()))
}

fn transport(err: h2::Error) -> Status {
    Status::unavailable(format!("transport error: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_proto::etcdserverpb::PutResponse;

    #[test]
    fn frames_round_trip_and_bad_frames_are_refused() {
        let msg = PutResponse {
            prev_kv: Some(Default::default()),
            ..Default::default()
        };
        let framed = frame(&msg);
        assert_eq!(whole_frame(&framed), Some(framed.len()));
        assert_eq!(whole_frame(&framed[..framed.len() - 1]), None);
        assert_eq!(whole_frame(&framed[..3]), None);
        assert_eq!(
            decode::<PutResponse>(payload(framed).unwrap()).unwrap(),
            msg
        );
        assert!(payload(Bytes::from_static(&[0, 0])).is_err());
        assert!(payload(Bytes::from_static(&[1, 0, 0, 0, 0])).is_err());
        assert!(payload(Bytes::from_static(&[0, 0, 0, 0, 9])).is_err());
    }

    #[test]
    fn frames_split_anywhere_are_reassembled() {
        let messages: Vec<PutResponse> = (0..40)
            .map(|i| PutResponse {
                prev_kv: Some(keel_proto::mvccpb::KeyValue {
                    value: vec![i as u8; i * 37],
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect();
        let stream: Vec<u8> = messages.iter().flat_map(|m| frame(m).to_vec()).collect();
        for chunk_len in [1, 2, 4, 5, 6, 7, 64, 1000, stream.len()] {
            let mut frames = Frames::default();
            let mut got = Vec::new();
            for chunk in stream.chunks(chunk_len) {
                frames.push(Bytes::copy_from_slice(chunk));
                while let Some(f) = frames.next() {
                    got.push(decode::<PutResponse>(payload(f).unwrap()).unwrap());
                }
            }
            assert!(frames.is_empty(), "chunks of {chunk_len}");
            assert_eq!(got, messages, "chunks of {chunk_len}");
        }
    }
}
