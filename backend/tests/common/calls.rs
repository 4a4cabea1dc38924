//! Calls most tests make through a `Client`, the way a guest library
//! would: a context and its queue, a built kernel, a blocking read.

use vgpu_protocol::messages::EnqueueReadBuffer;
use vgpu_protocol::Status;
use vgpu_transport::Client;

use super::req;

/// A context and a queue on it.
pub fn context_and_queue(client: &Client) -> (u64, u64) {
    let context = client.new_handle();
    client.defer(req::context(context)).expect("context");
    let queue = client.new_handle();
    client.defer(req::queue(queue, context)).expect("queue");
    (context, queue)
}

/// Kernel `name` of a program built from `source` in `context`.
pub fn built_kernel(client: &Client, context: u64, source: &[u8], name: &[u8]) -> u64 {
    let program = client.new_handle();
    client
        .defer(req::program(program, context, source))
        .expect("program");
    client.call(req::build(program)).expect("build");
    let kernel = client.new_handle();
    client
        .call(req::kernel(kernel, program, name))
        .expect("kernel");
    kernel
}

/// A blocking read of all of `out` from the start of buffer `mem`.
pub fn read_buffer(
    client: &Client,
    queue: u64,
    mem: u64,
    out: &mut [u8],
) -> Result<Vec<u8>, Status> {
    client.call_with_in(out, |data, start| {
        EnqueueReadBuffer {
            queue,
            mem,
            offset: start,
            data,
            wait: vec![],
            event: 0,
        }
        .into()
    })
}
