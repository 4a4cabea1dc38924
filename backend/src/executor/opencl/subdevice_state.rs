//! Sub-devices in checkpoints, re-homes and migration: what a session's
//! sub-devices were partitioned from and how, and which devices its
//! contexts and queues run on. A restore partitions again in the same way;
//! a device that cannot refuses the restore with the partition it lacks.

use std::collections::HashMap;
use std::sync::Arc;

use vgpu_migration as m;

use super::objects::{ContextEntry, QueueEntry};
use super::session::OpenClSession;
use super::subdevice::{
    check_partition, describe_partition, device_number, DeviceRef, SubDevice, MAX_COMPUTE_UNITS,
    PARTITION_MAX_SUB_DEVICES, PARTITION_PROPERTIES,
};
use crate::executor::SnapshotError;

/// Ids of sub-devices: the guest handle of one the guest holds, a fresh id
/// for one only a context, queue or sub-device still holds.
struct SubIds {
    by_ptr: HashMap<*const SubDevice, u64>,
    order: Vec<(u64, Arc<SubDevice>, Option<m::GuestRef>)>,
    next_hidden: u64,
}

impl SubIds {
    fn id(&mut self, sub: &Arc<SubDevice>) -> u64 {
        if let Some(&id) = self.by_ptr.get(&Arc::as_ptr(sub)) {
            return id;
        }
        let id = self.next_hidden;
        self.next_hidden += 1;
        self.by_ptr.insert(Arc::as_ptr(sub), id);
        self.order.push((id, sub.clone(), None));
        id
    }

    fn device(&mut self, device: &DeviceRef) -> u64 {
        device.sub.as_ref().map_or(m::ROOT_DEVICE, |s| self.id(s))
    }
}

fn depth(sub: &SubDevice) -> usize {
    sub.parent.as_ref().map_or(0, |p| 1 + depth(p))
}

impl OpenClSession {
    /// The session's sub-devices and the devices of the contexts and
    /// queues the state lists (by their state ids).
    pub(super) fn save_topology(
        &self,
        contexts: &[(u64, Arc<ContextEntry>)],
        queues: &[(u64, Arc<QueueEntry>)],
    ) -> m::DeviceTopology {
        let mut ids = SubIds {
            by_ptr: HashMap::new(),
            order: Vec::new(),
            next_hidden: 1 << 63,
        };
        for (handle, sub, refs) in self.sub_devices.entries() {
            ids.by_ptr.insert(Arc::as_ptr(sub), handle);
            ids.order
                .push((handle, sub.clone(), Some(m::GuestRef { handle, refs })));
        }
        let mut topology = m::DeviceTopology::default();
        for (id, context) in contexts {
            if context.devices.iter().any(|d| d.sub.is_some()) {
                let devices = context.devices.iter().map(|d| ids.device(d)).collect();
                topology.contexts.push(m::DevicePlacement {
                    object: *id,
                    devices,
                });
            }
        }
        for (id, queue) in queues {
            if queue.device.sub.is_some() {
                topology.queues.push(m::DevicePlacement {
                    object: *id,
                    devices: vec![ids.device(&queue.device)],
                });
            }
        }
        // Parents (held by their sub-devices) join as found.
        let mut i = 0;
        while i < ids.order.len() {
            if let Some(parent) = ids.order[i].1.parent.clone() {
                ids.id(&parent);
            }
            i += 1;
        }
        let mut order = ids.order;
        // Parents before their sub-devices, as a restore creates them.
        order.sort_by_key(|(_, sub, _)| depth(sub));
        let parent_ids: HashMap<*const SubDevice, u64> = order
            .iter()
            .map(|(id, sub, _)| (Arc::as_ptr(sub), *id))
            .collect();
        topology.sub_devices = order
            .iter()
            .map(|(id, sub, guest)| m::SubDeviceState {
                id: *id,
                guest: *guest,
                parent: sub.parent.as_ref().map(|p| parent_ids[&Arc::as_ptr(p)]),
                properties: sub.properties.clone(),
                index: sub.index,
            })
            .collect();
        topology
    }

    /// Refuses, before anything is built, a state whose sub-devices were
    /// partitioned in a way this device does not offer or cannot fit.
    pub(super) fn check_partitions(
        &self,
        topology: &m::DeviceTopology,
    ) -> Result<(), SnapshotError> {
        let device = self.device;
        let number = |param| device_number(device, param).unwrap_or(0);
        let (units, max) = (number(MAX_COMPUTE_UNITS), number(PARTITION_MAX_SUB_DEVICES));
        let offered: Vec<u64> = cl3::device::get_device_data(device, PARTITION_PROPERTIES)
            .unwrap_or_default()
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("chunks of 8")))
            .collect();
        for sub in topology.sub_devices.iter().filter(|s| s.parent.is_none()) {
            let refuse = |reason: String| SnapshotError::Partition {
                partition: describe_partition(&sub.properties),
                reason,
            };
            let scheme = sub.properties.first().copied().unwrap_or(0);
            if max == 0 || !offered.contains(&scheme) {
                return Err(refuse("it offers no such partition".into()));
            }
            check_partition(&sub.properties, units, max)
                .map_err(|_| refuse(format!("it has {units} compute units")))?;
        }
        Ok(())
    }

    /// Partitions the device again as the saved sub-devices were, and
    /// gives the guest back its handles.
    pub(super) fn restore_sub_devices(
        &mut self,
        topology: &m::DeviceTopology,
    ) -> Result<HashMap<u64, Arc<SubDevice>>, SnapshotError> {
        self.check_partitions(topology)?;
        let mut built: HashMap<u64, Arc<SubDevice>> = HashMap::new();
        for saved in &topology.sub_devices {
            let parent = match saved.parent {
                Some(p) => Some(built.get(&p).cloned().ok_or(SnapshotError::Dangling {
                    what: "sub-device",
                    id: p,
                })?),
                None => None,
            };
            let sub = self
                .rebuild_sub_device(parent, &saved.properties, saved.index)
                .map_err(|status| SnapshotError::Rebuild {
                    what: format!(
                        "sub-device (partitioned {})",
                        describe_partition(&saved.properties)
                    ),
                    id: saved.id,
                    status,
                })?;
            built.insert(saved.id, Arc::new(sub));
        }
        for saved in &topology.sub_devices {
            if let Some(g) = saved.guest {
                self.sub_devices
                    .insert_shared(g.handle, built[&saved.id].clone(), g.refs)
                    .map_err(|status| SnapshotError::Rebuild {
                        what: "guest handle".into(),
                        id: g.handle,
                        status,
                    })?;
            }
        }
        Ok(built)
    }

    /// The device a saved id names, among the rebuilt sub-devices.
    pub(super) fn restored_device(
        &self,
        built: &HashMap<u64, Arc<SubDevice>>,
        id: u64,
    ) -> Result<DeviceRef, SnapshotError> {
        if id == m::ROOT_DEVICE {
            return self.device_ref(0).map_err(|status| SnapshotError::Rebuild {
                what: "device".into(),
                id,
                status,
            });
        }
        let sub = built.get(&id).ok_or(SnapshotError::Dangling {
            what: "sub-device",
            id,
        })?;
        Ok(DeviceRef {
            raw: sub.raw,
            sub: Some(sub.clone()),
        })
    }
}
