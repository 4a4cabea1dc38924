//! A checkpoint written by the build before incremental checkpoints
//! (commit 23e972e: `write_stream(&rich_state(), 1000)` of `common`, in
//! `fixtures/v1-rich.ckpt`) still reads whole, and is what this build
//! still writes for a stream without an identity.

mod common;

use std::io::Cursor;

use common::*;
use vgpu_migration::*;

const FIXTURE: &[u8] = include_bytes!("fixtures/v1-rich.ckpt");

#[test]
fn a_checkpoint_of_the_previous_build_reads_whole() {
    let read = read_all(FIXTURE).unwrap();
    let state = rich_state();
    assert_eq!(read.state, state);
    for b in state.streamed_buffers() {
        let expected = content(b.session, b.buffer, 0, b.size as usize);
        assert_eq!(read.buffers[&(b.session, b.buffer)], expected);
    }
    assert_eq!(read.summary.identity, None);
    assert_eq!(read.summary.stream_bytes, FIXTURE.len() as u64);
}

#[test]
fn this_build_writes_the_same_bytes_without_an_identity() {
    assert_eq!(write_stream(&rich_state(), 1000), FIXTURE);
}

#[test]
fn a_checkpoint_without_an_identity_cannot_be_a_base() {
    assert_eq!(base_id(&mut Cursor::new(FIXTURE)).unwrap(), None);
    let mut delta = StreamWriter::new_incremental(Vec::new(), BaseId(5), "old").unwrap();
    delta.write_state(&rich_state()).unwrap();
    for b in rich_state().streamed_buffers() {
        delta
            .write_base_ref(b.session, b.buffer, b.session, b.buffer)
            .unwrap();
    }
    let delta = delta.finish().unwrap().0;
    assert!(matches!(
        merge(FIXTURE, delta.as_slice(), Vec::new()),
        Err(MergeError::WrongBase { .. })
    ));
}
