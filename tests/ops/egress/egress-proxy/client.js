// tests/ops/egress/egress-proxy/client.js: what an install script might do,
// run inside a Phase A container by test_egress_proxy.sh. Prints one line:
// the outcome ("status 200", "error ECONNRESET", "sent", ...). Modes:
//   http IP HOST              GET http://IP/ with Host: HOST (no proxy)
//   tls IP SNI                TLS to IP:443 with SNI (none when "-"), then GET /
//   proxy-http PROXY HOST     GET http://HOST/ through the explicit proxy
//   proxy-connect PROXY HOST  CONNECT HOST:443 through the explicit proxy
//   tcp IP PORT               a TCP connection
//   udp IP PORT               one UDP datagram
//   dns IP NAME               an A query to the resolver IP
//   lookup NAME               the system resolver (Docker's embedded DNS)
'use strict';
const net = require('net'), tls = require('tls'), http = require('http'), dgram = require('dgram'), dns = require('dns');
const [mode, a, b] = process.argv.slice(2);
const done = (s) => { console.log(s); process.exit(0); };
setTimeout(() => done('timeout'), 5000);
const fail = (e) => done('error ' + (e.code || e.message));
const get = (opts) => http.get(opts, (r) => { let n = 0; r.on('data', (d) => { n += d.length; }); r.on('end', () => done('status ' + r.statusCode + ' bytes ' + n)); }).on('error', fail);
switch (mode) {
  case 'http': get({ host: a, port: 80, path: '/', headers: { Host: b } }); break;
  case 'proxy-http': { const [h, p] = a.split(':'); get({ host: h, port: +p, path: 'http://' + b + '/', headers: { Host: b } }); break; }
  case 'tls': {
    const o = { host: a, port: 443, rejectUnauthorized: false };
    if (b !== '-') o.servername = b;
    const s = tls.connect(o, () => s.write('GET / HTTP/1.0\r\nHost: ' + b + '\r\n\r\n'));
    let buf = '';
    s.on('data', (d) => { buf += d; });
    s.on('end', () => done(buf ? 'status ' + buf.split(' ')[1] : 'closed'));
    s.on('error', fail);
    break;
  }
  case 'proxy-connect': {
    const [h, p] = a.split(':');
    http.request({ host: h, port: +p, method: 'CONNECT', path: b + ':443' }).on('connect', (r) => done('status ' + r.statusCode))
      .on('response', (r) => done('status ' + r.statusCode)).on('error', fail).end();
    break;
  }
  case 'tcp': { const s = net.connect(+b, a, () => done('connected')); s.on('error', fail); break; }
  case 'udp': { const s = dgram.createSocket('udp4'); s.send('kiwi', +b, a, (e) => (e ? fail(e) : done('sent'))); break; }
  case 'dns': { const r = new dns.Resolver({ timeout: 1500, tries: 1 }); r.setServers([a]); r.resolve4(b, (e, x) => (e ? fail(e) : done('answer ' + x))); break; }
  case 'lookup': dns.lookup(a, (e, x) => (e ? fail(e) : done('answer ' + x))); break;
  default: done('unknown mode ' + mode);
}
