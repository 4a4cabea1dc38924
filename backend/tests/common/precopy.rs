//! The pre-copy channel (`--precopy-socket`) as QEMU speaks it: one
//! request a line, one answer a line, slices of bytes after `data N` and
//! `load N`.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

pub struct Channel {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Channel {
    /// Connects as the front-end's QEMU would (this process is both).
    pub fn connect(path: &std::path::Path) -> Channel {
        let stream = UnixStream::connect(path).expect("connect the pre-copy socket");
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        Channel {
            reader: BufReader::new(stream.try_clone().expect("clone")),
            writer: stream,
        }
    }

    pub fn ask(&mut self, request: &str) -> String {
        writeln!(self.writer, "{request}").expect("send a request");
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("read an answer");
        line.trim_end().to_string()
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut bytes = vec![0u8; n];
        self.reader.read_exact(&mut bytes).expect("read a slice");
        bytes
    }

    /// Takes the whole stream with `next` slices of at most `limit` bytes.
    pub fn take_all(&mut self, limit: usize) -> Vec<u8> {
        let mut stream = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let answer = self.ask(&format!("next {limit}"));
            if answer == "end" {
                return stream;
            }
            let n: usize = answer
                .strip_prefix("data ")
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{answer:?}"));
            assert!(n <= limit, "a slice of {n} bytes over the limit asked");
            stream.extend(self.bytes(n));
            assert!(Instant::now() < deadline, "the stream never ended");
        }
    }

    /// Hands `bytes` over with `load`, a slice at a time.
    pub fn load(&mut self, bytes: &[u8], slice: usize) {
        for piece in bytes.chunks(slice) {
            writeln!(self.writer, "load {}", piece.len()).expect("send a request");
            self.writer.write_all(piece).expect("send a slice");
            let mut line = String::new();
            self.reader.read_line(&mut line).expect("read an answer");
            assert_eq!(line.trim_end(), "ok", "load of {} bytes", piece.len());
        }
    }
}

/// The whole checkpoint stream of what a source's pre-copy handed out:
/// past the objects it sends first (`VGPUOBJ1`, their length as a
/// little-endian u64, the objects).
pub fn checkpoint_of(handed_out: &[u8]) -> &[u8] {
    assert_eq!(&handed_out[..8], b"VGPUOBJ1", "the objects come first");
    let len = u64::from_le_bytes(handed_out[8..16].try_into().expect("8 bytes"));
    &handed_out[16 + len as usize..]
}
