/*
 * The integrity check cudart runs against the driver (export table
 * d4082055-..., slot 1): an HMAC over MD2 (RFC 1319 and RFC 2104) with a
 * fixed 16-byte key, of 48 bytes that name the caller and the tables
 * (driver version, the version cudart passes, process and thread ids, the
 * addresses of the cudart-interface table, of the integrity-check table and
 * of its check function, the seconds cudart passes) followed by 28 bytes
 * per device (UUID, PCI domain, bus and device). ZLUDA's dark_api notes
 * describe the passes; this is a plain MD2/HMAC written from the RFCs.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "integrity.h"

/* MD2's substitution table, from the digits of pi (RFC 1319). */
static const unsigned char S[256] = {
	41,  46,  67,  201, 162, 216, 124, 1,	61,  54,  84,  161, 236, 240, 6,   19,  98,  167, 5,   243, 192, 199,
	115, 140, 152, 147, 43,	 217, 188, 76,	130, 202, 30,  155, 87,  60,  253, 212, 224, 22,  103, 66,  111, 24,
	138, 23,  229, 18,  190, 78,  196, 214, 218, 158, 222, 73,  160, 251, 245, 142, 187, 47,  238, 122, 169, 104,
	121, 145, 21,  178, 7,	 63,  148, 194, 16,  137, 11,  34,  95,	 33,  128, 127, 93,  154, 90,  144, 50,	 39,
	53,  62,  204, 231, 191, 247, 151, 3,	255, 25,  48,  179, 72,	 165, 181, 209, 215, 94,  146, 42,  172, 86,
	170, 198, 79,  184, 56,	 210, 150, 164, 125, 182, 118, 252, 107, 226, 156, 116, 4,   241, 69,  157, 112, 89,
	100, 113, 135, 32,  134, 91,  207, 101, 230, 45,  168, 2,   27,	 96,  37,  173, 174, 176, 185, 246, 28,	 70,
	97,  105, 52,  64,  126, 15,  85,  71,	163, 35,  221, 81,  175, 58,  195, 92,	249, 206, 186, 197, 234, 38,
	44,  83,  13,  110, 133, 40,  132, 9,	211, 223, 205, 244, 65,	 129, 77,  82,	106, 220, 55,  200, 108, 193,
	171, 250, 36,  225, 123, 8,   12,  189, 177, 74,  120, 136, 149, 139, 227, 99,	232, 109, 233, 203, 213, 254,
	59,  0,	  29,  57,  242, 239, 183, 14,	102, 88,  208, 228, 166, 119, 114, 248, 235, 117, 75,  10,  49,	 68,
	80,  180, 143, 237, 31,	 26,  219, 153, 141, 51,  159, 17,  131, 20,
};

struct md2 {
	unsigned char x[48], c[16], buf[16];
	unsigned char l;
	int n;
};

static void md2_block(struct md2 *m)
{
	for (int j = 0; j < 16; j++) {
		m->x[16 + j] = m->buf[j];
		m->x[32 + j] = m->x[j] ^ m->buf[j];
		m->l = m->c[j] ^= S[m->buf[j] ^ m->l];
	}
	unsigned t = 0;
	for (int round = 0; round < 18; round++) {
		for (int k = 0; k < 48; k++)
			t = m->x[k] ^= S[t];
		t = (t + round) & 0xff;
	}
}

static void md2_update(struct md2 *m, const unsigned char *p, size_t n)
{
	while (n--) {
		m->buf[m->n++] = *p++;
		if (m->n == 16) {
			md2_block(m);
			m->n = 0;
		}
	}
}

static void md2_final(struct md2 *m, unsigned char out[16])
{
	unsigned char pad[16];
	int k = 16 - m->n;
	memset(pad, k, sizeof pad);
	md2_update(m, pad, (size_t)k);
	unsigned char c[16];
	memcpy(c, m->c, 16);
	md2_update(m, c, 16);
	memcpy(out, m->x, 16);
}

void cutrace_md2(const unsigned char *msg, size_t n, unsigned char out[16])
{
	struct md2 m;
	memset(&m, 0, sizeof m);
	md2_update(&m, msg, n);
	md2_final(&m, out);
}

void cutrace_hmac_md2(const unsigned char key[16], const unsigned char *msg, size_t n, unsigned char out[16])
{
	unsigned char pad[16], inner[16];
	struct md2 m;
	memset(&m, 0, sizeof m);
	for (int i = 0; i < 16; i++)
		pad[i] = key[i] ^ 0x36;
	md2_update(&m, pad, 16);
	md2_update(&m, msg, n);
	md2_final(&m, inner);
	memset(&m, 0, sizeof m);
	for (int i = 0; i < 16; i++)
		pad[i] = key[i] ^ 0x5c;
	md2_update(&m, pad, 16);
	md2_update(&m, inner, 16);
	md2_final(&m, out);
}

/* The key (ZLUDA's "pass 1", which uses no input). */
static const unsigned char KEY[16] = {0x14, 0x6a, 0xdd, 0xae, 0x53, 0xa9, 0xa7, 0x52,
				      0xaa, 0x08, 0x41, 0x36, 0x0b, 0xf5, 0x5a, 0x9f};

void cutrace_integrity_hash(const struct cutrace_integrity_in *in, const struct cutrace_device_info *devices,
			    int ndevices, uint64_t out[2])
{
	unsigned char msg[48 + 28 * CUTRACE_MAX_DEVICES];
	size_t n = 0;
	memcpy(msg + n, &in->driver_version, 4), n += 4;
	memcpy(msg + n, &in->version, 4), n += 4;
	memcpy(msg + n, &in->process, 4), n += 4;
	memcpy(msg + n, &in->thread, 4), n += 4;
	memcpy(msg + n, &in->cudart_table, 8), n += 8;
	memcpy(msg + n, &in->integrity_table, 8), n += 8;
	memcpy(msg + n, &in->check_fn, 8), n += 8;
	memcpy(msg + n, &in->seconds, 8), n += 8;
	for (int d = 0; d < ndevices && d < CUTRACE_MAX_DEVICES; d++) {
		memcpy(msg + n, devices[d].uuid, 16), n += 16;
		memcpy(msg + n, &devices[d].pci_domain, 4), n += 4;
		memcpy(msg + n, &devices[d].pci_bus, 4), n += 4;
		memcpy(msg + n, &devices[d].pci_device, 4), n += 4;
	}
	cutrace_hmac_md2(KEY, msg, n, (unsigned char *)out);
}
