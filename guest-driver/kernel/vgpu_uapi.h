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
/*
 * Added (compatible): the most descriptors one chain may use, the device's
 * limit (protocol MAX_CHAIN_DESCRIPTORS). The request and reply streams take
 * one per 128 KiB, the data segments one per physically contiguous run of
 * pages (at worst one per page): a submit over it fails with -E2BIG.
 */
#define VGPU_MAX_DESCRIPTORS 4096
/* Added (compatible): most tickets one open file may hold unwaited (-EBUSY). */
#define VGPU_MAX_PENDING 1024

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

/*
 * Errors.
 * SUBMIT: -EFAULT  the argument, the request, a segment array or a segment's
 *                  pages cannot be read (in segments: written);
 *         -EINVAL  request_len/reply_capacity out of [header, limit], more than
 *                  VGPU_MAX_SEGMENTS segments, a zero-length or oversize
 *                  segment, or a batch header whose magic, version,
 *                  request_len or reply_capacity disagree with the call;
 *         -E2BIG   more than VGPU_MAX_DESCRIPTORS scatter-gather entries;
 *         -EBUSY   VGPU_MAX_PENDING tickets not yet waited for;
 *         -EINTR   a signal while waiting for ring space;
 *         -ENODEV  the device is gone.
 * The driver overwrites the batch header's session field with the file's
 * session id (unique, nonzero).
 * WAIT:   -EINVAL  unknown ticket (never issued, or already waited for);
 *         -ETIMEDOUT timeout_ms passed (the ticket stays valid);
 *         -EINTR   a signal (the ticket stays valid);
 *         -EIO     the device returned no reply (it refused the chain, or the
 *                  device was removed): the ticket is consumed;
 *         -EFAULT  the reply buffer is not writable: the ticket is consumed.
 * On success the ticket is consumed, reply_len is the number of reply-stream
 * bytes the device wrote and min(reply_len, reply_capacity) of them are
 * copied to reply; in segments hold the in-data stream.
 */

#endif /* VGPU_UAPI_H */
