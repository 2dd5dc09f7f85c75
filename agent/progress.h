/*
 * Whether a worker makes progress (--stall_timeout, progress.c): the CPU
 * time and the bytes read and written of its process tree, from /proc.
 * Private to agent/.
 *
 * A worker's tree is every process whose process group or session is the
 * worker's pid (each worker leads a group of its own: proc.h), so its
 * data loader workers and subprocesses count, all their threads included
 * (/proc/PID/stat sums a process's threads); the children they have reaped
 * stay counted through cutime and cstime.
 */
#ifndef CRUN_AGENT_PROGRESS_H
#define CRUN_AGENT_PROGRESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * What counts as progress in one sample, per second of it: 5% of a CPU,
 * or 64 KiB read or written. A rank blocked in a collective or a barrier
 * sits on a futex or in recv and gathers a clock tick now and then from
 * helper threads, far below 50 ms a second; any rank doing work (a
 * training step, a data loader, a checkpoint being written) is far above
 * one of the two.
 */
#define PROGRESS_CPU_MS_PER_S 50
#define PROGRESS_IO_BYTES_PER_S (64u << 10)
/* Processes read per scan, whatever the host or the job runs. */
#define PROGRESS_MAX_PROCS 65536

struct progress_sample {
	uint64_t cpu_ticks; /* utime+stime+cutime+cstime, clock ticks */
	uint64_t io_bytes;  /* rchar+wchar (0 where /proc/PID/io is shut) */
	int nproc;	    /* processes counted */
};

/* One rank's record of its progress. */
struct progress_rank {
	struct progress_sample last;
	uint64_t since_ms; /* loop time of its last progress */
	int seen;	   /* last holds a sample */
};

/**
 * One pass over the workers' trees in root (normally "/proc"): out[i]
 * becomes the sum over every process whose process group or session is
 * pgids[i] (0: none, out[i] zeroed), of those reachable from the worker's
 * parent through root/PID/task/TID/children; unrelated processes are not
 * read (all of root is, where the kernel has no children files). /proc's bytes
 * are not trusted: a line that does not parse counts nothing. Returns the
 * processes matched, or a negative error when root cannot be read.
 */
int progress_scan(const char *root, const pid_t *pgids, size_t n,
		  struct progress_sample *out);

/**
 * Parse one /proc/PID/stat text: its process group, session and the four
 * CPU times summed. Returns 0, or -1 when it is not a stat line.
 */
int progress_parse_stat(const char *text, size_t len, pid_t *pgrp,
			pid_t *session, uint64_t *ticks);

/** rchar + wchar of one /proc/PID/io text (0 for what is missing). */
uint64_t progress_parse_io(const char *text, size_t len);

/**
 * Fold s, sampled at now_ms, elapsed_ms after the last one, into r (hz:
 * clock ticks per second). Returns 1 when the rank made progress: its
 * CPU or bytes advanced past the thresholds above, its tree shrank (a
 * process of it exited: something happened) or this is its first sample.
 */
int progress_note(struct progress_rank *r, const struct progress_sample *s,
		  uint64_t now_ms, uint64_t elapsed_ms, long hz);

#endif
