//! The vhost-user side of a worker: the device QEMU (or a loopback
//! program) drives, and the device
//! state it saves and loads for a migration.

mod avail_index;
pub mod device;
pub mod device_state;
mod used_ring;
