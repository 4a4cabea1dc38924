//! Entry points this library does not forward: native
//! kernels, device fission (`cl_ext_device_fission`), pipes, GL/EGL sharing, sub-group and
//! timer queries, device-side queues, specialization constants. Each
//! returns `CL_INVALID_OPERATION` (objects: NULL with that code), never
//! touching its arguments. The README lists them.

use std::ffi::{c_char, c_void};

use opencl_sys::cl_egl::{
    cl_egl_image_properties_khr, CLeglDisplayKHR, CLeglImageKHR, CLeglSyncKHR,
};
use opencl_sys::*;

use crate::api::entry::{unimplemented_object, unimplemented_status};

type NativeFn = Option<unsafe extern "C" fn(*mut c_void)>;
type ProgramFn = Option<unsafe extern "C" fn(cl_program, *mut c_void)>;

unimplemented_object! {
    fn clCreatePipe(context: cl_context, flags: cl_mem_flags, pipe_packet_size: cl_uint, pipe_max_packets: cl_uint, properties: *const cl_pipe_properties) -> cl_mem;
    fn clCreateProgramWithBuiltInKernels(context: cl_context, num_devices: cl_uint, device_list: *const cl_device_id, kernel_names: *const c_char) -> cl_program;
    fn clCreateFromGLBuffer(context: cl_context, flags: cl_mem_flags, bufobj: cl_GLuint) -> cl_mem;
    fn clCreateFromGLTexture(context: cl_context, flags: cl_mem_flags, target: cl_GLenum, miplevel: cl_GLint, texture: cl_GLuint) -> cl_mem;
    fn clCreateFromGLTexture2D(context: cl_context, flags: cl_mem_flags, target: cl_GLenum, miplevel: cl_GLint, texture: cl_GLuint) -> cl_mem;
    fn clCreateFromGLTexture3D(context: cl_context, flags: cl_mem_flags, target: cl_GLenum, miplevel: cl_GLint, texture: cl_GLuint) -> cl_mem;
    fn clCreateFromGLRenderbuffer(context: cl_context, flags: cl_mem_flags, renderbuffer: cl_GLuint) -> cl_mem;
    fn clCreateEventFromGLsyncKHR(context: cl_context, sync: cl_GLsync) -> cl_event;
    fn clCreateFromEGLImageKHR(context: cl_context, egldisplay: CLeglDisplayKHR, eglimage: CLeglImageKHR, flags: cl_mem_flags, properties: *const cl_egl_image_properties_khr) -> cl_mem;
    fn clCreateEventFromEGLSyncKHR(context: cl_context, sync: CLeglSyncKHR, display: CLeglDisplayKHR) -> cl_event;
}

unimplemented_status! {
    fn clEnqueueNativeKernel(command_queue: cl_command_queue, user_func: NativeFn, args: *mut c_void, cb_args: usize, num_mem_objects: cl_uint, mem_list: *const cl_mem, args_mem_loc: *mut *const c_void, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event);
    fn clSetCommandQueueProperty(command_queue: cl_command_queue, properties: cl_command_queue_properties, enable: cl_bool, old_properties: *mut cl_command_queue_properties);
    fn clCreateSubDevicesEXT(in_device: cl_device_id, properties: *const cl_device_partition_property_ext, num_entries: cl_uint, out_devices: *mut cl_device_id, num_devices: *mut cl_uint);
    fn clRetainDeviceEXT(device: cl_device_id);
    fn clReleaseDeviceEXT(device: cl_device_id);
    fn clGetKernelSubGroupInfo(kernel: cl_kernel, device: cl_device_id, param_name: cl_kernel_sub_group_info, input_value_size: usize, input_value: *const c_void, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize);
    fn clGetKernelSubGroupInfoKHR(in_kernel: cl_kernel, in_device: cl_device_id, param_name: cl_kernel_sub_group_info, input_value_size: usize, input_value: *const c_void, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize);
    fn clGetKernelSuggestedLocalWorkSizeKHR(command_queue: cl_command_queue, kernel: cl_kernel, work_dim: cl_uint, global_work_offset: *const usize, global_work_size: *const usize, suggested_local_work_size: *mut usize);
    fn clSetDefaultDeviceCommandQueue(context: cl_context, device: cl_device_id, command_queue: cl_command_queue);
    fn clGetDeviceAndHostTimer(device: cl_device_id, device_timestamp: *mut cl_ulong, host_timestamp: *mut cl_ulong);
    fn clGetHostTimer(device: cl_device_id, host_timestamp: *mut cl_ulong);
    fn clSetProgramReleaseCallback(program: cl_program, pfn_notify: ProgramFn, user_data: *mut c_void);
    fn clSetProgramSpecializationConstant(program: cl_program, spec_id: cl_uint, spec_size: usize, spec_value: *const c_void);
    fn clGetGLObjectInfo(memobj: cl_mem, gl_object_type: *mut cl_gl_object_type, gl_object_name: *mut cl_GLuint);
    fn clGetGLTextureInfo(memobj: cl_mem, param_name: cl_gl_texture_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize);
    fn clEnqueueAcquireGLObjects(command_queue: cl_command_queue, num_objects: cl_uint, mem_objects: *const cl_mem, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event);
    fn clEnqueueReleaseGLObjects(command_queue: cl_command_queue, num_objects: cl_uint, mem_objects: *const cl_mem, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event);
    fn clGetGLContextInfoKHR(properties: *const cl_context_properties, param_name: cl_gl_context_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize);
    fn clEnqueueAcquireEGLObjectsKHR(command_queue: cl_command_queue, num_objects: cl_uint, mem_objects: *const cl_mem, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event);
    fn clEnqueueReleaseEGLObjectsKHR(command_queue: cl_command_queue, num_objects: cl_uint, mem_objects: *const cl_mem, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event);
}
