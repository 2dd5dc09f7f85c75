/* <net/if.h> on Windows: the interface flags getifaddrs gives (ifaddrs.h). */
#ifndef CRUN_COMPAT_NET_IF_H
#define CRUN_COMPAT_NET_IF_H
#ifndef IFF_UP
#define IFF_UP 0x1
#endif
#ifndef IFF_LOOPBACK
#define IFF_LOOPBACK 0x8
#endif
#endif
