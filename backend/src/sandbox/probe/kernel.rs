//! The probe's workload: one small OpenCL kernel built and run after the
//! confinement, the way a guest's first program would be (PoCL compiles,
//! forks its linker, writes its cache, starts its threads).

use std::ffi::{c_void, CString};
use std::ptr;

use cl3::types::{cl_command_queue, cl_context, cl_device_id, cl_kernel, cl_mem, cl_program};

const SOURCE: &str = r#"
kernel void probe(global const uint* in, global uint* out) {
    size_t i = get_global_id(0);
    out[i] = in[i] * 3u + (uint)i;
}
"#;

/// Work items, one element each.
pub const ELEMENTS: usize = 4096;

fn expected(input: u32, index: usize) -> u32 {
    input.wrapping_mul(3).wrapping_add(index as u32)
}

/// The OpenCL objects made so far, released on drop in reverse order.
#[derive(Default)]
struct Objects {
    context: Option<cl_context>,
    queue: Option<cl_command_queue>,
    program: Option<cl_program>,
    kernel: Option<cl_kernel>,
    buffers: Vec<cl_mem>,
}

impl Drop for Objects {
    fn drop(&mut self) {
        // SAFETY: each handle was created by this probe, is released once,
        // and nothing uses it afterwards. Release errors cannot be acted on.
        unsafe {
            for mem in self.buffers.drain(..) {
                let _ = cl3::memory::release_mem_object(mem);
            }
            if let Some(k) = self.kernel.take() {
                let _ = cl3::kernel::release_kernel(k);
            }
            if let Some(p) = self.program.take() {
                let _ = cl3::program::release_program(p);
            }
            if let Some(q) = self.queue.take() {
                let _ = cl3::command_queue::release_command_queue(q);
            }
            if let Some(c) = self.context.take() {
                let _ = cl3::context::release_context(c);
            }
        }
    }
}

fn cl(what: &str) -> impl Fn(i32) -> String + '_ {
    move |status| format!("{what} failed: OpenCL status {status}")
}

/// Builds and runs the kernel on `device`; the number of elements checked
/// on success.
pub fn run(device: cl_device_id) -> Result<usize, String> {
    let mut objects = Objects::default();
    let context = cl3::context::create_context(&[device], ptr::null(), None, ptr::null_mut())
        .map_err(cl("clCreateContext"))?;
    objects.context = Some(context);
    // SAFETY: valid context and device, no properties.
    let queue = unsafe {
        cl3::command_queue::create_command_queue_with_properties(context, device, ptr::null())
    }
    .map_err(cl("clCreateCommandQueueWithProperties"))?;
    objects.queue = Some(queue);
    let program = cl3::program::create_program_with_source(context, &[SOURCE])
        .map_err(cl("clCreateProgramWithSource"))?;
    objects.program = Some(program);
    let no_options = CString::default();
    if let Err(status) =
        cl3::program::build_program(program, &[device], &no_options, None, ptr::null_mut())
    {
        let log = cl3::program::get_program_build_data(
            program,
            device,
            cl3::program::CL_PROGRAM_BUILD_LOG,
        )
        .map(|b| {
            String::from_utf8_lossy(&b)
                .trim_end_matches('\0')
                .to_string()
        })
        .unwrap_or_default();
        return Err(format!(
            "clBuildProgram failed: OpenCL status {status}: {log}"
        ));
    }
    let name = CString::new("probe").expect("no NUL in the kernel name");
    let kernel = cl3::kernel::create_kernel(program, &name).map_err(cl("clCreateKernel"))?;
    objects.kernel = Some(kernel);

    let mut input: Vec<u32> = (0..ELEMENTS as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let bytes = ELEMENTS * 4;
    // SAFETY: `input` holds `bytes` bytes, copied by the call
    // (CL_MEM_COPY_HOST_PTR).
    let in_mem = unsafe {
        cl3::memory::create_buffer(
            context,
            cl3::memory::CL_MEM_READ_ONLY | cl3::memory::CL_MEM_COPY_HOST_PTR,
            bytes,
            input.as_mut_ptr().cast(),
        )
    }
    .map_err(cl("clCreateBuffer"))?;
    objects.buffers.push(in_mem);
    // SAFETY: no host pointer.
    let out_mem = unsafe {
        cl3::memory::create_buffer(
            context,
            cl3::memory::CL_MEM_WRITE_ONLY,
            bytes,
            ptr::null_mut(),
        )
    }
    .map_err(cl("clCreateBuffer"))?;
    objects.buffers.push(out_mem);
    for (index, mem) in [in_mem, out_mem].iter().enumerate() {
        // SAFETY: the value is a cl_mem of the size given.
        unsafe {
            cl3::kernel::set_kernel_arg(
                kernel,
                index as u32,
                std::mem::size_of::<cl_mem>(),
                (mem as *const cl_mem).cast::<c_void>(),
            )
        }
        .map_err(cl("clSetKernelArg"))?;
    }
    let global = [ELEMENTS];
    // SAFETY: one dimension, `global` outlives the call, no events.
    let event = unsafe {
        cl3::command_queue::enqueue_nd_range_kernel(
            queue,
            kernel,
            1,
            ptr::null(),
            global.as_ptr(),
            ptr::null(),
            0,
            ptr::null(),
        )
    }
    .map_err(cl("clEnqueueNDRangeKernel"))?;
    // SAFETY: the event was returned by the enqueue above.
    let _ = unsafe { cl3::event::release_event(event) };
    let mut output = vec![0u32; ELEMENTS];
    // SAFETY: blocking read of `bytes` into `output`, which holds as many.
    let event = unsafe {
        cl3::command_queue::enqueue_read_buffer(
            queue,
            out_mem,
            cl3::types::CL_BLOCKING,
            0,
            bytes,
            output.as_mut_ptr().cast(),
            0,
            ptr::null(),
        )
    }
    .map_err(cl("clEnqueueReadBuffer"))?;
    // SAFETY: the event was returned by the read above.
    let _ = unsafe { cl3::event::release_event(event) };
    let wrong = output
        .iter()
        .zip(&input)
        .enumerate()
        .filter(|(i, (out, inp))| **out != expected(**inp, *i))
        .count();
    if wrong > 0 {
        return Err(format!("{wrong} of {ELEMENTS} results are wrong"));
    }
    Ok(ELEMENTS)
}
