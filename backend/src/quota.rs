//! Per-VM quotas: device memory, objects, chains in flight, batch size. A
//! guest that exceeds one gets `CL_OUT_OF_RESOURCES` for the call; the host
//! is never exhausted on its behalf.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use vgpu_protocol::Status;

/// The limits (0: none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    pub memory_bytes: u64,
    pub objects: u64,
    pub in_flight: u64,
    pub batch_messages: u64,
}

/// One VM's usage against its limits.
#[derive(Debug, Default)]
pub struct Quota {
    pub limits: Limits,
    memory: AtomicU64,
    objects: AtomicU64,
}

impl Quota {
    pub fn new(limits: Limits) -> Arc<Quota> {
        Arc::new(Quota {
            limits,
            ..Default::default()
        })
    }

    fn take(counter: &AtomicU64, limit: u64, amount: u64) -> Result<(), Status> {
        let result = counter.fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
            let next = used.checked_add(amount)?;
            (limit == 0 || next <= limit).then_some(next)
        });
        result.map(drop).map_err(|_| Status::OUT_OF_RESOURCES)
    }

    /// Charges `bytes` of device memory until the returned charge is dropped.
    pub fn charge_memory(self: &Arc<Self>, bytes: u64) -> Result<Charge, Status> {
        Quota::take(&self.memory, self.limits.memory_bytes, bytes)?;
        Ok(Charge {
            quota: self.clone(),
            bytes,
            objects: 0,
        })
    }

    /// Charges one object until the returned charge is dropped.
    pub fn charge_object(self: &Arc<Self>) -> Result<Charge, Status> {
        Quota::take(&self.objects, self.limits.objects, 1)?;
        Ok(Charge {
            quota: self.clone(),
            bytes: 0,
            objects: 1,
        })
    }

    pub fn memory_used(&self) -> u64 {
        self.memory.load(Ordering::Acquire)
    }

    pub fn objects_used(&self) -> u64 {
        self.objects.load(Ordering::Acquire)
    }
}

/// Usage given back when dropped.
#[derive(Debug)]
pub struct Charge {
    quota: Arc<Quota>,
    bytes: u64,
    objects: u64,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.quota.memory.fetch_sub(self.bytes, Ordering::AcqRel);
        self.quota.objects.fetch_sub(self.objects, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_stop_at_the_limit_and_come_back_when_dropped() {
        let quota = Quota::new(Limits {
            memory_bytes: 100,
            objects: 2,
            ..Default::default()
        });
        let a = quota.charge_memory(60).unwrap();
        assert_eq!(
            quota.charge_memory(50).err(),
            Some(Status::OUT_OF_RESOURCES)
        );
        drop(a);
        assert!(quota.charge_memory(100).is_ok());
        let (_x, _y) = (
            quota.charge_object().unwrap(),
            quota.charge_object().unwrap(),
        );
        assert_eq!(quota.charge_object().err(), Some(Status::OUT_OF_RESOURCES));
        assert_eq!(quota.objects_used(), 2);
    }

    #[test]
    fn no_limit_means_unlimited() {
        let quota = Quota::new(Limits::default());
        assert!(quota.charge_memory(u64::MAX / 2).is_ok());
    }
}
