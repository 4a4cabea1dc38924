//! Sub-devices: partitions of the served device (`clCreateSubDevices`),
//! kept under guest-chosen handles like every other object. Handle 0 names
//! the root device. A sub-device records its parent, the partition
//! properties and its place among the partition's results, so a restore
//! partitions the same way and takes the same one.

use std::sync::Arc;

use cl3::types::cl_device_id;
use vgpu_protocol::messages::CreateSubDevices;
use vgpu_protocol::Status;

use super::session::OpenClSession;

const PARTITION_EQUALLY: u64 = 0x1086;
const PARTITION_BY_COUNTS: u64 = 0x1087;
const PARTITION_BY_AFFINITY_DOMAIN: u64 = 0x1088;
pub(super) const MAX_COMPUTE_UNITS: u32 = 0x1002;
pub(super) const PARTITION_MAX_SUB_DEVICES: u32 = 0x1043;
pub(super) const PARTITION_PROPERTIES: u32 = 0x1044;

/// A raw device id of the host's platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawDevice(pub cl_device_id);

// SAFETY: device ids are thread-safe OpenCL handles; a sub-device's is kept
// alive by the `SubDevice` that owns its reference.
unsafe impl Send for RawDevice {}
// SAFETY: as above.
unsafe impl Sync for RawDevice {}

/// A sub-device of the host, one reference owned.
#[derive(Debug)]
pub struct SubDevice {
    pub raw: RawDevice,
    /// `None`: a partition of the root device.
    pub parent: Option<Arc<SubDevice>>,
    /// The partition properties as the guest gave them (zero-terminated).
    pub properties: Vec<u64>,
    /// Its place among the devices that partition yields.
    pub index: u32,
}

impl Drop for SubDevice {
    fn drop(&mut self) {
        // SAFETY: this wrapper owns the one reference `clCreateSubDevices`
        // gave for this device.
        if let Err(code) = unsafe { cl3::device::release_device(self.raw.0) } {
            log::warn!("sub-device release failed: {code}");
        }
    }
}

/// A device a context or queue runs on: the root or a sub-device (held).
#[derive(Debug, Clone)]
pub struct DeviceRef {
    pub raw: RawDevice,
    pub sub: Option<Arc<SubDevice>>,
}

/// A partition property list as a person reads it.
pub(super) fn describe_partition(properties: &[u64]) -> String {
    let values: Vec<String> = properties
        .iter()
        .skip(1)
        .take_while(|&&v| v != 0)
        // A guest's list may be long: a log line shows its start.
        .take(16)
        .map(u64::to_string)
        .collect();
    match properties.first() {
        Some(&PARTITION_EQUALLY) => format!("equally ({})", values.join(", ")),
        Some(&PARTITION_BY_COUNTS) => format!("by counts ({})", values.join(", ")),
        Some(&PARTITION_BY_AFFINITY_DOMAIN) => {
            format!("by affinity domain ({})", values.join(", "))
        }
        _ => format!("{properties:#x?}"),
    }
}

/// Checks a partition property list against the parent's compute units and
/// returns it as the driver takes it (with its terminator). Absurd counts
/// (more parts than compute units, lists longer than the device can
/// partition into) never reach the driver.
pub(super) fn check_partition(
    properties: &[u64],
    compute_units: u64,
    max_sub_devices: u64,
) -> Result<Vec<isize>, Status> {
    let end = properties
        .iter()
        .position(|&p| p == 0)
        .ok_or(Status::INVALID_VALUE)?;
    let (&kind, values) = properties[..end]
        .split_first()
        .ok_or(Status::INVALID_VALUE)?;
    let list: Vec<u64> = match kind {
        PARTITION_EQUALLY => {
            let [n] = values else {
                return Err(Status::INVALID_VALUE);
            };
            // As PoCL answers: parts of no or more than all compute units
            // are invalid values.
            if *n == 0 || *n > compute_units {
                return Err(Status::INVALID_VALUE);
            }
            vec![kind, *n, 0]
        }
        PARTITION_BY_COUNTS => {
            // The counts end with CL_DEVICE_PARTITION_BY_COUNTS_LIST_END
            // (0), then the list's own 0.
            if properties.get(end + 1) != Some(&0) {
                return Err(Status::INVALID_VALUE);
            }
            let counts = values;
            let total = counts.iter().try_fold(0u64, |sum, &c| sum.checked_add(c));
            if counts.is_empty()
                || counts.len() as u64 > max_sub_devices
                || total.is_none_or(|t| t > compute_units)
            {
                return Err(Status::INVALID_DEVICE_PARTITION_COUNT);
            }
            let mut list = vec![kind];
            list.extend(counts);
            list.extend([0, 0]);
            list
        }
        PARTITION_BY_AFFINITY_DOMAIN => {
            let [domain] = values else {
                return Err(Status::INVALID_VALUE);
            };
            // One domain bit (CL_DEVICE_AFFINITY_DOMAIN_NUMA .. NEXT_PARTITIONABLE).
            if domain.count_ones() != 1 || *domain > 1 << 5 {
                return Err(Status::INVALID_VALUE);
            }
            vec![kind, *domain, 0]
        }
        _ => return Err(Status::INVALID_VALUE),
    };
    list.into_iter()
        .map(|v| isize::try_from(v).map_err(|_| Status::INVALID_VALUE))
        .collect()
}

pub(super) fn device_number(device: cl_device_id, param: u32) -> Result<u64, Status> {
    let bytes = cl3::device::get_device_data(device, param).map_err(Status)?;
    let mut word = [0u8; 8];
    let n = bytes.len().min(8);
    word[..n].copy_from_slice(&bytes[..n]);
    Ok(u64::from_le_bytes(word))
}

impl OpenClSession {
    /// The device a handle names: 0 is the root device.
    pub(super) fn device_ref(&self, handle: u64) -> Result<DeviceRef, Status> {
        if handle == 0 {
            return Ok(DeviceRef {
                raw: RawDevice(self.device),
                sub: None,
            });
        }
        let sub = self.sub_devices.get(handle)?.clone();
        Ok(DeviceRef {
            raw: sub.raw,
            sub: Some(sub),
        })
    }

    /// Every device a list of handles names (`CL_INVALID_DEVICE` for one
    /// that is not the session's, `CL_INVALID_VALUE` for an empty list).
    pub(super) fn device_refs(&self, handles: &[u64]) -> Result<Vec<DeviceRef>, Status> {
        if handles.is_empty() {
            return Ok(vec![self.device_ref(0)?]);
        }
        handles.iter().map(|&h| self.device_ref(h)).collect()
    }

    /// Partitions `parent`; the host's sub-devices, in the driver's order.
    pub(super) fn partition(
        &self,
        parent: &DeviceRef,
        properties: &[u64],
    ) -> Result<Vec<RawDevice>, Status> {
        // Only the schemes the vGPU's profile offers (the guest saw no other).
        let scheme = properties.first().copied().unwrap_or(0);
        if let Some(profile) = &self.advertised {
            if !profile.partition_properties.contains(&scheme) {
                return Err(Status::INVALID_VALUE);
            }
        }
        let units = device_number(parent.raw.0, MAX_COMPUTE_UNITS)?;
        let max = device_number(parent.raw.0, PARTITION_MAX_SUB_DEVICES)?;
        if max == 0 {
            // A device too small to be partitioned further.
            return Err(Status::DEVICE_PARTITION_FAILED);
        }
        let list = check_partition(properties, units, max).inspect_err(|status| {
            crate::guest_warn!(
                super::guard::warnings(),
                "refusing a partition into sub-devices ({status}): {}",
                describe_partition(properties)
            );
        })?;
        let devices = cl3::device::create_sub_devices(parent.raw.0, &list).map_err(Status)?;
        Ok(devices.into_iter().map(RawDevice).collect())
    }

    pub(super) fn create_sub_devices(&mut self, m: &CreateSubDevices) -> Result<Vec<u8>, Status> {
        let parent = self.device_ref(m.parent)?;
        let created = self.partition(&parent, &m.properties)?;
        let count = created.len() as u32;
        if !m.devices.is_empty() && m.devices.len() < created.len() {
            release_all(created);
            return Err(Status::INVALID_VALUE);
        }
        let mut owned: Vec<SubDevice> = created
            .into_iter()
            .enumerate()
            .map(|(index, raw)| SubDevice {
                raw,
                parent: parent.sub.clone(),
                properties: m.properties.clone(),
                index: index as u32,
            })
            .collect();
        if m.devices.is_empty() {
            // Counted only: the sub-devices go again.
            return Ok(count.to_le_bytes().to_vec());
        }
        let mut inserted = Vec::new();
        for (&handle, device) in m.devices.iter().zip(owned.drain(..)) {
            match self.sub_devices.insert(handle, device) {
                Ok(_) => inserted.push(handle),
                Err(status) => {
                    // All or nothing: a quota or a reused handle undoes the
                    // ones already named.
                    for h in inserted {
                        let _ = self.sub_devices.release(h);
                    }
                    return Err(status);
                }
            }
        }
        Ok(count.to_le_bytes().to_vec())
    }

    /// A sub-device again, for a restore: the same partition of the same
    /// parent, the same place among its results.
    pub(super) fn rebuild_sub_device(
        &self,
        parent: Option<Arc<SubDevice>>,
        properties: &[u64],
        index: u32,
    ) -> Result<SubDevice, Status> {
        let parent_ref = match &parent {
            Some(p) => DeviceRef {
                raw: p.raw,
                sub: Some(p.clone()),
            },
            None => self.device_ref(0)?,
        };
        let mut created = self.partition(&parent_ref, properties)?;
        if index as usize >= created.len() {
            release_all(created);
            return Err(Status::DEVICE_PARTITION_FAILED);
        }
        let raw = created.remove(index as usize);
        release_all(created);
        Ok(SubDevice {
            raw,
            parent,
            properties: properties.to_vec(),
            index,
        })
    }
}

fn release_all(devices: Vec<RawDevice>) {
    for device in devices {
        drop(SubDevice {
            raw: device,
            parent: None,
            properties: Vec::new(),
            index: 0,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equally_with_more_units_than_the_device_has_is_invalid() {
        let huge = [PARTITION_EQUALLY, 1 << 31, 0];
        assert_eq!(check_partition(&huge, 2, 2), Err(Status::INVALID_VALUE));
        assert_eq!(
            check_partition(&[PARTITION_EQUALLY, 1, 0], 2, 2),
            Ok(vec![0x1086, 1, 0])
        );
    }

    #[test]
    fn by_counts_checks_the_sum_and_the_list_length() {
        let ok = [PARTITION_BY_COUNTS, 1, 1, 0, 0];
        assert_eq!(check_partition(&ok, 2, 2), Ok(vec![0x1087, 1, 1, 0, 0]));
        let too_many_units = [PARTITION_BY_COUNTS, 2, 1, 0, 0];
        assert_eq!(
            check_partition(&too_many_units, 2, 2),
            Err(Status::INVALID_DEVICE_PARTITION_COUNT)
        );
        let overflow = [PARTITION_BY_COUNTS, u64::MAX, 2, 0, 0];
        assert_eq!(
            check_partition(&overflow, 2, 2),
            Err(Status::INVALID_DEVICE_PARTITION_COUNT)
        );
        let unterminated = [PARTITION_BY_COUNTS, 1, 0];
        assert_eq!(
            check_partition(&unterminated, 2, 2),
            Err(Status::INVALID_VALUE)
        );
    }

    #[test]
    fn unknown_or_empty_lists_are_invalid_values() {
        assert_eq!(check_partition(&[0], 2, 2), Err(Status::INVALID_VALUE));
        assert_eq!(check_partition(&[], 2, 2), Err(Status::INVALID_VALUE));
        assert_eq!(
            check_partition(&[0x4242, 1, 0], 2, 2),
            Err(Status::INVALID_VALUE)
        );
    }
}
