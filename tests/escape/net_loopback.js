// T11: the network, host loopback included (Node version of net_loopback.py).
// argv: TCPPORT UDPPORT. Only 127.0.0.1/::1 are addressed; names are only resolved.
'use strict';
const dgram = require('dgram');
const dns = require('dns');
const fs = require('fs');
const net = require('net');
const [TCP, UDP] = process.argv.slice(2).map(Number);

function out(tag, what, detail) {
  console.log(`${tag} ${what}${detail ? ' ' + detail : ''}`);
}
function tcp(what, host, port) {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    const t = setTimeout(() => { s.destroy(); out('CONTAINED', what, 'ETIMEDOUT'); resolve(); }, 3000);
    s.on('connect', () => { clearTimeout(t); s.destroy(); out('ESCAPED', what, 'connected'); resolve(); });
    s.on('error', (e) => { clearTimeout(t); out('CONTAINED', what, e.code); resolve(); });
  });
}
function udp(what, type, host, port) {
  return new Promise((resolve) => {
    const s = dgram.createSocket(type);
    const done = (tag, d) => { clearTimeout(t); s.close(); out(tag, what, d); resolve(); };
    const t = setTimeout(() => done('CONTAINED', 'no-reply'), 1000);
    s.on('message', () => done('ESCAPED', 'got a reply'));
    s.on('error', (e) => done('CONTAINED', e.code));
    s.connect(port, host, () => s.send('abesc udp probe'));
  });
}
function lookup(name) {
  return new Promise((resolve) => {
    dns.lookup(name, (err, addr) => {
      out(err ? 'CONTAINED' : 'ESCAPED', 'dns-lookup-' + name, err ? err.code : addr);
      dns.resolve4(name, (err2, a2) => {
        out(err2 ? 'CONTAINED' : 'ESCAPED', 'dns-resolve-' + name, err2 ? err2.code : a2.join(','));
        resolve();
      });
    });
  });
}
(async () => {
  await tcp('tcp-host-listener', '127.0.0.1', TCP);
  await tcp('tcp-localhost-name', 'localhost', TCP);
  await tcp('tcp6-host-listener', '::1', TCP);
  await tcp('tcp-host-ssh', '127.0.0.1', 22);
  await udp('udp-host-listener', 'udp4', '127.0.0.1', UDP);
  await udp('udp6-host-listener', 'udp6', '::1', UDP);
  await udp('udp-dns-127.0.0.1', 'udp4', '127.0.0.1', 53);
  for (const n of ['example.com', 'pypi.org']) await lookup(n);
  const ifs = fs.readFileSync('/proc/net/dev', 'utf8').trim().split('\n').slice(2)
    .map((l) => l.split(':')[0].trim());
  out(ifs.join(',') === 'lo' ? 'CONTAINED' : 'ESCAPED', 'interfaces', ifs.join(','));
  const seen = ['/proc/net/tcp', '/proc/net/tcp6'].filter((f) => fs.readFileSync(f, 'utf8')
    .split('\n').slice(1).some((l) => l.trim() && parseInt(l.trim().split(/\s+/)[1].split(':')[1], 16) === TCP));
  out(seen.length ? 'ESCAPED' : 'CONTAINED', 'host-listener-invisible', seen.join(',') || 'absent');
  console.log('DONE net_loopback');
})();
