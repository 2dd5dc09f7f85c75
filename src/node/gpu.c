/*
 * Counting accelerators (see include/crun/gpu.h). Only directory listings
 * and small sysfs attribute files are read; a missing tree means "none".
 */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crun/gpu.h"

#define MAX_DEVICES 4096

/* The first line of a small file, or "" when it cannot be read. */
static void read_attr(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t k = fd >= 0 ? read(fd, buf, len - 1) : -1;

	if (fd >= 0)
		close(fd);
	buf[k > 0 ? k : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

static const char *sysfs(void)
{
	const char *r = getenv("CRUN_SYSFS");

	return r && *r ? r : "/sys";
}

int gpu_visible(const char *list, int physical)
{
	const char *p = list;
	int n = 0;

	while (*p && n < MAX_DEVICES) {
		size_t len = strcspn(p, ",");
		char tok[64];
		char *end;
		long idx;

		snprintf(tok, sizeof(tok), "%.*s", (int)(len < 63 ? len : 63),
			 p);
		p += len + (p[len] == ',');
		end = tok;
		while (isspace((unsigned char)*end))
			end++;
		if (strncmp(end, "GPU-", 4) == 0 ||
		    strncmp(end, "MIG-", 4) == 0) {
			n++;
			continue;
		}
		if (!isdigit((unsigned char)*end))
			break;
		idx = strtol(end, &end, 10);
		if ((*end != '\0' && !isspace((unsigned char)*end)) ||
		    idx >= physical)
			break;
		n++;
	}
	return n;
}

/* Entries of dir whose name passes keep (all but dot files by default). */
static int count_dir(const char *dir,
		     int (*keep)(const char *dir, const char *name))
{
	struct dirent *de;
	DIR *d = opendir(dir);
	int n = 0;

	if (d == NULL)
		return 0;
	while ((de = readdir(d)) != NULL && n < MAX_DEVICES)
		if (de->d_name[0] != '.' &&
		    (keep == NULL || keep(dir, de->d_name)))
			n++;
	closedir(d);
	return n;
}

/* A KFD topology node that is a GPU (CPU nodes have gpu_id 0). */
static int kfd_gpu(const char *dir, const char *name)
{
	char path[PATH_MAX], v[64];

	snprintf(path, sizeof(path), "%s/%s/gpu_id", dir, name);
	read_attr(path, v, sizeof(v));
	return *v && strtoul(v, NULL, 10) != 0;
}

/* card<N> (not a connector like card0-DP-1) of Intel's i915 or xe driver. */
static int intel_card(const char *dir, const char *name)
{
	char path[PATH_MAX], v[64], link[PATH_MAX];
	const char *drv;
	ssize_t k;

	if (strncmp(name, "card", 4) || name[4] == '\0' ||
	    strspn(name + 4, "0123456789") != strlen(name + 4))
		return 0;
	snprintf(path, sizeof(path), "%s/%s/device/vendor", dir, name);
	read_attr(path, v, sizeof(v));
	if (strcmp(v, "0x8086") != 0)
		return 0;
	snprintf(path, sizeof(path), "%s/%s/device/driver", dir, name);
	k = readlink(path, link, sizeof(link) - 1);
	if (k <= 0)
		return 0;
	link[k] = '\0';
	drv = strrchr(link, '/') ? strrchr(link, '/') + 1 : link;
	return strcmp(drv, "i915") == 0 || strcmp(drv, "xe") == 0;
}

/* ZE_AFFINITY_MASK: distinct devices named (device or device.sub). */
static int ze_visible(const char *mask, int physical)
{
	char seen[MAX_DEVICES] = {0};
	const char *p = mask;
	int n = 0;

	while (*p) {
		char *end;
		long idx;

		while (isspace((unsigned char)*p))
			p++;
		if (!isdigit((unsigned char)*p))
			break;
		idx = strtol(p, &end, 10);
		if (idx >= physical || idx >= MAX_DEVICES)
			break;
		if (*end == '.') { /* a sub-device: its device counts once */
			end++;
			while (isdigit((unsigned char)*end))
				end++;
		}
		if (*end != ',' && *end != '\0')
			break;
		if (!seen[idx]++)
			n++;
		p = end + (*end == ',');
	}
	return n;
}

int gpu_count(enum crun_gpu_vendor v)
{
	char dir[PATH_MAX];
	const char *vis;
	int n;

	switch (v) {
	case CRUN_GPU_NVIDIA:
		vis = getenv("CRUN_NVIDIA_PROC");
		n = count_dir(vis ? vis : "/proc/driver/nvidia/gpus", NULL);
		vis = getenv("CUDA_VISIBLE_DEVICES");
		return vis ? gpu_visible(vis, n) : n;
	case CRUN_GPU_AMD:
		snprintf(dir, sizeof(dir), "%s/class/kfd/kfd/topology/nodes",
			 sysfs());
		n = count_dir(dir, kfd_gpu);
		if ((vis = getenv("HIP_VISIBLE_DEVICES")) == NULL &&
		    (vis = getenv("ROCR_VISIBLE_DEVICES")) == NULL)
			vis = getenv("CUDA_VISIBLE_DEVICES");
		return vis && n > 0 ? gpu_visible(vis, n) : n;
	case CRUN_GPU_INTEL:
		snprintf(dir, sizeof(dir), "%s/class/drm", sysfs());
		n = count_dir(dir, intel_card);
		vis = getenv("ZE_AFFINITY_MASK");
		return vis && *vis ? ze_visible(vis, n) : n;
	}
	return 0;
}

/* The n-th comma-separated entry of list into val; 0 if it has none. */
static int nth_entry(const char *list, int n, char *val, size_t len)
{
	const char *p = list;

	for (int i = 0; *p; i++) {
		size_t k = strcspn(p, ",");

		if (i == n) {
			snprintf(val, len, "%.*s", (int)k, p);
			return k > 0;
		}
		p += k + (p[k] == ',');
	}
	return 0;
}

void gpu_virtual_device(int local_rank, const char **var, char *val, size_t len)
{
	const char *list;

	if (gpu_count(CRUN_GPU_AMD) > 0) {
		*var = "HIP_VISIBLE_DEVICES";
		if ((list = getenv("HIP_VISIBLE_DEVICES")) == NULL &&
		    (list = getenv("ROCR_VISIBLE_DEVICES")) == NULL)
			list = getenv("CUDA_VISIBLE_DEVICES");
	} else if (gpu_count(CRUN_GPU_NVIDIA) == 0 &&
		   gpu_count(CRUN_GPU_INTEL) > 0) {
		*var = "ZE_AFFINITY_MASK";
		list = getenv("ZE_AFFINITY_MASK");
	} else {
		*var = "CUDA_VISIBLE_DEVICES";
		list = getenv("CUDA_VISIBLE_DEVICES");
	}
	if (list == NULL || !nth_entry(list, local_rank, val, len))
		snprintf(val, len, "%d", local_rank);
}
