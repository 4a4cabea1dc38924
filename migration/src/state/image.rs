//! OpenCL images (session state version 4). An image's contents travel in
//! the stream's buffer-data chunks like a buffer's, tightly packed (rows of
//! `width` pixels, then rows of the next slice or layer), under the image's
//! id, which no buffer of the session shares.

use super::objects::{GuestRef, ObjectId};
use crate::codec::record;

record! {
    pub struct ImageState {
        pub id: ObjectId,
        pub guest: Option<GuestRef>,
        pub context: ObjectId,
        /// `cl_mem_flags` as the guest passed them.
        pub flags: u64,
        /// `cl_image_format`.
        pub channel_order: u32,
        pub channel_type: u32,
        /// `cl_mem_object_type`.
        pub image_type: u32,
        /// Width, height and depth as the guest gave them (0 where the type
        /// has none).
        pub width: u64,
        pub height: u64,
        pub depth: u64,
        pub array_size: u64,
        /// Bytes of one pixel.
        pub element_size: u64,
        /// Bytes of the packed contents the stream carries (0 for a 1D
        /// buffer image, whose contents are its buffer's).
        pub size: u64,
        /// The buffer of a 1D buffer image.
        pub buffer: Option<ObjectId>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::*;

    fn image(id: u64, buffer: Option<u64>) -> ImageState {
        ImageState {
            id,
            guest: Some(GuestRef {
                handle: id,
                refs: 1,
            }),
            context: 1,
            flags: 1,
            channel_order: 0x10B5,
            channel_type: 0x10DE,
            image_type: 0x10F1,
            width: 4,
            height: 2,
            depth: 0,
            array_size: 0,
            element_size: 16,
            size: 128,
            buffer,
        }
    }

    fn state(images: Vec<ImageState>) -> VgpuState {
        let objects = SessionStateV2 {
            id: 1,
            protocol_version: 1,
            contexts: vec![ContextState {
                id: 1,
                guest: None,
                properties: vec![],
            }],
            buffers: vec![BufferState {
                id: 2,
                guest: None,
                context: 1,
                flags: 1,
                size: 64,
                parent: None,
            }],
            ..Default::default()
        };
        VgpuState::V1(VgpuStateV1 {
            profile: Default::default(),
            device: Default::default(),
            sessions: vec![SessionStateV4 {
                objects,
                last_seq: 9,
                images,
            }
            .into()],
        })
    }

    #[test]
    fn images_round_trip_and_stream_their_contents() {
        let s = state(vec![image(3, None), image(4, Some(2))]);
        s.validate().unwrap();
        let back = VgpuState::from_bytes(&s.to_bytes()).unwrap();
        assert_eq!(back, s);
        let streamed: Vec<_> = s
            .streamed_buffers()
            .iter()
            .map(|b| (b.buffer, b.size))
            .collect();
        // The buffer, then the image with contents of its own; the 1D
        // buffer image's contents are its buffer's.
        assert_eq!(streamed, vec![(2, 64), (3, 128)]);
        let VgpuState::V1(v) = back;
        assert_eq!(v.sessions[0].last_seq(), Some(9));
        let latest = v.sessions[0].clone().latest();
        let ExecutorState::OpenCl(opencl) = &latest.parts[0] else {
            panic!("the OpenCL part first: {latest:?}");
        };
        assert_eq!(opencl.newest().images.len(), 2);
        let keys: Vec<_> = latest.streamed().collect();
        assert_eq!(keys, streamed, "upgraded contents keep their keys");
    }

    #[test]
    fn images_that_clash_or_dangle_are_refused() {
        assert!(
            state(vec![image(2, None)]).validate().is_err(),
            "id of a buffer"
        );
        assert!(
            state(vec![image(3, Some(7))]).validate().is_err(),
            "no such buffer"
        );
        let mut lost = image(3, None);
        lost.context = 5;
        assert!(state(vec![lost]).validate().is_err(), "no such context");
    }
}
