// SPDX-License-Identifier: MIT
/*
 * vgpu-raw-ring-test [--avail-jump] [/dev/vgpu0]: hands the vGPU device
 * malformed descriptor chains through VGPU_IOC_RAW_RING. TEST ONLY: the
 * guest's vGPU is unusable afterwards (until reboot).
 *
 * It first checks that a normal session answers PING, then sets
 * /sys/module/virtio_vgpu/parameters/raw_ring_test=1 and, on a second open,
 * sends one hostile chain per case (loops, addresses outside guest RAM, huge
 * lengths, readable after writable, chains longer than the ring, out-of-range
 * heads, bogus indirect tables, garbage in well-formed chains, batches naming
 * another VM's session), one second apart, printing what the device did with
 * each ("RAW <case> -> <outcome>"); then a well-formed control chain, a flood
 * of looping chains, and "RAW-SUMMARY ...". --avail-jump adds a last case
 * that makes the available index jump by more than the queue size (nothing is
 * processed on this queue after it). The checks that matter are on the host
 * (the back-end keeps running, other front-ends keep their sessions):
 * integration/tests/vm_hostile.rs.
 *
 * Exit status 0 unless the setup failed: no device, PING failed, the raw
 * ioctl refused, or the driver kept accepting SUBMIT after the raw chains.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include "vgpu_uapi.h"

#define OP_OPEN_SESSION 1
#define OP_PING 3
#define OP_SESSION_STATS 4
#define OP_RELEASE 0x1021
#define KIND_CONTEXT 1
#define KIND_MEM 3
#define REPLY_MAGIC 0x52504756u

#define F_NEXT 1
#define F_WRITE 2
#define F_INDIRECT 4

#define OUTSIDE_RAM 0xffffffff0000ull
#define PARAM "/sys/module/virtio_vgpu/parameters/raw_ring_test"
#define FLOOD 100
/* The host test's bystander: another front-end (another VM) on the same back-end. */
#define BYSTANDER_SESSION 7

/* Scratch layout (offsets into the driver's scratch area). */
#define REQ_OFF 0x0
#define REPLY_OFF 0x1000
#define TABLE_OFF 0x2000
#define PAGE 0x1000

static uint8_t data[VGPU_RAW_SCRATCH_LEN];
static struct vgpu_raw_desc *descs;
static uint32_t qsize;
static uint64_t scratch;
static int fd_raw;
static unsigned sent, dropped, replied, unreturned, errors;

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void garbage(uint8_t *p, size_t n)
{
	while (n--)
		*p++ = (uint8_t)rnd();
}

static struct vgpu_raw_desc desc(uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
	struct vgpu_raw_desc d = { .addr = addr, .len = len, .flags = flags, .next = next };
	return d;
}

/* A descriptor in an indirect table (in data[], at scratch offset @off). */
static void table_desc(uint32_t off, uint32_t i, uint64_t addr, uint32_t len, uint16_t flags,
		       uint16_t next)
{
	uint8_t *p = data + off + 16 * i;

	put64(p, addr);
	put32(p + 8, len);
	put16(p + 12, flags);
	put16(p + 14, next);
}

/* Batch header of a request stream at @b. */
static void batch_header(uint8_t *b, uint64_t session, uint32_t count, uint32_t len, uint32_t cap)
{
	memset(b, 0, VGPU_BATCH_HEADER_SIZE);
	put32(b, VGPU_BATCH_MAGIC);
	put16(b + 4, VGPU_PROTOCOL_VERSION);
	put64(b + 8, session);
	put32(b + 16, count);
	put32(b + 20, len);
	put32(b + 24, cap);
}

/* A message at @m; returns its length (payload padded to 8). */
static uint32_t message(uint8_t *m, uint32_t op, uint64_t seq, const void *payload, uint32_t plen)
{
	uint32_t padded = (plen + 7) & ~7u;

	memset(m, 0, VGPU_MSG_HEADER_SIZE + padded);
	put32(m, op);
	put64(m + 8, seq);
	put32(m + 16, plen);
	if (plen)
		memcpy(m + VGPU_MSG_HEADER_SIZE, payload, plen);
	return VGPU_MSG_HEADER_SIZE + padded;
}

/* Whether the reply stream holds @count records, all successful. */
static int all_ok(const uint8_t *r, uint32_t used_len, uint32_t count)
{
	uint32_t i, at = VGPU_REPLY_HEADER_SIZE;

	if (used_len < VGPU_REPLY_HEADER_SIZE || get32(r) != REPLY_MAGIC || get32(r + 16) ||
	    get32(r + 8) != count)
		return 0;
	for (i = 0; i < count; i++) {
		if (at + 24 > used_len || get32(r + at + 4))
			return 0;
		at += 24 + ((get32(r + at + 16) + 7) & ~7u);
	}
	return 1;
}

static void describe_reply(char *out, size_t n, const uint8_t *r, uint32_t used_len)
{
	uint32_t i, count, at = VGPU_REPLY_HEADER_SIZE;
	int k;

	if (used_len < VGPU_REPLY_HEADER_SIZE || get32(r) != REPLY_MAGIC) {
		snprintf(out, n, "no reply header");
		return;
	}
	count = get32(r + 8);
	k = snprintf(out, n, "batch status %d, %u records", (int32_t)get32(r + 16), count);
	for (i = 0; i < count && i < 16 && at + 24 <= PAGE && k > 0 && (size_t)k < n; i++) {
		k += snprintf(out + k, n - k, "%s op 0x%x: %d", i ? "," : ";",
			      get32(r + at), (int32_t)get32(r + at + 4));
		at += 24 + ((get32(r + at + 16) + 7) & ~7u);
	}
}

/*
 * Publishes @n descriptors and @head, with the first @data_len bytes of data[]
 * in the scratch area; waits @timeout_ms for a used entry. Returns the ioctl's
 * result; fills @a.
 */
static int raw(uint32_t n, uint32_t head, uint32_t data_len, uint32_t timeout_ms,
	       struct vgpu_raw_ring *a)
{
	memset(a, 0, sizeof(*a));
	a->descs = (uintptr_t)descs;
	a->n_descs = n;
	a->data = (uintptr_t)data;
	a->data_len = data_len;
	a->head = head;
	a->timeout_ms = timeout_ms;
	sent++;
	return ioctl(fd_raw, VGPU_IOC_RAW_RING, a);
}

/* One hostile chain: publish, report, and wait a second. */
static void hostile(const char *name, uint32_t n, uint32_t head, uint32_t data_len)
{
	struct vgpu_raw_ring a;
	char what[512];

	if (raw(n, head, data_len, 2000, &a)) {
		printf("RAW %s -> ioctl failed: %s\n", name, strerror(errno));
		errors++;
	} else if (!a.used) {
		printf("RAW %s -> not returned within 2 s (consumed by the device, no used entry)\n",
		       name);
		unreturned++;
	} else if (!a.used_len) {
		printf("RAW %s -> dropped (used id %u, length 0)\n", name, a.used_id);
		dropped++;
	} else {
		describe_reply(what, sizeof(what), data + REPLY_OFF, a.used_len);
		printf("RAW %s -> answered (used id %u, length %u): %s\n", name, a.used_id,
		       a.used_len, what);
		replied++;
	}
	fflush(stdout);
	sleep(1);
}

/* The usual two-descriptor chain: request at REQ_OFF, reply room at REPLY_OFF. */
static void request_chain(uint32_t req_len)
{
	descs[0] = desc(scratch + REQ_OFF, req_len, F_NEXT, 1);
	descs[1] = desc(scratch + REPLY_OFF, PAGE, F_WRITE, 0);
	memset(data + REPLY_OFF, 0, PAGE);
}

/* End of guest RAM: the highest "System RAM" in /proc/iomem, rounded up to 2 MiB. */
static uint64_t ram_end(void)
{
	FILE *f = fopen("/proc/iomem", "r");
	char line[256];
	uint64_t end = 0, lo, hi;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (line[0] != ' ' && strstr(line, "System RAM") &&
		    sscanf(line, "%lx-%lx", &lo, &hi) == 2 && hi + 1 > end)
			end = hi + 1;
	fclose(f);
	return (end + (2u << 20) - 1) & ~(uint64_t)((2u << 20) - 1);
}

/* A normal session: OPEN_SESSION then PING through SUBMIT/WAIT. 0 on success. */
static int submit_wait(int fd, uint8_t *req, uint32_t len, uint8_t *reply, uint32_t cap)
{
	struct vgpu_submit s;
	struct vgpu_wait w;

	memset(&s, 0, sizeof(s));
	s.request = (uintptr_t)req;
	s.request_len = len;
	s.reply_capacity = cap;
	if (ioctl(fd, VGPU_IOC_SUBMIT, &s))
		return -1;
	memset(&w, 0, sizeof(w));
	w.ticket = s.ticket;
	w.reply = (uintptr_t)reply;
	w.reply_capacity = cap;
	w.timeout_ms = 20000;
	if (ioctl(fd, VGPU_IOC_WAIT, &w))
		return -1;
	return w.reply_len >= VGPU_REPLY_HEADER_SIZE + 24 && get32(reply) == REPLY_MAGIC &&
	       get32(reply + 16) == 0 && get32(reply + VGPU_REPLY_HEADER_SIZE + 4) == 0 ? 0 : 1;
}

static int normal_session(const char *path)
{
	uint8_t req[256], reply[1024];
	uint32_t v[3] = { VGPU_PROTOCOL_VERSION, VGPU_PROTOCOL_VERSION, 0 }, len;
	int fd = open(path, O_RDWR), rc;

	if (fd < 0) {
		printf("FAIL open %s: %s\n", path, strerror(errno));
		return -1;
	}
	len = VGPU_BATCH_HEADER_SIZE + message(req + VGPU_BATCH_HEADER_SIZE, OP_OPEN_SESSION, 1,
					       v, sizeof(v));
	batch_header(req, 0, 1, len, sizeof(reply));
	rc = submit_wait(fd, req, len, reply, sizeof(reply));
	if (!rc) {
		len = VGPU_BATCH_HEADER_SIZE +
		      message(req + VGPU_BATCH_HEADER_SIZE, OP_PING, 2, NULL, 0);
		batch_header(req, 0, 1, len, sizeof(reply));
		rc = submit_wait(fd, req, len, reply, sizeof(reply));
	}
	printf("%s normal session: OPEN_SESSION and PING%s%s\n", rc ? "FAIL" : "PASS",
	       rc < 0 ? ": " : "", rc < 0 ? strerror(errno) : "");
	close(fd);
	return rc ? -1 : 0;
}

static int write_param(const char *value)
{
	int fd = open(PARAM, O_WRONLY), ok;

	if (fd < 0)
		return -1;
	ok = write(fd, value, strlen(value)) == (ssize_t)strlen(value);
	close(fd);
	return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	const char *path = "/dev/vgpu0";
	struct vgpu_raw_ring a;
	uint32_t i, len, n;
	uint64_t end;
	int rc, fd, control_ok = 0, avail_jump = 0;
	char what[512];

	for (i = 1; i < (uint32_t)argc; i++) {
		if (!strcmp(argv[i], "--avail-jump"))
			avail_jump = 1;
		else if (argv[i][0] != '-')
			path = argv[i];
		else {
			fprintf(stderr, "usage: %s [--avail-jump] [/dev/vgpuN]\n", argv[0]);
			return 2;
		}
	}

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (normal_session(path))
		return 1;

	fd_raw = open(path, O_RDWR);
	if (fd_raw < 0) {
		printf("FAIL open %s: %s\n", path, strerror(errno));
		return 1;
	}
	write_param("0");
	memset(&a, 0, sizeof(a));
	a.flags = VGPU_RAW_QUERY;
	rc = ioctl(fd_raw, VGPU_IOC_RAW_RING, &a);
	printf("%s raw ioctl refused while raw_ring_test=0 (rc %d, %s)\n",
	       rc < 0 && errno == EPERM ? "PASS" : "FAIL", rc, rc ? strerror(errno) : "0");
	if (!(rc < 0 && errno == EPERM))
		return 1;
	if (write_param("1")) {
		printf("FAIL cannot set %s: %s\n", PARAM, strerror(errno));
		return 1;
	}
	memset(&a, 0, sizeof(a));
	a.flags = VGPU_RAW_QUERY;
	if (ioctl(fd_raw, VGPU_IOC_RAW_RING, &a)) {
		printf("FAIL raw ioctl query: %s\n", strerror(errno));
		return 1;
	}
	qsize = a.queue_size;
	scratch = a.scratch;
	end = ram_end();
	descs = calloc(qsize, sizeof(*descs));
	if (!descs)
		return 1;
	printf("raw ring: queue size %u, scratch at 0x%llx, guest RAM ends at 0x%llx\n", qsize,
	       (unsigned long long)scratch, (unsigned long long)end);

	/* loops */
	descs[0] = desc(scratch + REQ_OFF, 64, F_NEXT, 1);
	descs[1] = desc(scratch + REQ_OFF, 64, F_NEXT, 0);
	hostile("loop a->b->a", 2, 0, 0);
	descs[0] = desc(scratch + REQ_OFF, 64, F_NEXT, 0);
	hostile("loop a->a", 1, 0, 0);
	descs[0] = desc(scratch + REQ_OFF, 64, F_NEXT, 1);
	descs[1] = desc(scratch + REPLY_OFF, 64, F_NEXT | F_WRITE, 2);
	descs[2] = desc(scratch + REPLY_OFF, 64, F_NEXT | F_WRITE, 1);
	hostile("loop a->b->c->b (writable)", 3, 0, 0);

	/* outside guest RAM, huge lengths */
	garbage(data + REQ_OFF, PAGE);
	request_chain(PAGE);
	descs[0].addr = OUTSIDE_RAM;
	hostile("readable descriptor at 0xffff_ffff_0000", 2, 0, REPLY_OFF + PAGE);
	request_chain(PAGE);
	descs[1].addr = OUTSIDE_RAM;
	hostile("writable descriptor at 0xffff_ffff_0000", 2, 0, REPLY_OFF + PAGE);
	request_chain(PAGE);
	descs[0].addr = 0xfee00000;	/* the local APIC: not RAM */
	hostile("readable descriptor in the MMIO hole (0xfee00000)", 2, 0, REPLY_OFF + PAGE);
	request_chain(PAGE);
	descs[0].len = 0xffffffff;
	hostile("readable descriptor of 4 GiB - 1", 2, 0, REPLY_OFF + PAGE);
	request_chain(PAGE);
	descs[1].len = 0x80000000;
	hostile("writable descriptor of 2 GiB", 2, 0, REPLY_OFF + PAGE);
	request_chain(PAGE);
	descs[1].len = 0xfffff000;	/* the chain adds up to 4 GiB */
	hostile("writable descriptor of 4 GiB - 4 KiB", 2, 0, REPLY_OFF + PAGE);
	request_chain(PAGE);
	descs[0].addr = 0xfffffffffffff000ull;
	descs[0].len = 0x2000;
	hostile("descriptor wrapping the address space", 2, 0, REPLY_OFF + PAGE);
	if (end) {
		request_chain(PAGE);
		descs[0].addr = end - 16;
		hostile("descriptor across the end of guest RAM", 2, 0, REPLY_OFF + PAGE);
	}
	if (end > (64u << 20)) {	/* read-only descriptors over guest RAM adding up to > 4 GiB */
		uint64_t l = (end - (2u << 20)) & ~(uint64_t)((1u << 20) - 1);

		l = l > 0xfff00000u ? 0xfff00000u : l;
		n = (uint32_t)((1ull << 32) / l) + 2;
		for (i = 0; i < n && i + 1 < qsize; i++)
			descs[i] = desc(1u << 20, (uint32_t)l, F_NEXT, (uint16_t)(i + 1));
		descs[i] = desc(scratch + REPLY_OFF, PAGE, F_WRITE, 0);
		hostile("chain of more than 4 GiB (read-only descriptors over guest RAM)", i + 1, 0,
			REPLY_OFF + PAGE);
	}

	/* order and length */
	descs[0] = desc(scratch + REPLY_OFF, PAGE, F_NEXT | F_WRITE, 1);
	descs[1] = desc(scratch + REQ_OFF, PAGE, 0, 0);
	hostile("readable descriptor after a writable one", 2, 0, REPLY_OFF + PAGE);
	for (i = 0; i < qsize; i++)
		descs[i] = desc(scratch + REQ_OFF, 64, F_NEXT, (uint16_t)(i + 1));
	hostile("chain longer than the queue (every slot, then one past the table)", qsize, 0, 0);
	descs[0] = desc(scratch + REQ_OFF, 64, F_NEXT, (uint16_t)qsize);
	hostile("next index past the table", 1, 0, 0);
	hostile("available entry: head = queue size", 0, qsize, 0);
	hostile("available entry: head = 0xffff", 0, 0xffff, 0);

	/* indirect tables */
	descs[0] = desc(OUTSIDE_RAM, 16 * 4, F_INDIRECT, 0);
	hostile("indirect table at 0xffff_ffff_0000", 1, 0, 0);
	descs[0] = desc(scratch + TABLE_OFF, 17, F_INDIRECT, 0);
	hostile("indirect table of 17 bytes", 1, 0, 0);
	descs[0] = desc(scratch + TABLE_OFF, 0, F_INDIRECT, 0);
	hostile("indirect table of 0 bytes", 1, 0, 0);
	descs[0] = desc(scratch + TABLE_OFF, 0xfffffff0u, F_INDIRECT, 0);
	hostile("indirect table of 4 GiB - 16 bytes", 1, 0, 0);
	table_desc(TABLE_OFF, 0, scratch + TABLE_OFF, 32, F_INDIRECT, 0);
	table_desc(TABLE_OFF, 1, scratch + REQ_OFF, 64, 0, 0);
	descs[0] = desc(scratch + TABLE_OFF, 32, F_INDIRECT, 0);
	hostile("indirect table inside an indirect table", 1, 0, TABLE_OFF + 32);
	table_desc(TABLE_OFF, 0, scratch + REQ_OFF, 64, F_NEXT, 1);
	table_desc(TABLE_OFF, 1, scratch + REQ_OFF, 64, F_NEXT, 0);
	hostile("indirect table that loops", 1, 0, TABLE_OFF + 32);
	table_desc(TABLE_OFF, 0, scratch + REQ_OFF, 64, F_NEXT, 7);
	table_desc(TABLE_OFF, 1, scratch + REQ_OFF, 64, 0, 0);
	hostile("indirect table whose next leaves the table", 1, 0, TABLE_OFF + 32);
	n = 4097;	/* one more than the device's MAX_CHAIN_DESCRIPTORS */
	for (i = 0; i < n; i++)
		table_desc(TABLE_OFF, i, scratch + REQ_OFF, 0, i + 1 < n ? F_NEXT : 0,
			   (uint16_t)(i + 1));
	descs[0] = desc(scratch + TABLE_OFF, 16 * n, F_INDIRECT, 0);
	hostile("indirect chain of 4097 descriptors", 1, 0, TABLE_OFF + 16 * n);
	for (i = 0; i < 8; i++)
		table_desc(TABLE_OFF, i, rnd(), (uint32_t)rnd(), (uint16_t)(rnd() & ~F_WRITE),
			   (uint16_t)rnd());
	descs[0] = desc(scratch + TABLE_OFF, 16 * 8, F_INDIRECT, 0);
	hostile("indirect table of random read-only descriptors", 1, 0, TABLE_OFF + 16 * 8);

	/* garbage in well-formed chains */
	garbage(data + REQ_OFF, PAGE);
	request_chain(PAGE);
	hostile("random request bytes", 2, 0, REPLY_OFF + PAGE);
	garbage(data + REQ_OFF, PAGE);
	request_chain(16);
	hostile("request shorter than a batch header", 2, 0, REPLY_OFF + PAGE);
	garbage(data + REQ_OFF, PAGE);
	batch_header(data + REQ_OFF, BYSTANDER_SESSION, 0xffffffffu, PAGE, PAGE);
	request_chain(PAGE);
	hostile("valid header, count 0xffffffff, random messages", 2, 0, REPLY_OFF + PAGE);
	garbage(data + REQ_OFF, PAGE);
	batch_header(data + REQ_OFF, BYSTANDER_SESSION, 4, 1u << 20, PAGE);
	request_chain(PAGE);
	hostile("valid header, request_len beyond the chain", 2, 0, REPLY_OFF + PAGE);
	batch_header(data + REQ_OFF, BYSTANDER_SESSION, 1, 64, 1u << 20);
	request_chain(64);
	hostile("valid header, reply_capacity beyond the chain", 2, 0, REPLY_OFF + PAGE);
	garbage(data + REQ_OFF, PAGE);
	len = VGPU_BATCH_HEADER_SIZE;
	for (i = 0; i < 8; i++) {
		uint8_t payload[64];

		garbage(payload, sizeof(payload));
		len += message(data + REQ_OFF + len, 0x1000 + (uint32_t)(rnd() % 0x60), i + 1,
			       payload, (uint32_t)(rnd() % sizeof(payload)));
	}
	len += message(data + REQ_OFF + len, OP_OPEN_SESSION, 99, NULL, 0);
	batch_header(data + REQ_OFF, 0x1234, 9, len, PAGE);
	request_chain(len);
	hostile("well-framed batch of random OpenCL messages", 2, 0, REPLY_OFF + PAGE);

	/* another VM's session: sessions belong to their front-end */
	len = VGPU_BATCH_HEADER_SIZE + message(data + REQ_OFF + VGPU_BATCH_HEADER_SIZE, OP_PING,
					       1, NULL, 0);
	batch_header(data + REQ_OFF, BYSTANDER_SESSION, 1, len, PAGE);
	request_chain(len);
	hostile("PING for the bystander's session id without opening it", 2, 0,
		REPLY_OFF + PAGE);
	{
		uint32_t v[3] = { VGPU_PROTOCOL_VERSION, VGPU_PROTOCOL_VERSION, 0 }, count = 1;
		uint8_t rel[12];

		len = VGPU_BATCH_HEADER_SIZE;
		len += message(data + REQ_OFF + len, OP_OPEN_SESSION, 1, v, sizeof(v));
		for (i = 1; i <= 4; i++, count += 2) {
			put32(rel, KIND_MEM);
			put64(rel + 4, i);
			len += message(data + REQ_OFF + len, OP_RELEASE, 10 + i, rel, 12);
			put32(rel, KIND_CONTEXT);
			len += message(data + REQ_OFF + len, OP_RELEASE, 20 + i, rel, 12);
		}
		len += message(data + REQ_OFF + len, OP_SESSION_STATS, 30, NULL, 0);
		count++;
		batch_header(data + REQ_OFF, BYSTANDER_SESSION, count, len, PAGE);
		request_chain(len);
		hostile("open the bystander's session id, release its handles", 2, 0,
			REPLY_OFF + PAGE);
	}

	/* control: a well-formed chain on the raw ring still gets its answer */
	{
		uint32_t v[3] = { VGPU_PROTOCOL_VERSION, VGPU_PROTOCOL_VERSION, 0 };

		len = VGPU_BATCH_HEADER_SIZE;
		len += message(data + REQ_OFF + len, OP_OPEN_SESSION, 1, v, sizeof(v));
		len += message(data + REQ_OFF + len, OP_PING, 2, NULL, 0);
		batch_header(data + REQ_OFF, 0x5151, 2, len, PAGE);
		request_chain(len);
		rc = raw(2, 0, REPLY_OFF + PAGE, 5000, &a);
		control_ok = !rc && a.used && all_ok(data + REPLY_OFF, a.used_len, 2);
		describe_reply(what, sizeof(what), data + REPLY_OFF, rc || !a.used ? 0 : a.used_len);
		printf("RAW control (OPEN_SESSION + PING, well formed) -> %s (%s)\n",
		       control_ok ? "answered" : "NOT answered", what);
	}

	/*
	 * A flood of looping chains: the back-end's warnings must be rate-limited
	 * (at most 20 per 10 s per VM). The cases above come one a second, so
	 * each got its own log line. One more chain after the window lets the
	 * back-end log how many it suppressed.
	 */
	descs[0] = desc(scratch + REQ_OFF, 64, F_NEXT, 1);
	descs[1] = desc(scratch + REQ_OFF, 64, F_NEXT, 0);
	for (i = 0; i < FLOOD; i++)
		if (raw(2, 0, 0, 0, &a)) {
			printf("FAIL flood chain %u: %s\n", i, strerror(errno));
			return 1;
		}
	printf("RAW flood -> %u looping chains sent\n", FLOOD);
	sleep(11);
	hostile("loop a->b->a, after the flood", 2, 0, 0);

	/* the driver knows its ring is gone */
	fd = open(path, O_RDWR);
	{
		uint8_t req[64], reply[256];

		len = VGPU_BATCH_HEADER_SIZE + message(req + VGPU_BATCH_HEADER_SIZE, OP_PING, 1,
						       NULL, 0);
		batch_header(req, 0, 1, len, sizeof(reply));
		rc = fd < 0 ? -1 : submit_wait(fd, req, len, reply, sizeof(reply));
		printf("%s SUBMIT after raw use fails with EIO (rc %d, %s)\n",
		       rc < 0 && errno == EIO ? "PASS" : "FAIL", rc, rc < 0 ? strerror(errno) : "");
		if (!(rc < 0 && errno == EIO))
			errors++;
		if (fd >= 0)
			close(fd);
	}

	if (avail_jump) {
		/* the last case: the device cannot take entries from this queue afterwards */
		descs[0] = desc(scratch + REQ_OFF, 64, F_NEXT, 0);
		memset(&a, 0, sizeof(a));
		a.descs = (uintptr_t)descs;
		a.n_descs = 1;
		a.avail_skip = 2 * qsize;
		a.timeout_ms = 2000;
		sent++;
		rc = ioctl(fd_raw, VGPU_IOC_RAW_RING, &a);
		printf("RAW available index jumps by %u -> %s\n", 1 + 2 * qsize,
		       rc ? strerror(errno) : a.used ? "returned" : "not returned within 2 s");
		if (rc)
			errors++;
		else if (!a.used)
			unreturned++;
		sleep(3);
	}

	printf("RAW-SUMMARY sent=%u flood=%u dropped=%u answered=%u unreturned=%u errors=%u "
	       "control=%s\n", sent, FLOOD, dropped, replied, unreturned, errors,
	       control_ok ? "ok" : "failed");
	close(fd_raw);
	return errors ? 1 : 0;
}
