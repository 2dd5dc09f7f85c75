/* arpa/inet.h on Windows: Winsock (include/compat/win/crun_win.h). */
#include <winsock2.h>
#include <ws2tcpip.h>
