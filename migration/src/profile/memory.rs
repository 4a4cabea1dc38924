//! The vGPU's memory size: fixed when its VM starts, like QEMU's `-m`, so
//! it never follows the host.
//!
//! Some devices report a global memory size that moves: PoCL's CPU device
//! reports a share of the host's free memory, which changed by 10 MB within
//! a second on a test machine and once refused a restore onto the very
//! device the checkpoint came from. The size a guest sees is therefore a
//! reservation chosen once (`--memory`, or the default below) and carried
//! with the vGPU; a destination hosts it when its device offers at least
//! that much.

use super::Profile;

/// Sizes are multiples of this, so the default does not change with every
/// small move of what the device reports.
pub const MEMORY_GRANULE: u64 = 256 << 20;

/// `CL_DEVICE_TYPE_CPU`.
const DEVICE_TYPE_CPU: u64 = 1 << 1;

/// Why a requested memory size cannot be given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemorySizeError {
    #[error("a vGPU memory size of 0 bytes leaves the guest nothing to allocate")]
    Zero,
    #[error("memory size {requested} bytes exceeds the {offered} bytes the device offers")]
    TooLarge { requested: u64, offered: u64 },
}

/// The share of a reported memory figure (global memory, or the largest
/// allocation) a new vGPU gets: the figure rounded down to the granule. A
/// CPU device's memory is the host's RAM, and what it reports follows the
/// host's free memory, so half of it is taken: the host's free memory must
/// halve before the same device could no longer host the vGPU. A figure
/// below one granule is kept as it is.
pub fn default_memory_size(device_type: u64, reported: u64) -> u64 {
    let base = if device_type & DEVICE_TYPE_CPU != 0 {
        reported / 2
    } else {
        reported
    };
    match base - base % MEMORY_GRANULE {
        0 => reported,
        rounded => rounded,
    }
}

impl Profile {
    /// This profile with the vGPU memory size `bytes` (a single
    /// allocation never exceeds it), checked against what the profile's
    /// device offers.
    pub fn with_memory_size(&self, bytes: u64) -> Result<Profile, MemorySizeError> {
        if bytes == 0 {
            return Err(MemorySizeError::Zero);
        }
        if bytes > self.global_mem_size {
            return Err(MemorySizeError::TooLarge {
                requested: bytes,
                offered: self.global_mem_size,
            });
        }
        let mut out = self.clone();
        out.global_mem_size = bytes;
        out.max_mem_alloc_size = out.max_mem_alloc_size.min(bytes);
        Ok(out)
    }

    /// This device profile as a new vGPU sees it: the memory size `bytes`
    /// when given, else the default for the device; the largest allocation
    /// is taken the same way, since it may move with the host too.
    pub fn for_new_vgpu(&self, bytes: Option<u64>) -> Result<Profile, MemorySizeError> {
        let bytes =
            bytes.unwrap_or_else(|| default_memory_size(self.device_type, self.global_mem_size));
        let mut out = self.with_memory_size(bytes)?;
        out.max_mem_alloc_size =
            default_memory_size(self.device_type, self.max_mem_alloc_size).min(bytes);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(device_type: u64, memory: u64) -> Profile {
        Profile {
            device_type,
            global_mem_size: memory,
            max_mem_alloc_size: memory / 4,
            ..Default::default()
        }
    }

    #[test]
    fn default_size_of_a_cpu_device_survives_the_host_free_memory_moving() {
        // The figures of the failed run, and every granule boundary nearby:
        // the restore onto the same device must pass the profile check.
        let seen = 5_607_088_128u64;
        let mut reported = seen - 4 * MEMORY_GRANULE;
        while reported < seen + 4 * MEMORY_GRANULE {
            let vgpu = device(DEVICE_TYPE_CPU, reported)
                .for_new_vgpu(None)
                .unwrap();
            for drift in [0, 10_000_000, MEMORY_GRANULE, reported / 3] {
                let later = device(DEVICE_TYPE_CPU, reported - drift);
                assert_eq!(
                    crate::check(&vgpu, &later),
                    Ok(()),
                    "reported {reported}, then {drift} bytes less"
                );
            }
            reported += 7 << 20;
        }
    }

    #[test]
    fn default_size_of_a_gpu_is_its_memory_rounded_down_to_the_granule() {
        let h100 = 85_029_158_912u64;
        let size = default_memory_size(1 << 2, h100);
        assert_eq!(size % MEMORY_GRANULE, 0);
        assert!(h100 - size < MEMORY_GRANULE);
    }

    #[test]
    fn default_size_of_a_tiny_device_is_its_own() {
        assert_eq!(default_memory_size(DEVICE_TYPE_CPU, 100 << 20), 100 << 20);
    }

    #[test]
    fn requested_size_bounds_the_largest_allocation() {
        let vgpu = device(4, 8 << 30).for_new_vgpu(Some(1 << 30)).unwrap();
        assert_eq!(vgpu.global_mem_size, 1 << 30);
        assert_eq!(vgpu.max_mem_alloc_size, 1 << 30);
        let vgpu = device(4, 8 << 30).for_new_vgpu(Some(6 << 30)).unwrap();
        assert_eq!(vgpu.max_mem_alloc_size, 2 << 30);
        // A CPU device's largest allocation follows the host like its memory.
        let vgpu = device(DEVICE_TYPE_CPU, 8 << 30)
            .for_new_vgpu(Some(6 << 30))
            .unwrap();
        assert_eq!(vgpu.max_mem_alloc_size, 1 << 30);
    }

    #[test]
    fn requested_size_beyond_the_device_is_refused() {
        assert_eq!(
            device(4, 8 << 30).for_new_vgpu(Some(9 << 30)),
            Err(MemorySizeError::TooLarge {
                requested: 9 << 30,
                offered: 8 << 30
            })
        );
        assert_eq!(
            device(4, 8 << 30).for_new_vgpu(Some(0)),
            Err(MemorySizeError::Zero)
        );
    }
}
