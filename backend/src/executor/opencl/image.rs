//! Images and samplers. An image is a `HostMem` with an `ImageRecord`, so
//! it shares the memory-object handle table, kernel arguments and releases
//! with buffers. Image data moves tightly packed (the guest library applies
//! the application's pitches), so every transfer is bounded by the image's
//! extent and its pixel size before the device sees it.

use std::sync::Arc;

use cl3::types::{cl_image_desc, cl_image_format, cl_sampler, CL_BLOCKING};
use vgpu_protocol::image::{self as img, image_type};
use vgpu_protocol::messages::*;
use vgpu_protocol::{DataRef, Status};

use super::objects::{ContextEntry, HostEvent, HostMem};
use super::session::OpenClSession;
use crate::chain::{GuestIo, Segment};

/// What makes a memory object an image, and what a restore needs to
/// create it again.
#[derive(Debug)]
pub struct ImageRecord {
    pub channel_order: u32,
    pub channel_type: u32,
    pub image_type: u32,
    /// Width, height, depth as the guest gave them.
    pub dims: [u64; 3],
    pub array_size: u64,
    /// Bytes of one pixel.
    pub elem: u64,
    /// The buffer of a 1D buffer image.
    pub buffer: Option<Arc<HostMem>>,
}

impl ImageRecord {
    /// The image's extent in pixels, as origins and regions index it.
    pub fn extent(&self) -> [u64; 3] {
        img::extent(self.image_type, self.dims, self.array_size).unwrap_or([0; 3])
    }

    /// Bytes of the whole image, tightly packed.
    pub fn packed_size(&self) -> Option<u64> {
        img::packed_len(self.extent(), self.elem)
    }
}

/// An image's record in a saved state.
pub(super) fn save_image(
    id: u64,
    guest: Option<vgpu_migration::GuestRef>,
    context: u64,
    mem: &HostMem,
    image: &ImageRecord,
    buffer: Option<u64>,
) -> vgpu_migration::ImageState {
    vgpu_migration::ImageState {
        id,
        guest,
        context,
        flags: mem.flags,
        channel_order: image.channel_order,
        channel_type: image.channel_type,
        image_type: image.image_type,
        width: image.dims[0],
        height: image.dims[1],
        depth: image.dims[2],
        array_size: image.array_size,
        element_size: image.elem,
        size: mem.size,
        buffer,
    }
}

/// What `new_image` takes to rebuild a saved image. The pixel size is
/// computed again from the format, never taken from the state.
pub(super) fn restore_record(
    state: &vgpu_migration::ImageState,
    buffer: Option<Arc<HostMem>>,
) -> ImageRecord {
    ImageRecord {
        channel_order: state.channel_order,
        channel_type: state.channel_type,
        image_type: state.image_type,
        dims: [state.width, state.height, state.depth],
        array_size: state.array_size,
        elem: img::element_size(state.channel_order, state.channel_type).unwrap_or(0),
        buffer,
    }
}

/// An image's packed contents for a snapshot: read whole on the first
/// read (stream chunks need not fall on pixel boundaries), written whole
/// once every byte has arrived.
pub(super) struct ImageContents {
    mem: Arc<HostMem>,
    queue: Arc<super::objects::QueueEntry>,
    staged: Vec<u8>,
    /// Bytes received so far (restore).
    filled: u64,
}

impl ImageContents {
    pub(super) fn new(mem: Arc<HostMem>, queue: Arc<super::objects::QueueEntry>) -> Self {
        ImageContents {
            mem,
            queue,
            staged: Vec::new(),
            filled: 0,
        }
    }

    /// Moves the whole image between the device and `staged`.
    fn transfer(&mut self, to_device: bool) -> Result<(), Status> {
        let image = image_of(&self.mem)?;
        let region = image.extent();
        if !super::bounce::host_may(self.mem.flags, to_device) {
            let region = region.map(usize::try_from);
            let [Ok(w), Ok(h), Ok(d)] = region else {
                return Err(Status::INVALID_IMAGE_SIZE);
            };
            return super::bounce::image_through_buffer(
                self.queue.queue.0,
                &self.mem,
                [w, h, d],
                &mut self.staged,
                to_device,
            );
        }
        let event = OpenClSession::image_transfer(
            self.queue.queue.0,
            &self.mem,
            &[0; 3],
            &region,
            self.staged.as_mut_ptr(),
            (0, std::ptr::null()),
            to_device,
        )?;
        drop(HostEvent(event));
        Ok(())
    }

    /// `[offset, offset + len)` inside the image, as a range of `staged`.
    fn range(&self, offset: u64, len: usize) -> Result<std::ops::Range<usize>, Status> {
        let start = to_usize(offset)?;
        match start.checked_add(len) {
            Some(end) if end as u64 <= self.mem.size => Ok(start..end),
            _ => Err(Status::INVALID_VALUE),
        }
    }
}

impl crate::executor::BufferSource for ImageContents {
    fn size(&self) -> u64 {
        self.mem.size
    }

    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Status> {
        let range = self.range(offset, buf.len())?;
        if self.staged.is_empty() {
            self.staged = vec![0; to_usize(self.mem.size)?];
            self.transfer(false)?;
        }
        buf.copy_from_slice(&self.staged[range]);
        Ok(())
    }

    fn object(&self) -> Option<(u64, u64)> {
        Some((self.mem.written.serial(), 0))
    }

    fn written_at(&self) -> u64 {
        self.mem.written.epoch()
    }
}

impl crate::executor::BufferSink for ImageContents {
    fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), Status> {
        let range = self.range(offset, data.len())?;
        if self.staged.is_empty() {
            self.staged = vec![0; to_usize(self.mem.size)?];
        }
        self.staged[range].copy_from_slice(data);
        self.filled += data.len() as u64;
        if self.filled >= self.mem.size {
            self.transfer(true)?;
            self.staged = Vec::new();
        }
        Ok(())
    }
}

/// A host sampler and the properties it was made with.
#[derive(Debug)]
pub struct HostSampler {
    pub raw: cl_sampler,
    pub context: Arc<ContextEntry>,
    /// Key/value pairs as the guest gave them, no terminator.
    pub properties: Vec<u64>,
}

// SAFETY: OpenCL objects are thread-safe handles (see `host_object!`).
unsafe impl Send for HostSampler {}
// SAFETY: as above.
unsafe impl Sync for HostSampler {}

impl Drop for HostSampler {
    fn drop(&mut self) {
        // SAFETY: this wrapper owns one reference to `raw`.
        if let Err(code) = unsafe { cl3::sampler::release_sampler(self.raw) } {
            log::warn!("sampler release failed: {code}");
        }
    }
}

/// Sampler property names a guest may pass (normalized coordinates,
/// addressing mode, filter mode).
const SAMPLER_PROPERTIES: [u64; 3] = [0x1152, 0x1153, 0x1154];

fn to_usize(v: u64) -> Result<usize, Status> {
    usize::try_from(v).map_err(|_| Status::INVALID_VALUE)
}

fn sizes3(v: &[u64; 3]) -> Result<[usize; 3], Status> {
    Ok([to_usize(v[0])?, to_usize(v[1])?, to_usize(v[2])?])
}

/// The image a memory object is, or `INVALID_MEM_OBJECT` for a buffer.
fn image_of(mem: &HostMem) -> Result<&ImageRecord, Status> {
    mem.image.as_deref().ok_or(Status::INVALID_MEM_OBJECT)
}

/// Checks `[origin, origin + region)` against the image; returns the
/// packed bytes of the region.
fn checked_region(
    image: &ImageRecord,
    origin: &[u64; 3],
    region: &[u64; 3],
) -> Result<u64, Status> {
    if !img::region_inside(*origin, *region, image.extent()) {
        return Err(Status::INVALID_VALUE);
    }
    img::packed_len(*region, image.elem).ok_or(Status::INVALID_VALUE)
}

/// Guest memory of a transfer as one contiguous host area: the piece itself
/// when contiguous, else `staging` (filled from the guest when `fill`).
fn host_area(
    pieces: &[Segment],
    len: u64,
    staging: &mut Vec<u8>,
    fill: impl FnOnce(&mut [u8]) -> Result<(), Status>,
) -> Result<*mut u8, Status> {
    if let [only] = pieces {
        return Ok(only.ptr);
    }
    staging.resize(to_usize(len)?, 0);
    fill(staging)?;
    Ok(staging.as_mut_ptr())
}

/// The length of `region` at `origin` of the image `mem`, which the
/// guest's `data` must match exactly (`INVALID_VALUE` otherwise).
fn image_data_len(
    mem: &HostMem,
    origin: &[u64; 3],
    region: &[u64; 3],
    data: DataRef,
) -> Result<u64, Status> {
    let len = checked_region(image_of(mem)?, origin, region)?;
    if len != data.len {
        return Err(Status::INVALID_VALUE);
    }
    Ok(len)
}

impl OpenClSession {
    /// `INVALID_OPERATION` when the vGPU's profile has no images: a guest
    /// that saw none gets none, so its state never needs a device with
    /// images.
    fn check_images_advertised(&self) -> Result<(), Status> {
        match &self.advertised {
            Some(profile) if !profile.image_support => Err(Status::INVALID_OPERATION),
            _ => Ok(()),
        }
    }

    pub(super) fn image_formats(&self, m: &GetImageFormats) -> Result<Vec<u8>, Status> {
        let context = self.contexts.get(m.context)?;
        img::dimensions(m.image_type).ok_or(Status::INVALID_VALUE)?;
        let formats =
            cl3::memory::get_supported_image_formats(context.ctx.0, m.flags, m.image_type)
                .map_err(Status)?;
        Ok(formats
            .iter()
            .flat_map(|f| {
                let mut pair = f.image_channel_order.to_le_bytes().to_vec();
                pair.extend_from_slice(&f.image_channel_data_type.to_le_bytes());
                pair
            })
            .collect())
    }

    /// A host image for `record` (no contents yet).
    pub(super) fn new_image(
        &self,
        context: Arc<ContextEntry>,
        flags: u64,
        record: ImageRecord,
    ) -> Result<HostMem, Status> {
        use cl3::memory::{CL_MEM_ALLOC_HOST_PTR, CL_MEM_COPY_HOST_PTR, CL_MEM_USE_HOST_PTR};
        img::dimensions(record.image_type).ok_or(Status::INVALID_VALUE)?;
        if record.elem == 0 {
            return Err(Status::INVALID_IMAGE_FORMAT_DESCRIPTOR);
        }
        let size = record.packed_size().ok_or(Status::INVALID_IMAGE_SIZE)?;
        // One allocation the vGPU allows, whatever the device would try.
        if self
            .advertised
            .as_ref()
            .is_some_and(|p| size > p.max_mem_alloc_size)
        {
            return Err(Status::INVALID_IMAGE_SIZE);
        }
        let buffer_raw = match &record.buffer {
            Some(buffer) if buffer.image.is_none() => buffer.raw,
            Some(_) => return Err(Status::INVALID_IMAGE_DESCRIPTOR),
            None if record.image_type == image_type::IMAGE1D_BUFFER => {
                return Err(Status::INVALID_IMAGE_DESCRIPTOR)
            }
            None => std::ptr::null_mut(),
        };
        // A 1D buffer image uses its buffer's memory: nothing new to charge.
        let charge = match (&self.quota, &record.buffer) {
            (Some(quota), None) => Some(quota.charge_memory(size)?),
            _ => None,
        };
        let format = cl_image_format {
            image_channel_order: record.channel_order,
            image_channel_data_type: record.channel_type,
        };
        let [w, h, d] = sizes3(&record.dims).map_err(|_| Status::INVALID_IMAGE_SIZE)?;
        let mut desc: cl_image_desc = cl_image_desc {
            image_type: record.image_type,
            image_width: w,
            image_height: h,
            image_depth: d,
            image_array_size: to_usize(record.array_size)
                .map_err(|_| Status::INVALID_IMAGE_SIZE)?,
            image_row_pitch: 0,
            image_slice_pitch: 0,
            num_mip_levels: 0,
            num_samples: 0,
            buffer: std::ptr::null_mut(),
        };
        desc.buffer = buffer_raw;
        let host_flags =
            flags & !(CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR | CL_MEM_ALLOC_HOST_PTR);
        // SAFETY: `format` and `desc` are valid for the call; no host pointer.
        let raw = unsafe {
            cl3::memory::create_image(
                context.ctx.0,
                host_flags,
                &format,
                &desc,
                std::ptr::null_mut(),
            )
        }
        .map_err(Status)?;
        Ok(HostMem {
            raw,
            size,
            flags,
            context,
            parent: None,
            charge: std::sync::Mutex::new(charge),
            written: record
                .buffer
                .as_ref()
                .map(|b| b.written.clone())
                .unwrap_or_default(),
            image: Some(Box::new(record)),
            storage: None,
        })
    }

    pub(super) fn create_image(&mut self, m: &CreateImage) -> Result<(), Status> {
        self.check_images_advertised()?;
        let context = self.contexts.get(m.context)?.clone();
        let elem = img::element_size(m.channel_order, m.channel_type)
            .ok_or(Status::INVALID_IMAGE_FORMAT_DESCRIPTOR)?;
        let buffer = match m.buffer {
            0 => None,
            h => Some(self.mems.get(h)?.clone()),
        };
        let record = ImageRecord {
            channel_order: m.channel_order,
            channel_type: m.channel_type,
            image_type: m.image_type,
            dims: m.dims,
            array_size: m.array_size,
            elem,
            buffer,
        };
        let mem = self.new_image(context, m.flags, record)?;
        self.mems.insert(m.mem, mem)?;
        Ok(())
    }

    /// Moves a packed region between `host` and the image; blocking.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn image_transfer(
        queue: cl3::types::cl_command_queue,
        mem: &HostMem,
        origin: &[u64; 3],
        region: &[u64; 3],
        host: *mut u8,
        wait: (u32, *const cl3::types::cl_event),
        to_device: bool,
    ) -> Result<cl3::types::cl_event, Status> {
        let (origin, region) = (sizes3(origin)?, sizes3(region)?);
        if to_device {
            mem.mark_written();
        }
        // SAFETY: `host` spans the packed region (checked by every caller
        // against the image's extent and pixel size); the call is blocking,
        // so nothing outlives it.
        unsafe {
            if to_device {
                cl3::command_queue::enqueue_write_image(
                    queue,
                    mem.raw,
                    CL_BLOCKING,
                    origin.as_ptr(),
                    region.as_ptr(),
                    0,
                    0,
                    host as *mut _,
                    wait.0,
                    wait.1,
                )
            } else {
                cl3::command_queue::enqueue_read_image(
                    queue,
                    mem.raw,
                    CL_BLOCKING,
                    origin.as_ptr(),
                    region.as_ptr(),
                    0,
                    0,
                    host as *mut _,
                    wait.0,
                    wait.1,
                )
            }
        }
        .map_err(Status)
    }

    pub(super) fn init_image(&mut self, m: &InitImage, io: &mut GuestIo) -> Result<(), Status> {
        let mem = self.mem(m.mem)?;
        let len = image_data_len(&mem, &m.origin, &m.region, m.data)?;
        let queue = self.internal_queue(&mem.context)?;
        let at = (&m.origin, &m.region);
        let no_wait = (0, std::ptr::null());
        self.before_write(queue.queue.0, &mem);
        let event = Self::guest_pixels_into(queue.queue.0, &mem, at, m.data, len, io, no_wait)?;
        drop(HostEvent(event));
        Ok(())
    }

    pub(super) fn write_image(
        &mut self,
        m: &EnqueueWriteImage,
        io: &mut GuestIo,
    ) -> Result<(), Status> {
        let queue = self.queue(m.queue)?;
        let mem = self.mem(m.mem)?;
        let len = image_data_len(&mem, &m.origin, &m.region, m.data)?;
        let wait = self.wait_list(&m.wait)?;
        let at = (&m.origin, &m.region);
        let wait_ptr = (wait.len(), wait.ptr());
        self.before_write(queue.queue.0, &mem);
        let event = Self::guest_pixels_into(queue.queue.0, &mem, at, m.data, len, io, wait_ptr)?;
        self.keep_event(&queue, m.event, event)
    }

    /// The guest's out-data `data` (`len` bytes, packed) into the image
    /// `mem` at `origin`/`region`, after `wait`, blocking.
    fn guest_pixels_into(
        queue: cl3::types::cl_command_queue,
        mem: &HostMem,
        (origin, region): (&[u64; 3], &[u64; 3]),
        data: DataRef,
        len: u64,
        io: &mut GuestIo,
        wait: (u32, *const cl3::types::cl_event),
    ) -> Result<cl3::types::cl_event, Status> {
        let pieces = io.out_slices(data)?;
        let mut staging = Vec::new();
        let host = host_area(&pieces, len, &mut staging, |s| io.out.read(data.offset, s))?;
        Self::image_transfer(queue, mem, origin, region, host, wait, true)
    }

    pub(super) fn read_image(
        &mut self,
        m: &EnqueueReadImage,
        io: &mut GuestIo,
    ) -> Result<(), Status> {
        let queue = self.queue(m.queue)?;
        let mem = self.mem(m.mem)?;
        let len = image_data_len(&mem, &m.origin, &m.region, m.data)?;
        let wait = self.wait_list(&m.wait)?;
        let pieces = io.in_slices(m.data)?;
        let mut staging = Vec::new();
        let host = host_area(&pieces, len, &mut staging, |_| Ok(()))?;
        let event = Self::image_transfer(
            queue.queue.0,
            &mem,
            &m.origin,
            &m.region,
            host,
            (wait.len(), wait.ptr()),
            false,
        )?;
        if pieces.len() != 1 {
            io.in_.write(m.data.offset, &staging)?;
        }
        self.keep_event(&queue, m.event, event)
    }

    pub(super) fn copy_image(&mut self, m: &EnqueueCopyImage) -> Result<(), Status> {
        let queue = self.queue(m.queue)?;
        let (src, dst) = (self.mem(m.src)?, self.mem(m.dst)?);
        let (si, di) = (image_of(&src)?, image_of(&dst)?);
        self.before_write(queue.queue.0, &dst);
        if (si.channel_order, si.channel_type) != (di.channel_order, di.channel_type) {
            return Err(Status::IMAGE_FORMAT_MISMATCH);
        }
        checked_region(si, &m.src_origin, &m.region)?;
        checked_region(di, &m.dst_origin, &m.region)?;
        let wait = self.wait_list(&m.wait)?;
        // SAFETY: live images; both regions were checked against them.
        let event = unsafe {
            cl3::command_queue::enqueue_copy_image(
                queue.queue.0,
                src.raw,
                dst.raw,
                sizes3(&m.src_origin)?.as_ptr(),
                sizes3(&m.dst_origin)?.as_ptr(),
                sizes3(&m.region)?.as_ptr(),
                wait.len(),
                wait.ptr(),
            )
        }
        .map_err(Status)?;
        self.keep_event(&queue, m.event, event)
    }

    /// The buffer side of an image ⇄ buffer copy, checked.
    fn buffer_range(buffer: &HostMem, offset: u64, len: u64) -> Result<usize, Status> {
        if buffer.image.is_some() {
            return Err(Status::INVALID_MEM_OBJECT);
        }
        match offset.checked_add(len) {
            Some(end) if end <= buffer.size => to_usize(offset),
            _ => Err(Status::INVALID_VALUE),
        }
    }

    pub(super) fn copy_image_to_buffer(
        &mut self,
        m: &EnqueueCopyImageToBuffer,
    ) -> Result<(), Status> {
        let queue = self.queue(m.queue)?;
        let (src, dst) = (self.mem(m.src)?, self.mem(m.dst)?);
        let len = checked_region(image_of(&src)?, &m.src_origin, &m.region)?;
        let offset = Self::buffer_range(&dst, m.dst_offset, len)?;
        let wait = self.wait_list(&m.wait)?;
        self.before_write(queue.queue.0, &dst);
        // SAFETY: live objects; the image region and buffer range were checked.
        let event = unsafe {
            cl3::command_queue::enqueue_copy_image_to_buffer(
                queue.queue.0,
                src.raw,
                dst.raw,
                sizes3(&m.src_origin)?.as_ptr(),
                sizes3(&m.region)?.as_ptr(),
                offset,
                wait.len(),
                wait.ptr(),
            )
        }
        .map_err(Status)?;
        self.keep_event(&queue, m.event, event)
    }

    pub(super) fn copy_buffer_to_image(
        &mut self,
        m: &EnqueueCopyBufferToImage,
    ) -> Result<(), Status> {
        let queue = self.queue(m.queue)?;
        let (src, dst) = (self.mem(m.src)?, self.mem(m.dst)?);
        let len = checked_region(image_of(&dst)?, &m.dst_origin, &m.region)?;
        let offset = Self::buffer_range(&src, m.src_offset, len)?;
        let wait = self.wait_list(&m.wait)?;
        self.before_write(queue.queue.0, &dst);
        // SAFETY: live objects; the image region and buffer range were checked.
        let event = unsafe {
            cl3::command_queue::enqueue_copy_buffer_to_image(
                queue.queue.0,
                src.raw,
                dst.raw,
                offset,
                sizes3(&m.dst_origin)?.as_ptr(),
                sizes3(&m.region)?.as_ptr(),
                wait.len(),
                wait.ptr(),
            )
        }
        .map_err(Status)?;
        self.keep_event(&queue, m.event, event)
    }

    pub(super) fn fill_image(&mut self, m: &EnqueueFillImage) -> Result<(), Status> {
        let queue = self.queue(m.queue)?;
        let mem = self.mem(m.mem)?;
        checked_region(image_of(&mem)?, &m.origin, &m.region)?;
        // The colour is four 32-bit channels, whatever the format.
        let color: [u8; 16] = m
            .color
            .as_slice()
            .try_into()
            .map_err(|_| Status::INVALID_VALUE)?;
        let wait = self.wait_list(&m.wait)?;
        self.before_write(queue.queue.0, &mem);
        // SAFETY: a live image, a checked region, 16 bytes of colour.
        let event = unsafe {
            cl3::command_queue::enqueue_fill_image(
                queue.queue.0,
                mem.raw,
                color.as_ptr() as *const _,
                sizes3(&m.origin)?.as_ptr(),
                sizes3(&m.region)?.as_ptr(),
                wait.len(),
                wait.ptr(),
            )
        }
        .map_err(Status)?;
        self.keep_event(&queue, m.event, event)
    }

    /// A host sampler from guest properties (pairs, no terminator).
    pub(super) fn new_sampler(
        &self,
        context: Arc<ContextEntry>,
        properties: &[u64],
    ) -> Result<HostSampler, Status> {
        if !properties.len().is_multiple_of(2) {
            return Err(Status::INVALID_VALUE);
        }
        let mut props = Vec::with_capacity(properties.len() + 1);
        for pair in properties.chunks_exact(2) {
            if !SAMPLER_PROPERTIES.contains(&pair[0]) {
                return Err(Status::INVALID_VALUE);
            }
            props.extend_from_slice(pair);
        }
        props.push(0);
        let raw = cl3::sampler::create_sampler_with_properties(context.ctx.0, props.as_ptr())
            .map_err(Status)?;
        Ok(HostSampler {
            raw,
            context,
            properties: properties.to_vec(),
        })
    }

    pub(super) fn create_sampler(&mut self, m: &CreateSampler) -> Result<(), Status> {
        self.check_images_advertised()?;
        let context = self.contexts.get(m.context)?.clone();
        let sampler = self.new_sampler(context, &m.properties)?;
        self.samplers.insert(m.sampler, sampler)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(ty: u32, dims: [u64; 3], array_size: u64) -> ImageRecord {
        ImageRecord {
            channel_order: 0x10B5,
            channel_type: 0x10DE,
            image_type: ty,
            dims,
            array_size,
            elem: 16,
            buffer: None,
        }
    }

    #[test]
    fn regions_outside_the_image_are_refused() {
        let image = record(image_type::IMAGE2D, [8, 4, 0], 0);
        assert_eq!(checked_region(&image, &[0, 0, 0], &[8, 4, 1]), Ok(512));
        assert_eq!(
            checked_region(&image, &[1, 0, 0], &[8, 4, 1]),
            Err(Status::INVALID_VALUE)
        );
        assert_eq!(
            checked_region(&image, &[0, 0, 1], &[1, 1, 1]),
            Err(Status::INVALID_VALUE)
        );
        assert_eq!(
            checked_region(&image, &[u64::MAX, 0, 0], &[2, 1, 1]),
            Err(Status::INVALID_VALUE)
        );
    }

    #[test]
    fn array_layers_count_as_a_dimension() {
        let image = record(image_type::IMAGE1D_ARRAY, [8, 0, 0], 3);
        assert_eq!(image.extent(), [8, 3, 1]);
        assert_eq!(checked_region(&image, &[0, 2, 0], &[8, 1, 1]), Ok(128));
        let huge = record(image_type::IMAGE3D, [u64::MAX, 2, 2], 0);
        assert_eq!(huge.packed_size(), None);
    }
}
