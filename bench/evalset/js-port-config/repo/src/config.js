'use strict';
const { parseArgs } = require('./args');
const { checkPort, checkHost } = require('./validate');

const DEFAULTS = { host: '127.0.0.1', port: 3000, open: false };

function loadConfig(argv) {
  const config = { ...DEFAULTS, ...parseArgs(argv) };
  checkHost(config.host);
  checkPort(config.port);
  return config;
}

module.exports = { loadConfig, DEFAULTS };
