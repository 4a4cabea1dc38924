//! What the CUDA side counts against the VM's quota (`quota.rs`, the one
//! the OpenCL side uses): device memory per allocation, and one object per
//! context, module, function, stream and event (their handle tables charge
//! those). Also the guard on `cuCtxCreate` flags. Nothing here calls the
//! driver, so it is tested on hosts without libcuda.

use std::collections::HashMap;
use std::sync::Arc;

use vgpu_protocol::cuda::result;
use vgpu_protocol::Status;

use crate::quota::{Charge, Quota};

/// Scheduling flags (`CU_CTX_SCHED_*`): at most one of these.
const SCHED_SPIN: u32 = 0x01;
const SCHED_YIELD: u32 = 0x02;
const SCHED_BLOCKING_SYNC: u32 = 0x04;
/// `CU_CTX_MAP_HOST`.
const MAP_HOST: u32 = 0x08;
/// `CU_CTX_LMEM_RESIZE_TO_MAX`.
const LMEM_RESIZE_TO_MAX: u32 = 0x10;

/// Refuses `cuCtxCreate` flags beyond the documented scheduling, map-host
/// and local-memory ones (core dumps, `SYNC_MEMOPS`, anything undefined):
/// `CUDA_ERROR_INVALID_VALUE`, for a guest call and a restore alike.
pub(super) fn check_context_flags(flags: u32) -> Result<(), Status> {
    let sched = flags & (SCHED_SPIN | SCHED_YIELD | SCHED_BLOCKING_SYNC);
    let rest = flags & !(SCHED_SPIN | SCHED_YIELD | SCHED_BLOCKING_SYNC);
    if sched.count_ones() > 1 || rest & !(MAP_HOST | LMEM_RESIZE_TO_MAX) != 0 {
        return Err(Status(result::ERROR_INVALID_VALUE));
    }
    Ok(())
}

/// Device memory of one session, charged per allocation (by the size the
/// guest asked for) to the VM's quota while the allocation lives.
#[derive(Default)]
pub(super) struct MemoryAccount {
    quota: Option<Arc<Quota>>,
    /// Allocation address → its charge (none while there is no quota).
    held: HashMap<u64, Option<Charge>>,
}

impl MemoryAccount {
    /// Charges `bytes` before anything is allocated: `CUDA_ERROR_OUT_OF_MEMORY`
    /// past the quota.
    pub fn charge(&self, bytes: u64) -> Result<Option<Charge>, Status> {
        self.quota
            .as_ref()
            .map(|q| q.charge_memory(bytes))
            .transpose()
            .map_err(|_| Status(result::ERROR_OUT_OF_MEMORY))
    }

    /// Keeps `charge` until the allocation at `addr` is released.
    pub fn hold(&mut self, addr: u64, charge: Option<Charge>) {
        self.held.insert(addr, charge);
    }

    /// Gives back the charge of the allocation at `addr`.
    pub fn release(&mut self, addr: u64) {
        self.held.remove(&addr);
    }

    /// Counts against `quota` from now on, and the allocations the session
    /// holds already (a restored session) as far as the quota allows.
    pub fn set_quota(&mut self, quota: Arc<Quota>, existing: impl IntoIterator<Item = (u64, u64)>) {
        for (addr, size) in existing {
            self.held.insert(addr, quota.charge_memory(size).ok());
        }
        self.quota = Some(quota);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handles::HandleTable;
    use crate::quota::Limits;

    #[test]
    fn only_documented_context_flags_pass() {
        for good in [0, 1, 2, 4, 8, 0x10, 4 | 8 | 0x10] {
            assert!(check_context_flags(good).is_ok(), "{good:#x}");
        }
        for bad in [3, 5, 6, 7, 0x20, 0x40, 0x80, 0x100, 1 << 31] {
            assert_eq!(
                check_context_flags(bad),
                Err(Status(result::ERROR_INVALID_VALUE)),
                "{bad:#x}"
            );
        }
    }

    #[test]
    fn allocations_count_against_the_memory_quota_until_freed() {
        let quota = Quota::new(Limits {
            memory_bytes: 1 << 20,
            ..Default::default()
        });
        let mut account = MemoryAccount::default();
        assert!(account.charge(1 << 40).expect("no quota yet").is_none());
        account.set_quota(quota.clone(), [(0x1000, 256 << 10)]);
        assert_eq!(quota.memory_used(), 256 << 10, "held before the quota");
        let charge = account.charge(512 << 10).expect("fits");
        account.hold(0x9000, charge);
        assert_eq!(
            account.charge(512 << 10).err(),
            Some(Status(result::ERROR_OUT_OF_MEMORY))
        );
        account.release(0x9000);
        assert_eq!(quota.memory_used(), 256 << 10);
        assert!(account.charge(768 << 10).is_ok());
        drop(account);
        assert_eq!(quota.memory_used(), 0, "a closed session gives all back");
    }

    #[test]
    fn cuda_objects_count_against_the_object_quota() {
        // The CUDA session's tables (contexts, modules, functions, streams,
        // events) are `HandleTable`s given the VM's quota.
        let quota = Quota::new(Limits {
            objects: 2,
            ..Default::default()
        });
        let mut streams: HandleTable<u32> = HandleTable::new(Status(result::ERROR_INVALID_HANDLE));
        let mut events: HandleTable<u32> = HandleTable::new(Status(result::ERROR_INVALID_HANDLE));
        streams.set_quota(quota.clone());
        events.set_quota(quota.clone());
        streams.insert(1, 0).expect("first");
        events.insert(1, 0).expect("second");
        assert_eq!(events.insert(2, 0).err(), Some(Status::OUT_OF_RESOURCES));
        assert_eq!(
            vgpu_protocol::cuda::to_cuda_result(Status::OUT_OF_RESOURCES),
            result::ERROR_OUT_OF_MEMORY,
            "what the guest library makes of it"
        );
        streams.release(1).expect("release");
        events.insert(2, 0).expect("room again");
    }
}
