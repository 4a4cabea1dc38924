//! Short constructors for the requests the tests build over and over, so a
//! test reads as the objects it makes rather than as their field lists.
#![allow(dead_code)]

use vgpu_protocol::messages::*;
use vgpu_protocol::{DataRef, Reply, Request};

/// A context with no properties.
pub fn context(context: u64) -> Request {
    CreateContext {
        context,
        properties: vec![],
    }
    .into()
}

/// An in-order queue with no properties.
pub fn queue(queue: u64, context: u64) -> Request {
    CreateQueue {
        queue,
        context,
        properties: vec![],
    }
    .into()
}

/// A program from OpenCL C source.
pub fn program(program: u64, context: u64, source: &[u8]) -> Request {
    CreateProgramWithSource {
        program,
        context,
        source: source.to_vec(),
    }
    .into()
}

/// A build with no options.
pub fn build(program: u64) -> Request {
    BuildProgram {
        program,
        options: vec![],
    }
    .into()
}

/// A kernel of a built program.
pub fn kernel(kernel: u64, program: u64, name: &[u8]) -> Request {
    CreateKernel {
        kernel,
        program,
        name: name.to_vec(),
    }
    .into()
}

/// A buffer with no initial contents.
pub fn buffer(mem: u64, context: u64, flags: u64, size: u64) -> Request {
    CreateBuffer {
        mem,
        context,
        flags,
        size,
        init: DataRef::NONE,
    }
    .into()
}

/// Kernel argument `index` set to buffer `mem`.
pub fn mem_arg(kernel: u64, index: u32, mem: u64) -> Request {
    SetKernelArg {
        kernel,
        index,
        arg_kind: vgpu_protocol::ArgKind::Mem as u32,
        size: 8,
        value: vec![],
        handle: mem,
    }
    .into()
}

/// Kernel argument `index` set to `size` bytes of `__local` memory.
pub fn local_arg(kernel: u64, index: u32, size: u64) -> Request {
    SetKernelArg {
        kernel,
        index,
        arg_kind: vgpu_protocol::ArgKind::Local as u32,
        size,
        value: vec![],
        handle: 0,
    }
    .into()
}

/// Context 1, queue 2, program 3 built from `source`, kernel 4 named `name`:
/// the set-up most tests start from.
pub fn kernel_setup(source: &[u8], name: &[u8]) -> Vec<Request> {
    vec![
        context(1),
        queue(2, 1),
        program(3, 1, source),
        build(3),
        kernel(4, 3, name),
    ]
}

/// Panics naming the first record that failed.
pub fn assert_all_ok(reply: &Reply) {
    assert!(reply.status.is_success(), "{reply:?}");
    for record in &reply.records {
        assert!(
            record.status.is_success(),
            "record {} failed: {}",
            record.seq,
            record.status
        );
    }
}
