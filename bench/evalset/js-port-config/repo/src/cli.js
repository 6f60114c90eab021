#!/usr/bin/env node
'use strict';
const { loadConfig } = require('./config');

function main(argv, log = console.error) {
  let config;
  try {
    config = loadConfig(argv);
  } catch (e) {
    log(`devserve: ${e.message}`);
    return 2;
  }
  log(`devserve: serving on http://${config.host}:${config.port}/`);
  return 0;
}

if (require.main === module) process.exitCode = main(process.argv.slice(2));

module.exports = { main };
