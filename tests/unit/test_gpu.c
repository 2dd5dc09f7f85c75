/*
 * Accelerator counting over fake driver trees: NVIDIA's /proc entries, AMD's
 * KFD topology and Intel's DRM cards, each with its visibility variable.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crun/cfg.h"
#include "crun/gpu.h"

static char root[64];

static void put(const char *rel, const char *text)
{
	char path[PATH_MAX], cmd[PATH_MAX + 32];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
	cr_assert_eq(system(cmd), 0);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

static void link_driver(const char *card, const char *driver)
{
	char path[PATH_MAX], target[PATH_MAX];

	snprintf(path, sizeof(path), "%s/class/drm/%s/device/driver", root,
		 card);
	snprintf(target, sizeof(target), "../../../bus/pci/drivers/%s",
		 driver);
	cr_assert_eq(symlink(target, path), 0);
}

static void setup(void)
{
	char nv[PATH_MAX];

	snprintf(root, sizeof(root), "/tmp/crun-sysfs-XXXXXX");
	cr_assert_not_null(mkdtemp(root));
	setenv("CRUN_SYSFS", root, 1);
	snprintf(nv, sizeof(nv), "%s/nvidia", root);
	setenv("CRUN_NVIDIA_PROC", nv, 1);
	unsetenv("CUDA_VISIBLE_DEVICES");
	unsetenv("HIP_VISIBLE_DEVICES");
	unsetenv("ROCR_VISIBLE_DEVICES");
	unsetenv("ZE_AFFINITY_MASK");
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	cr_expect_eq(system(cmd), 0);
}

TestSuite(gpu, .init = setup, .fini = teardown);

/* A node with 4 AMD GPUs: KFD lists the CPU as node 0 (gpu_id 0). */
static void amd4(void)
{
	put("class/kfd/kfd/topology/nodes/0/gpu_id", "0\n");
	for (int i = 1; i <= 4; i++) {
		char rel[96], id[16];

		snprintf(rel, sizeof(rel),
			 "class/kfd/kfd/topology/nodes/%d/gpu_id", i);
		snprintf(id, sizeof(id), "%d\n", 40000 + i);
		put(rel, id);
	}
}

Test(gpu, none_anywhere)
{
	cr_expect_eq(gpu_count(CRUN_GPU_NVIDIA), 0);
	cr_expect_eq(gpu_count(CRUN_GPU_AMD), 0);
	cr_expect_eq(gpu_count(CRUN_GPU_INTEL), 0);
	cr_expect_eq(cfg_gpu_count(), 0);
}

Test(gpu, amd_from_kfd_topology)
{
	amd4();
	cr_expect_eq(gpu_count(CRUN_GPU_AMD), 4, "the CPU node is not a GPU");
	cr_expect_eq(cfg_gpu_count(), 4, "gpu counts AMD devices");
	setenv("HIP_VISIBLE_DEVICES", "1,3", 1);
	cr_expect_eq(gpu_count(CRUN_GPU_AMD), 2);
	unsetenv("HIP_VISIBLE_DEVICES");
	setenv("ROCR_VISIBLE_DEVICES", "0,1,2,9", 1);
	cr_expect_eq(gpu_count(CRUN_GPU_AMD), 3, "stops at the first invalid");
	unsetenv("ROCR_VISIBLE_DEVICES");
	setenv("CUDA_VISIBLE_DEVICES", "2", 1);
	cr_expect_eq(gpu_count(CRUN_GPU_AMD), 1, "HIP honours CUDA's variable");
	setenv("HIP_VISIBLE_DEVICES", "0,1,2", 1);
	cr_expect_eq(gpu_count(CRUN_GPU_AMD), 3, "HIP's variable wins");
}

Test(gpu, intel_cards_of_i915_and_xe)
{
	put("class/drm/card0/device/vendor", "0x8086\n");
	link_driver("card0", "i915");
	put("class/drm/card1/device/vendor", "0x8086\n");
	link_driver("card1", "xe");
	put("class/drm/card2/device/vendor", "0x10de\n"); /* NVIDIA's card */
	link_driver("card2", "nvidia");
	put("class/drm/card3/device/vendor", "0x8086\n"); /* no driver bound */
	put("class/drm/card0-DP-1/status", "connected\n"); /* a connector */
	put("class/drm/renderD128/dev", "226:128\n");
	cr_expect_eq(gpu_count(CRUN_GPU_INTEL), 2);
	cr_expect_eq(cfg_gpu_count(), 0, "gpu does not count Intel devices");
	setenv("ZE_AFFINITY_MASK", "1", 1);
	cr_expect_eq(gpu_count(CRUN_GPU_INTEL), 1);
	setenv("ZE_AFFINITY_MASK", "0.0,0.1,1", 1);
	cr_expect_eq(gpu_count(CRUN_GPU_INTEL), 2, "sub-devices of one device");
	setenv("ZE_AFFINITY_MASK", "0,7", 1);
	cr_expect_eq(gpu_count(CRUN_GPU_INTEL), 1, "stops at the first invalid");
}

Test(gpu, nvidia_with_visibility)
{
	put("nvidia/0000:01:00.0/information", "Model: X\n");
	put("nvidia/0000:02:00.0/information", "Model: X\n");
	cr_expect_eq(gpu_count(CRUN_GPU_NVIDIA), 2);
	setenv("CUDA_VISIBLE_DEVICES", "GPU-aaaa,1", 1);
	cr_expect_eq(gpu_count(CRUN_GPU_NVIDIA), 2, "UUIDs count");
	setenv("CUDA_VISIBLE_DEVICES", "", 1);
	cr_expect_eq(gpu_count(CRUN_GPU_NVIDIA), 0, "empty hides all");
}

Test(gpu, visible_list_parsing)
{
	cr_expect_eq(gpu_visible("0,1,2", 4), 3);
	cr_expect_eq(gpu_visible(" 1, 0", 4), 2);
	cr_expect_eq(gpu_visible("0,-1,2", 4), 1);
	cr_expect_eq(gpu_visible("0,x", 4), 1);
	cr_expect_eq(gpu_visible("MIG-1,MIG-2", 0), 2);
	cr_expect_eq(gpu_visible("3", 2), 0);
}

/* --nproc_per_node=xpu and auto through the option parser. */
Test(gpu, nproc_per_node_xpu_and_auto)
{
	struct crun_cfg cfg;
	char err[256];
	int done = 0;
	const char *xpu[] = {"crun", "--nproc_per_node=xpu", "x", NULL};
	const char *autov[] = {"crun", "--nproc_per_node=auto", "x", NULL};

	cfg_init(&cfg);
	cr_assert_neq(cfg_parse_args(&cfg, 3, (char **)xpu, &done, err, sizeof(err)) == 0 &&
			  cfg_finalize(&cfg, err, sizeof(err)) == 0,
		      1, "xpu without Intel devices must be refused");
	cr_expect_not_null(strstr(err, "no Intel XPU is visible"), "%s", err);
	cfg_release(&cfg);

	put("class/drm/card0/device/vendor", "0x8086\n");
	link_driver("card0", "xe");
	put("class/drm/card1/device/vendor", "0x8086\n");
	link_driver("card1", "xe");
	cfg_init(&cfg);
	cr_assert_eq(cfg_parse_args(&cfg, 3, (char **)xpu, &done, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(cfg_finalize(&cfg, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(cfg.nproc_per_node, 2);
	cfg_release(&cfg);

	cfg_init(&cfg);
	cr_assert_eq(cfg_parse_args(&cfg, 3, (char **)autov, &done, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(cfg_finalize(&cfg, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(cfg.nproc_per_node, 2, "auto: no GPU, so the XPUs");
	cfg_release(&cfg);
	amd4();
	cfg_init(&cfg);
	cr_assert_eq(cfg_parse_args(&cfg, 3, (char **)autov, &done, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(cfg_finalize(&cfg, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(cfg.nproc_per_node, 4, "auto: the GPUs first");
	cfg_release(&cfg);
}
