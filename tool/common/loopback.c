/* TCP sockets on loopback: bound to a free port, or connected (see loopback.h). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tool/common/loopback.h"

/* The loopback address at `port` (0: any). */
static struct sockaddr_in loopback_at(int port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    return a;
}

int lb__loopback_bind(int lo, int hi, int listen_too, int *port) {
    int first = lo > 0 ? lo : 0, last = lo > 0 ? hi : 0;
    for (int at = first; at <= last; at++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return -1;
        struct sockaddr_in a = loopback_at(at);
        socklen_t len = sizeof a;
        if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && (!listen_too || listen(fd, 16) == 0) &&
            getsockname(fd, (struct sockaddr *)&a, &len) == 0) {
            *port = ntohs(a.sin_port);
            return fd;
        }
        close(fd);
    }
    return -1;
}

int lb__loopback_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = loopback_at(port);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}
