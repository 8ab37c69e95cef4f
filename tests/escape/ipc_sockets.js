// T9: host IPC endpoints (Node version of ipc_sockets.py). argv: NAME... (paths or '@abstract')
'use strict';
const net = require('net');

const uid = process.getuid();
const WELL_KNOWN = [
  '/run/dbus/system_bus_socket', '/var/run/dbus/system_bus_socket', `/run/user/${uid}/bus`,
  '/run/user/0/bus', '/run/user/1000/bus', `/run/user/${uid}/wayland-0`, '/tmp/.X11-unix/X0',
  '/run/systemd/private', '/var/run/docker.sock', '/run/docker.sock',
  '@/tmp/.X11-unix/X0', '@/tmp/dbus-abesc', '@/org/freedesktop/systemd1',
];
const ENV_VARS = ['SSH_AUTH_SOCK', 'DBUS_SESSION_BUS_ADDRESS', 'DBUS_SYSTEM_BUS_ADDRESS',
                  'DISPLAY', 'WAYLAND_DISPLAY', 'XDG_RUNTIME_DIR', 'XAUTHORITY', 'DOCKER_HOST'];

function out(tag, what, detail) {
  console.log(`${tag} ${what}${detail ? ' ' + detail : ''}`);
}
const label = (n) => 'connect-' + (n.startsWith('@') ? 'abstract' + n.slice(1) : n)
  .replace(/\//g, '_');

function tryConnect(name) {
  return new Promise((resolve) => {
    const path = name.startsWith('@') ? '\0' + name.slice(1) : name;
    const s = net.connect({ path });
    const t = setTimeout(() => { s.destroy(); resolve('ETIMEDOUT'); }, 3000);
    s.on('connect', () => { clearTimeout(t); s.destroy(); resolve(null); });
    s.on('error', (e) => { clearTimeout(t); resolve(e.code || String(e)); });
  });
}
(async () => {
  for (const name of [...process.argv.slice(2), ...WELL_KNOWN]) {
    const err = await tryConnect(name);
    out(err ? 'CONTAINED' : 'ESCAPED', label(name) + '-stream', err || 'connected');
  }
  for (const v of ENV_VARS) {
    out(v in process.env ? 'ESCAPED' : 'CONTAINED', 'env-' + v, process.env[v] || 'unset');
  }
  console.log('DONE ipc_sockets');
})();
