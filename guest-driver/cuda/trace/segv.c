/*
 * segv.so: an LD_PRELOAD crash reporter for programs run through vgpu on
 * the GPU machine, which has no gdb: on SIGSEGV it prints the faulting
 * address, the registers and a backtrace with each frame's module and
 * offset (what objdump --start-address needs), then dies as before.
 *
 * gcc -shared -fPIC -O1 -o segv.so segv.c -ldl
 * LD_PRELOAD=$PWD/segv.so python3 my_program.py
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>

static void report(int sig, siginfo_t *info, void *context)
{
	static const char *const regs[] = {"r8",  "r9",  "r10", "r11", "r12", "r13", "r14", "r15", "rdi",
					   "rsi", "rbp", "rbx", "rdx", "rax", "rcx", "rsp", "rip"};
	ucontext_t *uc = context;
	void *pc = (void *)uc->uc_mcontext.gregs[REG_RIP];
	fprintf(stderr, "SEGV at %p, address %p\n", pc, info->si_addr);
	for (int i = 0; i < 17; i++)
		fprintf(stderr, " %s=%llx", regs[i], (unsigned long long)uc->uc_mcontext.gregs[i]);
	fprintf(stderr, "\n");
	void *frames[64];
	int n = backtrace(frames, 64);
	frames[1] = pc; /* the signal trampoline's slot: the faulting instruction */
	for (int i = 1; i < n; i++) {
		Dl_info di;
		if (dladdr(frames[i], &di) && di.dli_fname)
			fprintf(stderr, "  #%d %p %s+0x%lx %s\n", i, frames[i], di.dli_fname,
				(unsigned long)((char *)frames[i] - (char *)di.dli_fbase),
				di.dli_sname ? di.dli_sname : "");
		else
			fprintf(stderr, "  #%d %p\n", i, frames[i]);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

__attribute__((constructor)) static void install(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = report;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGSEGV, &sa, NULL);
}
