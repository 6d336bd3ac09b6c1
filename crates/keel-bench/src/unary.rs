//! A lean client for unary gRPC calls, straight on an HTTP/2 connection.
//!
//! The load generator shares the machine with the server it measures, so every microsecond it
//! spends per request is taken from the server. tonic's `Channel` queues each request to a
//! worker task and hyper spawns a task per request body; this client does neither: a call
//! opens an h2 stream, sends the framed request with end-of-stream, and reads the answer and
//! its trailers on the caller's task. The wire is standard gRPC (`application/grpc`, 5-byte
//! message prefix, `grpc-status` trailers), so it works against any etcd.

use anyhow::Context;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use h2::client::SendRequest;
use http::{HeaderMap, HeaderValue, Method, Request, Uri};
use prost::Message;
use tokio::net::TcpStream;
use tonic::{Code, Status};

/// HTTP/2 flow-control windows: large enough that no benchmark answer waits for a window
/// update.
const STREAM_WINDOW: u32 = 4 << 20;
const CONNECTION_WINDOW: u32 = 16 << 20;

/// One HTTP/2 connection for unary gRPC calls; clones share it.
#[derive(Clone)]
pub struct UnaryConn {
    send: SendRequest<Bytes>,
    base: String,
}

impl UnaryConn {
    /// Connects to `uri` (`http://host:port`); the connection is driven by a task on the
    /// current runtime until every clone is dropped.
    pub async fn connect(uri: &str) -> anyhow::Result<UnaryConn> {
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
            .handshake::<_, Bytes>(tcp)
            .await?;
        tokio::spawn(async move {
            // The connection ends when the server closes it or every handle is dropped; calls
            // in flight then fail with the cause.
            let _ = connection.await;
        });
        Ok(UnaryConn {
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
        let mut body = BytesMut::with_capacity(5 + request.encoded_len());
        body.put_u8(0);
        body.put_u32(request.encoded_len() as u32);
        request
            .encode(&mut body)
            .map_err(|e| Status::internal(e.to_string()))?;
        let head = Request::builder()
            .method(Method::POST)
            .uri(format!("{}{path}", self.base))
            .header("content-type", HeaderValue::from_static("application/grpc"))
            .header("te", HeaderValue::from_static("trailers"))
            .body(())
            .map_err(|e| Status::internal(e.to_string()))?;
        let mut send = self.send.clone().ready().await.map_err(transport)?;
        let (answer, mut stream) = send.send_request(head, false).map_err(transport)?;
        stream.send_data(body.freeze(), true).map_err(transport)?;
        let answer = answer.await.map_err(transport)?;
        let (head, mut body) = answer.into_parts();
        if head.status != http::StatusCode::OK {
            return Err(Status::unknown(format!("HTTP status {}", head.status)));
        }
        // A trailers-only answer (an error) carries its status in the headers.
        if let Some(status) = status_of(&head.headers) {
            return Err(status);
        }
        let mut message = BytesMut::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.map_err(transport)?;
            let _ = body.flow_control().release_capacity(chunk.len());
            message.extend_from_slice(&chunk);
        }
        let trailers = body.trailers().await.map_err(transport)?;
        if let Some(status) = trailers.as_ref().and_then(status_of) {
            return Err(status);
        }
        decode(message.freeze())
    }
}

/// The call's error status, if `grpc-status` is present and not OK.
fn status_of(headers: &HeaderMap) -> Option<Status> {
    Status::from_header_map(headers).filter(|s| s.code() != Code::Ok)
}

/// Decodes one length-prefixed, uncompressed gRPC message.
fn decode<Resp: Message + Default>(mut frame: Bytes) -> Result<Resp, Status> {
    if frame.len() < 5 {
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
    Resp::decode(frame).map_err(|e| Status::internal(e.to_string()))
}

fn transport(err: h2::Error) -> Status {
    Status::unavailable(format!("transport error: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_proto::etcdserverpb::PutResponse;

    #[test]
    fn decodes_one_framed_message_and_refuses_bad_frames() {
        let msg = PutResponse::default();
        let mut frame = BytesMut::new();
        frame.put_u8(0);
        frame.put_u32(msg.encoded_len() as u32);
        msg.encode(&mut frame).unwrap();
        assert_eq!(decode::<PutResponse>(frame.freeze()).unwrap(), msg);
        assert!(decode::<PutResponse>(Bytes::from_static(&[0, 0])).is_err());
        assert!(decode::<PutResponse>(Bytes::from_static(&[1, 0, 0, 0, 0])).is_err());
        assert!(decode::<PutResponse>(Bytes::from_static(&[0, 0, 0, 0, 9])).is_err());
    }
}
