//! The object model: what each handle the application holds stands for,
//! and the connection to the device.

pub mod callback;
pub mod context;
pub mod device;
pub mod event;
pub mod image;
pub mod include;
pub mod info;
pub mod kernel;
pub mod log;
pub mod map;
pub mod memory;
pub mod object;
pub mod pixels;
pub mod placed;
pub mod platform;
pub mod program;
pub mod queue;
pub mod rect;
pub mod staged;
pub mod svm;
pub mod sync;
pub mod transfer;
pub mod watcher;
