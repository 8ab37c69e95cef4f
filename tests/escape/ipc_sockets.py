# T9: host IPC endpoints: ssh-agent, D-Bus, X11, Wayland, docker, systemd, and abstract unix
# sockets. argv: NAME... where NAME is a host socket path or '@abstract' that the harness is
# listening on (it logs every connection), plus the well-known paths below. No connect may
# succeed, and the variables that would point at them must be gone.
import errno
import os
import socket
import sys

WELL_KNOWN = [
    "/run/dbus/system_bus_socket", "/var/run/dbus/system_bus_socket",
    "/run/user/%d/bus" % os.getuid(), "/run/user/0/bus", "/run/user/1000/bus",
    "/run/user/%d/wayland-0" % os.getuid(), "/tmp/.X11-unix/X0", "/tmp/.X11-unix/X1",
    "/run/systemd/private", "/run/systemd/journal/stdout", "/var/run/docker.sock",
    "/run/docker.sock", "/run/containerd/containerd.sock", "/run/podman/podman.sock",
    "@/tmp/.X11-unix/X0", "@/tmp/.X11-unix/X1", "@/tmp/dbus-abesc", "@/org/freedesktop/systemd1",
]
ENV_VARS = ["SSH_AUTH_SOCK", "DBUS_SESSION_BUS_ADDRESS", "DBUS_SYSTEM_BUS_ADDRESS", "DISPLAY",
            "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "XAUTHORITY", "DOCKER_HOST", "GPG_AGENT_INFO"]


def en(e):
    return errno.errorcode.get(e, str(e))


def out(tag, what, detail=""):
    print("%s %s%s" % (tag, what, " " + detail if detail else ""), flush=True)


def label(name):
    return "connect-" + ("abstract" + name[1:] if name.startswith("@") else name).replace("/", "_")


for name in sys.argv[1:] + WELL_KNOWN:
    addr = b"\0" + name[1:].encode() if name.startswith("@") else name
    for kind, st in (("stream", socket.SOCK_STREAM), ("dgram", socket.SOCK_DGRAM)):
        s = socket.socket(socket.AF_UNIX, st)
        s.settimeout(3)
        try:
            s.connect(addr)
            out("ESCAPED", label(name) + "-" + kind, "connected")
        except OSError as e:
            out("CONTAINED", label(name) + "-" + kind, en(e.errno))
        finally:
            s.close()

for v in ENV_VARS:
    out("ESCAPED" if v in os.environ else "CONTAINED", "env-" + v,
        os.environ.get(v, "unset"))
print("DONE ipc_sockets", flush=True)
