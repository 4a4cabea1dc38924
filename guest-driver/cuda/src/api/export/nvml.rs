//! The table `69a28e9f-…` (34 words) belongs to NVML, not to the CUDA
//! math libraries: `libnvidia-ml.so.1` asks for it (PyTorch initialises
//! NVML before its first matmul), as the argument traces with callers show
//! (`traces/cublas-slot-args-deep.txt`). NVML calls slot 24 and slot 25
//! around its work (the driver's code takes and releases a process-wide
//! lock there), slot 19 to create an object and slot 21 to fill it with
//! pointers to driver functions.
//!
//! None of that can be served from a guest: the object NVML asks for is a
//! way into the host driver's own code. Measured natively (cutrace's
//! `CUTRACE_FAKE`), NVML goes on and PyTorch's matmul gives the same result
//! when slot 19 answers `CUDA_ERROR_NOT_SUPPORTED` (NVML then skips slot
//! 21) and when slots 24 and 25 do; so every slot here answers that, and
//! nothing in the table pretends to work.

use super::{refusing, Table};

pub static NVML_TABLE: Table<34> = Table::new(refusing::<34>());

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::export::NS;

    #[test]
    fn table_has_the_drivers_size_and_refuses_every_slot() {
        assert_eq!(NVML_TABLE.0[0] as usize, 0x110);
        assert!(NVML_TABLE.0[1..].iter().all(|w| *w == NS));
    }
}
