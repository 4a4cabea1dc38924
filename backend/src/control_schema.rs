//! The control socket's replies as typed JSON: the backend serializes these
//! and `vgpu-ctl` parses them back, so the two cannot drift apart. The
//! schema is documented in `backend/CONTROL.md`; a field is only ever added,
//! never renamed or removed, and error codes are stable strings.

use serde::{Deserialize, Serialize};

/// Live objects by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectCounts {
    pub contexts: u64,
    pub queues: u64,
    pub buffers: u64,
    pub programs: u64,
    pub kernels: u64,
    pub events: u64,
    pub samplers: u64,
}

impl ObjectCounts {
    /// From counts indexed by `ObjectKind::index`.
    pub fn from_indexed(counts: &[u64]) -> ObjectCounts {
        use vgpu_protocol::ObjectKind as K;
        let n = |k: K| counts.get(k.index()).copied().unwrap_or(0);
        ObjectCounts {
            contexts: n(K::Context),
            queues: n(K::Queue),
            buffers: n(K::Mem),
            programs: n(K::Program),
            kernels: n(K::Kernel),
            events: n(K::Event),
            samplers: n(K::Sampler),
        }
    }

    /// The counts of both.
    pub fn add(&self, other: &ObjectCounts) -> ObjectCounts {
        ObjectCounts {
            contexts: self.contexts + other.contexts,
            queues: self.queues + other.queues,
            buffers: self.buffers + other.buffers,
            programs: self.programs + other.programs,
            kernels: self.kernels + other.kernels,
            events: self.events + other.events,
            samplers: self.samplers + other.samplers,
        }
    }

    pub fn total(&self) -> u64 {
        self.contexts
            + self.queues
            + self.buffers
            + self.programs
            + self.kernels
            + self.events
            + self.samplers
    }

    /// `(kind, count)` pairs, in a fixed order.
    pub fn pairs(&self) -> [(&'static str, u64); 7] {
        [
            ("contexts", self.contexts),
            ("queues", self.queues),
            ("buffers", self.buffers),
            ("programs", self.programs),
            ("kernels", self.kernels),
            ("events", self.events),
            ("samplers", self.samplers),
        ]
    }
}

/// One connected front-end (VM, or program in loopback).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VmStatus {
    pub id: u64,
    /// The worker process that serves it (0 from a backend before workers).
    #[serde(default)]
    pub worker_pid: u32,
    /// How that worker's file system is confined (`landlock ABI 7`, or
    /// why it is not); empty from a backend before this field.
    #[serde(default)]
    pub file_system: String,
    pub sessions: usize,
    pub paused: bool,
    pub objects: ObjectCounts,
    /// Device memory its objects hold, and its limit (0: none).
    pub memory_used_bytes: u64,
    pub memory_limit_bytes: u64,
}

/// `status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusReply {
    /// Every device served, one string (`; `-separated).
    pub device: String,
    pub devices: Vec<String>,
    pub vms: Vec<VmStatus>,
    pub sessions: usize,
    pub objects: ObjectCounts,
}

/// What a checkpoint, restore or re-home did (milliseconds per phase).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportReply {
    pub sessions: usize,
    pub buffer_bytes: u64,
    pub stream_bytes: u64,
    pub drain_ms: f64,
    pub serialize_ms: f64,
    pub rebuild_ms: f64,
    pub upload_ms: f64,
    pub pause_ms: f64,
    /// Of the pause, the time every session was held (the rest waited
    /// for batches in progress to end).
    #[serde(default)]
    pub held_ms: f64,
    /// Copy rounds while the guest ran (0 for stop-and-copy and restores).
    #[serde(default)]
    pub rounds: u32,
    /// Bytes copied while the guest ran.
    #[serde(default)]
    pub precopied_bytes: u64,
    /// Bytes of buffer contents read while the guest waited.
    #[serde(default)]
    pub paused_bytes: u64,
    /// Bytes of contents owed at the pause (copy-on-write) and read after
    /// the guest resumed.
    #[serde(default)]
    pub owed_bytes: u64,
    #[serde(default)]
    pub precopy_ms: f64,
    /// Writing the stream once the guest resumed.
    #[serde(default)]
    pub write_ms: f64,
}

/// `rehome`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RehomedReply {
    pub rehomed: Vec<ReportReply>,
}

/// `profile`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WrittenReply {
    pub written: bool,
}

/// `accepts` (a refusal is an error with code `incompatible`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompatibleReply {
    pub compatible: bool,
}

/// `migration-base`: whether the next migration out of this back-end sends
/// only what changed since the checkpoint (it is this vGPU's last whole
/// one); an incoming migration may refer to it in any case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MigrationBaseReply {
    pub sends_changes_only: bool,
}

/// `pause` and `resume`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PausedReply {
    pub paused: bool,
}

/// Count, total and last duration of one kind of operation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    pub count: u64,
    pub seconds_total: f64,
    pub last_seconds: f64,
}

/// One front-end's figures (`metrics`). Counters run from its connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VmFigures {
    pub id: u64,
    pub sessions: usize,
    pub paused: bool,
    /// Messages run, and those that answered an error status.
    pub calls: u64,
    pub errors: u64,
    /// Kernel launches that succeeded (clEnqueueNDRangeKernel, cuLaunchKernel).
    pub kernels_launched: u64,
    /// Bulk data the device read from guest memory, and wrote into it.
    pub bytes_from_guest: u64,
    pub bytes_to_guest: u64,
    pub memory_used_bytes: u64,
    /// 0: no limit.
    pub memory_limit_bytes: u64,
    pub objects: ObjectCounts,
    pub checkpoints: Timing,
    pub restores: Timing,
    pub migrations_out: Timing,
    pub migrations_in: Timing,
    pub rehomes: Timing,
}

/// One device's figures: counters since the backend started, summed over
/// every front-end that used it (gone ones included).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceFigures {
    /// `opencl` or `cuda`.
    pub api: String,
    pub device: String,
    pub calls: u64,
    pub errors: u64,
    pub kernels_launched: u64,
    pub bytes_from_guest: u64,
    pub bytes_to_guest: u64,
    /// Device memory the live front-ends hold (on this API's device).
    pub memory_used_bytes: u64,
}

/// `metrics`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricsReply {
    pub vms: Vec<VmFigures>,
    pub devices: Vec<DeviceFigures>,
}

/// A `progress` line of a long operation (checkpoint).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    pub bytes: u64,
    pub buffer_bytes: u64,
    pub buffer_total: u64,
    pub rate_mb_s: f64,
    /// While buffers are copied as the guest runs: the copy round (from
    /// 1); `bytes` is then what the round copied, `buffer_total` what it
    /// listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<u32>,
}

/// Stable error codes: scripts may match on these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The command is not one the backend knows.
    UnknownCommand,
    /// A word of the command is malformed (VM id, follow-up, device spec).
    BadArgument,
    /// No front-end is connected, or none has that id.
    NoVm,
    /// Several front-ends are connected and the command named none.
    AmbiguousVm,
    /// A file could not be opened, read or written.
    File,
    /// A file is not a device profile.
    BadProfile,
    /// The device does not honour the profile (`accepts`).
    Incompatible,
    /// This backend serves no device the command needs.
    NoDevice,
    CheckpointFailed,
    RestoreFailed,
    RehomeFailed,
    /// The worker process serving the VM ended during the command.
    WorkerGone,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::UnknownCommand => "unknown_command",
            ErrorCode::BadArgument => "bad_argument",
            ErrorCode::NoVm => "no_vm",
            ErrorCode::AmbiguousVm => "ambiguous_vm",
            ErrorCode::File => "file",
            ErrorCode::BadProfile => "bad_profile",
            ErrorCode::Incompatible => "incompatible",
            ErrorCode::NoDevice => "no_device",
            ErrorCode::CheckpointFailed => "checkpoint_failed",
            ErrorCode::RestoreFailed => "restore_failed",
            ErrorCode::RehomeFailed => "rehome_failed",
            ErrorCode::WorkerGone => "worker_gone",
        }
    }
}

/// A failed command: `{"error": {"code": ..., "message": ...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message} ({})", code.as_str())]
pub struct ErrorReply {
    pub code: ErrorCode,
    pub message: String,
}

impl ErrorReply {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ErrorReply {
        ErrorReply {
            code,
            message: message.into(),
        }
    }
}

/// Any line the backend writes: a progress line, an error, or a command's
/// reply (whose type the command determines).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Line {
    Progress { progress: Progress },
    Error { error: ErrorReply },
    Reply(serde_json::Value),
}

impl Line {
    /// Parses one line of the control socket.
    pub fn parse(text: &str) -> Result<Line, serde_json::Error> {
        serde_json::from_str(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_text_with_quotes_and_newlines_round_trips_as_json() {
        let reply = ErrorReply::new(
            ErrorCode::CheckpointFailed,
            "cannot write /tmp/a\"b\nc\t\\: No such file",
        );
        let text = serde_json::to_string(&Line::Error {
            error: reply.clone(),
        })
        .unwrap();
        assert!(!text.contains('\n'), "one line: {text}");
        assert_eq!(
            Line::parse(&text).unwrap(),
            Line::Error { error: reply },
            "{text}"
        );
        assert!(text.contains(r#""code":"checkpoint_failed""#), "{text}");
    }

    #[test]
    fn error_codes_serialize_as_their_documented_strings() {
        for code in [
            ErrorCode::UnknownCommand,
            ErrorCode::BadArgument,
            ErrorCode::NoVm,
            ErrorCode::AmbiguousVm,
            ErrorCode::File,
            ErrorCode::BadProfile,
            ErrorCode::Incompatible,
            ErrorCode::NoDevice,
            ErrorCode::CheckpointFailed,
            ErrorCode::RestoreFailed,
            ErrorCode::RehomeFailed,
            ErrorCode::WorkerGone,
        ] {
            assert_eq!(
                serde_json::to_string(&code).unwrap(),
                format!("\"{}\"", code.as_str())
            );
            let doc = include_str!("../CONTROL.md");
            assert!(
                doc.contains(&format!("`{}`", code.as_str())),
                "CONTROL.md does not document {}",
                code.as_str()
            );
        }
    }

    #[test]
    fn progress_and_replies_are_told_apart() {
        let progress =
            r#"{"progress":{"bytes":1,"buffer_bytes":2,"buffer_total":3,"rate_mb_s":0.5}}"#;
        assert!(matches!(Line::parse(progress), Ok(Line::Progress { .. })));
        assert!(matches!(
            Line::parse(r#"{"paused":true}"#),
            Ok(Line::Reply(_))
        ));
        assert!(Line::parse("progress bytes=1").is_err());
    }
}
