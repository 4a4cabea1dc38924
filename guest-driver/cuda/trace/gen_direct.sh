#!/bin/sh
# Writes direct.c: one exported counting stub ("lock incq cnt[i]; jmp *tgt[i]")
# for every cu* name in NAMES (one a line), except those cutrace.c wraps itself.
set -eu
names=$(grep -E '^cu[A-Za-z0-9_]+$' "$1" | grep -vxE 'cuGetProcAddress|cuGetProcAddress_v2|cuGetExportTable' | sort -u)
n=$(printf '%s\n' "$names" | wc -l)
{
	echo '#include <stdint.h>'
	echo "#define H __attribute__((visibility(\"hidden\")))"
	echo "H uint64_t cutrace_direct_cnt[$n];"
	echo "H void *cutrace_direct_tgt[$n];"
	echo "H const int cutrace_direct_n = $n;"
	echo "H const char *const cutrace_direct_names[$n] = {"
	printf '%s\n' "$names" | sed 's/.*/\t"&",/'
	echo '};'
	echo '__asm__(".text\\n"'
	printf '%s\n' "$names" | awk '{printf "\t\".globl %s\\n.type %s,@function\\n.balign 16\\n%s:\\nlock incq cutrace_direct_cnt+%d(%%rip)\\njmp *cutrace_direct_tgt+%d(%%rip)\\n.size %s,.-%s\\n\"\n", $1, $1, $1, 8*(NR-1), 8*(NR-1), $1, $1}'
	echo ');'
} >direct.c
