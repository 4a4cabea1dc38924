//! Mapped (device-visible) host memory, emulated. Natively a kernel reads
//! and writes such memory over the bus; here guest memory is not the GPU's,
//! so each mapped range has a device allocation of its own, its device
//! pointer (`cuMemHostGetDevicePointer`), and the two copies are made equal
//! where a CUDA program may look: what the host wrote goes to the device
//! before the next call that can start device work, and what the device
//! wrote comes back after each call that waits for it (context, stream and
//! event synchronization, a successful stream or event query, a copy to the
//! host). cuDNN needs this: each handle keeps a 4-byte mapped flag
//! (`cuMemHostAlloc` with `CU_MEMHOSTALLOC_DEVICEMAP`), and
//! `cudnnConvolutionForward` fails without one.
//!
//! Not emulated: a host thread that polls such memory while a kernel runs
//! sees the kernel's writes only after a synchronization, and the device
//! pointer is not the host address (unified addressing would make them
//! equal), so a kernel must be given the pointer the driver hands out.
//!
//! This module keeps the table; `runtime` moves the bytes.

use std::collections::BTreeMap;

/// One mapped host range.
#[derive(Debug)]
pub struct Region {
    pub len: usize,
    /// Its device allocation.
    pub device: u64,
    /// The context it was made in (copies run there).
    pub ctx: u64,
    /// The bytes both sides last agreed on; `None` before the first copy.
    shadow: Option<Vec<u8>>,
    /// Whether this library allocated the host memory (`cuMemHostAlloc`)
    /// rather than the program (`cuMemHostRegister`).
    pub owned: bool,
}

/// A copy that makes one side of a region equal to the other.
#[derive(Debug, PartialEq, Eq)]
pub struct Transfer {
    pub ctx: u64,
    pub device: u64,
    pub host: usize,
    pub len: usize,
}

/// Every mapped range, by host address.
#[derive(Debug, Default)]
pub struct MappedRegions {
    regions: BTreeMap<usize, Region>,
}

impl MappedRegions {
    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }

    /// Maps `[host, host + len)` to `device`. A range that overlaps one
    /// already mapped is refused (the driver answers
    /// `CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED`).
    pub fn insert(&mut self, host: usize, len: usize, device: u64, ctx: u64, owned: bool) -> bool {
        let end = host.saturating_add(len);
        let overlaps = self
            .regions
            .range(..end)
            .next_back()
            .is_some_and(|(&start, r)| start.saturating_add(r.len) > host);
        if overlaps || len == 0 {
            return false;
        }
        self.regions.insert(
            host,
            Region {
                len,
                device,
                ctx,
                shadow: None,
                owned,
            },
        );
        true
    }

    /// Forgets the range that starts at `host`.
    pub fn remove(&mut self, host: usize) -> Option<Region> {
        self.regions.remove(&host)
    }

    /// Whether the range at `host` is this library's allocation (`None`:
    /// no range starts there).
    pub fn owned(&self, host: usize) -> Option<bool> {
        self.regions.get(&host).map(|r| r.owned)
    }

    /// The device address that stands for host address `addr`.
    pub fn device_pointer(&self, addr: usize) -> Option<u64> {
        let (&start, region) = self.regions.range(..=addr).next_back()?;
        let offset = addr - start;
        (offset < region.len).then(|| region.device + offset as u64)
    }

    /// The device copy of `[addr, addr + len)` where one mapped range
    /// holds all of it.
    pub fn device_range(&self, addr: usize, len: usize) -> Option<u64> {
        let (&host, region) = self.regions.range(..=addr).next_back()?;
        let end = addr.checked_add(len)?;
        (end <= host + region.len).then(|| region.device + (addr - host) as u64)
    }

    /// The ranges whose host bytes changed since both sides last agreed
    /// (all of them before their first copy); their shadows take the new
    /// bytes, as the copies about to be made will.
    ///
    /// # Safety
    ///
    /// Every range in the table is readable host memory.
    pub unsafe fn changed_on_host(&mut self) -> Vec<Transfer> {
        let mut out = Vec::new();
        for (&host, region) in &mut self.regions {
            // SAFETY: the caller promises the range is readable; the
            // program may write it at the same time, as it may any buffer
            // it hands a copy.
            let now = unsafe { std::slice::from_raw_parts(host as *const u8, region.len) };
            if region.shadow.as_deref() != Some(now) {
                region.shadow = Some(now.to_vec());
                out.push(Transfer {
                    ctx: region.ctx,
                    device: region.device,
                    host,
                    len: region.len,
                });
            }
        }
        out
    }

    /// Every range, for the copies back after the device was waited for.
    pub fn all(&self) -> Vec<Transfer> {
        self.regions
            .iter()
            .map(|(&host, r)| Transfer {
                ctx: r.ctx,
                device: r.device,
                host,
                len: r.len,
            })
            .collect()
    }

    /// Records that the host bytes of the range at `host` are now the
    /// device's.
    ///
    /// # Safety
    ///
    /// The range at `host` is readable host memory.
    pub unsafe fn agreed(&mut self, host: usize) {
        if let Some(region) = self.regions.get_mut(&host) {
            // SAFETY: as the caller promises.
            let now = unsafe { std::slice::from_raw_parts(host as *const u8, region.len) };
            region.shadow = Some(now.to_vec());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_pointer_covers_the_range_and_nothing_past_it() {
        let mut m = MappedRegions::default();
        assert!(m.insert(0x1000, 16, 0x7000_0000, 1, true));
        assert_eq!(m.device_pointer(0x1000), Some(0x7000_0000));
        assert_eq!(m.device_pointer(0x100f), Some(0x7000_000f));
        assert_eq!(m.device_pointer(0x1010), None);
        assert_eq!(m.device_pointer(0xfff), None);
    }

    #[test]
    fn device_range_needs_one_range_to_hold_all_of_it() {
        let mut m = MappedRegions::default();
        assert!(m.insert(0x1000, 16, 0x7000_0000, 1, true));
        assert!(m.insert(0x1010, 16, 0x8000_0000, 1, true));
        assert_eq!(m.device_range(0x1000, 16), Some(0x7000_0000));
        assert_eq!(m.device_range(0x1004, 8), Some(0x7000_0004));
        assert_eq!(m.device_range(0x1008, 16), None, "spans two ranges");
        assert_eq!(m.device_range(0xff8, 16), None, "starts before");
        assert_eq!(m.device_range(0x1018, 16), None, "ends past");
        assert_eq!(m.device_range(usize::MAX - 4, 8), None);
    }

    #[test]
    fn overlapping_and_empty_ranges_are_refused() {
        let mut m = MappedRegions::default();
        assert!(m.insert(0x1000, 16, 0x10, 1, true));
        assert!(!m.insert(0x1008, 16, 0x20, 1, true));
        assert!(!m.insert(0xff8, 16, 0x20, 1, true));
        assert!(!m.insert(0x2000, 0, 0x20, 1, true));
        assert!(m.insert(0x1010, 16, 0x30, 1, false));
        assert_eq!(m.owned(0x1010), Some(false));
        assert_eq!(m.remove(0x1000).map(|r| r.device), Some(0x10));
        assert_eq!(m.owned(0x1000), None);
        assert!(m.insert(0x1008, 8, 0x40, 1, true));
    }

    #[test]
    fn only_host_writes_since_the_last_agreement_are_sent() {
        let mut buf = vec![0u8; 8];
        let host = buf.as_mut_ptr() as usize;
        let mut m = MappedRegions::default();
        assert!(m.insert(host, buf.len(), 0x500, 3, false));
        let first = Transfer {
            ctx: 3,
            device: 0x500,
            host,
            len: 8,
        };
        // SAFETY: `buf` is the only range and stays alive.
        unsafe {
            assert_eq!(m.changed_on_host(), vec![first]);
            assert!(m.changed_on_host().is_empty());
        }
        buf[3] = 9;
        // SAFETY: as above.
        unsafe {
            assert_eq!(m.changed_on_host().len(), 1);
        }
        // The device's bytes arrive (a copy back) and are not sent again.
        buf[0] = 1;
        // SAFETY: as above.
        unsafe {
            m.agreed(host);
            assert!(m.changed_on_host().is_empty());
        }
        assert_eq!(m.all().len(), 1);
    }
}
