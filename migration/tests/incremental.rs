//! Incremental checkpoints: a stream that carries only the buffers that
//! changed and refers to its base for the rest, and the merge that turns
//! it and its base into the whole checkpoint a restore reads.

mod common;

use std::io::Cursor;

use common::*;
use vgpu_migration::stream::MAX_BUFFER_CHUNK;
use vgpu_migration::*;

/// Three buffers, the middle one over a chunk long.
fn sizes() -> [u64; 3] {
    [100, MAX_BUFFER_CHUNK as u64 + 3, 50]
}

/// A whole checkpoint of `buffers_state(sizes)` whose contents are
/// `content(seed, id, ..)`, written in the order of `order`.
fn whole(seed: u64, order: &[u64]) -> Vec<u8> {
    let state = buffers_state(&sizes());
    let mut w = StreamWriter::with_identity(Vec::new(), BaseId(1000 + seed as u128)).unwrap();
    w.write_state(&state).unwrap();
    for &id in order {
        let size = sizes()[id as usize - 1] as usize;
        w.write_buffer_chunk(1, id, 0, &content(seed, id, 0, size))
            .unwrap();
    }
    w.finish().unwrap().0
}

/// An incremental checkpoint on `base`: buffer 2 changed (its contents
/// now those of seed 9), buffers 1 and 3 as in the base.
fn delta(base: BaseId) -> Vec<u8> {
    let state = buffers_state(&sizes());
    let mut w = StreamWriter::new_incremental(Vec::new(), base, "/srv/base.ckpt").unwrap();
    w.write_state(&state).unwrap();
    w.write_buffer_chunk(1, 2, 0, &content(9, 2, 0, sizes()[1] as usize))
        .unwrap();
    w.write_base_ref(1, 1, 1, 1).unwrap();
    w.write_base_ref(1, 3, 1, 3).unwrap();
    w.finish().unwrap().0
}

fn id_of(bytes: &[u8]) -> BaseId {
    base_id(&mut Cursor::new(bytes))
        .unwrap()
        .expect("an identity")
}

#[test]
fn a_base_is_named_by_its_identity_chunk() {
    let base = whole(1, &[1, 2, 3]);
    let summary = read_all(&base).unwrap().summary;
    assert_eq!(id_of(&base), BaseId(1001));
    assert_eq!(summary.identity, Some(BaseId(1001)));
    let delta = delta(id_of(&base));
    assert!(matches!(
        base_id(&mut Cursor::new(&delta)),
        Err(ReadError::UnsupportedVersion { version: 2, .. })
    ));
    let plain = write_stream(&buffers_state(&[8]), 8);
    assert_eq!(base_id(&mut Cursor::new(&plain)).unwrap(), None);
    let mut damaged = base.clone();
    damaged[30] ^= 1;
    assert!(base_id(&mut Cursor::new(&damaged)).is_err());
    assert_ne!(BaseId::random(), BaseId::random());
}

#[test]
fn the_end_chunks_stream_crc_does_not_tell_contents_apart() {
    // Why checkpoints carry an identity: each chunk is followed by its
    // own CRC-32, which returns the register to a constant, so the
    // whole-stream CRC is the same for any contents of the same layout.
    let stream = |fill: u8| {
        let mut w = StreamWriter::new(Vec::new()).unwrap();
        w.write_state(&buffers_state(&[8])).unwrap();
        w.write_buffer_chunk(1, 1, 0, &[fill; 8]).unwrap();
        w.finish().unwrap().0
    };
    let crc = |bytes: &[u8]| bytes[bytes.len() - 8..bytes.len() - 4].to_vec();
    let (one, other) = (stream(1), stream(2));
    assert_ne!(one, other);
    assert_eq!(crc(&one), crc(&other));
}

#[test]
fn an_incremental_checkpoint_carries_only_what_changed() {
    let base = whole(1, &[1, 2, 3]);
    let delta = delta(id_of(&base));
    assert!(delta.len() < base.len());
    let mut reader = StreamReader::new(delta.as_slice()).unwrap();
    assert_eq!(reader.format_version(), 2);
    let mut items = Vec::new();
    while let Some(item) = reader.next_item().unwrap() {
        items.push(match item {
            Item::Base { id, path } => {
                assert_eq!((id, path.as_str()), (id_of(&base), "/srv/base.ckpt"));
                "base"
            }
            Item::State(_) => "state",
            Item::BufferChunk { buffer, .. } => {
                assert_eq!(buffer, 2);
                "data"
            }
            Item::BaseRef {
                buffer,
                base_buffer,
                size,
                ..
            } => {
                assert_eq!((buffer, size), (base_buffer, sizes()[buffer as usize - 1]));
                "ref"
            }
            Item::End(summary) => {
                assert_eq!(summary.buffer_bytes, sizes()[1]);
                "end"
            }
        });
    }
    assert_eq!(
        items,
        ["base", "state", "data", "data", "ref", "ref", "end"]
    );
}

#[test]
fn merging_with_its_base_gives_the_whole_checkpoint() {
    let base = whole(1, &[1, 2, 3]);
    let delta = delta(id_of(&base));
    let (merged, summary) = merge(base.as_slice(), delta.as_slice(), Vec::new()).unwrap();
    // The delta's own data first, then the base's, in the base's order;
    // a merge has no identity (nothing is taken against it).
    let mut expected = StreamWriter::new(Vec::new()).unwrap();
    expected.write_state(&buffers_state(&sizes())).unwrap();
    for (seed, id) in [(9, 2), (1, 1), (1, 3)] {
        let size = sizes()[id as usize - 1] as usize;
        expected
            .write_buffer_chunk(1, id, 0, &content(seed, id, 0, size))
            .unwrap();
    }
    assert_eq!(merged, expected.finish().unwrap().0);
    assert_eq!(summary.stream_bytes, merged.len() as u64);
}

#[test]
fn a_merge_refuses_a_base_other_than_its_own() {
    let base = whole(1, &[1, 2, 3]);
    let delta = delta(id_of(&base));
    let other = whole(2, &[1, 2, 3]);
    assert!(matches!(
        merge(other.as_slice(), delta.as_slice(), Vec::new()),
        Err(MergeError::WrongBase { .. })
    ));
    assert!(matches!(
        merge(base.as_slice(), base.as_slice(), Vec::new()),
        Err(MergeError::NotIncremental)
    ));
    let mut damaged = base.clone();
    let at = damaged.len() / 2;
    damaged[at] ^= 1;
    assert!(matches!(
        merge(damaged.as_slice(), delta.as_slice(), Vec::new()),
        Err(MergeError::Base(_))
    ));
}

#[test]
fn base_refs_need_an_incremental_stream_and_a_known_buffer() {
    let state = buffers_state(&sizes());
    let mut w = StreamWriter::new(Vec::new()).unwrap();
    w.write_state(&state).unwrap();
    assert!(matches!(
        w.write_base_ref(1, 1, 1, 1),
        Err(WriteError::NotIncremental)
    ));
    let mut w = StreamWriter::new_incremental(Vec::new(), BaseId(1), "").unwrap();
    w.write_state(&state).unwrap();
    assert!(matches!(
        w.write_base_ref(1, 7, 1, 1),
        Err(WriteError::Buffer(_))
    ));
    // A buffer neither streamed nor referred to leaves the stream open.
    w.write_base_ref(1, 1, 1, 1).unwrap();
    assert!(w.finish().is_err());
}

#[test]
fn a_delta_that_needs_nothing_of_its_base_merges_without_reading_it() {
    let state = buffers_state(&[8]);
    let mut w = StreamWriter::new_incremental(Vec::new(), BaseId(3), "gone").unwrap();
    w.write_state(&state).unwrap();
    w.write_buffer_chunk(1, 1, 0, &[7; 8]).unwrap();
    let delta = w.finish().unwrap().0;
    let (merged, _) = merge(&b"not even a stream"[..], delta.as_slice(), Vec::new()).unwrap();
    assert_eq!(read_all(&merged).unwrap().buffers[&(1, 1)], [7; 8]);
}
