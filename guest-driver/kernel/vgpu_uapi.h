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

/*
 * TEST ONLY: VGPU_IOC_RAW_RING hands the device hand-made descriptor chains,
 * so a test can check that malformed chains from a guest cannot hurt the
 * back-end. It needs the module parameter raw_ring_test=1 (also writable at
 * run time: /sys/module/virtio_vgpu/parameters/raw_ring_test) and
 * CAP_SYS_ADMIN, else -EPERM.
 *
 * The call copies data_len bytes of `data` into a scratch area (physically
 * contiguous, VGPU_RAW_SCRATCH_LEN bytes, guest-physical address `scratch`,
 * kept for the device's life) for descriptors to point at; writes the n_descs
 * descriptors of `descs` AS IS into slots 0..n_descs-1 of the submit queue's
 * descriptor table; puts `head` (any 16-bit value, also one past the ring)
 * in the next available-ring entry, advances the available index by
 * 1 + avail_skip (avail_skip > 0 makes it jump over entries nobody wrote)
 * and notifies the device. It then waits up to timeout_ms for the used ring
 * to move, reports how many entries it gained and the first of them, and
 * copies the scratch area back to `data`. VGPU_RAW_QUERY only fills
 * queue_size and scratch, touching nothing.
 *
 * The first chain published needs an idle ring (-EBUSY) and leaves the device
 * unusable for the rest of the boot: the driver's ring bookkeeping no longer
 * matches the ring, so from then on SUBMIT fails with -EIO and closing a file
 * sends no CLOSE_SESSION.
 * Errors: -EPERM, -EINVAL (unknown flags, n_descs over the ring size, head
 * or avail_skip over 0xffff, data_len over the scratch size), -EFAULT,
 * -ENOMEM, -EBUSY, -ENODEV (device gone), -EOPNOTSUPP (packed ring, or an
 * IOMMU between the device and guest memory),
 * -EINTR (a signal while waiting: the chain was published).
 */
struct vgpu_raw_desc {
	__u64 addr;  /* guest-physical */
	__u32 len;
	__u16 flags; /* VRING_DESC_F_NEXT 1, _WRITE 2, _INDIRECT 4 */
	__u16 next;
};

#define VGPU_RAW_QUERY 1u
#define VGPU_RAW_SCRATCH_LEN (256u << 10)
#define VGPU_RAW_MAX_TIMEOUT_MS 60000u

struct vgpu_raw_ring {
	__u64 descs;      /* in: user pointer to struct vgpu_raw_desc[n_descs] */
	__u64 data;       /* in/out: user pointer to data_len bytes (see above) */
	__u32 n_descs;    /* in: at most queue_size */
	__u32 data_len;   /* in: at most VGPU_RAW_SCRATCH_LEN */
	__u32 head;       /* in: the available-ring entry, at most 0xffff */
	__u32 flags;      /* in: VGPU_RAW_QUERY */
	__u32 timeout_ms; /* in: wait for the used ring (capped at VGPU_RAW_MAX_TIMEOUT_MS) */
	__u32 queue_size; /* out: entries of the submit queue */
	__u64 scratch;    /* out: guest-physical address of the scratch area */
	__u32 used;       /* out: used-ring entries added while waiting */
	__u32 used_id;    /* out: the first one's id and length (when used > 0) */
	__u32 used_len;
	__u32 avail_skip; /* in: normally 0 */
};

#define VGPU_IOC_MAGIC 'V'
#define VGPU_IOC_SUBMIT _IOWR(VGPU_IOC_MAGIC, 1, struct vgpu_submit)
#define VGPU_IOC_WAIT _IOWR(VGPU_IOC_MAGIC, 2, struct vgpu_wait)
#define VGPU_IOC_RAW_RING _IOWR(VGPU_IOC_MAGIC, 3, struct vgpu_raw_ring) /* test only */

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
 *         -ENODEV  the device is gone;
 *         -EIO     VGPU_IOC_RAW_RING was used on this device (test only).
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
