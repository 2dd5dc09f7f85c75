/*
 * <ifaddrs.h> on Windows: getifaddrs over libuv's uv_interface_addresses
 * (the interfaces that are up, each address once), in the shape netif.c
 * reads: name, flags (IFF_UP), address.
 */
#ifndef CRUN_COMPAT_IFADDRS_H
#define CRUN_COMPAT_IFADDRS_H
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>
#include <net/if.h>

struct ifaddrs {
	struct ifaddrs *ifa_next;
	char *ifa_name;
	unsigned int ifa_flags;
	struct sockaddr *ifa_addr;
	/* the storage behind the pointers */
	char name_buf[64];
	struct sockaddr_in6 addr_buf;
};

static inline void freeifaddrs(struct ifaddrs *ifa)
{
	while (ifa != NULL) {
		struct ifaddrs *next = ifa->ifa_next;

		free(ifa);
		ifa = next;
	}
}

static inline int getifaddrs(struct ifaddrs **out)
{
	uv_interface_address_t *a;
	struct ifaddrs *head = NULL, **tail = &head;
	int n, i, rc = uv_interface_addresses(&a, &n);

	if (rc != 0) {
		errno = EIO;
		return -1;
	}
	for (i = 0; i < n; i++) {
		struct ifaddrs *e = calloc(1, sizeof(*e));

		if (e == NULL) {
			freeifaddrs(head);
			uv_free_interface_addresses(a, n);
			errno = ENOMEM;
			return -1;
		}
		snprintf(e->name_buf, sizeof(e->name_buf), "%s", a[i].name);
		e->ifa_name = e->name_buf;
		e->ifa_flags = IFF_UP | (a[i].is_internal ? IFF_LOOPBACK : 0);
		memcpy(&e->addr_buf, &a[i].address,
		       a[i].address.address4.sin_family == AF_INET6
			   ? sizeof(struct sockaddr_in6)
			   : sizeof(struct sockaddr_in));
		e->ifa_addr = (struct sockaddr *)&e->addr_buf;
		*tail = e;
		tail = &e->ifa_next;
	}
	uv_free_interface_addresses(a, n);
	*out = head;
	return 0;
}
#endif
