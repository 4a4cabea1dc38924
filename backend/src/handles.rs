//! Per-session handle tables with OpenCL reference-count semantics.

use std::collections::HashMap;
use std::sync::Arc;

use vgpu_protocol::Status;

use crate::quota::{Charge, Quota};

struct Entry<T> {
    object: Arc<T>,
    refs: u32,
    /// The VM's object quota, given back when the handle goes.
    _charge: Option<Charge>,
}

/// Guest handle → host object, for one object kind of one session. Handles
/// are chosen by the guest; a handle of another session is simply absent.
pub struct HandleTable<T> {
    entries: HashMap<u64, Entry<T>>,
    /// The status a lookup of an unknown handle yields (`CL_INVALID_MEM_OBJECT`, ...).
    invalid: Status,
    quota: Option<Arc<Quota>>,
}

impl<T> HandleTable<T> {
    pub fn new(invalid: Status) -> Self {
        HandleTable {
            entries: HashMap::new(),
            invalid,
            quota: None,
        }
    }

    /// Counts this table's objects against a VM's quota from now on (and
    /// the ones it already holds, as far as the quota allows).
    pub fn set_quota(&mut self, quota: Arc<Quota>) {
        for entry in self.entries.values_mut() {
            entry._charge = quota.charge_object().ok();
        }
        self.quota = Some(quota);
    }

    fn charge(&self) -> Result<Option<Charge>, Status> {
        self.quota.as_ref().map(|q| q.charge_object()).transpose()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn invalid(&self) -> Status {
        self.invalid
    }

    /// Registers a new object under a guest-chosen handle (reference count 1).
    pub fn insert(&mut self, handle: u64, object: T) -> Result<Arc<T>, Status> {
        if handle == 0 || self.entries.contains_key(&handle) {
            return Err(Status::INVALID_VALUE);
        }
        let charge = self.charge()?;
        let object = Arc::new(object);
        self.entries.insert(
            handle,
            Entry {
                object: object.clone(),
                refs: 1,
                _charge: charge,
            },
        );
        Ok(object)
    }

    /// Registers an object that already exists (a restore), with the
    /// guest's reference count.
    pub fn insert_shared(&mut self, handle: u64, object: Arc<T>, refs: u32) -> Result<(), Status> {
        if handle == 0 || refs == 0 || self.entries.contains_key(&handle) {
            return Err(Status::INVALID_VALUE);
        }
        let charge = self.charge()?;
        self.entries.insert(
            handle,
            Entry {
                object,
                refs,
                _charge: charge,
            },
        );
        Ok(())
    }

    /// Every live handle with its object and reference count.
    pub fn entries(&self) -> impl Iterator<Item = (u64, &Arc<T>, u32)> {
        self.entries.iter().map(|(h, e)| (*h, &e.object, e.refs))
    }

    pub fn get(&self, handle: u64) -> Result<&Arc<T>, Status> {
        self.entries
            .get(&handle)
            .map(|e| &e.object)
            .ok_or(self.invalid)
    }

    pub fn retain(&mut self, handle: u64) -> Result<(), Status> {
        let entry = self.entries.get_mut(&handle).ok_or(self.invalid)?;
        entry.refs = entry.refs.checked_add(1).ok_or(Status::OUT_OF_RESOURCES)?;
        Ok(())
    }

    /// Drops one reference; the handle disappears when none is left. The
    /// host object lives on while other objects still hold it.
    pub fn release(&mut self, handle: u64) -> Result<(), Status> {
        let entry = self.entries.get_mut(&handle).ok_or(self.invalid)?;
        entry.refs -= 1;
        if entry.refs == 0 {
            self.entries.remove(&handle);
        }
        Ok(())
    }

    pub fn ref_count(&self, handle: u64) -> Result<u32, Status> {
        self.entries
            .get(&handle)
            .map(|e| e.refs)
            .ok_or(self.invalid)
    }

    /// Looks up every handle of a list (wait lists and the like).
    pub fn get_all(&self, handles: &[u64], invalid: Status) -> Result<Vec<Arc<T>>, Status> {
        handles
            .iter()
            .map(|h| self.entries.get(h).map(|e| e.object.clone()).ok_or(invalid))
            .collect()
    }

    pub fn values(&self) -> impl Iterator<Item = &Arc<T>> {
        self.entries.values().map(|e| &e.object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_to_zero_removes_handle() {
        let mut table = HandleTable::new(Status::INVALID_MEM_OBJECT);
        table.insert(5, "x").unwrap();
        table.retain(5).unwrap();
        table.release(5).unwrap();
        assert!(table.get(5).is_ok());
        table.release(5).unwrap();
        assert_eq!(table.get(5).err(), Some(Status::INVALID_MEM_OBJECT));
        assert_eq!(table.release(5), Err(Status::INVALID_MEM_OBJECT));
    }

    #[test]
    fn insert_rejects_zero_and_live_handles() {
        let mut table = HandleTable::new(Status::INVALID_CONTEXT);
        assert_eq!(table.insert(0, 1).err(), Some(Status::INVALID_VALUE));
        table.insert(1, 1).unwrap();
        assert_eq!(table.insert(1, 2).err(), Some(Status::INVALID_VALUE));
    }

    #[test]
    fn the_object_quota_refuses_inserts_and_frees_on_release() {
        let quota = Quota::new(crate::quota::Limits {
            objects: 1,
            ..Default::default()
        });
        let mut table = HandleTable::new(Status::INVALID_MEM_OBJECT);
        table.set_quota(quota.clone());
        table.insert(1, ()).unwrap();
        assert_eq!(table.insert(2, ()).err(), Some(Status::OUT_OF_RESOURCES));
        table.release(1).unwrap();
        table.insert(2, ()).unwrap();
        drop(table);
        assert_eq!(quota.objects_used(), 0);
    }

    #[test]
    fn get_all_reports_first_unknown_handle() {
        let mut table = HandleTable::new(Status::INVALID_EVENT);
        table.insert(1, ()).unwrap();
        assert!(table.get_all(&[1], Status::INVALID_EVENT_WAIT_LIST).is_ok());
        assert_eq!(
            table
                .get_all(&[1, 2], Status::INVALID_EVENT_WAIT_LIST)
                .err(),
            Some(Status::INVALID_EVENT_WAIT_LIST)
        );
    }
}
