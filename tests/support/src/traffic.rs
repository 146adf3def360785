//! Plain HTTP through a proxy, for the tests and the demo that check a proxy really carries traffic: a
//! local server that answers every request with the source address it saw, and a client that sends one
//! request through an HTTP proxy with optional basic credentials and an optional source address.
//!
//! Raw sockets rather than an HTTP client library: the point is to see exactly what the proxy answers
//! (407, 403, a closed connection), which client libraries turn into errors or retries.

use std::{
    io,
    net::{IpAddr, SocketAddr},
    time::Duration,
};

use base64::{Engine, engine::general_purpose::STANDARD};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpSocket, TcpStream},
};

/// How long a proxied request may take before the client gives up.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// Starts an HTTP server on 127.0.0.1 (a free port) that answers every request with `200 OK` and, as
/// the body, the IP address of the peer that connected. Returns the port; the server runs until the
/// runtime stops.
pub async fn start_echo_server() -> io::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((mut stream, peer)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = read_head(&mut stream).await;
                let body = peer.ip().to_string();
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    Ok(port)
}

async fn read_head(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await? == 0 {
            break;
        }
        head.push(byte[0]);
    }
    Ok(head)
}

/// What a proxied request got back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The status code, or `None` when the proxy closed the connection without an HTTP answer.
    pub status: Option<u16>,
    pub body: String,
}

/// One `GET http://127.0.0.1:<target_port>/` to send through an HTTP proxy.
#[derive(Clone, Debug)]
pub struct ProxiedGet<'a> {
    proxy: SocketAddr,
    target_port: u16,
    credentials: Option<(&'a str, &'a str)>,
    source: Option<IpAddr>,
}

impl<'a> ProxiedGet<'a> {
    pub fn new(proxy: SocketAddr, target_port: u16) -> Self {
        Self {
            proxy,
            target_port,
            credentials: None,
            source: None,
        }
    }

    /// Sends `Proxy-Authorization: Basic` with these credentials.
    pub fn credentials(mut self, username: &'a str, password: &'a str) -> Self {
        self.credentials = Some((username, password));
        self
    }

    /// Connects to the proxy from this local address (any 127/8 address works on Linux).
    pub fn from(mut self, source: IpAddr) -> Self {
        self.source = Some(source);
        self
    }

    /// Sends the request; an error when the proxy cannot be reached or does not answer in time.
    pub async fn send(&self) -> io::Result<Answer> {
        let socket = if self.proxy.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        if let Some(source) = self.source {
            socket.bind(SocketAddr::new(source, 0))?;
        }
        let mut stream = socket.connect(self.proxy).await?;
        let port = self.target_port;
        let mut request = format!("GET http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n");
        if let Some((user, password)) = self.credentials {
            let token = STANDARD.encode(format!("{user}:{password}"));
            request.push_str(&format!("Proxy-Authorization: Basic {token}\r\n"));
        }
        request.push_str("Connection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        tokio::time::timeout(ANSWER_TIMEOUT, stream.read_to_end(&mut response))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "the proxy did not answer within 10 s"))??;
        Ok(parse_answer(&String::from_utf8_lossy(&response)))
    }
}

fn parse_answer(text: &str) -> Answer {
    let status = text
        .strip_prefix("HTTP/1.")
        .and_then(|rest| rest.get(2..5))
        .and_then(|code| code.parse().ok());
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Answer { status, body }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_split_into_status_and_body() {
        let answer = parse_answer("HTTP/1.1 407 Proxy Authentication Required\r\nA: b\r\n\r\nno");
        assert_eq!(answer.status, Some(407));
        assert_eq!(answer.body, "no");
        assert_eq!(parse_answer("").status, None);
    }

    #[tokio::test]
    async fn the_echo_server_answers_with_the_peer_address() {
        let port = start_echo_server().await.unwrap();
        // Talking to the echo server as if it were a proxy still gets its answer back.
        let answer = ProxiedGet::new(([127, 0, 0, 1], port).into(), port)
            .from([127, 0, 0, 3].into())
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status, Some(200));
        assert_eq!(answer.body, "127.0.0.3");
    }
}
