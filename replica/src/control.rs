//! A client of Litestream's control socket: its HTTP API over a Unix socket
//! (Litestream 0.5 `server.go`: `POST /register`, `/unregister`, `/sync`,
//! `GET /list`, `/info`), spoken directly rather than through the
//! `litestream` CLI, which costs a process start (~40 ms) per call where the
//! daemon's own sync-and-wait takes ~5 ms on loopback.
//!
//! One connection per call: a Unix socket connects in microseconds, and a
//! call never waits behind another's long sync. What it must never do: pass
//! Litestream's error text (which may hold paths and storage details) to a
//! caller outside the role; it is logged, and [`ControlError`] says what
//! failed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};

/// Why a control call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// The socket does not answer (Litestream not running, or another path).
    #[error("the Litestream control socket {0} does not answer")]
    NoSocket(PathBuf),
    /// Litestream does not know the database (it restarted, or it was never
    /// registered).
    #[error("Litestream does not replicate this database")]
    NotRegistered,
    /// The call ran past its time.
    #[error("Litestream did not answer in time")]
    Timeout,
    /// Litestream answered with an error (its text, for the log).
    #[error("Litestream refused the call ({status}): {message}")]
    Refused { status: u16, message: String },
    /// An answer that is not what the API documents.
    #[error("Litestream sent an answer that cannot be read")]
    Garbled,
}

/// `POST /sync`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Synced {
    /// `no_change`, `synced` (waited for object storage) or `synced_local`.
    pub status: String,
    /// The database's newest transaction id Litestream holds locally.
    pub txid: u64,
    /// The newest transaction id in object storage.
    pub replicated_txid: u64,
}

/// One database of `GET /list`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Listed {
    pub path: String,
    /// `replicating`, `open` or `stopped`.
    pub status: String,
    /// The last successful upload (RFC 3339), if any.
    #[serde(default)]
    pub last_sync_at: Option<String>,
}

#[derive(Deserialize)]
struct ListAnswer {
    databases: Vec<Listed>,
}

#[derive(Deserialize)]
struct ErrorAnswer {
    error: String,
}

#[derive(Serialize)]
struct PathBody<'a> {
    path: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    replica_url: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    wait: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout: Option<u64>,
}

/// The control socket of one Litestream process.
#[derive(Debug, Clone)]
pub struct Control {
    socket: PathBuf,
}

impl Control {
    pub fn new(socket: &Path) -> Control {
        Control {
            socket: socket.to_path_buf(),
        }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Starts replicating `database` to `replica_url`; a database Litestream
    /// already replicates is left as it is.
    pub async fn register(&self, database: &Path, replica_url: &str) -> Result<(), ControlError> {
        let path = path_text(database)?;
        let body = PathBody {
            path,
            replica_url: Some(replica_url),
            wait: false,
            timeout: None,
        };
        self.call("POST", "/register", Some(&body), Duration::from_secs(30))
            .await
            .map(|_| ())
    }

    /// Stops replicating `database` after a final sync (bounded by
    /// `timeout`); a database Litestream does not know is fine.
    pub async fn unregister(&self, database: &Path, timeout: Duration) -> Result<(), ControlError> {
        let path = path_text(database)?;
        let body = PathBody {
            path,
            replica_url: None,
            wait: false,
            timeout: Some(timeout.as_secs().max(1)),
        };
        self.call(
            "POST",
            "/unregister",
            Some(&body),
            timeout + Duration::from_secs(2),
        )
        .await
        .map(|_| ())
    }

    /// Copies the WAL's committed frames into Litestream's local files and,
    /// with `wait`, uploads every pending one to object storage before
    /// answering: afterwards everything committed before the call is there.
    pub async fn sync(
        &self,
        database: &Path,
        wait: bool,
        timeout: Duration,
    ) -> Result<Synced, ControlError> {
        let path = path_text(database)?;
        let body = PathBody {
            path,
            replica_url: None,
            wait,
            timeout: Some(timeout.as_secs().max(1)),
        };
        // Litestream bounds its own work by whole seconds; the socket call is
        // given a little more so its refusal, not ours, says what happened.
        let answer = self
            .call(
                "POST",
                "/sync",
                Some(&body),
                timeout + Duration::from_secs(1),
            )
            .await?;
        serde_json::from_slice(&answer).map_err(|_| ControlError::Garbled)
    }

    /// Every database Litestream replicates.
    pub async fn list(&self) -> Result<Vec<Listed>, ControlError> {
        let answer = self
            .call::<()>("GET", "/list", None, Duration::from_secs(5))
            .await?;
        serde_json::from_slice::<ListAnswer>(&answer)
            .map(|answer| answer.databases)
            .map_err(|_| ControlError::Garbled)
    }

    /// Whether the socket answers at all (`GET /info`).
    pub async fn ping(&self) -> Result<(), ControlError> {
        self.call::<()>("GET", "/info", None, Duration::from_secs(2))
            .await
            .map(|_| ())
    }

    async fn call<B: Serialize>(
        &self,
        method: &str,
        path: &str,
        body: Option<&B>,
        timeout: Duration,
    ) -> Result<Bytes, ControlError> {
        let exchange = async {
            let stream = tokio::net::UnixStream::connect(&self.socket)
                .await
                .map_err(|_| ControlError::NoSocket(self.socket.clone()))?;
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .map_err(|_| ControlError::NoSocket(self.socket.clone()))?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            let payload = match body {
                Some(body) => {
                    Bytes::from(serde_json::to_vec(body).map_err(|_| ControlError::Garbled)?)
                }
                None => Bytes::new(),
            };
            let request = http::Request::builder()
                .method(method)
                .uri(path)
                .header(http::header::HOST, "litestream")
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Full::new(payload))
                .map_err(|_| ControlError::Garbled)?;
            let response = sender
                .send_request(request)
                .await
                .map_err(|_| ControlError::NoSocket(self.socket.clone()))?;
            let status = response.status();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|_| ControlError::Garbled)?
                .to_bytes();
            if status.is_success() {
                return Ok(bytes);
            }
            let message = serde_json::from_slice::<ErrorAnswer>(&bytes)
                .map(|answer| answer.error)
                .unwrap_or_default();
            if status == http::StatusCode::NOT_FOUND || message.contains("database not found") {
                return Err(ControlError::NotRegistered);
            }
            Err(ControlError::Refused {
                status: status.as_u16(),
                message,
            })
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .unwrap_or(Err(ControlError::Timeout))
    }
}

fn path_text(path: &Path) -> Result<&str, ControlError> {
    path.to_str().ok_or(ControlError::Refused {
        status: 0,
        message: "the database path is not UTF-8".to_owned(),
    })
}
