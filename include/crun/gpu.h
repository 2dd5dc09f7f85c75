/*
 * Accelerators on this node, counted from what the kernel drivers publish
 * (no CUDA, ROCm or Level Zero library is loaded), after the vendor's
 * visibility variable, as the vendor's runtime would count them:
 *
 *   NVIDIA  /proc/driver/nvidia/gpus/<bus id>    CUDA_VISIBLE_DEVICES
 *   AMD     /sys/class/kfd/kfd/topology/nodes/<n>/gpu_id != 0
 *           HIP_VISIBLE_DEVICES, else ROCR_VISIBLE_DEVICES, else
 *           CUDA_VISIBLE_DEVICES (HIP honours it too)
 *   Intel   /sys/class/drm/card<n> with vendor 0x8086 on i915 or xe
 *           ZE_AFFINITY_MASK ("0,2" or "0.1,2": device[.sub-device])
 *
 * CRUN_NVIDIA_PROC and CRUN_SYSFS (default /sys) move the roots, for tests.
 */
#ifndef CRUN_GPU_H
#define CRUN_GPU_H

enum crun_gpu_vendor { CRUN_GPU_NVIDIA, CRUN_GPU_AMD, CRUN_GPU_INTEL };

/** Visible devices of one vendor (0 when its driver shows none). */
int gpu_count(enum crun_gpu_vendor v);

/**
 * Count the entries of a visibility list for physical devices the way the
 * runtimes do: stop at the first invalid one; "GPU-…"/"MIG-…" UUIDs count.
 */
int gpu_visible(const char *list, int physical);

/**
 * For --virtual-local-rank: the variable that makes local_rank's device the
 * worker's only one (AMD: HIP_VISIBLE_DEVICES, Intel alone:
 * ZE_AFFINITY_MASK, else CUDA_VISIBLE_DEVICES) and its value: the
 * local_rank-th entry of the list this node was given, else local_rank.
 */
void gpu_virtual_device(int local_rank, const char **var, char *val,
			size_t len);

#endif
