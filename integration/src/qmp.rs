//! A small QMP client: connects to QEMU's `-qmp unix:PATH,server=on`
//! socket, reads the greeting, negotiates `qmp_capabilities`, and runs
//! commands, skipping the asynchronous events that arrive between answers.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// One QMP connection.
pub struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    /// Events seen while waiting for answers, oldest first.
    pub events: Vec<Value>,
}

/// A command's failure: QEMU's `error` object, or the connection's.
#[derive(Debug)]
pub enum QmpError {
    /// `{"error": {"class": ..., "desc": ...}}`
    Command {
        class: String,
        desc: String,
    },
    Io(io::Error),
    Protocol(String),
}

impl std::fmt::Display for QmpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QmpError::Command { class, desc } => write!(f, "{class}: {desc}"),
            QmpError::Io(e) => write!(f, "QMP connection: {e}"),
            QmpError::Protocol(e) => write!(f, "QMP protocol: {e}"),
        }
    }
}

impl std::error::Error for QmpError {}

impl From<io::Error> for QmpError {
    fn from(e: io::Error) -> Self {
        QmpError::Io(e)
    }
}

impl Qmp {
    /// Connects to `path`, waiting up to `timeout` for the socket to appear
    /// (QEMU creates it while starting), then negotiates capabilities.
    pub fn connect(path: &Path, timeout: Duration) -> Result<Qmp, QmpError> {
        let deadline = Instant::now() + timeout;
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(s) => break s,
                Err(e) if Instant::now() >= deadline => return Err(e.into()),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        stream.set_read_timeout(Some(Duration::from_secs(120)))?;
        let writer = stream.try_clone()?;
        let mut qmp = Qmp {
            reader: BufReader::new(stream),
            writer,
            events: Vec::new(),
        };
        let greeting = qmp.read_message()?;
        if greeting.get("QMP").is_none() {
            return Err(QmpError::Protocol(format!("no greeting: {greeting}")));
        }
        qmp.execute("qmp_capabilities", None)?;
        Ok(qmp)
    }

    fn read_message(&mut self) -> Result<Value, QmpError> {
        let mut line = String::new();
        loop {
            line.clear();
            if self.reader.read_line(&mut line)? == 0 {
                return Err(QmpError::Io(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "QEMU closed the QMP socket",
                )));
            }
            if !line.trim().is_empty() {
                break;
            }
        }
        serde_json::from_str(&line).map_err(|e| QmpError::Protocol(format!("{e}: {line}")))
    }

    /// Runs `command` with `arguments` and returns its `return` value.
    pub fn execute(&mut self, command: &str, arguments: Option<Value>) -> Result<Value, QmpError> {
        let mut request = json!({ "execute": command });
        if let Some(arguments) = arguments {
            request["arguments"] = arguments;
        }
        let mut text = request.to_string();
        text.push('\n');
        self.writer.write_all(text.as_bytes())?;
        loop {
            let mut message = self.read_message()?;
            if message.get("event").is_some() {
                self.events.push(message);
                continue;
            }
            if let Some(value) = message.get_mut("return") {
                return Ok(value.take());
            }
            if let Some(error) = message.get("error") {
                let field = |k: &str| {
                    error
                        .get(k)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                return Err(QmpError::Command {
                    class: field("class"),
                    desc: field("desc"),
                });
            }
            return Err(QmpError::Protocol(format!("unexpected: {message}")));
        }
    }

    /// [`execute`](Self::execute) that panics with the command's error.
    pub fn run(&mut self, command: &str, arguments: Value) -> Value {
        let arguments = (!arguments.is_null()).then_some(arguments);
        self.execute(command, arguments)
            .unwrap_or_else(|e| panic!("QMP {command}: {e}"))
    }

    /// `query-migrate`'s answer.
    pub fn query_migrate(&mut self) -> Result<Value, QmpError> {
        self.execute("query-migrate", None)
    }

    /// `query-status`'s `status` (`running`, `paused`, `postmigrate`, ...).
    pub fn run_state(&mut self) -> Result<String, QmpError> {
        let status = self.execute("query-status", None)?;
        Ok(status["status"].as_str().unwrap_or_default().to_string())
    }
}
