/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * User-space interface of virtio_vgpu.ko (/dev/vgpuN).
 *
 * One session per open file. A process submits a batch (the request stream
 * described in protocol/README.md) with VGPU_IOC_SUBMIT and collects the
 * reply with VGPU_IOC_WAIT. Bulk data is passed as segments of the caller's
 * own memory; the driver pins those pages and hands them to the device as
 * scatter-gather entries, so nothing is copied.
 */
#ifndef VGPU_UAPI_H
#define VGPU_UAPI_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define VGPU_VIRTIO_ID 60

/* Wire constants the driver itself needs (see protocol/README.md). */
#define VGPU_BATCH_MAGIC 0x55504756u /* "VGPU" */
#define VGPU_BATCH_HEADER_SIZE 32
#define VGPU_BATCH_SESSION_OFFSET 8
#define VGPU_MSG_HEADER_SIZE 24
#define VGPU_REPLY_HEADER_SIZE 24
#define VGPU_PROTOCOL_VERSION 1
#define VGPU_OP_CLOSE_SESSION 2

/* Limits the driver enforces before touching anything. */
#define VGPU_MAX_REQUEST_LEN (16u << 20)
#define VGPU_MAX_REPLY_LEN (16u << 20)
#define VGPU_MAX_SEGMENTS 64
#define VGPU_MAX_DATA_LEN (64u << 20) /* per direction, per batch */

struct vgpu_segment {
	__u64 addr; /* user virtual address */
	__u64 len;
};

struct vgpu_submit {
	__u64 request;        /* in: user pointer to the request stream */
	__u32 request_len;    /* in */
	__u32 reply_capacity; /* in: bytes reserved for the reply stream */
	__u64 out_segs;       /* in: user pointer to struct vgpu_segment[n_out] (to the device) */
	__u64 in_segs;        /* in: user pointer to struct vgpu_segment[n_in] (from the device) */
	__u32 n_out;          /* in */
	__u32 n_in;           /* in */
	__u64 ticket;         /* out: pass to VGPU_IOC_WAIT */
};

struct vgpu_wait {
	__u64 ticket;    /* in */
	__u64 reply;     /* in: user pointer, receives the reply stream */
	__u32 reply_capacity; /* in: size of the buffer at reply */
	__u32 reply_len; /* out: bytes the device wrote to the reply stream */
	__s64 timeout_ms; /* in: < 0 waits forever */
};

#define VGPU_IOC_MAGIC 'V'
#define VGPU_IOC_SUBMIT _IOWR(VGPU_IOC_MAGIC, 1, struct vgpu_submit)
#define VGPU_IOC_WAIT _IOWR(VGPU_IOC_MAGIC, 2, struct vgpu_wait)

#endif /* VGPU_UAPI_H */
