/*
 * notify.h - systemd's readiness protocol (sd_notify) without libsystemd.
 *
 * When the service manager sets NOTIFY_SOCKET (a unix datagram socket: a
 * path, or "@name" for one in the abstract namespace), each message is one
 * datagram of newline-separated VAR=VALUE lines: "READY=1" once the daemon
 * serves, "STOPPING=1" when it begins to stop, "STATUS=..." free text for
 * `systemctl status`, "EXTEND_TIMEOUT_USEC=N" to ask for more start time.
 * Without NOTIFY_SOCKET nothing is sent.
 */
#ifndef MIRADB_NOTIFY_H
#define MIRADB_NOTIFY_H

/*
 * Sends |msg| as one datagram to $NOTIFY_SOCKET. Returns 1 when sent, 0
 * when NOTIFY_SOCKET is unset or empty, -EAFNOSUPPORT for an address that
 * is neither a path nor '@' (vsock), -ENAMETOOLONG, or the -errno of
 * socket/sendto. Any thread; a blocking call, but a datagram socket does
 * not wait on a slow reader (the kernel refuses with -EAGAIN instead).
 */
int notify_send(const char *msg);

#endif
