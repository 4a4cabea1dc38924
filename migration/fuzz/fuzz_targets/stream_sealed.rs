//! Structure-aware: the input is a list of chunks (`u32 kind`, `u16 len`,
//! payload), sealed with valid checksums and a matching end chunk, so the
//! fuzzer reaches the state decoder, validation and buffer bookkeeping
//! instead of stopping at the first checksum.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vgpu_migration::stream::MAGIC;
use vgpu_migration::StreamReader;

fn push_chunk(out: &mut Vec<u8>, kind: u32, payload: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(payload);
    let crc = crc32fast::hash(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

fn seal(mut data: &[u8]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    let (mut chunks, mut state, mut buffers) = (0u64, 0u64, 0u64);
    while data.len() >= 6 {
        let kind = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
        let len = usize::from(u16::from_le_bytes([data[4], data[5]])).min(data.len() - 6);
        let payload = &data[6..6 + len];
        data = &data[6 + len..];
        push_chunk(&mut out, kind, payload);
        chunks += 1;
        match kind {
            1 if state == 0 && payload.len() >= 8 => {
                state = u64::from_le_bytes(payload[..8].try_into().expect("8 bytes"))
            }
            2 => buffers += (payload.len() as u64).saturating_sub(24),
            _ => {}
        }
    }
    let mut end = chunks.to_le_bytes().to_vec();
    end.extend_from_slice(&state.to_le_bytes());
    end.extend_from_slice(&buffers.to_le_bytes());
    end.extend_from_slice(&crc32fast::hash(&out).to_le_bytes());
    push_chunk(&mut out, 3, &end);
    out
}

fuzz_target!(|data: &[u8]| {
    let stream = seal(data);
    let Ok(mut reader) = StreamReader::new(&stream[..]) else {
        return;
    };
    while let Ok(Some(_)) = reader.next_item() {}
});
