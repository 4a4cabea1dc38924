// SPDX-License-Identifier: GPL-2.0
/*
 * virtio_vgpu: guest driver of the vgpu virtio device (virtio id 60).
 *
 * Queue 0 (submit) carries one descriptor chain per batch:
 *   readable: [request stream][out pages...]   writable: [reply][in pages...]
 * Queue 1 (event) holds a few writable buffers the device fills with
 * notifications; they are logged and reposted.
 *
 * Each open of /dev/vgpuN is one session. VGPU_IOC_SUBMIT copies the request
 * stream, stamps the session id into it, pins the caller's data pages and
 * queues the chain; VGPU_IOC_WAIT collects the reply. Closing the file waits
 * (bounded) for its requests and sends CLOSE_SESSION. The wire format is in
 * protocol/README.md, the ioctl ABI in vgpu_uapi.h.
 */
#include <linux/module.h>
#include <linux/virtio.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>
#include <linux/miscdevice.h>
#include <linux/fs.h>
#include <linux/slab.h>
#include <linux/mm.h>
#include <linux/scatterlist.h>
#include <linux/uaccess.h>
#include <linux/xarray.h>
#include <linux/idr.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <linux/kref.h>
#include <linux/sizes.h>
#include <linux/capability.h>
#include <linux/delay.h>
#include <linux/mutex.h>
#include <linux/sched/signal.h>
#include <linux/sched/stat.h>
#include <linux/sched/clock.h>
#include "vgpu_uapi.h"

#define VGPU_CHUNK (128u << 10)	/* kernel copies of request/reply, per sg entry */
#define VGPU_EVENT_BUFS 16
#define VGPU_EVENT_BUF_SIZE 64
#define VGPU_RELEASE_WAIT (10 * HZ)	/* close: in-flight requests */
#define VGPU_CLOSE_WAIT (2 * HZ)	/* close: CLOSE_SESSION reply */
#define VGPU_RAW_POLL_MS 2		/* raw_ring_test: used-ring polling */
#define VGPU_POLL_US_DEFAULT 50		/* poll_us: see README.md for the measurement */
#define VGPU_POLL_US_MAX 10000		/* poll_us: never a tick's worth of spinning */
#define VGPU_SPARE_CHUNKS 4		/* largest buffer a file keeps for reuse (512 KiB) */
#define VGPU_REPLY_MAGIC 0x52504756u	/* ReplyHeader (protocol/README.md): magic, */
#define VGPU_REPLY_LEN_OFFSET 12	/* and reply_len, the bytes it wrote */

/*
 * A guest thread that waits for a reply it will get in a few tens of
 * microseconds pays more for sleeping than for looking: the interrupt
 * (the back-end's eventfd write, its injection, the handler) and the
 * wake-up. Looking at the used ring instead, with the queue's interrupts
 * off, lets the back-end skip the interrupt altogether (EVENT_IDX: it
 * signals only when the driver's used_event asks for it).
 */
static unsigned int poll_us = VGPU_POLL_US_DEFAULT;
module_param(poll_us, uint, 0644);
MODULE_PARM_DESC(poll_us,
	"How long (microseconds) VGPU_IOC_WAIT looks at the used ring for its reply, with the queue's "
	"interrupts off, before it sleeps until the interrupt; 0: always sleep. Looking stops early "
	"when another task is runnable on the CPU or a signal is pending (max "
	__stringify(VGPU_POLL_US_MAX) ")");

static bool raw_ring_test;
module_param(raw_ring_test, bool, 0644);
MODULE_PARM_DESC(raw_ring_test,
	"TEST ONLY: allow VGPU_IOC_RAW_RING (root), which writes raw descriptors into the submit ring; "
	"its first use breaks the device for the rest of the boot (SUBMIT fails with EIO)");

struct vgpu_buf {		/* a kernel buffer in physically contiguous chunks */
	u32 len, n;		/* bytes and chunks in use */
	u32 n_alloc;		/* chunks allocated (>= n once reused) */
	bool whole;		/* every chunk is VGPU_CHUNK bytes: reusable */
	void **chunk;
};

enum { VGPU_REQ_BUF, VGPU_REPLY_BUF };

struct vgpu_req {
	struct list_head node;	/* on vgpu_dev.orphans once its file is gone */
	struct vgpu_buf req, reply;
	struct page **pages;	/* n_out pinned read-only, then n_in writable */
	unsigned int n_out, n_in;
	struct scatterlist *sg, *sg_in;	/* [request][out pages] [reply][in pages] */
	unsigned int used_len;
	bool done;		/* set once by the vq callback (release/acquire) */
	bool kicked;		/* the device asked for a kick: its vring thread slept */
	bool orphan;		/* under vq_lock: the reaper frees it when done */
};

struct vgpu_dev {
	struct kref ref;	/* probe + one per open file */
	struct virtio_device *vdev;
	struct virtqueue *vq, *evq;
	spinlock_t vq_lock, ev_lock;
	wait_queue_head_t wq;	/* completions and ring space */
	unsigned long completions;
	bool broken, indirect;
	unsigned int pollers;	/* under vq_lock: WAITs polling the used ring */
	bool raw;		/* under vq_lock: VGPU_IOC_RAW_RING took the submit ring */
	struct mutex raw_lock;	/* one VGPU_IOC_RAW_RING at a time */
	void *raw_scratch;	/* VGPU_RAW_SCRATCH_LEN bytes, freed with the device */
	struct list_head orphans;
	struct work_struct reaper;
	int index;
	char name[16];
	struct miscdevice misc;
};

struct vgpu_file {
	struct vgpu_dev *d;
	u64 session;
	struct xarray reqs;	/* ticket -> vgpu_req */
	u32 next_ticket;
	atomic_t pending;
	/*
	 * A spare request and reply buffer, reused by the next call: every
	 * call used to allocate and zero its reply room (256 KiB for a
	 * synchronous call), which cost more than the round trip itself.
	 * They only ever hold this session's own bytes.
	 */
	spinlock_t spare_lock;
	struct vgpu_buf spare[2];	/* under spare_lock; chunk NULL: none */
};

static DEFINE_IDA(vgpu_ida);
static atomic64_t vgpu_sessions = ATOMIC64_INIT(0);

static u32 vgpu_chunk_len(const struct vgpu_buf *b, u32 i)
{
	return min(VGPU_CHUNK, b->len - i * VGPU_CHUNK);
}

/* @whole: full-sized chunks, so that the buffer can be reused */
static int vgpu_buf_alloc(struct vgpu_buf *b, u32 len, bool whole)
{
	u32 i;

	b->len = len;
	b->n = b->n_alloc = DIV_ROUND_UP(len, VGPU_CHUNK);
	b->whole = whole;
	b->chunk = kcalloc(b->n, sizeof(void *), GFP_KERNEL);
	if (!b->chunk)
		return -ENOMEM;
	for (i = 0; i < b->n; i++) {
		/* zeroed: never hand stale kernel memory to user space */
		b->chunk[i] = kzalloc(whole ? VGPU_CHUNK : vgpu_chunk_len(b, i), GFP_KERNEL);
		if (!b->chunk[i])
			return -ENOMEM;
	}
	return 0;
}

static void vgpu_buf_free(struct vgpu_buf *b)
{
	u32 i;

	for (i = 0; b->chunk && i < b->n_alloc; i++)
		kfree(b->chunk[i]);
	kfree(b->chunk);
	b->chunk = NULL;
}

/* A buffer of @len bytes for @f: its spare one when large enough. */
static int vgpu_buf_get(struct vgpu_file *f, int which, struct vgpu_buf *b, u32 len)
{
	u32 n = DIV_ROUND_UP(len, VGPU_CHUNK);
	struct vgpu_buf *spare = &f->spare[which];

	spin_lock(&f->spare_lock);
	if (spare->chunk && spare->n_alloc >= n) {
		*b = *spare;
		spare->chunk = NULL;
	}
	spin_unlock(&f->spare_lock);
	if (!b->chunk)
		return vgpu_buf_alloc(b, len, n <= VGPU_SPARE_CHUNKS);
	b->len = len;
	b->n = n;
	return 0;
}

/* Keeps @b as @f's spare if it is reusable and larger than the spare. */
static void vgpu_buf_put(struct vgpu_file *f, int which, struct vgpu_buf *b)
{
	struct vgpu_buf *spare = &f->spare[which], old = { .chunk = NULL };

	if (b->chunk && b->whole && b->n_alloc <= VGPU_SPARE_CHUNKS) {
		spin_lock(&f->spare_lock);
		if (!spare->chunk || spare->n_alloc < b->n_alloc) {
			old = *spare;
			*spare = *b;
			b->chunk = NULL;
		}
		spin_unlock(&f->spare_lock);
	}
	vgpu_buf_free(&old);
	vgpu_buf_free(b);
}

static int vgpu_buf_copy(struct vgpu_buf *b, void __user *u, u32 len, bool to_user)
{
	u32 i, n;

	for (i = 0; len; i++, len -= n, u += n) {
		n = min(len, vgpu_chunk_len(b, i));
		if (to_user ? copy_to_user(u, b->chunk[i], n) :
			      copy_from_user(b->chunk[i], u, n))
			return -EFAULT;
	}
	return 0;
}

/* @f: take the buffers from its spares (NULL: fresh, exact-sized ones) */
static struct vgpu_req *vgpu_req_alloc(struct vgpu_file *f, u32 req_len, u32 reply_cap,
				       unsigned long npages[2])
{
	struct vgpu_req *r = kzalloc(sizeof(*r), GFP_KERNEL);
	unsigned long nsg;
	int err;

	if (!r)
		return NULL;
	if (f)
		err = vgpu_buf_get(f, VGPU_REQ_BUF, &r->req, req_len) ?:
		      vgpu_buf_get(f, VGPU_REPLY_BUF, &r->reply, reply_cap);
	else
		err = vgpu_buf_alloc(&r->req, req_len, false) ?:
		      vgpu_buf_alloc(&r->reply, reply_cap, false);
	if (err)
		goto fail;
	if (npages[0] + npages[1]) {
		r->pages = kvmalloc_array(npages[0] + npages[1], sizeof(*r->pages),
					  GFP_KERNEL);
		if (!r->pages)
			goto fail;
	}
	nsg = r->req.n + npages[0] + r->reply.n + npages[1];
	r->sg = kvmalloc_array(nsg, sizeof(*r->sg), GFP_KERNEL);
	if (!r->sg)
		goto fail;
	sg_init_table(r->sg, r->req.n + npages[0]);
	r->sg_in = r->sg + r->req.n + npages[0];
	sg_init_table(r->sg_in, r->reply.n + npages[1]);
	return r;
fail:
	vgpu_buf_free(&r->req);
	vgpu_buf_free(&r->reply);
	kvfree(r->pages);
	kfree(r);
	return NULL;
}

/* @f: offer the buffers to its spares (NULL: free them) */
static void vgpu_req_free_into(struct vgpu_file *f, struct vgpu_req *r)
{
	if (r->n_out)
		unpin_user_pages(r->pages, r->n_out);
	if (r->n_in)
		unpin_user_pages_dirty_lock(r->pages + r->n_out, r->n_in, true);
	kvfree(r->pages);
	kvfree(r->sg);
	if (f) {
		vgpu_buf_put(f, VGPU_REQ_BUF, &r->req);
		vgpu_buf_put(f, VGPU_REPLY_BUF, &r->reply);
	} else {
		vgpu_buf_free(&r->req);
		vgpu_buf_free(&r->reply);
	}
	kfree(r);
}

static void vgpu_req_free(struct vgpu_req *r)
{
	vgpu_req_free_into(NULL, r);
}

/* Pin the pages of @n segments; *pinned counts what must be unpinned. */
static int vgpu_pin(const struct vgpu_segment *seg, u32 n, unsigned int flags,
		    struct page **pages, unsigned int *pinned)
{
	u32 i;

	for (i = 0; i < n; i++) {
		unsigned long start = seg[i].addr & PAGE_MASK;
		int want = (offset_in_page(seg[i].addr) + seg[i].len + PAGE_SIZE - 1)
			   >> PAGE_SHIFT;

		while (want > 0) {
			int got = pin_user_pages_fast(start, want, flags,
						      pages + *pinned);
			if (got <= 0)
				return got ? got : -EFAULT;
			*pinned += got;
			want -= got;
			start += (unsigned long)got << PAGE_SHIFT;
		}
	}
	return 0;
}

/* Fill @sg with @b's chunks then the segments' pages (merging contiguous ones). */
static unsigned int vgpu_sg_fill(struct scatterlist *sg, struct vgpu_buf *b,
				 const struct vgpu_segment *seg, u32 nseg,
				 struct page **pages)
{
	unsigned int n = 0;
	u32 i;

	for (i = 0; i < b->n; i++)
		sg_set_buf(&sg[n++], b->chunk[i], vgpu_chunk_len(b, i));
	for (i = 0; i < nseg; i++) {
		unsigned int off = offset_in_page(seg[i].addr);
		u64 left = seg[i].len;

		while (left) {
			unsigned int len = min_t(u64, PAGE_SIZE - off, left);
			struct page *pg = *pages++;
			struct scatterlist *prev = &sg[n - 1];

			if (sg_phys(prev) + prev->length == page_to_phys(pg) + off &&
			    prev->length + len <= SZ_1G)
				prev->length += len;
			else
				sg_set_page(&sg[n++], pg, len, off);
			left -= len;
			off = 0;
		}
	}
	sg_mark_end(&sg[n - 1]);
	return n;
}

static void vgpu_reap(struct work_struct *work)
{
	struct vgpu_dev *d = container_of(work, struct vgpu_dev, reaper);
	struct vgpu_req *r, *t;
	unsigned long fl;
	LIST_HEAD(dead);

	spin_lock_irqsave(&d->vq_lock, fl);
	list_splice_init(&d->orphans, &dead);
	spin_unlock_irqrestore(&d->vq_lock, fl);
	list_for_each_entry_safe(r, t, &dead, node)
		vgpu_req_free(r);
}

/*
 * Takes every completed chain off the used ring (vq_lock held). Returns
 * whether it took any; *reap says whether an orphan needs the reaper.
 */
static bool vgpu_collect_used(struct vgpu_dev *d, bool *reap)
{
	struct vgpu_req *r;
	unsigned int len;
	bool any = false;

	while ((r = virtqueue_get_buf(d->vq, &len))) {
		r->used_len = len;
		smp_store_release(&r->done, true);
		d->completions++;
		any = true;
		if (r->orphan) {
			list_add_tail(&r->node, &d->orphans);
			*reap = true;
		}
	}
	return any;
}

/*
 * Collects, then turns the queue's interrupts back on unless a WAIT is
 * polling (vq_lock held); a chain completed in between is collected too.
 */
static bool vgpu_collect_and_rearm(struct vgpu_dev *d, bool *reap)
{
	bool any = false;

	do {
		virtqueue_disable_cb(d->vq);
		any |= vgpu_collect_used(d, reap);
	} while (!d->pollers && !virtqueue_enable_cb(d->vq));
	return any;
}

static void vgpu_vq_done(struct virtqueue *vq)
{
	struct vgpu_dev *d = vq->vdev->priv;
	unsigned long fl;
	bool reap = false;

	spin_lock_irqsave(&d->vq_lock, fl);
	if (d->raw) {	/* the used ring is the raw test's to read now */
		spin_unlock_irqrestore(&d->vq_lock, fl);
		wake_up_all(&d->wq);
		return;
	}
	vgpu_collect_and_rearm(d, &reap);
	spin_unlock_irqrestore(&d->vq_lock, fl);
	if (reap)
		schedule_work(&d->reaper);
	wake_up_all(&d->wq);
}

static void vgpu_ev_done(struct virtqueue *vq)
{
	struct vgpu_dev *d = vq->vdev->priv;
	struct scatterlist sg;
	unsigned int len;
	unsigned long fl;
	u8 *buf;

	spin_lock_irqsave(&d->ev_lock, fl);
	while ((buf = virtqueue_get_buf(vq, &len))) {
		if (len >= 32)
			dev_dbg_ratelimited(&d->vdev->dev,
				"event kind %u session %llu handle %llu status %d\n",
				le32_to_cpu(*(__le32 *)buf), le64_to_cpu(*(__le64 *)(buf + 8)),
				le64_to_cpu(*(__le64 *)(buf + 16)),
				(s32)le32_to_cpu(*(__le32 *)(buf + 24)));
		sg_init_one(&sg, buf, VGPU_EVENT_BUF_SIZE);
		if (READ_ONCE(d->broken) || virtqueue_add_inbuf(vq, &sg, 1, buf, GFP_ATOMIC))
			kfree(buf);
	}
	if (!READ_ONCE(d->broken))
		virtqueue_kick(vq);
	spin_unlock_irqrestore(&d->ev_lock, fl);
}

/* Queue @r on the submit queue, waiting for ring space. */
static int vgpu_queue(struct vgpu_dev *d, struct vgpu_req *r, bool intr)
{
	struct scatterlist *sgs[2] = { r->sg, r->sg_in };
	unsigned long fl, seen;
	bool empty = false;
	int err;

	for (;;) {
		spin_lock_irqsave(&d->vq_lock, fl);
		if (d->broken) {
			err = -ENODEV;
		} else if (d->raw) {
			err = -EIO;
		} else {
			/* GFP_ATOMIC: the vq callback takes this lock in irq context */
			err = virtqueue_add_sgs(d->vq, sgs, 1, 1, r, GFP_ATOMIC);
			/*
			 * With EVENT_IDX only when the device's avail_event asks
			 * (not while its vring thread polls); WAIT's busy-poll
			 * needs to know which. Under the lock: vgpu_remove frees
			 * the queue once it saw d->broken.
			 */
			if (!err && virtqueue_kick_prepare(d->vq)) {
				WRITE_ONCE(r->kicked, true);
				virtqueue_notify(d->vq);
			}
			else if (err == -ENOSPC)
				empty = d->vq->num_free == virtqueue_get_vring_size(d->vq);
		}
		seen = d->completions;
		spin_unlock_irqrestore(&d->vq_lock, fl);
		if (err != -ENOSPC)
			return err;
		if (empty)	/* no indirect table to be had, chain longer than the ring */
			return -ENOMEM;
		if (intr) {
			if (wait_event_interruptible(d->wq, READ_ONCE(d->completions) != seen ||
						     READ_ONCE(d->broken)))
				return -EINTR;
		} else if (!wait_event_timeout(d->wq, READ_ONCE(d->completions) != seen ||
					       READ_ONCE(d->broken), VGPU_CLOSE_WAIT)) {
			return -ETIMEDOUT;
		}
	}
}

static long vgpu_submit(struct vgpu_file *f, struct vgpu_submit __user *arg)
{
	struct vgpu_dev *d = f->d;
	struct vgpu_segment *segs = NULL;
	unsigned long npages[2] = { 0, 0 };
	u64 bytes[2] = { 0, 0 };
	struct vgpu_submit s;
	struct vgpu_req *r;
	unsigned int nsg_out, nsg_in;
	u32 i, nseg, ticket;
	long err;
	u8 *h;

	if (copy_from_user(&s, arg, sizeof(s)))
		return -EFAULT;
	if (s.request_len < VGPU_BATCH_HEADER_SIZE || s.request_len > VGPU_MAX_REQUEST_LEN ||
	    s.reply_capacity < VGPU_REPLY_HEADER_SIZE || s.reply_capacity > VGPU_MAX_REPLY_LEN ||
	    s.n_out > VGPU_MAX_SEGMENTS || s.n_in > VGPU_MAX_SEGMENTS)
		return -EINVAL;
	if (READ_ONCE(d->broken))
		return -ENODEV;
	if (READ_ONCE(d->raw))
		return -EIO;

	nseg = s.n_out + s.n_in;
	if (nseg) {
		segs = kmalloc_array(nseg, sizeof(*segs), GFP_KERNEL);
		if (!segs)
			return -ENOMEM;
		if ((s.n_out && copy_from_user(segs, u64_to_user_ptr(s.out_segs),
					       s.n_out * sizeof(*segs))) ||
		    (s.n_in && copy_from_user(segs + s.n_out, u64_to_user_ptr(s.in_segs),
					      s.n_in * sizeof(*segs)))) {
			err = -EFAULT;
			goto out_segs;
		}
	}
	for (i = 0; i < nseg; i++) {
		int dir = i >= s.n_out;
		u64 a = segs[i].addr, l = segs[i].len;

		bytes[dir] += l;
		if (!l || l > VGPU_MAX_DATA_LEN || a + l < a ||
		    bytes[dir] > VGPU_MAX_DATA_LEN) {
			err = -EINVAL;
			goto out_segs;
		}
		npages[dir] += (offset_in_page(a) + l + PAGE_SIZE - 1) >> PAGE_SHIFT;
	}

	if (atomic_inc_return(&f->pending) > VGPU_MAX_PENDING) {
		err = -EBUSY;
		goto out_pending;
	}
	r = vgpu_req_alloc(f, s.request_len, s.reply_capacity, npages);
	if (!r) {
		err = -ENOMEM;
		goto out_pending;
	}
	err = vgpu_buf_copy(&r->req, u64_to_user_ptr(s.request), s.request_len, false);
	if (err)
		goto out_req;
	h = r->req.chunk[0];
	if (le32_to_cpu(*(__le32 *)h) != VGPU_BATCH_MAGIC ||
	    le16_to_cpu(*(__le16 *)(h + 4)) != VGPU_PROTOCOL_VERSION ||
	    le32_to_cpu(*(__le32 *)(h + 20)) != s.request_len ||
	    le32_to_cpu(*(__le32 *)(h + 24)) != s.reply_capacity) {
		err = -EINVAL;
		goto out_req;
	}
	*(__le64 *)(h + VGPU_BATCH_SESSION_OFFSET) = cpu_to_le64(f->session);

	err = vgpu_pin(segs, s.n_out, 0, r->pages, &r->n_out);
	if (!err)
		err = vgpu_pin(segs + s.n_out, s.n_in, FOLL_WRITE,
			       r->pages + npages[0], &r->n_in);
	if (err)
		goto out_req;
	nsg_out = vgpu_sg_fill(r->sg, &r->req, segs, s.n_out, r->pages);
	nsg_in = vgpu_sg_fill(r->sg_in, &r->reply, segs + s.n_out, s.n_in,
			      r->pages + npages[0]);
	if (nsg_out + nsg_in > VGPU_MAX_DESCRIPTORS ||
	    (!d->indirect && nsg_out + nsg_in > virtqueue_get_vring_size(d->vq))) {
		err = -E2BIG;
		goto out_req;
	}

	err = xa_alloc_cyclic(&f->reqs, &ticket, r, XA_LIMIT(1, U32_MAX),
			      &f->next_ticket, GFP_KERNEL);
	if (err < 0)
		goto out_req;
	err = put_user((u64)ticket, &arg->ticket);
	if (!err)
		err = vgpu_queue(d, r, true);
	if (err) {
		xa_erase(&f->reqs, ticket);
		goto out_req;
	}
	kfree(segs);
	return 0;

out_req:
	vgpu_req_free_into(f, r);
out_pending:
	atomic_dec(&f->pending);
out_segs:
	kfree(segs);
	return err;
}

static bool vgpu_ticket_ready(struct vgpu_file *f, unsigned long ticket)
{
	struct vgpu_req *r;
	bool ready;

	xa_lock(&f->reqs);
	r = xa_load(&f->reqs, ticket);
	ready = !r || smp_load_acquire(&r->done);	/* unknown: report at once */
	xa_unlock(&f->reqs);
	return ready;
}

/*
 * Whether WAIT may spin for @ticket: only if its submission had to kick
 * the device. A device that needed no kick has a thread polling the ring
 * already, and one spinning thread per VM is the most a small host can
 * take: a vCPU spinning on the core the back-end's thread yields to
 * delays the very reply it waits for (measured: README.md).
 */
static bool vgpu_may_poll(struct vgpu_file *f, unsigned long ticket)
{
	struct vgpu_req *r;
	bool kicked;

	xa_lock(&f->reqs);
	r = xa_load(&f->reqs, ticket);
	kicked = r && READ_ONCE(r->kicked);
	xa_unlock(&f->reqs);
	return kicked;
}

/*
 * Bounded busy-poll: looks at the used ring for @ticket's reply for up to
 * poll_us, with the submit queue's interrupts off while any WAIT polls.
 * Stops early when this CPU has other runnable work (one vCPU: never
 * spin in front of a task that could run; the reply does not need this
 * CPU) or a signal is pending. Returns whether the reply is there.
 */
static bool vgpu_poll_reply(struct vgpu_file *f, unsigned long ticket)
{
	struct vgpu_dev *d = f->d;
	unsigned int budget = min(READ_ONCE(poll_us), (unsigned int)VGPU_POLL_US_MAX);
	bool ready = false, reap = false, any = false;
	unsigned long fl;
	u64 end;

	if (!budget || !vgpu_may_poll(f, ticket))
		return false;
	spin_lock_irqsave(&d->vq_lock, fl);
	if (d->broken || d->raw) {
		spin_unlock_irqrestore(&d->vq_lock, fl);
		return false;
	}
	if (!d->pollers++)
		virtqueue_disable_cb(d->vq);
	spin_unlock_irqrestore(&d->vq_lock, fl);

	end = local_clock() + (u64)budget * NSEC_PER_USEC;
	for (;;) {
		spin_lock_irqsave(&d->vq_lock, fl);
		if (!d->broken && !d->raw)	/* raw: the ring is not ours */
			any |= vgpu_collect_used(d, &reap);
		spin_unlock_irqrestore(&d->vq_lock, fl);
		ready = vgpu_ticket_ready(f, ticket);
		if (ready || READ_ONCE(d->broken) || need_resched() ||
		    !single_task_running() || signal_pending(current) ||
		    local_clock() >= end)
			break;
		cpu_relax();
	}

	spin_lock_irqsave(&d->vq_lock, fl);
	if (!--d->pollers && !d->broken && !d->raw)
		any |= vgpu_collect_and_rearm(d, &reap);
	spin_unlock_irqrestore(&d->vq_lock, fl);
	if (reap)
		schedule_work(&d->reaper);
	if (any)	/* others' replies too, and ring space for SUBMIT */
		wake_up_all(&d->wq);
	return ready || vgpu_ticket_ready(f, ticket);
}

static long vgpu_wait(struct vgpu_file *f, struct vgpu_wait __user *arg)
{
	struct vgpu_wait w;
	struct vgpu_req *r;
	long t;
	u32 n;
	int err = 0;

	if (copy_from_user(&w, arg, sizeof(w)))
		return -EFAULT;
	if (!w.ticket || w.ticket > U32_MAX)
		return -EINVAL;
	t = w.timeout_ms < 0 ? MAX_SCHEDULE_TIMEOUT :
	    (long)msecs_to_jiffies(min_t(s64, w.timeout_ms, UINT_MAX));
	if (w.timeout_ms && vgpu_poll_reply(f, w.ticket))	/* 0: a look, no wait */
		t = 1;
	else
		t = wait_event_interruptible_timeout(f->d->wq,
						     vgpu_ticket_ready(f, w.ticket), t);
	if (t < 0)
		return -EINTR;
	if (t == 0)
		return -ETIMEDOUT;

	xa_lock(&f->reqs);
	r = xa_load(&f->reqs, w.ticket);
	if (r)
		__xa_erase(&f->reqs, w.ticket);
	xa_unlock(&f->reqs);
	if (!r)
		return -EINVAL;
	atomic_dec(&f->pending);

	n = min(r->used_len, r->reply.len);
	/*
	 * A chain with in pages is used up to them, so its used length covers
	 * the whole reply room (256 KiB for a synchronous call): copy only
	 * what the reply header says was written. Only ever shortens.
	 */
	if (n >= VGPU_REPLY_HEADER_SIZE) {
		const u8 *h = r->reply.chunk[0];
		u32 len = le32_to_cpu(*(const __le32 *)(h + VGPU_REPLY_LEN_OFFSET));

		if (le32_to_cpu(*(const __le32 *)h) == VGPU_REPLY_MAGIC &&
		    len >= VGPU_REPLY_HEADER_SIZE && len < n)
			n = len;
	}
	if (!r->used_len)	/* chain refused by the device, or device gone */
		err = -EIO;
	else if (w.reply_capacity &&
		 vgpu_buf_copy(&r->reply, u64_to_user_ptr(w.reply),
			       min(n, w.reply_capacity), true))
		err = -EFAULT;
	if (put_user(n, &arg->reply_len) && !err)
		err = -EFAULT;
	vgpu_req_free_into(f, r);
	return err;
}

/*
 * TEST ONLY (raw_ring_test=1): publish one hand-made chain on the submit
 * queue, bypassing virtio_ring's bookkeeping (see vgpu_uapi.h). From the
 * first chain on, d->raw keeps the driver off the ring for good.
 */
static long vgpu_raw_publish(struct vgpu_dev *d, const struct vgpu_raw_desc *descs,
			     struct vgpu_raw_ring *a)
{
	struct virtio_device *vdev = d->vdev;
	const struct vring *vr = virtqueue_get_vring(d->vq);
	unsigned long fl, deadline;
	u16 avail, used0, used;
	u32 i;
	long err = 0;

	spin_lock_irqsave(&d->vq_lock, fl);
	if (d->broken) {
		spin_unlock_irqrestore(&d->vq_lock, fl);
		return -ENODEV;
	}
	if (!d->raw) {
		if (d->vq->num_free != vr->num) {
			spin_unlock_irqrestore(&d->vq_lock, fl);
			return -EBUSY;
		}
		d->raw = true;
		dev_warn(&vdev->dev, "raw_ring_test: submit ring handed to user space; "
			 "the device is unusable until reboot\n");
	}
	for (i = 0; i < a->n_descs; i++) {
		vr->desc[i].addr = cpu_to_virtio64(vdev, descs[i].addr);
		vr->desc[i].len = cpu_to_virtio32(vdev, descs[i].len);
		vr->desc[i].flags = cpu_to_virtio16(vdev, descs[i].flags);
		vr->desc[i].next = cpu_to_virtio16(vdev, descs[i].next);
	}
	used0 = virtio16_to_cpu(vdev, READ_ONCE(vr->used->idx));
	avail = virtio16_to_cpu(vdev, vr->avail->idx);
	vr->avail->ring[avail % vr->num] = cpu_to_virtio16(vdev, a->head);
	virtio_wmb(true);	/* descriptors and ring entry before the index */
	WRITE_ONCE(vr->avail->idx, cpu_to_virtio16(vdev, (u16)(avail + 1 + a->avail_skip)));
	virtio_mb(true);	/* index before the notification */
	spin_unlock_irqrestore(&d->vq_lock, fl);
	virtqueue_notify(d->vq);	/* unconditionally: the event index is stale */

	deadline = jiffies + msecs_to_jiffies(min(a->timeout_ms, VGPU_RAW_MAX_TIMEOUT_MS));
	for (;;) {
		used = virtio16_to_cpu(vdev, READ_ONCE(vr->used->idx));
		if (used != used0 || time_after_eq(jiffies, deadline))
			break;
		if (msleep_interruptible(VGPU_RAW_POLL_MS) && signal_pending(current)) {
			err = -EINTR;
			break;
		}
	}
	a->used = (u16)(used - used0);
	if (a->used) {
		const struct vring_used_elem *e = &vr->used->ring[used0 % vr->num];

		virtio_rmb(true);	/* the index before the entry */
		a->used_id = virtio32_to_cpu(vdev, READ_ONCE(e->id));
		a->used_len = virtio32_to_cpu(vdev, READ_ONCE(e->len));
	}
	return err;
}

static long vgpu_raw_ring(struct vgpu_file *f, struct vgpu_raw_ring __user *arg)
{
	struct vgpu_dev *d = f->d;
	struct vgpu_raw_desc *descs = NULL;
	struct vgpu_raw_ring a;
	long err = 0;
	u32 num;

	if (!READ_ONCE(raw_ring_test) || !capable(CAP_SYS_ADMIN))
		return -EPERM;
	if (copy_from_user(&a, arg, sizeof(a)))
		return -EFAULT;
	if ((a.flags & ~VGPU_RAW_QUERY) || a.head > U16_MAX || a.avail_skip > U16_MAX ||
	    a.data_len > VGPU_RAW_SCRATCH_LEN)
		return -EINVAL;

	mutex_lock(&d->raw_lock);	/* vgpu_remove takes it: d->vdev and d->vq stay */
	if (READ_ONCE(d->broken)) {
		err = -ENODEV;
		goto out_unlock;
	}
	/* split ring only; descriptors carry physical addresses (no IOMMU) */
	if (virtio_has_feature(d->vdev, VIRTIO_F_RING_PACKED) ||
	    virtio_has_feature(d->vdev, VIRTIO_F_ACCESS_PLATFORM)) {
		err = -EOPNOTSUPP;
		goto out_unlock;
	}
	num = virtqueue_get_vring_size(d->vq);
	if (a.n_descs > num) {
		err = -EINVAL;
		goto out_unlock;
	}
	if (a.n_descs) {
		descs = kvmalloc_array(a.n_descs, sizeof(*descs), GFP_KERNEL);
		if (!descs) {
			err = -ENOMEM;
			goto out_unlock;
		}
		if (copy_from_user(descs, u64_to_user_ptr(a.descs),
				   a.n_descs * sizeof(*descs))) {
			err = -EFAULT;
			goto out_unlock;
		}
	}
	if (!d->raw_scratch)
		d->raw_scratch = alloc_pages_exact(VGPU_RAW_SCRATCH_LEN,
						   GFP_KERNEL | __GFP_ZERO);
	if (!d->raw_scratch) {
		err = -ENOMEM;
		goto out_unlock;
	}
	a.queue_size = num;
	a.scratch = virt_to_phys(d->raw_scratch);
	a.used = a.used_id = a.used_len = 0;
	if (!(a.flags & VGPU_RAW_QUERY)) {
		if (a.data_len && copy_from_user(d->raw_scratch, u64_to_user_ptr(a.data),
						 a.data_len)) {
			err = -EFAULT;
			goto out_unlock;
		}
		err = vgpu_raw_publish(d, descs, &a);
		if ((!err || err == -EINTR) && a.data_len &&
		    copy_to_user(u64_to_user_ptr(a.data), d->raw_scratch, a.data_len))
			err = -EFAULT;
	}
	if (copy_to_user(arg, &a, sizeof(a)) && !err)
		err = -EFAULT;
out_unlock:
	mutex_unlock(&d->raw_lock);
	kvfree(descs);
	return err;
}

static long vgpu_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	switch (cmd) {
	case VGPU_IOC_SUBMIT:
		return vgpu_submit(filp->private_data, (void __user *)arg);
	case VGPU_IOC_WAIT:
		return vgpu_wait(filp->private_data, (void __user *)arg);
	case VGPU_IOC_RAW_RING:
		return vgpu_raw_ring(filp->private_data, (void __user *)arg);
	}
	return -ENOTTY;
}

static void vgpu_dev_free(struct kref *ref)
{
	struct vgpu_dev *d = container_of(ref, struct vgpu_dev, ref);

	/* the device was reset in vgpu_remove: nothing points at the scratch */
	if (d->raw_scratch)
		free_pages_exact(d->raw_scratch, VGPU_RAW_SCRATCH_LEN);
	kfree(d);
}

static int vgpu_open(struct inode *inode, struct file *filp)
{
	struct vgpu_dev *d = container_of(filp->private_data, struct vgpu_dev, misc);
	struct vgpu_file *f = kzalloc(sizeof(*f), GFP_KERNEL);

	if (!f)
		return -ENOMEM;
	f->d = d;
	f->session = atomic64_inc_return(&vgpu_sessions);
	xa_init_flags(&f->reqs, XA_FLAGS_ALLOC1);
	spin_lock_init(&f->spare_lock);
	kref_get(&d->ref);
	filp->private_data = f;
	return stream_open(inode, filp);
}

static void vgpu_close_session(struct vgpu_dev *d, u64 session)
{
	unsigned long npages[2] = { 0, 0 }, fl;
	struct vgpu_req *r;
	bool done;
	u8 *h;

	if (READ_ONCE(d->broken) || READ_ONCE(d->raw))
		return;
	r = vgpu_req_alloc(NULL, VGPU_BATCH_HEADER_SIZE + VGPU_MSG_HEADER_SIZE, 64, npages);
	if (!r)
		return;
	h = r->req.chunk[0];
	*(__le32 *)h = cpu_to_le32(VGPU_BATCH_MAGIC);
	*(__le16 *)(h + 4) = cpu_to_le16(VGPU_PROTOCOL_VERSION);
	*(__le64 *)(h + VGPU_BATCH_SESSION_OFFSET) = cpu_to_le64(session);
	*(__le32 *)(h + 16) = cpu_to_le32(1);
	*(__le32 *)(h + 20) = cpu_to_le32(r->req.len);
	*(__le32 *)(h + 24) = cpu_to_le32(r->reply.len);
	*(__le32 *)(h + VGPU_BATCH_HEADER_SIZE) = cpu_to_le32(VGPU_OP_CLOSE_SESSION);
	vgpu_sg_fill(r->sg, &r->req, NULL, 0, NULL);
	vgpu_sg_fill(r->sg_in, &r->reply, NULL, 0, NULL);
	if (vgpu_queue(d, r, false)) {
		vgpu_req_free(r);
		return;
	}
	wait_event_timeout(d->wq, smp_load_acquire(&r->done), VGPU_CLOSE_WAIT);
	spin_lock_irqsave(&d->vq_lock, fl);
	done = r->done;
	r->orphan = !done;
	spin_unlock_irqrestore(&d->vq_lock, fl);
	if (done)
		vgpu_req_free(r);
}

static bool vgpu_all_done(struct vgpu_file *f)
{
	struct vgpu_req *r;
	unsigned long id;

	xa_for_each(&f->reqs, id, r)
		if (!smp_load_acquire(&r->done))
			return false;
	return true;
}

static int vgpu_release(struct inode *inode, struct file *filp)
{
	struct vgpu_file *f = filp->private_data;
	struct vgpu_dev *d = f->d;
	struct vgpu_req *r;
	unsigned long id, fl;
	bool done;

	/* uninterruptible: a killed process still lets its requests finish */
	if (!wait_event_timeout(d->wq, vgpu_all_done(f), VGPU_RELEASE_WAIT))
		pr_warn("virtio_vgpu: session %llu: requests still in flight at close\n",
			 f->session);
	xa_for_each(&f->reqs, id, r) {
		spin_lock_irqsave(&d->vq_lock, fl);
		done = r->done;
		r->orphan = !done;	/* the device still owns it: reap on completion */
		spin_unlock_irqrestore(&d->vq_lock, fl);
		if (done)
			vgpu_req_free(r);
	}
	xa_destroy(&f->reqs);
	vgpu_buf_free(&f->spare[VGPU_REQ_BUF]);
	vgpu_buf_free(&f->spare[VGPU_REPLY_BUF]);
	vgpu_close_session(d, f->session);
	kref_put(&d->ref, vgpu_dev_free);
	kfree(f);
	return 0;
}

static const struct file_operations vgpu_fops = {
	.owner = THIS_MODULE,
	.open = vgpu_open,
	.release = vgpu_release,
	.unlocked_ioctl = vgpu_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = no_llseek,
};

/* After a reset: complete (used length 0) or free everything still queued. */
static void vgpu_drain(struct vgpu_dev *d)
{
	struct vgpu_req *r, *t;
	unsigned long fl;
	LIST_HEAD(dead);
	void *buf;

	spin_lock_irqsave(&d->vq_lock, fl);
	while ((r = virtqueue_detach_unused_buf(d->vq))) {
		r->used_len = 0;
		smp_store_release(&r->done, true);
		if (r->orphan)
			list_add_tail(&r->node, &dead);
	}
	spin_unlock_irqrestore(&d->vq_lock, fl);
	spin_lock_irqsave(&d->ev_lock, fl);
	while ((buf = virtqueue_detach_unused_buf(d->evq)))
		kfree(buf);
	spin_unlock_irqrestore(&d->ev_lock, fl);
	list_for_each_entry_safe(r, t, &dead, node)
		vgpu_req_free(r);
}

static int vgpu_probe(struct virtio_device *vdev)
{
	static const char * const names[] = { "submit", "event" };
	vq_callback_t *cbs[] = { vgpu_vq_done, vgpu_ev_done };
	struct virtqueue *vqs[2];
	struct scatterlist sg;
	struct vgpu_dev *d;
	int err, i;
	void *buf;

	d = kzalloc(sizeof(*d), GFP_KERNEL);
	if (!d)
		return -ENOMEM;
	kref_init(&d->ref);
	spin_lock_init(&d->vq_lock);
	spin_lock_init(&d->ev_lock);
	mutex_init(&d->raw_lock);
	init_waitqueue_head(&d->wq);
	INIT_LIST_HEAD(&d->orphans);
	INIT_WORK(&d->reaper, vgpu_reap);
	d->vdev = vdev;
	vdev->priv = d;
	d->index = ida_alloc(&vgpu_ida, GFP_KERNEL);
	if (d->index < 0) {
		err = d->index;
		goto out_free;
	}
	err = virtio_find_vqs(vdev, 2, vqs, cbs, names, NULL);
	if (err)
		goto out_ida;
	d->vq = vqs[0];
	d->evq = vqs[1];
	d->indirect = virtio_has_feature(vdev, VIRTIO_RING_F_INDIRECT_DESC);

	for (i = 0; i < VGPU_EVENT_BUFS; i++) {
		buf = kzalloc(VGPU_EVENT_BUF_SIZE, GFP_KERNEL);
		if (!buf)
			break;
		sg_init_one(&sg, buf, VGPU_EVENT_BUF_SIZE);
		if (virtqueue_add_inbuf(d->evq, &sg, 1, buf, GFP_KERNEL)) {
			kfree(buf);
			break;
		}
	}
	virtio_device_ready(vdev);
	virtqueue_kick(d->evq);

	snprintf(d->name, sizeof(d->name), "vgpu%d", d->index);
	d->misc.minor = MISC_DYNAMIC_MINOR;
	d->misc.name = d->name;
	d->misc.fops = &vgpu_fops;
	d->misc.mode = 0666;
	d->misc.parent = &vdev->dev;
	err = misc_register(&d->misc);
	if (err)
		goto out_reset;
	dev_info(&vdev->dev, "/dev/%s: submit ring %u, indirect %d, event_idx %d\n",
		 d->name, virtqueue_get_vring_size(d->vq), d->indirect,
		 virtio_has_feature(vdev, VIRTIO_RING_F_EVENT_IDX));
	return 0;

out_reset:
	WRITE_ONCE(d->broken, true);
	virtio_reset_device(vdev);
	vgpu_drain(d);
	vdev->config->del_vqs(vdev);
out_ida:
	ida_free(&vgpu_ida, d->index);
out_free:
	kfree(d);
	return err;
}

static void vgpu_remove(struct virtio_device *vdev)
{
	struct vgpu_dev *d = vdev->priv;
	unsigned long fl;

	misc_deregister(&d->misc);	/* no new opens; open files keep d */
	mutex_lock(&d->raw_lock);	/* a raw_ring_test call still polls the ring */
	spin_lock_irqsave(&d->vq_lock, fl);
	d->broken = true;		/* no new submissions */
	spin_unlock_irqrestore(&d->vq_lock, fl);
	mutex_unlock(&d->raw_lock);
	virtio_reset_device(vdev);
	vgpu_drain(d);
	vdev->config->del_vqs(vdev);
	wake_up_all(&d->wq);
	flush_work(&d->reaper);
	vgpu_reap(&d->reaper);
	ida_free(&vgpu_ida, d->index);
	kref_put(&d->ref, vgpu_dev_free);
}

static const struct virtio_device_id vgpu_id_table[] = {
	{ VGPU_VIRTIO_ID, VIRTIO_DEV_ANY_ID },
	{ 0 },
};
MODULE_DEVICE_TABLE(virtio, vgpu_id_table);

static struct virtio_driver vgpu_driver = {
	.driver.name = KBUILD_MODNAME,
	.driver.owner = THIS_MODULE,
	.id_table = vgpu_id_table,
	.probe = vgpu_probe,
	.remove = vgpu_remove,
};
module_virtio_driver(vgpu_driver);

MODULE_DESCRIPTION("virtio vGPU forwarding device");
MODULE_LICENSE("GPL");
