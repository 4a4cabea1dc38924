//! Truncated, corrupted and foreign streams are refused with a clear error,
//! and nothing from a damaged chunk is ever handed out.

mod common;

use common::*;
use vgpu_migration::stream::HEADER_LEN;
use vgpu_migration::*;

/// A small stream of the rich state (every object kind), a few KiB long.
fn small_stream() -> Vec<u8> {
    let mut session = rich_session(7);
    session.buffers[0].size = 1200;
    session.buffers[1].parent = Some(SubRegion {
        parent: 100,
        origin: 100,
    });
    let state: VgpuState = VgpuStateV1 {
        profile: profile(),
        device: device("H200"),
        sessions: vec![session.into()],
    }
    .into();
    write_stream(&state, 500)
}

/// Reads items until an error; checks that every buffer chunk handed out
/// holds the right bytes and started before `damage_at`. Returns the error.
fn read_until_error(bytes: &[u8], damage_at: usize) -> ReadError {
    let mut r = match StreamReader::new(bytes) {
        Ok(r) => r,
        Err(e) => return e,
    };
    loop {
        match r.next_item() {
            Ok(Some(Item::BufferChunk {
                session,
                buffer,
                offset,
                data,
            })) => {
                assert_eq!(data, content(session, buffer, offset, data.len()));
                assert!(
                    r.bytes_read() as usize <= damage_at,
                    "handed out data from a damaged or missing chunk"
                );
            }
            Ok(Some(Item::End(_))) | Ok(None) => {
                panic!("damage at byte {damage_at} was not noticed")
            }
            Ok(Some(Item::State(_))) => {}
            Ok(Some(Item::Base { .. } | Item::BaseRef { .. })) => {
                panic!("a whole stream never refers to a base")
            }
            Err(e) => return e,
        }
    }
}

#[test]
fn truncation_at_every_byte_is_refused_with_its_position() {
    let bytes = small_stream();
    assert!(read_all(&bytes).is_ok());
    for cut in 0..bytes.len() {
        match read_until_error(&bytes[..cut], cut) {
            ReadError::Truncated { at } => assert_eq!(at, cut as u64),
            other => panic!("cut at {cut}: {other}"),
        }
    }
}

#[test]
fn truncation_at_every_chunk_boundary_of_a_long_stream() {
    let bytes = write_stream(&buffers_state(&[300_000, 70_000, 5]), 4096);
    let chunks = split(&bytes);
    assert!(chunks.len() > 90);
    for chunk in &chunks {
        let end = chunk.at + 12 + chunk.payload.len() + 4;
        for cut in [chunk.at, chunk.at + 12, end - 4, end - 1] {
            let err = read_until_error(&bytes[..cut], cut);
            assert_eq!(err.to_string(), format!("truncated at byte {cut}"));
        }
    }
}

#[test]
fn truncation_at_random_points_is_refused() {
    let bytes = write_stream(&rich_state(), 777);
    let mut rng = Rng(0x5eed);
    for _ in 0..500 {
        let cut = rng.below(bytes.len());
        assert!(matches!(
            read_until_error(&bytes[..cut], cut),
            ReadError::Truncated { .. }
        ));
    }
}

#[test]
fn every_single_byte_corruption_is_refused() {
    let bytes = small_stream();
    let chunks = split(&bytes);
    let mut damaged = bytes.clone();
    for at in 0..bytes.len() {
        // Data handed out must come from chunks that end before the damage.
        let chunk_start = chunks
            .iter()
            .rev()
            .find(|c| c.at <= at)
            .map_or(HEADER_LEN as usize, |c| c.at);
        for flip in [0x01, 0x80, 0xff] {
            damaged[at] ^= flip;
            read_until_error(&damaged, chunk_start);
            damaged[at] = bytes[at];
        }
    }
}

#[test]
fn every_value_of_every_byte_of_a_tiny_stream_is_refused() {
    let bytes = write_stream(&buffers_state(&[40]), 16);
    let chunks = split(&bytes);
    let mut damaged = bytes.clone();
    for at in 0..bytes.len() {
        let chunk_start = chunks
            .iter()
            .rev()
            .find(|c| c.at <= at)
            .map_or(HEADER_LEN as usize, |c| c.at);
        for value in 0..=255u8 {
            if value == bytes[at] {
                continue;
            }
            damaged[at] = value;
            read_until_error(&damaged, chunk_start);
        }
        damaged[at] = bytes[at];
    }
}

#[test]
fn a_damaged_payload_is_reported_as_a_checksum_mismatch() {
    let bytes = small_stream();
    let chunks = split(&bytes);
    let third = &chunks[2];
    let mut damaged = bytes.clone();
    damaged[third.at + 12 + 30] ^= 0x10;
    assert_eq!(
        read_until_error(&damaged, third.at).to_string(),
        format!("checksum mismatch in chunk 2 at byte {}", third.at)
    );
}

#[test]
fn a_lying_length_is_refused_before_anything_is_allocated() {
    let bytes = small_stream();
    let mut damaged = bytes.clone();
    let at = HEADER_LEN as usize;
    damaged[at + 4..at + 12].copy_from_slice(&(1u64 << 40).to_le_bytes());
    assert_eq!(
        read_until_error(&damaged, at).to_string(),
        format!(
            "chunk 0 at byte {at} claims 1099511627776 bytes, more than the 16777224 a state chunk may hold"
        )
    );
}

#[test]
fn foreign_versions_and_files_are_refused() {
    let bytes = small_stream();
    for version in [0u32, 3, 0xffff_ffff] {
        let mut foreign = bytes.clone();
        foreign[8..12].copy_from_slice(&version.to_le_bytes());
        assert_eq!(
            StreamReader::new(&foreign[..]).unwrap_err().to_string(),
            format!("unsupported format version {version} (this build reads 1..=2)")
        );
    }
    // A newer build's stream, checksums and all, is still refused.
    let newer = seal(3, &body(&bytes));
    assert!(matches!(
        StreamReader::new(&newer[..]),
        Err(ReadError::UnsupportedVersion { version: 3, .. })
    ));
    for other in [&b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0"[..], b"QEVM", b"X"] {
        assert_eq!(
            StreamReader::new(other).unwrap_err().to_string(),
            "not a vGPU checkpoint (bad magic)"
        );
    }
    let mut flagged = bytes.clone();
    flagged[12] = 1;
    assert_eq!(
        StreamReader::new(&flagged[..]).unwrap_err().to_string(),
        "reserved header flags 0x1 are set"
    );
}
