/* MD2 against RFC 1319's test vectors: `make md2test`. */
#include <stdio.h>
#include <string.h>

#include "integrity.h"

int main(void)
{
	static const char *const in[] = {"", "a", "abc", "message digest",
					 "1234567890123456789012345678901234567890"
					 "1234567890123456789012345678901234567890"};
	static const char *const want[] = {"8350e5a3e24c153df2275c9f80692773", "32ec01ec4a6dac72c0ab96fb34c0b5d1",
					   "da853b0d3f88d99b30283a69e6ded6bb", "ab4f496bfb2a530b219ff33031fe06b0",
					   "d5976f79d83d3a0dc9806c3c66f3efd8"};
	int bad = 0;
	for (int i = 0; i < 5; i++) {
		unsigned char d[16];
		char hex[33];
		cutrace_md2((const unsigned char *)in[i], strlen(in[i]), d);
		for (int j = 0; j < 16; j++)
			sprintf(hex + 2 * j, "%02x", d[j]);
		if (strcmp(hex, want[i])) {
			printf("MD2(\"%s\") = %s, want %s\n", in[i], hex, want[i]);
			bad = 1;
		}
	}
	printf("md2: %s\n", bad ? "FAIL" : "ok");
	return bad;
}
