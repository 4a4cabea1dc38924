//! What the library/kernel API needs of the backend beyond modules: images
//! larger than one message, which arrive as ordered chunks (`CuImageChunk`)
//! and load with `CuModuleLoadStaged`, and a few context and occupancy
//! queries. The guest library keeps a CUDA library as one module per
//! context, so libraries and their kernels are modules and functions here,
//! and checkpoints keep them as such (image, PTX included, and functions by
//! name).
//!
//! A staged upload is bounded (`MAX_IMAGE_LEN` per image,
//! `MAX_STAGED_BYTES` per session) and its bytes count against the VM's
//! memory quota from the first chunk until the module is unloaded (the
//! backend keeps the image for snapshots).

use std::collections::HashMap;
use std::ffi::c_int;

use vgpu_protocol::cuda::{result, CuIntReply, CuValueReply, MAX_IMAGE_LEN, MAX_STAGED_BYTES};
use vgpu_protocol::messages::*;
use vgpu_protocol::{Status, Wire};

use super::account::MemoryAccount;
use super::driver;
use super::session::{cuda, CudaSession};
use crate::quota::Charge;

/// Most uploads one session may have open at a time.
const MAX_UPLOADS: usize = 64;

/// The quota charge of a module image that arrived in chunks: the backend
/// keeps the image (for snapshots) while the module lives, so its bytes
/// stay charged to the VM until the module is unloaded.
#[derive(Default)]
pub(super) struct ImageCharge(#[allow(dead_code)] Vec<Option<Charge>>);

/// Unfinished image uploads of one session.
#[derive(Default)]
pub(super) struct Uploads {
    open: HashMap<u64, (Vec<u8>, Vec<Option<Charge>>)>,
    total: u64,
}

fn invalid() -> Status {
    cuda(result::ERROR_INVALID_VALUE)
}

impl Uploads {
    /// Appends a chunk; chunks must come in order (`offset` is the length
    /// received so far).
    pub fn append(
        &mut self,
        memory: &MemoryAccount,
        upload: u64,
        offset: u64,
        data: &[u8],
    ) -> Result<(), Status> {
        let len = data.len() as u64;
        if !self.open.contains_key(&upload) && self.open.len() >= MAX_UPLOADS {
            return Err(cuda(result::ERROR_OUT_OF_MEMORY));
        }
        let have = self
            .open
            .get(&upload)
            .map_or(0, |(bytes, _)| bytes.len() as u64);
        if offset != have {
            self.discard(upload);
            return Err(invalid());
        }
        let end = have.checked_add(len).ok_or_else(invalid)?;
        if end > MAX_IMAGE_LEN {
            self.discard(upload);
            return Err(cuda(result::ERROR_INVALID_IMAGE));
        }
        if self.total.saturating_add(len) > MAX_STAGED_BYTES {
            self.discard(upload);
            return Err(cuda(result::ERROR_OUT_OF_MEMORY));
        }
        let charge = match memory.charge(len) {
            Ok(charge) => charge,
            Err(status) => {
                self.discard(upload);
                return Err(status);
            }
        };
        let (bytes, charges) = self.open.entry(upload).or_default();
        bytes.extend_from_slice(data);
        charges.push(charge);
        self.total += len;
        Ok(())
    }

    /// The whole image of `upload`, which must be `len` bytes, with the
    /// quota charges of its bytes; the upload is gone afterwards either way.
    pub fn take(&mut self, upload: u64, len: u64) -> Result<(Vec<u8>, ImageCharge), Status> {
        let (bytes, charges) = self.open.remove(&upload).ok_or_else(invalid)?;
        self.total -= bytes.len() as u64;
        if bytes.len() as u64 != len {
            return Err(invalid());
        }
        Ok((bytes, ImageCharge(charges)))
    }

    fn discard(&mut self, upload: u64) {
        if let Some((bytes, _)) = self.open.remove(&upload) {
            self.total -= bytes.len() as u64;
        }
    }

    /// Bytes held by unfinished uploads.
    #[cfg(test)]
    pub fn staged(&self) -> u64 {
        self.total
    }
}

impl CudaSession {
    pub(super) fn image_chunk(&mut self, m: &CuImageChunk) -> Result<(), Status> {
        self.uploads
            .append(&self.memory, m.upload, m.offset, &m.data)
    }

    pub(super) fn load_staged(&mut self, m: &CuModuleLoadStaged) -> Result<(), Status> {
        let (image, charge) = self.uploads.take(m.upload, m.len)?;
        self.load_image(m.module, m.ctx, image)?;
        self.image_charges.insert(m.module, charge);
        Ok(())
    }

    pub(super) fn stream_priority_range(&mut self, ctx: u64) -> Result<Vec<u8>, Status> {
        self.enter(ctx)?;
        let (least, greatest) = driver::stream_priority_range()?;
        Ok(CuIntReply {
            value: least,
            second: greatest,
        }
        .to_bytes())
    }

    pub(super) fn context_limit(&mut self, m: &CuCtxGetLimit) -> Result<Vec<u8>, Status> {
        self.enter(m.ctx)?;
        let value = driver::context_limit(m.limit)?;
        Ok(CuValueReply { value }.to_bytes())
    }

    /// `cuCtxSetLimit`: the memory the driver reserves for the new value
    /// is charged to the VM's quota first (`CUDA_ERROR_OUT_OF_MEMORY`
    /// past it), in place of the old value's.
    pub(super) fn set_limit(&mut self, m: &CuCtxSetLimit) -> Result<(), Status> {
        self.enter(m.ctx)?;
        let context = self.contexts.get(m.ctx)?.clone();
        let bytes = super::limits::reserved_bytes(m.limit, m.value, &self.shared.info.attributes);
        let charge = self.memory.charge(bytes)?;
        self.limits.set(&context, m.limit, m.value, bytes, charge)
    }

    pub(super) fn available_dynamic_smem(
        &mut self,
        m: &CuOccupancyAvailableDynamicSMem,
    ) -> Result<Vec<u8>, Status> {
        let function = self.functions.get(m.function)?.clone();
        self.make_current(function.module.ctx.raw)?;
        let blocks = c_int::try_from(m.blocks).map_err(|_| invalid())?;
        let block_size = c_int::try_from(m.block_size).map_err(|_| invalid())?;
        let value = driver::available_dynamic_smem(function.raw, blocks, block_size)?;
        Ok(CuValueReply { value }.to_bytes())
    }
}

impl CudaSession {
    pub(super) fn max_active_clusters(
        &mut self,
        m: &CuOccupancyMaxActiveClusters,
    ) -> Result<Vec<u8>, Status> {
        let function = self.functions.get(m.function)?.clone();
        self.make_current(function.module.ctx.raw)?;
        let value =
            driver::max_active_clusters(function.raw, m.grid, m.block, m.shared_mem, m.cluster)?;
        Ok(CuIntReply { value, second: 0 }.to_bytes())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::quota::{Limits, Quota};

    #[test]
    fn chunks_reassemble_in_order_and_are_consumed_by_the_load() {
        let memory = MemoryAccount::default();
        let mut uploads = Uploads::default();
        uploads.append(&memory, 7, 0, &[1, 2, 3]).unwrap();
        uploads.append(&memory, 7, 3, &[4, 5]).unwrap();
        assert_eq!(uploads.staged(), 5);
        assert_eq!(uploads.take(7, 5).unwrap().0, vec![1, 2, 3, 4, 5]);
        assert_eq!(uploads.staged(), 0);
        assert!(uploads.take(7, 5).is_err(), "consumed");
    }

    #[test]
    fn out_of_order_short_and_oversized_uploads_are_refused() {
        let memory = MemoryAccount::default();
        let mut uploads = Uploads::default();
        uploads.append(&memory, 1, 0, &[0; 8]).unwrap();
        assert!(
            uploads.append(&memory, 1, 4, &[0; 8]).is_err(),
            "gap/overlap"
        );
        assert_eq!(uploads.staged(), 0, "a broken upload is dropped");
        uploads.append(&memory, 2, 0, &[0; 8]).unwrap();
        assert!(uploads.take(2, 9).is_err(), "length mismatch");
        assert!(uploads.append(&memory, 3, MAX_IMAGE_LEN, &[0]).is_err());
        for handle in 0..MAX_UPLOADS as u64 {
            uploads.append(&memory, 100 + handle, 0, &[0]).unwrap();
        }
        assert!(
            uploads.append(&memory, 1000, 0, &[0]).is_err(),
            "too many uploads"
        );
    }

    #[test]
    fn staged_bytes_count_against_the_quota_until_loaded() {
        let quota = Quota::new(Limits {
            memory_bytes: 16,
            ..Limits::default()
        });
        let mut memory = MemoryAccount::default();
        memory.set_quota(Arc::clone(&quota), []);
        let mut uploads = Uploads::default();
        uploads.append(&memory, 1, 0, &[0; 12]).unwrap();
        assert_eq!(quota.memory_used(), 12);
        assert!(
            uploads.append(&memory, 1, 12, &[0; 8]).is_err(),
            "past the quota"
        );
        assert_eq!(
            quota.memory_used(),
            0,
            "the refused upload gave its bytes back"
        );
        uploads.append(&memory, 2, 0, &[0; 10]).unwrap();
        let (_, charge) = uploads.take(2, 10).unwrap();
        assert_eq!(quota.memory_used(), 10, "the loaded image stays charged");
        drop(charge);
        assert_eq!(quota.memory_used(), 0, "until its module goes");
    }
}
