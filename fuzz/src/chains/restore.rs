//! Checkpoint streams for `backend_chains`: a real checkpoint of the
//! session the input built, then damaged — the stream's bytes (stopped by
//! the chunk checksums), or its state re-sealed so that the damage gets
//! past the checksums to the decoder, the consistency checks and the
//! rebuild on the device.

use arbitrary::{Result, Unstructured};
use vgpu_migration::{Item, StreamReader, StreamWriter, VgpuState};

/// What is done to the checkpoint before it is restored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// Restored as taken: must succeed.
    None,
    /// Bytes of the stream changed, inserted or cut.
    StreamBytes,
    /// Bytes of the encoded state changed, then written as a valid stream.
    StateBytes,
    /// Buffer contents moved or resized, then written as a valid stream.
    BufferChunks,
}

/// Changes a few bytes of `bytes`; `in_place` keeps its length (a
/// state's fields stay where the decoder looks for them).
fn damage(u: &mut Unstructured<'_>, bytes: &mut Vec<u8>, in_place: bool) -> Result<()> {
    let kinds = if in_place { 0u8..=2 } else { 0u8..=5 };
    for _ in 0..u.int_in_range(1u8..=4)? {
        if bytes.is_empty() {
            return Ok(());
        }
        let at = u.int_in_range(0..=bytes.len() - 1)?;
        match u.int_in_range(kinds.clone())? {
            0 => bytes[at] = u.arbitrary()?,
            1 => bytes[at] ^= 1 << u.int_in_range(0u8..=7)?,
            2 => {
                let value: u64 = *u.choose(&[0, 1, u64::MAX, 1 << 32, 1 << 40, 0x7fff_ffff])?;
                let end = (at + 8).min(bytes.len());
                bytes[at..end].copy_from_slice(&value.to_le_bytes()[..end - at]);
            }
            3 => bytes.truncate(at),
            4 => bytes.insert(at, u.arbitrary()?),
            _ => {
                bytes.remove(at);
            }
        }
    }
    Ok(())
}

/// A buffer chunk as read from a stream.
struct Chunk {
    session: u64,
    buffer: vgpu_migration::ObjectId,
    offset: u64,
    data: Vec<u8>,
}

/// The state and the buffer chunks of a valid stream.
fn read(stream: &[u8]) -> Option<(VgpuState, Vec<Chunk>)> {
    let mut reader = StreamReader::new(stream).ok()?;
    let mut state = None;
    let mut chunks = Vec::new();
    loop {
        match reader.next_item().ok()? {
            Some(Item::State(s)) => state = Some(*s),
            Some(Item::BufferChunk {
                session,
                buffer,
                offset,
                data,
            }) => chunks.push(Chunk {
                session,
                buffer,
                offset,
                data: data.to_vec(),
            }),
            Some(Item::End(_)) | None => break,
            // Incremental checkpoints are merged before a restore reads them.
            Some(Item::Base { .. } | Item::BaseRef { .. }) => return None,
        }
    }
    Some((state?, chunks))
}

/// A stream of `state` and `chunks` with correct checksums, whatever they
/// hold; `None` where the writer itself refuses them (it validates).
fn write(state: &VgpuState, chunks: &[Chunk]) -> Option<Vec<u8>> {
    let mut writer = StreamWriter::new(Vec::new()).ok()?;
    writer.write_state(state).ok()?;
    for c in chunks {
        writer
            .write_buffer_chunk(c.session, c.buffer, c.offset, &c.data)
            .ok()?;
    }
    writer.finish().ok().map(|(bytes, _)| bytes)
}

/// `checkpoint` damaged as the input says; the mutation used.
pub fn mutate(u: &mut Unstructured<'_>, checkpoint: &[u8]) -> Result<(Mutation, Vec<u8>)> {
    let mutation = *u.choose(&[
        Mutation::None,
        Mutation::StreamBytes,
        Mutation::StateBytes,
        Mutation::StateBytes,
        Mutation::BufferChunks,
    ])?;
    let mut stream = checkpoint.to_vec();
    match mutation {
        Mutation::None => {}
        Mutation::StreamBytes => damage(u, &mut stream, false)?,
        Mutation::StateBytes => {
            let Some((state, chunks)) = read(checkpoint) else {
                return Ok((Mutation::None, stream));
            };
            // A state that no longer decodes cannot be written as one (the
            // decoder's refusals are `state_decode`'s, in migration/fuzz):
            // a few tries for one that does.
            // Most of a small state is the device profile, and a damaged
            // profile is refused before any session is looked at: three
            // times in four the profile is put back.
            let keep_profile = !u.ratio(1u8, 4)?;
            let encoded = state.to_bytes();
            for _ in 0..8 {
                let mut bytes = encoded.clone();
                damage(u, &mut bytes, true)?;
                if let Some(resealed) = VgpuState::from_bytes(&bytes)
                    .ok()
                    .map(|damaged| match (damaged, &state) {
                        (VgpuState::V1(mut d), VgpuState::V1(s)) if keep_profile => {
                            d.profile = s.profile.clone();
                            d.device = s.device.clone();
                            VgpuState::V1(d)
                        }
                        (damaged, _) => damaged,
                    })
                    .filter(|s| *s != state)
                    .and_then(|s| write(&s, &chunks))
                {
                    stream = resealed;
                    break;
                }
            }
        }
        Mutation::BufferChunks => {
            let Some((state, mut chunks)) = read(checkpoint) else {
                return Ok((Mutation::None, stream));
            };
            if let Ok(c) = u.choose_iter(chunks.iter_mut()) {
                match u.int_in_range(0u8..=2)? {
                    0 => c.offset = *u.choose(&[1, 4095, 1 << 20, u64::MAX - 3])?,
                    1 => c.data.truncate(c.data.len() / 2),
                    _ => c.data.extend_from_slice(&[0xa5; 16]),
                }
            }
            if let Some(resealed) = write(&state, &chunks) {
                stream = resealed;
            }
        }
    }
    Ok((mutation, stream))
}
