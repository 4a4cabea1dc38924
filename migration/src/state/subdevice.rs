//! Sub-devices and the devices each context and queue runs on (session
//! state version 5). Device id 0 is the root device (the served device
//! itself); other ids name sub-device records. A restore partitions each
//! sub-device's parent with the same properties and takes the result at
//! the same index, so the destination device must offer that partition.

use super::objects::{GuestRef, ObjectId};
use crate::codec::record;

/// The root device in `DevicePlacement::devices`.
pub const ROOT_DEVICE: ObjectId = 0;

record! {
    pub struct SubDeviceState {
        pub id: ObjectId,
        pub guest: Option<GuestRef>,
        /// The parent sub-device; `None` for a partition of the root device.
        pub parent: Option<ObjectId>,
        /// `cl_device_partition_property` list with its terminator.
        pub properties: Vec<u64>,
        /// Its place among the devices that partition yields.
        pub index: u32,
    }
}

record! {
    /// The devices a context was created on, or the one a queue runs on.
    pub struct DevicePlacement {
        /// The context's or the queue's id.
        pub object: ObjectId,
        /// Sub-device ids, or `ROOT_DEVICE`.
        pub devices: Vec<ObjectId>,
    }
}

record! {
    /// A session's sub-devices and where its contexts and queues run.
    /// Contexts and queues without a placement are on the root device.
    #[derive(Default)]
    pub struct DeviceTopology {
        /// Parents before their sub-devices.
        pub sub_devices: Vec<SubDeviceState>,
        pub contexts: Vec<DevicePlacement>,
        pub queues: Vec<DevicePlacement>,
    }
}

impl DeviceTopology {
    pub fn is_empty(&self) -> bool {
        self.sub_devices.is_empty()
    }

    /// The devices a context runs on (the root device when not placed).
    pub fn context_devices(&self, context: ObjectId) -> Vec<ObjectId> {
        placed(&self.contexts, context)
    }

    /// The device a queue runs on (the root device when not placed).
    pub fn queue_device(&self, queue: ObjectId) -> ObjectId {
        placed(&self.queues, queue)[0]
    }
}

fn placed(list: &[DevicePlacement], object: ObjectId) -> Vec<ObjectId> {
    list.iter()
        .find(|p| p.object == object)
        .map(|p| p.devices.clone())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| vec![ROOT_DEVICE])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::*;

    fn sub(id: u64, parent: Option<u64>) -> SubDeviceState {
        SubDeviceState {
            id,
            guest: Some(GuestRef {
                handle: id,
                refs: 1,
            }),
            parent,
            properties: vec![0x1086, 1, 0],
            index: 0,
        }
    }

    fn state(devices: DeviceTopology) -> VgpuState {
        let objects = SessionStateV2 {
            id: 1,
            protocol_version: 1,
            contexts: vec![ContextState {
                id: 1,
                guest: None,
                properties: vec![],
            }],
            queues: vec![QueueState {
                id: 2,
                guest: None,
                context: 1,
                properties: vec![0],
            }],
            ..Default::default()
        };
        VgpuState::V1(VgpuStateV1 {
            profile: Default::default(),
            device: Default::default(),
            sessions: vec![SessionStateV5 {
                objects,
                last_seq: 4,
                images: vec![],
                devices,
            }
            .into()],
        })
    }

    fn placed(object: u64, devices: Vec<u64>) -> DevicePlacement {
        DevicePlacement { object, devices }
    }

    #[test]
    fn sub_devices_and_placements_round_trip() {
        let devices = DeviceTopology {
            sub_devices: vec![sub(10, None), sub(11, Some(10))],
            contexts: vec![placed(1, vec![10, 11, ROOT_DEVICE])],
            queues: vec![placed(2, vec![11])],
        };
        let s = state(devices.clone());
        s.validate().unwrap();
        let back = VgpuState::from_bytes(&s.to_bytes()).unwrap();
        assert_eq!(back, s);
        let VgpuState::V1(v) = back;
        assert_eq!(v.sessions[0].version(), 5);
        let latest = v.sessions[0].clone().latest();
        let ExecutorState::OpenCl(opencl) = &latest.parts[0] else {
            panic!("an OpenCL part: {latest:?}");
        };
        assert_eq!(opencl.newest().devices, devices);
        assert_eq!(devices.queue_device(2), 11);
        assert_eq!(devices.context_devices(7), vec![ROOT_DEVICE]);
    }

    #[test]
    fn sub_devices_that_dangle_or_come_before_their_parent_are_refused() {
        let parent_later = DeviceTopology {
            sub_devices: vec![sub(11, Some(10)), sub(10, None)],
            ..Default::default()
        };
        assert!(state(parent_later).validate().is_err());
        let unknown_device = DeviceTopology {
            sub_devices: vec![sub(10, None)],
            queues: vec![placed(2, vec![12])],
            ..Default::default()
        };
        assert!(state(unknown_device).validate().is_err());
        let unknown_context = DeviceTopology {
            sub_devices: vec![sub(10, None)],
            contexts: vec![placed(5, vec![10])],
            ..Default::default()
        };
        assert!(state(unknown_context).validate().is_err());
        let two_queue_devices = DeviceTopology {
            sub_devices: vec![sub(10, None)],
            queues: vec![placed(2, vec![10, 10])],
            ..Default::default()
        };
        assert!(state(two_queue_devices).validate().is_err());
    }
}
