/* <endian.h> on Windows: every Windows crun runs on is little-endian. */
#ifndef CRUN_COMPAT_ENDIAN_H
#define CRUN_COMPAT_ENDIAN_H
#define le16toh(x) (x)
#define le32toh(x) (x)
#define le64toh(x) (x)
#define htole16(x) (x)
#define htole32(x) (x)
#define htole64(x) (x)
#endif
