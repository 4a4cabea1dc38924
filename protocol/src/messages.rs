//! Every message and reply payload. One line per message: its name, opcode
//! and fields in wire order.

use crate::codec::{DataRef, Field, Reader, Writer};
use crate::DecodeError;

/// A fixed sequence of fields.
pub trait Wire: Sized {
    fn encode(&self, w: &mut Writer);
    fn decode_from(r: &mut Reader<'_>) -> Result<Self, DecodeError>;

    /// Decodes a whole payload; trailing bytes are an error.
    fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        let value = Self::decode_from(&mut r)?;
        r.finish()?;
        Ok(value)
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new();
        self.encode(&mut w);
        w.bytes
    }
}

macro_rules! wire_struct {
    ($(#[$meta:meta])* $name:ident { $($field:ident : $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Default)]
        pub struct $name {
            $(pub $field: $ty,)*
        }

        impl Wire for $name {
            #[allow(unused_variables)]
            fn encode(&self, w: &mut Writer) {
                $(Field::put(&self.$field, w);)*
            }

            #[allow(unused_variables)]
            fn decode_from(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                Ok($name { $($field: <$ty as Field>::get(r)?,)* })
            }
        }
    };
}

macro_rules! requests {
    ($($(#[$meta:meta])* $name:ident = $opcode:literal { $($field:ident : $ty:ty),* $(,)? })*) => {
        $(wire_struct!($(#[$meta])* $name { $($field: $ty),* });)*

        /// Opcode values.
        pub mod opcode {
            $(#[allow(non_upper_case_globals)] pub const $name: u32 = $opcode;)*
        }

        /// Any request message.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Request {
            $($name($name),)*
        }

        impl Request {
            pub fn opcode(&self) -> u32 {
                match self {
                    $(Request::$name(_) => $opcode,)*
                }
            }

            pub fn name(&self) -> &'static str {
                match self {
                    $(Request::$name(_) => stringify!($name),)*
                }
            }

            /// Decodes the payload of a message with the given opcode.
            pub fn decode(opcode: u32, payload: &[u8]) -> Result<Request, DecodeError> {
                match opcode {
                    $($opcode => Ok(Request::$name($name::from_bytes(payload)?)),)*
                    other => Err(DecodeError::UnknownOpcode(other)),
                }
            }

            pub fn encode_payload(&self, w: &mut Writer) {
                match self {
                    $(Request::$name(m) => m.encode(w),)*
                }
            }
        }

        $(impl From<$name> for Request {
            fn from(m: $name) -> Request {
                Request::$name(m)
            }
        })*
    };
}

requests! {
    // ---- control -------------------------------------------------------
    /// First message of a session: the guest's supported version range.
    OpenSession = 0x0001 { min_version: u32, max_version: u32, flags: u32 }
    /// Releases everything the session holds.
    CloseSession = 0x0002 {}
    Ping = 0x0003 {}
    /// Live objects per kind (reply: `SessionStatsReply`).
    SessionStats = 0x0004 {}

    // ---- OpenCL: queries ------------------------------------------------
    /// `clGet*Info`; `target` is an `InfoTarget`, `index` the argument index
    /// for `KernelArg`. Reply: the raw value bytes.
    GetInfo = 0x1001 { target: u32, handle: u64, index: u32, param: u32 }

    // ---- OpenCL: objects with guest-chosen handles -----------------------
    CreateContext = 0x1010 { context: u64, properties: Vec<u64> }
    /// `properties` as for `clCreateCommandQueueWithProperties`.
    CreateQueue = 0x1011 { queue: u64, context: u64, properties: Vec<u64> }
    /// `init` (out-data) fills the buffer when `len > 0` (`COPY_HOST_PTR`).
    CreateBuffer = 0x1012 { mem: u64, context: u64, flags: u64, size: u64, init: DataRef }
    CreateSubBuffer = 0x1013 { mem: u64, parent: u64, flags: u64, origin: u64, size: u64 }
    CreateProgramWithSource = 0x1014 { program: u64, context: u64, source: Vec<u8> }
    /// Reply status is the binary status when the program is created.
    CreateProgramWithBinary = 0x1015 { program: u64, context: u64, binary: Vec<u8> }
    CreateProgramWithIl = 0x1016 { program: u64, context: u64, il: Vec<u8> }
    BuildProgram = 0x1017 { program: u64, options: Vec<u8> }
    CreateKernel = 0x1018 { kernel: u64, program: u64, name: Vec<u8> }
    CreateUserEvent = 0x1019 { event: u64, context: u64 }
    CloneKernel = 0x101a { kernel: u64, source: u64 }
    /// `clCompileProgram` for one program without headers.
    CompileProgram = 0x101b { program: u64, options: Vec<u8> }
    /// `clLinkProgram` of compiled programs into a new program.
    LinkProgram = 0x101c { program: u64, context: u64, options: Vec<u8>, inputs: Vec<u64> }

    // ---- OpenCL: reference counts and state ------------------------------
    Retain = 0x1020 { kind: u32, handle: u64 }
    Release = 0x1021 { kind: u32, handle: u64 }
    /// `arg_kind` is an `ArgKind`.
    SetKernelArg = 0x1022 { kernel: u64, index: u32, arg_kind: u32, size: u64, value: Vec<u8>, handle: u64 }
    SetUserEventStatus = 0x1023 { event: u64, status: i32 }
    /// Writes initial contents outside any queue (the rest of a
    /// `COPY_HOST_PTR` buffer too large for one batch); complete on return.
    InitBuffer = 0x1024 { mem: u64, offset: u64, data: DataRef }

    // ---- OpenCL: commands (event 0 = none) -------------------------------
    EnqueueWriteBuffer = 0x1030 { queue: u64, mem: u64, offset: u64, data: DataRef, wait: Vec<u64>, event: u64 }
    EnqueueReadBuffer = 0x1031 { queue: u64, mem: u64, offset: u64, data: DataRef, wait: Vec<u64>, event: u64 }
    EnqueueCopyBuffer = 0x1032 { queue: u64, src: u64, dst: u64, src_offset: u64, dst_offset: u64, size: u64, wait: Vec<u64>, event: u64 }
    EnqueueFillBuffer = 0x1033 { queue: u64, mem: u64, pattern: Vec<u8>, offset: u64, size: u64, wait: Vec<u64>, event: u64 }
    /// Host-side geometry is relative to the start of `data`.
    EnqueueWriteBufferRect = 0x1034 { queue: u64, mem: u64, buffer_origin: [u64; 3], host_origin: [u64; 3], region: [u64; 3], buffer_row_pitch: u64, buffer_slice_pitch: u64, host_row_pitch: u64, host_slice_pitch: u64, data: DataRef, wait: Vec<u64>, event: u64 }
    EnqueueReadBufferRect = 0x1035 { queue: u64, mem: u64, buffer_origin: [u64; 3], host_origin: [u64; 3], region: [u64; 3], buffer_row_pitch: u64, buffer_slice_pitch: u64, host_row_pitch: u64, host_slice_pitch: u64, data: DataRef, wait: Vec<u64>, event: u64 }
    EnqueueCopyBufferRect = 0x1036 { queue: u64, src: u64, dst: u64, src_origin: [u64; 3], dst_origin: [u64; 3], region: [u64; 3], src_row_pitch: u64, src_slice_pitch: u64, dst_row_pitch: u64, dst_slice_pitch: u64, wait: Vec<u64>, event: u64 }
    /// A zero `local` means NULL (the implementation chooses).
    EnqueueNdRange = 0x1037 { queue: u64, kernel: u64, work_dim: u32, offset: [u64; 3], global: [u64; 3], local: [u64; 3], wait: Vec<u64>, event: u64 }
    EnqueueMarker = 0x1038 { queue: u64, wait: Vec<u64>, event: u64 }
    EnqueueBarrier = 0x1039 { queue: u64, wait: Vec<u64>, event: u64 }
    Flush = 0x1040 { queue: u64 }
    Finish = 0x1041 { queue: u64 }
    WaitForEvents = 0x1042 { events: Vec<u64> }

    // ---- OpenCL: images and samplers -------------------------------------
    // Image geometry is in pixels; image data in `data`/`init` is tightly
    // packed (rows of `region[0]` pixels, slices of `region[1]` rows).
    /// `clGetSupportedImageFormats`. Reply: `(channel_order, channel_type)`
    /// `u32` pairs, little-endian.
    GetImageFormats = 0x1050 { context: u64, flags: u64, image_type: u32 }
    /// `dims` is width, height, depth, array size; `buffer` names the buffer
    /// of a 1D buffer image (0 otherwise). Contents come by `InitImage`.
    CreateImage = 0x1051 { mem: u64, context: u64, flags: u64, channel_order: u32, channel_type: u32, image_type: u32, dims: [u64; 3], array_size: u64, buffer: u64 }
    /// Writes initial contents outside any queue; complete on return.
    InitImage = 0x1052 { mem: u64, origin: [u64; 3], region: [u64; 3], data: DataRef }
    EnqueueWriteImage = 0x1053 { queue: u64, mem: u64, origin: [u64; 3], region: [u64; 3], data: DataRef, wait: Vec<u64>, event: u64 }
    EnqueueReadImage = 0x1054 { queue: u64, mem: u64, origin: [u64; 3], region: [u64; 3], data: DataRef, wait: Vec<u64>, event: u64 }
    EnqueueCopyImage = 0x1055 { queue: u64, src: u64, dst: u64, src_origin: [u64; 3], dst_origin: [u64; 3], region: [u64; 3], wait: Vec<u64>, event: u64 }
    EnqueueCopyImageToBuffer = 0x1056 { queue: u64, src: u64, dst: u64, src_origin: [u64; 3], region: [u64; 3], dst_offset: u64, wait: Vec<u64>, event: u64 }
    EnqueueCopyBufferToImage = 0x1057 { queue: u64, src: u64, dst: u64, src_offset: u64, dst_origin: [u64; 3], region: [u64; 3], wait: Vec<u64>, event: u64 }
    /// `color` is the 16-byte fill colour (four floats, ints or uints).
    EnqueueFillImage = 0x1058 { queue: u64, mem: u64, color: Vec<u8>, origin: [u64; 3], region: [u64; 3], wait: Vec<u64>, event: u64 }
    /// `properties` as for `clCreateSamplerWithProperties` (pairs, no terminator).
    CreateSampler = 0x1059 { sampler: u64, context: u64, properties: Vec<u64> }

    // ---- OpenCL: coarse-grained buffer SVM ---------------------------------
    // SVM pointers are the backend's device addresses; the guest library maps
    // its own memory at the same addresses, and every range it names must
    // lie inside one allocation of the session.
    /// `clSVMAlloc`. Reply: the allocation's address (`u64`, little-endian).
    SvmAlloc = 0x1060 { context: u64, flags: u64, size: u64, alignment: u32 }
    /// `clSVMFree` of an allocation's start address.
    SvmFree = 0x1061 { context: u64, ptr: u64 }
    /// `data` (out-data) to SVM at `ptr`.
    EnqueueSvmWrite = 0x1062 { queue: u64, ptr: u64, data: DataRef, wait: Vec<u64>, event: u64 }
    /// SVM at `ptr` to `data` (in-data); complete when the reply comes.
    EnqueueSvmRead = 0x1063 { queue: u64, ptr: u64, data: DataRef, wait: Vec<u64>, event: u64 }
    EnqueueSvmCopy = 0x1064 { queue: u64, dst: u64, src: u64, size: u64, wait: Vec<u64>, event: u64 }
    EnqueueSvmFill = 0x1065 { queue: u64, ptr: u64, pattern: Vec<u8>, size: u64, wait: Vec<u64>, event: u64 }
    /// `clSetKernelExecInfo(CL_KERNEL_EXEC_INFO_SVM_PTRS)`.
    SetKernelExecSvm = 0x1066 { kernel: u64, ptrs: Vec<u64> }
    /// `clCreateBuffer(CL_MEM_USE_HOST_PTR)` over `[ptr, ptr + size)` of SVM.
    CreateSvmBuffer = 0x1067 { mem: u64, context: u64, flags: u64, ptr: u64, size: u64 }

    // ---- OpenCL: sub-devices ------------------------------------------------
    // Device handle 0 is the root device; others are sub-devices the guest
    // named in `CreateSubDevices`.
    /// `clCreateSubDevices` of `parent` with a partition property list
    /// (zero-terminated). Reply: the number of sub-devices the partition
    /// yields (`u32`). The first that many of `devices` name them; with no
    /// `devices` the partition is only counted.
    CreateSubDevices = 0x1070 { parent: u64, properties: Vec<u64>, devices: Vec<u64> }
    /// `clCreateContext` on these devices.
    CreateContextOnDevices = 0x1071 { context: u64, properties: Vec<u64>, devices: Vec<u64> }
    /// A queue on one device of the context.
    CreateQueueOnDevice = 0x1072 { queue: u64, context: u64, device: u64, properties: Vec<u64> }
    /// The session's placement gate: 8 bytes of guest memory, two
    /// little-endian `u32` words shared by both sides for the session's
    /// life: the guest sets word 0 while it copies into or out of a placed
    /// buffer itself; the backend sets word 1 once such copies must stop
    /// for good (before a checkpoint or a move to another device reads the
    /// buffers), then waits for word 0 to clear.
    SetPlacementGate = 0x1073 { gate: DataRef }

    // ---- CUDA driver API (results are `CUresult` codes; see `cuda.rs`) ----
    // `ctx` names the guest's current context where the call needs one;
    // stream 0 is that context's NULL stream.
    /// `cuInit`. Reply: `CuInitReply`.
    CuInit = 0x2001 { flags: u32 }
    /// Name, UUID, memory and every attribute of a device. Reply: `CuDeviceInfoReply`.
    CuDeviceInfo = 0x2002 { device: u32 }
    /// `cuMemGetInfo`. Reply: `CuMemInfoReply`.
    CuMemGetInfo = 0x2003 { ctx: u64 }
    CuCtxCreate = 0x2010 { ctx: u64, device: u32, flags: u32 }
    CuCtxDestroy = 0x2011 { ctx: u64 }
    /// Retains the device's primary context; the guest names it `ctx` on every retain.
    CuPrimaryCtxRetain = 0x2012 { ctx: u64, device: u32 }
    CuPrimaryCtxRelease = 0x2013 { device: u32 }
    CuPrimaryCtxReset = 0x2014 { device: u32 }
    CuCtxSynchronize = 0x2015 { ctx: u64 }
    /// `cuCtxGetStreamPriorityRange`. Reply: `CuIntReply` (least, greatest).
    CuCtxGetStreamPriorityRange = 0x2016 { ctx: u64 }
    /// `cuCtxGetLimit` (`limit` is a `CUlimit`). Reply: `CuValueReply`.
    CuCtxGetLimit = 0x2017 { ctx: u64, limit: u32 }
    /// `cuCtxSetLimit` (`limit` is a `CUlimit`). Reply: empty.
    CuCtxSetLimit = 0x2018 { ctx: u64, limit: u32, value: u64 }
    /// What kernels printed that the last synchronizing call's reply had
    /// no room for (`cuCtxSynchronize`, `cuStreamSynchronize`,
    /// `cuEventSynchronize` and context releases answer with what kernels
    /// printed as their payload). Reply: the bytes, up to 128 KiB.
    CuTakeDeviceOutput = 0x2019 { ctx: u64 }
    /// Reply: `CuRangeReply` (the device pointer).
    CuMemAlloc = 0x2020 { ctx: u64, size: u64 }
    CuMemFree = 0x2021 { ptr: u64 }
    /// `data` (out-data) to device address `dst`.
    CuMemcpyHtoD = 0x2022 { ctx: u64, stream: u64, dst: u64, data: DataRef }
    /// Device address `src` to `data` (in-data); complete when the reply comes.
    CuMemcpyDtoH = 0x2023 { ctx: u64, stream: u64, src: u64, data: DataRef }
    CuMemcpyDtoD = 0x2024 { ctx: u64, stream: u64, dst: u64, src: u64, size: u64 }
    /// `cuMemcpyDtoHAsync` into page-locked guest memory: the backend copies
    /// `size` bytes at `src` into host staging on `stream` and returns at
    /// once; `CuMemcpyCollect` of the guest-chosen handle `copy` fetches them.
    CuMemcpyDtoHStart = 0x2026 { ctx: u64, stream: u64, src: u64, size: u64, copy: u64 }
    /// Waits for copy `copy` and writes its bytes `[offset, offset+data.len)`
    /// to `data` (in-data); the copy is forgotten once its last byte went.
    CuMemcpyCollect = 0x2027 { copy: u64, offset: u64, data: DataRef }
    /// Page-locks the guest memory under `data` (out-data the transport
    /// names in place) with the host driver, so copies to and from it run
    /// as DMA and may finish after their chain returned; `block` names it.
    CuHostRegister = 0x2028 { block: u64, data: DataRef }
    /// Undoes `CuHostRegister` of `block` once the work using it finished.
    CuHostUnregister = 0x2029 { block: u64 }
    /// A synchronous copy between the device and page-locked guest memory
    /// (`data`, named in place: in-data for `DtoH`, out-data for `HtoD`)
    /// that answers before the copy ends: where all of `data` is registered
    /// with the host driver (`CuHostRegister`) and the driver can signal,
    /// the copy runs on `stream` (0: the NULL stream) and then the device
    /// writes `value` (little-endian `u32`) at byte `signal_offset` of
    /// registered block `signal_block`, which the guest watches. Otherwise
    /// the copy is done when the reply comes. Reply: `CuSignalledCopyReply`.
    CuMemcpyDtoHSignalled = 0x202a { ctx: u64, stream: u64, src: u64, data: DataRef, signal_block: u64, signal_offset: u64, value: u32 }
    /// The host-to-device form of `CuMemcpyDtoHSignalled`.
    CuMemcpyHtoDSignalled = 0x202b { ctx: u64, stream: u64, dst: u64, data: DataRef, signal_block: u64, signal_offset: u64, value: u32 }
    /// `cuMemsetD8/D16/D32`: `count` elements of `elem_size` (1, 2 or 4) bytes.
    CuMemset = 0x2025 { ctx: u64, stream: u64, dst: u64, value: u32, elem_size: u32, count: u64 }
    /// `cuMemsetD2D8/16/32`: `height` rows of `width` elements of
    /// `elem_size` (1, 2 or 4) bytes, `pitch` bytes apart.
    CuMemsetD2D = 0x202c { ctx: u64, stream: u64, dst: u64, pitch: u64, value: u32, elem_size: u32, width: u64, height: u64 }
    /// PTX, cubin or fat binary, kept for snapshots.
    CuModuleLoad = 0x2030 { module: u64, ctx: u64, image: Vec<u8> }
    CuModuleUnload = 0x2031 { module: u64 }
    /// Reply: `CuFunctionReply` (the parameter layout).
    CuModuleGetFunction = 0x2032 { function: u64, module: u64, name: Vec<u8> }
    /// Reply: `CuRangeReply`.
    CuModuleGetGlobal = 0x2033 { module: u64, name: Vec<u8> }
    /// Reply: `CuIntReply`.
    CuFuncGetAttribute = 0x2034 { function: u64, attribute: u32 }
    CuFuncSetAttribute = 0x2035 { function: u64, attribute: u32, value: i32 }
    CuFuncSetCacheConfig = 0x2036 { function: u64, config: u32 }
    /// Reply: `CuIntReply` (blocks per multiprocessor).
    CuOccupancyMaxActiveBlocks = 0x2037 { function: u64, block_size: u32, dynamic_smem: u64, flags: u32 }
    /// Reply: `CuIntReply` (minimum grid size, block size).
    CuOccupancyMaxPotentialBlockSize = 0x2038 { function: u64, dynamic_smem: u64, block_size_limit: u32, flags: u32 }
    /// One piece of a module image too large for one message, in order
    /// (`offset` is the bytes sent before it); see `cuda::MAX_IMAGE_LEN`.
    CuImageChunk = 0x2039 { upload: u64, offset: u64, data: Vec<u8> }
    /// `CuModuleLoad` of the image the chunks of `upload` carried (`len`
    /// bytes in all); the upload is consumed either way.
    CuModuleLoadStaged = 0x203a { module: u64, ctx: u64, upload: u64, len: u64 }
    /// `cuOccupancyAvailableDynamicSMemPerBlock`. Reply: `CuValueReply`.
    CuOccupancyAvailableDynamicSMem = 0x203b { function: u64, blocks: u32, block_size: u32 }
    /// `cuOccupancyMaxActiveClusters` for a launch of this shape (`cluster`
    /// all 0: the kernel's own cluster dimensions). Reply: `CuIntReply`.
    CuOccupancyMaxActiveClusters = 0x203c { function: u64, grid: [u32; 3], block: [u32; 3], shared_mem: u32, cluster: [u32; 3] }
    /// The names of a module's kernels (what cuFFT's table `6e163fbe`
    /// slot 7 enumerates). Reply: `CuNamesReply`.
    CuModuleFunctionNames = 0x203d { module: u64 }
    /// `params` is the packed parameter buffer, laid out as the function's reply said.
    CuLaunchKernel = 0x2040 { function: u64, ctx: u64, stream: u64, grid: [u32; 3], block: [u32; 3], shared_mem: u32, params: Vec<u8> }
    /// `cuLaunchCooperativeKernel`: as `CuLaunchKernel`, every block
    /// resident at once so that the grid can synchronize.
    CuLaunchCooperativeKernel = 0x2041 { function: u64, ctx: u64, stream: u64, grid: [u32; 3], block: [u32; 3], shared_mem: u32, params: Vec<u8> }
    CuStreamCreate = 0x2050 { stream: u64, ctx: u64, flags: u32, priority: i32 }
    CuStreamDestroy = 0x2051 { stream: u64 }
    CuStreamSynchronize = 0x2052 { ctx: u64, stream: u64 }
    /// Status `CUDA_ERROR_NOT_READY` while work is pending.
    CuStreamQuery = 0x2053 { ctx: u64, stream: u64 }
    CuStreamWaitEvent = 0x2054 { ctx: u64, stream: u64, event: u64, flags: u32 }
    CuEventCreate = 0x2060 { event: u64, ctx: u64, flags: u32 }
    CuEventDestroy = 0x2061 { event: u64 }
    CuEventRecord = 0x2062 { event: u64, stream: u64 }
    CuEventSynchronize = 0x2063 { event: u64 }
    /// Status `CUDA_ERROR_NOT_READY` while the event is pending.
    CuEventQuery = 0x2064 { event: u64 }
    /// Reply: `CuElapsedReply`.
    CuEventElapsedTime = 0x2065 { start: u64, end: u64 }
}

wire_struct! {
    /// Reply to `OpenSession`.
    SessionOpened { version: u32, max_request_len: u32, max_reply_len: u32, flags: u32 }
}

/// `SessionOpened::flags`: the backend reads and writes this loopback
/// front-end's own memory (cross-memory attach), so bulk data may be named
/// by descriptors in the peer window ([`crate::limits::PEER_WINDOW_BASE`])
/// instead of being copied into shared memory first.
pub const SESSION_FLAG_PEER_MEMORY: u32 = 1;

/// `SessionOpened::flags`: the backend honours [`MEM_FLAG_PLACED`].
pub const SESSION_FLAG_PLACED_BUFFERS: u32 = 2;

/// `CreateBuffer::flags` (a vgpu bit, never an OpenCL one): the buffer's
/// storage is the guest memory `init` names, for the buffer's whole life
/// (`init` covers the whole size, in one descriptor). A loopback program
/// then reads and writes such a buffer with one `memcpy` of its own, as a
/// native program's OpenCL library does, once its queue has drained. Only
/// devices whose buffers live in host memory (CPUs) can take it; others
/// refuse the creation with `INVALID_VALUE`.
pub const MEM_FLAG_PLACED: u64 = 1 << 62;

wire_struct! {
    /// Reply to `SessionStats`: live objects, indexed by `ObjectKind::index`.
    SessionStatsReply { counts: Vec<u64> }
}

impl Request {
    /// Whether the caller needs this call's reply before it can go on;
    /// everything else may be batched and its errors deferred.
    pub fn is_synchronous(&self) -> bool {
        matches!(
            self,
            Request::OpenSession(_)
                | Request::Ping(_)
                | Request::SessionStats(_)
                | Request::GetInfo(_)
                | Request::CreateProgramWithBinary(_)
                | Request::BuildProgram(_)
                | Request::CompileProgram(_)
                | Request::LinkProgram(_)
                | Request::EnqueueReadBuffer(_)
                | Request::EnqueueReadBufferRect(_)
                | Request::GetImageFormats(_)
                | Request::EnqueueReadImage(_)
                | Request::SvmAlloc(_)
                | Request::EnqueueSvmRead(_)
                | Request::Finish(_)
                | Request::WaitForEvents(_)
        )
    }
}
