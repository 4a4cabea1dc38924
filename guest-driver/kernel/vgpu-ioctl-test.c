// SPDX-License-Identifier: MIT
/*
 * vgpu-ioctl-test [/dev/vgpu0]: feeds virtio_vgpu.ko bad input and one
 * well-formed PING batch; prints a PASS/FAIL line per check and a summary
 * "N passed, N failed". Exit status 0 when nothing failed.
 *
 * As root it also runs PING round trips with the WAIT's busy-poll off and
 * on (module parameter poll_us): the replies must be the same both ways,
 * and with the poll off every round trip must have taken its interrupt.
 * It prints an INFO line with the median round trip and the submit
 * queue's interrupts per call for each (with the poll on, and a back-end
 * that sleeps between requests, replies are mostly found without one:
 * EVENT_IDX lets the device skip the interrupt the driver did not ask for;
 * how many still come is timing, so it is not checked).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "vgpu_uapi.h"

#define OP_OPEN_SESSION 1
#define OP_PING 3
#define REPLY_MAGIC 0x52504756u
#define BAD_PTR ((uint64_t)8)	/* never mapped */
#define POLL_PARAM "/sys/module/virtio_vgpu/parameters/poll_us"
#define POLL_PINGS 200
#define POLL_ON_US 10000	/* the driver's maximum: replies land inside it */

static int passed, failed;

static void check(int ok, const char *what, const char *detail)
{
	printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", what, detail ? ": " : "",
	       detail ? detail : "");
	if (ok)
		passed++;
	else
		failed++;
}

/* Expect ioctl to fail with errno @want. */
static void expect_err(int fd, unsigned long cmd, void *arg, int want, const char *what)
{
	char d[96];
	int rc = ioctl(fd, cmd, arg);
	int e = rc < 0 ? errno : 0;

	snprintf(d, sizeof(d), "rc %d errno %s (want %s)", rc, e ? strerror(e) : "0",
		 strerror(want));
	check(rc < 0 && e == want, what, d);
}

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* A batch of @n PING messages (seq = seq0 + i). Returns its length. */
static uint32_t ping_batch(uint8_t *b, uint32_t n, uint64_t seq0, uint32_t reply_cap)
{
	uint32_t len = VGPU_BATCH_HEADER_SIZE + n * VGPU_MSG_HEADER_SIZE, i;

	memset(b, 0, len);
	put32(b, VGPU_BATCH_MAGIC);
	put16(b + 4, VGPU_PROTOCOL_VERSION);
	put64(b + 8, 0xdeadbeef);	/* the driver overwrites it */
	put32(b + 16, n);
	put32(b + 20, len);
	put32(b + 24, reply_cap);
	for (i = 0; i < n; i++) {
		uint8_t *m = b + VGPU_BATCH_HEADER_SIZE + i * VGPU_MSG_HEADER_SIZE;

		put32(m, OP_PING);
		put64(m + 8, seq0 + i);
	}
	return len;
}

/* Check a reply stream holding @n PING records with seq0.. */
static void check_reply(const uint8_t *r, uint32_t got, uint32_t n, uint64_t seq0,
			const char *what)
{
	char d[160];
	uint32_t i, ok = got >= VGPU_REPLY_HEADER_SIZE && get32(r) == REPLY_MAGIC &&
			 get32(r + 8) == n && (int32_t)get32(r + 16) == 0 &&
			 got >= VGPU_REPLY_HEADER_SIZE + n * 24;

	for (i = 0; ok && i < n; i++) {
		const uint8_t *rec = r + VGPU_REPLY_HEADER_SIZE + i * 24;

		ok = get32(rec) == OP_PING && get32(rec + 4) == 0 && get64(rec + 8) == seq0 + i;
	}
	snprintf(d, sizeof(d), "reply_len %u magic 0x%08x count %u status %d",
		 got, got >= 4 ? get32(r) : 0, got >= 12 ? get32(r + 8) : 0,
		 got >= 20 ? (int32_t)get32(r + 16) : 0);
	check(ok, what, d);
}

static int submit(int fd, struct vgpu_submit *s) { return ioctl(fd, VGPU_IOC_SUBMIT, s); }

/* The first batch of a session: OPEN_SESSION [1, 1]. */
static void open_session(int fd, uint8_t *reply, uint32_t cap)
{
	uint8_t b[VGPU_BATCH_HEADER_SIZE + VGPU_MSG_HEADER_SIZE + 16];
	struct vgpu_submit s;
	struct vgpu_wait w;
	char d[128];
	int rc;

	memset(b, 0, sizeof(b));
	put32(b, VGPU_BATCH_MAGIC);
	put16(b + 4, VGPU_PROTOCOL_VERSION);
	put32(b + 16, 1);
	put32(b + 20, sizeof(b));
	put32(b + 24, cap);
	put32(b + 32, OP_OPEN_SESSION);
	put64(b + 40, 1);
	put32(b + 48, 12);		/* min_version, max_version, flags */
	put32(b + 56, VGPU_PROTOCOL_VERSION);
	put32(b + 60, VGPU_PROTOCOL_VERSION);
	memset(&s, 0, sizeof(s));
	s.request = (uintptr_t)b; s.request_len = sizeof(b); s.reply_capacity = cap;
	rc = submit(fd, &s);
	check(rc == 0, "submit: OPEN_SESSION", rc ? strerror(errno) : NULL);
	if (rc)
		return;
	memset(&w, 0, sizeof(w));
	w.ticket = s.ticket; w.reply = (uintptr_t)reply; w.reply_capacity = cap;
	w.timeout_ms = 20000;
	rc = ioctl(fd, VGPU_IOC_WAIT, &w);
	snprintf(d, sizeof(d), "rc %d %s reply_len %u magic 0x%08x count %u record status %d",
		 rc, rc ? strerror(errno) : "", w.reply_len, get32(reply), get32(reply + 8),
		 w.reply_len >= 48 ? (int32_t)get32(reply + 28) : 0);
	check(rc == 0 && w.reply_len >= 48 && get32(reply) == REPLY_MAGIC &&
	      get32(reply + 8) == 1 && get32(reply + 24) == OP_OPEN_SESSION &&
	      get32(reply + 28) == 0, "reply: OPEN_SESSION", d);
}

static long read_param(const char *path)
{
	FILE *f = fopen(path, "r");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static int write_param(const char *path, long v)
{
	FILE *f = fopen(path, "w");
	int ok;

	if (!f)
		return 0;
	ok = fprintf(f, "%ld\n", v) > 0;
	return fclose(f) == 0 && ok;
}

/* Interrupts of the submit queue so far (/proc/interrupts, "*-submit"). */
static long submit_irqs(void)
{
	FILE *f = fopen("/proc/interrupts", "r");
	char line[1024];
	long total = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *p = strchr(line, ':');

		if (!p || !strstr(line, "-submit"))
			continue;
		for (total = total < 0 ? 0 : total, p++;;) {
			char *end;
			long v = strtol(p, &end, 10);

			if (end == p)
				break;
			total += v;
			p = end;
		}
	}
	fclose(f);
	return total;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/*
 * POLL_PINGS PINGs one after the other with poll_us = @poll; every reply
 * is checked. *irqs: the submit queue's interrupts per round trip.
 * Returns the median round trip in microseconds, or -1.
 */
static double ping_series(int fd, long poll, uint8_t *req, uint8_t *reply, double *irqs)
{
	static double us[POLL_PINGS];
	struct vgpu_submit s;
	struct vgpu_wait w;
	long before, after;
	int i, bad = 0;
	char what[64], d[128];

	snprintf(what, sizeof(what), "poll_us=%ld: set", poll);
	if (!write_param(POLL_PARAM, poll) || read_param(POLL_PARAM) != poll) {
		check(0, what, strerror(errno));
		return -1;
	}
	check(1, what, NULL);
	before = submit_irqs();
	for (i = 0; i < POLL_PINGS; i++) {
		struct timespec t0, t1;

		memset(&s, 0, sizeof(s));
		s.request = (uintptr_t)req;
		s.request_len = ping_batch(req, 1, 1000 + i, 4096);
		s.reply_capacity = 4096;
		memset(&w, 0, sizeof(w));
		w.reply = (uintptr_t)reply; w.reply_capacity = 4096; w.timeout_ms = 20000;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (submit(fd, &s) == 0) {
			w.ticket = s.ticket;
			if (ioctl(fd, VGPU_IOC_WAIT, &w) != 0)
				w.reply_len = 0;
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		us[i] = (t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3;
		if (w.reply_len < VGPU_REPLY_HEADER_SIZE + 24 || get32(reply) != REPLY_MAGIC ||
		    get32(reply + 8) != 1 ||
		    get64(reply + VGPU_REPLY_HEADER_SIZE + 8) != 1000 + (uint64_t)i)
			bad++;
	}
	after = submit_irqs();
	snprintf(what, sizeof(what), "poll_us=%ld: %d PING replies", poll, POLL_PINGS);
	snprintf(d, sizeof(d), "%d wrong or missing", bad);
	check(bad == 0, what, d);
	*irqs = before < 0 || after < 0 ? -1 : (double)(after - before) / POLL_PINGS;
	qsort(us, POLL_PINGS, sizeof(us[0]), cmp_double);
	printf("INFO ping round trip poll_us=%ld: median %.1f us, %.2f submit interrupts per call\n",
	       poll, us[POLL_PINGS / 2], *irqs);
	return us[POLL_PINGS / 2];
}

/* The WAIT's busy-poll: visible, the same replies either way, and honoured. */
static void check_poll(int fd, uint8_t *req, uint8_t *reply)
{
	long saved = read_param(POLL_PARAM);
	double irq_off, irq_on;
	char d[128];

	snprintf(d, sizeof(d), "%ld", saved);
	check(saved >= 0, "poll_us parameter readable", d);
	if (saved < 0 || geteuid() != 0)
		return;
	if (ping_series(fd, 0, req, reply, &irq_off) < 0 ||
	    ping_series(fd, POLL_ON_US, req, reply, &irq_on) < 0) {
		write_param(POLL_PARAM, saved);
		return;
	}
	check(write_param(POLL_PARAM, saved), "poll_us restored", NULL);
	snprintf(d, sizeof(d), "%.2f per call", irq_off);
	/* sequential calls: each completion is signalled to a sleeping WAIT */
	check(irq_off >= 0.9, "poll_us=0: every reply comes with its interrupt", d);
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "/dev/vgpu0";
	static uint8_t req[VGPU_BATCH_HEADER_SIZE + 16 * VGPU_MSG_HEADER_SIZE];
	static uint8_t reply[4096];
	struct vgpu_segment segs[VGPU_MAX_SEGMENTS + 1], seg_in;
	struct vgpu_submit s, base;
	struct vgpu_wait w;
	uint64_t tickets[8];
	long pg = sysconf(_SC_PAGESIZE);
	uint8_t *data, *ro;
	int fd, i, rc;
	char d[128];

	fd = open(path, O_RDWR);
	if (fd < 0) {
		snprintf(d, sizeof(d), "%s: %s", path, strerror(errno));
		check(0, "open", d);
		printf("%d passed, %d failed\n", passed, failed);
		return 1;
	}
	check(1, "open", path);

	data = mmap(NULL, 4 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ro = mmap(NULL, pg, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (data == MAP_FAILED || ro == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memset(data, 0x5a, 4 * pg);

	memset(&base, 0, sizeof(base));
	base.request = (uintptr_t)req;
	base.request_len = ping_batch(req, 1, 1, sizeof(reply));
	base.reply_capacity = sizeof(reply);

	/* bad pointers */
	expect_err(fd, VGPU_IOC_SUBMIT, (void *)BAD_PTR, EFAULT, "submit: bad argument pointer");
	s = base; s.request = BAD_PTR;
	expect_err(fd, VGPU_IOC_SUBMIT, &s, EFAULT, "submit: bad request pointer");
	s = base; s.n_out = 1; s.out_segs = BAD_PTR;
	expect_err(fd, VGPU_IOC_SUBMIT, &s, EFAULT, "submit: bad out segment array");
	s = base; s.n_in = 1; s.in_segs = BAD_PTR;
	expect_err(fd, VGPU_IOC_SUBMIT, &s, EFAULT, "submit: bad in segment array");
	segs[0].addr = BAD_PTR; segs[0].len = 100;
	s = base; s.n_out = 1; s.out_segs = (uintptr_t)segs;
	expect_err(fd, VGPU_IOC_SUBMIT, &s, EFAULT, "submit: unmapped out segment");
	segs[0].addr = (uintptr_t)ro; segs[0].len = 100;
	s = base; s.n_in = 1; s.in_segs = (uintptr_t)segs;
	expect_err(fd, VGPU_IOC_SUBMIT, &s, EFAULT, "submit: read-only in segment");
	expect_err(fd, VGPU_IOC_WAIT, (void *)BAD_PTR, EFAULT, "wait: bad argument pointer");

	/* bad sizes and counts */
	s = base; s.request_len = 0;
	expect_err(fd, VGPU_IOC_SUBMIT, &s, EINVAL, "submit: request_len 0");
	s = base; s.request_len = VGPU_BATCH_HEADER_SIZE - 1;
	expect_err(fd, VGPU_IOC_SUBMIT, &s, EINVAL, "submit: request_len below header");
	s = base; s.request_len = VGPU_MAX_REQUEST_LEN + 1;
	expect_err(fd, VGPU_IOC_SUBMIT, &s, EINVAL, "submit: request_len over limit");
	s = base; s.reply_capacity = 0;
	expect_err(fd, VGPU_IOC_SUBMIT, &s, EINVAL, "submit: reply_capacity 0");
	s = base; s.reply_capacity = VGPU_MAX_REPLY_LEN + 1;
	expect_err(fd, VGPU_IOC_SUBMIT, &s, EINVAL, "submit: reply_capacity over limit");
	for (i = 0; i <= VGPU_MAX_SEGMENTS; i++) {
		segs[i].addr = (uintptr_t)data;
		segs[i].len = 16;
	}
	s = base; s.n_out = VGPU_MAX_SEGMENTS + 1; s.out_segs = (uintptr_t)segs;
	expect_err(fd, VGPU_IOC_SUBMIT, &s, EINVAL, "submit: too many out segments");
	s = base; s.n_in = VGPU_MAX_SEGMENTS + 1; s.in_segs = (uintptr_t)segs;
	expect_err(fd, VGPU_IOC_SUBMIT, &s, EINVAL, "submit: too many in segments");
	segs[0].len = 0;
	s = base; s.n_out = 1; s.out_segs = (uintptr_t)segs;
	expect_err(fd, VGPU_IOC_SUBMIT, &s, EINVAL, "submit: zero-length segment");
	segs[0].len = (uint64_t)VGPU_MAX_DATA_LEN + 1;
	expect_err(fd, VGPU_IOC_SUBMIT, &s, EINVAL, "submit: oversize segment");
	segs[0].len = VGPU_MAX_DATA_LEN; segs[1].addr = (uintptr_t)data; segs[1].len = 1;
	s.n_out = 2;
	expect_err(fd, VGPU_IOC_SUBMIT, &s, EINVAL, "submit: segments over the data limit");
	segs[0].addr = UINT64_MAX - 10; segs[0].len = 100;
	s.n_out = 1;
	expect_err(fd, VGPU_IOC_SUBMIT, &s, EINVAL, "submit: segment wraps the address space");

	/* header must agree with the call */
	s = base; s.request_len = base.request_len + 8;
	expect_err(fd, VGPU_IOC_SUBMIT, &s, EINVAL, "submit: request_len differs from header");
	s = base; s.reply_capacity = base.reply_capacity - 8;
	expect_err(fd, VGPU_IOC_SUBMIT, &s, EINVAL, "submit: reply_capacity differs from header");
	put32(req, 0x12345678);
	expect_err(fd, VGPU_IOC_SUBMIT, &base, EINVAL, "submit: bad magic");
	put32(req, VGPU_BATCH_MAGIC); put16(req + 4, 99);
	expect_err(fd, VGPU_IOC_SUBMIT, &base, EINVAL, "submit: bad version");
	put16(req + 4, VGPU_PROTOCOL_VERSION);

	/* unknown tickets */
	memset(&w, 0, sizeof(w));
	w.reply = (uintptr_t)reply; w.reply_capacity = sizeof(reply); w.timeout_ms = 100;
	w.ticket = 0;
	expect_err(fd, VGPU_IOC_WAIT, &w, EINVAL, "wait: ticket 0");
	w.ticket = 123456;
	expect_err(fd, VGPU_IOC_WAIT, &w, EINVAL, "wait: unknown ticket");
	w.ticket = 1ull << 40;
	expect_err(fd, VGPU_IOC_WAIT, &w, EINVAL, "wait: out-of-range ticket");
	expect_err(fd, _IO('V', 99), NULL, ENOTTY, "unknown ioctl");

	/* a session's first batch opens it (protocol/README.md, Sessions) */
	open_session(fd, reply, sizeof(reply));

	/* well-formed PING */
	s = base;
	rc = submit(fd, &s);
	snprintf(d, sizeof(d), "rc %d errno %s ticket %llu", rc, rc ? strerror(errno) : "0",
		 (unsigned long long)s.ticket);
	check(rc == 0 && s.ticket != 0, "submit: PING", d);
	if (rc == 0) {
		memset(reply, 0, sizeof(reply));
		w.ticket = s.ticket; w.timeout_ms = 20000;
		rc = ioctl(fd, VGPU_IOC_WAIT, &w);
		snprintf(d, sizeof(d), "rc %d errno %s", rc, rc ? strerror(errno) : "0");
		check(rc == 0, "wait: PING", d);
		if (rc == 0)
			check_reply(reply, w.reply_len, 1, 1, "reply: PING");
		expect_err(fd, VGPU_IOC_WAIT, &w, EINVAL, "wait: ticket already consumed");
	}

	/* PING with data segments (pins out pages read-only, in pages writable) */
	segs[0].addr = (uintptr_t)data + 100; segs[0].len = 2 * pg;
	seg_in.addr = (uintptr_t)data + pg + 7; seg_in.len = 2 * pg;
	s = base; s.request_len = ping_batch(req, 1, 50, sizeof(reply));
	s.n_out = 1; s.out_segs = (uintptr_t)segs; s.n_in = 1; s.in_segs = (uintptr_t)&seg_in;
	rc = submit(fd, &s);
	snprintf(d, sizeof(d), "rc %d errno %s", rc, rc ? strerror(errno) : "0");
	check(rc == 0, "submit: PING with out+in segments", d);
	if (rc == 0) {
		w.ticket = s.ticket;
		rc = ioctl(fd, VGPU_IOC_WAIT, &w);
		snprintf(d, sizeof(d), "rc %d errno %s", rc, rc ? strerror(errno) : "0");
		check(rc == 0, "wait: PING with segments", d);
		if (rc == 0)
			check_reply(reply, w.reply_len, 1, 50, "reply: PING with segments");
	}

	/* 4 MiB each way: ~2048 sg entries, more than the ring (indirect table) */
	{
		size_t big = 4u << 20;
		uint8_t *bo = malloc(big), *bi = malloc(big);

		memset(bo, 1, big); memset(bi, 2, big);
		segs[0].addr = (uintptr_t)bo; segs[0].len = big;
		seg_in.addr = (uintptr_t)bi; seg_in.len = big;
		s = base; s.request_len = ping_batch(req, 1, 60, sizeof(reply));
		s.n_out = 1; s.out_segs = (uintptr_t)segs; s.n_in = 1; s.in_segs = (uintptr_t)&seg_in;
		rc = submit(fd, &s);
		snprintf(d, sizeof(d), "rc %d errno %s", rc, rc ? strerror(errno) : "0");
		check(rc == 0, "submit: PING with 4 MiB out + 4 MiB in", d);
		if (rc == 0) {
			w.ticket = s.ticket;
			rc = ioctl(fd, VGPU_IOC_WAIT, &w);
			if (rc == 0)
				check_reply(reply, w.reply_len, 1, 60, "reply: PING with 4 MiB segments");
			else
				check(0, "wait: PING with 4 MiB segments", strerror(errno));
		}
		free(bo); free(bi);
	}

	/* 64 MiB of scattered pages exceed VGPU_MAX_DESCRIPTORS unless contiguous */
	{
		size_t big = VGPU_MAX_DATA_LEN;
		uint8_t *bo = malloc(big);

		memset(bo, 3, big);
		segs[0].addr = (uintptr_t)bo; segs[0].len = big;
		s = base; s.request_len = ping_batch(req, 1, 70, sizeof(reply));
		s.n_out = 1; s.out_segs = (uintptr_t)segs;
		rc = submit(fd, &s);
		snprintf(d, sizeof(d), "rc %d errno %s", rc, rc ? strerror(errno) : "0");
		check(rc == 0 || errno == E2BIG, "submit: 64 MiB out segment (0 or E2BIG)", d);
		if (rc == 0) {
			w.ticket = s.ticket;
			rc = ioctl(fd, VGPU_IOC_WAIT, &w);
			if (rc == 0)
				check_reply(reply, w.reply_len, 1, 70, "reply: PING with 64 MiB");
			else
				check(0, "wait: PING with 64 MiB", strerror(errno));
		}
		free(bo);
	}

	/* several batches in flight, collected in reverse order */
	for (i = 0; i < 8; i++) {
		s = base; s.request_len = ping_batch(req, 3, 100 + 10 * i, sizeof(reply));
		rc = submit(fd, &s);
		tickets[i] = rc ? 0 : s.ticket;
	}
	for (i = 7; i >= 0; i--) {
		snprintf(d, sizeof(d), "reply: batch %d of 8 (3 PINGs)", i);
		w.ticket = tickets[i];
		rc = tickets[i] ? ioctl(fd, VGPU_IOC_WAIT, &w) : -1;
		if (rc == 0)
			check_reply(reply, w.reply_len, 3, 100 + 10 * i, d);
		else
			check(0, d, strerror(errno));
	}

	/* a too-small wait buffer: reply_len tells the full size */
	s = base; s.request_len = ping_batch(req, 1, 7, sizeof(reply));
	if (submit(fd, &s) == 0) {
		w.ticket = s.ticket; w.reply_capacity = 8;
		rc = ioctl(fd, VGPU_IOC_WAIT, &w);
		snprintf(d, sizeof(d), "rc %d reply_len %u", rc, w.reply_len);
		check(rc == 0 && w.reply_len >= VGPU_REPLY_HEADER_SIZE + 24 &&
		      get32(reply) == REPLY_MAGIC, "wait: short reply buffer", d);
		w.reply_capacity = sizeof(reply);
	} else {
		check(0, "wait: short reply buffer", strerror(errno));
	}

	check_poll(fd, req, reply);

	/* a pending ticket is left for close() to clean up */
	s = base; s.request_len = ping_batch(req, 1, 9, sizeof(reply));
	rc = submit(fd, &s);
	check(rc == 0, "submit: left pending for close", rc ? strerror(errno) : NULL);
	check(close(fd) == 0, "close with a pending ticket", NULL);

	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
