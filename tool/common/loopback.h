/* TCP sockets on loopback, for race replay's server and proxy and the tests'
 * servers and proxies: one bound to a free port, one connected to a port. */
#ifndef LOCKBRIDGE_CLI_LOOPBACK_H
#define LOCKBRIDGE_CLI_LOOPBACK_H

/* A loopback socket (close-on-exec) bound to a free port (one of lo..hi when
 * lo > 0, tried in order; else one the kernel picks), listening when
 * `listen_too`; its fd and *port, or -1. */
int lb__loopback_bind(int lo, int hi, int listen_too, int *port);
/* A blocking socket connected to loopback `port`; its fd, or -1. */
int lb__loopback_connect(int port);

#endif
