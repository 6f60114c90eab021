'use strict';

function checkPort(port) {
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new Error(`invalid port: ${port}`);
  }
}

function checkHost(host) {
  if (typeof host !== 'string' || host.length === 0 || /\s/.test(host)) {
    throw new Error(`invalid host: ${host}`);
  }
}

module.exports = { checkPort, checkHost };
