//! A pre-copy sends the vGPU's objects first: before its copy rounds (the
//! whole checkpoint's state is known only once they end, seconds later
//! with large buffers), the source captures the objects alone, in a short
//! pause of the guest, and opens the stream with them. The destination
//! builds them at once and drops them, so the drivers' caches hold the
//! programs (PoCL's `POCL_CACHE_DIR`, CUDA's `CUDA_CACHE_PATH`, private
//! to the worker) long before the restore ahead and the stop need them.
//!
//! On the channel: `MAGIC`, the state's length (u64, little-endian), the
//! state (`vgpu_migration::codec`), then the whole checkpoint stream. A
//! stream without the opening (an older source) is taken as it is.

use std::borrow::Cow;
use std::sync::Arc;

use vgpu_migration as m;

use crate::vgpu::Vgpu;

const MAGIC: &[u8; 8] = b"VGPUOBJ1";
const HEAD: usize = 16;
/// The largest objects' state taken (programs' sources and binaries).
const MAX_STATE: u64 = 64 << 20;

/// The opening of a pre-copy stream sending `state` first.
pub(super) fn encode(state: &m::VgpuState) -> Vec<u8> {
    let body = m::codec::to_bytes(state);
    let mut out = Vec::with_capacity(HEAD + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

#[derive(Debug, thiserror::Error)]
pub enum OpeningError {
    #[error("the objects sent first take {0} bytes, over the limit of {MAX_STATE}")]
    TooLarge(u64),
}

/// The objects sent first, or why they cannot be read.
pub(super) type Objects = Result<m::VgpuState, String>;

/// The destination's reading of the opening, as the bytes come.
#[derive(Default)]
pub(super) struct Opening {
    /// What came while the opening is not whole.
    head: Vec<u8>,
    /// Past the opening: every byte is the stream's.
    passed: bool,
}

impl Opening {
    /// Takes the next `bytes`; answers those that belong to the stream,
    /// and the objects once they arrived whole (or why they cannot be
    /// read: they are only a head start, the stream goes on).
    pub(super) fn take<'a>(
        &mut self,
        bytes: &'a [u8],
    ) -> Result<(Cow<'a, [u8]>, Option<Objects>), OpeningError> {
        if self.passed {
            return Ok((Cow::Borrowed(bytes), None));
        }
        self.head.extend_from_slice(bytes);
        let seen = self.head.len().min(MAGIC.len());
        if self.head[..seen] != MAGIC[..seen] {
            return Ok((self.pass(0), None));
        }
        if self.head.len() < HEAD {
            return Ok((Cow::Borrowed(&[]), None));
        }
        let len = u64::from_le_bytes(self.head[8..HEAD].try_into().expect("8 bytes"));
        if len > MAX_STATE {
            return Err(OpeningError::TooLarge(len));
        }
        let end = HEAD + len as usize;
        if self.head.len() < end {
            return Ok((Cow::Borrowed(&[]), None));
        }
        let state = m::codec::from_bytes::<m::VgpuState>(&self.head[HEAD..end])
            .map_err(|e| e.to_string())
            .and_then(|s| s.validate().map(|()| s).map_err(|e| e.to_string()));
        Ok((self.pass(end), Some(state)))
    }

    /// The opening ends at `end` of what came: the rest is the stream's.
    fn pass(&mut self, end: usize) -> Cow<'static, [u8]> {
        self.passed = true;
        let mut head = std::mem::take(&mut self.head);
        Cow::Owned(head.split_off(end))
    }
}

/// Builds the objects of `state` on the vGPU's devices, on a thread of
/// its own, and drops them: what counts is what the drivers cached.
pub(super) fn build_ahead(vgpu: Arc<Vgpu>, state: m::VgpuState) {
    let build = move || -> Result<usize, super::Error> {
        let executors = vgpu.executors();
        let sessions: Vec<m::LatestSession> = state
            .latest()
            .sessions
            .into_iter()
            .map(m::SessionState::latest)
            .collect();
        for session in &sessions {
            drop(super::rebuild_session(&executors, session)?);
        }
        Ok(sessions.len())
    };
    let spawned = std::thread::Builder::new()
        .name("vgpu-prebuild".into())
        .spawn(move || match build() {
            Ok(sessions) => log::info!(
                "pre-copy: built the objects sent first ({sessions} session(s)) ahead of the buffers"
            ),
            // The restore ahead builds (and reports) them anyway.
            Err(e) => log::info!(
                "pre-copy: cannot build the objects sent first: {}",
                crate::startup::error_chain(&e)
            ),
        });
    if let Err(e) = spawned {
        log::info!("pre-copy: no thread to build the objects sent first: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> m::VgpuState {
        m::VgpuState::V1(m::VgpuStateV1 {
            profile: Default::default(),
            device: Default::default(),
            sessions: Vec::new(),
        })
    }

    /// Feeds `bytes` in pieces of `step`; answers the stream's bytes and
    /// whether the objects came whole.
    fn feed(bytes: &[u8], step: usize) -> (Vec<u8>, bool) {
        let mut opening = Opening::default();
        let (mut stream, mut objects) = (Vec::new(), false);
        for piece in bytes.chunks(step) {
            let (rest, got) = opening.take(piece).expect("a valid opening");
            stream.extend_from_slice(&rest);
            objects |= got.is_some_and(|s| s.is_ok());
        }
        (stream, objects)
    }

    #[test]
    fn the_objects_sent_first_are_split_from_the_stream_however_the_bytes_come() {
        let mut bytes = encode(&state());
        bytes.extend_from_slice(b"the stream");
        for step in [1, 3, 16, bytes.len()] {
            assert_eq!(
                feed(&bytes, step),
                (b"the stream".to_vec(), true),
                "step {step}"
            );
        }
    }

    #[test]
    fn a_stream_without_the_opening_is_taken_as_it_is() {
        for step in [1, 4, 64] {
            assert_eq!(
                feed(b"VGPU-not-an-opening", step),
                (b"VGPU-not-an-opening".to_vec(), false)
            );
        }
    }

    #[test]
    fn an_oversized_or_garbled_opening_is_refused_or_reported() {
        let mut huge = MAGIC.to_vec();
        huge.extend_from_slice(&(MAX_STATE + 1).to_le_bytes());
        assert!(matches!(
            Opening::default().take(&huge),
            Err(OpeningError::TooLarge(_))
        ));
        let mut garbled = MAGIC.to_vec();
        garbled.extend_from_slice(&3u64.to_le_bytes());
        garbled.extend_from_slice(b"xyzrest");
        let (rest, objects) = Opening::default()
            .take(&garbled)
            .expect("a length in bounds");
        assert_eq!(&rest[..], b"rest");
        assert!(objects.is_some_and(|s| s.is_err()));
    }
}
