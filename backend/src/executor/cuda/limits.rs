//! Context limits the guest sets (`cuCtxSetLimit`): checked, charged to
//! the VM's device-memory quota where the driver reserves memory for them
//! (stack, printf FIFO, malloc heap), and kept so that a checkpoint, a
//! re-home or a migration sets them again on the rebuilt context.

use std::collections::BTreeMap;
use std::sync::Arc;

use cudarc::driver::sys;
use vgpu_protocol::cuda::result;
use vgpu_protocol::Status;

use super::objects::HostContext;
use crate::quota::{Charge, Quota};

/// `CU_LIMIT_STACK_SIZE`: bytes of stack per GPU thread.
pub const STACK_SIZE: u32 = 0;
/// `CU_LIMIT_PRINTF_FIFO_SIZE`.
pub const PRINTF_FIFO_SIZE: u32 = 1;
/// `CU_LIMIT_MALLOC_HEAP_SIZE`.
pub const MALLOC_HEAP_SIZE: u32 = 2;
/// `CU_LIMIT_PERSISTING_L2_CACHE_SIZE`, the last one a guest may set: the
/// ones after it (shared-memory carve-outs of green contexts) belong to
/// features vgpu does not offer.
const LAST_GUEST_LIMIT: u32 = 6;
/// The last `CUlimit` CUDA 13 defines; past it a value is no limit at all.
const LAST_LIMIT: u32 = 9;

/// Device attributes the stack reservation scales with.
const MULTIPROCESSOR_COUNT: usize = 16;
const MAX_THREADS_PER_MULTIPROCESSOR: usize = 39;

/// Device memory the driver reserves for `value` of `limit`: the stack
/// for every thread the device can hold at once, the FIFO and the heap as
/// they are; nothing for the counts and the cache hint.
pub fn reserved_bytes(limit: u32, value: u64, attributes: &[u64]) -> u64 {
    let attribute = |i: usize| attributes.get(i).copied().filter(|&v| (v as i64) > 0);
    match limit {
        STACK_SIZE => {
            let threads = attribute(MULTIPROCESSOR_COUNT)
                .unwrap_or(1)
                .saturating_mul(attribute(MAX_THREADS_PER_MULTIPROCESSOR).unwrap_or(1));
            value.saturating_mul(threads)
        }
        PRINTF_FIFO_SIZE | MALLOC_HEAP_SIZE => value,
        _ => 0,
    }
}

/// One limit as set.
struct SetLimit {
    value: u64,
    charged: u64,
    _charge: Option<Charge>,
}

/// The limits set on a session's contexts, by context and `CUlimit`.
#[derive(Default)]
pub(super) struct ContextLimits {
    set: BTreeMap<(usize, u32), SetLimit>,
}

impl ContextLimits {
    /// Sets `limit` to `value` on `context` (current), charging `charge`
    /// (already taken for `charged` bytes) in place of what an earlier
    /// value of it held; the driver's refusal leaves the earlier one.
    pub fn set(
        &mut self,
        context: &HostContext,
        limit: u32,
        value: u64,
        charged: u64,
        charge: Option<Charge>,
    ) -> Result<(), Status> {
        if limit > LAST_GUEST_LIMIT {
            return Err(Status(if limit <= LAST_LIMIT {
                result::ERROR_UNSUPPORTED_LIMIT
            } else {
                result::ERROR_INVALID_VALUE
            }));
        }
        let size = usize::try_from(value).map_err(|_| Status(result::ERROR_INVALID_VALUE))?;
        super::driver::set_context_limit(limit, size)?;
        let key = (context.raw as usize, limit);
        self.set.insert(
            key,
            SetLimit {
                value,
                charged,
                _charge: charge,
            },
        );
        Ok(())
    }

    /// The limits set on `context`: (limit, value, bytes charged).
    pub fn of(&self, context: &HostContext) -> Vec<(u32, u64, u64)> {
        let raw = context.raw as usize;
        self.set
            .range((raw, 0)..=(raw, u32::MAX))
            .map(|(&(_, limit), s)| (limit, s.value, s.charged))
            .collect()
    }

    /// Forgets a destroyed context's limits, giving back their charges.
    pub fn forget(&mut self, context: sys::CUcontext) {
        let raw = context as usize;
        self.set.retain(|&(ctx, _), _| ctx != raw);
    }

    /// Charges the limits held (a restored session's) to `quota`, as far
    /// as it allows.
    pub fn set_quota(&mut self, quota: &Arc<Quota>) {
        for limit in self.set.values_mut() {
            limit._charge = quota.charge_memory(limit.charged).ok();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stack_is_charged_for_every_resident_thread() {
        let mut attributes = vec![0u64; 64];
        attributes[MULTIPROCESSOR_COUNT] = 132;
        attributes[MAX_THREADS_PER_MULTIPROCESSOR] = 2048;
        assert_eq!(
            reserved_bytes(STACK_SIZE, 8192, &attributes),
            8192 * 132 * 2048
        );
        assert_eq!(
            reserved_bytes(MALLOC_HEAP_SIZE, 1 << 30, &attributes),
            1 << 30
        );
        assert_eq!(
            reserved_bytes(PRINTF_FIFO_SIZE, 1 << 20, &attributes),
            1 << 20
        );
        assert_eq!(reserved_bytes(4, 1 << 20, &attributes), 0);
        assert_eq!(reserved_bytes(STACK_SIZE, u64::MAX, &attributes), u64::MAX);
        // Attributes the device does not answer count as one.
        assert_eq!(reserved_bytes(STACK_SIZE, 1024, &[]), 1024);
    }
}
