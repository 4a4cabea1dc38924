//! Streams written and read back, and the rules the writer and reader
//! enforce on well-formed input.

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use vgpu_migration::stream::{BufferError, MAX_BUFFER_CHUNK, MAX_STATE_PART};
use vgpu_migration::*;

#[test]
fn state_and_buffers_round_trip() {
    let state = rich_state();
    for piece in [1000, 4096, 1 << 20] {
        let bytes = write_stream(&state, piece);
        let read = read_all(&bytes).unwrap();
        assert_eq!(read.state, state);
        assert_eq!(read.buffers.len(), 2);
        for b in state.streamed_buffers() {
            let expected = content(b.session, b.buffer, 0, b.size as usize);
            assert_eq!(read.buffers[&(b.session, b.buffer)], expected);
        }
        assert_eq!(read.summary.buffer_bytes, 3 * 4096 + 17 + 10);
        assert_eq!(read.summary.stream_bytes, bytes.len() as u64);
    }
}

#[test]
fn summaries_of_writer_and_reader_agree() {
    let state = buffers_state(&[MAX_BUFFER_CHUNK as u64 * 2 + 5, 3]);
    let mut w = StreamWriter::new(Vec::new()).unwrap();
    w.write_state(&state).unwrap();
    // One call may pass more than a chunk: the writer splits it.
    let big = content(1, 1, 0, MAX_BUFFER_CHUNK * 2 + 5);
    w.write_buffer_chunk(1, 1, 0, &big).unwrap();
    w.write_buffer_chunk(1, 2, 0, &[1, 2, 3]).unwrap();
    let (bytes, written) = w.finish().unwrap();
    assert_eq!(written.chunks, 1 + 3 + 1);
    assert_eq!(written.stream_bytes, bytes.len() as u64);
    let read = read_all(&bytes).unwrap();
    assert_eq!(read.summary, written);
    assert_eq!(read.buffers[&(1, 1)], big);
}

#[test]
fn buffers_may_interleave() {
    let state = buffers_state(&[8, 8]);
    let mut w = StreamWriter::new(Vec::new()).unwrap();
    w.write_state(&state).unwrap();
    w.write_buffer_chunk(1, 1, 0, &[1; 4]).unwrap();
    w.write_buffer_chunk(1, 2, 0, &[2; 8]).unwrap();
    w.write_buffer_chunk(1, 1, 4, &[3; 4]).unwrap();
    let bytes = w.finish().unwrap().0;
    let read = read_all(&bytes).unwrap();
    assert_eq!(read.buffers[&(1, 1)], [1, 1, 1, 1, 3, 3, 3, 3]);
}

#[test]
fn large_state_travels_in_several_parts() {
    let mut session = rich_session(1);
    session.programs[0].origin = ProgramOrigin::Source(vec![b'x'; MAX_STATE_PART as usize + 100]);
    let state: VgpuState = VgpuStateV1 {
        profile: profile(),
        device: device("H200"),
        sessions: vec![session.into()],
    }
    .into();
    let bytes = write_stream(&state, 1 << 20);
    let state_chunks = split(&bytes).iter().filter(|c| c.kind == 1).count();
    assert_eq!(state_chunks, 2);
    assert_eq!(read_all(&bytes).unwrap().state, state);
}

#[test]
fn progress_is_reported_on_both_sides() {
    let state = buffers_state(&[10_000]);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut w = StreamWriter::new(Vec::new()).unwrap();
    let log = seen.clone();
    w.on_progress(move |p| log.lock().unwrap().push(*p));
    w.write_state(&state).unwrap();
    for offset in (0..10_000).step_by(2500) {
        w.write_buffer_chunk(1, 1, offset, &[0; 2500]).unwrap();
    }
    let bytes = w.finish().unwrap().0;
    let written = seen.lock().unwrap().clone();
    assert_eq!(written.len(), 6);
    assert!(written.iter().all(|p| p.buffer_total == 10_000));
    assert_eq!(written[4].buffer_bytes, 10_000);
    assert_eq!(written[5].stream_bytes, bytes.len() as u64);

    let read_log = Arc::new(Mutex::new(Vec::new()));
    let log = read_log.clone();
    let mut r = StreamReader::new(&bytes[..]).unwrap();
    r.on_progress(move |p| log.lock().unwrap().push(*p));
    while r.next_item().unwrap().is_some() {}
    assert_eq!(*read_log.lock().unwrap(), written);
    assert_eq!(r.bytes_read(), bytes.len() as u64);
    assert_eq!(r.format_version(), 1);
}

#[test]
fn writer_enforces_the_order_of_a_stream() {
    let state = buffers_state(&[8]);
    let mut w = StreamWriter::new(Vec::new()).unwrap();
    assert!(matches!(
        w.write_buffer_chunk(1, 1, 0, &[0; 8]),
        Err(WriteError::NoState)
    ));
    w.write_state(&state).unwrap();
    assert!(matches!(w.write_state(&state), Err(WriteError::StateTwice)));
    let err = w.write_buffer_chunk(1, 9, 0, &[0; 8]).unwrap_err();
    assert!(matches!(
        err,
        WriteError::Buffer(BufferError::Unknown {
            session: 1,
            buffer: 9
        })
    ));
    let err = w.write_buffer_chunk(1, 1, 4, &[0; 4]).unwrap_err();
    assert!(matches!(
        err,
        WriteError::Buffer(BufferError::OutOfOrder { expected: 0, .. })
    ));
    let err = w.write_buffer_chunk(1, 1, 0, &[0; 9]).unwrap_err();
    assert!(matches!(
        err,
        WriteError::Buffer(BufferError::Overrun {
            end: 9,
            size: 8,
            ..
        })
    ));
    w.write_buffer_chunk(1, 1, 0, &[0; 5]).unwrap();
    let err = w.finish().unwrap_err();
    let WriteError::Buffer(cause) = err else {
        panic!("expected a buffer error, got {err}");
    };
    assert_eq!(
        cause.to_string(),
        "session 1 buffer 1: 5 of its 8 bytes streamed"
    );
    let w = StreamWriter::new(Vec::new()).unwrap();
    assert!(matches!(w.finish(), Err(WriteError::NoState)));
}

#[test]
fn writer_refuses_an_inconsistent_state() {
    let mut session = rich_session(1);
    session.queues[0].context = 77;
    let state: VgpuState = VgpuStateV1 {
        profile: profile(),
        device: device("x"),
        sessions: vec![session.into()],
    }
    .into();
    let mut w = StreamWriter::new(Vec::new()).unwrap();
    assert!(matches!(
        w.write_state(&state),
        Err(WriteError::Invalid(StateError::Dangling { .. }))
    ));
}

/// A sink that fails after `left` bytes.
struct FailingSink {
    left: usize,
}

impl std::io::Write for FailingSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Err(std::io::Error::other("disk full"));
        }
        let n = buf.len().min(self.left);
        self.left -= n;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn writer_is_unusable_after_an_io_error() {
    let state = buffers_state(&[8]);
    let mut w = StreamWriter::new(FailingSink { left: 100 }).unwrap();
    assert!(matches!(w.write_state(&state), Err(WriteError::Io(_))));
    assert!(matches!(
        w.write_buffer_chunk(1, 1, 0, &[0; 8]),
        Err(WriteError::Failed)
    ));
}

#[test]
fn reader_skips_unknown_optional_chunks_and_refuses_required_ones() {
    let bytes = write_stream(&buffers_state(&[16]), 8);
    let mut chunks = body(&bytes);
    chunks.insert(1, (0x8000_0042, b"a newer build's hint".to_vec()));
    let read = read_all(&seal(1, &chunks)).unwrap();
    assert_eq!(read.buffers[&(1, 1)], content(1, 1, 0, 16));

    chunks[1].0 = 0x42;
    let err = read_all(&seal(1, &chunks)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "chunk 1 has unknown kind 0x42 (written by a newer build?)"
    );
}

/// Raw chunks: kind and payload.
type Chunks = Vec<(u32, Vec<u8>)>;

#[test]
fn reader_refuses_sealed_streams_that_break_the_rules() {
    let bytes = write_stream(&buffers_state(&[16]), 8);
    let chunks = body(&bytes);
    let (state, data0, data1) = (chunks[0].clone(), chunks[1].clone(), chunks[2].clone());
    let cases: Vec<(Chunks, &str)> = vec![
        (
            vec![data0.clone(), state.clone()],
            "chunk 0: buffer data before the state",
        ),
        (vec![], "chunk 0: end of the stream before a whole state"),
        (
            vec![state.clone(), state.clone(), data0.clone(), data1.clone()],
            "chunk 1: a second state",
        ),
        (
            vec![state.clone(), data1.clone(), data0.clone()],
            "chunk 1: bad buffer data",
        ),
        (
            vec![state.clone(), data0.clone()],
            "the stream ends with a buffer incomplete",
        ),
        (
            vec![state.clone(), (2, vec![0; 10])],
            "chunk 1: buffer data chunk shorter than its header",
        ),
        (
            vec![(1, vec![0; 4])],
            "chunk 0: state chunk shorter than its header",
        ),
    ];
    for (chunks, message) in cases {
        let err = read_all(&seal(1, &chunks)).unwrap_err();
        assert_eq!(err.to_string(), message);
    }
}

#[test]
fn reader_refuses_end_chunks_that_do_not_match() {
    let bytes = write_stream(&buffers_state(&[16]), 8);
    let chunks = body(&bytes);
    let end = split(&bytes).last().unwrap().payload.clone();
    for (field, message) in [
        (0, "the end chunk counts 4 chunks, the stream has 3"),
        (8, "the end chunk counts"),
        (
            16,
            "the end chunk counts 17 buffer bytes, the stream has 16",
        ),
        (24, "whole-stream checksum mismatch"),
    ] {
        let mut forged = end.clone();
        forged[field] = forged[field].wrapping_add(1);
        let mut with_end = chunks.clone();
        with_end.push((3, forged));
        let err = read_all(&seal(1, &with_end)).unwrap_err();
        assert!(err.to_string().starts_with(message), "{err}");
    }
}

#[test]
fn reader_refuses_trailing_data_unless_allowed() {
    let mut bytes = write_stream(&buffers_state(&[16]), 8);
    let len = bytes.len() as u64;
    bytes.extend_from_slice(b"more");
    let err = read_all(&bytes).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("unexpected data after the end chunk, at byte {len}")
    );
    let mut r = StreamReader::new(&bytes[..]).unwrap().allow_trailing_data();
    let mut last = None;
    while let Some(item) = r.next_item().unwrap() {
        if let Item::End(summary) = item {
            last = Some(summary);
        }
    }
    assert_eq!(last.unwrap().stream_bytes, len);
}

#[test]
fn reader_fails_for_good_after_an_error() {
    let bytes = write_stream(&buffers_state(&[16]), 8);
    let mut r = StreamReader::new(&bytes[..bytes.len() - 1]).unwrap();
    let err = loop {
        match r.next_item() {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("a truncated stream ended"),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, ReadError::Truncated { .. }));
    assert!(matches!(r.next_item(), Err(ReadError::Failed)));
}
