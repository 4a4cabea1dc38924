//! The transport's own round trip: `Ping` messages sent one at a time and
//! waited for, through `VGPU_SOCKET` (loopback) or `/dev/vgpu0`. Prints the
//! median per-call time of batches of 1000 calls, for profiles of the
//! backend's per-call cost without any device work.
//!
//! `VGPU_SOCKET=/run/vgpu.sock cargo run --release -p vgpu-transport --example ping [CALLS]`

use std::time::Instant;

use vgpu_protocol::messages::Ping;
use vgpu_transport::Client;

fn main() {
    let calls: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("CALLS is a number"))
        .unwrap_or(200_000);
    let client = Client::from_env().expect("connect to the backend (VGPU_SOCKET)");
    let mut per_call = Vec::new();
    for _ in 0..calls.div_ceil(1000) {
        let t = Instant::now();
        for _ in 0..1000 {
            client.call(Ping {}.into()).expect("ping");
        }
        per_call.push(t.elapsed().as_secs_f64() * 1e6 / 1000.0);
    }
    per_call.sort_by(f64::total_cmp);
    println!(
        "ping: {} calls, median {:.3} us a call (batches of 1000: min {:.3}, max {:.3})",
        per_call.len() * 1000,
        per_call[per_call.len() / 2],
        per_call[0],
        per_call[per_call.len() - 1]
    );
}
